"""The agent changes what spyglass runs besides its own package: a library's byte-code or source,
a module put ahead of one on the import path, a ``.pth`` file (spyglass.witness.imports).

Played for real: the spyglass process is given a ``sitecustomize`` module of its own through
``PYTHONPATH`` (a directory outside the workspace, as pyenv's standard library or a virtual
environment's ``site-packages`` are the user's files), which every Python start imports; the run
forges its byte-code, changes its source, or puts a ``click.py`` in that directory, and the next
``spyglass`` must not run what the agent wrote.  Each has a benign twin.  The check runs at the
end of the run whatever the capture saw, so these run once, under the default backend; the
last tests play each case on real files with the check called directly."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from spyglass.witness import imports
from spyglass.witness.bytecode import stamp


# a sitecustomize whose forged byte-code leaves a marker, then does what the module does
def _deps(setup: Any) -> tuple[Path, Path, Path]:
    """A directory on spyglass's import path with a ``sitecustomize`` and its byte-code."""
    deps = setup.ws.parent / "deps"
    deps.mkdir()
    source = deps / "sitecustomize.py"
    source.write_text("SITE = 1\n")
    cached = Path(importlib.util.cache_from_source(str(source)))
    py_compile.compile(str(source), cfile=str(cached), doraise=True)
    os.utime(source, (time.time() - 60, time.time() - 60))  # older than the run, as an installed module
    py_compile.compile(str(source), cfile=str(cached), doraise=True)
    setup.env["PYTHONPATH"] = str(deps)
    return deps, source, cached


def _imports(setup: Any) -> dict[str, Any]:
    (run,) = (setup.store / "runs").iterdir()
    found: dict[str, Any] = json.loads((run / "run.json").read_text()).get("extra", {}).get("imports", {})
    return found


def _tamper_alerts(setup: Any) -> list[str]:
    """Read from the run's files: with the import path the run left, a spyglass command may no
    longer start (a ``click.py`` put ahead of click is what it imports)."""
    (run,) = (setup.store / "runs").iterdir()
    lines = (run / "alerts.jsonl").read_text().splitlines() if (run / "alerts.jsonl").exists() else []
    return [a["message"] for a in map(json.loads, lines) if a.get("rule_id") == "witness-tamper"]


@pytest.mark.backends("auto")
def test_forged_byte_code_of_a_module_spyglass_runs_is_removed(setup: Any, forger: Any, next_spyglass: Any) -> None:
    _, source, cached = _deps(setup)
    forge, marker = forger
    res = setup.run(f"{setup.python} {forge} {source} {cached} {marker}")
    assert res.returncode == 0, res.stderr
    facts = _imports(setup)
    assert facts.get("bytecode") == [str(cached)] and facts.get("failed") == [], facts
    assert not cached.exists()
    assert _tamper_alerts(setup) == []  # a Python process of the run may write byte-code: no alarm
    next_spyglass()
    assert not marker.exists(), "the forged byte-code ran in the next spyglass"


@pytest.mark.backends("auto")
def test_the_forgery_runs_in_the_next_spyglass_when_nothing_removes_it(setup: Any,
                                                                       forger: Any, next_spyglass: Any) -> None:
    """The control: forged outside any run, the byte-code is what the next spyglass runs."""
    import subprocess

    _, source, cached = _deps(setup)
    forge, marker = forger
    subprocess.run([setup.python, str(forge), str(source), str(cached), str(marker)], check=True, timeout=60)
    next_spyglass()
    assert marker.read_text() == "ran"


@pytest.mark.backends("auto")
def test_a_changed_module_and_a_module_put_ahead_on_the_import_path_are_alerts(setup: Any) -> None:
    deps, source, _ = _deps(setup)
    res = setup.run(f"echo 'X = 2' >> {source} && echo 'import sys' > {deps}/click.py")
    assert res.returncode == 0, res.stderr
    alerts = _tamper_alerts(setup)
    assert any(str(source) in m and "a module spyglass runs changed" in m for m in alerts), alerts
    assert any(f"{deps}/click.py" in m and "import path" in m for m in alerts), alerts
    facts = _imports(setup)
    assert facts.get("changed") == [str(source)] and facts.get("shadowing") == [f"{deps}/click.py"], facts
    res = setup.spyglass("ls", "--store", str(setup.store))  # the attack is real: left there, it runs next
    assert res.returncode != 0 and "click" in res.stderr


