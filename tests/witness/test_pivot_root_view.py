"""A root agent reads a secret after making a directory above it its root (``unshare -m``, ``pivot_root``).

In a mount namespace of its own whose root is ``tmp``, the agent names ``tmp/home/.ssh/id_rsa``
``/home/.ssh/id_rsa``, and both backends record that name as it sees it: the eBPF program's walks
stop at the process's root, and ``strace -yy`` names a file of a mount the tracer cannot reach from
its own root the way the namespace does.  The secret is still known by device and inode: under
eBPF from the opened descriptor, under strace (once the run entered a mount namespace of its own)
by a ``stat`` through the process's ``/proc/PID/root``, so the read is ``cred-secret-read`` on the
secret's own path.  The ``unshare``, the mounts and the ``pivot_root`` are ``sys-namespace-change``.  The benign twin
reads a plain file the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

PROG = Path(__file__).resolve().parent / "progs" / "pivot_read.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pivot_root needs root")


def _pivot_read(setup: Any, name: str, until: str | None = None) -> tuple[set[str], str]:
    """Run the agent; with ``until``, the agent stays (at most 10 s) after its read until spyglass
    prints an alert line naming that rule: under strace the file is looked at through the reader's
    ``/proc/PID/root``, which goes when it exits (a reader that exits at once is a known gap,
    docs/threat-model.md), and a loaded machine may parse its open after that."""
    new_root = Path(setup.env["HOME"]).parent  # HOME is new_root/home
    release = new_root / "release"
    cmd = [setup.python, "-m", "spyglass", "run", "--backend", setup.backend, "--store", str(setup.store), "--",
           "/bin/sh", "-c", f"{setup.python} {PROG} {new_root} {name} {'/release' if until else ''}"]  # its root's name
    proc = subprocess.Popen(cmd, cwd=setup.ws, env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    err: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if until and until in line:
                release.touch()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    reader.join(timeout=10)
    stderr = "".join(err)
    if "unshare failed" in stderr or "pivot_root failed" in stderr:
        pytest.skip(f"cannot pivot_root here: {stderr[-300:]}")
    assert proc.returncode == 0, stderr
    return {str(a["rule_id"]) for a in setup.alerts()}, out


def test_a_secret_read_after_pivot_root_is_a_secret_read(setup: Any) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    rules, out = _pivot_read(setup, "/home/.ssh/id_rsa", until="cred-secret-read")
    assert "PRIVATE KEY" in out  # the attack read the secret
    assert {"sys-namespace-change", "cred-secret-read"} <= rules, rules
    (read,) = [a for a in setup.alerts() if a["rule_id"] == "cred-secret-read"]
    assert read["message"].endswith(f"read secret {ssh / 'id_rsa'}"), read


def test_benign_twin_a_plain_file_read_after_pivot_root_is_no_secret_read(setup: Any) -> None:
    (Path(setup.env["HOME"]) / "notes.txt").write_text("hello\n")
    rules, out = _pivot_read(setup, "/home/notes.txt")
    assert "hello" in out
    assert "cred-secret-read" not in rules, rules


def _pivot_events(setup: Any) -> list[dict[str, Any]]:
    res = setup.spyglass("events", "latest", "--type", "sys.sensitive", "--store", str(setup.store),
                         "--format", "json")
    assert res.returncode == 0, res.stderr
    evs = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return [e for e in evs if e.get("syscall") == "pivot_root"]


def test_pivot_root_itself_is_recorded_and_a_namespace_change(setup: Any) -> None:
    """``pivot_root`` was not recorded (the ``unshare`` and the mounts before it were): it is now a
    ``sys.sensitive`` event worded alike by both backends, and ``sys-namespace-change``."""
    (Path(setup.env["HOME"]) / "notes.txt").write_text("hello\n")
    rules, out = _pivot_read(setup, "/home/notes.txt")
    assert "hello" in out and "sys-namespace-change" in rules
    (ev,) = _pivot_events(setup)
    assert ev["detail"] == "pivot_root . old" and ev.get("ok", True), ev
    msgs = [str(a["message"]) for a in setup.alerts() if a["rule_id"] == "sys-namespace-change"]
    assert any("pivot_root . old" in m for m in msgs), msgs


def test_benign_twin_the_sandbox_s_own_pivot_root_is_no_alert(setup: Any) -> None:
    """bubblewrap makes the sandbox's root with ``pivot_root``: the launcher's calls are the sandbox's,
    not the agent's."""
    res = setup.run("true", "--sandbox")
    if "sandbox" in res.stderr and res.returncode == 5:
        pytest.skip(f"no sandbox here: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0, res.stderr
    assert "sys-namespace-change" not in {str(a["rule_id"]) for a in setup.alerts()}, res.stderr
