"""Pointing codex and mini-swe-agent at a stub."""

from __future__ import annotations

import tomllib
from pathlib import Path

from spyglass.agents.setup import agent_env, agent_kind, codex_home, mini_env


def test_codex_home_config_turns_phoning_home_off(tmp_path: Path) -> None:
    home = codex_home(tmp_path / "ch", "http://127.0.0.1:5/v1", model="m")
    cfg = tomllib.loads((home / "config.toml").read_text())
    assert cfg["model"] == "m"
    provider = cfg["model_providers"][cfg["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:5/v1" and provider["wire_api"] == "responses"
    assert cfg["approval_policy"] == "never" and cfg["sandbox_mode"] == "danger-full-access"
    assert cfg["check_for_update_on_startup"] is False
    assert cfg["analytics"] == {"enabled": False}
    assert cfg["features"] == {"plugins": False, "remote_plugin": False, "apps": False}


def test_agent_kind() -> None:
    assert agent_kind(["codex", "exec", "x"]) == "codex"
    assert agent_kind(["/x/node_modules/.bin/codex", "exec"]) == "codex"
    assert agent_kind(["node", "/x/bin/codex.js", "exec"]) == "codex"
    assert agent_kind(["/v/bin/mini", "--yolo"]) == "mini"
    assert agent_kind(["python3", "agent.py"]) is None


def test_agent_env_for_codex_links_the_users_skills(tmp_path: Path) -> None:
    user_home = tmp_path / "user-codex"
    (user_home / "skills" / "s1").mkdir(parents=True)
    env = agent_env(
        ["codex", "exec"],
        "http://127.0.0.1:5/v1",
        tmp_path / "scratch",
        {"CODEX_HOME": str(user_home), "PATH": "/bin"},
    )
    home = Path(env["CODEX_HOME"])
    assert home == tmp_path / "scratch" / "codex-home"
    assert (home / "skills" / "s1").is_dir() and (home / "skills").is_symlink()
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:5/v1" and env["PATH"] == "/bin"


def test_agent_env_for_mini(tmp_path: Path) -> None:
    env = agent_env(["mini", "--yolo"], "http://127.0.0.1:5/v1", tmp_path, {})
    assert env["MSWEA_CONFIGURED"] == "true" and env["MSWEA_COST_TRACKING"] == "ignore_errors"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["MSWEA_GLOBAL_CONFIG_DIR"] == str(tmp_path / "mini-config")
    assert mini_env("u", "m")["MSWEA_MODEL_NAME"] == "openai/m"