@pytest.mark.backends("auto")
def test_benign_twin_reading_modules_and_writing_other_files_there_is_silent(setup: Any) -> None:
    """Reading, files of other names, and a Python process of the run writing the module's
    byte-code as Python makes it: nothing said, nothing removed."""
    deps, source, cached = _deps(setup)
    before = cached.stat()
    res = setup.run(f"cat {source} {cached} > /dev/null && echo notes > {deps}/notes.txt && mkdir {deps}/click"
                    f" && echo '{{}}' > {deps}/json.json && {setup.python} -m py_compile {source}")
    assert res.returncode == 0, res.stderr
    assert _imports(setup) == {}
    assert _tamper_alerts(setup) == []
    assert cached.exists() and cached.stat().st_ctime_ns != before.st_ctime_ns  # written again, and kept


# -- the check on real files, called directly ----------------------------------------------------
def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def lib(tmp_path: Path) -> tuple[Path, Path, dict[str, ModuleType], float]:
    lib = tmp_path / "lib"
    (lib / "pkg").mkdir(parents=True)
    (lib / "pkg" / "__init__.py").write_text("A = 1\n")
    py_compile.compile(str(lib / "pkg" / "__init__.py"), doraise=True)
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "old.pth").write_text("/nowhere\n")
    time.sleep(0.05)  # past a tick of the coarse clock of status change times: the files above are before
    started = stamp(tmp_path)
    return lib, site_dir, {"pkg": _module(lib / "pkg" / "__init__.py")}, started


def test_nothing_changed_nothing_found(lib: Any) -> None:
    path, site_dir, mods, started = lib
    report = imports.check(started, lambda p: False, modules=mods, path=[str(path)], sites=[str(site_dir)])
    assert report == imports.ImportsReport()


def test_each_change_is_found(lib: Any, tmp_path: Path) -> None:
    path, site_dir, mods, started = lib
    cached = Path(mods["pkg"].__cached__)
    cached.write_bytes(b"forged")
    (path / "pkg" / "__init__.py").write_text("A = 2\n")
    (path / "sitecustomize.py").write_text("")
    (path / "pkg2").mkdir()
    (path / "pkg2" / "__init__.py").write_text("")  # a package of another name: not imported by spyglass
    (path / "notes.txt").write_text("")
    (site_dir / "new.pth").write_text("import os\n")
    report = imports.check(started, lambda p: False, modules=mods, path=[str(path)], sites=[str(site_dir)])
    assert report.bytecode == [str(cached)] and not cached.exists()
    assert report.changed == [str(path / "pkg" / "__init__.py")]
    assert sorted(report.shadowing) == sorted([str(path / "sitecustomize.py"), str(site_dir / "new.pth")])
    assert report.failed == []


def test_byte_code_written_again_as_python_makes_it_stays(lib: Any) -> None:
    """Spyglass writes the byte-code of a module it imports for the first time during the run (and
    a Python process of the run may write it): what Python makes of the source stays."""
    path, site_dir, mods, started = lib
    cached = Path(mods["pkg"].__cached__)
    cached.unlink()
    py_compile.compile(str(path / "pkg" / "__init__.py"), doraise=True)
    report = imports.check(started, lambda p: False, modules=mods, path=[str(path)], sites=[str(site_dir)])
    assert report == imports.ImportsReport() and cached.exists()


def test_a_package_put_ahead_and_a_cache_made_a_symlink_are_found(lib: Any, tmp_path: Path) -> None:
    path, site_dir, mods, started = lib
    ahead = tmp_path / "ahead"
    (ahead / "pkg").mkdir(parents=True)
    (ahead / "pkg" / "__init__.py").write_text("")
    cache = path / "pkg" / "__pycache__"
    cache.rename(tmp_path / "moved")
    cache.symlink_to(tmp_path / "moved")
    report = imports.check(started, lambda p: False, modules=mods, path=[str(ahead), str(path)],
                           sites=[str(site_dir)])
    assert report.shadowing == [str(ahead / "pkg")]
    assert report.changed == [str(cache)]
    assert (tmp_path / "moved").is_dir()  # nothing followed


