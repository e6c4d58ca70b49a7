"""Tool calls read from the logs real agents write.

Three formats are understood, recognised by their content:

* codex ``exec --json`` output (JSONL on stdout: ``thread.started``,
  ``item.started``/``item.completed`` with ``command_execution`` and
  ``agent_message`` items);
* codex session rollouts (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``:
  ``response_item`` lines with ``message``/``function_call`` payloads and
  ``event_msg`` lines whose ``CommandExecution`` items carry exit codes);
* mini-swe-agent trajectories (``*.traj.json``: ``messages`` whose assistant
  entries list ``extra.actions`` with the commands run).

The result is a :class:`AgentLog`: the assistant turns in order, each with
its text and the shell commands it asked for.  Only calls that run a command
are numbered (``tool call 1`` is the first command the model ran).  Parsing is
pure (:func:`parse_agent_log` takes text); :func:`read_agent_log` reads a file.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyglass.errors import SourceError

#: Function-call names whose arguments hold a shell command, and the argument.
SHELL_TOOL_ARGS: dict[str, str] = {
    "exec_command": "cmd",
    "shell_command": "command",
    "bash": "command",
    "shell": "command",  # a list: ["bash", "-lc", "..."]
    "container.exec": "cmd",
}

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})


@dataclass(slots=True)
class ToolCall:
    """One shell command the model asked the agent to run."""

    n: int  # 1-based, in the order the model asked
    command: str  # the command text the model gave (what a person would read)
    turn: int = 0  # 0-based assistant turn it belongs to
    tool: str = "shell"  # the tool's name (exec_command, bash ...)
    call_id: str | None = None
    argv: list[str] | None = None  # how the agent ran it, where the log says
    exit_code: int | None = None
    ts: float | None = None  # seconds since the epoch, where the log says

    @property
    def label(self) -> str:
        return f"tool call {self.n}: {self.command}"


@dataclass(slots=True)
class Turn:
    """One assistant turn: what it said and the commands it ran."""

    text: str | None = None
    calls: list[ToolCall] = field(default_factory=list)
    other_calls: list[tuple[str, str]] = field(
        default_factory=list
    )  # (name, arguments JSON) of non-shell calls


@dataclass(slots=True)
class AgentLog:
    agent: str  # "codex" | "mini"
    format: str  # "codex-exec-json" | "codex-rollout" | "mini-trajectory"
    turns: list[Turn] = field(default_factory=list)
    source: str = ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.calls]


def unwrap_shell(argv: list[str]) -> str | None:
    """``X`` for ``[/bin/bash, -lc, X]`` (any shell, ``-c``/``-lc``/``-ec``...), else None."""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        for i, a in enumerate(argv[1:-1], start=1):
            if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
                return argv[i + 1]
            if not a.startswith("-"):
                break
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


def _shell_command(name: str, arguments: str) -> str | None:
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


# --------------------------------------------------------------------------- formats


def _parse_mini(data: dict[str, Any]) -> AgentLog:
    log = AgentLog(agent="mini", format="mini-trajectory")
    exits: dict[str, int] = {}
    for m in data.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            rc = (m.get("extra") or {}).get("returncode")
            if isinstance(rc, int):
                exits[m["tool_call_id"]] = rc
    n = 0
    for m in data.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        extra = m.get("extra") or {}
        content = m.get("content")
        turn = Turn(text=content if isinstance(content, str) and content else None)
        ts = extra.get("timestamp")
        for a in extra.get("actions") or []:
            if isinstance(a, dict) and isinstance(a.get("command"), str):
                n += 1
                cid = a.get("tool_call_id") if isinstance(a.get("tool_call_id"), str) else None
                turn.calls.append(
                    ToolCall(
                        n=n,
                        command=a["command"],
                        turn=len(log.turns),
                        tool="bash",
                        call_id=cid,
                        argv=["/bin/sh", "-c", a["command"]],
                        exit_code=exits.get(cid or ""),
                        ts=ts if isinstance(ts, int | float) else None,
                    )
                )
        log.turns.append(turn)
    return log


def _parse_codex_exec(lines: list[dict[str, Any]]) -> AgentLog:
    """codex exec --json: items in order.  The output does not mark turn
    boundaries, so a turn is a message and the command right after it, or a
    command alone."""
    log = AgentLog(agent="codex", format="codex-exec-json")
    n = 0
    seen: dict[str, ToolCall] = {}
    for ev in lines:
        item = ev.get("item")
        if not isinstance(item, dict):
            continue
        typ = item.get("type")
        if typ == "agent_message" and ev.get("type") == "item.completed":
            text = item.get("text")
            log.turns.append(Turn(text=text if isinstance(text, str) else None))
        elif typ == "command_execution" and isinstance(item.get("command"), str):
            iid = str(item.get("id"))
            call = seen.get(iid)
            if call is None:
                if not log.turns or log.turns[-1].calls or log.turns[-1].other_calls:
                    log.turns.append(Turn())
                n += 1
                command, argv = command_of_string(item["command"])
                call = ToolCall(
                    n=n, command=command, turn=len(log.turns) - 1, tool="exec_command", call_id=iid, argv=argv
                )
                seen[iid] = call
                log.turns[-1].calls.append(call)
            if isinstance(item.get("exit_code"), int):
                call.exit_code = item["exit_code"]
    return log


def _parse_codex_rollout(lines: list[dict[str, Any]]) -> AgentLog:
    log = AgentLog(agent="codex", format="codex-rollout")
    n = 0
    by_id: dict[str, ToolCall] = {}
    cur: Turn | None = None
    in_turn = False
    for line in lines:
        payload = line.get("payload")
        if not isinstance(payload, dict):
            continue
        if line.get("type") == "event_msg":
            item = payload.get("item")
            if (
                payload.get("type") == "item_completed"
                and isinstance(item, dict)
                and item.get("type") == ("CommandExecution")
            ):
                call = by_id.get(str(item.get("id")))
                if call is not None:
                    if isinstance(item.get("exit_code"), int):
                        call.exit_code = item["exit_code"]
                    cmd = item.get("command")
                    if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
                        call.argv = cmd
            continue
        if line.get("type") != "response_item":
            continue
        typ = payload.get("type")
        assistant = typ in ("function_call", "custom_tool_call", "local_shell_call", "reasoning") or (
            typ == "message" and payload.get("role") == "assistant"
        )
        if not assistant:
            in_turn = False
            continue
        if not in_turn or cur is None:
            cur = Turn()
            log.turns.append(cur)
            in_turn = True
        if typ == "message":
            texts = [
                str(c["text"])
                for c in payload.get("content") or []
                if isinstance(c, dict) and isinstance(c.get("text"), str)
            ]
            if texts:
                cur.text = "\n".join([*([cur.text] if cur.text else []), *texts])
        elif typ == "function_call":
            name = str(payload.get("name") or "")
            raw_args = payload.get("arguments")
            args = raw_args if isinstance(raw_args, str) else "{}"
            command = _shell_command(name, args)
            if command is None:
                cur.other_calls.append((name, args))
                continue
            n += 1
            cid = payload.get("call_id") if isinstance(payload.get("call_id"), str) else None
            call = ToolCall(n=n, command=command, turn=len(log.turns) - 1, tool=name, call_id=cid)
            ts = _iso_ts(line.get("timestamp"))
            call.ts = ts
            cur.calls.append(call)
            if cid:
                by_id[cid] = call
    return log


_ISO = re.compile(r"^\d{4}-\d\d-\d\dT")


def _iso_ts(value: Any) -> float | None:
    if not isinstance(value, str) or not _ISO.match(value):
        return None
    import datetime as _dt

    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_agent_log(text: str, source: str = "<agent log>") -> AgentLog:
    """Recognise the format of ``text`` and read its tool calls."""
    stripped = text.lstrip()
    if not stripped:
        raise SourceError("the agent log is empty", source)
    if stripped.startswith("{"):
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            log = _parse_mini(whole)
            log.source = source
            return log
    lines: list[dict[str, Any]] = []
    for i, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            if i == len(text.splitlines()):  # a last line cut short by a live writer
                break
            raise SourceError(
                "not JSON lines, a codex log or a mini-swe-agent trajectory", source, i
            ) from None
        if isinstance(obj, dict):
            lines.append(obj)
    kinds = {str(o.get("type")) for o in lines}
    if kinds & {"session_meta", "response_item", "event_msg", "turn_context"}:
        log = _parse_codex_rollout(lines)
    elif kinds & {"thread.started", "turn.started", "item.started", "item.completed", "turn.completed"}:
        log = _parse_codex_exec(lines)
    else:
        raise SourceError(
            "unknown agent log format (expected codex --json output, a codex session rollout, "
            "or a mini-swe-agent trajectory)",
            source,
            1,
        )
    log.source = source
    return log


def read_agent_log(path: str | Path) -> AgentLog:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SourceError(f"cannot read the agent log: {exc.strerror or exc}", str(p)) from None
    return parse_agent_log(text, str(p))


#: Paths agents write their own logs to, for auto-detection from file events.
_LOG_PATTERNS = (
    ("codex", re.compile(r"/sessions/\d{4}/\d\d/\d\d/rollout-[^/]+\.jsonl$")),
    ("mini", re.compile(r"\.traj\.json$")),
)


def looks_like_agent_log(path: str) -> str | None:
    """``"codex"``/``"mini"`` if ``path`` is where that agent writes its session log."""
    for agent, pat in _LOG_PATTERNS:
        if pat.search(path):
            return agent
    return None


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
