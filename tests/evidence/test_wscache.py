"""The workspace's hashes kept in the store from the run before (spyglass/evidence/wscache.py).

A run takes, unread, the hash of a file whose stat is the one the previous run's after-manifest
sealed; it reads every other file.  The attacker tries to make a changed file look unchanged: by
putting its mtime back, by planting or forging the sealed entries, by changing the packs of old
contents.  The evidence still shows the change (or the run that forged says so); the benign twin
is silent and reads nothing it need not."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from evidence_helpers import MAPPER, WS_MARGIN_NS
from evidence_helpers import run_sink as _run
from evidence_helpers import sealed_file as _sealed
from evidence_helpers import settled as _settled
from evidence_helpers import workspace as _workspace

from spyglass.evidence import wscache
from spyglass.evidence.hashmemo import stat_key
from spyglass.evidence.manifest import ManifestOptions, build_manifest, decode_manifest
from spyglass.evidence.workspace import load_workspace_changes
from spyglass.evidence.wscache import Body, WorkspaceCache, digest_of
from spyglass.store import RunReader, Store

MARGIN_NS = WS_MARGIN_NS

#: rewrites a file in place with content of the same size and puts its times back (os.utime)
REWRITE = """
import os
def rewrite(path, text):
    st = os.stat(path)
    assert len(text.encode()) == st.st_size
    with open(path, "r+b") as f:
        f.write(text.encode())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
"""

#: plants, without the store's key, entries that say the rewritten file is as it was (its new stat,
#: its old hash): the body re-encoded and the old seal kept in front of it
PLANT = """
import array, hashlib, msgspec, os, sys
def plant(sealed, path):
    data = open(sealed, "rb").read()
    body = msgspec.msgpack.decode(data[32:])
    paths = body[0].split("\\0") if body[0] else []
    nums, shas = array.array("q", body[1]), body[2]
    st = os.stat(path)
    key = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode]
    old = hashlib.sha256(b"good\\n").hexdigest()
    if path in paths:
        i = paths.index(path)
        nums[6 * i : 6 * i + 6] = array.array("q", key)
        shas = shas[: 64 * i] + old + shas[64 * i + 64 :]
    else:
        paths.append(path)
        nums.extend(key)
        shas += old
    body[0], body[1], body[2] = "\\0".join(paths), nums.tobytes(), shas
    with open(sealed + ".new", "wb") as f:
        f.write(data[:32] + msgspec.msgpack.encode(body))
    os.replace(sealed + ".new", sealed)
