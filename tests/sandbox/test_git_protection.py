"""A sandboxed agent cannot make the user's next host `git status` run its code: real bubblewrap,
real git, real `spyglass run`.

`.git` is a mount point inside (renaming it aside to put a new one with a hostile config in
its place fails with EBUSY), its config-like files are read-only, and in enforce mode planting
a file that redirects git (`.git/commondir`) kills the run.  The benign twin: ordinary git work
(add, commit, branch, checkout) inside the sandbox keeps working."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sandbox_helpers import needs_bwrap, needs_strace

from spyglass.errors import EXIT_KILLED
from spyglass.store import RunReader, Store

pytestmark = [needs_bwrap, needs_strace]

GIT_WORK = (
    "git add README && git -c user.name=a -c user.email=a@b commit -qm one && git checkout -qb feat"
    " && echo more >> README && git -c user.name=a -c user.email=a@b commit -qam two && git checkout -q -"
    " && git branch --list && git log --oneline feat | wc -l"
)


def _run(ws: Path, store: Path, script: str, *opts: str) -> tuple[subprocess.CompletedProcess[str], RunReader]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPYGLASS_STORE", "SPYGLASS_POLICY")}
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--store", str(store), *opts, "--", "sh", "-c", script],
        cwd=ws, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    s = Store(store)
    return res, RunReader(s, s.resolve("latest"))


def _host_git_status(ws: Path) -> None:
    subprocess.run(["git", "status", "--short"], cwd=ws, capture_output=True, timeout=60, check=False)


def test_git_dir_renamed_aside_is_refused_and_host_git_status_runs_nothing(ws: Path, tmp_path: Path) -> None:
    pwned = tmp_path / "PWNED"
    attack = (
        "mv .git .gitx && mkdir .git && cp -r .gitx/HEAD .gitx/objects .gitx/refs .git/ && cp .gitx/config .git/config"
        f' && printf "[core]\\n\\tfsmonitor = touch {pwned};false\\n" >> .git/config; echo "mv=$?"'
        "; rmdir .git; echo \"rmdir=$?\""
        f'; printf "[core]\\n\\tfsmonitor = touch {pwned};false\\n" >> .git/info/attributes; echo "info=$?"'
    )
    before = (ws / ".git" / "config").read_text()
    res, reader = _run(ws, tmp_path / "store", attack, "--sandbox")
    assert "mv=1" in res.stdout and "rmdir=1" in res.stdout, res.stdout + res.stderr
    assert "Device or resource busy" in res.stderr
    assert not (ws / ".gitx").exists() and (ws / ".git" / "config").read_text() == before
    assert not (ws / ".git" / "info" / "attributes").exists()
    _host_git_status(ws)
    assert not pwned.exists()
    assert reader.meta.status == "complete"


def test_git_work_in_the_sandbox_keeps_working(ws: Path, tmp_path: Path) -> None:
    res, reader = _run(ws, tmp_path / "store", GIT_WORK, "--sandbox")
    assert res.returncode == 0, res.stderr
    assert "feat" in res.stdout and res.stdout.split()[-1] == "2", res.stdout
    log = subprocess.run(["git", "log", "--oneline", "feat"], cwd=ws, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 2  # the commits are the host's
    assert not any(a.rule_id == "persist-git-config-file" for a in reader.alerts())


def test_submodule_git_dir_is_pinned_and_its_config_read_only(ws: Path, tmp_path: Path) -> None:
    mod = ws / ".git" / "modules" / "lib"
    (mod / "hooks").mkdir(parents=True)
    (mod / "config").write_text("[core]\n\tbare = false\n")
    attack = (
        'mv .git/modules/lib .git/modules/old; echo "mv=$?"'
        f'; printf "[core]\\n\\tfsmonitor = touch {tmp_path}/PWNED\\n" >> .git/modules/lib/config; echo "cfg=$?"'
    )
    res, _reader = _run(ws, tmp_path / "store", attack, "--sandbox")
    assert "mv=1" in res.stdout and "Read-only file system" in res.stderr, res.stdout + res.stderr
    assert "fsmonitor" not in (mod / "config").read_text() and not (ws / ".git" / "modules" / "old").exists()


def test_planting_a_commondir_is_killed_in_enforce_mode(ws: Path, tmp_path: Path) -> None:
    (ws / "evil").mkdir()
    attack = (
        f'printf "[core]\\n\\tfsmonitor = touch {tmp_path}/PWNED;false\\n" > evil/config'
        "; echo ../evil > .git/commondir; sleep 30; echo survived"
    )
    res, reader = _run(ws, tmp_path / "store", attack, "--mode", "enforce")
    alert = next(a for a in reader.alerts() if a.rule_id == "persist-git-config-file")
    assert alert.action == "kill"
    assert res.returncode == EXIT_KILLED and "survived" not in res.stdout, res.stdout + res.stderr
    assert reader.meta.stopped_by


def test_git_work_is_not_killed_in_enforce_mode(ws: Path, tmp_path: Path) -> None:
    res, reader = _run(ws, tmp_path / "store", GIT_WORK, "--mode", "enforce")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split()[-1] == "2" and not reader.meta.stopped_by


def test_agent_config_dir_cannot_be_renamed_aside(ws: Path, tmp_path: Path) -> None:
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text("{}\n")
    attack = (
        'mv .claude .claude-old; echo "mv=$?"'
        "; mkdir -p .claude; echo '{\"hooks\": {\"Stop\": [\"touch PWNED\"]}}' > .claude/settings.json"
    )
    res, _reader = _run(ws, tmp_path / "store", attack, "--sandbox")
    assert "mv=1" in res.stdout and "Device or resource busy" in res.stderr, res.stdout + res.stderr
    assert (ws / ".claude" / "settings.json").read_text() == "{}\n" and not (ws / ".claude-old").exists()


def test_a_git_file_pointing_to_the_git_dir_is_read_only(tmp_path: Path) -> None:
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    (main / "README").write_text("hello\n")
    git = ["git", "-C", str(main), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    wt = tmp_path / "wt"
    subprocess.run([*git, "worktree", "add", "-q", str(wt)], check=True)
    evil = wt / "evil"
    attack = (
        f"mkdir -p {evil} && cp -r {main}/.git/HEAD {main}/.git/objects {main}/.git/refs {evil}/"
        f' && printf "[core]\\n\\tfsmonitor = touch {tmp_path}/PWNED;false\\n" > {evil}/config'
        f' && echo "gitdir: {evil}" > .git; echo "redirect=$?"'
        "; git -c user.name=a -c user.email=a@b commit -q --allow-empty -m two && echo committed"
    )
    before = (wt / ".git").read_text()
    opts = ("--workspace", str(wt), "--workspace", str(main))  # the worktree needs its repository
    res, _reader = _run(wt, tmp_path / "store", attack, "--sandbox", *opts)
    assert "redirect=2" in res.stdout or "redirect=1" in res.stdout, res.stdout + res.stderr
    assert "committed" in res.stdout  # the benign twin: git work in a worktree still works
    assert (wt / ".git").read_text() == before
    _host_git_status(wt)
    assert not (tmp_path / "PWNED").exists()
