"""Model scripts: the assistant turns a stub model answers with, one per step.

A script is a JSON file (see docs/agents.md)::

    {
      "model": "stub-model",
      "vars": {"PORT": "8000"},
      "steps": [
        {"say": "Reading the skill.", "run": "cat .agents/skills/report/SKILL.md"},
        {"run": ["python3 scripts/a.py", "pytest -q"]},
        {"tool_calls": [{"name": "update_plan", "arguments": {"plan": []}}]},
        {"say": "Done."}
      ]
    }

A step says text (``say``), runs shell commands (``run``: a string or a list,
sent as calls of whatever shell tool the request declares: codex's
``exec_command``, mini-swe-agent's ``bash`` ...), and/or makes explicit
``tool_calls``.  ``${NAME}`` in any string is replaced by a variable given
to the server or by the script's ``vars`` default; other ``${...}`` stay as
they are, for the shell.  A bare JSON list is read as the steps.

This module is pure: it parses scripts and renders one step against the tools
a request declares.  The HTTP side is :mod:`spyglass.agents.model_stub`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import SourceError, SpyglassError

DEFAULT_MODEL = "spyglass-stub"

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ScriptError(SpyglassError):
    """A step cannot be answered for this request (no shell tool declared ...)."""


class ToolCallSpec(msgspec.Struct, frozen=True):
    """An explicit tool call in a step; ``arguments`` is a JSON object or a raw string."""

    name: str
    arguments: Any
    id: str | None = None


class Step(msgspec.Struct, frozen=True):
    say: str | None = None
    run: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallSpec, ...] = ()


class Call(msgspec.Struct, frozen=True):
    """A tool call as sent on the wire: ``arguments`` is the JSON text."""

    call_id: str
    name: str
    arguments: str


class Turn(msgspec.Struct, frozen=True):
    """One rendered assistant turn: optional text, then tool calls."""

    index: int  # 0-based step number
    text: str | None
    calls: tuple[Call, ...] = ()


class Script(msgspec.Struct, frozen=True):
    steps: tuple[Step, ...]
    model: str = DEFAULT_MODEL
    vars: Mapping[str, str] = msgspec.field(default_factory=dict)
    source: str = "<script>"

    def __len__(self) -> int:
        return len(self.steps)

    def to_json(self) -> dict[str, Any]:
        """The script as JSON data (what :func:`load_script` reads back)."""
        steps: list[dict[str, Any]] = []
        for s in self.steps:
            d: dict[str, Any] = {}
            if s.say is not None:
                d["say"] = s.say
            if s.run:
                d["run"] = s.run[0] if len(s.run) == 1 else list(s.run)
            if s.tool_calls:
                d["tool_calls"] = [
                    {"name": t.name, "arguments": t.arguments, **({"id": t.id} if t.id else {})} for t in s.tool_calls
                ]
            steps.append(d)
        out: dict[str, Any] = {"model": self.model}
        if self.vars:
            out["vars"] = dict(self.vars)
        out["steps"] = steps
        return out


# --------------------------------------------------------------------------- loading


def _line_of(text: str, needle: str, occurrence: int) -> int | None:
    """Best-effort line number of the n-th occurrence of ``needle`` in ``text``."""
    pos = -1
    for _ in range(occurrence + 1):
        pos = text.find(needle, pos + 1)
        if pos < 0:
            return None
    return text.count("\n", 0, pos) + 1


def parse_script(data: Any, source: str = "<script>", text: str | None = None) -> Script:
    """A :class:`Script` from decoded JSON; errors name ``source`` and, where found, the line."""

    def fail(msg: str, step: int | None = None) -> SourceError:
        line = _line_of(text, "{", step + 1) if text is not None and step is not None else None
        return SourceError(msg, source, line)

    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict):
        raise fail('a model script is a JSON object with "steps" (or a JSON list of steps)')
    unknown = set(data) - {"model", "vars", "steps", "spyglass_model_script", "comment", "description"}
    if unknown:
        raise fail(f"unknown key(s) {', '.join(sorted(unknown))} (known: model, vars, steps)")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise fail('"steps" must be a non-empty list')
    model = data.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not model:
        raise fail('"model" must be a non-empty string')
    raw_vars = data.get("vars", {})
    if not isinstance(raw_vars, dict) or not all(isinstance(k, str) for k in raw_vars):
        raise fail('"vars" must be an object of names to strings')
    variables = {k: str(v) for k, v in raw_vars.items()}
    steps: list[Step] = []
    for i, raw in enumerate(raw_steps):
        where = f"steps[{i}]"
        if isinstance(raw, str):
            raw = {"say": raw}
        if not isinstance(raw, dict):
            raise fail(f"{where}: a step is an object with say/run/tool_calls", i)
        bad = set(raw) - {"say", "run", "tool_calls", "comment"}
        if bad:
            raise fail(f"{where}: unknown key(s) {', '.join(sorted(bad))} (known: say, run, tool_calls)", i)
        say = raw.get("say")
        if say is not None and not isinstance(say, str):
            raise fail(f"{where}.say: must be a string", i)
        run = raw.get("run", [])
        if isinstance(run, str):
            run = [run]
        if not isinstance(run, list) or not all(isinstance(c, str) and c for c in run):
            raise fail(f"{where}.run: must be a command string or a list of them", i)
        calls: list[ToolCallSpec] = []
        for j, tc in enumerate(raw.get("tool_calls", []) or []):
            if not isinstance(tc, dict) or not isinstance(tc.get("name"), str) or not tc["name"]:
                raise fail(f'{where}.tool_calls[{j}]: needs a "name" string', i)
            args = tc.get("arguments", {})
            if not isinstance(args, dict | str):
                raise fail(f"{where}.tool_calls[{j}].arguments: must be an object or a JSON string", i)
            tc_id = tc.get("id")
            if tc_id is not None and not isinstance(tc_id, str):
                raise fail(f"{where}.tool_calls[{j}].id: must be a string", i)
            calls.append(ToolCallSpec(tc["name"], args, tc_id))
        if say is None and not run and not calls:
            raise fail(f"{where}: empty step (give say, run or tool_calls)", i)
        steps.append(Step(say=say, run=tuple(run), tool_calls=tuple(calls)))
    return Script(steps=tuple(steps), model=model, vars=variables, source=source)


def load_script(path: str | Path) -> Script:
    """Read and check a script file; a mistake raises SourceError with file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"cannot read the model script: {exc.strerror or exc}", str(p)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"not valid JSON: {exc.msg}", str(p), exc.lineno, exc.colno) from None
    return parse_script(data, str(p), text)