"""


def test_a_second_run_takes_the_unchanged_files_hashes_and_diffs_from_the_kept_content(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"a.txt": "good\n", "b.txt": "same\n", "c.bin": "\0binary"})
    _settled(list(ws.iterdir()), MARGIN_NS)
    store = Store(tmp_path / "store", create=True)
    first, _ = _run(store, ws)
    assert first.before is not None and first.before.cached == 0
    second, run_dir = _run(store, ws, lambda: (ws / "a.txt").write_text("good\nbetter\n"))
    assert second.before is not None and second.before.cached == 3  # not one file read before the agent
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [(c.path, c.what) for c in ch.modified] == [("a.txt", ["content"])]
    assert ch.modified[0].diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n good\n+better\n"
    # the manifests are the ones every file read from disk gives
    before = decode_manifest((run_dir / "evidence" / "manifest-before.json").read_bytes())
    after = decode_manifest((run_dir / "evidence" / "manifest-after.json").read_bytes())
    fresh, _ = build_manifest([str(ws)], ManifestOptions())
    assert {f.path: f.sha256 for f in after.files} == {f.path: f.sha256 for f in fresh.files}
    assert {f.path: f.sha256 for f in before.files} == {
        **{f.path: f.sha256 for f in fresh.files}, str(ws / "a.txt"): hashlib.sha256(b"good\n").hexdigest()}
    third, _ = _run(store, ws)  # a.txt changed just now: racy, read again; the others kept
    assert third.before is not None and third.before.cached == 2


def test_names_that_are_not_utf8_are_kept_too(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"a.txt": "good\n"})
    odd = os.path.join(os.fsencode(ws), b"caf\xe9.txt")
    with open(odd, "wb") as f:
        f.write(b"odd\n")
    _settled([ws / "a.txt", Path(os.fsdecode(odd))], MARGIN_NS)
    store = Store(tmp_path / "store", create=True)
    _run(store, ws)

    def append() -> None:
        with open(odd, "ab") as f:
            f.write(b"more\n")

    second, run_dir = _run(store, ws, append)
    assert second.before is not None and second.before.cached == 2
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [c.path for c in ch.modified] == ["caf\\xe9.txt"]
    # the old side comes from the pack by its hash, the new side is read by the name's bytes
    (change,) = ch.modified
    assert change.after is not None and os.fsencode(change.after.disk_path()) == odd
    assert second._old_content(change.after.disk_path()) == b"odd\n"
    assert change.diff is not None and " odd\n+more\n" in change.diff, change


def test_a_file_rewritten_between_runs_with_its_times_put_back_is_read_again(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"a.txt": "good\n", "b.txt": "same\n"})
    _settled(list(ws.iterdir()), MARGIN_NS)
    store = Store(tmp_path / "store", create=True)
    _run(store, ws)
    subprocess.run([sys.executable, "-c", REWRITE + "rewrite(*__import__('sys').argv[1:])",
                    str(ws / "a.txt"), "evil\n"], check=True)
    second, run_dir = _run(store, ws)
    assert second.before is not None and second.before.cached == 1  # b.txt only
    before = decode_manifest((run_dir / "evidence" / "manifest-before.json").read_bytes())
    assert before.by_path()[str(ws / "a.txt")].sha256 == hashlib.sha256(b"evil\n").hexdigest()


@pytest.mark.parametrize("via_link", [False, True])
def test_a_file_held_mapped_for_writing_when_a_run_ends_is_not_kept(tmp_path: Path, via_link: bool) -> None:
    """A process holds a.txt mapped shared and writable across the end of a run, and writes through
    the mapping after it (no time changes): the run kept no hash for a.txt, so the next run reads it.
    The same when the workspace is named through a symlink (the mappings name the real path)."""
    ws = _workspace(tmp_path, {"a.txt": "abcd\n", "b.txt": "same\n"})
    if via_link:
        (tmp_path / "link").symlink_to(ws)
        ws = tmp_path / "link"
    store = Store(tmp_path / "store", create=True)
    mapper = subprocess.Popen([sys.executable, "-c", MAPPER, str(ws / "a.txt")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert mapper.stdout is not None and mapper.stdin is not None
        assert mapper.stdout.readline() == "mapped\n"
        _settled([ws / "a.txt", ws / "b.txt"], MARGIN_NS)
        _run(store, ws)
        kept = WorkspaceCache(store.root, [str(ws.resolve())])
        assert kept.load() is not None and set(kept.load().entries()) == {str(ws.resolve() / "b.txt")}  # type: ignore[union-attr]
        mapper.stdin.write("go\n")
        mapper.stdin.flush()
        assert mapper.stdout.readline() == "written\n"
    finally:
        if mapper.stdin is not None:
            mapper.stdin.close()
        mapper.wait(timeout=60)
    second, run_dir = _run(store, ws)
    assert second.before is not None and second.before.cached == 1  # b.txt
    before = decode_manifest((run_dir / "evidence" / "manifest-before.json").read_bytes())
    assert before.by_path()[str(ws.resolve() / "a.txt")].sha256 == hashlib.sha256(b"XYcd\n").hexdigest()


@pytest.mark.parametrize("how", ["payload", "seal", "other-workspace", "truncated", "garbage"])
def test_sealed_entries_that_fail_their_check_are_misses(tmp_path: Path, how: str) -> None:
    ws = _workspace(tmp_path, {"a.txt": "good\n"})
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("good\n")
    _settled([ws / "a.txt", other / "a.txt"], MARGIN_NS)
    store = Store(tmp_path / "store", create=True)
    _run(store, ws)
    _run(store, other)
    sealed = _sealed(store.root, ws)
    data = sealed.read_bytes()
    if how == "payload":  # a byte of the body changed, the seal kept
        forged = data[:-1] + bytes([data[-1] ^ 1])
    elif how == "seal":  # a body of its own under a seal made up
        body = Body(str(ws / "a.txt"), bytes(48), "0" * 64)
        forged = os.urandom(32) + msgspec.msgpack.encode(body)
    elif how == "other-workspace":  # well sealed, for another workspace
        forged = _sealed(store.root, other).read_bytes()
    elif how == "truncated":
        forged = data[:40]
    else:
        forged = b"not a cache"
    sealed.write_bytes(forged)
    cache = WorkspaceCache(store.root, [str(ws.resolve())])
    assert cache.load() is None
    second, _ = _run(store, ws)
    assert second.before is not None and second.before.cached == 0  # every file read


def test_a_changed_pack_gives_no_diff_never_a_false_one(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"a.txt": "good\n"})
    _settled([ws / "a.txt"], MARGIN_NS)
    store = Store(tmp_path / "store", create=True)
    _run(store, ws)
    (pack,) = (store.root / "cache").glob("workspace-*.pack")
    pack.write_bytes(b"fake\n")  # same length, other content
    second, run_dir = _run(store, ws, lambda: (ws / "a.txt").write_text("bad\n"))
    assert second.before is not None and second.before.cached == 1
    ch = load_workspace_changes(run_dir)
    assert ch is not None and [c.path for c in ch.modified] == ["a.txt"]
    assert ch.modified[0].diff is None and ch.modified[0].diff_note is not None


def test_only_the_packs_in_use_are_kept_and_the_workspaces_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wscache, "MAX_WORKSPACES", 2)
    store = Store(tmp_path / "store", create=True)
    spaces = []
    for i in range(3):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        (ws / "a.txt").write_text(f"{i}\n")
        spaces.append(ws)
    _settled([w / "a.txt" for w in spaces], MARGIN_NS)
    for i, ws in enumerate(spaces):
        for round_ in range(2):
            (ws / "a.txt").write_text(f"{i} {round_}\n")
            _settled([ws / "a.txt"], MARGIN_NS)
            _run(store, ws)
    cache_dir = store.root / "cache"
    sealed = sorted(p.name for p in cache_dir.glob("workspace-*.bin"))
    assert sealed == sorted(_sealed(store.root, w).name for w in spaces[1:])
    for ws in spaces[1:]:  # one pack each: the content of the first round is no file's any more
        assert len(list(cache_dir.glob(f"workspace-{digest_of([str(ws.resolve())])}-*.pack"))) == 1
    assert not list(cache_dir.glob(f"workspace-{digest_of([str(spaces[0].resolve())])}*"))


# -- real runs: ``spyglass run`` with its default racy margin (2 s) and the witness guard ---------------


def _spyglass(store: Path, *args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPYGLASS_STORE": str(store), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("SPYGLASS_POLICY", None)
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def _latest(store: Path) -> RunReader:
    return RunReader(Store(store), Store(store).resolve("latest"))


def _manifest(store: Path, name: str) -> dict[str, str | None]:
    reader = _latest(store)
    m = decode_manifest((Store(store).run_dir(reader.meta.id) / "evidence" / name).read_bytes())
    return {Path(f.path).name: f.sha256 for f in m.files}


def _cached(store: Path) -> int:
    reader = _latest(store)
    return decode_manifest((Store(store).run_dir(reader.meta.id) / "evidence" / "manifest-before.json")
                           .read_bytes()).cached


def _witness(store: Path) -> set[str]:
    return {a.rule_id for a in _latest(store).alerts() if a.rule_id.startswith("witness-")}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path, Path]:
    store, home = tmp_path / "store", tmp_path / "home"
    home.mkdir()
    ws = _workspace(tmp_path, {"a.txt": "good\n", "b.txt": "same\n"})
    _settled([ws / "a.txt", ws / "b.txt"], 2_000_000_000)  # spyglass run's racy margin
    first = _spyglass(store, "run", "-q", "--", "true", cwd=ws, home=home)
    assert first.returncode == 0, first.stderr
    assert _sealed(store, ws).exists()
    return store, home, ws


def test_an_agent_that_rewrites_a_file_and_plants_entries_for_it_is_seen(
    project: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The agent (a real process under ``spyglass run``) rewrites a.txt in place, same size, puts its
    times back, and plants entries that give its new stat the old hash.  The run's evidence shows
    the change with its diff (the old content from the previous run's pack), the store write is a
    ``witness-tamper`` alert, and a next run refuses the planted entries: it reads a.txt."""
    store, home, ws = project
    sealed = _sealed(store, ws)
    script = tmp_path / "agent.py"
    script.write_text(REWRITE + PLANT + f"rewrite({str(ws / 'a.txt')!r}, 'evil\\n')\n"
                      f"plant({str(sealed)!r}, {str(ws / 'a.txt')!r})\n")
    attack = _spyglass(store, "run", "-q", "--", sys.executable, str(script), cwd=ws, home=home)
    assert attack.returncode == 0, attack.stderr
    assert _cached(store) == 2  # the previous run's entries, checked before the agent started
    assert "witness-tamper" in _witness(store)
    reader = _latest(store)
    ch = load_workspace_changes(Store(store).run_dir(reader.meta.id))
    assert ch is not None and [(c.path, c.what) for c in ch.modified] == [("a.txt", ["content"])]
    assert ch.modified[0].diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-good\n+evil\n"
    # as a process left behind would: the planted entries after the run sealed its own
    subprocess.run([sys.executable, "-c", PLANT + "plant(*__import__('sys').argv[1:])",
                    str(sealed), str(ws / "a.txt")], check=True)
    # the planted body is well formed and names a.txt's stat with the old hash: only the seal refuses it
    planted = msgspec.msgpack.decode(sealed.read_bytes()[32:], type=Body)
    old = hashlib.sha256(b"good\n").hexdigest()
    assert planted.entries()[str(ws / "a.txt")] == (stat_key(os.stat(ws / "a.txt")), old)
    assert WorkspaceCache(store, [str(ws)]).load() is None
    again = _spyglass(store, "run", "-q", "--", "true", cwd=ws, home=home)
    assert again.returncode == 0, again.stderr
    assert _cached(store) == 0  # the seal fails: every file read
    assert _manifest(store, "manifest-before.json")["a.txt"] == hashlib.sha256(b"evil\n").hexdigest()


def test_benign_twin_an_agent_that_edits_its_workspace_is_silent_and_diffed(
    project: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    store, home, ws = project
    edit = _spyglass(store, "run", "-q", "--", "sh", "-c", "echo more >> b.txt", cwd=ws, home=home)
    assert edit.returncode == 0, edit.stderr
    assert _cached(store) == 2 and _witness(store) == set()
    reader = _latest(store)
    ch = load_workspace_changes(Store(store).run_dir(reader.meta.id))
    assert ch is not None and [c.path for c in ch.modified] == ["b.txt"]
    assert ch.modified[0].diff == "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1,2 @@\n same\n+more\n"
