"""Which policy a command uses: never the workspace's unless named; --policy, env, user, system, defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyglass.errors import SourceError
from spyglass.policy import locate
from spyglass.policy.locate import ignored_workspace_policy, locate_policy, user_policy_path


def _write(p: Path, text: str = "mode: observe\n") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    _write(ws / "spyglass.yaml")
    system = _write(tmp_path / "etc" / "policy.yaml")
    monkeypatch.setattr(locate, "SYSTEM_POLICY", system)
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert locate_policy(None, ws, env).path == system
    user = _write(tmp_path / "cfg" / "spyglass" / "policy.yaml")
    assert locate_policy(None, ws, env) == locate.PolicySource(user, "user config")
    named = _write(tmp_path / "named.yaml")
    assert locate_policy(None, ws, {**env, "SPYGLASS_POLICY": str(named)}).path == named
    explicit = _write(tmp_path / "explicit.yaml")
    assert locate_policy(explicit, ws, {**env, "SPYGLASS_POLICY": str(named)}).path == explicit
    assert locate_policy("spyglass.yaml", ws, env).path == ws / "spyglass.yaml"


def test_defaults_when_nothing_is_configured_and_the_workspace_file_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locate, "SYSTEM_POLICY", tmp_path / "none.yaml")
    _write(tmp_path / "spyglass.yaml")
    src = locate_policy(None, tmp_path, {"HOME": str(tmp_path / "home")})
    assert src.path is None and src.origin == "built-in defaults"
    notice = ignored_workspace_policy(src, tmp_path)
    assert notice is not None and "ignored" in notice and "--policy spyglass.yaml" in notice
    assert ignored_workspace_policy(locate_policy("spyglass.yaml", tmp_path, {}), tmp_path) is None


def test_user_config_dir_follows_xdg(tmp_path: Path) -> None:
    assert user_policy_path({"XDG_CONFIG_HOME": "/x/cfg"}) == Path("/x/cfg/spyglass/policy.yaml")
    assert user_policy_path({"HOME": "/h"}) == Path("/h/.config/spyglass/policy.yaml")
    assert user_policy_path({"HOME": "/h", "XDG_CONFIG_HOME": "relative"}) == Path("/h/.config/spyglass/policy.yaml")


def test_a_named_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="SPYGLASS_POLICY"):
        locate_policy(None, tmp_path, {"SPYGLASS_POLICY": str(tmp_path / "gone.yaml")})
