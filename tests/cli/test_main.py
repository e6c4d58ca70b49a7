"""The CLI entry point imports only the invoked command's module, and its table is complete; a run's
process leaves without the interpreter's teardown."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.cli import main as climain


def test_every_command_is_in_the_table_with_its_module() -> None:
    found: dict[str, set[str]] = {}
    for name in climain.all_command_modules():
        module = importlib.import_module(f"spyglass.cli.{name}")
        for command in getattr(module, "COMMANDS", []):
            found.setdefault(command.name, set()).add(name)
    assert set(found) == set(climain.COMMAND_MODULES)
    for command, mods in found.items():
        assert mods <= set(climain.COMMAND_MODULES[command]), command
    # a module that only extends a group (cmd_sigma) is named with that group
    assert "cmd_sigma" in climain.COMMAND_MODULES["rules"]


def test_the_invoked_command_is_found_behind_the_group_options() -> None:
    assert climain._invoked(["run", "-q", "--", "true"]) == "run"
    assert climain._invoked(["-v", "--color", "never", "show", "latest"]) == "show"
    assert climain._invoked(["--help"]) is None
    assert climain._invoked([]) is None


def _modules_after(argv: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from spyglass.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(m for m in sys.modules if m.startswith('spyglass.cli.cmd_')), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return {m for m in out.stderr.split() if m.startswith("spyglass.cli.cmd_")}


def test_a_command_loads_only_its_own_module() -> None:
    assert _modules_after(["ls", "--help"]) == {"spyglass.cli.cmd_runs"}
    assert _modules_after(["rules", "--help"]) == {"spyglass.cli.cmd_rules", "spyglass.cli.cmd_sigma"}


def test_help_and_unknown_names_list_every_command() -> None:
    every = {f"spyglass.cli.{m}" for m in climain.all_command_modules()}
    assert _modules_after(["--help"]) == every
    assert _modules_after(["no-such-command"]) == every


def test_run_starts_loading_the_ebpf_program_before_the_cli_imports() -> None:
    """A real load (eBPF runs here as root; skipped with the reason elsewhere), started by the
    CLI for ``run`` only, and never for a run that asked for strace or for help."""
    import pytest

    from spyglass.capture.ebpf import preload, probe

    found = probe.static_problem()
    if found is not None:
        pytest.skip(f"eBPF backend unavailable: {found[0]}")
    left = preload.take()  # one an earlier in-process run started and did not use
    if left is not None and not isinstance(left, Exception):
        left.close()
    for argv in (["run", "--backend", "strace", "--", "true"], ["run", "--backend=strace", "true"],
                 ["run", "--help"], ["show", "latest"], ["run", "--", "sh", "--backend", "strace"]):
        climain._preload(argv, climain._invoked(argv))
        loaded = preload.take()
        if argv[-3:] == ["sh", "--backend", "strace"]:  # the agent's own arguments are no option
            assert loaded is not None and not isinstance(loaded, Exception), loaded
            loaded.close()
        else:
            assert loaded is None, argv
    climain._preload(["-v", "run", "--", "true"], "run")
    loaded = preload.take()
    assert loaded is not None and not isinstance(loaded, Exception), loaded
    loaded.close()


_LEAVE = """
import atexit, sys, threading, time
from spyglass.cli.main import leave
out = sys.argv[1]
class Torn:
    def __del__(self, open=open, out=out):  # runs in the interpreter's teardown only
        open(out + '.torn', 'w').close()
torn = Torn()
atexit.register(lambda: open(out + '.atexit', 'w').close())
if sys.argv[2] == 'thread':  # a thread that is not a daemon: the exit waits for it
    go = threading.Event()
    def work():
        go.wait(60)
        open(out + '.thread', 'w').close()
    threading.Thread(target=work).start()
    threading.Timer(0.1, go.set).start()
sys.stdout.write('unflushed')
code = {'3': 3, 'none': None, 'text': 'bye', 'thread': 4}[sys.argv[2]]
leave(code)
sys.exit(code)
"""


def _leave(tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = tmp_path / how
    res = subprocess.run([sys.executable, "-c", _LEAVE, str(out), how], capture_output=True, text=True,
                         timeout=120, check=False)
    return res, {p.suffix for p in tmp_path.glob(f"{how}.*")}


def test_leave_runs_the_exit_functions_and_flushes_but_skips_the_teardown(tmp_path: Path) -> None:
    res, seen = _leave(tmp_path, "3")
    assert (res.returncode, res.stdout) == (3, "unflushed")
    assert seen == {".atexit"}  # no teardown (no __del__ at the end), the atexit function ran
    res, seen = _leave(tmp_path, "none")
    assert (res.returncode, res.stdout, seen) == (0, "unflushed", {".atexit"})


def test_leave_gives_way_to_the_interpreter_exit(tmp_path: Path) -> None:
    """A code that is not a number (printed by the interpreter), or a thread that is not a daemon
    (the exit waits for it): the interpreter's own exit, teardown included."""
    res, seen = _leave(tmp_path, "text")
    assert (res.returncode, res.stdout, res.stderr.strip()) == (1, "unflushed", "bye")
    assert seen == {".atexit", ".torn"}
    res, seen = _leave(tmp_path, "thread")
    assert (res.returncode, res.stdout) == (4, "unflushed")
    assert seen == {".atexit", ".torn", ".thread"}


def test_spyglass_run_leaves_with_everything_written(tmp_path: Path) -> None:
    """``spyglass run`` as its own process: the agent's exit code, the summary on stderr, the phase
    marks (an atexit function) and a verified record."""
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "s"), "SPYGLASS_PHASES": str(tmp_path / "phases"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("SPYGLASS_POLICY", None)
    res = subprocess.run([sys.executable, "-m", "spyglass", "run", "--backend", "strace", "--", "sh", "-c",
                          "echo out; exit 3"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    assert res.returncode == 3, res.stderr
    assert res.stdout == "out\n"
    assert "anchor sha256:" in res.stderr
    assert '"exit"' in (tmp_path / "phases").read_text()
    ver = subprocess.run([sys.executable, "-m", "spyglass", "verify", "latest"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert ver.returncode == 0, ver.stdout + ver.stderr
