"""A run that could not start is recorded as failed, with why."""

from __future__ import annotations

import os
from pathlib import Path

from spyglass.store import Store
from spyglass.store.failed import find_program, record_failed_run


def test_find_program_looks_where_exec_would(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    env = {"PATH": str(tool.parent)}
    assert find_program("tool", str(tmp_path), env) is None  # not executable yet
    os.chmod(tool, 0o755)
    assert find_program("tool", str(tmp_path), env) == str(tool)
    assert find_program("./bin/tool", str(tmp_path), {}) == os.path.join(tmp_path, "./bin/tool")
    assert find_program("nosuch", str(tmp_path), env) is None


def test_a_failed_run_is_recorded_and_verifies(tmp_path: Path) -> None:
    from spyglass.evidence.verify import verify_run

    store = Store(tmp_path / "s", create=True)
    meta = record_failed_run(store, ["nosuch", "-x"], str(tmp_path), reason="nosuch: command not found",
                             exit_code=127)
    assert (meta.status, meta.exit_code, meta.extra["failure"]) == ("failed", 127, "nosuch: command not found")
    assert store.index.rows()[0]["status"] == "failed"
    assert verify_run(store.run_dir(meta.id), meta=meta,
                      anchors=[("index", store.index.anchor(meta.id) or "")]).status == "verified"
