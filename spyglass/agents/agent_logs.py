"""Tool calls read from the logs real agents write: the data model, and the dispatch.

Each agent adapter (:mod:`spyglass.agents.adapters`) reads its own formats,
recognised by their content: codex ``exec --json`` output and session
rollouts, Claude Code session transcripts, mini-swe-agent trajectories.

The result is a :class:`AgentLog`: the assistant turns in order, each with
its text and the shell commands it asked for.  Only calls that run a command
are numbered (``tool call 1`` is the first command the model ran).  Parsing is
pure (:func:`parse_agent_log` takes text); :func:`read_agent_log` reads a file.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.errors import SourceError

if TYPE_CHECKING:
    from spyglass.agents.adapters.base import AgentAdapter

#: Function-call names whose arguments hold a shell command, and the argument.
SHELL_TOOL_ARGS: dict[str, str] = {
    "exec_command": "cmd",
    "shell_command": "command",
    "bash": "command",
    "shell": "command",  # a list: ["bash", "-lc", "..."]
    "container.exec": "cmd",
}

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})


class ToolCall(msgspec.Struct):
    """One shell command the model asked the agent to run."""

    n: int  # 1-based, in the order the model asked
    command: str  # the command text the model gave (what a person would read)
    # (n, command) come first: the rest has defaults
    turn: int = 0  # 0-based assistant turn it belongs to
    tool: str = "shell"  # the tool's name (exec_command, bash ...)
    call_id: str | None = None
    argv: list[str] | None = None  # how the agent ran it, where the log says
    exit_code: int | None = None
    ts: float | None = None  # seconds since the epoch, where the log says
    output: str | None = None  # what the tool returned, where the log says
    raw: str | None = None  # the command as the log wrote it, when that differs from ``command``

    @property
    def label(self) -> str:
        return f"tool call {self.n}: {self.command}"


class Turn(msgspec.Struct):
    """One assistant turn: what it said and the commands it ran."""

    text: str | None = None
    calls: list[ToolCall] = msgspec.field(default_factory=list)
    #: (name, arguments JSON) of non-shell calls
    other_calls: list[tuple[str, str]] = msgspec.field(default_factory=list)


class AgentLog(msgspec.Struct):
    """The conversation of one agent run, read from its own log (its turns, in order)."""

    agent: str  # "codex" | "claude" | "mini"
    format: str  # "codex-exec-json" | "codex-rollout" | "claude-transcript" | "mini-trajectory"
    turns: list[Turn] = msgspec.field(default_factory=list)
    source: str = ""
    #: (path, changed|added|deleted) the agent reports
    files: list[tuple[str, str]] = msgspec.field(default_factory=list)
    final: str | None = None  # the final message, where the log marks one
    events: int = 0  # log entries recognised

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.calls]

    @property
    def final_message(self) -> str | None:
        if self.final is not None:
            return self.final
        for t in reversed(self.turns):
            if t.text:
                return t.text
        return None


def unwrap_shell(argv: list[str]) -> str | None:
    """``X`` for ``[/bin/bash, -lc, X]`` (any shell, ``-c``/``-lc``/``-ec``..., also ``-c -l X``), else None."""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        seen_c = False
        for a in argv[1:]:
            if a == "--":
                continue
            if a.startswith("-") and not a.startswith("--") and len(a) > 1:
                seen_c = seen_c or "c" in a[1:]
                continue
            if a.startswith("--"):
                continue
            return a if seen_c else None
    return None


def command_of_string(cmd: str) -> tuple[str, list[str] | None]:
    """(model command, argv) from a codex ``command_execution`` string such as
    ``/bin/bash -lc 'ls -la'``."""
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return cmd, None
    inner = unwrap_shell(argv)
    return (inner if inner is not None else cmd), argv


def shell_command(name: str, arguments: str) -> str | None:
    """The command text of a shell-tool call, or None if it is not one."""
    key = SHELL_TOOL_ARGS.get(name)
    if key is None:
        return None
    try:
        args = json.loads(arguments) if arguments else {}
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    val = args.get(key)
    if isinstance(val, list) and all(isinstance(v, str) for v in val):
        inner = unwrap_shell(val)
        return inner if inner is not None else shlex.join(val)
    return val if isinstance(val, str) else None


_ISO = re.compile(r"^\d{4}-\d\d-\d\dT")


def iso_ts(value: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 time stamp, or None."""
    if not isinstance(value, str) or not _ISO.match(value):
        return None
    import datetime as _dt

    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_agent_log(text: str, source: str = "<agent log>") -> AgentLog:
    """Recognise the format of ``text`` (each agent adapter is asked in turn) and read its tool calls."""
    from spyglass.agents.adapters import all_adapters

    stripped = text.lstrip()
    if not stripped:
        raise SourceError("the agent log is empty", source)
    whole: Any = None
    if stripped.startswith(("{", "[")):
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
    lines: list[dict[str, Any]] = []
    if not isinstance(whole, dict) or "messages" not in whole:
        raw_lines = text.splitlines()
        for i, raw in enumerate(raw_lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                if i == len(raw_lines):  # a last line cut short by a live writer
                    break
                raise SourceError(f"not JSON lines, {KNOWN_FORMATS}", source, i) from None
            if isinstance(obj, dict):
                lines.append(obj)
    for adapter in all_adapters():
        log = adapter.parse_log(text, whole, lines, source)
        if log is not None:
            log.source = source
            return log
    raise SourceError(f"unknown agent log format (expected {KNOWN_FORMATS})", source, 1)


#: What :func:`parse_agent_log` understands, for error messages.
KNOWN_FORMATS = (
    "codex --json output, a codex session rollout, a Claude Code session transcript, or a mini-swe-agent trajectory"
)


def read_agent_log(path: str | Path) -> AgentLog:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SourceError(f"cannot read the agent log: {exc.strerror or exc}", str(p)) from None
    return parse_agent_log(text, str(p))


def looks_like_agent_log(path: str) -> str | None:
    """The name of the agent (``codex``, ``claude``, ``mini``) that writes its session log at ``path``."""
    adapters, quick = _log_adapters()
    if quick is not None and quick.search(path) is None:  # called per file written: one search for most
        return None
    for adapter in adapters:
        if adapter.looks_like_log(path):
            return adapter.name
    return None


@functools.cache
def _log_adapters() -> tuple[tuple[AgentAdapter, ...], re.Pattern[str] | None]:
    """The adapters (made once, not per file written), and one pattern that every log path any of
    them recognises matches (None when one decides otherwise than by its plain patterns)."""
    from spyglass.agents.adapters import all_adapters
    from spyglass.agents.adapters.base import AgentAdapter

    adapters = all_adapters()
    pats = [p for a in adapters for p in a.log_patterns]
    plain = all(type(a).looks_like_log is AgentAdapter.looks_like_log for a in adapters) and all(
        p.flags == re.UNICODE for p in pats
    )
    quick = re.compile("|".join(f"(?:{p.pattern})" for p in pats) or "(?!)") if plain else None
    return adapters, quick


def log_from_argv(argv: list[str] | None, cwd: str | None) -> str | None:
    """The trajectory path a mini-swe-agent command line names (``-o``/``--output``), made absolute."""
    args = list(argv or [])
    if not args:
        return None
    for i, a in enumerate(args):
        value = None
        if a in ("-o", "--output") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--output="):
            value = a.split("=", 1)[1]
        if value:
            if not value.startswith("/") and cwd:
                value = f"{cwd.rstrip('/')}/{value}"
            return value
    return None
