"""Agent adapters: one module per agent CLI, and the registry.

* :mod:`.claude_code`: Claude Code (npm ``@anthropic-ai/claude-code``);
* :mod:`.codex`: the Codex CLI (npm ``@openai/codex``);
* :mod:`.mini_swe_agent`: mini-swe-agent (PyPI ``mini-swe-agent``);
* :mod:`.state_only`: aider, goose and opencode, known by their program and state files only;
* :mod:`.generic`: the fallback.

Each is an :class:`~.base.AgentAdapter`: it recognises its agent by executable
identity and package, prepares its environment for the model stub, reads its
logs into tool calls and claims, and declares its state files, the names and
package of its program, its install tree and MCP servers.  Awareness,
evidence, setup and the rules ask the registry; none of them names an agent.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from spyglass.agents.adapters.base import AgentAdapter
from spyglass.agents.adapters.claude_code import ClaudeCodeAdapter
from spyglass.agents.adapters.codex import CodexAdapter
from spyglass.agents.adapters.generic import GenericAdapter
from spyglass.agents.adapters.mini_swe_agent import MiniSweAgentAdapter
from spyglass.agents.adapters.state_only import AiderAdapter, GooseAdapter, OpencodeAdapter

__all__ = [
    "AgentAdapter",
    "adapter_for",
    "adapter_named",
    "agent_state_globs",
    "all_adapters",
    "launched_agent",
    "recognise",
]


@functools.cache
def all_adapters() -> tuple[AgentAdapter, ...]:
    """Every adapter, the specific ones first and the generic fallback last."""
    return (
        ClaudeCodeAdapter(),
        CodexAdapter(),
        MiniSweAgentAdapter(),
        AiderAdapter(),
        GooseAdapter(),
        OpencodeAdapter(),
        GenericAdapter(),
    )


def recognise(exe: str | None, argv: Sequence[str] | None) -> AgentAdapter | None:
    """The adapter whose agent this exec is, or None (the generic adapter recognises nothing)."""
    for adapter in all_adapters():
        if adapter.identify(exe, argv):
            return adapter
    return None


def adapter_for(exe: str | None, argv: Sequence[str] | None) -> AgentAdapter:
    """The adapter for this exec: the agent's own, else the generic fallback.

    For the command a user runs (``exe`` may be None), the first three words
    are tried, so ``env X=1 codex ...`` or ``timeout 60 claude -p ...`` work."""
    args = list(argv or [])
    found = recognise(exe, args)
    for i in range(1, min(3, len(args))):
        if found is not None:
            break
        found = recognise(None, args[i:])
    return found or adapter_named("generic")


def adapter_named(name: str) -> AgentAdapter:
    """The adapter called ``name`` (``codex``, ``claude``, ``mini``, ``generic``; some aliases)."""
    # claude_code and the others: how runs recorded before the adapters named the launched agent
    aliases = {"claude-code": "claude", "claude_code": "claude", "mini-swe-agent": "mini", "openai-codex": "codex"}
    want = aliases.get(name, name)
    for adapter in all_adapters():
        if adapter.name == want:
            return adapter
    raise KeyError(name)


def agent_state_globs(home: str) -> list[str]:
    """The state files of every known agent under ``home`` (the rules' ``$agent_state`` list)."""
    return [g for adapter in all_adapters() for g in adapter.state_globs(home)]


def launched_agent(programs: Sequence[str]) -> AgentAdapter | None:
    """The agent a launched program is, from its paths as named and resolved (the package
    directory first, then the file name); None for anything else."""
    for adapter in all_adapters():
        if adapter.is_package_of(programs):
            return adapter
    for adapter in all_adapters():
        if adapter.is_named_in(programs):
            return adapter
    return None
