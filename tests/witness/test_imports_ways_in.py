"""More ways into what the next spyglass runs besides its own package (spyglass.witness.imports),
each played with a real run and checked against what the next spyglass command does.

* a line added to a ``.pth`` file already in a site directory (the directory itself unchanged);
* a directory of the import path reached through a symlink (its own status change time is the
  link's);
* a zip archive put at an entry of the import path (``python311.zip`` comes first);
* a package or extension put ahead of a loaded submodule inside its package's directory;
* the byte-code of a module of a loaded package that this run did not import but another
  command does (``click._textwrap`` for ``--help``);
* the interpreter a virtual environment's ``bin/python`` names, and its ``pyvenv.cfg``;
* with ``python -m spyglass``, a module put in the working directory (first on the import path,
  even when it is the workspace);
* byte-code that compares equal to what Python makes of the source but holds specialised
  instructions.

Spyglass is given modules of its own (``PYTHONPATH``, or a virtual environment of the test's own
that reaches spyglass and its libraries through ``PYTHONPATH``): nothing here changes the real
environment's files.  Each has a benign twin.  The check runs at the end of the run whatever the
capture saw: played once, under the default backend."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import spyglass
from spyglass.witness import imports

pytestmark = pytest.mark.backends("auto")

REPO = Path(spyglass.__file__).resolve().parent.parent
SITE = next(p for p in sys.path if p.endswith("site-packages"))  # this environment's: click, msgspec

def _facts(setup: Any) -> dict[str, Any]:
    (run,) = (setup.store / "runs").iterdir()
    found: dict[str, Any] = json.loads((run / "run.json").read_text()).get("extra", {}).get("imports", {})
    return found


def _tamper(setup: Any) -> list[str]:
    (run,) = (setup.store / "runs").iterdir()
    lines = (run / "alerts.jsonl").read_text().splitlines() if (run / "alerts.jsonl").exists() else []
    return [a["message"] for a in map(json.loads, lines) if a.get("rule_id") == "witness-tamper"]


def _old(*paths: Path) -> None:
    """Older than the run, as installed files are (their status change time too: a tick passes)."""
    for p in paths:
        os.utime(p, (time.time() - 60, time.time() - 60), follow_symlinks=False)
    time.sleep(0.05)


def _deps(setup: Any) -> Path:
    deps = setup.ws.parent / "deps"
    deps.mkdir()
    return deps


def _venv(setup: Any) -> tuple[Path, Path]:
    """A virtual environment of the test's own (no pip) whose python runs spyglass: (its python,
    its site-packages), with an ``old.pth`` there that names a directory."""
    venv = setup.ws.parent / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site_dir,) = (venv / "lib").glob("python*/site-packages")
    (site_dir / "old.pth").write_text(f"{setup.ws.parent / 'nowhere'}\n")
    setup.env["PYTHONPATH"] = f"{REPO}:{SITE}"
    _old(site_dir / "old.pth", venv / "pyvenv.cfg")
    return venv / "bin" / "python", site_dir


def _spyglass_with(setup: Any, python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "spyglass", *args], cwd=setup.ws, env=setup.env,
                          capture_output=True, text=True, timeout=120, check=False)


def _run_with(setup: Any, python: Path, script: str) -> subprocess.CompletedProcess[str]:
    return _spyglass_with(setup, python, "run", "--store", str(setup.store), "--", "/bin/sh", "-c", script)


# -- a .pth file changed in place -----------------------------------------------------------------
def test_a_line_added_to_a_pth_file_already_there_is_an_alert(setup: Any) -> None:
    python, site_dir = _venv(setup)
    marker = setup.ws.parent / "marker"
    res = _run_with(setup, python, f"echo \"import os; open('{marker}', 'w').write('ran')\" >> {site_dir}/old.pth")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert any(f"{site_dir}/old.pth" in m for m in alerts), alerts
    assert _facts(setup).get("shadowing") == [f"{site_dir}/old.pth"]
    _spyglass_with(setup, python, "ls", "--store", str(setup.store))
    assert marker.read_text() == "ran"  # the attack is real: left there (it may be the user's), it runs next


def test_benign_twin_a_pth_file_read_and_other_files_there_are_silent(setup: Any) -> None:
    python, site_dir = _venv(setup)
    res = _run_with(setup, python, f"cat {site_dir}/old.pth > /dev/null && echo x > {site_dir}/notes.txt"
                                   f" && echo 'X = 1' > {site_dir}/newmod.py && mkdir {site_dir}/newpkg"
                                   f" && echo 'X = 1' > {site_dir}/newpkg/__init__.py")  # modules installed there
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}


# -- the virtual environment's interpreter and pyvenv.cfg -----------------------------------------
def test_the_interpreter_named_by_the_venv_and_its_pyvenv_cfg_changed_are_alerts(setup: Any) -> None:
    python, _ = _venv(setup)
    marker = setup.ws.parent / "marker"
    real = os.path.realpath(python)
    wrapper = setup.ws.parent / "wrapper"
    wrapper.write_text(f"#!/bin/sh\necho ran > {marker}\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    cfg = python.parent.parent / "pyvenv.cfg"
    command = python.parent / "spyglass"  # the command beside the python (this run is `python -m spyglass`)
    res = _run_with(setup, python, f"ln -sfn {wrapper} {python} && echo 'x = 1' >> {cfg} && echo x > {command}")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert any(str(command) in m for m in alerts), alerts
    assert any(str(python) in m and "changed" in m for m in alerts), alerts
    assert any(str(cfg) in m for m in alerts), alerts
    _spyglass_with(setup, python, "ls", "--store", str(setup.store))
    assert marker.read_text() == "ran\n"  # the attack is real: the next spyglass starts through it


def test_benign_twin_a_venv_made_and_used_in_the_run_is_silent(setup: Any) -> None:
    """Another virtual environment made in the run, a script of it run, the workspace compiled."""
    python, _ = _venv(setup)
    env2 = setup.ws.parent / "env2"  # outside the workspace, as pip installs into another environment
    (setup.ws / "app.py").write_text("import json, csv, email.message, argparse\nprint(json.dumps([1]))\n")
    res = _run_with(setup, python, f"{sys.executable} -m venv --without-pip {env2} && {env2}/bin/python "
                                   f"{setup.ws}/app.py && {sys.executable} -m compileall -q {setup.ws}")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}


# -- the import path: through a symlink, a zip archive ---------------------------------------------
def test_a_module_put_in_a_directory_of_the_import_path_reached_by_a_symlink_is_an_alert(setup: Any) -> None:
    deps = _deps(setup)
    link = setup.ws.parent / "link"
    link.symlink_to(deps)
    _old(deps)
    setup.env["PYTHONPATH"] = str(link)
    res = setup.run(f"echo 'raise SystemExit(\"forged click\")' > {deps}/click.py")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert any(f"{link}/click.py" in m and "import path" in m for m in alerts), alerts
    res = setup.spyglass("ls", "--store", str(setup.store))
    assert res.returncode != 0 and "forged click" in res.stderr  # the attack is real


def test_a_zip_archive_put_on_the_import_path_is_an_alert(setup: Any) -> None:
    deps = _deps(setup)
    archive = deps / "ahead.zip"
    _old(deps)
    setup.env["PYTHONPATH"] = f"{archive}:{deps}"  # as python311.zip comes before the standard library
    make = setup.ws.parent / "make.py"
    make.write_text("import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
                    "    z.writestr('click/__init__.py', 'raise SystemExit(\"forged click\")')\n")
    res = setup.run(f"{sys.executable} {make} {archive}")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert any(str(archive) in m and "import path" in m for m in alerts), alerts
    res = setup.spyglass("ls", "--store", str(setup.store))
    assert res.returncode != 0 and "forged click" in res.stderr  # the attack is real


def test_benign_twin_a_zip_archive_elsewhere_and_files_through_the_symlink_are_silent(setup: Any) -> None:
    deps = _deps(setup)
    link = setup.ws.parent / "link"
    link.symlink_to(deps)
    _old(deps)
    setup.env["PYTHONPATH"] = f"{link}:{deps / 'absent.zip'}"
    res = setup.run(f"echo notes > {link}/notes.txt && cd {setup.ws} && "
                    f"{sys.executable} -c \"import zipfile; zipfile.ZipFile('out.zip', 'w').close()\"")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}


# -- inside a loaded package ------------------------------------------------------------------------
SITECUSTOMIZE = "import sys, sitepkg.sub\nif 'ls' in sys.argv:\n    import sitepkg.lazy\n"


def _package(setup: Any) -> Path:
    """``sitepkg`` with ``sub`` (imported by every spyglass) and ``lazy`` (only by ``spyglass ls``),
    their byte-code written, all older than the run."""
    deps = _deps(setup)
    pkg = deps / "sitepkg"
    pkg.mkdir()
    (deps / "sitecustomize.py").write_text(SITECUSTOMIZE)
    for name in ("__init__", "sub", "lazy"):
        (pkg / f"{name}.py").write_text(f"NAME = {name!r}\n")
    _old(*(pkg / f"{n}.py" for n in ("__init__", "sub", "lazy")))
    for source in [deps / "sitecustomize.py", *pkg.glob("*.py")]:
        py_compile.compile(str(source), doraise=True)
    _old(pkg, pkg / "__pycache__", deps)
    setup.env["PYTHONPATH"] = str(deps)
    return pkg


@pytest.mark.parametrize("name", ["sub", "lazy"])  # a submodule spyglass loaded; one only another command imports
def test_a_package_put_ahead_of_a_module_in_a_loaded_package_is_an_alert(setup: Any, name: str) -> None:
    """A package comes before a module of its name in the same directory: ``sitepkg/sub/`` before
    ``sitepkg/sub.py``, whether this spyglass loaded the module or only ``spyglass ls`` imports it."""
    pkg = _package(setup)
    marker = setup.ws.parent / "marker"
    res = setup.run(f"mkdir {pkg}/{name} && echo \"open('{marker}', 'w').write('ran')\" > {pkg}/{name}/__init__.py")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert any(f"{pkg}/{name}" in m and "import path" in m for m in alerts), alerts
    setup.spyglass("ls", "--store", str(setup.store))
    assert marker.read_text() == "ran"  # the attack is real


def test_forged_byte_code_of_a_module_another_command_imports_is_removed(setup: Any,
                                                                         forger: Any, next_spyglass: Any) -> None:
    pkg = _package(setup)
    forge, marker = forger
    cached = pkg / "__pycache__" / f"lazy.{sys.implementation.cache_tag}.pyc"
    res = setup.run(f"{sys.executable} {forge} {pkg}/lazy.py {cached} {marker}")
    assert res.returncode == 0, res.stderr
    assert _facts(setup).get("bytecode") == [str(cached)], _facts(setup)
    assert _tamper(setup) == []
    next_spyglass()
    assert not marker.exists(), "the forged byte-code ran in the next spyglass"


def test_the_lazy_module_forgery_runs_in_the_next_spyglass_when_nothing_removes_it(
        setup: Any, forger: Any, next_spyglass: Any) -> None:
    """The control: ``spyglass ls`` imports ``sitepkg.lazy`` and runs its byte-code."""
    pkg = _package(setup)
    forge, marker = forger
    cached = pkg / "__pycache__" / f"lazy.{sys.implementation.cache_tag}.pyc"
    subprocess.run([sys.executable, str(forge), str(pkg / "lazy.py"), str(cached), str(marker)], check=True,
                   timeout=60)
    next_spyglass()
    assert marker.read_text() == "ran"


def test_benign_twin_byte_code_of_a_package_written_as_python_does_is_kept(setup: Any) -> None:
    """A Python process of the run compiling the package and importing its modules, files of other
    names in it: nothing said, nothing removed."""
    pkg = _package(setup)
    for f in (pkg / "__pycache__").iterdir():
        f.unlink()
    env = {k: v for k, v in setup.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    setup.env = env
    res = setup.run(f"{sys.executable} -m compileall -q {pkg} && echo x > {pkg}/README.txt && mkdir {pkg}/data"
                    f" && {sys.executable} -c 'import sitepkg.lazy'")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}
    assert (pkg / "__pycache__" / f"lazy.{sys.implementation.cache_tag}.pyc").exists()


SPECIALISE = r"""
import dis, importlib._bootstrap_external as be, marshal, os, sys
src = sys.argv[1]
st = os.stat(src)
code = compile(open(src, "rb").read(), src, "exec", dont_inherit=True)
data = bytearray(marshal.dumps(code))
body = code.co_consts[0].co_code  # f's instructions: its LOAD_GLOBAL made LOAD_GLOBAL_BUILTIN
at = data.find(body) + body.index(bytes([dis.opmap["LOAD_GLOBAL"]]))
data[at] = dis._all_opmap["LOAD_GLOBAL_BUILTIN"]
assert marshal.loads(bytes(data)) == code  # == maps specialised instructions to their generic ones
header = be._code_to_timestamp_pyc(code, st.st_mtime, st.st_size)[:16]
open(sys.argv[2], "wb").write(header + bytes(data))  # as stored: marshal.dumps would write them generic
"""


def test_byte_code_equal_to_the_source_s_but_with_specialised_instructions_is_removed(setup: Any) -> None:
    pkg = _package(setup)
    (pkg / "sub.py").write_text("def f():\n    return len('abc')\n")
    _old(pkg / "sub.py")
    py_compile.compile(str(pkg / "sub.py"), doraise=True)
    time.sleep(0.05)
    cached = pkg / "__pycache__" / f"sub.{sys.implementation.cache_tag}.pyc"
    forge = setup.ws.parent / "forge.py"
    forge.write_text(SPECIALISE)
    res = setup.run(f"{sys.executable} {forge} {pkg}/sub.py {cached}")
    assert res.returncode == 0, res.stderr
    assert _facts(setup).get("bytecode") == [str(cached)], _facts(setup)
    assert not cached.exists()


# -- python -m spyglass: the working directory ------------------------------------------------------
def test_with_python_m_a_module_put_in_the_working_directory_is_not_what_spyglass_imports(setup: Any) -> None:
    """``python -m spyglass`` puts the working directory (here the workspace) first on the import
    path; spyglass takes it off before it imports anything (spyglass/__init__.py), so a
    ``msgspec.py`` or a ``json`` package written there is not what the next ``python -m spyglass``
    started there runs, and nothing is said of the workspace's files.  The control: another
    ``python -m`` started there does import it."""
    marker = setup.ws.parent / "marker"
    forged = f"open('{marker}', 'w').write('ran'); raise SystemExit('forged')"
    res = setup.run(f"echo \"{forged}\" > msgspec.py && mkdir json && echo \"{forged}\" > json/__init__.py")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}
    res = setup.spyglass("ls", "--store", str(setup.store))
    assert res.returncode == 0 and not marker.exists(), res.stderr
    (setup.ws / "probe").mkdir()
    (setup.ws / "probe" / "__init__.py").write_text("import msgspec\n")
    (setup.ws / "probe" / "__main__.py").write_text("")
    res = subprocess.run([sys.executable, "-m", "probe"], cwd=setup.ws, env=setup.env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert marker.read_text() == "ran", res.stderr  # the attack is real for a program that keeps the path


@pytest.mark.parametrize("made", [
    "mkdir spyglass && echo \"$FORGED\" > spyglass/__init__.py",
    "echo \"$FORGED\" > spyglass.py",
    # no __init__: under an editable install spyglass is then a namespace package, this directory first
    "mkdir -p spyglass/cli && touch spyglass/cli/__init__.py && echo \"$FORGED\" > spyglass/cli/launch.py",
], ids=["package", "module", "namespace"])  # fmt: skip
def test_with_python_m_a_spyglass_made_in_the_working_directory_is_tamper(setup: Any, made: str) -> None:
    """The one name ``python -m spyglass`` cannot take off its path: ``spyglass`` itself is imported
    from the working directory before any of its code runs.  The next ``python -m spyglass`` started
    there is not the real one (the control: it runs the forgery, or, a namespace package under an
    install that is not editable, it starts from the real package), so the end of the run says so."""
    marker = setup.ws.parent / "marker"
    setup.env["FORGED"] = f"open('{marker}', 'w').write('ran'); raise SystemExit('forged')"
    res = setup.run(made)
    assert "Traceback" not in res.stderr, res.stderr
    forged = setup.ws / ("spyglass.py" if made.startswith("echo") else "spyglass")
    assert _facts(setup).get("shadowing") == [str(forged)], res.stderr
    assert any(str(forged) in m for m in _tamper(setup)), _tamper(setup)
    res = setup.spyglass("ls", "--store", str(setup.store))
    editable = not (Path(SITE) / "spyglass").is_dir()
    if "cli" not in made or editable:
        assert marker.read_text() == "ran" and "forged" in res.stderr  # the attack is real


def test_benign_twin_with_python_m_names_like_spyglass_are_silent(setup: Any) -> None:
    """Files and packages named like spyglass but not it, and a ``spyglass`` package deeper down:
    nothing said, and the next ``python -m spyglass`` there is the real one."""
    res = setup.run("echo x > spyglass.txt && mkdir spyglass_notes && touch spyglass_notes/__init__.py"
                    " && mkdir -p src/spyglass && touch src/spyglass/__init__.py")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}
    res = setup.spyglass("ls", "--store", str(setup.store))
    assert res.returncode == 0, res.stderr


def test_benign_twin_with_python_m_work_in_the_working_directory_is_silent(setup: Any) -> None:
    res = setup.run("mkdir -p pkg src && echo 'X = 1' > helper.py && touch pkg/__init__.py && echo x > notes.txt"
                    f" && {sys.executable} -m compileall -q . && {sys.executable} helper.py")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}


# -- byte-code of modules no spyglass loaded yet: seen written by the run's events -------------------
LAZY = "import sys\nif 'ls' in sys.argv:\n    import lazytop, lazypkg.mod\n"


def _lazy(setup: Any) -> tuple[Path, list[Path]]:
    """``lazytop`` and the package ``lazypkg``, which only ``spyglass ls`` imports (as ``gate``
    imports ``copy`` and ``xml``), compiled, older than the run: (deps, [their sources])."""
    deps = _deps(setup)
    (deps / "lazypkg").mkdir()
    sources = [deps / "lazytop.py", deps / "lazypkg" / "__init__.py", deps / "lazypkg" / "mod.py"]
    (deps / "sitecustomize.py").write_text(LAZY)
    for src in sources:
        src.write_text("X = 1\n")
    _old(*sources)
    for src in [deps / "sitecustomize.py", *sources]:
        py_compile.compile(str(src), doraise=True)
    _old(deps)
    setup.env["PYTHONPATH"] = str(deps)
    return deps, sources


@pytest.mark.backends("strace", "ebpf")
def test_forged_byte_code_of_modules_no_spyglass_loaded_is_removed(setup: Any, forger: Any, next_spyglass: Any) -> None:
    _, sources = _lazy(setup)
    forge, marker = forger
    cached = [Path(importlib.util.cache_from_source(str(s))) for s in sources]
    res = setup.run(" && ".join(f"{sys.executable} {forge} {s} {c} {marker}" for s, c in zip(sources, cached,
                                                                                             strict=True)))
    assert res.returncode == 0, res.stderr
    assert sorted(_facts(setup).get("bytecode", [])) == sorted(map(str, cached)), _facts(setup)
    assert _tamper(setup) == [] and not any(c.exists() for c in cached)
    next_spyglass()
    assert not marker.exists(), "the forged byte-code ran in the next spyglass"


def test_the_forgery_of_a_module_no_spyglass_loaded_runs_next_when_nothing_removes_it(
        setup: Any, forger: Any, next_spyglass: Any) -> None:
    """The control: ``spyglass ls`` imports ``lazypkg.mod`` and runs its byte-code."""
    _, sources = _lazy(setup)
    forge, marker = forger
    cached = importlib.util.cache_from_source(str(sources[2]))
    subprocess.run([sys.executable, str(forge), str(sources[2]), cached, str(marker)], check=True, timeout=60)
    next_spyglass()
    assert marker.read_text() == "ran"


@pytest.mark.backends("strace", "ebpf")
def test_benign_twin_byte_code_of_modules_no_spyglass_loaded_written_by_python_is_kept(setup: Any) -> None:
    deps, sources = _lazy(setup)
    cached = [Path(importlib.util.cache_from_source(str(s))) for s in sources]
    for c in cached:
        c.unlink()
    setup.env = {k: v for k, v in setup.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    res = setup.run(f"{sys.executable} -c 'import lazytop, lazypkg.mod' && {sys.executable} -m compileall -q {deps}")
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}
    assert all(c.exists() for c in cached)


@pytest.mark.backends("strace", "ebpf")
def test_the_source_of_modules_no_spyglass_loaded_changed_is_an_alert(setup: Any) -> None:
    _, sources = _lazy(setup)
    marker = setup.ws.parent / "marker"
    res = setup.run(f"echo \"open('{marker}', 'w').write('ran')\" >> {sources[0]} && echo 'Y = 2' >> {sources[2]}")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert all(any(str(s) in m and "changed" in m for m in alerts) for s in (sources[0], sources[2])), alerts
    setup.spyglass("ls", "--store", str(setup.store))
    assert marker.read_text() == "ran"  # the attack is real: left there (it may be an upgrade), it runs next


def test_a_directory_a_pth_file_names_made_with_a_start_hook_is_an_alert(setup: Any) -> None:
    """``old.pth`` names a directory that is not there: a Python start adds it once it is."""
    python, _ = _venv(setup)
    nowhere = setup.ws.parent / "nowhere"
    marker = setup.ws.parent / "marker"
    res = _run_with(setup, python, f"mkdir {nowhere} && echo \"open('{marker}', 'w').write('ran')\""
                                   f" > {nowhere}/sitecustomize.py")
    assert res.returncode == 0, res.stderr
    alerts = _tamper(setup)
    assert any(f"{nowhere}/sitecustomize.py" in m for m in alerts), alerts
    _spyglass_with(setup, python, "ls", "--store", str(setup.store))
    assert marker.read_text() == "ran"  # the attack is real


# -- header games, a rename ---------------------------------------------------------------------------
def test_unchecked_hash_byte_code_and_an_older_file_renamed_over_a_module_are_found(setup: Any) -> None:
    """Byte-code Python never checks against its source (``--invalidation-mode unchecked-hash``)
    is removed; a file made before the run renamed over a loaded module (its status change time
    moves with the rename) is an alert."""
    pkg = _package(setup)
    twin = setup.ws.parent / "twin.py"
    twin.write_text("NAME = 'twin'\n")
    _old(twin)
    evil = setup.ws.parent / "evil.py"
    evil.write_text("NAME = 'evil'\n")
    cached = pkg / "__pycache__" / f"lazy.{sys.implementation.cache_tag}.pyc"
    res = setup.run(f"{sys.executable} -c \"import py_compile; py_compile.compile('{evil}', cfile='{cached}', "
                    f"invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\" && mv {twin} {pkg}/sub.py")
    assert res.returncode == 0, res.stderr
    assert _facts(setup).get("bytecode") == [str(cached)] and not cached.exists(), _facts(setup)
    assert any(f"{pkg}/sub.py" in m and "changed" in m for m in _tamper(setup)), _tamper(setup)


def _flood(setup: Any) -> tuple[Path, str]:
    """A directory outside the import path, and the command that makes one module file more there
    than the end-of-run check keeps by name."""
    junk = setup.ws.parent / "junk"
    code = (f"import os; os.mkdir({str(junk)!r})\n"
            f"for i in range({imports.MAX_ENTRIES + 1}): open(os.path.join({str(junk)!r}, f'm{{i}}.py'), 'w').close()")
    return junk, f"{sys.executable} -c {shlex.quote(code)}"


def test_a_forgery_hidden_behind_a_flood_of_module_names_is_still_removed(setup: Any, forger: Any,
                                                                        next_spyglass: Any) -> None:
    """The run's events name more module files than the end-of-run check keeps one by one
    (``imports.MAX_ENTRIES``: 20,001 empty ``.py`` files made outside the import path) before the
    forged byte-code of a module no spyglass loaded: the check walks the import path instead."""
    _, sources = _lazy(setup)
    forge, marker = forger
    cached = Path(importlib.util.cache_from_source(str(sources[2])))
    junk, flood = _flood(setup)
    res = setup.run(f"{flood} && {sys.executable} {forge} {sources[2]} {cached} {marker}")
    assert res.returncode == 0, res.stderr
    assert len(list(junk.iterdir())) == imports.MAX_ENTRIES + 1
    assert _facts(setup).get("bytecode") == [str(cached)], _facts(setup)
    assert not cached.exists()
    next_spyglass()
    assert not marker.exists(), "the forged byte-code ran in the next spyglass"


def test_benign_twin_a_flood_of_module_files_alone_is_silent(setup: Any) -> None:
    _, sources = _lazy(setup)
    _, flood = _flood(setup)
    res = setup.run(flood)
    assert res.returncode == 0, res.stderr
    assert _tamper(setup) == [] and _facts(setup) == {}
    assert all(Path(importlib.util.cache_from_source(str(s))).exists() for s in sources)
