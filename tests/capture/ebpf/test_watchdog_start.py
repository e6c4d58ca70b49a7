"""The eBPF watchdog's own start: the interpreter alone (``-I -S``), no site-packages, no package.

It starts next to every eBPF run on a machine of two cores, so what it imports before it
watches is taken from the run.  Its work (spyglass stopped, spyglass killed) is tested
for real in tests/capture/test_blinding.py; here the script runs as :class:`Watchdog`
starts it (no eBPF program needed: it only watches the socket until ``done``).
"""

from __future__ import annotations

import socket
import subprocess
import sys

from spyglass.capture.ebpf import watchdog

#: what the script must not import to watch: the package, site-packages and the heavier stdlib
NOT_AT_START = {"site", "json", "socket", "pathlib", "typing", "importlib.util", "signal", "enum", "msgspec",
                "spyglass"}


def test_the_watchdog_starts_lean_and_ends_on_done() -> None:
    import marshal

    mine, theirs = socket.socketpair()
    cfg = {"sock": theirs.fileno(), "monitor": 1, "root": 0}
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-X", "importtime", watchdog.__file__, marshal.dumps(cfg).hex()],
        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    theirs.close()
    try:
        mine.sendall(b"done\n")  # waits in the socket until the script reads it
        _, err = proc.communicate(timeout=60)
    finally:
        mine.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    loaded = {line.split("|")[-1].strip() for line in err.splitlines() if line.startswith("import time:")}
    assert "select" in loaded  # the import log was read
    assert not loaded & NOT_AT_START, sorted(loaded & NOT_AT_START)
    assert not any(m.startswith("spyglass.") for m in loaded), sorted(loaded)


def test_the_watchdog_is_spawned_with_the_interpreter_alone() -> None:
    """:class:`Watchdog` starts the script with ``-I -S`` and ends it with ``done``."""
    w = watchdog.Watchdog({"root": 0}, [])
    try:
        assert w.pid is not None, w.error
        assert w.proc.args[1:3] == ["-I", "-S"]
        assert w.died() is None or w.died() == 0
    finally:
        w.close()
    assert w.proc.wait(timeout=60) == 0
