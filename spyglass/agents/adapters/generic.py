"""The fallback for an agent spyglass has no adapter for.

It recognises nothing by itself (``spyglass run --agent generic`` or a
wrapper script gets it), points any OpenAI or Anthropic client at the stub
through the usual variables (``OPENAI_BASE_URL``, ``OPENAI_API_BASE``,
``ANTHROPIC_BASE_URL``), reads no log, and leaves the process tree as the
only source of tool calls (a shell running a command string started by the
agent is taken for one).  Copy this file to add an agent.
"""

from __future__ import annotations

from spyglass.agents.adapters.base import AgentAdapter


class GenericAdapter(AgentAdapter):
    name = "generic"
    title = "any other agent"
    package = ""
    gives = ("live",)
