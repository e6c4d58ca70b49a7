"""The guard's verdicts are remembered per name (one ``stat`` for the several events a new file
gets) and forgotten when a name may reach something else: a link, rename, delete or symlink.

Real files; the events are fed to the guard as a backend emits them, each after the change it
reports, so what the guard finds on disk is what it would find live (a live run judges each
event after the fact, when later changes may already be made: see test_guard.py for runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from spyglass.events import Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.witness import Protected, WitnessGuard


class _Guarded:
    def __init__(self, store: Path) -> None:
        (store / "runs").mkdir(parents=True)
        (store / "index.sqlite").write_text("")
        self.protected = Protected.for_run(store)
        self.guard = WitnessGuard(self.protected)
        self.alerts: list[str] = []
        outer = self

        class Catch:
            def alert(self, a: object) -> None:
                outer.alerts.append(str(getattr(a, "message", "")))

        self.pipe = Pipeline([self.guard, Catch()], RunContext(run_id="r"))
        self.pipe.start()

    def feed(self, type_: str, path: Path, target: Path | None = None, *, flags: str | None = None,
             ok: bool = True) -> None:
        self.pipe.feed(Event(type=type_, pid=9, syscall="x", path=str(path), flags=flags, ok=ok,
                             errno=None if ok else "EEXIST", target=str(target) if target else None))

    def judged_clean(self, name: Path) -> None:
        """``name`` made in a new directory and chmod-ed: judged, no alert."""
        name.parent.mkdir()
        name.write_text("a")
        self.feed("file.chmod", name)
        assert self.alerts == []

    def store_alert_on(self, name: Path) -> bool:
        return any(m.startswith("the spyglass store") and m.endswith(str(name)) for m in self.alerts)


def test_a_name_made_a_hard_link_to_the_store_is_judged_again(tmp_path: Path) -> None:
    store, g = tmp_path / "st", tmp_path / "ws" / "g"
    run = _Guarded(store)
    g.parent.mkdir()
    g.write_text("a")
    run.feed("file.create", g)
    run.feed("file.write", g)
    assert run.alerts == []
    g.unlink()
    run.feed("file.delete", g)
    os.link(store / "index.sqlite", g)
    run.feed("file.link", g, store / "index.sqlite")
    run.alerts.clear()
    run.feed("file.write", g)
    assert run.store_alert_on(g), run.alerts


def test_a_directory_replaced_by_a_symlink_into_the_store_is_judged_again(tmp_path: Path) -> None:
    store, d = tmp_path / "st", tmp_path / "ws" / "d"
    run = _Guarded(store)
    d.mkdir(parents=True)
    run.feed("file.mkdir", d)
    (d / "f").write_text("a")
    run.feed("file.create", d / "f")
    assert run.alerts == []
    (d / "f").unlink()
    d.rmdir()
    run.feed("file.delete", d)
    d.symlink_to(store / "runs")
    run.feed("file.symlink", d, store / "runs")
    (d / "f").write_text("x")
    run.feed("file.create", d / "f")
    assert any(m.endswith(f"{d}/f") for m in run.alerts), run.alerts


def test_a_renamed_store_directory_is_followed_under_the_name_judged_before(tmp_path: Path) -> None:
    store, aside = tmp_path / "st", tmp_path / "aside"
    run = _Guarded(store)
    run.feed("file.create", aside / "runs" / "x")  # not there yet: judged clean (and remembered)
    assert run.alerts == []
    store.rename(aside)
    run.feed("file.rename", store, aside)
    run.alerts.clear()
    (aside / "runs" / "x").write_text("x")
    run.feed("file.create", aside / "runs" / "x")
    assert any(m.endswith(f"{aside}/runs/x") for m in run.alerts), run.alerts


def test_benign_twin_a_directory_made_after_a_name_below_it_was_judged_stays_clean(tmp_path: Path) -> None:
    """mkdir keeps the other verdicts (a new directory's inode is no protected file's): the files
    made in it are judged clean, and the store is still the store."""
    store, nd = tmp_path / "st", tmp_path / "ws" / "nd"
    run = _Guarded(store)
    nd.parent.mkdir()
    run.feed("file.create", nd / "f")  # failed first: nd did not exist
    nd.mkdir()
    run.feed("file.mkdir", nd)
    for name in ("f", "g"):
        (nd / name).write_text("a")
        run.feed("file.create", nd / name)
        run.feed("file.chmod", nd / name)
    assert run.alerts == []
    run.feed("file.create", store / "runs" / "planted")
    assert any(m.endswith(f"{store}/runs/planted") for m in run.alerts), run.alerts


def test_real_paths_resolved_a_directory_at_a_time_agree_with_realpath(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "abs").symlink_to(tmp_path / "a")
    (tmp_path / "c" / "rel").symlink_to("../a/b")
    (tmp_path / "dangling").symlink_to("/nonexistent/x")
    prot = Protected()
    for p in ["c/abs/b", "c/rel", "c/rel/not/there", "dangling/q", "none/x", "c/abs", "c/rel/../rel"]:
        d = os.path.normpath(tmp_path / p)
        assert prot._real(d) == os.path.realpath(d), p
    assert prot._real("/") == "/"


def test_a_directory_made_gets_its_real_path_from_its_parents_without_a_look(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    prot = Protected()
    for name in ("link/new", "a/new2", "link/new/deeper"):
        d = tmp_path / name
        d.mkdir()
        prot.made_dir(str(d), made=True)
        assert prot._reals[str(d)] == os.path.realpath(d), name


def test_a_mkdir_refused_as_the_name_exists_keeps_the_verdicts_another_failure_forgets(tmp_path: Path) -> None:
    store, ws = tmp_path / "st", tmp_path / "ws"
    run = _Guarded(store)
    run.judged_clean(ws / "f")
    run.feed("file.mkdir", ws, ok=False)  # EEXIST: nothing was made
    assert (str(ws / "f"), True) in run.protected._verdicts
    (ws / "f").unlink()
    os.link(store / "index.sqlite", ws / "f")  # unseen: only a name judged afresh finds it
    run.pipe.feed(Event(type="file.mkdir", pid=9, syscall="x", path=str(ws / "f"), ok=False, errno="EINTR"))
    assert any(str(ws / "f") in m and "attempted" in m for m in run.alerts), run.alerts


def test_a_file_bind_mounted_over_a_name_judged_clean_is_judged_again(tmp_path: Path) -> None:
    """A mount changes what a name reaches with no rename: every mount call forgets (here the
    new API's ``move_mount``, as the run would record it)."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    store, f = tmp_path / "st", tmp_path / "ws" / "f"
    run = _Guarded(store)
    run.judged_clean(f)
    subprocess.run(["mount", "--bind", str(store / "index.sqlite"), str(f)], check=True)
    try:
        run.pipe.feed(Event(type="sys.sensitive", pid=9, syscall="move_mount", detail="move_mount"))
        run.feed("file.chmod", f)
    finally:
        subprocess.run(["umount", str(f)], check=True)
    assert run.store_alert_on(f), run.alerts


def test_after_io_uring_names_are_judged_afresh(tmp_path: Path) -> None:
    """io_uring renames with no event of their own (eBPF records an operation once per process; strace
    not at all): once the run used it, no verdict is remembered per name."""
    store, g = tmp_path / "st", tmp_path / "ws" / "g"
    run = _Guarded(store)
    run.judged_clean(g)
    run.pipe.feed(Event(type="sys.sensitive", pid=9, syscall="io_uring_enter", detail="io_uring RENAMEAT"))
    run.feed("file.chmod", g)
    assert run.alerts == []
    os.rename(store / "index.sqlite", g)  # as IORING_OP_RENAMEAT would: no event
    run.feed("file.chmod", g)
    assert run.store_alert_on(g), run.alerts


def test_a_rename_recorded_as_failed_still_forgets(tmp_path: Path) -> None:
    """A call whose result the capture did not see (its process killed in it) may have renamed all
    the same: the name is judged again."""
    store, g = tmp_path / "st", tmp_path / "ws" / "g"
    run = _Guarded(store)
    run.judged_clean(g)
    os.rename(store / "index.sqlite", g)
    run.pipe.feed(Event(type="file.rename", pid=9, syscall="rename", path=str(store / "index.sqlite"),
                        target=str(g), ok=False, errno="EINTR"))
    run.alerts.clear()
    run.feed("file.chmod", g)
    assert run.store_alert_on(g), run.alerts


EXCL = "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC"


def test_made_anew_is_an_exclusive_create_or_a_mkdir_only() -> None:
    from spyglass.witness.guard import _made_anew

    assert _made_anew("file.create", EXCL) and _made_anew("file.mkdir", None)
    assert not _made_anew("file.create", "O_WRONLY|O_CREAT|O_TRUNC")  # may open a file that exists
    assert not _made_anew("file.create", "O_RDWR|O_TMPFILE|O_EXCL")  # the name is the directory's
    assert not _made_anew("file.write", EXCL) and not _made_anew("file.create", None)


def test_a_file_made_anew_in_a_store_directory_moved_unseen_is_still_the_store(tmp_path: Path) -> None:
    """An exclusive create is not looked up by inode (its inode is new), but its directory still is:
    the store moved by a process outside the run (no event) is the store under its new name."""
    store, aside = tmp_path / "st", tmp_path / "aside"
    run = _Guarded(store)
    store.rename(aside)
    (aside / "runs" / "new").write_text("x")
    run.feed("file.create", aside / "runs" / "new", flags=EXCL)
    assert run.store_alert_on(aside / "runs" / "new"), run.alerts


def test_an_exclusive_create_that_failed_is_judged_by_what_the_name_is(tmp_path: Path) -> None:
    """Only a create that succeeded made its name: a refused one names what is there, a store file
    hard-linked in unseen, and is an attempt on it."""
    store, g = tmp_path / "st", tmp_path / "ws" / "g"
    run = _Guarded(store)
    g.parent.mkdir()
    os.link(store / "index.sqlite", g)
    run.feed("file.create", g, flags=EXCL, ok=False)
    assert run.store_alert_on(g) or any(str(g) in m and "attempted" in m for m in run.alerts), run.alerts


def test_benign_twin_files_made_anew_are_clean_and_a_rename_onto_one_is_judged_again(tmp_path: Path) -> None:
    store, ws = tmp_path / "st", tmp_path / "ws"
    run = _Guarded(store)
    ws.mkdir()
    run.feed("file.mkdir", ws)
    for i in range(3):
        (ws / f"f{i}").write_text("a")
        run.feed("file.create", ws / f"f{i}", flags=EXCL)
        run.feed("file.chmod", ws / f"f{i}")
    assert run.alerts == []
    os.replace(store / "index.sqlite", ws / "f1")  # the store file renamed over a name judged clean
    run.feed("file.rename", store / "index.sqlite", ws / "f1")
    run.alerts.clear()
    run.feed("file.write", ws / "f1")
    assert run.store_alert_on(ws / "f1"), run.alerts
