"""An empty workspace and the store's sealed hashes (spyglass/evidence/workspace.py, ``_made_files``).

A run whose workspace is empty takes no hash from the store: it opens the sealed entries only at
its end, and only if the capture saw it change something in the workspace (then the next run takes
those files' hashes unread, as after any run).  A run that changed nothing there leaves the store as
it was.  Either way the run's own evidence is the whole after-listing: a file made in the workspace
with no event that says so is still in it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evidence_helpers import WS_MARGIN_NS, ev
from evidence_helpers import run_sink as _run
from evidence_helpers import sealed_file as _sealed
from evidence_helpers import settled as _settled

from spyglass.evidence.workspace import load_workspace_changes
from spyglass.store import Store

MARGIN_NS = WS_MARGIN_NS


def _make(ws: Path, names: list[str]) -> Callable[[], None]:
    def make() -> None:
        for name in names:
            (ws / name).write_text(f"{name}\n")
        _settled([ws / n for n in names], MARGIN_NS)  # old enough at the end to be kept

    return make


def test_an_empty_workspace_left_empty_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(tmp_path / "store", create=True)
    sink, run_dir = _run(store, ws)
    assert sink._cache is None and not _sealed(tmp_path / "store", ws).exists()
    ch = load_workspace_changes(run_dir)
    assert ch is not None and not ch.changed and ch.complete


def test_an_empty_workspace_the_run_fills_is_sealed_for_the_next_run(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    names = ["a.txt", "b.txt", "c.txt"]
    store = Store(tmp_path / "store", create=True)
    first, run_dir = _run(store, ws, _make(ws, names),
                          lambda: [ev("file.create", 100, path=str(ws / n), flags="O_WRONLY|O_CREAT") for n in names])
    ch = load_workspace_changes(run_dir)
    assert ch is not None and sorted(c.path for c in ch.added) == names
    assert first._cache is not None and _sealed(tmp_path / "store", ws).exists()
    second, _ = _run(store, ws)
    assert second.before is not None and second.before.cached == len(names)  # not one file read again


def test_files_made_unseen_in_an_empty_workspace_are_in_the_evidence_all_the_same(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(tmp_path / "store", create=True)
    sink, run_dir = _run(store, ws, _make(ws, ["unseen.txt"]))  # no event says so (io_uring, say)
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [c.path for c in ch.added] == ["unseen.txt"] and ch.complete
    assert sink._cache is None  # only the next run's hashes are lost: it reads the file
    second, _ = _run(store, ws)
    assert second.before is not None and second.before.cached == 0
    assert [f.path for f in second.before.files] == [str(ws / "unseen.txt")]
