"""Workspace manifests before/after a run and their diff, through the pipeline sink."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from evidence_helpers import ev, record_events, write

from spyglass.events import Event
from spyglass.evidence.changes import decode_changes
from spyglass.evidence.manifest import ManifestOptions, build_manifest, decode_manifest
from spyglass.evidence.workspace import WorkspaceEvidence, load_workspace_changes
from spyglass.store import RunReader, Store


def _tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


def _during(action: Callable[[], None], events: list[Event]) -> Iterator[Event]:
    """Events of a run whose 'agent' does ``action`` on the disk while it runs."""
    yield ev("process.start", 100)
    action()
    yield from events


def _record(
    tmp_path: Path, ws: Path, action: Callable[[], None], events: list[Event] | None = None, **sink_kw: object
) -> RunReader:
    store = Store(tmp_path / "store", create=True)
    sink_kw.setdefault("background_hash", False)  # the 'agent' acts at once: exact diffs need the hashes first
    sink = WorkspaceEvidence(**sink_kw)  # type: ignore[arg-type]
    return record_events(store, _during(action, events or []), workspace=[str(ws)], sinks=[sink])


def test_diff_of_two_modified_one_created_one_deleted_is_exact(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _tree(
        ws,
        {
            "a.py": "x = 1\ny = 2\n",
            "pkg/b.py": "def f():\n    return 1\n",
            "old.txt": "bye\n",
            "same.txt": "unchanged\n",
        },
    )

    def agent() -> None:
        (ws / "a.py").write_text("x = 1\ny = 3\n")
        (ws / "pkg/b.py").write_text("def f():\n    return 2\n")
        (ws / "new.py").write_text("print('new')\n")
        (ws / "old.txt").unlink()

    run = _record(tmp_path, ws, agent)
    ch = load_workspace_changes(run.dir)
    assert ch is not None and ch.complete
    assert [c.path for c in ch.added] == ["new.py"]
    assert [c.path for c in ch.removed] == ["old.txt"]
    assert [c.path for c in ch.modified] == ["a.py", "pkg/b.py"]
    assert all(c.what == ["content"] for c in ch.modified)
    assert ch.patch() == (
        "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
        "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+print('new')\n"
        "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        "--- a/pkg/b.py\n+++ b/pkg/b.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
    )
    evdir = run.dir / "evidence"
    assert (evdir / "changes.patch").read_text() == ch.patch()
    before = decode_manifest((evdir / "manifest-before.json").read_bytes())
    after = decode_manifest((evdir / "manifest-after.json").read_bytes())
    assert sorted(before.rel(f.path) for f in before.files) == ["a.py", "old.txt", "pkg/b.py", "same.txt"]
    assert sorted(after.rel(f.path) for f in after.files) == ["a.py", "new.py", "pkg/b.py", "same.txt"]
    a_after = after.by_path()[str(ws / "a.py")]
    assert a_after.size == 12 and a_after.mode == "0644" and len(a_after.sha256 or "") == 64
    assert run.meta.extra["workspace_changes"] == {
        "added": 1,
        "removed": 1,
        "modified": 2,
        "outside_writes": 0,
        "complete": True,
    }
    # the patch applies: the before tree plus the patch is the after tree
    if subprocess.run(["git", "--version"], capture_output=True).returncode == 0:
        check = tmp_path / "check"
        _tree(check, {"a.py": "x = 1\ny = 2\n", "pkg/b.py": "def f():\n    return 1\n", "old.txt": "bye\n"})
        subprocess.run(["git", "apply", str(evdir / "changes.patch")], cwd=check, check=True)
        assert (check / "a.py").read_text() == "x = 1\ny = 3\n" and not (check / "old.txt").exists()


def test_mode_symlink_binary_and_no_final_newline(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _tree(ws, {"run.sh": "echo hi\n", "blob.bin": b"\0\1\2", "note.txt": "a\nb"})
    os.symlink("note.txt", ws / "link")

    def agent() -> None:
        os.chmod(ws / "run.sh", 0o755)
        (ws / "blob.bin").write_bytes(b"\0\1\3")
        (ws / "note.txt").write_text("a\nc")
        os.unlink(ws / "link")
        os.symlink("run.sh", ws / "link")

    ch = load_workspace_changes(_record(tmp_path, ws, agent).dir)
    assert ch is not None
    mods = {c.path: c for c in ch.modified}
    assert mods["run.sh"].what == ["mode"] and mods["run.sh"].diff is None
    assert mods["blob.bin"].diff_note == "no diff: binary"
    assert mods["link"].what == ["target"]
    assert mods["note.txt"].diff is not None and "\\ No newline at end of file" in mods["note.txt"].diff


def test_excludes_gitignore_and_the_store_are_left_out(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _tree(
        ws,
        {
            ".gitignore": "build/\n*.log\n!keep.log\n",
            "src/m.py": "1\n",
            "build/out.o": "x",
            "a.log": "x",
            "keep.log": "x",
            ".git/objects/ab/cdef": "x",
            ".git/HEAD": "ref\n",
            "pkg/__pycache__/m.pyc": "x",
            "sub/.gitignore": "*.tmp\n",
            "sub/x.tmp": "x",
            "x.tmp": "x",
        },
    )
    store = ws / ".spyglass"

    def agent() -> None:
        (ws / "build/new.o").write_text("y")
        (ws / ".gitignore").write_text("build/\n*.log\n!keep.log\nsecret/\n")  # added rule not applied
        _tree(ws, {"secret/loot.txt": "x"})

    sink = WorkspaceEvidence(background_hash=False)
    run = record_events(Store(store, create=True), _during(agent, []), workspace=[str(ws)], sinks=[sink])
    assert sink.before is not None
    listed = sorted(sink.before.rel(f.path) for f in sink.before.files)
    assert listed == [".git/HEAD", ".gitignore", "keep.log", "src/m.py", "sub/.gitignore", "x.tmp"]
    assert sink.before.excluded[".gitignore"] == 3  # build/, a.log, sub/x.tmp
    assert "build/" in sink.before.pruned
    ch = load_workspace_changes(run.dir)
    assert ch is not None
    assert [c.path for c in ch.added] == ["secret/loot.txt"]
    assert [c.path for c in ch.modified] == [".gitignore"]


def test_bounded_tree_says_what_was_skipped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _tree(ws, {f"d{i}/f{j}.txt": "x" for i in range(3) for j in range(4)})
    m, _ = build_manifest([ws], ManifestOptions(max_files=5))
    assert not m.complete and len(m.files) == 5
    assert m.last_path == str(ws / "d1" / "f0.txt")
    assert any("stopped after 5 files" in n for n in m.notes)

    def agent() -> None:
        (ws / "d0" / "f0.txt").write_text("changed")
        (ws / "d2" / "f3.txt").write_text("changed beyond the limit")

    ch = load_workspace_changes(_record(tmp_path, ws, agent, max_files=5).dir)
    assert ch is not None and not ch.complete
    assert [c.path for c in ch.modified] == ["d0/f0.txt"]
    assert ch.added == [] and ch.removed == []
    assert any("compared only up to" in n for n in ch.notes)


def test_large_files_get_no_diff_and_outside_writes_are_listed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _tree(ws, {"big.txt": "a\n" * 100})

    def agent() -> None:
        (ws / "big.txt").write_text("b\n" * 100)

    events = [
        ev("process.exec", 100, argv=["sh", "agent.sh"]),
        write(100, "/etc/hosts"),
        write(100, "/etc/hosts"),
        write(100, "/dev/null"),
        write(100, f"{ws}/big.txt"),
    ]
    run = _record(tmp_path, ws, agent, events, max_diff_bytes=50)
    ch = load_workspace_changes(run.dir)
    assert ch is not None
    assert ch.modified[0].diff is None and "larger than 50 bytes" in (ch.modified[0].diff_note or "")
    (w,) = ch.outside_writes
    assert (w.path, w.count, w.seqs, w.commands) == ("/etc/hosts", 2, [3, 4], ["sh agent.sh"])


def test_changes_json_roundtrip_and_manifest_only_fallback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _tree(ws, {"a": "1\n"})
    run = _record(tmp_path, ws, lambda: (ws / "a").write_text("2\n"))
    evdir = run.dir / "evidence"
    stored = decode_changes((evdir / "changes.json").read_bytes())
    # the diff is stored once, in changes.patch; changes.json says how long it is there
    patch = (evdir / "changes.patch").read_bytes()
    assert stored.modified[0].diff is None and stored.modified[0].diff_bytes == len(patch) > 0
    loaded = load_workspace_changes(run.dir)
    assert loaded is not None and loaded.modified[0].diff == "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-1\n+2\n"
    (evdir / "changes.json").unlink()
    rebuilt = load_workspace_changes(run.dir)
    assert rebuilt is not None and [c.path for c in rebuilt.modified] == ["a"]
    assert rebuilt.modified[0].diff is None


def test_cli_changes(spy, tmp_path: Path, store_dir: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    _tree(ws, {"a.py": "1\n", "gone.py": "x\n"})

    def agent() -> None:
        (ws / "a.py").write_text("2\n")
        (ws / "gone.py").unlink()

    run = record_events(
        Store(store_dir, create=True), _during(agent, []), workspace=[str(ws)],
        sinks=[WorkspaceEvidence(background_hash=False)]
    )
    res = spy("changes", run.id)
    assert res.exit_code == 0, res.output
    assert "  M  a.py  (content)" in res.output and "  D  gone.py" in res.output
    assert "+2" in res.output
    stat = spy("changes", run.id, "--stat")
    assert "+2" not in stat.output
    data = json.loads(spy("changes", run.id, "--format", "json").output)
    assert [c["path"] for c in data["modified"]] == ["a.py"] and data["run_id"] == run.id
    patch = spy("changes", run.id, "--format", "patch").output
    assert patch.startswith("--- a/a.py")
    bare = record_events(Store(store_dir), [ev("process.start", 1)], workspace=[str(ws)])
    res = spy("changes", bare.id)
    assert res.exit_code == 2 and "no workspace evidence" in res.output


def test_file_names_that_are_not_utf8(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bad = os.fsencode(str(ws)) + b"/caf\xe9.txt"

    def agent() -> None:
        with open(bad, "wb") as f:
            f.write(b"x\n")

    ch = load_workspace_changes(_record(tmp_path, ws, agent).dir)
    assert ch is not None and [c.path for c in ch.added] == ["caf\\xe9.txt"]


def test_the_run_has_one_diff_budget_and_added_files_past_it_are_hash_entries(tmp_path: Path) -> None:
    """Many new files cost a hash each past the run's budget; modified files get their diffs first."""
    from spyglass.evidence.changes import ADDED_NOTE, diff_manifests
    from spyglass.evidence.manifest import ManifestOptions, build_manifest

    ws = tmp_path / "ws"
    _tree(ws, {"z-modified.txt": "old\n"})
    opts = ManifestOptions(keep_text_max=1 << 20)
    kept: dict[str, bytes] = {}
    before, _ = build_manifest([str(ws)], opts, keeper=kept.__setitem__)
    (ws / "z-modified.txt").write_text("new\n")
    for i in range(50):
        (ws / f"new{i:02d}.txt").write_text(f"line {i}\n" * 20)
    after, _ = build_manifest([str(ws)], ManifestOptions())
    ch = diff_manifests(before, after, old_content=kept.get, max_run_diff_bytes=1000)
    assert ch.modified[0].diff is not None  # first, whatever the order of paths
    with_diff = [c for c in ch.added if c.diff]
    assert 0 < len(with_diff) < 10 and sum(len(c.diff or "") for c in ch.all_changes()) <= 1000
    rest = [c for c in ch.added if not c.diff]
    assert len(rest) == 50 - len(with_diff) and all(c.diff_note == ADDED_NOTE for c in rest)
    assert all(c.after is not None and len(c.after.sha256 or "") == 64 for c in rest)


