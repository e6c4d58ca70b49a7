"""``spyglass run`` as its own process leaves with ``os._exit`` once the run is written
(spyglass/cli/launch.py ``leave``): the live OTLP export must be all sent by then, under each
capture backend, for a run that exits with a code of its own and for one interrupted (Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

from .conftest import Receiver


def _spyglass(tmp_path: Path, backend: str, url: str, protocol: str, script: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "s"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    env.pop("SPYGLASS_POLICY", None)
    return subprocess.Popen([sys.executable, "-m", "spyglass", "run", "--backend", backend, "--otlp", url, "--",
                             "sh", "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("how", ["exit", "interrupt"])
def test_the_live_export_is_all_sent_when_spyglass_run_leaves(
    tmp_path: Path, otlp: Receiver, capture_backend: str, how: str
) -> None:
    script = "cat /etc/hostname >/dev/null; exit 3" if how == "exit" else "touch started; exec sleep 60"
    proc = _spyglass(tmp_path, capture_backend, otlp.url, otlp.protocol, script)
    if how == "interrupt":
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the agent did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (3 if how == "exit" else 128 + signal.SIGINT), err
    store = Store(tmp_path / "s")
    meta = RunReader(store, store.resolve("latest")).meta
    sent = meta.extra["otlp"]
    assert sent["complete"] is True, sent
    assert otlp.got.wait(lambda g: len(g.spans) == sent["spans"]["emitted"]
                         and len(g.logs) == sent["logs"]["emitted"]), sent
    assert sent["spans"]["emitted"] > 0
