"""Sigma rules -> spyglass rules, with pySigma's parser and a processing pipeline.

pySigma reads the Sigma YAML (modifiers applied: ``|contains`` becomes
wildcards, ``|windash`` and ``|base64`` expand to values, ``|re`` and
``|cidr`` become typed values), and a processing pipeline maps Sigma's
field names to spyglass's event fields per log source.  Three Linux log
sources are mapped:

=====================  ====================================================
Sigma log source       spyglass events
=====================  ====================================================
``process_creation``   ``process.exec`` (succeeded)
``file_event``         ``file.create`` / ``file.write`` (succeeded)
``network_connection`` ``net.connect`` (succeeded)
=====================  ====================================================

A rule whose log source, fields, keyword searches or value types cannot be
expressed is not converted: :func:`convert` returns it with the reason.
The condition is Sigma's text (the grammars agree: ``and``, ``or``,
``not``, parentheses, ``1 of sel_*``, ``all of them``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

#: log source category -> (event types, Sigma field -> spyglass field)
LOGSOURCES: dict[str, tuple[list[str], dict[str, str]]] = {
    "process_creation": (["process.exec"], {
        "Image": "process.executable",
        "CommandLine": "process.command_line",
        "ParentImage": "process.parent.executable",
        "ParentCommandLine": "process.parent.command_line",
        "CurrentDirectory": "process.working_directory",
        "ProcessId": "process.pid",
        "ParentProcessId": "process.parent.pid",
    }),
    "file_event": (["file.create", "file.write"], {
        "TargetFilename": "file.path",
        "Image": "process.executable",
    }),
    "network_connection": (["net.connect"], {
        "DestinationIp": "server.address",
        "DestinationPort": "server.port",
        "DestinationHostname": "server.domain",
        "Protocol": "network.transport",
        "Image": "process.executable",
        "Initiated": "",  # outgoing: what net.connect is; the test is dropped
    }),
}
LEVELS = {"informational": "info", "low": "low", "medium": "medium", "high": "high", "critical": "critical"}


class Converted(msgspec.Struct):
    source: str
    title: str
    rule: dict[str, Any] | None = None
    reason: str = ""


class _Ctx(msgspec.Struct):
    reasons: list[str] = msgspec.field(default_factory=list)


def pipeline(category: str) -> Any:
    """pySigma's processing pipeline mapping CATEGORY's Sigma fields to spyglass's."""
    from sigma.processing.conditions import LogsourceCondition
    from sigma.processing.pipeline import ProcessingItem, ProcessingPipeline
    from sigma.processing.transformations import FieldMappingTransformation

    mapping: dict[Any, Any] = {k: v or k for k, v in LOGSOURCES[category][1].items()}
    return ProcessingPipeline(name=f"spyglass {category}", priority=20, items=[
        ProcessingItem(identifier=f"spyglass_{category}_fields",
                       transformation=FieldMappingTransformation(mapping),
                       rule_conditions=[LogsourceCondition(category=category, product="linux")]),
    ])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-") or "rule"


def _string(v: Any) -> tuple[str, str] | None:
    """(operator, text) for a SigmaString: equality, contains, startswith, endswith, or re."""
    from sigma.types import SpecialChars

    parts = list(v.s)
    lead = bool(parts) and parts[0] == SpecialChars.WILDCARD_MULTI
    trail = len(parts) > 1 and parts[-1] == SpecialChars.WILDCARD_MULTI
    inner = parts[1 if lead else 0: len(parts) - (1 if trail else 0)]
    if all(isinstance(p, str) for p in inner):
        text = "".join(inner)
        op = "contains" if lead and trail else "endswith" if lead else "startswith" if trail else "="
        return op, text
    rx = ""
    for p in parts:
        if p == SpecialChars.WILDCARD_MULTI:
            rx += ".*"
        elif p == SpecialChars.WILDCARD_SINGLE:
            rx += "."
        elif isinstance(p, str):
            rx += re.escape(p)
        else:
            return None
    return "re", f"^{rx}$"


