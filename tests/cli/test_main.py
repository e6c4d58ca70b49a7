"""The CLI entry point imports only the invoked command's module, and its table is complete."""

from __future__ import annotations

import importlib
import subprocess
import sys

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