def test_skipped_places_are_left_alone(lib: Any) -> None:
    path, site_dir, mods, started = lib
    Path(mods["pkg"].__cached__).write_bytes(b"forged")
    (path / "sitecustomize.py").write_text("")
    report = imports.check(started, lambda p: p.startswith(str(path)), modules=mods, path=[str(path)],
                           sites=[str(site_dir)])
    assert report == imports.ImportsReport()


def test_this_process_s_modules_are_checked_by_default() -> None:
    """The default is what is loaded here: a check against a start before any of it was written
    finds their files (nothing removed: ``remove=False``)."""
    report = imports.check(0.0, lambda p: False, remove=False)
    assert os.path.realpath(sys.modules["pytest"].__file__ or "") in {os.path.realpath(p) for p in report.changed}


def _library(tmp_path: Path) -> tuple[Path, float]:
    """A package of two modules with their byte-code, none of them loaded, older than the start."""
    lib = tmp_path / "libs"
    (lib / "fakelib").mkdir(parents=True)
    for name in ("__init__", "core"):
        py_compile.compile(str(_write(lib / "fakelib" / f"{name}.py", "A = 1\n")), doraise=True)
    time.sleep(0.05)  # past a tick of the coarse clock of status change times
    return lib, stamp(tmp_path)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_library_the_run_did_not_load_is_checked_as_if_it_were(tmp_path: Path) -> None:
    """click: the other commands load it, a plain ``spyglass run`` does not (spyglass/cli/direct.py);
    its forged byte-code or changed source runs in the next ``spyglass show`` all the same."""
    lib, started = _library(tmp_path)
    cached = Path(importlib.util.cache_from_source(str(lib / "fakelib" / "core.py")))
    cached.write_bytes(b"forged")
    _write(lib / "fakelib" / "__init__.py", "A = 2\n")
    kw: dict[str, Any] = {"modules": {}, "path": [str(lib)], "sites": [], "runs": [], "remove": False}
    control = imports.check(started, lambda p: False, libraries=(), **kw)
    assert control == imports.ImportsReport()  # (as before for a module no spyglass loaded)
    report = imports.check(started, lambda p: False, libraries=("fakelib",), **kw)
    assert report.bytecode == [str(cached)] and report.changed == [str(lib / "fakelib" / "__init__.py")], report


def test_benign_twin_a_library_not_loaded_and_not_changed_is_silent(tmp_path: Path) -> None:
    lib, started = _library(tmp_path)
    _write(lib / "notes.txt", "")
    report = imports.check(started, lambda p: False, modules={}, path=[str(lib)], sites=[], runs=[],
                           libraries=("fakelib", "missinglib"))
    assert report == imports.ImportsReport()
    assert sorted(imports.stand_ins(["fakelib"], [str(lib)])) == ["fakelib", "fakelib.core"]


def test_a_single_file_library_the_run_did_not_load_is_checked_as_if_it_were(tmp_path: Path) -> None:
    """``typing_extensions`` (and ``inspect``, ``ast``...): msgspec loads it unless spyglass is
    imported first (spyglass/__init__.py), so a plain ``spyglass run`` has it not loaded; another
    program importing msgspec first runs it.  A module of one file is a stand-in as a package is."""
    lib, started = _library(tmp_path)
    py_compile.compile(str(_write(lib / "fakemod.py", "A = 1\n")), doraise=True)
    cached = Path(importlib.util.cache_from_source(str(lib / "fakemod.py")))
    time.sleep(0.05)
    started = stamp(tmp_path)
    cached.write_bytes(b"forged")
    kw: dict[str, Any] = {"modules": {}, "path": [str(lib)], "sites": [], "runs": [], "remove": False}
    assert imports.check(started, lambda p: False, libraries=(), **kw) == imports.ImportsReport()  # the control
    report = imports.check(started, lambda p: False, libraries=("fakemod",), **kw)
    assert report.bytecode == [str(cached)] and report.changed == [], report
    assert sorted(imports.stand_ins(["fakemod", "fakelib"], [str(lib)])) == ["fakelib", "fakelib.core", "fakemod"]


