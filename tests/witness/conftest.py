"""Helpers for the attack tests: the real `spyglass` CLI in a subprocess, a workspace and a store.

Every test taking ``setup`` is played under each capture backend (strace, eBPF; skipped with the
reason where one cannot run); a test or module about something else than capture (policy files,
store faults) says ``@pytest.mark.backends("auto")`` and runs once, under the default backend."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable

#: ``judged N``: make the marker file ``sync-N-done`` in the workspace and wait (bounded: 60 s) until
#: its event is on disk; the script's own text (in its ``execve`` event) never holds that name.  Events
#: are judged in order, one at a time, after the writer wrote them: once the marker's event is in the
#: run's ``events.jsonl``, every earlier event has been judged (:meth:`Setup.play` defines it)
JUDGED = r"""
WS=$PWD
judged() {
  touch "$WS/sync-$1-done"; n=0
  until grep -qs "[s]ync-$1-done" "$STORE"/runs/*/events.jsonl; do
    n=$((n+1)); [ $n -gt 1200 ] && { echo "not judged: $1" >&2; exit 9; }; sleep 0.05
  done
}
"""


@dataclass
class Setup:
    ws: Path
    store: Path
    env: dict[str, str]
    python: str = PY
    backend: str = "auto"

    def spyglass(self, *args: str, timeout: float = 120, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "spyglass", *args], cwd=cwd or self.ws, env=env or self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def run(self, script: str, *extra: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``spyglass run`` of a shell script in the workspace."""
        return self.spyglass("run", "--backend", self.backend, "--store", str(store or self.store), *extra, "--",
                             "/bin/sh", "-c", script)

    def json(self, *args: str, store: Path | None = None) -> Any:
        res = self.spyglass(*args, "--store", str(store or self.store), "--format", "json")
        assert res.returncode in (0, 3, 4), res.stderr
        return json.loads(res.stdout)

    def alerts(self, store: Path | None = None) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = self.json("alerts", "latest", store=store)
        return data

    def tamper(self) -> list[str]:
        """The messages of the latest run's ``witness-tamper`` alerts."""
        return [str(a["message"]) for a in self.alerts() if a["rule_id"] == "witness-tamper"]

    def play(self, script: str, *defs: str) -> subprocess.CompletedProcess[str]:
        """``spyglass run`` of ``script`` once the store and its index exist (a first run), with
        ``$STORE`` set, the ``judged`` function of :data:`JUDGED` and ``defs`` (more shell functions)
        defined; the run must succeed."""
        self.run("true")
        res = self.run("\n".join([f"STORE={self.store}", JUDGED, *defs, script]))
        assert res.returncode == 0, res.stderr
        return res


@pytest.fixture
def setup(tmp_path: Path, capture_backend: str) -> Setup:
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(HOME=str(home), LANG="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
    env.pop("SPYGLASS_STORE", None)
    return Setup(ws=ws, store=tmp_path / "store", env=env, backend=capture_backend)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (the store's faults: a full disk), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=False).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def secret_on_small_fs(setup: Setup, small_fs: Path) -> tuple[Path, Path]:
    """A store and a workspace on the small tmpfs, and a secret in the run's home (``~/.ssh/id_rsa``)
    for the agent to read: (store, workspace)."""
    store, ws = small_fs / "store", small_fs / "ws"
    ws.mkdir()
    home = Path(setup.env["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    return store, ws


# a module's byte-code forged with its source's time and size in the header: when it runs, it leaves
# a marker (tests/witness/test_imports*.py)
FORGE = r"""
import importlib._bootstrap_external as be, os, sys
src, cached, marker = sys.argv[1:4]
st = os.stat(src)
evil = f"open({marker!r}, 'w').write('ran')\n"
open(cached, "wb").write(be._code_to_timestamp_pyc(compile(evil, src, "exec"), st.st_mtime, st.st_size))
"""


@pytest.fixture
def forger(setup: Setup) -> tuple[Path, Path]:
    """The forging script (``python forge.py SOURCE CACHED MARKER``) and the marker the forged
    byte-code leaves when it runs."""
    forge = setup.ws.parent / "forge.py"
    forge.write_text(FORGE)
    return forge, setup.ws.parent / "marker"


@pytest.fixture
def next_spyglass(setup: Setup) -> Callable[[], None]:
    """Start the next spyglass command (``ls``), which must start."""

    def start() -> None:
        res = setup.spyglass("ls", "--store", str(setup.store))
        assert res.returncode == 0, res.stderr

    return start
