"""The after-manifest keeps the before-manifest's hash of a file whose identity and stat did not
change, and reads again every file that changed, whoever changed it and whatever times it put back."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from evidence_helpers import MAPPER, ev, record_events, write
from evidence_helpers import settled as _settled
from evidence_helpers import workspace as _workspace

from spyglass.events import Event
from spyglass.evidence.hashmemo import RACY_MARGIN_NS, FileSystems, HashMemo, read_mounts
from spyglass.evidence.manifest import ManifestOptions, build_manifest, decode_manifest
from spyglass.evidence.workspace import WorkspaceEvidence, load_workspace_changes
from spyglass.store import Store

#: the margin these tests give the sink: files older than this keep their hashes
MARGIN_NS = 50_000_000

#: rewrites a file in place with content of the same size and puts its times back (os.utime)
ATTACKER = """
import os, sys
path, text = sys.argv[1], sys.argv[2]
st = os.stat(path)
assert len(text.encode()) == st.st_size
with open(path, "r+b") as f:
    f.write(text.encode())
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
"""


def _attack(path: Path, text: str) -> None:
    before = os.stat(path)
    subprocess.run([sys.executable, "-c", ATTACKER, str(path), text], check=True)
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _run(tmp_path: Path, ws: Path, sink: WorkspaceEvidence, action: Callable[[], None],
         events: list[Event] | None = None) -> Path:
    def agent() -> Iterator[Event]:
        yield ev("process.start", 100)
        assert sink._hasher is not None
        sink._hasher.join(timeout=120)  # the before-manifest is hashed: the hashes the attacker wants kept
        action()
        yield from events or []

    run = record_events(Store(tmp_path / "store", create=True), agent(), workspace=[str(ws)], sinks=[sink])
    return run.dir


def test_a_rewrite_in_place_by_a_process_outside_the_run_with_its_mtime_put_back_is_seen(tmp_path: Path) -> None:
    """The attacker runs outside the capture (no event names the file): only the stat can tell."""
    ws = _workspace(tmp_path, {"a.txt": "good\n", "b.txt": "same\n"})
    _settled([ws / "a.txt", ws / "b.txt"], MARGIN_NS)
    sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS)
    run_dir = _run(tmp_path, ws, sink, lambda: _attack(ws / "a.txt", "evil\n"))
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [(c.path, c.what) for c in ch.modified] == [("a.txt", ["content"])]
    assert ch.modified[0].after is not None
    assert ch.modified[0].after.sha256 == hashlib.sha256(b"evil\n").hexdigest()
    assert sink._memo is not None and sink._memo.reused == 1  # the benign twin b.txt kept its hash


def test_a_write_through_a_mapping_held_from_before_the_run_is_seen(tmp_path: Path) -> None:
    """A process outside the run holds the file mapped shared and writable from before the listing:
    its later writes through the mapping change no time (until writeback), so the file is read again."""
    ws = _workspace(tmp_path, {"a.txt": "abcd\n", "b.txt": "same\n"})
    mapper = subprocess.Popen([sys.executable, "-c", MAPPER, str(ws / "a.txt")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert mapper.stdout is not None and mapper.stdin is not None
        assert mapper.stdout.readline() == "mapped\n"
        _settled([ws / "a.txt", ws / "b.txt"], MARGIN_NS)

        def write_again() -> None:
            assert mapper.stdin is not None and mapper.stdout is not None
            mapper.stdin.write("go\n")
            mapper.stdin.flush()
            assert mapper.stdout.readline() == "written\n"

        sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS)
        run_dir = _run(tmp_path, ws, sink, write_again)
    finally:
        if mapper.stdin is not None:
            mapper.stdin.close()
        mapper.wait(timeout=60)
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [c.path for c in ch.modified] == ["a.txt"]
    assert ch.modified[0].diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-Xbcd\n+XYcd\n"
    assert sink._memo is not None and sink._memo.reused == 1  # b.txt, not mapped, kept its hash


def test_a_file_changed_just_before_the_run_is_read_again_the_racy_case(tmp_path: Path) -> None:
    """A file written in the same timestamp tick as its hash could be rewritten with its ctime
    unchanged: a stat younger than the margin is never trusted, whatever the clock's tick."""
    ws = _workspace(tmp_path, {"a.txt": "good\n"})
    sink = WorkspaceEvidence()  # the default margin: a.txt was written just now
    run_dir = _run(tmp_path, ws, sink, lambda: _attack(ws / "a.txt", "evil\n"))
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [c.path for c in ch.modified] == ["a.txt"]
    assert sink._memo is not None and len(sink._memo) == 0 and sink._memo.reused == 0


def test_a_racy_stat_is_not_noted_and_a_changed_stat_finds_nothing(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("one\n")
    st = os.stat(f)
    racy = HashMemo(st.st_ctime_ns + RACY_MARGIN_NS)  # the listing began within the margin of the change
    racy.note(str(f), st, "x" * 64)
    assert len(racy) == 0 and racy.lookup(str(f), st) is None
    memo = HashMemo(st.st_ctime_ns + RACY_MARGIN_NS + 1)
    memo.note(str(f), st, "x" * 64)
    assert memo.lookup(str(f), st) == "x" * 64 and memo.reused == 1
    os.chmod(f, 0o600)  # metadata only: ctime moves, the hash is not kept either
    assert memo.lookup(str(f), os.stat(f)) is None
    memo.forget([str(f)])
    assert memo.lookup(str(f), st) is None


def test_files_the_capture_saw_written_are_read_again_whatever_their_stat(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"a.txt": "one\n", "b.txt": "two\n", "c.txt": "three\n"})
    _settled([ws / n for n in ("a.txt", "b.txt", "c.txt")], MARGIN_NS)
    sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS)
    run_dir = _run(tmp_path, ws, sink, lambda: None, [write(100, str(ws / "b.txt"))])
    ch = load_workspace_changes(run_dir)
    assert ch is not None and not ch.changed  # the write left the same bytes
    assert sink._memo is not None and sink._memo.reused == 2  # a.txt and c.txt; b.txt read again