def _item(it: Any, ctx: _Ctx) -> dict[str, Any] | None:
    """One Sigma detection item -> {field|modifiers: values}."""
    from sigma.conditions import ConditionAND
    from sigma.types import (
        SigmaBool,
        SigmaCasedString,
        SigmaCIDRExpression,
        SigmaCompareExpression,
        SigmaExists,
        SigmaNull,
        SigmaNumber,
        SigmaRegularExpression,
        SigmaString,
    )

    if it.field is None:
        ctx.reasons.append("keyword search (a value without a field) has no spyglass field")
        return None
    fname = it.field
    if fname == "Initiated":
        return {}
    from spyglass.rules.fields import FIELDS

    if fname not in FIELDS:
        ctx.reasons.append(f"field {fname!r} has no spyglass equivalent")
        return None
    all_ = it.value_linking is ConditionAND and len(it.value) > 1
    by_op: dict[str, list[Any]] = {}
    cased = False
    for v in it.value:
        if isinstance(v, SigmaCasedString):
            cased = True
        if isinstance(v, SigmaString):
            got = _string(v)
            if got is None:
                ctx.reasons.append(f"{fname}: a placeholder or special value is not supported")
                return None
            by_op.setdefault(got[0], []).append(got[1])
        elif isinstance(v, SigmaRegularExpression):
            by_op.setdefault("re", []).append(v.regexp)
        elif isinstance(v, SigmaCIDRExpression):
            by_op.setdefault("cidr", []).append(str(v.network))
        elif isinstance(v, SigmaNumber | SigmaBool):
            by_op.setdefault("=", []).append(v.number if isinstance(v, SigmaNumber) else v.boolean)
        elif isinstance(v, SigmaNull):
            by_op.setdefault("=", []).append(None)
        elif isinstance(v, SigmaExists):
            by_op.setdefault("exists", []).append(v.exists)
        elif isinstance(v, SigmaCompareExpression):
            op = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}.get(str(v.op.value), "")
            if not op:
                ctx.reasons.append(f"{fname}: comparison {v.op} is not supported")
                return None
            by_op.setdefault(op, []).append(v.number.number)
        else:
            ctx.reasons.append(f"{fname}: value type {type(v).__name__} is not supported")
            return None
    if len(by_op) > 1:  # mixed shapes: one regular expression per value
        rxs: list[str] = []
        for op, vals in by_op.items():
            if op not in ("=", "contains", "startswith", "endswith", "re"):
                ctx.reasons.append(f"{fname}: {op} mixed with other value kinds")
                return None
            for x in vals:
                s = re.escape(str(x))
                rxs.append({"=": f"^{s}$", "contains": s, "startswith": f"^{s}", "endswith": f"{s}$",
                            "re": str(x)}[op])
        by_op = {"re": rxs}
    (op, vals), = by_op.items()
    spec = fname + ("" if op == "=" else f"|{op}") + ("|all" if all_ else "") + ("|cased" if cased else "")
    return {spec: vals if len(vals) > 1 else vals[0]}


def _selection(det: Any, ctx: _Ctx) -> Any:
    """A Sigma detection -> a spyglass selection (a mapping, or a list of mappings: any of them)."""
    from sigma.conditions import ConditionOR
    from sigma.rule import SigmaDetection

    items = det.detection_items
    if all(isinstance(i, SigmaDetection) for i in items) and det.item_linking is ConditionOR:
        alts = [_selection(i, ctx) for i in items]
        if any(a is None for a in alts):
            return None
        flat: list[Any] = []
        for a in alts:
            flat.extend(a if isinstance(a, list) else [a])
        return flat
    out: dict[str, Any] = {}
    for i in items:
        if isinstance(i, SigmaDetection):
            sub = _selection(i, ctx)
            if sub is None or isinstance(sub, list):
                if sub is not None:
                    ctx.reasons.append("a list of alternatives inside a selection is not supported")
                return None
            out.update(sub)
            continue
        got = _item(i, ctx)
        if got is None:
            return None
        for k, v in got.items():
            if k in out:
                ctx.reasons.append(f"field {k!r} tested twice in one selection")
                return None
            out[k] = v
    return out


