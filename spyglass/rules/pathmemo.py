"""Deciding once per distinct path which rules an event on that path can match.

Most file events touch paths no rule cares about (libraries, sources, build
outputs).  Every test that depends only on ``file.path`` (or ``file.target``)
and the run's fixed settings is evaluated in three-valued logic: true,
false, or ``None`` ("depends on the rest of the event").  A matcher whose
condition comes out false cannot match any event on that path; the others
are the candidates, and the event runs a function generated for just them
(none: nothing to run).  The answer is remembered per path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from spyglass.events import Event
from spyglass.rules.context import FieldContext
from spyglass.rules.runstate import drop_older_half

MatchFn = Callable[[Event, FieldContext], tuple[int, ...]]
Prefilter = Callable[[Event, FieldContext], tuple[bool | None, ...]]
#: a path's functions: over all its candidates, the fast lane's of them, the others
Fns = tuple[MatchFn | None, MatchFn | None, MatchFn | None]

#: distinct paths remembered per event type (and state: see ``clean``); a full memo drops its older half
MEMO_MAX = 16_384
_E: tuple[int, ...] = ()
#: a dispatch table's default for an event type not looked up yet (its function may be None)
UNBUILT: MatchFn = lambda ev, fx: ()  # noqa: E731


def kand(*xs: bool | None) -> bool | None:
    out: bool | None = True
    for x in xs:
        if x is False:
            return False
        if x is None:
            out = None
    return out


def kor(*xs: bool | None) -> bool | None:
    out: bool | None = False
    for x in xs:
        if x is True:
            return True
        if x is None:
            out = None
    return out


def knot(x: bool | None) -> bool | None:
    return None if x is None else not x


def katleast(n: int, *xs: bool | None) -> bool | None:
    yes = sum(1 for x in xs if x is True)
    unknown = sum(1 for x in xs if x is None)
    if yes >= n:
        return True
    return False if yes + unknown < n else None


#: names the generated three-valued code uses
KLEENE = {"_kand": kand, "_kor": kor, "_knot": knot, "_katleast": katleast}


def path_dispatch(
    prefilter: Prefilter,
    idxs: tuple[int, ...],
    specialized: Callable[[tuple[int, ...]], MatchFn | None],
    *,
    with_target: bool,
    early: frozenset[int] | None = None,
    clean: Prefilter | None = None,
) -> tuple[MatchFn, MatchFn | None, MatchFn | None]:
    """Match functions that look up (or decide) the candidates of the event's path.

    ``prefilter`` gives one verdict per matcher of ``idxs``; ``specialized``
    returns the function for a tuple of candidate matchers (None for none).
    With ``with_target`` the memo is keyed by ``(file.path, file.target)``.
    With ``early`` (the matchers of the fast lane, :mod:`spyglass.rules.fastlane`)
    two more functions are returned: one over just those, and one over the
    others (the engine's, for an event whose early matchers the lane has
    decided already); all share the memo, so a path is decided once, by
    whichever thread sees it first (the fast lane, on the capture's reader
    thread, usually).  ``clean`` is the prefilter that
    holds while the run state has no copy of a secret (``RunState.tainted``
    empty: no path is one); its verdicts go to a memo of their own, used while
    the state of the calling thread is clean.  A path is decided the second
    time a side sees it: the first time runs the full function (``specialized``
    of all of ``idxs``), which costs less than a decision (a third to a half),
    so paths seen once (temp files, most of the new paths of a long run) never
    pay for one.
    """
    memo: dict[Any, Fns] = {}
    cmemo: dict[Any, Fns] = {} if clean is not None else memo
    #: paths seen once and not decided, per side (the engine's, the fast lane's)
    once_main: dict[Any, None] = {}
    once_early: dict[Any, None] = {}
    lock = threading.Lock()  # ``specialized`` compiles into a shared namespace
    #: candidates -> (all, the lane's, the others') functions (one for the many paths of the same candidates)
    pairs: dict[tuple[int, ...], Fns] = {}

    def pair(cands: tuple[int, ...]) -> Fns:
        got = pairs.get(cands)
        if got is None:
            with lock:
                main = specialized(cands)
                if early is not None and cands:
                    fast = specialized(tuple(i for i in cands if i in early))
                    late = specialized(tuple(i for i in cands if i not in early))
                else:
                    fast, late = None, main
            got = (main, fast, late)
            if len(pairs) < 4 * MEMO_MAX:
                pairs[cands] = got
        return got

    def lookup(ev: Event, fx: FieldContext, key: Any, once: dict[Any, None]) -> Fns:
        if clean is not None and not fx.state.tainted:
            into, pre = cmemo, clean
        else:
            into, pre = memo, prefilter
        fns = into.get(key)
        if fns is not None:
            return fns
        if key not in once:
            # first sight: the type's full function (it stops early on most paths), no decision;
            # a path seen once only (a temp file) costs no more
            if len(once) >= MEMO_MAX:
                drop_older_half(once)
            once[key] = None
            return pair(idxs)
        once.pop(key, None)
        verdicts = pre(ev, fx)
        fns = pair(tuple(i for i, v in zip(idxs, verdicts, strict=True) if v is not False))
        if len(into) >= MEMO_MAX:
            drop_older_half(into)  # the paths of the moment stay decided
        into[key] = fns
        return fns

    if with_target:

        def by_path_and_target(ev: Event, fx: FieldContext) -> tuple[int, ...]:
            key = (ev.path, ev.target)
            fns = (memo if fx.state.tainted else cmemo).get(key) or lookup(ev, fx, key, once_main)
            fn = fns[0]
            return _E if fn is None else fn(ev, fx)

        def early_by_path_and_target(ev: Event, fx: FieldContext) -> tuple[int, ...]:
            key = (ev.path, ev.target)
            fns = (memo if fx.state.tainted else cmemo).get(key) or lookup(ev, fx, key, once_early)
            fn = fns[1]
            return _E if fn is None else fn(ev, fx)

        def late_by_path_and_target(ev: Event, fx: FieldContext) -> tuple[int, ...]:
            key = (ev.path, ev.target)
            fns = (memo if fx.state.tainted else cmemo).get(key) or lookup(ev, fx, key, once_main)
            fn = fns[2]
            return _E if fn is None else fn(ev, fx)

        if early:
            return by_path_and_target, early_by_path_and_target, late_by_path_and_target
        return by_path_and_target, None, None

    def by_path(ev: Event, fx: FieldContext) -> tuple[int, ...]:
        key = ev.path
        fns = (memo if fx.state.tainted else cmemo).get(key) or lookup(ev, fx, key, once_main)
        fn = fns[0]
        return _E if fn is None else fn(ev, fx)

    def early_by_path(ev: Event, fx: FieldContext) -> tuple[int, ...]:
        key = ev.path
        fns = (memo if fx.state.tainted else cmemo).get(key) or lookup(ev, fx, key, once_early)
        fn = fns[1]
        return _E if fn is None else fn(ev, fx)

    def late_by_path(ev: Event, fx: FieldContext) -> tuple[int, ...]:
        key = ev.path
        fns = (memo if fx.state.tainted else cmemo).get(key) or lookup(ev, fx, key, once_main)
        fn = fns[2]
        return _E if fn is None else fn(ev, fx)

    return (by_path, early_by_path, late_by_path) if early else (by_path, None, None)


def lazy_prefilter(make: Callable[[], Prefilter], lock: threading.RLock) -> Prefilter:
    """A prefilter compiled at its first call (paths are decided at their second sight: many
    runs decide no path of a type, and a short run pays for no compilation it does not use)."""
    box: list[Prefilter] = []

    def call(ev: Event, fx: FieldContext) -> tuple[bool | None, ...]:
        if not box:
            with lock:
                if not box:
                    box.append(make())
        return box[0](ev, fx)

    return call
