"""The after-walk's kept hashes against an agent that writes a workspace file through a hard
link outside the workspace made before the run (the capture names the link, not the workspace
file, so the file is not among those "seen changed"; a link made during the run is) and puts
its size and mtime back: the kernel's ctime still says it changed.  A real run under the eBPF
backend (root; skipped with the reason elsewhere), and a benign twin that only reads through
such a link.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from spyglass.evidence.workspace import WorkspaceEvidence, load_workspace_changes
from spyglass.store import Store

pytestmark = pytest.mark.usefixtures("needs_ebpf")

MARGIN_NS = 50_000_000

#: rewrites the workspace file through its outside link with the same size, puts its times back
AGENT = """
import os, sys
path, link, text, write = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
st = os.stat(path)
if write:
    with open(link, "r+b") as f:
        f.write(text.encode())
    os.utime(link, ns=(st.st_atime_ns, st.st_mtime_ns))
else:
    open(link, "rb").read()
after = os.stat(path)
assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
"""


def _run(tmp_path: Path, write: bool) -> tuple[WorkspaceEvidence, Path, str]:
    from spyglass.capture import get_backend
    from spyglass.session.record import RunRequest, record

    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in (("a.txt", "good\n"), ("b.txt", "same\n")):
        (ws / name).write_text(text)
    os.link(ws / "a.txt", tmp_path / "h")  # before the run (an earlier run, or the user)
    newest = max(os.stat(ws / n).st_ctime_ns for n in ("a.txt", "b.txt"))
    deadline = time.monotonic() + 30
    while time.time_ns() <= newest + MARGIN_NS + 1_000_000:  # settled: the hashes can be kept
        assert time.monotonic() < deadline, "the clock does not move"
        time.sleep(0.01)
    (tmp_path / "agent.py").write_text(AGENT)
    store = Store(tmp_path / "store", create=True)
    req = RunRequest(argv=[sys.executable, str(tmp_path / "agent.py"), str(ws / "a.txt"), str(tmp_path / "h"),
                           "evil\n", "1" if write else "0"], cwd=str(ws), workspace=[str(ws)])
    sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS, background_hash=False)
    outcome = record(req, get_backend("ebpf"), store, [sink])
    assert outcome.capture.exit_code == 0
    return sink, store.run_dir(outcome.meta.id), str(tmp_path / "h")


def test_a_write_through_a_hard_link_outside_the_workspace_with_times_put_back_is_seen(tmp_path: Path) -> None:
    sink, run_dir, link = _run(tmp_path, write=True)
    assert sink._outside is not None and not any(p.endswith("/ws/a.txt") for p in sink._outside.inside_paths)
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [(c.path, c.what) for c in ch.modified] == [("a.txt", ["content"])]
    assert [w.path for w in ch.outside_writes] == [link]  # and the write through the link is named
    assert sink._memo is not None and sink._memo.reused == 1  # b.txt kept its hash


def test_benign_twin_a_read_through_a_hard_link_changes_nothing(tmp_path: Path) -> None:
    sink, run_dir, _link = _run(tmp_path, write=False)
    ch = load_workspace_changes(run_dir)
    assert ch is not None and ch.modified == [] and ch.added == [] and ch.removed == []
    assert sink._memo is not None and sink._memo.reused == 2
