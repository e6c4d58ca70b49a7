"""The runner records an operator's Ctrl-C or kill as an `agent.intervention` event."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")


@pytest.mark.parametrize("how", ["ctrl-c", "kill"])
def test_operator_interrupt_or_kill_is_an_intervention_event(tmp_path: Path, how: str) -> None:
    store = tmp_path / "s"
    marker = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spyglass", "run", "-q", "--", "sh", "-c", f"echo x > {marker}; exec sleep 60"],
        cwd=tmp_path,
        env={**os.environ, "SPYGLASS_STORE": str(store)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 60
        seen = False
        while time.monotonic() < deadline and not seen:
            files = list((store / "runs").glob("*/events.jsonl")) if (store / "runs").exists() else []
            seen = bool(files) and b"sleep" in files[0].read_bytes()
            if not seen:
                time.sleep(0.1)
        assert seen, "the run never started"
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # the terminal sends it to the whole foreground group
        else:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    st = Store(store)
    reader = RunReader(st, st.resolve("latest"))
    assert reader.meta.status == "interrupted"
    found = [e for e in reader.events() if e.type == "agent.intervention"]
    assert len(found) == 1, found
    ev = found[0]
    assert ev.actor == "operator" and ev.detail is not None
    if how == "ctrl-c":
        assert ev.action == "interrupt" and ev.detail.startswith("SIGINT to spyglass (Ctrl-C) by ")
        assert ev.detail.endswith(": passed on to the agent's tree (killed after 5 s if still running)")
    else:
        assert ev.action == "terminate"
        assert ev.detail.endswith(": passed on to the agent's tree (killed after 5 s if still running)")
