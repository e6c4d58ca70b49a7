"""MCP servers an agent starts over stdio, recognised by the command its configuration gives.

The agent's adapter reads its configuration (Claude Code: the project's
``.mcp.json`` and the user's ``.claude.json``; codex: ``[mcp_servers.NAME]``
in ``config.toml``) into ``name -> argv``.  A process the agent starts whose
command is one of those is the MCP server ``NAME``: it and everything under
it are labelled ``MCP server NAME`` in lineages and ``show``, never taken
for a tool call or for the agent's own chatter.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence


def _base(s: str) -> str:
    return s.rsplit("/", 1)[-1]


def match_server(servers: Mapping[str, Sequence[str]], argv: Sequence[str], text: str) -> str | None:
    """The name of the server whose configured command ``argv`` (or the shell command ``text``) runs."""
    args = list(argv)
    want = " ".join(text.split())
    for name, cmd in servers.items():
        cmd = list(cmd)
        if not cmd or not args:
            continue
        if args == cmd or (_base(args[0]) == _base(cmd[0]) and args[1:] == cmd[1:]):
            return name
        if want == " ".join(shlex.join(cmd).split()):
            return name
    return None


def label(name: str) -> str:
    return f"MCP server {name}"