def test_the_after_manifest_with_kept_hashes_is_the_one_read_from_disk(tmp_path: Path) -> None:
    """Evidence is identical: the same manifest-after.json and changes.json with and without kept hashes."""
    files = {f"f{i}.txt": f"{i}\n" * (i + 1) for i in range(40)}
    ws = _workspace(tmp_path, files)
    (ws / "sub").mkdir()
    (ws / "sub" / "bin.dat").write_bytes(bytes(range(256)))
    os.symlink("f1.txt", ws / "link")
    _settled([ws / n for n in files], MARGIN_NS)

    def agent() -> None:
        (ws / "f3.txt").write_text("changed\n")
        (ws / "f5.txt").unlink()
        (ws / "new.txt").write_text("new\n")
        _attack(ws / "f7.txt", "X\n" * 8)

    outs = []
    for keep in (True, False):
        shutil.rmtree(tmp_path / "store", ignore_errors=True)
        for name, text in files.items():  # the same starting tree (f3/f5/f7 put back, new.txt gone)
            if name in ("f3.txt", "f5.txt", "f7.txt"):
                (ws / name).write_text(text)
        (ws / "new.txt").unlink(missing_ok=True)
        _settled([ws / n for n in files], MARGIN_NS)
        sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS, keep_hashes=keep)
        run_dir = _run(tmp_path, ws, sink, agent)
        after = decode_manifest((run_dir / "evidence" / "manifest-after.json").read_bytes())
        fresh, _ = build_manifest([str(ws)], ManifestOptions())  # every file read from disk
        after.taken, after.seconds, fresh.taken, fresh.seconds = 0, 0.0, 0, 0.0
        assert after == fresh
        stored = (run_dir / "evidence" / "changes.json").read_text()
        outs.append((re.sub(r'"mtime_ns": ?\d+', "", stored), (run_dir / "evidence" / "changes.patch").read_bytes()))
        assert sink._memo is not None and (sink._memo.reused > 30) == keep
    assert outs[0] == outs[1]  # the same changes (but for the times of the files rewritten each round)
    ch = load_workspace_changes(run_dir)
    assert ch is not None
    assert [c.path for c in ch.modified] == ["f3.txt", "f7.txt"]
    assert [c.path for c in ch.removed] == ["f5.txt"] and [c.path for c in ch.added] == ["new.txt"]


def test_only_local_file_systems_with_a_kernel_ctime_are_trusted(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 254:1 / / rw,relatime - ext4 /dev/vda rw\n"
        "40 22 0:50 / /mnt/my\\040share rw - nfs4 srv:/export rw\n"
        "41 22 0:51 / /mnt/fuse rw - fuse.sshfs host: rw\n"
        "42 22 8:17 / /media/stick rw - vfat /dev/sdb1 rw\n"
    )
    by_dev, points = read_mounts(str(info))
    assert by_dev[os.makedev(0, 50)] == "nfs4" and points[0] == ("/mnt/my share", "nfs4")
    fs = FileSystems(str(info))
    assert fs.trusted(os.makedev(254, 1), "/work/x")
    assert not fs.trusted(os.makedev(0, 50), "/mnt/my share/a")
    assert not fs.trusted(os.makedev(0, 51), "/mnt/fuse/a")
    assert not fs.trusted(os.makedev(8, 17), "/media/stick/a")
    # a device mountinfo does not name (a btrfs subvolume): the type of the mount holding the path
    assert fs.fstype(os.makedev(0, 99), "/mnt/my share/deep/file") == "nfs4"
    assert fs.fstype(os.makedev(0, 99), "/home/x") == "ext4"


def test_files_on_an_untrusted_file_system_are_never_kept(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("one\n")
    st = os.stat(f)
    info = tmp_path / "mountinfo"
    info.write_text(f"40 1 {os.major(st.st_dev)}:{os.minor(st.st_dev)} / / rw - nfs4 srv:/export rw\n")
    memo = HashMemo(st.st_ctime_ns + RACY_MARGIN_NS + 1, filesystems=FileSystems(str(info)))
    memo.note(str(f), st, "x" * 64)
    assert len(memo) == 0


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_an_agent_under_the_capture_rewrites_a_file_and_puts_its_mtime_back(tmp_path: Path) -> None:
    """A real run (strace backend): the agent rewrites a.txt in place with the same size and restores
    its mtime; the change is in the evidence, and the untouched file kept its hash."""
    from spyglass.capture import get_backend
    from spyglass.session.record import RunRequest, record

    ws = _workspace(tmp_path, {"a.txt": "good\n", "b.txt": "same\n"})
    (tmp_path / "attack.py").write_text(ATTACKER)
    _settled([ws / "a.txt", ws / "b.txt"], MARGIN_NS)
    store = Store(tmp_path / "store", create=True)
    req = RunRequest(argv=[sys.executable, str(tmp_path / "attack.py"), str(ws / "a.txt"), "evil\n"],
                     cwd=str(ws), workspace=[str(ws)])
    sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS, background_hash=False)
    outcome = record(req, get_backend("strace"), store, [sink])
    assert outcome.capture.exit_code == 0
    ch = load_workspace_changes(store.run_dir(outcome.meta.id))
    assert ch is not None and [(c.path, c.what) for c in ch.modified] == [("a.txt", ["content"])]
    assert ch.modified[0].diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-good\n+evil\n"
    assert sink._memo is not None and sink._memo.reused == 1
