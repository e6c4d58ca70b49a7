"""``spyglass run`` parsed without click (spyglass/cli/direct.py): the same arguments as click gives
the command, for every command line it takes; everything else left to click; a run that way loads
no click and ends as the click command does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from spyglass.cli import direct, directspec, runspec
from spyglass.cli.cmd_run import run_cmd
from spyglass.cli.main import cli


def test_the_spec_is_what_the_click_declarations_say() -> None:
    """Run ``python -m spyglass.cli.directspec`` after changing an option of ``run`` or of the group."""
    assert Path(runspec.__file__).read_text() == directspec.render()


def _click_parse(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    group = cli.make_context("spyglass", list(argv))  # (TAKEN: "run" comes first)
    sub = run_cmd.make_context("run", list(argv[1:]), parent=group)
    return dict(group.params), dict(sub.params)


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: observe\n")
    skills = tmp_path / "skills"
    skills.mkdir()
    return {"policy": str(policy), "dir": str(tmp_path), "skills": str(skills), "new": str(tmp_path / "new")}


TAKEN = [
    ["run", "--", "true"],
    ["run", "-q", "--", "true"],
    ["run", "--quiet", "--backend", "strace", "--", "sh", "-c", "exit 3"],
    ["run", "--backend=ebpf", "--policy", "{policy}", "--", "true", "--backend", "strace", "-q"],
    ["run", "--store", "{dir}", "--task", "fix bug ü", "--agent-id=", "--", "x"],
    ["run", "--store", "{new}", "--result-file", "{new}", "--sign-key", "{new}", "--", "x", "--"],
    ["run", "--workspace", "{dir}", "--workspace", "{new}", "--skills", "{skills}", "--", "x"],
    ["run", "--mode", "contain", "--sandbox", "--fail-on", "high", "--descendants", "follow", "--wait-for-tree",
     "--no-workspace-evidence", "--no-seccomp", "--record-tty", "--ask", "--agent-hooks", "--agent", "codex",
     "--agent-log", "{new}", "--otlp", "http://127.0.0.1:4318", "--otlp-protocol", "grpc",
     "--alerts-format", "json", "--model-script", "{policy}", "--", "codex", "exec"],
]  # fmt: skip


@pytest.mark.parametrize("argv", TAKEN)
@pytest.mark.parametrize("env", [{}, {"SPYGLASS_STORE": "{dir}", "SPYGLASS_COLOR": "never"},
                                 {"SPYGLASS_STORE": "{new}", "SPYGLASS_COLOR": "always"}])
def test_the_direct_parser_gives_what_click_gives(argv: list[str], env: dict[str, str], places: dict[str, str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [a.format(**places) for a in argv]
    monkeypatch.delenv("SPYGLASS_STORE", raising=False)
    monkeypatch.delenv("SPYGLASS_COLOR", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v.format(**places))
    parsed = direct.parse(argv, os.environ)
    assert parsed is not None, argv
    assert parsed == _click_parse(argv)
    assert {k: type(v) for k, v in parsed[1].items()} == {k: type(v) for k, v in _click_parse(argv)[1].items()}


LEFT = [
    ["-v", "run", "--", "true"],  # an option of the group
    ["--color", "never", "run", "--", "true"],
    ["run", "--help"], ["run", "-h", "--", "true"],
    ["run", "true"],  # no "--"
    ["run", "-q", "true", "--", "x"],
    ["run", "--"],  # no command
    ["run", "--bogus", "--", "true"], ["run", "-x", "--", "true"], ["run", "-qv", "--", "true"],
    ["run", "--backend", "bogus", "--", "true"], ["run", "--backend", "EBPF", "--", "true"],
    ["run", "--policy", "{dir}", "--", "true"],  # click: a directory
    ["run", "--store", "{policy}", "--", "true"],  # click: a file
    ["run", "--skills", "{new}", "--", "true"],  # click: does not exist
    ["run", "--policy", "", "--", "true"],
    ["run", "--wait-descendants", "1", "--", "true"], ["run", "--model-port", "8080", "--", "true"],
    ["run", "--model-var", "A=1", "--", "true"],  # checked by the run's code with click
    ["run", "-q", "-q", "--", "true"], ["run", "--task", "a", "--task", "b", "--", "true"],
    ["run", "--task", "-x", "--", "true"], ["run", "--task", "--", "true"], ["run", "--task"],
    ["run", "--quiet=1", "--", "true"],
]  # fmt: skip


@pytest.mark.parametrize("argv", LEFT)
def test_what_the_direct_parser_leaves_to_click(argv: list[str], places: dict[str, str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPYGLASS_STORE", raising=False)
    monkeypatch.delenv("SPYGLASS_COLOR", raising=False)
    assert direct.parse([a.format(**places) for a in argv], os.environ) is None


@pytest.mark.parametrize("env", [{"SPYGLASS_COLOR": ""}, {"SPYGLASS_COLOR": "bogus"}, {"SPYGLASS_STORE": ""},
                                 {"SPYGLASS_STORE": "{policy}"}, {"_SPYGLASS_COMPLETE": "bash_source"}])
def test_what_the_environment_leaves_to_click(env: dict[str, str], places: dict[str, str]) -> None:
    environ = {k: v.format(**places) for k, v in env.items()}
    assert direct.parse(["run", "--", "true"], environ) is None


def test_click_refuses_what_is_left_for_a_bad_value(places: dict[str, str]) -> None:
    """The control: those values are errors in click (so click's message is what the user sees)."""
    for argv in (["run", "--backend", "bogus", "--", "true"], ["run", "--policy", places["dir"], "--", "true"],
                 ["run", "--store", places["policy"], "--", "true"]):
        with pytest.raises(click.UsageError):
            _click_parse(argv)


_RUN = """
import sys
from spyglass.cli.{where} import {what}
try:
    {call}
finally:
    print('click' in sys.modules, file=sys.stderr)
"""


def _spyglass(tmp_path: Path, argv: list[str], *, click_path: bool) -> tuple[int, str, str]:
    """``argv`` through the entry point (direct for a plain run) or through click (``run_cli``)."""
    code = _RUN.format(where="main", what="run_cli", call=f"run_cli({argv!r}, 'run')") if click_path else \
        _RUN.format(where="launch", what="main", call=f"main({argv!r})")
    env = dict(os.environ, SPYGLASS_STORE=str(tmp_path / "store"))
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    return res.returncode, res.stdout, res.stderr


@pytest.mark.parametrize("argv", [
    ["run", "-q", "--backend", "strace", "--", "sh", "-c", "exit 3"],
    ["run", "-q", "--backend", "strace", "--", "no-such-command-here"],
    ["run", "-q", "--backend", "strace", "--result-file", "/nonexistent/dir/r.json", "--", "true"],
    ["run", "-q", "--backend", "strace", "--store", "/proc/no/store", "--", "true"],
    ["run", "-q", "--backend", "strace", "--policy", "/nonexistent/policy.yaml", "--", "true"],
])  # fmt: skip
def test_a_run_parsed_directly_loads_no_click_and_ends_as_through_click(tmp_path: Path, argv: list[str]) -> None:
    code, out, err = _spyglass(tmp_path, argv, click_path=False)
    c_code, c_out, c_err = _spyglass(tmp_path, argv, click_path=True)
    assert err.splitlines()[-1] == "False" and c_err.splitlines()[-1] == "True"
    assert (code, out, err.splitlines()[:-1]) == (c_code, c_out, c_err.splitlines()[:-1])


def test_a_command_line_left_to_click_runs_as_before(tmp_path: Path) -> None:
    code, _, err = _spyglass(tmp_path, ["run", "-q", "--wait-descendants", "0", "--backend", "strace", "--",
                                        "sh", "-c", "exit 4"], click_path=False)
    assert code == 4 and err.splitlines()[-1] == "True", err
    code, _, err = _spyglass(tmp_path, ["run", "--backend", "bogus", "--", "true"], click_path=False)
    assert code == 2 and "Invalid value for '--backend'" in err, err
