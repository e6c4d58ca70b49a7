"""Fixtures for rule tests: record a real process under capture with the rule engine live."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable


@dataclass
class LiveRun:
    alerts: list[Any]
    stored: list[Any]
    reader: Any
    store: Any
    home: Path
    workspace: Path
    exit_code: int
    stderr_lines: list[str]

    def ids(self, min_level: str = "info") -> set[str]:
        from spyglass.events import level_rank

        return {a.rule_id for a in self.alerts if level_rank(a.level) >= level_rank(min_level)}

    def fired(self, rule_id: str) -> list[Any]:
        return [a for a in self.alerts if a.rule_id == rule_id]


def make_home(root: Path) -> Path:
    """A fake HOME with decoy secrets (never the real home)."""
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n-----END OPENSSH PRIVATE KEY-----\n"
    (home / ".ssh" / "id_rsa").write_text(key)
    (home / ".ssh" / "id_rsa.pub").write_text("ssh-ed25519 AAAA fake\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\naws_access_key_id=AKIAFAKE\naws_secret_access_key=x\n")
    (home / ".bash_history").write_text("ls\n")
    (home / ".bashrc").write_text("# rc\n")
    (home / ".cache").mkdir()
    return home


@pytest.fixture
def fake_home(tmp_path: Path) -> Path:
    return make_home(tmp_path)


@pytest.fixture
def live(tmp_path: Path) -> Callable[..., LiveRun]:
    """``live(script, policy_text=None, lang="sh")``: run a script under capture with the rules live.

    The backend is strace unless ``backend=`` (or ``SPYGLASS_TEST_BACKEND``) names another."""
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")

    def run(script: str, *, policy_text: str | None = None, lang: str = "sh", home: Path | None = None,
            workspace: Path | None = None, extra_env: dict[str, str] | None = None, seccomp: bool = True,
            backend: str | None = None) -> LiveRun:
        import io

        from spyglass.capture import get_backend
        from spyglass.policy import load_policy
        from spyglass.rules import build_sinks
        from spyglass.session.record import RunRequest, record
        from spyglass.store import RunReader, Store

        ws = workspace or (tmp_path / "ws")
        ws.mkdir(parents=True, exist_ok=True)
        h = home or (tmp_path / "home" if (tmp_path / "home").is_dir() else make_home(tmp_path))
        policy_path = None
        if policy_text is not None:
            policy_path = ws / "spyglass.yaml"
            policy_path.write_text(policy_text)
        policy = load_policy(policy_path, ws)
        if lang == "sh":
            argv = ["/bin/sh", "-c", script]
        else:
            (ws / "agent.py").write_text(script)
            argv = [PY, str(ws / "agent.py")]
        env = {
            "HOME": str(h), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PY": PY, "WS": str(ws),
        }
        env.update(extra_env or {})
        store = Store(tmp_path / "store", create=True)
        err = io.StringIO()
        sinks = build_sinks(policy, home=str(h), stream=err)
        outcome = record(
            RunRequest(argv=argv, cwd=str(ws), env=env, workspace=list(policy.workspace_for(str(ws))),
                       mode=policy.mode, policy_digest=policy.digest, extra={"home": str(h)},
                       backend_options={"seccomp": seccomp}),
            get_backend(backend or os.environ.get("SPYGLASS_TEST_BACKEND", "strace")), store, sinks,
        )
        reader = RunReader(store, outcome.meta.id)
        engine = sinks[0]
        return LiveRun(engine.alerts, reader.alerts(), reader, store, h, ws, outcome.exit_code,
                       err.getvalue().splitlines())

    return run


@pytest.fixture
def cli_place(tmp_path: Path) -> Callable[[str], tuple[Path, Path, dict[str, str]]]:
    """A workspace, a store path and a clean environment for the real CLI in a subprocess; as root
    only: ``cli_place(why)`` skips the test, saying ``why`` it needs root, otherwise."""

    def make(why_root: str) -> tuple[Path, Path, dict[str, str]]:
        if os.geteuid() != 0:
            pytest.skip(why_root)
        ws = tmp_path / "ws"
        ws.mkdir()
        env = dict(os.environ, HOME=str(tmp_path), LANG="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
        env.pop("SPYGLASS_STORE", None)
        return ws, tmp_path / "store", env

    return make
