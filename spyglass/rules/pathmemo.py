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

from collections.abc import Callable
from typing import Any

from spyglass.events import Event
from spyglass.rules.context import FieldContext

MatchFn = Callable[[Event, FieldContext], tuple[int, ...]]
Prefilter = Callable[[Event, FieldContext], tuple[bool | None, ...]]

#: distinct paths remembered per event type before the memo starts over
MEMO_MAX = 100_000
_E: tuple[int, ...] = ()
_MISS = object()


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
) -> MatchFn:
    """A match function that looks up (or decides) the candidates of the event's path.

    ``prefilter`` gives one verdict per matcher of ``idxs``; ``specialized``
    returns the function for a tuple of candidate matchers (None for none).
    With ``with_target`` the memo is keyed by ``(file.path, file.target)``.
    """
    memo: dict[Any, MatchFn | None] = {}
    get = memo.get

    def decide(ev: Event, fx: FieldContext) -> MatchFn | None:
        verdicts = prefilter(ev, fx)
        cands = tuple(i for i, v in zip(idxs, verdicts, strict=True) if v is not False)
        if len(memo) >= MEMO_MAX:
            memo.clear()
        return specialized(cands)

    if with_target:

        def by_path_and_target(ev: Event, fx: FieldContext) -> tuple[int, ...]:
            key = (ev.path, ev.target)
            fn = get(key, _MISS)
            if fn is _MISS:
                fn = memo[key] = decide(ev, fx)
            return _E if fn is None else fn(ev, fx)  # type: ignore[operator]

        return by_path_and_target

    def by_path(ev: Event, fx: FieldContext) -> tuple[int, ...]:
        key = ev.path
        fn = get(key, _MISS)
        if fn is _MISS:
            fn = memo[key] = decide(ev, fx)
        return _E if fn is None else fn(ev, fx)  # type: ignore[operator]

    return by_path
