"""`cd ws && spyglass run --sandbox -- CMD` with no flags: real bubblewrap, real strace, real programs.

The store inside the workspace is hidden (not remounted); programs installed under $HOME or /tmp
run inside; a sandbox that cannot start the agent exits 5 and is recorded as failed; .git/config,
.git/hooks and the agents' config stay read-only; the environment is filtered; /etc/shadow is hidden.
Each attack has a benign twin that must keep working."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import needs_bwrap, needs_strace

from spyglass.store import RunReader, Store

pytestmark = [needs_bwrap, needs_strace]


def _run(
    ws: Path, *argv: str, env: dict[str, str] | None = None, opts: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], RunReader]:
    store = ws / ".spyglass"
    full = {**os.environ, **(env or {})}
    full.pop("SPYGLASS_STORE", None)
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--store", str(store), *opts, "--sandbox", "--", *argv],
        cwd=ws,
        env=full,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    s = Store(store)
    return res, RunReader(s, s.resolve("latest"))


@pytest.fixture
def home_tool() -> Iterator[Path]:
    """A venv under $HOME with a console script in it (as pip, pipx or uv install agents)."""
    home = Path(os.path.expanduser("~"))
    root = Path(tempfile.mkdtemp(prefix=".spyglass-test-tool-", dir=home))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
        prog = root / "venv" / "bin" / "layout-agent"
        prog.write_text(f"#!{root / 'venv' / 'bin' / 'python'}\nimport sys\nprint('agent-ran', sys.prefix)\n")
        prog.chmod(0o755)
        yield prog
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_store_inside_the_workspace_is_hidden_and_the_run_works(ws: Path) -> None:
    res, reader = _run(ws, "sh", "-c", "cat README; ls -A .spyglass | wc -l; echo x > .spyglass/forged")
    assert "hello" in res.stdout and res.stdout.split()[1] == "0", res.stderr
    assert reader.meta.status == "complete"
    assert not (ws / ".spyglass" / "forged").exists()  # written into a hidden tmpfs, never the store


def test_program_installed_under_home_runs_inside(ws: Path, home_tool: Path) -> None:
    res, reader = _run(ws, str(home_tool))
    assert res.returncode == 0, res.stderr
    assert "agent-ran" in res.stdout and str(home_tool.parent.parent) in res.stdout
    assert reader.meta.status == "complete"


def test_program_installed_under_tmp_runs_inside(ws: Path, tmp_path: Path) -> None:
    prog = tmp_path / "tools" / "bin" / "tmp-agent"
    prog.parent.mkdir(parents=True)
    prog.write_text("#!/bin/sh\necho tmp-agent-ran\n")
    prog.chmod(0o755)
    res, _ = _run(ws, str(prog))
    assert res.returncode == 0 and "tmp-agent-ran" in res.stdout, res.stderr


def _aliased_tool(tmp_path: Path) -> tuple[Path, Path]:
    """A tool whose script finds its data beside itself by ``$0`` (as node's ``.bin`` links and
    many launchers do), installed in ``real/`` and reached through ``alias -> real``."""
    real = tmp_path / "real" / "prefix"
    (real / "bin").mkdir(parents=True)
    (real / "share").mkdir()
    (real / "share" / "data.txt").write_text("aliased-tool-data\n")
    prog = real / "bin" / "aliased-tool"
    prog.write_text('#!/bin/sh\nd="$(dirname "$0")/../share"\n'
                    '[ "$1" = plant ] && { echo planted > "$d/data.txt" || exit 3; }\ncat "$d/data.txt"\n')
    prog.chmod(0o755)
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    return tmp_path / "alias" / "prefix" / "bin", prog


def test_program_reached_through_a_symlinked_directory_runs_inside(ws: Path, tmp_path: Path) -> None:
    """``PATH`` names the tool through a directory that is a symlink (a dotfiles ``.local``, a
    shared ``.cache``): inside, the tree is at that name too (before: exit 127, no reason given)."""
    bindir, _ = _aliased_tool(tmp_path)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    res, reader = _run(ws, "aliased-tool", env=env)
    assert res.returncode == 0 and "aliased-tool-data" in res.stdout, res.stderr
    assert reader.meta.status == "complete"
    # the control: the same tool by its real name, bound as before
    res, _ = _run(ws, "aliased-tool", env={"PATH": f"{tmp_path / 'real' / 'prefix' / 'bin'}:{os.environ['PATH']}"})
    assert res.returncode == 0 and "aliased-tool-data" in res.stdout, res.stderr


def test_the_alias_binds_the_tree_read_only(ws: Path, tmp_path: Path) -> None:
    """The attack twin: the aliased tree is bound read-only inside, as the real one is."""
    bindir, _ = _aliased_tool(tmp_path)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    res, _ = _run(ws, "aliased-tool", "plant", env=env)
    assert res.returncode == 3, (res.returncode, res.stdout, res.stderr)  # the write was refused inside
    assert (tmp_path / "real" / "prefix" / "share" / "data.txt").read_text() == "aliased-tool-data\n"


def test_a_sandbox_that_cannot_start_the_agent_exits_5_and_is_recorded_failed(ws: Path, tmp_path: Path) -> None:
    tools = ws / "tools"
    (tools / "bin").mkdir(parents=True)
    prog = tools / "bin" / "hidden-agent"
    prog.write_text("#!/bin/sh\necho should-not-run\n")
    prog.chmod(0o755)
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"sandbox:\n  hidden: [{tools}]\n")
    full = {**os.environ}
    full.pop("SPYGLASS_STORE", None)
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--store", str(store), "--policy", str(policy), "--sandbox",
         "--", str(prog)],
        cwd=ws, env=full, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert res.returncode == 5, res.stderr
    assert "cannot be found inside the sandbox" in res.stderr and "sandbox.readonly" in res.stderr
    assert "Traceback" not in res.stderr and "should-not-run" not in res.stdout
    s = Store(store)
    assert RunReader(s, s.resolve("latest")).meta.status == "failed"


def test_git_config_and_hooks_are_read_only_but_git_works(ws: Path) -> None:
    before = (ws / ".git" / "config").read_text()
    attack = "git config core.fsmonitor 'touch /tmp/pwned'; echo x > .git/hooks/pre-commit; echo done"
    res, _ = _run(ws, "sh", "-c", attack)
    assert "done" in res.stdout
    assert (ws / ".git" / "config").read_text() == before
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    # the benign twin: ordinary git work in the workspace still works
    work = "git add README && git -c user.name=a -c user.email=a@b commit -qm x && git log --oneline | wc -l"
    res, reader = _run(ws, "sh", "-c", work)
    assert res.returncode == 0 and res.stdout.strip() == "1", res.stderr
    assert reader.meta.status == "complete"


def test_environment_is_filtered_unless_the_policy_passes_it(ws: Path, tmp_path: Path) -> None:
    env = {"SPYGLASS_TEST_API_TOKEN": "tok-123", "LANG": "C.UTF-8"}
    show = 'echo "token=${SPYGLASS_TEST_API_TOKEN:-none} lang=$LANG"'
    res, _ = _run(ws, "sh", "-c", show, env=env)
    assert "token=none" in res.stdout and "lang=C.UTF-8" in res.stdout, res.stderr
    policy = tmp_path / "p.yaml"
    policy.write_text("sandbox:\n  env:\n    pass: [SPYGLASS_TEST_*]\n")
    res, _ = _run(ws, "sh", "-c", show, env=env, opts=("--policy", str(policy)))
    assert "token=tok-123" in res.stdout, res.stderr


def test_system_secrets_are_hidden(ws: Path) -> None:
    res, _ = _run(ws, "sh", "-c", "cat /etc/shadow >/dev/null 2>&1 && echo read-shadow; cat /etc/passwd | wc -l")
    assert "read-shadow" not in res.stdout
    assert int(res.stdout.split()[-1]) > 0  # the benign twin: /etc/passwd stays readable


def test_sandbox_check_runs_the_default_layout() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "sandbox", "check"], capture_output=True, text=True, timeout=180, check=False
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok  default layout" in res.stdout


def test_demo_runs_in_the_sandbox(tmp_path: Path) -> None:
    full = {**os.environ}
    full.pop("SPYGLASS_STORE", None)
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "demo", "--sandbox", "--store", str(tmp_path / "s"), "--dir",
         str(tmp_path / "demo")],
        env=full, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[agent] done" in res.stdout + res.stderr
    s = Store(tmp_path / "s")
    assert RunReader(s, s.resolve("latest")).meta.status == "complete"


def _enforce(ws: Path, store: Path, script: str) -> tuple[subprocess.CompletedProcess[str], RunReader]:
    full = {k: v for k, v in os.environ.items() if k not in ("SPYGLASS_STORE", "SPYGLASS_POLICY")}
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--store", str(store), "--mode", "enforce", "--",
         "sh", "-c", script],
        cwd=ws, env=full, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    s = Store(store)
    return res, RunReader(s, s.resolve("latest"))


def test_store_inside_the_workspace_is_hidden_in_enforce_mode_whatever_its_name(ws: Path) -> None:
    store = ws / "evidence"
    script = (
        "ls -A evidence | wc -l; stat -c %i evidence; ln -s evidence link; ls -A link/ | wc -l"
        "; cat evidence/index.sqlite >/dev/null 2>&1 || echo unreadable"
    )
    res, reader = _enforce(ws, store, script)
    out = res.stdout.split()
    assert res.returncode == 0 and out[0] == "0" and out[2] == "0", res.stdout + res.stderr
    assert int(out[1]) != os.stat(store).st_ino  # an empty tmpfs in its place, not the store
    assert "unreadable" in out
    assert reader.meta.status == "complete" and reader.meta.mode == "enforce"
    # the attacker: a write into it fails (read-only) and is an attack on the witness, killed
    res, reader = _enforce(ws, store, "echo x > evidence/forged; sleep 30; echo survived")
    assert res.returncode == 7 and "survived" not in res.stdout, res.stdout + res.stderr
    assert reader.meta.stopped_by and not (store / "forged").exists()