def convert_rule(rule: Any, source: str) -> Converted:
    """One parsed pySigma rule -> a spyglass rule document (or the reason it cannot be one)."""
    title = str(rule.title)
    ls = rule.logsource
    if ls.product != "linux" or ls.category not in LOGSOURCES:
        return Converted(source, title, reason=f"log source {ls.category or ls.service or '?'}/{ls.product or '?'}"
                         f" is not mapped (linux process_creation, file_event, network_connection are)")
    types, _ = LOGSOURCES[ls.category]
    pipeline(ls.category).apply(rule)
    ctx = _Ctx()
    detection: dict[str, Any] = {}
    # the log source is in every selection (so `1 of them` and `not filter` keep Sigma's meaning
    # within the log source's events)
    source_tests = {"type": types if len(types) > 1 else types[0], "ok": True}
    for name, det in rule.detection.detections.items():
        sel = _selection(det, ctx)
        if sel is None:
            return Converted(source, title, reason="; ".join(ctx.reasons) or "detection not supported")
        alts = sel if isinstance(sel, list) else [sel]
        alts = [{**source_tests, **a} for a in alts]
        detection[name] = alts if len(alts) > 1 else alts[0]
    conds = list(rule.detection.condition)
    if len(conds) != 1:
        return Converted(source, title, reason="several conditions in one rule are not supported")
    detection["condition"] = conds[0]
    level = LEVELS.get(str(rule.level.name).lower() if rule.level else "medium", "medium")
    doc: dict[str, Any] = {
        "id": f"sigma-{_slug(title)}-{str(rule.id)[:8]}" if rule.id else f"sigma-{_slug(title)}",
        "title": title,
        "level": level,
        "tags": ["sigma", *(str(t) for t in rule.tags)],
        "description": str(rule.description or "").strip() or f"Imported from the Sigma rule {title!r}.",
        "detection": detection,
    }
    if rule.author:
        doc["author"] = str(rule.author)
    if rule.references:
        doc["references"] = [str(r) for r in rule.references]
    if rule.falsepositives:
        doc["falsepositives"] = [str(f) for f in rule.falsepositives]
    return Converted(source, title, rule=doc)


def convert_text(text: str, source: str) -> list[Converted]:
    """Every Sigma rule in TEXT (one or more YAML documents)."""
    from sigma.collection import SigmaCollection
    from sigma.exceptions import SigmaError

    try:
        coll = SigmaCollection.from_yaml(text, collect_errors=True)
    except SigmaError as exc:
        return [Converted(source, "?", reason=f"not a Sigma rule: {exc}")]
    except Exception as exc:  # pySigma assumes mappings: any other YAML is not a Sigma rule file
        return [Converted(source, "?", reason=f"not a Sigma rule file ({type(exc).__name__})")]
    out: list[Converted] = []
    for rule in coll.rules:
        errs = getattr(rule, "errors", None)
        title = str(getattr(rule, "title", "?"))
        if errs:
            out.append(Converted(source, title, reason=f"not a valid Sigma rule: {errs[0]}"))
            continue
        if not hasattr(rule, "logsource"):
            out.append(Converted(source, title, reason="correlation rules are not supported"))
            continue
        try:
            out.append(convert_rule(rule, source))
        except SigmaError as exc:
            out.append(Converted(source, title, reason=f"not supported: {exc}"))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            out.append(Converted(source, title, reason=f"not supported ({type(exc).__name__}: {exc})"))
    return out
