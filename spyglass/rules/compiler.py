"""Compiling rules into Python: one function per event type.

Every selection becomes a Python boolean expression; the expressions of all
matchers (single-event rules, and each step of threshold and sequence rules)
that can fire on an event type are placed in one generated function for
that type.  Field values are fetched at most once per event (derived ones
lazily, the first time a test needs them), lower-cased copies likewise,
cheap tests on the event's own fields run before derived ones, and ``and`` /
``or`` short-circuit.  Values are prepared once, when the rules compile:
lower-cased, lists expanded, several ``contains`` values joined into one
regular expression, globs turned into one anchored regular expression.

Two things keep most events from evaluating anything:

* A later step of a sequence rule is only tested while a partial match waits
  at that step (``CompiledSet.active``, kept by the engine).
* For file events, every test that depends only on ``file.path`` (or
  ``file.target``) and the run's fixed settings is decided once per distinct
  path (:mod:`spyglass.rules.pathmemo`): a three-valued evaluation tells
  which matchers can still match an event on that path, and the event runs
  a function generated for just those (none, for almost every path a
  program touches: libraries, sources, build outputs).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from spyglass.events import EVENT_TYPES, Event
from spyglass.policy.paths import DirSet, GlobMatcher, LazyPattern
from spyglass.rules.condition import And, AtLeast, Cond, Macro, Not, Or, Sel
from spyglass.rules.context import FieldContext
from spyglass.rules.fields import FIELDS
from spyglass.rules.model import Detection, FieldTest, ListRef, Selection, field_tests
from spyglass.rules.modifiers import REGISTRY as MODIFIERS
from spyglass.rules.modifiers import NetSet
from spyglass.rules.pathmemo import KLEENE, MatchFn, lazy_prefilter, path_dispatch

_U = object()  # "not fetched yet"
_MISS = object()
_E: tuple[int, ...] = ()
#: distinct sets of candidate matchers per event type that get their own function
SPECIALIZE_MAX = 64
#: the fields' values while the run state holds no copy of a secret (``RunState.tainted`` empty)
CLEAN = {"file.secret_copy": "False", "file.target.secret_copy": "False"}


def _low(v: Any) -> Any:
    if v.__class__ is str:
        return v.lower()
    if isinstance(v, list):
        return [x.lower() if isinstance(x, str) else x for x in v]
    return v


def _any_item(items: Any, pred: Callable[[Any], bool]) -> bool:
    if not items:
        return False
    return any(pred(e) for e in items if e is not None)


@dataclass
class Matcher:
    """One thing to evaluate per event: a rule's detection, or one step of it."""

    rule_index: int
    step: int  # -1 for the rule's own detection
    detection: Detection


@dataclass
class CompiledSet:
    #: event type -> function returning the indexes (into ``matchers``) that matched
    by_type: dict[str, MatchFn] = field(default_factory=dict)
    #: for event types not in EVENT_TYPES
    fallback: MatchFn | None = None
    matchers: list[Matcher] = field(default_factory=list)
    #: per matcher: may it match now (the engine clears it for sequence steps nobody waits at)
    active: list[bool] = field(default_factory=list)
    #: event type -> generated source of its full function (for `spyglass rules` debugging)
    source: dict[str, str] = field(default_factory=dict)
    #: the fast lane's functions (only the matchers given as ``early``), per event type and the fallback
    early_by_type: dict[str, MatchFn] = field(default_factory=dict)
    early_fallback: MatchFn | None = None
    #: lazy sets: event type (None: the fallback) -> its function, compiled at the first call
    #: (``by_type`` and ``fallback`` stay empty); ``types`` are those some matcher may match
    build: Callable[[str | None], MatchFn | None] | None = None
    types: frozenset[str] = frozenset()
    #: lazy sets: the fast lane's function of an event type (None: the fallback), compiled when asked
    build_early: Callable[[str | None], MatchFn | None] | None = None


class _Shared:
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


