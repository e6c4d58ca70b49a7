"""eBPF runs as a user sees them: the backend and its reason in `show`, losses in `show` and `verify`.

Needs root and a loadable program (skipped with the reason elsewhere).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.store import Store

pytestmark = pytest.mark.usefixtures("needs_ebpf")  # root and a loadable program


def _spyglass(store: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPYGLASS_STORE": str(store)}
    return subprocess.run(
        [sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_auto_run_records_the_backend_and_why(tmp_path: Path) -> None:
    store = tmp_path / "s"
    res = _spyglass(store, "run", "-q", "--", "sh", "-c", "echo hi > out.txt; exit 3", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    show = _spyglass(store, "show", "--format", "json", cwd=tmp_path)
    run = json.loads(show.stdout)["run"]
    assert run["backend"] == "ebpf"
    assert run["extra"]["backend_reason"].startswith("auto: eBPF")
    assert run["capture"]["lost"] == 0
    text = _spyglass(store, "show", cwd=tmp_path).stdout
    assert "backend ebpf" in text and "auto: eBPF" in text and "LOST" not in text
    assert str(tmp_path / "out.txt") in text


def test_losses_are_shown_and_verified(tmp_path: Path) -> None:
    from spyglass.capture.ebpf import EbpfBackend
    from spyglass.session.record import RunRequest, record

    store = Store(tmp_path / "s", create=True)
    script = "import os\nfor i in range(20000): os.close(os.open('f', os.O_WRONLY | os.O_CREAT))"
    out = record(
        RunRequest(
            argv=[sys.executable, "-c", script], cwd=str(tmp_path),
            backend_options={"ring_bytes": 1 << 16, "stall_reader": -1},
        ),
        EbpfBackend(), store,
    )  # fmt: skip
    assert out.meta.capture["lost"] > 0
    text = _spyglass(tmp_path / "s", "show", cwd=tmp_path).stdout
    assert "LOST" in text and "file" in text
    verify = _spyglass(tmp_path / "s", "verify", "--format", "json", cwd=tmp_path)
    assert verify.returncode == 0
    notes = json.loads(verify.stdout)["notes"]
    assert any("lost" in n and "gaps" in n for n in notes), notes
