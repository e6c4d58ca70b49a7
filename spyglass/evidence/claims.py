"""What the agent claims it did: read from a JSON document or a `codex exec --json` stream.

Two inputs are understood (``gate --claims FILE``):

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass
class ClaimedCommand:
    command: str  # as the agent wrote it
    argv: list[str] | None  # when given as a list, or split from the text
    exit_code: int | None = None
    where: str = ""


@dataclass
class ClaimedFile:
    path: str
    kind: str  # changed | added | deleted
    where: str = ""


@dataclass
class Claims:
    source: str
    format: str  # json | codex-jsonl
    tests_passed: bool | None = None
    tests_passed_from: str = ""
    tests_run: bool | None = None
    tests_run_from: str = ""
    files: list[ClaimedFile] = field(default_factory=list)
    commands: list[ClaimedCommand] = field(default_factory=list)
    final_message: str | None = None
    unchecked: dict[str, Any] = field(default_factory=dict)
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
            return parse_codex_jsonl(text, source)
        raise SourceError(f"not valid JSON: {exc.msg}", source, exc.lineno, exc.colno) from None
    if isinstance(whole, dict) and ("type" in whole or "msg" in whole) and not (set(whole) & set(_ALIASES)):
        return parse_codex_jsonl(text, source)
    if not isinstance(whole, dict):
        raise SourceError("claims must be a JSON object (or a codex --json event stream)", source, 1, 1)
    return parse_claims_object(whole, source)


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


def _item_fields(item: dict[str, Any]) -> dict[str, Any]:
    details = item.get("details")
    return {**item, **details} if isinstance(details, dict) else item


def parse_codex_jsonl(text: str, source: str) -> Claims:
    c = Claims(source=source, format="codex-jsonl")
    pending: dict[str, ClaimedCommand] = {}
    recognised = 0
    first_error: tuple[int, int, str] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            c.skipped_lines += 1
            first_error = first_error or (n, exc.colno, exc.msg)
            continue
        if not isinstance(obj, dict):
            continue
        ev = obj["msg"] if isinstance(obj.get("msg"), dict) else obj
        typ = ev.get("type")
        where = f"line {n}"
        if typ == "item.completed" and isinstance(ev.get("item"), dict):
            item = _item_fields(ev["item"])
            itype = item.get("type") or item.get("item_type")
            recognised += 1
            if itype == "command_execution":
                cmd = item.get("command")
                if isinstance(cmd, str | list) and cmd:
                    code = item.get("exit_code")
                    c.commands.append(
                        _command(
                            {"command": cmd, "exit_code": code if isinstance(code, int) else None},
                            where,
                            source,
                        )
                    )
            elif itype in ("agent_message", "assistant_message"):
                msg = item.get("text") or item.get("message")
                if isinstance(msg, str):
                    c.final_message = msg
            elif itype == "file_change" and item.get("status") != "failed":
                for ch in item.get("changes") or []:
                    if isinstance(ch, dict) and isinstance(ch.get("path"), str):
                        kind = {"add": "added", "delete": "deleted"}.get(str(ch.get("kind")), "changed")
                        c.files.append(ClaimedFile(ch["path"], kind, where))
        elif typ == "exec_command_begin":
            recognised += 1
            cmd = ev.get("command")
            if isinstance(cmd, str | list) and cmd:
                pending[str(ev.get("call_id", n))] = _command(cmd, where, source)
        elif typ == "exec_command_end":
            recognised += 1
            cc = pending.pop(str(ev.get("call_id", "")), None)
            if cc is None and isinstance(ev.get("command"), str | list):
                cc = _command(ev["command"], where, source)
            if cc is not None:
                code = ev.get("exit_code")
                cc.exit_code = code if isinstance(code, int) else None
                c.commands.append(cc)
        elif typ == "agent_message" and isinstance(ev.get("message"), str):
            recognised += 1
            c.final_message = ev["message"]
        elif typ == "task_complete" and isinstance(ev.get("last_agent_message"), str):
            recognised += 1
            c.final_message = ev["last_agent_message"]
        elif typ in ("patch_apply_begin", "patch_apply_end") and isinstance(ev.get("changes"), dict):
            recognised += 1
            if typ == "patch_apply_end":
                continue
            for path, change in ev["changes"].items():
                kind = "changed"
                if isinstance(change, dict):
                    kind = "added" if "add" in change else "deleted" if "delete" in change else "changed"
                c.files.append(ClaimedFile(str(path), kind, where))
        elif typ is not None:
            recognised += 1
    c.commands.extend(pending.values())  # started, never reported finished
    if recognised == 0:
        if first_error is not None:
            raise SourceError(f"not valid JSON: {first_error[2]}", source, first_error[0], first_error[1])
        raise SourceError("no claims and no codex events found", source)
    if c.final_message:
        _claims_from_message(c)
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
