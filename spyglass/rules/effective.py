"""A rule as finally applied (after exceptions, append, override, the policy) and where each part came from.

What ``spyglass rules show --effective ID`` prints: the rule's definition,
then every change to it in the order applied (``Rule.origin``), the
detection as the engine evaluates it, and the shared lists and macros it
uses with their final values and the changes that made them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spyglass.rules.condition import macro_names as _macros
from spyglass.rules.model import Detection, FieldTest, ListRef, Rule, Selection
from spyglass.rules.ruleset import RuleSet


def _values(t: FieldTest) -> Any:
    vals = [f"${v.name}" if isinstance(v, ListRef) else v for v in t.values]
    return vals[0] if len(vals) == 1 else vals


def _selection(sel: Selection) -> Any:
    alts = [{t.source or t.field: _values(t) for t in alt} for alt in sel.alternatives]
    return alts[0] if len(alts) == 1 else alts


def _detection(det: Detection) -> dict[str, Any]:
    out: dict[str, Any] = {name: _selection(sel) for name, sel in det.selections.items()}
    out["condition"] = det.condition_text
    return out


def _lists(sels: Iterable[Selection]) -> Iterable[str]:
    for sel in sels:
        for alt in sel.alternatives:
            for t in alt:
                for v in t.values:
                    if isinstance(v, ListRef):
                        yield v.name


def _at(where: tuple[str, Any]) -> str:
    return f"{where[0]}:{where[1].line}" if where[1].line else where[0]


def effective(rule: Rule, rs: RuleSet) -> dict[str, Any]:
    """The effective rule as plain data."""
    dets = [rule.detection] if rule.detection is not None else (
        [st.detection for st in rule.sequence.steps] if rule.sequence is not None else [])
    macro_names = sorted({m for d in dets for m in _macros(d.condition)})
    sels = [s for d in dets for s in d.selections.values()] + [rs.library.macros[m] for m in macro_names
                                                                if m in rs.library.macros]
    list_names = sorted(set(_lists(sels)))
    body: dict[str, Any] = {"id": rule.id, "title": rule.title, "level": rule.level, "action": rule.action,
                            "enabled": rule.enabled}
    if rule.detection is not None:
        body["detection"] = _detection(rule.detection)
    if rule.sequence is not None:
        body["sequence"] = {"by": rule.sequence.by, "steps": [{"name": st.name, "detection": _detection(st.detection)}
                                                             for st in rule.sequence.steps]}
    where = f"{rule.source}:{rule.pos.line}" if rule.pos.line else rule.source
    return {
        "rule": body,
        "defined_at": where,
        "changes": [{"part": part, "where": w} for part, w in rule.origin],
        "macros": {m: {"value": _selection(rs.library.macros[m]), "defined_at": _at(rs.library.macro_pos[m]),
                       "changes": rs.library.changes.get(f"macro {m}", [])}
                   for m in macro_names if m in rs.library.macros},
        "lists": {n: {"value": rs.library.lists[n],
                      "defined_at": _at(rs.library.list_pos[n]),
                      "changes": rs.library.changes.get(f"list {n}", [])}
                  for n in list_names if n in rs.library.lists},
    }


def effective_text(data: dict[str, Any]) -> str:
    import yaml

    lines = [f"# {data['rule']['id']}: defined at {data['defined_at']}"]
    lines += [f"# {c['part']}: {c['where']}" for c in data["changes"]]
    if not data["changes"]:
        lines.append("# no changes: the rule as defined")
    text = yaml.safe_dump(data["rule"], sort_keys=False, default_flow_style=False, allow_unicode=True, width=200)
    lines.append(text.rstrip())
    for kind in ("macros", "lists"):
        for name, info in data[kind].items():
            lines.append(f"# {kind[:-1]} {name}: defined at {info['defined_at']}"
                         + "".join(f"; {c}" for c in info["changes"]))
            dumped = yaml.safe_dump({name: info["value"]}, sort_keys=False, default_flow_style=True,
                                    width=10**9)
            lines.append("#   " + dumped.strip())
    return "\n".join(lines)
