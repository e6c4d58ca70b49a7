"""Pointing real agents at a model stub: the environment each agent adapter prepares.

``spyglass run --model-script`` uses :func:`agent_env` to start the agent
against the stub with everything that phones home turned off; tests use the
same functions.  The work is the adapters' (:mod:`spyglass.agents.adapters`);
nothing here starts a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from spyglass.agents.adapters import adapter_for, adapter_named
from spyglass.agents.adapters.codex import CODEX_PROVIDER, codex_config_toml, codex_home
from spyglass.agents.adapters.mini_swe_agent import mini_env

__all__ = [
    "CODEX_PROVIDER",
    "agent_env",
    "agent_kind",
    "codex_config_toml",
    "codex_home",
    "codex_skill_dir",
    "mini_env",
]


def codex_skill_dir(home: str | Path) -> Path:
    """Where codex looks for user skills under a ``CODEX_HOME`` (``<home>/skills``)."""
    return Path(home) / "skills"


def agent_kind(argv: list[str] | tuple[str, ...]) -> str | None:
    """The adapter name (``"codex"``, ``"claude"``, ``"mini"``) of the command a user runs, or None."""
    adapter = adapter_for(None, list(argv))
    return None if adapter.name == "generic" else adapter.name


def agent_env(
    argv: list[str] | tuple[str, ...],
    stub_url: str,
    scratch: str | Path,
    base_env: Mapping[str, str],
    model: str = "spyglass-stub",
    kind: str | None = None,
) -> dict[str, str]:
    """The environment to run ``argv`` against the stub, as its adapter prepares it: for every
    agent the OpenAI and Anthropic variables; for codex a fresh ``CODEX_HOME`` in ``scratch``;
    for Claude Code a config dir of its own there; for mini-swe-agent its no-setup variables.

    ``kind`` (an adapter name) overrides recognising the agent from ``argv``
    (for a wrapper script around the agent)."""
    adapter = adapter_named(kind) if kind else adapter_for(None, list(argv))
    scratch = Path(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    return adapter.prepare_env(dict(base_env), stub_url, scratch, model, list(argv))
