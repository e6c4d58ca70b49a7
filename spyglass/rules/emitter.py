"""The rule compiler's expression text: what one field test, selection and condition compile to.

:class:`Emitter` writes the Python boolean expression of a matcher for one
generated function (or its three-valued form for the per-path memo); the
modifiers write their tests through it (:mod:`spyglass.rules.modifiers`).
:class:`Shared` holds the constants of the generated code.  ``UNFETCHED``,
:func:`low` and :func:`any_item` are what the generated code calls (under
the names ``_U``, ``_low`` and ``_any_item``, see
:func:`spyglass.rules.compiler.compile_matchers`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from spyglass.policy.paths import DirSet, GlobMatcher, LazyPattern, glob_matcher
from spyglass.rules.condition import And, AtLeast, Cond, Macro, Not, Or, Sel
from spyglass.rules.fields import FIELDS
from spyglass.rules.model import FieldTest, ListRef, Selection
from spyglass.rules.modifiers import REGISTRY as MODIFIERS
from spyglass.rules.modifiers import NetSet

#: a derived field's local variable before its value is fetched (``_U`` in the generated code)
UNFETCHED = object()


class Shared:
    """Constants of the generated code, shared by every function of one compiled set."""

    def __init__(self, ns: dict[str, Any], lazy: bool = False, code: Callable[..., Any] | None = None) -> None:
        self.ns, self.lazy, self.compile = ns, lazy, code or compile  # modifiers.regex, rules/codecache.py
        self.keys: dict[str, str] = {}
        #: functions are also compiled after start, on two threads (the engine's specialized ones,
        #: the fast lane's): one at a time, so constants never get the same name
        self.lock = threading.RLock()

    def const(self, value: Any) -> str:
        if isinstance(value, re.Pattern | LazyPattern | DirSet | NetSet | GlobMatcher) or callable(value):
            key = f"id:{id(value)}"
        else:
            key = repr((type(value).__name__, value))
        name = self.keys.get(key)
        if name is None:
            name = f"_k{len(self.keys)}"
            self.ns[name] = value
            self.keys[key] = name
        return name


class Emitter:
    """Generates expression text for one function of one event type.

    With ``pure`` set, it generates the three-valued form instead: tests on
    fields keyed by ``pure`` ("path", "target") are evaluated, every other
    test is ``None`` (unknown).  ``fixed`` gives fields a known value
    (an expression) in that form: their tests are evaluated with it.
    """

    def __init__(self, etype: str | None, lists: dict[str, list[Any]], macros: dict[str, Selection],
                 home: str | None, shared: Shared, pure: frozenset[str] | None = None,
                 fixed: dict[str, str] | None = None) -> None:
        self.etype = etype
        self.fixed = fixed or {}
        self.lists = lists
        self.macros = macros
        self.home = home
        self.shared = shared
        self.pure = pure
        self.vars: dict[str, str] = {}  # field -> local var for the raw value (derived)
        self.lvars: dict[str, str] = {}  # field -> local var for the lower-cased value
        self.two: set[str] = set()  # (pure) expressions known to be True or False, never None
        self._gates: dict[tuple[str, bool], _Gate] = {}  # (field text, cased) -> its glob gate

    def const(self, value: Any) -> str:
        return self.shared.const(value)

    def raw(self, fname: str) -> str:
        if fname in self.fixed:
            return self.fixed[fname]
        spec = FIELDS[fname]
        if not spec.derived:
            return spec.expr
        var = self.vars.get(fname)
        if var is None:
            var = self.vars[fname] = f"v{len(self.vars)}"
        return f"({var} if {var} is not _U else ({var} := {spec.expr}))"

    def low(self, fname: str) -> str:
        var = self.lvars.get(fname)
        if var is None:
            var = self.lvars[fname] = f"l{len(self.lvars)}"
        return f"({var} if {var} is not _U else ({var} := _low({self.raw(fname)})))"

    def glob_gate(self, raw: str, patterns: list[str], cased: bool) -> str:
        """A mark that :meth:`gated` turns into the function's one test of ``raw`` (``ev.path`` or
        ``ev.target``) against every glob its glob tests name: when it fails, none of them can
        match, so each test runs only after it passed (one matcher run per event on a path that no
        rule's glob names, instead of one per test: an untar's new files).  Same globs, same
        answer: the gate is their union, and each test is still run in full after it."""
        gate = self._gates.get((raw, cased))
        if gate is None:
            gate = self._gates[(raw, cased)] = _Gate(f"\x00gate{len(self._gates)}\x00", raw, cased)
        gate.patterns.extend(patterns)
        gate.uses += 1
        return gate.mark

    def gated(self, text: str) -> str:
        """``text`` (a function's body, or part of it, once the whole function is written) with the
        marks of :meth:`glob_gate` replaced: the gate, fetched once per event into a local, where
        two tests or more share it; else ``True``."""
        for gate in self._gates.values():
            if gate.mark not in text:
                continue
            if gate.text is None:
                gate.seal(self)
            elif gate.sealed != len(gate.patterns):  # a test written after: the gate would not cover it
                raise AssertionError(f"a glob test on {gate.raw} was written after its gate")
            text = text.replace(gate.mark, gate.text or "True")
        return text

    def locals_init(self) -> list[str]:
        return [f"    {v} = _U" for v in (*self.vars.values(), *self.lvars.values())]

    def expand(self, values: Iterable[Any]) -> list[Any]:
        out: list[Any] = []
        for v in values:
            if isinstance(v, ListRef):
                out.extend(self.lists.get(v.name, []))
            else:
                out.append(v)
        return out

    # -- tests -------------------------------------------------------------------
    def test(self, t: FieldTest) -> str:
        values = self.expand(t.values)
        op = t.operator
        if t.field == "type" and op is None and self.etype is not None:
            return "True" if self.etype in values else "False"
        if not values and op != "exists":
            return "False"
        if self.pure is not None:
            if FIELDS[t.field].key not in self.pure and t.field not in self.fixed:
                return "None"
            return self._two(f"bool({self._test(t, values)})")
        return self._test(t, values)

    # -- three-valued logic (``pure``), folded while generating -------------------------
    def _two(self, expr: str) -> str:
        """``expr`` is two-valued (True or False, never None)."""
        self.two.add(expr)
        return expr

    def k_and(self, parts: list[str]) -> str:
        parts = [p for p in parts if p != "True"]
        if "False" in parts:
            return "False"
        rest = [p for p in parts if p != "None"]
        unknown = len(rest) < len(parts)
        if not rest:
            return "None" if unknown else "True"
        if all(p in self.two for p in rest):  # Python's own and: False, else True (or None)
            if len(rest) == 1 and not unknown:
                return rest[0]
            text = "(" + " and ".join([*rest, *(["None"] if unknown else [])]) + ")"
            return text if unknown else self._two(text)
        if len(rest) == 1 and not unknown:
            return rest[0]
        return "_kand(" + ", ".join([*rest, *(["None"] if unknown else [])]) + ")"

    def k_or(self, parts: list[str]) -> str:
        parts = [p for p in parts if p != "False"]
        if "True" in parts:
            return "True"
        rest = [p for p in parts if p != "None"]
        unknown = len(rest) < len(parts)
        if not rest:
            return "None" if unknown else "False"
        if all(p in self.two for p in rest):  # Python's own or: True, else False (or None)
            if len(rest) == 1 and not unknown:
                return rest[0]
            text = "(" + " or ".join([*rest, *(["None"] if unknown else [])]) + ")"
            return text if unknown else self._two(text)
        if len(rest) == 1 and not unknown:
            return rest[0]
        return "_kor(" + ", ".join([*rest, *(["None"] if unknown else [])]) + ")"

    def k_not(self, x: str) -> str:
        if x in ("None", "True", "False"):
            return {"None": "None", "True": "False", "False": "True"}[x]
        if x in self.two:
            return self._two(f"(not {x})")
        return f"_knot({x})"

    def _test(self, t: FieldTest, values: list[Any]) -> str:
        return MODIFIERS[t.operator].emit(self, t, values)

    def kind(self, fname: str) -> str:
        return FIELDS[fname].kind

    def join(self, parts: list[str], all_: bool) -> str:
        if len(parts) == 1:
            return parts[0]
        return "(" + (" and " if all_ else " or ").join(parts) + ")"

    def list_test(self, t: FieldTest, values: list[Any]) -> str:
        """A test on a list field: an element equal to a value, or (with a modifier) an element that matches."""
        mod = MODIFIERS[t.operator]
        src = self.raw(t.field) if t.cased or mod.raw_elements else self.low(t.field)
        if t.operator is None:
            vals = frozenset((str(v) if t.cased else str(v).lower()) for v in values if v is not None)
            if t.all:
                return f"({self.const(vals)}.issubset({src} or ()))"
            return f"(not {self.const(vals)}.isdisjoint({src} or ()))"
        if t.all and len(values) > 1:
            parts = [self.list_test(FieldTest(t.field, t.operator, False, t.cased, [v], t.pos, t.source), [v])
                     for v in values]
            return "(" + " and ".join(parts) + ")"
        inner = mod.emit_text(self, t, values, "e", "e")
        pred = eval(self.shared.compile(f"lambda e: {inner}", "<spyglass rules>", "eval"), self.shared.ns)
        return f"_any_item({src}, {self.const(pred)})"

    # -- structure ---------------------------------------------------------------
    def selection(self, sel: Selection) -> str:
        alts = []
        for alt in sel.alternatives:
            parts = [self.test(t) for t in sorted(alt, key=cost)]
            if "False" in parts:
                continue
            parts = [p for p in parts if p != "True"] or ["True"]
            if self.pure is not None:
                alts.append(self.k_and(parts))
            elif len(parts) == 1:
                alts.append(parts[0])
            else:
                alts.append("(" + " and ".join(parts) + ")")
        if not alts:
            return "False"
        if self.pure is not None:
            return self.k_or(alts)
        if len(alts) == 1:
            return alts[0]
        return "(" + " or ".join(alts) + ")"

    def cond(self, c: Cond, sels: dict[str, Selection]) -> str:
        if isinstance(c, Sel):
            return self.selection(sels[c.name])
        if isinstance(c, Macro):
            return self.selection(self.macros[c.name])
        k = self.pure is not None
        if isinstance(c, Not):
            inner = self.cond(c.expr, sels)
            return self.k_not(inner) if k else f"(not {inner})"
        if isinstance(c, And):
            items = [self.cond(i, sels) for i in c.items]
            return self.k_and(items) if k else ("(" + " and ".join(items) + ")")
        if isinstance(c, Or):
            items = [self.cond(i, sels) for i in c.items]
            return self.k_or(items) if k else ("(" + " or ".join(items) + ")")
        if isinstance(c, AtLeast):
            items = [self.cond(i, sels) for i in c.items]
            if k:
                return f"_katleast({c.n}, " + ", ".join(items) + ")"
            return "((" + " + ".join(f"bool({i})" for i in items) + f") >= {c.n})"
        raise AssertionError(c)


class _Gate:
    """The globs of one field's glob tests in one generated function (:meth:`Emitter.glob_gate`)."""

    __slots__ = ("cased", "mark", "patterns", "raw", "sealed", "text", "uses")

    def __init__(self, mark: str, raw: str, cased: bool) -> None:
        self.mark, self.raw, self.cased = mark, raw, cased
        self.patterns: list[str] = []
        self.uses = 0
        self.sealed = 0  # the patterns it covers, once its text is made
        self.text: str | None = None  # what the mark becomes ("" with one test: no gate)

    def seal(self, em: Emitter) -> None:
        self.sealed = len(self.patterns)
        if self.uses < 2:
            self.text = ""
            return
        var = em.vars.get(self.mark)
        if var is None:
            var = em.vars[self.mark] = f"v{len(em.vars)}"
        union = glob_matcher(list(dict.fromkeys(self.patterns)), em.home, cased=self.cased)
        test = f"{em.const(union)}.fullmatch({self.raw}) is not None"
        self.text = f"({var} if {var} is not _U else ({var} := {test}))"


def cost(t: FieldTest) -> int:
    spec = FIELDS[t.field]
    cost = 0 if not spec.derived else 2
    if t.field.startswith(("process.ancestors", "process.parent")):
        cost = 4
    return cost + MODIFIERS[t.operator].cost


def low(v: Any) -> Any:
    if v.__class__ is str:
        return v.lower()
    if isinstance(v, list):
        return [x.lower() if isinstance(x, str) else x for x in v]
    return v


def any_item(items: Any, pred: Callable[[Any], bool]) -> bool:
    if not items:
        return False
    return any(pred(e) for e in items if e is not None)
