"""The persistent agent identity: derived the same way run after run, shown and filtered by `ls`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spyglass.agents.identity import derive_identity


def test_derived_id_is_stable_and_changes_with_user_host_or_binary(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    a = derive_identity(["sh", "-c", "x"], cwd=str(tmp_path), env=env, user="ann", host="h1")
    b = derive_identity(["/bin/sh", "-c", "y"], cwd="/", env=env, user="ann", host="h1")
    assert a.id == b.id and a.source == "derived" and a.id.startswith("sh-")
    assert derive_identity(["sh"], cwd="/", env=env, user="bob", host="h1").id != a.id
    assert derive_identity(["sh"], cwd="/", env=env, user="ann", host="h2").id != a.id
    assert derive_identity(["cat"], cwd="/", env=env, user="ann", host="h1").id != a.id
    # codex: its config home is part of what the agent is
    c1 = derive_identity(["codex", "exec"], cwd="/", env=env, user="ann", host="h1")
    c2 = derive_identity(["codex", "exec"], cwd="/", env={**env, "CODEX_HOME": "/x"}, user="ann", host="h1")
    assert c1.name == "codex" and c1.id != c2.id


def test_option_then_policy_then_derived() -> None:
    env = {"HOME": "/nonexistent"}
    assert derive_identity(["sh"], cwd="/", env=env, explicit="ci-bot", policy_id="p").id == "ci-bot"
    got = derive_identity(["sh"], cwd="/", env=env, policy_id="team-agent")
    assert got.id == "team-agent" and got.source == "policy"


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_identity_is_stable_across_two_runs_and_ls_filters_by_it(
    spy: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert spy("run", "-q", "--", "sh", "-c", "true").exit_code == 0
    assert spy("run", "-q", "--agent-id", "other", "--", "sh", "-c", "true").exit_code == 0
    rows = json.loads(spy("ls", "--format", "json").stdout)
    ids = [r["agent_id"] for r in rows]
    assert ids[0] == ids[1] and ids[0].startswith("sh-") and ids[2] == "other"
    mine = json.loads(spy("ls", "--agent", ids[0], "--format", "json").stdout)
    assert [r["id"] for r in mine] == [r["id"] for r in rows[:2]]
    assert [r["agent_id"] for r in json.loads(spy("ls", "--agent", "oth", "--format", "json").stdout)] == ["other"]
    text = spy("ls").stdout
    assert ids[0] in text and "other" in text


def test_login_name_is_getpass_getuser(monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    from spyglass.agents.identity import login_name

    for var in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(var, raising=False)
    assert login_name() == getpass.getuser()  # from the passwd entry
    monkeypatch.setenv("USERNAME", "u4")
    monkeypatch.setenv("USER", "u2")
    assert login_name() == getpass.getuser() == "u2"
    monkeypatch.setenv("LOGNAME", "u1")
    assert login_name() == getpass.getuser() == "u1"
