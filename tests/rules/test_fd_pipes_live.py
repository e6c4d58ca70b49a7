"""Writes to a pipe through its descriptor's name (``/dev/fd/N``): bash's process substitution
``>(...)`` opens ``/dev/fd/63`` for writing, with ``O_CREAT``, and closes it at once.  The strace
parser once took the descriptor's table entry ``pipe:[N]`` for a file name (``/pipe:[N]``, outside
the workspace: a false ``scope-write-outside-workspace``); a pipe is no file of anybody's.  Its twin:
the same spelling reopening a real file outside the workspace is judged as that file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

if shutil.which("bash") is None:
    pytest.skip("bash not installed", allow_module_level=True)


def test_process_substitution_and_pipes_by_name_are_quiet(live: Any, capture_backend: str) -> None:
    r = live(
        """bash -c '
echo x > >(cat > /dev/null)
cat <(echo hi) > /dev/null
echo y | cat /proc/self/fd/0 > /dev/null
echo z | tee /dev/fd/2 2> /dev/null > /dev/null
exec 63> >(cat > /dev/null); echo w > /dev/fd/63; exec 63>&-
' && sh -c 'echo x > /dev/stdout' | cat > /dev/null""",
        backend=capture_backend,
    )
    assert r.exit_code == 0
    assert not r.ids("low"), sorted((a.rule_id, a.message) for a in r.alerts)


def test_twin_the_same_spelling_reopening_a_file_outside_the_workspace_is_judged(live: Any, capture_backend: str,
                                                                               tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "outside.txt").write_text("before\n")
    r = live("""bash -c 'exec 63< "$HOME/outside.txt"; echo x >> /dev/fd/63; exec 63<&-'""",
             backend=capture_backend)
    assert r.exit_code == 0
    written = r.fired("scope-write-outside-workspace")
    assert written, sorted((a.rule_id, a.message) for a in r.alerts)
    assert all("outside.txt" in a.message for a in written), [a.message for a in written]
