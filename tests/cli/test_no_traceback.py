"""No user mistake ever ends in a Python traceback.

Walks every subcommand of the click group (found by introspection, so a new
command is covered without editing this file) with a bad flag, missing runs,
a missing store, missing paths, and an unwritable store and output directory,
and asserts that each call ends with a click exit (never an exception) whose
output has no traceback.  The four cases the issue names are also checked
through the real ``spyglass`` executable.

The unwritable cases need a directory the process may not write: as root
(CI) the walk runs in a child whose capability bounding set lacks
CAP_DAC_OVERRIDE (``setpriv``, util-linux), so a mode-555 directory refuses
it as it would refuse a user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]

#: commands that record a run when given a usable store: only their error paths are walked
_RECORDS = {"run", "demo", "model-stub", "sandbox check", "doctor", "agents env"}


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out.extend(_leaves(cmd, (*prefix, name)))
        else:
            out.append(((*prefix, name), cmd))
    return out


_OUTPUTS = {"-o", "--output", "--dir", "--log"}


def _args(cmd: click.Command, store: str, bad_path: str, inputs: bool = True) -> list[str]:
    """An invocation of CMD whose paths point at BAD_PATH (with INPUTS false: only its store and
    outputs; inputs keep their defaults) and whose runs do not exist."""
    opts: list[str] = []
    args: list[str] = []
    for p in cmd.params:
        if isinstance(p, click.Option):
            if p.opts[0] == "--store":
                opts += ["--store", store]
            elif isinstance(p.type, click.Path) and not p.is_flag:
                if inputs or p.opts[0] in _OUTPUTS:
                    opts += [p.opts[0], bad_path]
            elif p.required and isinstance(p.type, click.Choice):
                opts += [p.opts[0], str(p.type.choices[0])]
            elif p.required:
                opts += [p.opts[0], "http://127.0.0.1:9/"]
        elif isinstance(p, click.Argument):
            if isinstance(p.type, click.Choice):
                value = str(p.type.choices[0])
            elif isinstance(p.type, click.Path):
                value = bad_path
            elif isinstance(p.type, click.types.UnprocessedParamType):
                value = "true"
            else:
                value = "no-such-run"
            args += [value] * (2 if p.nargs == -1 and cmd.name in ("compare", "diff") else 1)
    return opts + args


def walk(base: Path) -> list[dict[str, object]]:
    """Run every scenario under BASE; one record per call."""
    from spyglass.cli.main import _load_commands, cli

    _load_commands()
    base.mkdir(parents=True, exist_ok=True)
    afile = base / "a-file"
    afile.write_text("x")
    empty_store = base / "empty-store"
    from spyglass.store import Store

    Store(empty_store, create=True)
    readonly = base / "readonly"
    readonly.mkdir(exist_ok=True)
    readonly.chmod(0o555)
    scenarios = {
        "missing-store": (str(base / "no" / "store"), str(base / "missing_dir" / "x.out")),
        "missing-run": (str(empty_store), str(base / "missing_dir" / "x.out")),
        "store-under-file": (str(afile / "store"), str(afile / "x.out")),
        "unwritable": (str(readonly / "store"), str(readonly / "x.out")),
    }
    records: list[dict[str, object]] = []
    cwd = os.getcwd()
    os.chdir(base)
    try:
        for path, cmd in _leaves(cli):
            calls = [[*path, "--no-such-flag"], [*path, "--format", "no-such-format"]]
            for name, (store, bad) in scenarios.items():
                if " ".join(path) in _RECORDS and name in ("missing-store", "missing-run"):
                    continue
                calls.append([*path, *_args(cmd, store, bad)])
                calls.append([*path, *_args(cmd, store, bad, inputs=False)])
            for argv in calls:
                env = {"SPYGLASS_STORE": str(base / "no" / "store"), "NO_COLOR": "1"}
                result = CliRunner().invoke(cli, argv, env=env, catch_exceptions=True)
                exc = result.exception
                records.append({
                    "argv": argv,
                    "exit_code": result.exit_code,
                    "exception": None if exc is None or isinstance(exc, SystemExit) else repr(exc),
                    "traceback": "Traceback (most recent call last)" in result.output,
                    "output": result.output[-400:],
                })
    finally:
        os.chdir(cwd)
        readonly.chmod(0o755)
    return records


def _assert_clean(records: list[dict[str, object]]) -> None:
    bad = [r for r in records if r["exception"] or r["traceback"]]
    assert not bad, "\n".join(f"{' '.join(map(str, r['argv']))}: {r['exception']}\n{r['output']}" for r in bad)
    for r in records:
        assert r["exit_code"] != 1 or r["argv"][0] in ("gate", "verify", "rules"), r  # 1 means "found something"


def test_every_subcommand_fails_in_one_line(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        records = walk(tmp_path)
    else:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to drop CAP_DAC_OVERRIDE as root")
        proc = subprocess.run(
            ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all",
             sys.executable, __file__, str(tmp_path)],
            capture_output=True, text=True, timeout=600, cwd=REPO,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        records = json.loads(proc.stdout)
    assert len(records) > 100
    _assert_clean(records)
    unwritable = [r for r in records if "readonly" in " ".join(map(str, r["argv"])) and r["exit_code"] == 2]
    assert unwritable, "the unwritable store was never refused"


@pytest.mark.parametrize("argv, expect", [
    (["doctor", "--format", "json"], None),
    (["report", "--format", "html", "-o", "missing_dir/r.html"], "missing_dir/r.html"),
    (["gate", "--format", "junit", "-o", "missing_dir/x.xml"], "missing_dir/x.xml"),
    (["report", "--format", "sarif", "-o", "a-file/r.sarif"], "a-file/r.sarif"),
])
def test_named_cases_through_the_real_command(tmp_path: Path, argv: list[str], expect: str | None) -> None:
    (tmp_path / "a-file").write_text("x")
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "store"), "NO_COLOR": "1"}
    exe = [sys.executable, "-m", "spyglass"]
    rec = subprocess.run([*exe, "run", "--", "true"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert rec.returncode == 0, rec.stderr
    proc = subprocess.run([*exe, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr + proc.stdout
    if expect is None:
        assert proc.returncode in (0, 5)
        assert isinstance(json.loads(proc.stdout), list)
        return
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spyglass: error: ") and expect in lines[0], proc.stderr
    assert "(" in lines[0]  # the remedy


def test_unwritable_store_through_the_real_command(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to drop CAP_DAC_OVERRIDE as root")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "spyglass", "run", "--store", str(ro / "st"), "--",
                               "true"], cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        ro.chmod(0o755)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and str(ro / "st") in proc.stderr and "Permission denied" in proc.stderr


if __name__ == "__main__":  # the walk in a child without CAP_DAC_OVERRIDE (see the module's docstring)
    sys.stdout.write(json.dumps(walk(Path(sys.argv[1]))))
