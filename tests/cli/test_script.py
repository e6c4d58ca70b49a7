"""The console script ``setup.sh`` installs (spyglass/cli/script.py): ``python -I -S`` with this
environment's site-packages and spyglass's checkout on its own, so the ``PYTHON*`` variables of the
shell it is started from choose none of the code it runs.

The attack: a ``PYTHONPATH`` left in the environment (a recorded agent writes a shell's rc file or a
harness's env file) naming a directory with a ``sitecustomize.py`` and a ``click.py``: every Python
started with ``site`` and that variable runs them, before and instead of spyglass's own code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.cli import script


def _install(tmp_path: Path) -> Path:
    text = script.for_this_install()
    if text is None:
        pytest.skip(f"{sys.executable!r} cannot be a #! line")
    out = tmp_path / "bin" / "spyglass"
    out.parent.mkdir()
    assert script.main([str(out)]) == 0
    assert out.read_text() == text
    return out


def _forged(tmp_path: Path) -> tuple[Path, Path]:
    """A directory for ``PYTHONPATH`` whose ``sitecustomize`` and ``click`` leave a mark, and the mark."""
    mark = tmp_path / "ran"
    evil = tmp_path / "evil"
    evil.mkdir()
    for name in ("sitecustomize", "click"):
        (evil / f"{name}.py").write_text(f"open({str(mark)!r}, 'a').write({name!r} + '\\n')\n")
    return evil, mark


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(SPYGLASS_STORE=str(tmp_path / "store"), **extra)
    return env


def test_a_pythonpath_in_the_environment_runs_nothing_in_spyglass(tmp_path: Path) -> None:
    evil, mark = _forged(tmp_path)
    launcher = _install(tmp_path)
    work = tmp_path / "work"
    (work / "spyglass").mkdir(parents=True)  # and nothing from the working directory either
    (work / "spyglass" / "__init__.py").write_text(f"open({str(mark)!r}, 'a').write('cwd\\n')\n")
    env = _env(tmp_path, PYTHONPATH=str(evil), PYTHONHOME="/nonexistent", PYTHONSTARTUP=str(evil / "click.py"))
    res = subprocess.run([str(launcher), "run", "-q", "--backend", "strace", "--", "sh", "-c", "exit 3"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 3, res.stderr
    assert not mark.exists(), mark.read_text()
    # the control: spyglass started with site (pip's console script) runs them
    pip_style = [sys.executable, "-c", "from spyglass.cli.launch import main; main()", "--version"]
    res = subprocess.run(pip_style, cwd=tmp_path, env=_env(tmp_path, PYTHONPATH=str(evil)), capture_output=True,
                         text=True, timeout=60, check=False)
    assert mark.read_text().split() == ["sitecustomize", "click"], res.stderr


def test_benign_twin_the_script_runs_spyglass_as_pips_does(tmp_path: Path) -> None:
    """Without any of it: the same command, from another working directory, the same result."""
    launcher = _install(tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    res = subprocess.run([str(launcher), "run", "-q", "--backend", "strace", "--", "sh", "-c", "exit 3"],
                         cwd=work, env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert (res.returncode, res.stderr) == (3, "")
    res = subprocess.run([str(launcher), "ls"], cwd=work, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0 and "complete    exit 3" in res.stdout, res.stdout + res.stderr
    for argv in (["--version"], ["run", "--no-such-option"]):
        mine = subprocess.run([str(launcher), *argv], cwd=work, env=_env(tmp_path), capture_output=True, text=True,
                              timeout=60, check=False)
        theirs = subprocess.run([sys.executable, "-m", "spyglass", *argv], cwd=work, env=_env(tmp_path),
                                capture_output=True, text=True, timeout=60, check=False)
        assert (mine.returncode, mine.stdout, mine.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr)


def test_the_script_names_the_checkout_only_for_an_editable_install() -> None:
    text = script.render("/venv/bin/python", ["/venv/lib/python3.11/site-packages"], None)
    assert text.startswith("#!/venv/bin/python -IS\n")
    assert "PathFinder" not in text and "sys.path += ['/venv/lib/python3.11/site-packages']" in text
    editable = script.render("/venv/bin/python", ["/venv/lib/python3.11/site-packages"], "/src/spyglass-checkout")
    assert "PathFinder.find_spec(name, ['/src/spyglass-checkout'])" in editable
    compile(editable, "spyglass", "exec")


def test_a_spyglass_package_put_in_site_packages_never_runs_from_the_script(tmp_path: Path) -> None:
    """An editable install has no ``spyglass`` in ``site-packages``; one an agent puts there (the end of its
    run reports it, and leaves it in place) would come first on the import path: the script looks in the
    checkout first for that name."""
    installed = script.for_this_install()
    if installed is None or "PathFinder" not in installed:
        pytest.skip("not an editable install")
    mark = tmp_path / "ran"
    planted = tmp_path / "site"
    (planted / "spyglass" / "cli").mkdir(parents=True)
    (planted / "spyglass" / "__init__.py").write_text(f"open({str(mark)!r}, 'a').write('planted\\n')\n")
    (planted / "spyglass" / "cli" / "launch.py").write_text("def main():\n    print('planted')\n")
    import site

    checkout = str(Path(script.__file__).resolve().parent.parent.parent)
    out = tmp_path / "spyglass"
    out.write_text(script.render(sys.executable, [str(planted), *site.getsitepackages()], checkout))
    out.chmod(0o755)
    res = subprocess.run([str(out), "--version"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0 and "spyglass (the agent monitor" in res.stdout, res.stdout + res.stderr
    assert not mark.exists()