# --------------------------------------------------------------------------- rendering


def substitute(value: Any, variables: Mapping[str, str]) -> Any:
    """Replace ``${NAME}`` for known names in every string inside ``value``."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def declared_tools(tools: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON-schema parameters) of the function tools a request declares.

    Accepts the chat-completions shape (``{"type": "function", "function": {...}}``),
    the responses shape (``{"type": "function", "name": ..., "parameters": ...}``)
    and the Anthropic shape (``{"name": ..., "input_schema": ...}``).
    """
    out: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(tools, list):
        return out
    for t in tools:
        if not isinstance(t, dict):
            continue
        inner = t.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else t
        name = fn.get("name")
        if isinstance(name, str):
            params = fn.get("parameters", fn.get("input_schema"))  # OpenAI / Anthropic
            out.append((name, params if isinstance(params, dict) else {}))
    return out


#: Shell tools of known agents, in order of preference: name -> how a command becomes arguments.
_SHELL_TOOLS: tuple[tuple[str, str], ...] = (
    ("exec_command", "cmd"),  # codex (unified exec)
    ("shell_command", "command"),  # codex (shell_command tool)
    ("bash", "command"),  # mini-swe-agent, many others
    ("Bash", "command"),  # Claude Code
    ("shell", "argv"),  # older codex: {"command": ["bash", "-lc", cmd]}
)


def shell_call_arguments(tools: Sequence[tuple[str, dict[str, Any]]], command: str) -> tuple[str, dict[str, Any]]:
    """The tool name and arguments that run ``command`` with the request's shell tool."""
    names = {n: p for n, p in tools}
    for name, how in _SHELL_TOOLS:
        if name in names:
            if how == "argv":
                return name, {"command": ["bash", "-lc", command]}
            return name, {how: command}
    for name, params in tools:  # any tool with exactly one required string parameter
        req = params.get("required") or []
        props = params.get("properties") or {}
        one_string = len(req) == 1 and isinstance(props.get(req[0]), dict) and props[req[0]].get("type") == "string"
        if one_string and any(w in name.lower() for w in ("shell", "exec", "bash", "command", "run", "terminal")):
            return name, {req[0]: command}
    declared = ", ".join(n for n, _ in tools) or "none"
    raise ScriptError(f"the step runs a command but the request declares no shell tool (tools: {declared})")


def render_step(
    script: Script, index: int, tools: Sequence[tuple[str, dict[str, Any]]], variables: Mapping[str, str]
) -> Turn:
    """Step ``index`` as a turn for a request that declared ``tools``.

    Tool-call ids are derived from the step and position (``call_<step>_<n>``),
    so a retried request gets exactly the same answer.
    """
    step = script.steps[index]
    env = {**script.vars, **variables}
    calls: list[Call] = []
    for command in step.run:
        name, args = shell_call_arguments(tools, substitute(command, env))
        calls.append(Call(f"call_{index + 1}_{len(calls) + 1}", name, json.dumps(args)))
    for tc in step.tool_calls:
        args = substitute(tc.arguments, env)
        arg_text = args if isinstance(args, str) else json.dumps(args)
        calls.append(Call(tc.id or f"call_{index + 1}_{len(calls) + 1}", tc.name, arg_text))
    say = substitute(step.say, env) if step.say is not None else None
    return Turn(index=index, text=say, calls=tuple(calls))


# --------------------------------------------------------------------------- step counting

_ASSISTANT_ITEM_TYPES = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
)


def chat_turns_done(messages: Any) -> int:
    """Assistant turns already in a chat-completions ``messages`` list."""
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def responses_turns_done(items: Any) -> int:
    """Assistant turns already in a responses-API ``input``: runs of consecutive
    assistant-produced items (message, function_call, reasoning ...) count once."""
    if not isinstance(items, list):
        return 0
    turns = 0
    in_turn = False
    for it in items:
        if not isinstance(it, dict):
            continue
        typ = it.get("type")
        assistant = typ in _ASSISTANT_ITEM_TYPES or (typ in (None, "message") and it.get("role") == "assistant")
        if assistant and not in_turn:
            turns += 1
        in_turn = assistant
    return turns
