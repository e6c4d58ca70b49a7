"""Field-test modifiers (``field|modifier: value``): one class each, checking and compiling.

A modifier says what it accepts as a value (:meth:`Modifier.check`, called
when a rule loads, so a bad value is an error with its ``file:line:col``)
and what Python it compiles to (:meth:`Modifier.emit`, called by the rule
compiler with its emitter, see :mod:`spyglass.rules.emitter`).  To add a
modifier, write a subclass with a ``name`` and decorate it with
:func:`register`; ``contains`` below is the one to copy.

Equality (no modifier) is :class:`Equals`, registered under ``None``.  The
flags ``all`` and ``cased`` are not modifiers: every modifier receives them
on the field test (``t.all``, ``t.cased``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from spyglass.policy.hosts import parse_ip
from spyglass.policy.paths import DirSet, LazyPattern, compile_globs, expand_home, glob_matcher
from spyglass.rules.fields import FIELDS

if TYPE_CHECKING:
    from spyglass.rules.emitter import Emitter
    from spyglass.rules.model import FieldTest

FLAGS = ("all", "cased")
#: the fields whose glob tests in one generated function share a gate (Emitter.glob_gate), as the
#: generated code reads them (their raw text)
GATED = frozenset(FIELDS[f].expr for f in ("file.path", "file.target"))


class NetSet:
    """``cidr`` values: is an address in one of these networks (answers cached)."""

    __slots__ = ("cache", "nets")

    def __init__(self, nets: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
        self.nets = tuple(nets)
        self.cache: dict[str, bool] = {}

    def has(self, addr: Any) -> bool:
        if not isinstance(addr, str):
            return False
        hit = self.cache.get(addr)
        if hit is None:
            ip = parse_ip(addr)
            hit = ip is not None and any(ip.version == n.version and ip in n for n in self.nets)
            if len(self.cache) > 65536:
                self.cache.clear()
            self.cache[addr] = hit
        return hit


class Modifier:
    """One modifier: what values it takes, and the test it compiles to."""

    name: ClassVar[str | None]
    #: cost added when ordering a selection's tests (cheap first)
    cost: ClassVar[int] = 0
    #: on a list field, test the raw elements (not lower-cased copies)
    raw_elements: ClassVar[bool] = False

    def check(self, spec: str, value: Any, kind: str) -> str | None:
        """An error message for a bad VALUE of a test written SPEC on a field of KIND, else None."""
        return None

    def emit(self, em: Emitter, t: FieldTest, values: list[Any]) -> str:
        """Python text of the whole test (VALUES: the test's values with lists expanded)."""
        if em.kind(t.field) == "list":
            return em.list_test(t, values)
        x = em.raw(t.field) if t.cased else em.low(t.field)
        return self.emit_text(em, t, values, x, em.raw(t.field))

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        """The test on one text value: ``x`` is it lower-cased (unless ``cased``), ``raw`` as it is."""
        raise NotImplementedError(self.name)

    @staticmethod
    def texts(t: FieldTest, values: list[Any]) -> list[str]:
        return [s if t.cased else s.lower() for s in (str(v) for v in values if v is not None)]


def regex(em: Emitter, pattern: str, flags: int) -> re.Pattern[str] | LazyPattern:
    """A regular expression of the generated code (``search``, ``fullmatch``): compiled now when
    the rules are being checked, else at its first use (a set the rule cache saw compile whole)."""
    return LazyPattern(pattern, flags) if em.shared.lazy else re.compile(pattern, flags)


REGISTRY: dict[str | None, Modifier] = {}


def register(cls: type[Modifier]) -> type[Modifier]:
    REGISTRY[cls.name] = cls()
    return cls


def operators() -> tuple[str, ...]:
    return tuple(n for n in REGISTRY if n is not None)


class _TextOnly(Modifier):
    def check(self, spec: str, value: Any, kind: str) -> str | None:
        return None if isinstance(value, str) else f"{spec}: {self.name} takes text"


@register
class Equals(Modifier):
    name = None

    def check(self, spec: str, value: Any, kind: str) -> str | None:
        field = spec.split("|", 1)[0]
        if kind == "bool" and not isinstance(value, bool) and value is not None:
            return f"{field} is true or false, not {value!r}"
        if kind == "int" and value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return f"{field} is a number, not {value!r}"
        return None

    def emit(self, em: Emitter, t: FieldTest, values: list[Any]) -> str:
        kind = em.kind(t.field)
        if kind in ("int", "bool"):
            raw = em.raw(t.field)
            if kind == "bool":
                vals = set(values)
                if vals == {True}:
                    return f"({raw} is True)"
                if vals == {False}:
                    return f"({raw} is False)"
            return f"({raw} in {em.const(frozenset(values))})"
        return super().emit(em, t, values)

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        norm = [None if v is None else (str(v) if t.cased else str(v).lower()) for v in values]
        vals = frozenset(s for s in norm if s is not None)
        if t.all and len(vals) > 1:
            return "False"
        test = f"({x} in {em.const(vals)})" if vals else "False"
        return f"({raw} is None or {test})" if None in norm else test


@register
class Contains(_TextOnly):
    name = "contains"

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        plain = self.texts(t, values)
        if t.all or len(plain) == 1:
            parts = [f"({em.const(s)} in {x})" for s in plain]
            return f"({x} is not None and {em.join(parts, True)})"
        rx = regex(em, "|".join(re.escape(s) for s in plain), re.DOTALL)
        return f"({x} is not None and {em.const(rx)}.search({x}) is not None)"


class _Affix(_TextOnly):
    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        plain = self.texts(t, values)
        if t.all:
            parts = [f"{x}.{self.name}({em.const(s)})" for s in plain]
            return f"({x} is not None and {em.join(parts, True)})"
        return f"({x} is not None and {x}.{self.name}({em.const(tuple(plain))}))"


@register
class StartsWith(_Affix):
    name = "startswith"


@register
class EndsWith(_Affix):
    name = "endswith"


@register
class Regex(Modifier):
    name = "re"
    cost = 1
    raw_elements = True

    def check(self, spec: str, value: Any, kind: str) -> str | None:
        try:
            re.compile(str(value))
        except re.error as exc:
            return f"bad regular expression {value!r}: {exc}"
        return None

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        flags = re.DOTALL | (0 if t.cased else re.IGNORECASE)
        pats = [str(v) for v in values if v is not None]
        if t.all:
            parts = [f"{em.const(regex(em, p, flags))}.search({raw}) is not None" for p in pats]
            return f"({raw} is not None and {em.join(parts, True)})"
        rx = regex(em, "|".join(f"(?:{p})" for p in pats), flags)
        return f"({raw} is not None and {em.const(rx)}.search({raw}) is not None)"


@register
class Glob(_TextOnly):
    name = "glob"
    cost = 1
    raw_elements = True

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        pats = [str(v) for v in values if v is not None]
        if t.all:
            parts = [f"{em.const(compile_globs([p], em.home, cased=t.cased))}.fullmatch({raw}) is not None"
                     for p in pats]
            return f"({raw} is not None and {em.join(parts, True)})"
        # most paths are decided without running a regular expression (GlobMatcher)
        rx = glob_matcher(pats, em.home, cased=t.cased)
        test = f"{em.const(rx)}.fullmatch({raw}) is not None"
        if raw in GATED:  # after the gate of every glob of the function's tests on the field
            return f"({raw} is not None and {em.glob_gate(raw, pats, t.cased)} and {test})"
        return f"({raw} is not None and {test})"


@register
class Under(_TextOnly):
    name = "under"

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        dirs = [expand_home(str(v), em.home) for v in values if v is not None]
        if not t.cased:
            dirs = [d.lower() for d in dirs]
        return f"({x} in {em.const(DirSet(dirs))})"


@register
class Cidr(Modifier):
    name = "cidr"
    cost = 1
    raw_elements = True

    def check(self, spec: str, value: Any, kind: str) -> str | None:
        try:
            ipaddress.ip_network(str(value), strict=False)
        except ValueError as exc:
            return f"bad CIDR {value!r}: {exc}"
        return None

    def emit_text(self, em: Emitter, t: FieldTest, values: list[Any], x: str, raw: str) -> str:
        nets = [ipaddress.ip_network(str(v), strict=False) for v in values]
        if t.all:
            return em.join([f"{em.const(NetSet([n]))}.has({raw})" for n in nets], True)
        return f"{em.const(NetSet(nets))}.has({raw})"


@register
class Exists(Modifier):
    name = "exists"

    def check(self, spec: str, value: Any, kind: str) -> str | None:
        return None if isinstance(value, bool) else f"{spec}: exists takes true or false"

    def emit(self, em: Emitter, t: FieldTest, values: list[Any]) -> str:
        want = bool(values[0]) if values else True
        raw = em.raw(t.field)
        has = f"bool({raw})" if em.kind(t.field) == "list" else f"({raw} is not None)"
        return has if want else f"(not {has})"


class _Compare(Modifier):
    symbol: ClassVar[str]

    def check(self, spec: str, value: Any, kind: str) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{spec}: {self.name} takes a number"
        return None

    def emit(self, em: Emitter, t: FieldTest, values: list[Any]) -> str:
        raw = em.raw(t.field)
        return em.join([f"({raw} is not None and {raw} {self.symbol} {float(v)!r})" for v in values], t.all)


@register
class Greater(_Compare):
    name, symbol = "gt", ">"


@register
class GreaterEqual(_Compare):
    name, symbol = "gte", ">="


@register
class Less(_Compare):
    name, symbol = "lt", "<"


@register
class LessEqual(_Compare):
    name, symbol = "lte", "<="