def test_benign_twin_a_single_file_library_not_changed_is_silent(tmp_path: Path) -> None:
    lib, started = _library(tmp_path)
    py_compile.compile(str(_write(lib / "fakemod.py", "A = 1\n")), doraise=True)
    time.sleep(0.05)
    started = stamp(tmp_path)
    report = imports.check(started, lambda p: False, modules={}, path=[str(lib)], sites=[], runs=[],
                           libraries=("fakemod",))
    assert report == imports.ImportsReport()


def test_the_libraries_a_plain_run_leaves_unloaded_are_stand_ins() -> None:
    """What msgspec no longer loads in a ``spyglass run`` is among the libraries checked as if loaded."""
    assert {"click", "typing_extensions", "inspect", "ast", "dis", "tokenize"} <= set(imports.LIBRARIES)
    assert {"difflib", "heapq"} <= set(imports.LIBRARIES)  # imported after the agent ran, for a diff
    found = imports.stand_ins(["typing_extensions", "inspect"])
    assert {"typing_extensions", "inspect"} <= set(found)
    assert all(str(getattr(m, "__file__", "")).endswith(".py") for m in found.values())


def test_a_single_file_library_changed_in_place_or_put_ahead_is_said_as_what_it_is(tmp_path: Path) -> None:
    lib, _ = _library(tmp_path)
    ahead = tmp_path / "ahead"
    ahead.mkdir()
    _write(lib / "fakemod.py", "A = 1\n")
    time.sleep(0.05)
    started = stamp(tmp_path)
    kw: dict[str, Any] = {"modules": {}, "sites": [], "runs": [], "remove": False, "libraries": ("fakemod",)}
    _write(ahead / "fakemod.py", "A = 2\n")  # put ahead of the one installed
    report = imports.check(started, lambda p: False, path=[str(ahead), str(lib)], **kw)
    assert report.shadowing == [str(ahead / "fakemod.py")] and report.changed == [], report
    (ahead / "fakemod.py").unlink()
    _write(lib / "fakemod.py", "A = 3\n")  # the installed one changed in place
    report = imports.check(started, lambda p: False, path=[str(ahead), str(lib)], **kw)
    assert report.changed == [str(lib / "fakemod.py")] and report.shadowing == [], report
    control = imports.check(started, lambda p: False, path=[str(ahead), str(lib)], **{**kw, "libraries": ()})
    assert control.changed == []  # without the stand-in an in-place change goes unseen: what it adds


def test_a_single_file_library_ahead_on_the_path_changed_in_place_is_changed(tmp_path: Path) -> None:
    """A copy of the library ahead of the installed one, there before the run, edited in place (its
    directory unchanged, so the scan of the import path does not look there): still ``changed``."""
    lib, _ = _library(tmp_path)
    ahead = tmp_path / "ahead"
    ahead.mkdir()
    _write(lib / "fakemod.py", "A = 1\n")
    _write(ahead / "fakemod.py", "A = 1\n")
    time.sleep(0.05)
    started = stamp(tmp_path)
    with (ahead / "fakemod.py").open("a") as f:  # in place: no entry made or removed in ``ahead``
        f.write("import os  # planted\n")
    kw: dict[str, Any] = {"modules": {}, "sites": [], "runs": [], "remove": False, "path": [str(ahead), str(lib)]}
    report = imports.check(started, lambda p: False, libraries=("fakemod",), **kw)
    assert report.changed == [str(ahead / "fakemod.py")] and report.shadowing == [], report
    assert imports.check(started, lambda p: False, libraries=(), **kw).changed == []  # the control


def test_changed_below_finds_what_the_run_wrote_with_those_suffixes(tmp_path: Path) -> None:
    from spyglass.witness.endofrun import changed_below

    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    old = _write(tmp_path / "pkg" / "old.py", "")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "pkg" / "link").symlink_to(tmp_path / "elsewhere")  # not followed
    time.sleep(0.05)
    started = stamp(tmp_path)
    new = [_write(tmp_path / "pkg" / "__pycache__" / "m.cpython-311.pyc", ""), _write(tmp_path / "pkg" / "n.py", "")]
    _write(tmp_path / "pkg" / "notes.txt", "")
    _write(tmp_path / "elsewhere" / "x.py", "")
    assert changed_below([str(tmp_path / "pkg")], started, (".py", ".pyc", ".so")) == {str(p) for p in new}
    assert str(old) not in changed_below([str(tmp_path / "pkg")], 0.0, (".pyc",))
