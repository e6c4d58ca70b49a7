"""The end of the run's walk of spyglass's own source, with the guard fed events (no capture): every
byte-code file not as it was at the run's start goes, whether an event named it or not, and a
``__pycache__`` that is not the one there at the start (moved in, made a symlink) is emptied or
unlinked and is a change of the source.  The attacks played for real under each backend are in
test_own_bytecode.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_every_byte_code_file_changed_during_the_run_goes_named_or_not(tmp_path: Path) -> None:
    """The guard removes every file of spyglass's ``__pycache__`` that is not as it was at the
    run's start (not there then, or its status change time, which no process can set, moved),
    whether the events named it or not: a write the events named by a path that no longer
    resolves, one the capture lost.  It keeps no names: the end's walk finds them.
    Files from before the run stay.  (The guard is fed events here; test_own_bytecode.py runs it
    under both backends.)"""
    import time

    from spyglass.events import Event

    cache, before, guard, ctx = _fed_guard(tmp_path)
    time.sleep(0.05)  # the agent starts later (the kernel's file clock moves by ticks of a few ms)
    names = [cache / f"n{i}.cpython-311.pyc" for i in range(5)]
    for i, name in enumerate(names):
        name.write_bytes(b"forged")
        if i != 3:  # the fourth one's event was lost
            guard.event(Event(type="file.create", pid=7, path=str(name), seq=i + 1))
    guard.done(ctx)
    assert not any(n.exists() for n in names) and before.exists()
    assert ctx.run is not None
    assert sorted(ctx.run.extra["own_bytecode"]["removed"]) == sorted(str(n) for n in names)


def test_a_byte_code_file_renamed_in_the_cache_goes_with_no_event(tmp_path: Path) -> None:
    """A byte-code file from before the run renamed over another name of the cache (its inode was
    known at the start) has a new status change time (a rename sets it, on the file systems a
    Python install lies on): found at the end without any event naming it."""
    import time

    cache, before, guard, ctx = _fed_guard(tmp_path)
    time.sleep(0.05)
    moved = cache / "m.cpython-311.pyc"
    before.rename(moved)
    guard.done(ctx)
    assert not moved.exists()
    assert ctx.run is not None and ctx.run.extra["own_bytecode"]["removed"] == [str(moved)]


def test_a_pycache_moved_in_from_elsewhere_in_the_source_is_emptied(tmp_path: Path) -> None:
    """Another package's ``__pycache__`` moved in place of this one's, with no event (a name through
    a symlink removed since, or an event lost): its files are the source's as they were at the
    start (same inodes, same status change times: a rename of their directory sets neither), but
    the directory is not the one there at the start: it is emptied, and is a change of the source."""
    cache, before, guard, ctx = _fed_guard(tmp_path, others=("pkg2",))
    other = cache.parent.parent / "pkg2" / "__pycache__"
    cache.rename(tmp_path / "aside")
    other.rename(cache)
    guard.done(ctx)
    assert cache.is_dir() and not list(cache.iterdir())
    assert (tmp_path / "aside" / before.name).exists()  # moved out of the source: not spyglass's any more
    assert ctx.run is not None and str(cache) in ctx.run.extra["own_source_changed"]
    assert any(a.rule_id == "witness-tamper" and str(cache) in a.message for a in guard.alerts)


def test_a_pycache_made_a_symlink_with_no_event_is_unlinked(tmp_path: Path) -> None:
    """``__pycache__`` made a symlink to a directory of forged files, with no event: the walk at the
    end does not follow the link, but it is not the ``__pycache__`` there at the start: the link
    goes (the forged files stay where they are, out of the source) and it is a change of the source."""
    cache, _before, guard, ctx = _fed_guard(tmp_path)
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "m.cpython-311.pyc").write_bytes(b"forged")
    cache.rename(tmp_path / "aside")
    cache.symlink_to(evil)
    guard.done(ctx)
    assert not cache.is_symlink() and (evil / "m.cpython-311.pyc").exists()
    assert ctx.run is not None and ctx.run.extra["own_bytecode"]["removed"] == [str(cache)]
    assert str(cache) in ctx.run.extra["own_source_changed"]


def test_benign_twin_a_pycache_python_makes_during_the_run_is_no_change_of_the_source(tmp_path: Path) -> None:
    """A ``__pycache__`` made during the run where there was none (Python, importing a package of
    spyglass that had no cache) is emptied but is no change of the source (no alert)."""
    cache, _before, guard, ctx = _fed_guard(tmp_path, bare=("pkg3",))
    fresh = cache.parent.parent / "pkg3" / "__pycache__"
    fresh.mkdir()
    (fresh / "m.cpython-311.pyc").write_bytes(b"compiled")
    guard.done(ctx)
    assert ctx.run is not None
    assert ctx.run.extra["own_bytecode"]["removed"] == [str(fresh / "m.cpython-311.pyc")]
    assert "own_source_changed" not in ctx.run.extra and not guard.alerts


def test_a_change_under_a_clock_set_back_is_found_by_the_start_snapshot(tmp_path: Path) -> None:
    """Root can set the clock back (``clock_settime`` is no event) while it writes, so that the
    status change times it leaves are before the run's start stamp.  What the end of the run
    compares is also the files' state at the start: a file not there then, or whose status change
    time moved, changed.  (The clock of this shared machine is not moved: the stamp is moved
    forward instead, which is what a clock set back during the writes looks like to the guard.)"""
    cache, kept, guard, ctx = _fed_guard(tmp_path)
    src = cache.parent / "m.py"
    forged = cache / "m.cpython-311.pyc"
    forged.write_bytes(b"forged")
    src.write_text("X = 2\n")
    guard.end.started += 3600  # every change of the run now looks older than the start
    guard.done(ctx)
    assert not forged.exists() and kept.exists()
    assert ctx.run is not None
    assert ctx.run.extra["own_bytecode"]["removed"] == [str(forged)]
    assert ctx.run.extra["own_source_changed"] == [str(src)]


def _fed_guard(tmp_path: Path, others: tuple[str, ...] = (), bare: tuple[str, ...] = (),
               ) -> tuple[Path, Path, Any, Any]:
    """A guard of a small source tree ``own/pkg`` (``m.py`` and an older byte-code file in its
    ``__pycache__``; the same for each package of ``others``; ``m.py`` alone in each of ``bare``),
    started: the cache directory, the older file, the guard and its run context."""
    from spyglass.pipeline import RunContext
    from spyglass.store.meta import RunMeta
    from spyglass.witness import guard as g

    own = tmp_path / "own"
    for pkg in ("pkg", *others):
        cache = own / pkg / "__pycache__"
        cache.mkdir(parents=True)
        (own / pkg / "m.py").write_text("X = 1\n")
        older = cache / "old.cpython-311.pyc"
        older.write_bytes(b"old")
    for pkg in bare:
        (own / pkg).mkdir()
        (own / pkg / "m.py").write_text("X = 1\n")
    cache, older = own / "pkg" / "__pycache__", own / "pkg" / "__pycache__" / "old.cpython-311.pyc"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    prot = g.Protected()
    prot.add_place(own, g.OWN_SOURCE, tree=True)
    guard = g.WitnessGuard(prot)
    ctx = RunContext(run=RunMeta(id="r"), run_dir=run_dir)
    guard.start(ctx)
    return cache, older, guard, ctx
