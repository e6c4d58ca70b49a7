"""What the agent claims it did: read from a JSON document or the agent's own log.

These inputs are understood (``gate --claims FILE``):

* A JSON document::

    {"tests_passed": true, "tests_run": true,
     "files_changed": ["a.py"], "files_created": ["b.py"], "files_deleted": ["c.py"],
     "commands_run": ["pytest -q", {"command": "make", "exit_code": 0}],
     "final_message": "..."}

  (``files_modified``, ``files_added``, ``files_removed``, ``commands`` are
  accepted aliases).  Other keys are listed as unchecked.

* The JSONL stream of ``codex exec --json``.  Read from it: completed
  ``command_execution`` items (command and exit code), ``file_change`` items
  (path and kind), and the last ``agent_message`` (the final message).  The
  older ``{"msg": {...}}`` form is read too: ``exec_command_begin`` /
  ``exec_command_end``, ``patch_apply_begin``, ``agent_message``,
  ``task_complete``.  Other lines are ignored.

* Any other log an agent adapter reads (a Claude Code session transcript, a
  mini-swe-agent trajectory): the commands it ran with their exit codes, the
  files its edit tools wrote, and its final message
  (:func:`claims_from_log`).

From a final message, two claims are recognised by wording: that the tests
pass ("all tests pass", "12 passed") and that the tests were run ("I ran the
tests").  A sentence that also speaks of failing, skipping or not running is
not read as a claim.  This is a heuristic; structured claims are exact.

Checking them against the record is :mod:`spyglass.evidence.claimcheck`.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import msgspec

from spyglass.agents.agent_logs import AgentLog
from spyglass.errors import SourceError

_ALIASES: dict[str, str] = {
    "tests_passed": "tests_passed",
    "tests_pass": "tests_passed",
    "all_tests_passed": "tests_passed",
    "tests_passing": "tests_passed",
    "tests_run": "tests_run",
    "ran_tests": "tests_run",
    "files_changed": "changed",
    "changed_files": "changed",
    "files_modified": "changed",
    "modified_files": "changed",
    "files_created": "added",
    "files_added": "added",
    "created_files": "added",
    "added_files": "added",
    "files_deleted": "deleted",
    "files_removed": "deleted",
    "deleted_files": "deleted",
    "removed_files": "deleted",
    "commands_run": "commands",
    "commands": "commands",
    "commands_executed": "commands",
    "final_message": "message",
    "message": "message",
    "summary": "message",
}


class ClaimedCommand(msgspec.Struct):
    command: str  # as the agent wrote it
    argv: list[str] | None  # when given as a list, or split from the text
    exit_code: int | None = None
    where: str = ""


class ClaimedFile(msgspec.Struct):
    path: str
    kind: str  # changed | added | deleted
    where: str = ""


class Claims(msgspec.Struct):
    source: str
    format: str  # json | codex-jsonl
    tests_passed: bool | None = None
    tests_passed_from: str = ""
    tests_run: bool | None = None
    tests_run_from: str = ""
    files: list[ClaimedFile] = msgspec.field(default_factory=list)
    commands: list[ClaimedCommand] = msgspec.field(default_factory=list)
    final_message: str | None = None
    unchecked: dict[str, Any] = msgspec.field(default_factory=dict)
    skipped_lines: int = 0


# -- reading claims ------------------------------------------------------------------
def load_claims(path: Path) -> Claims:
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError("claims file not found", shown) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read claims: {exc}", shown) from None
    return parse_claims(text, shown)


def parse_claims(text: str, source: str = "<claims>") -> Claims:
    stripped = text.strip()
    if not stripped:
        raise SourceError("the claims file is empty", source)
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError as exc:
        first = stripped.splitlines()[0]
        try:
            first_obj = json.loads(first)
        except json.JSONDecodeError:
            first_obj = None
        if isinstance(first_obj, dict) and first != stripped:
            return _agent_log_claims(text, source) or parse_codex_jsonl(text, source)
        raise SourceError(f"not valid JSON: {exc.msg}", source, exc.lineno, exc.colno) from None
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list) and not (set(whole) & set(_ALIASES)):
        found = _agent_log_claims(text, source)  # a mini-swe-agent trajectory
        if found is not None:
            return found
    if isinstance(whole, dict) and ("type" in whole or "msg" in whole) and not (set(whole) & set(_ALIASES)):
        return parse_codex_jsonl(text, source)
    if not isinstance(whole, dict):
        raise SourceError("claims must be a JSON object (or a codex --json event stream)", source, 1, 1)
    return parse_claims_object(whole, source)


def _agent_log_claims(text: str, source: str) -> Claims | None:
    """Claims from the log of an agent whose adapter reads it (a Claude Code transcript, a
    mini-swe-agent trajectory); None for codex streams (read by :func:`parse_codex_jsonl`) and
    for text no adapter reads."""
    from spyglass.agents.agent_logs import parse_agent_log

    try:
        log = parse_agent_log(text, source)
    except SourceError:
        return None
    if log.format == "codex-exec-json":
        return None
    return claims_from_log(log, source)


def _split(cmd: str) -> list[str] | None:
    try:
        return shlex.split(cmd)
    except ValueError:
        return None


def _command(value: Any, where: str, source: str) -> ClaimedCommand:
    exit_code = None
    if isinstance(value, dict):
        exit_code = value.get("exit_code")
        value = value.get("command", value.get("cmd"))
        if exit_code is not None and not isinstance(exit_code, int):
            raise SourceError(f"{where}: exit_code must be an integer", source)
    if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
        return ClaimedCommand(shlex.join(value), list(value), exit_code, where)
    if isinstance(value, str) and value.strip():
        return ClaimedCommand(value, _split(value), exit_code, where)
    raise SourceError(
        f'{where}: a command must be a string, a list of strings, or {{"command": ..., "exit_code": N}}',
        source,
    )


def parse_claims_object(obj: dict[str, Any], source: str) -> Claims:
    c = Claims(source=source, format="json")
    for key, value in obj.items():
        kind = _ALIASES.get(key)
        if kind is None:
            c.unchecked[key] = value
        elif kind in ("tests_passed", "tests_run"):
            if not isinstance(value, bool):
                raise SourceError(f"{key} must be true or false", source)
            setattr(c, kind, value)
            setattr(c, f"{kind}_from", f"field {key}")
        elif kind in ("changed", "added", "deleted"):
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise SourceError(f"{key} must be a list of paths", source)
            c.files.extend(ClaimedFile(p, kind, f"field {key}") for p in value)
        elif kind == "commands":
            if not isinstance(value, list):
                raise SourceError(f"{key} must be a list of commands", source)
            c.commands.extend(_command(v, f"{key}[{i}]", source) for i, v in enumerate(value))
        elif kind == "message" and isinstance(value, str):
            c.final_message = value
    if c.final_message:
        _claims_from_message(c)
    return c


def claims_from_log(log: AgentLog, source: str) -> Claims:
    """Claims read from an agent's own log (any format an agent adapter reads): the commands it
    ran with their exit codes, the files it reports changing, and its final message."""
    c = Claims(source=source, format="codex-jsonl" if log.format == "codex-exec-json" else log.format)
    for call in log.tool_calls:
        shown = call.raw or call.command
        c.commands.append(ClaimedCommand(shown, call.argv or _split(shown), call.exit_code, f"tool call {call.n}"))
    c.files.extend(ClaimedFile(path, kind, "agent log") for path, kind in log.files)
    c.final_message = log.final_message
    if c.final_message:
        _claims_from_message(c)
    return c


def parse_codex_jsonl(text: str, source: str) -> Claims:
    """A ``codex exec --json`` stream (or the older ``{"msg": ...}`` one), read by the codex adapter."""
    from spyglass.agents.adapters.codex import parse_exec_json

    lines: list[dict[str, Any]] = []
    skipped = 0
    first_error: tuple[int, int, str] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            skipped += 1
            first_error = first_error or (n, exc.colno, exc.msg)
            continue
        if isinstance(obj, dict):
            lines.append(obj)
    log = parse_exec_json(lines)
    if log.events == 0:
        if first_error is not None:
            raise SourceError(f"not valid JSON: {first_error[2]}", source, first_error[0], first_error[1])
        raise SourceError("no claims and no codex events found", source)
    c = claims_from_log(log, source)
    c.skipped_lines = skipped
    return c


# -- claims in prose -----------------------------------------------------------------
_PASS_RE = re.compile(
    r"\b(?:tests?|test\s+suite|specs?)\b[^.!?\n]{0,30}?\b(?:pass(?:es|ed|ing)?|succeed(?:s|ed)?|green)\b"
    r"|\b\d+\s+(?:tests?\s+)?passed\b",
    re.I,
)
_RAN_RE = re.compile(
    r"\b(?:ran|run|executed|re-ran|reran)\s+(?:the\s+|all\s+)*(?:unit\s+)?(?:tests?|test\s+suite)\b", re.I
)
_NEG_RE = re.compile(
    r"\b(?:not|never|cannot|can't|couldn't|could\s+not|didn't|did\s+not|unable|skip\w*|"
    r"haven't|hasn't|except|some|most)\b|n't\b",
    re.I,
)
_FAIL_RE = re.compile(r"(?<!\bno )(?<!\b0 )(?<!zero )\b(?:fail\w*|errors?|broken)\b", re.I)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def message_claim(text: str, pattern: re.Pattern[str]) -> str | None:
    """The sentence of ``text`` that makes the claim ``pattern`` describes, unless it is hedged:
    a negation before or inside the claim, or failures mentioned anywhere in the sentence."""
    for sentence in _sentences(text):
        m = pattern.search(sentence)
        if m and not _NEG_RE.search(sentence[: m.end()]) and not _FAIL_RE.search(sentence):
            return sentence
    return None


def _claims_from_message(c: Claims) -> None:
    text = c.final_message or ""
    if c.tests_passed is None and (s := message_claim(text, _PASS_RE)):
        c.tests_passed, c.tests_passed_from = True, f"final message: {s!r}"
    if c.tests_run is None and (s := message_claim(text, _RAN_RE) or message_claim(text, _PASS_RE)):
        c.tests_run, c.tests_run_from = True, f"final message: {s!r}"
