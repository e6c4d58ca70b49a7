"""Which event types a detection can match, from its ``type`` tests (so a rule runs only for those)."""

from __future__ import annotations

from spyglass.rules.condition import And, AtLeast, Cond, Macro, Not, Or, Sel
from spyglass.rules.model import Detection, ListRef, Selection


def _sel_types(sel: Selection) -> frozenset[str] | None:
    out: set[str] = set()
    for alt in sel.alternatives:
        types = None
        for t in alt:
            if t.field == "type" and t.operator is None and not t.all:
                if any(isinstance(v, ListRef) for v in t.values):
                    return None
                vals = {str(v) for v in t.values}
                types = vals if types is None else types & vals
        if types is None:
            return None
        out |= types
    return frozenset(out)


def _cond_types(c: Cond, sels: dict[str, Selection], macros: dict[str, Selection] | None) -> frozenset[str] | None:
    if isinstance(c, Sel):
        return _sel_types(sels[c.name])
    if isinstance(c, Macro):
        return _sel_types(macros[c.name]) if macros and c.name in macros else None
    if isinstance(c, Not):
        return None
    if isinstance(c, And):
        known = [t for t in (_cond_types(i, sels, macros) for i in c.items) if t is not None]
        if not known:
            return None
        out = known[0]
        for types in known[1:]:
            out = out & types
        return out
    if isinstance(c, Or | AtLeast):
        acc: set[str] = set()
        for i in c.items:
            t = _cond_types(i, sels, macros)
            if t is None:
                return None
            acc |= t
        return frozenset(acc)
    return None


def retype(det: Detection, macros: dict[str, Selection]) -> None:
    """Recompute a detection's event types once every macro is known."""
    det.types = _cond_types(det.condition, det.selections, macros)