class _Emitter:
    """Generates expression text for one function of one event type.

    With ``pure`` set, it generates the three-valued form instead: tests on
    fields keyed by ``pure`` ("path", "target") are evaluated, every other
    test is ``None`` (unknown).  ``fixed`` gives fields a known value
    (an expression) in that form: their tests are evaluated with it.
    """

    def __init__(self, etype: str | None, lists: dict[str, list[Any]], macros: dict[str, Selection],
                 home: str | None, shared: _Shared, pure: frozenset[str] | None = None,
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
            parts = [self.test(t) for t in sorted(alt, key=_cost)]
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


def _cost(t: FieldTest) -> int:
    spec = FIELDS[t.field]
    cost = 0 if not spec.derived else 2
    if t.field.startswith(("process.ancestors", "process.parent")):
        cost = 4
    return cost + MODIFIERS[t.operator].cost


class _TypeCompiler:
    """Builds the functions of one event type."""

    def __init__(self, etype: str | None, idxs: list[int], matchers: list[Matcher], lists: dict[str, list[Any]],
                 macros: dict[str, Selection], home: str | None, shared: _Shared) -> None:
        self.etype = etype
        self.matchers = matchers
        self.lists = lists
        self.macros = macros
        self.home = home
        self.shared = shared
        self.idxs = [i for i in idxs if self._expr(i, _Emitter(etype, lists, macros, home, shared)) != "False"]
        self.name = (etype or "any").replace(".", "_")
        self._specialized: dict[tuple[int, ...], MatchFn | None] = {}

    def _expr(self, i: int, em: _Emitter) -> str:
        det = self.matchers[i].detection
        return em.cond(det.condition, det.selections)

    def function(self, idxs: Iterable[int], suffix: str = "") -> tuple[MatchFn, str]:
        with self.shared.lock:
            return self._function(idxs, suffix)

    def _function(self, idxs: Iterable[int], suffix: str) -> tuple[MatchFn, str]:
        em = _Emitter(self.etype, self.lists, self.macros, self.home, self.shared)
        body: list[str] = []
        for i in idxs:
            expr = self._expr(i, em)
            guard = f"_act[{i}] and " if self.matchers[i].step > 0 else ""
            body.append(f"    if {guard}{expr}:\n        hits = hits + ({i},)")
        fname = f"_match_{self.name}{suffix}"
        head = [f"def {fname}(ev, fx):", "    fx.ev = ev", "    hits = _E", *em.locals_init()]
        src = "\n".join([*head, *body, "    return hits", ""])
        return self._compile(fname, src), src

    def prefilter(self, pure: frozenset[str], fixed: dict[str, str] | None = None,
                  ) -> Callable[[Event, FieldContext], tuple[bool | None, ...]]:
        """Three-valued verdict of every matcher from the ``pure`` fields of an event alone
        (and the ``fixed`` values of other fields)."""
        em = _Emitter(self.etype, self.lists, self.macros, self.home, self.shared, pure=pure, fixed=fixed)
        exprs = [self._expr(i, em) for i in self.idxs]
        fname = f"_pre_{self.name}{'_clean' if fixed else ''}"
        src = "\n".join([f"def {fname}(ev, fx):", "    fx.ev = ev", *em.locals_init(),
                         "    return (" + "".join(f"{e}, " for e in exprs) + ")", ""])
        fn: Callable[[Event, FieldContext], tuple[bool | None, ...]] = self._compile(fname, src)
        return fn

    def early(self, early: frozenset[int]) -> MatchFn | None:
        """The function over just the fast lane's matchers of this type (None: it has none)."""
        idxs = [i for i in self.idxs if i in early]
        return self.function(idxs, "_early")[0] if idxs else None

    def specialized(self, cands: tuple[int, ...], full: MatchFn) -> MatchFn | None:
        """The function for events that only these matchers can match (None: no matcher can)."""
        if not cands:
            return None
        if len(cands) == len(self.idxs):  # all of them: the type's own function
            return full
        fn = self._specialized.get(cands, _MISS)
        if fn is _MISS:
            with self.shared.lock:
                fn = self._specialized.get(cands, _MISS)
                if fn is _MISS:
                    if len(self._specialized) >= SPECIALIZE_MAX:
                        return full
                    fn = self.function(cands, f"_{len(self._specialized)}")[0]
                    self._specialized[cands] = fn
        return fn  # type: ignore[return-value]

    def _compile(self, fname: str, src: str) -> Any:
        code = self.shared.compile(src, f"<spyglass rules: {self.etype or 'any'}>", "exec")
        exec(code, self.shared.ns)
        return self.shared.ns.pop(fname)

    def uses(self, fields: Iterable[str]) -> bool:
        """Some test of this type's matchers is on one of ``fields``."""
        names = frozenset(fields)
        return any(t.field in names for i in self.idxs
                   for t in field_tests(self.matchers[i].detection, self.macros, self.etype))

    def key_kinds(self) -> frozenset[str]:
        """Which of path/target this type's tests depend on, if any."""
        kinds: set[str] = set()
        for i in self.idxs:
            for t in field_tests(self.matchers[i].detection, self.macros, self.etype):
                if FIELDS[t.field].key:
                    kinds.add(FIELDS[t.field].key)
        return frozenset(kinds)


def compile_matchers(
    matchers: list[Matcher],
    lists: dict[str, list[Any]],
    macros: dict[str, Selection],
    home: str | None,
    *,
    per_path: bool = True,
    lazy: bool = False,
    early: frozenset[int] | None = None, code: Callable[..., Any] | None = None,
) -> CompiledSet:
    """Generate and compile the functions of every event type over ``matchers``.

    ``per_path=False`` turns off the per-path memo (every event runs its type's
    full function); the alerts are the same either way.  ``lazy`` compiles
    nothing now: ``CompiledSet.build(etype)`` compiles one type's function when
    it is first needed (a run sees a few of the event types), once.  ``early``:
    the indexes of the matchers the fast lane evaluates
    (``CompiledSet.early_by_type``, or ``build_early`` when lazy); ``code``: compile() (a cache).
    """
    active = [True] * len(matchers)
    out = CompiledSet(matchers=matchers, active=active)
    ns: dict[str, Any] = {
        "_U": _U, "_E": _E, "_low": _low, "_any_item": _any_item, "_act": active,
        **KLEENE,
    }
    shared = _Shared(ns, lazy=lazy, code=code)
    by_type: dict[str | None, list[int]] = {t: [] for t in EVENT_TYPES}
    by_type[None] = []
    for i, m in enumerate(matchers):
        types = m.detection.types
        for t in EVENT_TYPES:
            if types is None or t in types:
                by_type[t].append(i)
        if types is None:
            by_type[None].append(i)
    built: dict[str | None, tuple[MatchFn | None, MatchFn | None]] = {}

    def both(etype: str | None) -> tuple[MatchFn | None, MatchFn | None]:
        """The type's function and the fast lane's, compiled once (either thread may ask first)."""
        got = built.get(etype)
        if got is not None:
            return got
        with shared.lock:
            got = built.get(etype)
            if got is not None:
                return got
            tc = _TypeCompiler(etype, by_type.get(etype, []), matchers, lists, macros, home, shared)
            fn: MatchFn | None = None
            fast: MatchFn | None = None
            if tc.idxs:
                fn, src = tc.function(tc.idxs)
                out.source[etype or "*"] = src
                kinds = tc.key_kinds()
                has_early = early is not None and any(i in early for i in tc.idxs)
                if per_path and etype is not None and etype.startswith("file.") and "path" in kinds:
                    with_target = "target" in kinds
                    pure = frozenset({"path", "target"} if with_target else {"path"})
                    pre = lazy_prefilter(functools.partial(tc.prefilter, pure), shared.lock)
                    # while the run made no copy of a secret (nearly always), no path is one
                    clean = lazy_prefilter(functools.partial(tc.prefilter, pure, CLEAN), shared.lock) if tc.uses(
                        CLEAN) else None
                    fn, fast = path_dispatch(pre, tuple(tc.idxs), functools.partial(tc.specialized, full=fn),
                                             with_target=with_target, early=early if has_early else None,
                                             clean=clean)
                elif has_early and early is not None:
                    fast = tc.early(early)
            got = built[etype] = (fn, fast)
            return got

    def build(etype: str | None) -> MatchFn | None:
        return both(etype)[0]

    def build_early(etype: str | None) -> MatchFn | None:
        return both(etype)[1] if early else None

    if lazy:
        out.build = build
        out.build_early = build_early
        out.types = frozenset(t for t, idxs in by_type.items() if idxs and t is not None)
        return out
    for etype in by_type:
        fn, fast = both(etype)
        if fn is None:
            continue
        if etype is None:
            out.fallback = fn
            out.early_fallback = fast
        else:
            out.by_type[etype] = fn
            if fast is not None:
                out.early_by_type[etype] = fast
    return out
