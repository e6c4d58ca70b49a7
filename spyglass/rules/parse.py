"""Reading rule files: YAML documents -> checked :class:`Rule` objects.

A rule file holds one or more YAML documents.  A document with an ``id`` is
a rule; a document with ``lists`` and/or ``macros`` is a library shared by
all rules.  Every problem is collected as a SourceError with
``file:line:col``; the caller decides whether any error stops loading
(``load_ruleset`` does: nothing half-loads).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from spyglass.errors import SourceError
from spyglass.events import ACTIONS, EVENT_TYPES, LEVELS
from spyglass.policy.yamlsrc import (
    Pos,
    is_map,
    is_seq,
    item_pos,
    key_pos,
    load_documents,
    node_pos,
    to_plain,
    value_pos,
)
from spyglass.rules.condition import ConditionError, Sel, parse_condition
from spyglass.rules.eventtypes import _cond_types, _sel_types
from spyglass.rules.fields import FIELDS
from spyglass.rules.model import (
    MODIFIERS,
    SCOPES,
    Detection,
    FieldTest,
    Library,
    ListRef,
    Rule,
    Selection,
    Sequence,
    Step,
    Threshold,
)
from spyglass.rules.modifiers import REGISTRY as MODIFIER_CLASSES

#: lists every rule can use, filled from the policy and the run
POLICY_LISTS: Final = {
    "secrets": "secret globs (built-in + policy.secrets), ~ expanded to the run's HOME",
    "secret_exceptions": "globs that are never secret (public keys, known_hosts, .env.example)",
    "honeytokens": "honeytoken globs (policy.honeytokens and the sandbox's decoys)",
    "workspace": "workspace roots",
    "temp_dirs": "allowed temp and cache directories",
    "home": "the run's HOME",
    "allowed_hosts": "network.allow patterns (with the built-in list unless turned off)",
    "denied_hosts": "network.deny patterns",
    "trusted_exec": "trusted program directories",
    "agent_state": "the state files of known agents (their adapters' state_globs: sessions, caches, snapshots)",
}

RULE_KEYS: Final = (
    "id", "title", "description", "level", "action", "tags", "message", "detection", "threshold",
    "sequence", "enabled", "author", "references", "falsepositives", "exceptions",
)
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_NAME = re.compile(r"^[A-Za-z_][\w-]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_TEMPLATE = re.compile(r"\{([a-z_][a-z0-9_.]*)(?:\|([^{}]*))?\}")  # {field} or {field|when missing}


def parse_duration(v: Any) -> int | None:
    """Nanoseconds from ``500ms``, ``10s``, ``5m``, ``1h`` or a number of seconds."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return int(v * 1e9) if v > 0 else None
    m = _DURATION.match(str(v))
    if not m:
        return None
    n = float(m.group(1))
    unit = {"ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}[m.group(2) or "s"]
    return int(n * unit) if n > 0 else None


class ParsedFile(msgspec.Struct):
    path: str
    rules: list[Rule] = msgspec.field(default_factory=list)
    library: Library = msgspec.field(default_factory=Library)
    errors: list[SourceError] = msgspec.field(default_factory=list)
    #: changes to rules and lists/macros defined anywhere (spyglass/rules/tuning.py)
    changes: list[Any] = msgspec.field(default_factory=list)


class _FileParser:
    def __init__(self, text: str, path: str, macros: set[str], lists: set[str]) -> None:
        self.text = text
        self.lines = text.splitlines()
        self.path = path
        self.macros = macros
        self.lists = lists
        self.out = ParsedFile(path)

    # -- errors ------------------------------------------------------------------
    def err(self, msg: str, where: Pos) -> None:
        self.out.errors.append(SourceError(msg, self.path, where.line, where.col))

    # -- documents ---------------------------------------------------------------
    def library(self, doc: Any) -> None:
        for k in doc:
            if k not in ("lists", "macros"):
                self.err(f"unknown key {k!r} in a library document (lists, macros)", key_pos(doc, k))
        lists = doc.get("lists")
        if lists is not None:
            if not is_map(lists):
                self.err("lists must be a mapping of name -> list of values", value_pos(doc, "lists"))
            else:
                for name, vals in lists.items():
                    if not _NAME.match(str(name)):
                        self.err(f"bad list name {name!r}", key_pos(lists, name))
                    elif name in POLICY_LISTS:
                        self.err(f"list name {name!r} is reserved (filled from the policy)", key_pos(lists, name))
                    elif not is_seq(vals) or any(is_map(v) or is_seq(v) for v in vals):
                        self.err(f"list {name!r} must be a list of plain values", value_pos(lists, name))
                    else:
                        self.out.library.lists[str(name)] = to_plain(vals)
                        self.out.library.list_pos[str(name)] = (self.path, key_pos(lists, name))
        macros = doc.get("macros")
        if macros is not None:
            if not is_map(macros):
                self.err("macros must be a mapping of name -> selection", value_pos(doc, "macros"))
            else:
                for name, body in macros.items():
                    if not _NAME.match(str(name)):
                        self.err(f"bad macro name {name!r}", key_pos(macros, name))
                        continue
                    sel = self.selection(str(name), body, value_pos(macros, name))
                    if sel is not None:
                        self.out.library.macros[str(name)] = sel
                        self.out.library.macro_pos[str(name)] = (self.path, key_pos(macros, name))

    def rule(self, doc: Any) -> None:
        start = len(self.out.errors)
        for k in doc:
            if k not in RULE_KEYS:
                self.err(f"unknown rule key {k!r} (known: {', '.join(RULE_KEYS)})", key_pos(doc, k))
        rid = doc.get("id")
        if not isinstance(rid, str) or not _ID.match(rid):
            self.err("id must be lower-case letters, digits, '.', '_' or '-'", value_pos(doc, "id"))
            rid = str(rid)
        title = doc.get("title")
        if not isinstance(title, str) or not title.strip():
            self.err("a rule needs a title", value_pos(doc, "title") if "title" in doc else node_pos(doc))
            title = rid
        level = {"informational": "info"}.get(str(doc.get("level")), doc.get("level"))  # Sigma's name
        if level not in LEVELS:
            self.err(f"level must be one of {', '.join(LEVELS)}",
                     value_pos(doc, "level") if "level" in doc else node_pos(doc))
        action = doc.get("action", "alert")
        if action not in ACTIONS:
            self.err(f"action must be one of {', '.join(ACTIONS)}", value_pos(doc, "action"))
        tags = doc.get("tags", [])
        if not is_seq(tags) or not all(isinstance(t, str) for t in tags):
            self.err("tags must be a list of strings", value_pos(doc, "tags"))
            tags = []
        desc = doc.get("description", "")
        if not isinstance(desc, str):
            self.err("description must be text", value_pos(doc, "description"))
            desc = ""
        enabled = doc.get("enabled", True)
        if not isinstance(enabled, bool):
            self.err("enabled must be true or false", value_pos(doc, "enabled"))
        message = doc.get("message", "")
        if not isinstance(message, str):
            self.err("message must be text", value_pos(doc, "message"))
            message = ""
        for m in _TEMPLATE.finditer(message):
            if m.group(1) not in FIELDS:
                self.err(f"message names an unknown field {m.group(1)!r}", value_pos(doc, "message"))
        kinds = [k for k in ("detection", "sequence") if k in doc]
        detection = sequence = threshold = None
        if len(kinds) != 1:
            self.err("a rule needs exactly one of detection or sequence", node_pos(doc))
        elif kinds[0] == "detection":
            detection = self.detection(doc["detection"], value_pos(doc, "detection"))
            if "threshold" in doc:
                threshold = self.threshold(doc["threshold"], value_pos(doc, "threshold"))
        else:
            if "threshold" in doc:
                self.err("threshold goes with detection; a sequence step has its own count", key_pos(doc, "threshold"))
            sequence = self.sequence(doc["sequence"], value_pos(doc, "sequence"))
        if len(self.out.errors) > start:
            return
        self.out.rules.append(
            Rule(
                id=rid, title=title.strip(), level=level, action=action, description=desc.strip(),
                tags=[str(t) for t in tags], message=message, detection=detection, threshold=threshold,
                sequence=sequence, enabled=bool(enabled), source=self.path, pos=node_pos(doc),
            )
        )

    # -- detection ----------------------------------------------------------------
    def detection(self, node: Any, where: Pos) -> Detection | None:
        if not is_map(node):
            self.err("detection must be a mapping of selections and a condition", where)
            return None
        sels: dict[str, Selection] = {}
        for name, body in node.items():
            if name == "condition":
                continue
            if not _NAME.match(str(name)):
                self.err(f"bad selection name {name!r}", key_pos(node, name))
                continue
            sel = self.selection(str(name), body, value_pos(node, name))
            if sel is not None:
                sels[str(name)] = sel
        if "condition" not in node:
            if len(node) == 1:  # one selection: it is the condition
                only = str(next(iter(node)))
                if only not in sels:
                    return None  # its error is already reported
                return Detection(sels, Sel(only), only, _sel_types(sels[only]))
            self.err("detection needs a condition", where)
            return None
        text = node["condition"]
        cpos = value_pos(node, "condition")
        if not isinstance(text, str):
            self.err("condition must be text", cpos)
            return None
        all_names = [str(n) for n in node if n != "condition"]
        try:
            cond, used = parse_condition(text, all_names, self.macros)
        except ConditionError as exc:
            self.err(str(exc), self._offset(cpos, exc.offset))
            return None
        for name in sels:
            if name not in used:
                self.err(f"selection {name!r} is not used by the condition", key_pos(node, name))
        if len(sels) != len(all_names):
            return None
        return Detection(sels, cond, text, _cond_types(cond, sels, None))

    def _offset(self, where: Pos, offset: int) -> Pos:
        if where.line is None or where.col is None:
            return where
        line = self.lines[where.line - 1] if where.line - 1 < len(self.lines) else ""
        col = where.col
        if line[col - 1 : col] in ("'", '"'):
            col += 1
        return Pos(where.line, col + offset)

    def selection(self, name: str, body: Any, where: Pos) -> Selection | None:
        alts: list[list[FieldTest]] = []
        ok = True
        items = list(enumerate(body)) if is_seq(body) else [(None, body)]
        if is_seq(body) and not body:
            self.err(f"selection {name!r} is empty", where)
            return None
        for idx, alt in items:
            apos = item_pos(body, idx) if idx is not None else where
            if not is_map(alt) or not alt:
                self.err(f"selection {name!r}: expected a mapping of field: value"
                         + (" (or a list of them)" if idx is None else ""), apos)
                ok = False
                continue
            tests: list[FieldTest] = []
            for spec, value in alt.items():
                t = self.field_test(str(spec), value, key_pos(alt, spec), value_pos(alt, spec))
                if t is None:
                    ok = False
                else:
                    tests.append(t)
            alts.append(tests)
        return Selection(name, alts, where) if ok else None

    def field_test(self, spec: str, value: Any, kpos: Pos, vpos: Pos) -> FieldTest | None:
        parts = spec.split("|")
        fname, mods = parts[0], parts[1:]
        if fname not in FIELDS:
            hint = _close(fname, FIELDS)
            self.err(f"unknown field {fname!r}" + (f" (did you mean {hint!r}?)" if hint else ""), kpos)
            return None
        operator: str | None = None
        all_, cased = False, False
        for m in mods:
            if m not in MODIFIERS:
                self.err(f"unknown modifier {m!r} (known: {', '.join(MODIFIERS)})", kpos)
                return None
            if m == "all":
                all_ = True
            elif m == "cased":
                cased = True
            elif operator is not None:
                self.err(f"modifiers {operator!r} and {m!r} cannot be combined", kpos)
                return None
            else:
                operator = m
        if is_map(value):
            self.err(f"{spec}: a value must be a scalar or a list of scalars", vpos)
            return None
        values = to_plain(value) if is_seq(value) else [to_plain(value)]
        if any(isinstance(v, dict | list) for v in values):
            self.err(f"{spec}: a value must be a scalar or a list of scalars", vpos)
            return None
        if not values:
            self.err(f"{spec}: empty list of values", vpos)
            return None
        kind = FIELDS[fname].kind
        for i, v in enumerate(values):
            vp = item_pos(value, i) if is_seq(value) else vpos
            if isinstance(v, str) and v.startswith("$$"):
                v = values[i] = v[1:]  # "$$x": the text "$x"
            elif isinstance(v, str) and v.startswith("$"):
                if v[1:] not in self.lists and v[1:] not in POLICY_LISTS:
                    self.err(f"unknown list {v!r} (a text starting with $ is written $$)", vp)
                    return None
                values[i] = ListRef(v[1:])
                continue
            problem = MODIFIER_CLASSES[operator].check(spec, v, kind)
            if problem:
                self.err(problem, vp)
                return None
            if fname == "type" and operator is None and v not in EVENT_TYPES:
                self.err(f"unknown event type {v!r}", vp)
                return None
        return FieldTest(fname, operator, all_, cased, values, kpos, spec)

    # -- threshold and sequence -------------------------------------------------------
    def threshold(self, node: Any, where: Pos) -> Threshold | None:
        if not is_map(node):
            self.err("threshold must be a mapping: count, within, by, distinct", where)
            return None
        for k in node:
            if k not in ("count", "within", "by", "distinct"):
                self.err(f"unknown threshold key {k!r} (count, within, by, distinct)", key_pos(node, k))
        count = node.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 2:
            self.err("threshold.count must be a whole number >= 2", value_pos(node, "count"))
            return None
        within = parse_duration(node.get("within"))
        if within is None:
            self.err("threshold.within must be a duration like 10s, 5m, 1h", value_pos(node, "within"))
            return None
        by = node.get("by", "run")
        if by not in SCOPES:
            self.err(f"by must be one of {', '.join(SCOPES)}", value_pos(node, "by"))
            return None
        distinct = node.get("distinct")
        if distinct is not None and distinct not in FIELDS:
            self.err(f"unknown field {distinct!r}", value_pos(node, "distinct"))
            return None
        return Threshold(count, within, by, distinct)

    def sequence(self, node: Any, where: Pos) -> Sequence | None:
        if not is_map(node):
            self.err("sequence must be a mapping: by, within, steps", where)
            return None
        for k in node:
            if k not in ("by", "within", "steps"):
                self.err(f"unknown sequence key {k!r} (by, within, steps)", key_pos(node, k))
        by = node.get("by", "run")
        if by not in SCOPES:
            self.err(f"by must be one of {', '.join(SCOPES)}", value_pos(node, "by"))
        within = None
        if "within" in node:
            within = parse_duration(node["within"])
            if within is None:
                self.err("within must be a duration like 10s, 5m, 1h", value_pos(node, "within"))
        steps_node = node.get("steps")
        if not is_seq(steps_node) or len(steps_node) < 2:
            self.err("a sequence needs a list of at least two steps", value_pos(node, "steps") if "steps" in node
                     else where)
            return None
        steps: list[Step] = []
        for i, st in enumerate(steps_node):
            spos = item_pos(steps_node, i)
            if not is_map(st):
                self.err("a step is a mapping: detection, count, distinct, key", spos)
                continue
            for k in st:
                if k not in ("name", "detection", "count", "distinct", "key"):
                    self.err(f"unknown step key {k!r} (name, detection, count, distinct, key)", key_pos(st, k))
            if "detection" not in st:
                self.err("a step needs a detection", spos)
                continue
            det = self.detection(st["detection"], value_pos(st, "detection"))
            count = st.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                self.err("count must be a whole number >= 1", value_pos(st, "count"))
                continue
            for k in ("distinct", "key"):
                if st.get(k) is not None and st[k] not in FIELDS:
                    self.err(f"unknown field {st[k]!r}", value_pos(st, k))
                    det = None
            if det is not None:
                steps.append(Step(str(st.get("name", f"step{i + 1}")), det, count, st.get("distinct"), st.get("key")))
        if len(steps) != len(steps_node) or by not in SCOPES:
            return None
        return Sequence(by, within, steps)


def _close(name: str, known: dict[str, Any]) -> str | None:
    import difflib

    hits = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return hits[0] if hits else None


def library_names(text: str, path: str) -> tuple[set[str], set[str]]:
    """Names of the macros and lists a file defines (first pass; errors come later)."""
    macros: set[str] = set()
    lists: set[str] = set()
    try:
        docs = load_documents(text, path)
    except SourceError:
        return macros, lists
    for doc in docs:
        if is_map(doc) and "id" not in doc:
            if is_map(doc.get("macros")):
                macros |= {str(k) for k in doc["macros"]}
            if is_map(doc.get("lists")):
                lists |= {str(k) for k in doc["lists"]}
    return macros, lists


def parse_rule_text(text: str, path: str, macros: set[str], lists: set[str]) -> ParsedFile:
    """Rules, library and changes of one file's text; errors are collected, not raised."""
    from spyglass.rules import tuning

    p = _FileParser(text, path, macros, lists)
    try:
        docs = load_documents(text, path)
    except SourceError as exc:
        p.out.errors.append(exc)
        return p.out
    for doc in docs:
        if not is_map(doc):
            p.err("a rule file holds mappings (rules, or lists/macros)", node_pos(doc))
        elif "id" in doc:
            p.rule(doc)
            if "exceptions" in doc and p.out.rules and p.out.rules[-1].id == doc["id"]:
                ch = tuning.RuleChange(doc["id"], f"{path}:{node_pos(doc).line}", node_pos(doc), path)
                ch.exceptions = tuning.parse_exceptions(p, doc["exceptions"], value_pos(doc, "exceptions"))
                p.out.changes.append(ch)
        elif "modify" in doc:
            p.out.changes += [c for c in [tuning.parse_rule_change(p, doc)] if c is not None]
        elif "append" in doc or "override" in doc:
            p.out.changes += tuning.parse_library_change(p, doc)
        elif "lists" in doc or "macros" in doc:
            p.library(doc)
        else:
            p.err("a document needs an id (a rule), modify (a change), lists/macros or append/override",
                  node_pos(doc))
    return p.out


