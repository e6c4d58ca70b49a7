"""A hidden tree inside another hidden tree: the store kept in the workspace (`cd ws && spyglass run --sandbox`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spyglass.sandbox import bwrap as bw

from .sandbox_helpers import needs_bwrap, needs_strace


def test_parents_are_hidden_first_and_children_skipped(tmp_path: Path) -> None:
    store = tmp_path / "ws" / ".spyglass"
    work = store / "sandbox" / "run-1"
    work.mkdir(parents=True)
    mounts = bw.plan_mounts(workspace=[str(tmp_path / "ws")], real_home=str(tmp_path), decoy_home=str(tmp_path),
                            private_tmp=str(tmp_path / "t"), hidden=[str(work), str(store)])
    hidden = [m.dest for m in mounts if m.role == "hidden"]
    assert hidden == [os.path.realpath(store)]  # the work dir is already out of sight under it


@needs_strace
@needs_bwrap
def test_sandboxed_run_with_the_store_in_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "SPYGLASS_STORE": str(ws / ".spyglass")}
    script = "echo inside: $(ls -A .spyglass | wc -l); echo ran > out.txt"
    proc = subprocess.run([sys.executable, "-m", "spyglass", "run", "-q", "--sandbox", "--", "sh", "-c", script],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (ws / "out.txt").read_text() == "ran\n"
    # the store is in the workspace on the host (it has runs), but empty inside the sandbox
    assert "inside: 0" in proc.stdout, proc.stdout
    assert any((ws / ".spyglass" / "runs").iterdir())
