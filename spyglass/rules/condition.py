"""The ``condition`` language of a detection.

Grammar (case-insensitive keywords)::

    expr   := term ("or" term)*
    term   := factor ("and" factor)*
    factor := "not" factor | "(" expr ")" | quant | NAME | "$" MACRO
    quant  := (NUMBER | "all" | "any") "of" (PATTERN | "them")

``PATTERN`` is a selection name that may end in ``*`` (``sel_*``).  Names are
resolved against the rule's selections when the condition is parsed, so a
condition naming a missing selection is an error with its column.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterator

import msgspec


class ConditionError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class Sel(msgspec.Struct, frozen=True):
    """A condition naming a selection."""

    name: str


class Macro(msgspec.Struct, frozen=True):
    """A condition naming a macro (``$name``)."""

    name: str


class Not(msgspec.Struct, frozen=True):
    """The negation of a condition."""

    expr: Cond


class And(msgspec.Struct, frozen=True):
    """All of the conditions."""

    items: tuple[Cond, ...]


class Or(msgspec.Struct, frozen=True):
    """Any of the conditions."""

    items: tuple[Cond, ...]


class AtLeast(msgspec.Struct, frozen=True):
    """At least ``n`` of the items hold."""

    n: int
    items: tuple[Cond, ...]


Cond = Sel | Macro | Not | And | Or | AtLeast

_TOKEN = re.compile(r"\s*(?:(?P<p>[()])|(?P<m>\$[A-Za-z_][\w.-]*)|(?P<w>[A-Za-z_0-9*][\w.*-]*))")


def _tokens(text: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        m = _TOKEN.match(text, i)
        if m is None or m.end() == i:
            raise ConditionError(f"unexpected {text[i]!r} in condition", i)
        tok = m.group("p") or m.group("m") or m.group("w")
        out.append((tok, m.start(m.lastgroup or 0)))
        i = m.end()
    return out


class _Parser:
    def __init__(self, text: str, selections: Collection[str], macros: Collection[str]) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.selections = list(selections)
        self.macros = set(macros)
        self.used: set[str] = set()

    def peek(self) -> str | None:
        return self.toks[self.i][0] if self.i < len(self.toks) else None

    def where(self) -> int:
        return self.toks[self.i][1] if self.i < len(self.toks) else len(self.text)

    def take(self) -> str:
        tok = self.toks[self.i][0]
        self.i += 1
        return tok

    def parse(self) -> Cond:
        if not self.toks:
            raise ConditionError("empty condition", 0)
        e = self.expr()
        if self.i < len(self.toks):
            raise ConditionError(f"unexpected {self.peek()!r} in condition (missing 'and'/'or'?)", self.where())
        return e

    def expr(self) -> Cond:
        items = [self.term()]
        while (self.peek() or "").lower() == "or":
            self.take()
            items.append(self.term())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def term(self) -> Cond:
        items = [self.factor()]
        while (self.peek() or "").lower() == "and":
            self.take()
            items.append(self.factor())
        return items[0] if len(items) == 1 else And(tuple(items))

    def factor(self) -> Cond:
        tok = self.peek()
        if tok is None:
            raise ConditionError("condition ends too early", self.where())
        low = tok.lower()
        at = self.where()
        if low == "not":
            self.take()
            return Not(self.factor())
        if tok == "(":
            self.take()
            e = self.expr()
            if self.peek() != ")":
                raise ConditionError("missing ')'", self.where())
            self.take()
            return e
        if tok == ")":
            raise ConditionError("unexpected ')'", at)
        if low in ("and", "or", "of", "them"):
            raise ConditionError(f"unexpected {tok!r}", at)
        if tok.startswith("$"):
            self.take()
            name = tok[1:]
            if name not in self.macros:
                raise ConditionError(f"unknown macro {tok!r}", at)
            return Macro(name)
        nxt = self.toks[self.i + 1][0].lower() if self.i + 1 < len(self.toks) else None
        if nxt == "of" and (low in ("all", "any") or tok.isdigit()):
            self.take()
            self.take()
            if self.peek() is None:
                raise ConditionError("'of' needs a selection pattern or 'them'", self.where())
            pat_at = self.where()
            pat = self.take()
            names = self.selections if pat.lower() == "them" else fnmatch.filter(self.selections, pat)
            if not names:
                raise ConditionError(f"no selection matches {pat!r}", pat_at)
            self.used.update(names)
            items = tuple(Sel(n) for n in names)
            if low == "all":
                return And(items) if len(items) > 1 else items[0]
            n = 1 if low == "any" else int(tok)
            if n < 1:
                raise ConditionError("'0 of' is always true; write the condition without it", at)
            if n == 1:
                return Or(items) if len(items) > 1 else items[0]
            return AtLeast(n, items)
        self.take()
        if tok not in self.selections:
            known = ", ".join(self.selections) or "none"
            raise ConditionError(f"condition names a missing selection {tok!r} (selections: {known})", at)
        self.used.add(tok)
        return Sel(tok)


def parse_condition(text: str, selections: Collection[str], macros: Collection[str] = ()) -> tuple[Cond, set[str]]:
    """The condition's tree and the selections it uses; ConditionError has the offset."""
    p = _Parser(text, selections, macros)
    return p.parse(), p.used


def macro_names(c: Cond) -> Iterator[str]:
    """The macros a condition names (at any depth)."""
    if isinstance(c, Macro):
        yield c.name
    elif isinstance(c, Not):
        yield from macro_names(c.expr)
    elif isinstance(c, And | Or | AtLeast):
        for i in c.items:
            yield from macro_names(i)