def test_the_before_manifest_is_hashed_while_the_agent_runs(tmp_path: Path) -> None:
    """Benign twin: files the agent changes after they were hashed get their exact diff."""
    ws = tmp_path / "ws"
    _tree(ws, {f"f{i}.txt": f"{i}\n" for i in range(200)})
    sink = WorkspaceEvidence(background_hash=True, hash_wait=0)

    def agent() -> None:
        assert sink._hasher is not None  # started before the agent
        sink._hasher.join(timeout=120)  # this agent waits for the hashes
        (ws / "f7.txt").write_text("seven\n")

    run = record_events(Store(tmp_path / "store", create=True), _during(agent, []), workspace=[str(ws)],
                        sinks=[sink])
    ch = load_workspace_changes(run.dir)
    assert ch is not None and [c.path for c in ch.modified] == ["f7.txt"]
    assert ch.modified[0].diff == "--- a/f7.txt\n+++ b/f7.txt\n@@ -1 +1 @@\n-7\n+seven\n"
    before = decode_manifest((run.dir / "evidence" / "manifest-before.json").read_bytes())
    assert len(before.files) == 200 and all(len(f.sha256 or "") == 64 for f in before.files)


def test_a_file_changed_before_its_hash_counts_as_modified_even_with_its_times_put_back(tmp_path: Path) -> None:
    """The agent changes a file before the hashing thread reaches it, same size, and restores its mtime:
    its ctime (the kernel's) still tells, so it is no hash in the before-manifest and a modified file."""
    from spyglass.evidence.changes import diff_manifests
    from spyglass.evidence.manifest import CHANGED_NOTE, hash_pending, list_manifest

    ws = tmp_path / "ws"
    _tree(ws, {"a.txt": "good\n", "b.txt": "same\n"})
    opts = ManifestOptions(defer_hash=True, keep_text_max=1024)
    before, _, pending = list_manifest([str(ws)], opts)
    st = os.stat(ws / "a.txt")
    (ws / "a.txt").write_text("evil\n")
    os.utime(ws / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    kept: dict[str, bytes] = {}
    hash_pending(pending, opts, keeper=kept.__setitem__)
    a, b = before.by_path()[str(ws / "a.txt")], before.by_path()[str(ws / "b.txt")]
    assert a.sha256 is None and a.note == CHANGED_NOTE and b.sha256 is not None
    assert list(kept) == [str(ws / "b.txt")]
    after, _ = build_manifest([str(ws)], ManifestOptions())
    ch = diff_manifests(before, after, old_content=kept.get)
    assert [(c.path, c.what) for c in ch.modified] == [("a.txt", ["content"])]


def test_a_file_grown_or_replaced_before_its_hash_counts_as_modified(tmp_path: Path) -> None:
    """Between the listing and the hash: one file grows (its single read returns more than the listed
    size), another is replaced by a rename with a same-size file and the old times (another inode);
    a third is deleted.  None gets a hash; the first two are modified, the third removed."""
    from spyglass.evidence.changes import diff_manifests
    from spyglass.evidence.manifest import CHANGED_NOTE, hash_pending, list_manifest

    ws = tmp_path / "ws"
    _tree(ws, {"grow.txt": "one\n", "swap.txt": "good\n", "gone.txt": "x\n", "same.txt": "same\n"})
    opts = ManifestOptions(defer_hash=True, keep_text_max=1024)
    before, _, pending = list_manifest([str(ws)], opts)
    with open(ws / "grow.txt", "a") as f:
        f.write("two\n")
    st = os.stat(ws / "swap.txt")
    (tmp_path / "new.txt").write_text("evil\n")
    os.utime(tmp_path / "new.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp_path / "new.txt", ws / "swap.txt")
    (ws / "gone.txt").unlink()
    kept: dict[str, bytes] = {}
    hash_pending(pending, opts, keeper=kept.__setitem__)
    by = before.by_path()
    assert [by[str(ws / n)].note for n in ("grow.txt", "swap.txt")] == [CHANGED_NOTE, CHANGED_NOTE]
    assert by[str(ws / "gone.txt")].sha256 is None
    assert by[str(ws / "same.txt")].sha256 == hashlib.sha256(b"same\n").hexdigest()
    assert list(kept) == [str(ws / "same.txt")]
    after, _ = build_manifest([str(ws)], ManifestOptions())
    ch = diff_manifests(before, after, old_content=kept.get)
    assert sorted((c.path, c.what) for c in ch.modified) == [("grow.txt", ["content"]), ("swap.txt", ["content"])]
    assert [c.path for c in ch.removed] == ["gone.txt"]
