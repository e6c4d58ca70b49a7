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
The expression text is written by :mod:`spyglass.rules.emitter`; this
module places it in functions, compiles them and picks one per event.

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
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from spyglass.events import EVENT_TYPES, Event
from spyglass.rules.context import FieldContext
from spyglass.rules.emitter import UNFETCHED, Emitter, Shared, any_item, low
from spyglass.rules.fields import FIELDS
from spyglass.rules.model import Detection, Selection, field_tests
from spyglass.rules.pathmemo import KLEENE, MatchFn, lazy_prefilter, path_dispatch

_MISS = object()
_E: tuple[int, ...] = ()
#: distinct sets of candidate matchers per event type that get their own function
SPECIALIZE_MAX = 64
#: the fields' values while the run state holds no copy of a secret (``RunState.tainted`` empty)
CLEAN = {"file.secret_copy": "False", "file.target.secret_copy": "False"}


class Matcher(msgspec.Struct):
    """One thing to evaluate per event: a rule's detection, or one step of it."""

    rule_index: int
    step: int  # -1 for the rule's own detection
    detection: Detection


class CompiledSet(msgspec.Struct):
    """The compiled matchers of a rule set: ``by_type``, event type -> the indexes that matched."""
    by_type: dict[str, MatchFn] = msgspec.field(default_factory=dict)
    #: for event types not in EVENT_TYPES
    fallback: MatchFn | None = None
    matchers: list[Matcher] = msgspec.field(default_factory=list)
    #: per matcher: may it match now (the engine clears it for sequence steps nobody waits at)
    active: list[bool] = msgspec.field(default_factory=list)
    #: event type -> generated source of its full function (for `spyglass rules` debugging)
    source: dict[str, str] = msgspec.field(default_factory=dict)
    #: the fast lane's functions (only the matchers given as ``early``), per event type and the fallback
    early_by_type: dict[str, MatchFn] = msgspec.field(default_factory=dict)
    early_fallback: MatchFn | None = None
    #: lazy sets: event type (None: the fallback) -> its function, compiled at the first call
    #: (``by_type`` and ``fallback`` stay empty); ``types`` are those some matcher may match
    build: Callable[[str | None], MatchFn | None] | None = None
    types: frozenset[str] = frozenset()
    #: lazy sets: the fast lane's function of an event type (None: the fallback), compiled when asked
    build_early: Callable[[str | None], MatchFn | None] | None = None
    #: lazy sets: the function over the type's other matchers, for an event the lane has seen (the
    #: engine adds the lane's hits); the type's full function when the lane has none of its matchers
    build_late: Callable[[str | None], MatchFn | None] | None = None



class _TypeCompiler:
    """Builds the functions of one event type."""

    def __init__(self, etype: str | None, idxs: list[int], matchers: list[Matcher], lists: dict[str, list[Any]],
                 macros: dict[str, Selection], home: str | None, shared: Shared) -> None:
        self.etype = etype
        self.matchers = matchers
        self.lists = lists
        self.macros = macros
        self.home = home
        self.shared = shared
        self.idxs = [i for i in idxs if self._expr(i, Emitter(etype, lists, macros, home, shared)) != "False"]
        self.name = (etype or "any").replace(".", "_")
        self._specialized: dict[tuple[int, ...], MatchFn | None] = {}

    def _expr(self, i: int, em: Emitter) -> str:
        det = self.matchers[i].detection
        return em.cond(det.condition, det.selections)

    def function(self, idxs: Iterable[int], suffix: str = "") -> tuple[MatchFn, str]:
        with self.shared.lock:
            return self._function(idxs, suffix)

    def _function(self, idxs: Iterable[int], suffix: str) -> tuple[MatchFn, str]:
        em = Emitter(self.etype, self.lists, self.macros, self.home, self.shared)
        body: list[str] = []
        for i in idxs:
            expr = self._expr(i, em)
            guard = f"_act[{i}] and " if self.matchers[i].step > 0 else ""
            body.append(f"    if {guard}{expr}:\n        hits = hits + ({i},)")
        tests = em.gated("\n".join(body))  # the whole body at once (before locals_init: a gate is a local)
        fname = f"_match_{self.name}{suffix}"
        head = [f"def {fname}(ev, fx):", "    fx.ev = ev", "    hits = _E", *em.locals_init()]
        src = "\n".join([*head, *([tests] if body else []), "    return hits", ""])
        return self._compile(fname, src), src

    def prefilter(self, pure: frozenset[str], fixed: dict[str, str] | None = None,
                  ) -> Callable[[Event, FieldContext], tuple[bool | None, ...]]:
        """Three-valued verdict of every matcher from the ``pure`` fields of an event alone
        (and the ``fixed`` values of other fields)."""
        em = Emitter(self.etype, self.lists, self.macros, self.home, self.shared, pure=pure, fixed=fixed)
        exprs = [self._expr(i, em) for i in self.idxs]
        verdicts = em.gated("".join(f"{e}, " for e in exprs))  # once all are written: a gate covers every test
        fname = f"_pre_{self.name}{'_clean' if fixed else ''}"
        src = "\n".join([f"def {fname}(ev, fx):", "    fx.ev = ev", *em.locals_init(),
                         "    return (" + verdicts + ")", ""])
        fn: Callable[[Event, FieldContext], tuple[bool | None, ...]] = self._compile(fname, src)
        return fn

    def early(self, early: frozenset[int]) -> MatchFn | None:
        """The function over just the fast lane's matchers of this type (None: it has none)."""
        idxs = [i for i in self.idxs if i in early]
        return self.function(idxs, "_early")[0] if idxs else None

    def late(self, early: frozenset[int]) -> MatchFn | None:
        """The function over the matchers of this type the fast lane does not evaluate (None: none)."""
        idxs = [i for i in self.idxs if i not in early]
        return self.function(idxs, "_late")[0] if idxs else None

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
        "_U": UNFETCHED, "_E": _E, "_low": low, "_any_item": any_item, "_act": active,
        **KLEENE,
    }
    shared = Shared(ns, lazy=lazy, code=code)
    by_type: dict[str | None, list[int]] = {t: [] for t in EVENT_TYPES}
    by_type[None] = []
    for i, m in enumerate(matchers):
        types = m.detection.types
        for t in EVENT_TYPES:
            if types is None or t in types:
                by_type[t].append(i)
        if types is None:
            by_type[None].append(i)
    built: dict[str | None, tuple[MatchFn | None, MatchFn | None, MatchFn | None]] = {}

    def both(etype: str | None) -> tuple[MatchFn | None, MatchFn | None, MatchFn | None]:
        """The type's function, the fast lane's and the others', compiled once (either thread
        may ask first)."""
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
            late: MatchFn | None = None
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
                    fn, fast, late = path_dispatch(
                        pre, tuple(tc.idxs), functools.partial(tc.specialized, full=fn), with_target=with_target,
                        early=early if has_early else None, clean=clean)
                elif has_early and early is not None:
                    fast, late = tc.early(early), tc.late(early)
                if not has_early:
                    late = fn
            got = built[etype] = (fn, fast, late)
            return got

    def build(etype: str | None) -> MatchFn | None:
        return both(etype)[0]

    def build_early(etype: str | None) -> MatchFn | None:
        return both(etype)[1] if early else None

    def build_late(etype: str | None) -> MatchFn | None:
        return both(etype)[2]

    if lazy:
        out.build = build
        out.build_early = build_early
        out.build_late = build_late
        out.types = frozenset(t for t, idxs in by_type.items() if idxs and t is not None)
        return out
    for etype in by_type:
        fn, fast, _ = both(etype)
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
