"""The agent forges spyglass's own byte-code, so that its code runs in the next spyglass.

Writes to spyglass's ``__pycache__`` raise no alert (any Python process of the run that imports
spyglass writes there), so the guard removes what the run wrote there when the run ends
(docs/threat-model.md).  The attack is played for real: a Python process of the run writes a
``termcolor`` byte-code file with the source's size and time in its header, whose code leaves a
marker before doing what the module does; the next ``spyglass`` command must not leave it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import spyglass.termcolor

SOURCE = Path(spyglass.termcolor.__file__).resolve()
CACHED = Path(importlib.util.cache_from_source(str(SOURCE)))

FORGE = r"""
import importlib._bootstrap_external as be, marshal, os, sys
src, cached, marker, via = sys.argv[1:5]
st = os.stat(src)
evil = f"open({marker!r}, 'w').write('ran')\nexec(compile(open({src!r}).read(), {src!r}, 'exec'))\n"
data = be._code_to_timestamp_pyc(compile(evil, src, "exec"), st.st_mtime, st.st_size)
if via == "rename":  # written elsewhere, then moved in (importlib's own way of writing it)
    tmp = os.path.join(os.environ["TMPDIR"], "t.pyc")
    open(tmp, "wb").write(data)
    os.replace(tmp, cached)
else:
    open(cached, "wb").write(data)
"""


def _forge(setup: Any, via: str) -> tuple[Any, Path]:
    marker = setup.ws.parent / "marker"
    script = setup.ws.parent / "forge.py"
    script.write_text(FORGE)
    tmp = setup.ws.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    setup.env["TMPDIR"] = str(tmp)
    try:
        res = setup.spyglass("run", "--backend", setup.backend, "--store", str(setup.store), "--",
                             setup.python, str(script), str(SOURCE), str(CACHED), str(marker), via)
        assert res.returncode == 0, res.stderr
        return res, marker
    except BaseException:
        CACHED.unlink(missing_ok=True)  # never leave a forged module for the tests that follow
        raise


def _own_bytecode(setup: Any) -> dict[str, Any]:
    (run,) = (setup.store / "runs").iterdir()
    meta = json.loads((run / "run.json").read_text())
    found: dict[str, Any] = meta.get("extra", {}).get("own_bytecode", {})
    return found


def _next_spyglass_runs_clean(setup: Any, marker: Path) -> None:
    try:
        res = setup.spyglass("ls", "--store", str(setup.store))  # imports spyglass.termcolor
        assert res.returncode == 0, res.stderr
        assert not marker.exists(), "the forged byte-code ran in the next spyglass"
    finally:
        if marker.exists():
            CACHED.unlink(missing_ok=True)


def test_the_forgery_runs_in_the_next_spyglass_when_nothing_removes_it(setup: Any) -> None:
    """The control: forged outside any run, the byte-code is what the next spyglass runs."""
    import subprocess

    marker = setup.ws.parent / "marker"
    script = setup.ws.parent / "forge.py"
    script.write_text(FORGE)
    try:
        subprocess.run([setup.python, str(script), str(SOURCE), str(CACHED), str(marker), "write"], check=True,
                       env=setup.env, timeout=60)
        res = setup.spyglass("ls", "--store", str(setup.store))
        assert res.returncode == 0, res.stderr
        assert marker.read_text() == "ran"
    finally:
        CACHED.unlink(missing_ok=True)


def test_forged_byte_code_written_in_place_is_removed_at_the_end_of_the_run(setup: Any) -> None:
    res, marker = _forge(setup, "write")
    assert not marker.exists()  # nothing of the run imported it
    facts = _own_bytecode(setup)
    assert facts.get("removed") == [str(CACHED)] and facts.get("failed") == [], facts
    _next_spyglass_runs_clean(setup, marker)
    assert "witness-tamper" not in res.stderr


def test_forged_byte_code_moved_in_is_removed_at_the_end_of_the_run(setup: Any) -> None:
    _, marker = _forge(setup, "rename")
    facts = _own_bytecode(setup)
    assert str(CACHED) in facts.get("removed", []), facts  # the name it was moved to (and its temporary one)
    _next_spyglass_runs_clean(setup, marker)


def test_benign_twin_byte_code_of_the_workspace_stays(setup: Any) -> None:
    """The agent's own byte-code (its workspace's ``__pycache__``) is the agent's: left alone,
    and the run records nothing of spyglass's."""
    (setup.ws / "mod.py").write_text("X = 1\n")
    res = setup.run(f"{setup.python} -m py_compile mod.py && ls __pycache__ > listed.txt")
    assert res.returncode == 0, res.stderr
    kept = list((setup.ws / "__pycache__").glob("mod.*.pyc"))
    assert kept and (setup.ws / "listed.txt").read_text().strip(), res.stderr
    assert _own_bytecode(setup) == {}
    assert "witness" not in res.stderr, res.stderr
    assert os.path.exists(kept[0])


def test_too_many_names_remove_every_byte_code_file_changed_during_the_run(tmp_path: Path,
                                                                          monkeypatch: Any) -> None:
    """Past the names it keeps, the guard removes every file of spyglass's ``__pycache__`` changed
    since the run started (by status change time, which no process can set): an agent cannot
    hide its forgery behind many other writes.  Files from before the run stay.  (The guard is
    fed events here; the two tests above run it under both backends.)"""
    import time

    from spyglass.events import Event
    from spyglass.pipeline import RunContext
    from spyglass.store.meta import RunMeta
    from spyglass.witness import guard as g

    own = tmp_path / "own"
    cache = own / "pkg" / "__pycache__"
    cache.mkdir(parents=True)
    (own / "pkg" / "m.py").write_text("X = 1\n")
    before = cache / "old.cpython-311.pyc"
    before.write_bytes(b"old")
    time.sleep(3 * g.CTIME_SLACK)  # the run starts later than its status change time, and its clock's tick
    prot = g.Protected()
    prot.add_place(own, g.OWN_SOURCE, tree=True)
    guard = g.WitnessGuard(prot)
    ctx = RunContext(run=RunMeta(id="r"))
    guard.start(ctx)
    monkeypatch.setattr(g, "MAX_BYTECODE", 2)
    names = [cache / f"n{i}.cpython-311.pyc" for i in range(5)]
    for i, name in enumerate(names):
        name.write_bytes(b"forged")
        guard.event(Event(type="file.create", pid=7, path=str(name), seq=i + 1))
    assert guard.bytecode_overflow and len(guard.bytecode) == 2
    guard.done(ctx)
    assert not any(n.exists() for n in names) and before.exists()
    assert sorted(ctx.run.extra["own_bytecode"]["removed"]) == sorted(str(n) for n in names)
