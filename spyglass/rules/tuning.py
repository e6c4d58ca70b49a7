"""Tuning rules in place: exceptions, append, override, enabled, from rule files and the policy.

A rule file may change a rule defined elsewhere (the built-in pack, another
file) without copying it, in a document with ``modify: RULE_ID``::

    modify: cred-secret-read
    level: medium                # also: action, enabled
    exceptions:                  # the rule does not fire when any row matches
      - name: vault_agent
        fields: [process.name, file.path]
        comps: [=, glob]         # per field, default =; also in contains startswith endswith under re cidr
        values:
          - [vault-agent, ~/.vault-token]
    append:
      detection:                 # extra selections the appended condition may use
        ci: {process.parent.name: gitlab-runner}
      condition: and not ci      # added after the rule's condition: (CONDITION) and not ci
    override:
      detection: {...}           # replaces the selections of the same name (adds others)
      condition: a and not b     # replaces the condition

and a library document may append to or override shared lists and macros::

    append:
      lists: {shells: [fish]}
      macros: {inet_egress: {type: net.send}}   # one more alternative
    override:
      lists: {downloaders: [curl, wget]}

A rule's own ``exceptions:`` work the same way, and the policy's
``rules.overrides.RULE_ID`` takes ``level``, ``action``, ``enabled``,
``exceptions``, ``append`` and ``override``.  Changes apply in order: library
changes first, then rule changes file by file, the policy's last.  Every
change is recorded on the rule (``Rule.origin``) so ``rules show
--effective`` can say where each part came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.errors import SourceError
from spyglass.events import ACTIONS, LEVELS
from spyglass.policy.yamlsrc import Pos, is_map, is_seq, item_pos, key_pos, node_pos, to_plain, value_pos
from spyglass.rules.condition import And, ConditionError, Not, Sel, parse_condition
from spyglass.rules.model import Detection, Rule, Selection

if TYPE_CHECKING:
    from spyglass.rules.parse import _FileParser
    from spyglass.rules.ruleset import RuleSet

#: Falco's comparison names -> spyglass modifiers (None: equality, a list value: any of)
COMPS: dict[str, str | None] = {
    "=": None, "in": None, "contains": "contains", "startswith": "startswith", "endswith": "endswith",
    "glob": "glob", "under": "under", "re": "re", "cidr": "cidr",
}
#: Sigma's level names accepted beside spyglass's
LEVEL_SYNONYMS = {"informational": "info"}
MODIFY_KEYS = ("modify", "enabled", "level", "action", "exceptions", "append", "override")
_PART_KEYS = ("detection", "condition")


class RuleChange(msgspec.Struct):
    target: str
    where: str
    pos: Pos
    path: str
    enabled: bool | None = None
    level: str | None = None
    action: str | None = None
    exceptions: list[tuple[str, Selection]] = msgspec.field(default_factory=list)
    append_sels: dict[str, Selection] = msgspec.field(default_factory=dict)
    append_cond: tuple[str, Pos] | None = None
    override_sels: dict[str, Selection] = msgspec.field(default_factory=dict)
    override_cond: tuple[str, Pos] | None = None


class LibraryChange(msgspec.Struct):
    mode: str  # append | override
    where: str
    path: str
    lists: dict[str, tuple[list[Any], Pos]] = msgspec.field(default_factory=dict)
    macros: dict[str, tuple[Selection, Pos]] = msgspec.field(default_factory=dict)


def _where(path: str, pos: Pos) -> str:
    return f"{path}:{pos.line}" if pos.line else path


# ---------------------------------------------------------------- parsing


def parse_rule_change(p: _FileParser, doc: Any, target: str | None = None, *,
                      keys: tuple[str, ...] = MODIFY_KEYS) -> RuleChange | None:
    start = len(p.out.errors)
    for k in doc:
        if k not in keys:
            p.err(f"unknown key {k!r} in a rule change (known: {', '.join(keys)})", key_pos(doc, k))
    rid = target if target is not None else doc.get("modify")
    if not isinstance(rid, str) or not rid:
        p.err("modify names the rule to change", value_pos(doc, "modify"))
        return None
    ch = RuleChange(rid, _where(p.path, node_pos(doc)), node_pos(doc), p.path)
    if "enabled" in doc:
        if not isinstance(doc["enabled"], bool):
            p.err("enabled must be true or false", value_pos(doc, "enabled"))
        ch.enabled = bool(doc["enabled"])
    if "level" in doc:
        level = LEVEL_SYNONYMS.get(str(doc["level"]), doc["level"])
        if level not in LEVELS:
            p.err(f"level must be one of {', '.join(LEVELS)}", value_pos(doc, "level"))
        ch.level = level
    if "action" in doc:
        if doc["action"] not in ACTIONS:
            p.err(f"action must be one of {', '.join(ACTIONS)}", value_pos(doc, "action"))
        ch.action = doc["action"]
    if "exceptions" in doc:
        ch.exceptions = parse_exceptions(p, doc["exceptions"], value_pos(doc, "exceptions"))
    for mode in ("append", "override"):
        if mode not in doc:
            continue
        node = doc[mode]
        if not is_map(node):
            p.err(f"{mode} is a mapping: detection, condition", value_pos(doc, mode))
            continue
        for k in node:
            if k not in _PART_KEYS:
                p.err(f"unknown key {k!r} in {mode} (detection, condition)", key_pos(node, k))
        sels: dict[str, Selection] = {}
        det = node.get("detection")
        if det is not None:
            if not is_map(det):
                p.err(f"{mode}.detection is a mapping of selections", value_pos(node, "detection"))
            else:
                for name, body in det.items():
                    sel = p.selection(str(name), body, value_pos(det, name))
                    if sel is not None:
                        sels[str(name)] = sel
        cond = node.get("condition")
        if cond is not None and not isinstance(cond, str):
            p.err(f"{mode}.condition must be text", value_pos(node, "condition"))
            cond = None
        if mode == "append":
            ch.append_sels = sels
            ch.append_cond = (cond, value_pos(node, "condition")) if cond else None
        else:
            ch.override_sels = sels
            ch.override_cond = (cond, value_pos(node, "condition")) if cond else None
    return ch if len(p.out.errors) == start else None


def parse_exceptions(p: _FileParser, node: Any, where: Pos) -> list[tuple[str, Selection]]:
    """Falco-style exceptions -> one selection each (its rows are the alternatives)."""
    out: list[tuple[str, Selection]] = []
    if not is_seq(node):
        p.err("exceptions is a list of {name, fields, comps, values}", where)
        return out
    for i, exc in enumerate(node):
        epos = item_pos(node, i)
        if not is_map(exc):
            p.err("an exception is a mapping: name, fields, comps, values", epos)
            continue
        for k in exc:
            if k not in ("name", "fields", "comps", "values"):
                p.err(f"unknown exception key {k!r} (name, fields, comps, values)", key_pos(exc, k))
        name = exc.get("name")
        if not isinstance(name, str) or not name:
            p.err("an exception needs a name", value_pos(exc, "name") if "name" in exc else epos)
            continue
        single = isinstance(exc.get("fields"), str)
        fields = [exc["fields"]] if single else exc.get("fields")
        if not is_seq(fields) or not fields or not all(isinstance(f, str) for f in fields):
            p.err("fields is a field name or a list of them", value_pos(exc, "fields") if "fields" in exc else epos)
            continue
        comps_node = exc.get("comps", "=")
        comps = [comps_node] * len(fields) if isinstance(comps_node, str) else comps_node
        if not is_seq(comps) or len(comps) != len(fields) or any(c not in COMPS for c in comps):
            p.err(f"comps is one of {', '.join(COMPS)} or a list of them, one per field", value_pos(exc, "comps"))
            continue
        rows = exc.get("values")
        if not is_seq(rows) or not rows:
            p.err("values is a list of rows, one value per field", value_pos(exc, "values") if "values" in exc
                  else epos)
            continue
        alts = []
        for j, row in enumerate(rows):
            rpos = item_pos(rows, j)
            cells = [row] if single else row
            if not is_seq(cells) or len(cells) != len(fields):
                p.err(f"exception {name!r}: a row has one value per field ({len(fields)})", rpos)
                break
            tests = []
            for k, (f, comp, cell) in enumerate(zip(fields, comps, cells, strict=True)):
                op = COMPS[comp]
                spec = f if op is None else f"{f}|{op}"
                cpos = rpos if single else item_pos(cells, k)
                fpos = value_pos(exc, "fields") if single else item_pos(fields, k)
                t = p.field_test(spec, cell, fpos, cpos)
                if t is None:
                    break
                tests.append(t)
            else:
                alts.append(tests)
                continue
            break
        else:
            out.append((name, Selection(f"exception:{name}", alts, epos)))
    return out


def parse_library_change(p: _FileParser, doc: Any) -> list[LibraryChange]:
    out: list[LibraryChange] = []
    for k in doc:
        if k not in ("append", "override"):
            p.err(f"unknown key {k!r} in a library change (append, override)", key_pos(doc, k))
    for mode in ("append", "override"):
        node = doc.get(mode)
        if node is None:
            continue
        if not is_map(node):
            p.err(f"{mode} is a mapping: lists, macros", value_pos(doc, mode))
            continue
        ch = LibraryChange(mode, _where(p.path, value_pos(doc, mode)), p.path)
        for k in node:
            if k not in ("lists", "macros"):
                p.err(f"unknown key {k!r} in {mode} (lists, macros)", key_pos(node, k))
        lists = node.get("lists") or {}
        for name, vals in (lists.items() if is_map(lists) else ()):
            if not is_seq(vals) or any(is_map(v) or is_seq(v) for v in vals):
                p.err(f"list {name!r} must be a list of plain values", value_pos(lists, name))
            else:
                ch.lists[str(name)] = (to_plain(vals), key_pos(lists, name))
        macros = node.get("macros") or {}
        for name, body in (macros.items() if is_map(macros) else ()):
            sel = p.selection(str(name), body, value_pos(macros, name))
            if sel is not None:
                ch.macros[str(name)] = (sel, key_pos(macros, name))
        out.append(ch)
    return out


# ---------------------------------------------------------------- applying


def apply_changes(rs: RuleSet, changes: list[RuleChange | LibraryChange]) -> list[SourceError]:
    """Apply CHANGES to RS in place (library changes first); the errors found."""
    errors: list[SourceError] = []
    for ch in changes:
        if isinstance(ch, LibraryChange):
            _apply_library(rs, ch, errors)
    by_id = {r.id: r for r in rs.rules}
    for ch in changes:
        if isinstance(ch, RuleChange):
            rule = by_id.get(ch.target)
            if rule is None:
                errors.append(SourceError(f"no rule {ch.target!r} to change", ch.path, ch.pos.line, ch.pos.col))
                continue
            _apply_rule(rule, ch, set(rs.library.macros), errors)
    return errors


def _apply_library(rs: RuleSet, ch: LibraryChange, errors: list[SourceError]) -> None:
    lib = rs.library
    for name, (vals, pos) in ch.lists.items():
        if name not in lib.lists:
            errors.append(SourceError(f"no list {name!r} to {ch.mode}", ch.path, pos.line, pos.col))
            continue
        lib.lists[name] = [*lib.lists[name], *vals] if ch.mode == "append" else list(vals)
        lib.changes.setdefault(f"list {name}", []).append(f"{ch.mode} at {_where(ch.path, pos)}")
    for name, (sel, pos) in ch.macros.items():
        if name not in lib.macros:
            errors.append(SourceError(f"no macro {name!r} to {ch.mode}", ch.path, pos.line, pos.col))
            continue
        old = lib.macros[name]
        alts = [*old.alternatives, *sel.alternatives] if ch.mode == "append" else sel.alternatives
        lib.macros[name] = Selection(name, alts, old.pos)
        lib.changes.setdefault(f"macro {name}", []).append(f"{ch.mode} at {_where(ch.path, pos)}")


def _detections(rule: Rule) -> list[Detection]:
    if rule.detection is not None:
        return [rule.detection]
    return [st.detection for st in rule.sequence.steps] if rule.sequence is not None else []


def _apply_rule(rule: Rule, ch: RuleChange, macros: set[str], errors: list[SourceError]) -> None:
    def err(msg: str, pos: Pos) -> None:
        errors.append(SourceError(msg, ch.path, pos.line, pos.col))

    if ch.override_sels or ch.override_cond or ch.append_sels or ch.append_cond:
        det = rule.detection
        if det is None:
            err(f"{rule.id} is a sequence: change its steps by writing the rule anew", ch.pos)
            return
        for mode, sels, cond in (("override", ch.override_sels, ch.override_cond),
                                 ("append", ch.append_sels, ch.append_cond)):
            if not sels and not cond:
                continue
            selections = {**det.selections, **sels}
            text = det.condition_text
            if cond is not None:
                text = cond[0] if mode == "override" else f"({det.condition_text}) {cond[0]}"
            try:
                tree, used = parse_condition(text, list(selections), macros)
            except ConditionError as exc:
                err(f"{mode}.condition: {exc} (in {text!r})", cond[1] if cond else ch.pos)
                return
            unused = [n for n in sels if n not in used]
            if unused:
                err(f"{mode}.detection: selection {unused[0]!r} is not used by the condition", ch.pos)
                return
            det.selections = {n: s for n, s in selections.items() if n in used}
            det.condition, det.condition_text = tree, text
            rule.origin.append((f"{mode} condition", ch.where))
    for name, sel in ch.exceptions:
        for det in _detections(rule):
            key = f"exception:{name}"
            if key in det.selections:
                err(f"{rule.id} already has an exception {name!r}", ch.pos)
                break
            det.selections[key] = sel
            det.condition = And((det.condition, Not(Sel(key))))
            det.condition_text = f"({det.condition_text}) and not exception:{name}"
        rule.origin.append((f"exception {name}", ch.where))
    for part in ("level", "action", "enabled"):
        value = getattr(ch, part)
        if value is not None:
            setattr(rule, part, value)
            rule.origin.append((f"{part}: {str(value).lower() if isinstance(value, bool) else value}", ch.where))


def policy_changes(policy: Any, parser_for: Any) -> tuple[list[RuleChange | LibraryChange], list[SourceError]]:
    """The policy's ``rules.library``, ``rules.overrides`` and ``rules.disable`` as changes."""
    where = policy.source or "policy"
    nodes: dict[str, Any] = {}
    library: Any = policy.rules.library
    if policy.source:
        from spyglass.policy.yamlsrc import load_documents

        try:
            with open(policy.source, encoding="utf-8") as f:
                docs = load_documents(f.read(), policy.source)
            top: Any = docs[0] if docs and is_map(docs[0]) else {}
            rules = top.get("rules") if is_map(top.get("rules")) else {}
            ov = rules.get("overrides")
            nodes = ov if isinstance(ov, dict) else {}
            library = rules.get("library") if is_map(rules.get("library")) else library
        except (OSError, SourceError):
            nodes = {}
    p = parser_for(where)
    out: list[RuleChange | LibraryChange] = []
    if library:
        for lch in parse_library_change(p, library):
            lch.where += " (policy rules.library)"
            out.append(lch)
    for rid, ov in policy.rules.overrides.items():
        node = nodes.get(rid)
        if node is None:
            node = {k: v for k, v in (("level", ov.level), ("action", ov.action), ("enabled", ov.enabled),
                                      ("exceptions", ov.exceptions), ("append", ov.append),
                                      ("override", ov.override)) if v not in (None, (), {})}
        ch = parse_rule_change(p, node, rid, keys=MODIFY_KEYS[1:])
        if ch is not None:
            ch.where = f"{_where(where, node_pos(node))} (policy rules.overrides)"
            out.append(ch)
    for rid in policy.rules.disable:
        out.append(RuleChange(rid, f"{where} (policy rules.disable)", Pos(), where, enabled=False))
    return out, p.out.errors
