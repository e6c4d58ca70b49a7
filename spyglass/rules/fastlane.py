"""The fast lane: single-event alert and kill rules decided before the event waits in a queue.

A capture backend parses on a reader thread and hands batches of events to
the pipeline through a bounded queue (:mod:`spyglass.capture.handover`).
Under a burst of unrelated events (an untar, a build) an event can wait there
behind thousands of others.  The rule engine therefore also sees every event
on the reader's thread, right after it is parsed (``LaunchSpec.urgent`` ->
``Pipeline.urgent`` -> :meth:`RuleEngine.urgent <spyglass.rules.engine.RuleEngine.urgent>`),
and evaluates there the rules that need no history: single-event rules (no
threshold, no sequence) whose action is ``alert`` or ``kill``.

The lane keeps a process table and a run state of its own, fed with the
same events in the same order, so its verdicts are those the engine reaches
when the event comes out of the queue (events the session adds itself, such
as operator interventions, never change either).  A hit is *announced*
at once (sinks with an ``announce`` hook, the live printer, write the line
now) and a kill rule stops the agent at once in enforce mode.  The alert is
*recorded* (store, exports, exit code) when the engine reaches the event in
order, with its ``seq``: the engine raises it as before, and the printer does
not print it twice; if the engine's own evaluation did not raise it, the
announced alert is recorded as it was announced, so an announced alert is
always recorded, once.  A replayed run (``check``) has no lane and gives
the same alerts.

The lane's matchers are not evaluated twice: the lane keeps what it found
for each event it saw (``FastLane.verdicts``), and the engine, when it
reaches that event, runs only the other matchers of its type
(``CompiledSet.build_late``) and handles the lane's hits as its own.  An
event the lane did not see (one the session adds itself), or one seen
before the run learned a fact it has learned since (the tracer's pid, known
to the pipeline a moment after the capture starts), runs the type's full
function.

A backend may also show the lane events *ahead* of the stream's order
(:meth:`FastLane.peek`; the eBPF backend's alert ring, where an open of a
secret never waits behind a burst, :mod:`spyglass.capture.ebpf.lookout`).
The lane evaluates them with a process table of their own (fed with the
lifecycle events the backend reads ahead) and its run state as it stands,
changes neither, and announces what they match.  When the same event comes in
order, its announced alerts are not announced again and are recorded as above.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from spyglass.events import EVENT_TYPES, Alert, Event
from spyglass.rules.compiler import CompiledSet, Matcher
from spyglass.rules.context import FieldContext
from spyglass.rules.model import Rule
from spyglass.rules.pathmemo import UNBUILT, MatchFn
from spyglass.rules.tracking import track

if TYPE_CHECKING:
    from spyglass.rules.engine import RuleEngine

#: actions of the rules the lane decides
FAST_ACTIONS = frozenset({"alert", "kill"})
_PROC_TYPES = frozenset({"process.start", "process.exec", "process.exit", "process.detach"})
#: an event as the look-ahead and the in-order stream both see it (two decodings of one record:
#: the kernel's stamp in ns, the process and thread, the type)
Key = tuple[int, int, "int | None", str]
#: events announced ahead of order and not reached in order yet, at most (then forgotten)
MAX_PEEKED = 4096
#: the lane's verdicts kept for the engine, at most (then forgotten: the engine evaluates those in full)
MAX_VERDICTS = 1 << 17


def _key(ev: Event) -> Key:
    return (ev.ts, ev.pid, ev.tid, ev.type)


def fast_matchers(rules: list[Rule], matchers: list[Matcher]) -> frozenset[int]:
    """The matchers the lane evaluates: single-event rules that alert or kill."""
    return frozenset(
        i for i, m in enumerate(matchers)
        if m.step == -1 and rules[m.rule_index].threshold is None
        and rules[m.rule_index].action in FAST_ACTIONS
    )  # fmt: skip


class FastLane:
    """The engine's evaluation of the fast rules on the reader's thread (see the module text)."""

    def __init__(self, engine: RuleEngine, fx: FieldContext, ahead: FieldContext, compiled: CompiledSet,
                 early: frozenset[int]) -> None:
        self.engine = engine
        self.fx = fx
        self.early = early
        self._dispatch: dict[str, MatchFn | None] = dict(compiled.early_by_type)
        self._fallback = compiled.early_fallback
        self._build = compiled.build_early  # lazy sets: a type's function compiled when first needed
        self._nprocs = 0
        self.lock = threading.Lock()
        #: (rule id, pid, message) of the alerts announced and not yet recorded
        self.announced: set[tuple[str, int, str]] = set()
        #: id(event) -> (the event, alerts announced for it), until the engine reaches it
        self.pending: dict[int, tuple[Event, list[Alert]]] = {}
        self.seen = 0
        self.hits = 0
        #: id(event) -> (the event, the lane's matchers it matched), until the engine reaches it: the
        #: engine then evaluates only the other matchers (the lane's state is the engine's, in order)
        #: (with the facts' version: a fact learned between the lane's look and the engine's, such as
        #: the tracer's pid at the start, makes the engine evaluate the event in full)
        self.verdicts: dict[int, tuple[Event, tuple[int, ...], int]] = {}
        #: the look-ahead's field context: the lane's facts and run state, with a process table of its own
        self.ahead = ahead
        #: alerts announced ahead of order, by event, until the event comes in order
        self.peeked: dict[Key, list[Alert]] = {}
        self.peeks = 0  # events seen ahead of order
        self.peek_hits = 0

    def peek(self, ev: Event) -> None:
        """Reader thread: an event decoded ahead of the stream's order.  Its process table
        follows the lifecycle events given here; the run state is read, never changed."""
        self.peeks += 1
        fx = self.ahead
        t = ev.type
        if t in _PROC_TYPES:
            fx.procs.update(ev)
            fx.procs_changed(True)
        fn = self._dispatch.get(t, UNBUILT)
        if fn is UNBUILT:
            fn = self._first(t)
        if fn is None:
            return
        hits = fn(ev, fx)
        for i in hits or ():
            if i in self.early:
                self._hit(i, ev, fx, peeked=True)

    def see(self, ev: Event) -> None:
        """Reader thread: keep the lane's process table and state, evaluate the fast rules."""
        self.seen += 1
        fx = self.fx
        if not ev.ts:
            ev.ts = time.time_ns()
        procs = fx.procs
        t = ev.type
        if t.startswith("process."):  # as the pipeline keeps its table: the engine's, event for event
            procs.update(ev)
        if t in _PROC_TYPES:
            n = len(procs.procs)
            fx.procs_changed(t == "process.start" or n != self._nprocs)
            self._nprocs = n
        ahead = self.peeked.pop(_key(ev), None) if self.peeked else None
        fn = self._dispatch.get(t, UNBUILT)
        if fn is UNBUILT:
            fn = self._first(t)
        if fn is not None:
            hits = fn(ev, fx)
            if hits:
                hits = tuple(i for i in hits if i in self.early)  # a specialized function may be the full one
                for i in hits:
                    self._hit(i, ev, fx, told=ahead)
            verdicts = self.verdicts
            if len(verdicts) >= MAX_VERDICTS:
                verdicts.clear()  # events that never reached the engine: it evaluates the rest in full
            verdicts[id(ev)] = (ev, hits, fx.facts_version())
        if ahead:  # announced ahead: recorded when the engine reaches this event (settle)
            with self.lock:
                self.pending.setdefault(id(ev), (ev, []))[1].extend(ahead)
        track(ev, fx, fx.state)

    def _first(self, t: str) -> MatchFn | None:
        """The lane's function for an event type it meets for the first time (compiled now if the
        set is lazy; a type outside the schema gets the rules for any type)."""
        known = t in EVENT_TYPES
        if self._build is None:
            fn = None if known else self._fallback
        else:
            fn = self._build(t if known else None)
        self._dispatch[t] = fn
        return fn

    def _hit(self, i: int, ev: Event, fx: FieldContext, peeked: bool = False,
             told: list[Alert] | None = None) -> None:
        eng = self.engine
        ctx = eng.ctx
        if ctx is None:
            return
        rule = eng.rules[eng._matchers[i].rule_index]
        if told and any(a.rule_id == rule.id for a in told):
            # announced when this very event was seen ahead of order, maybe with another message
            # (the look-ahead's process table had not seen an exec yet): not again
            return
        msg = eng.message(rule, ev, fx)
        key = (rule.id, ev.pid, msg)
        with self.lock:
            if key in eng._dedup or key in self.announced:
                return  # raised already, or announced and on its way
            self.announced.add(key)
            alert = eng.build_alert(rule, ev, [], msg, fx)
            if not peeked:
                self.pending.setdefault(id(ev), (ev, []))[1].append(alert)
        if peeked:
            if len(self.peeked) >= MAX_PEEKED:
                self.peeked.clear()
            self.peeked.setdefault(_key(ev), []).append(alert)
            self.peek_hits += 1
        self.hits += 1
        ctx.announce_alert(alert)
        if rule.action == "kill" and ctx.stop_agent is not None:
            eng.enforce(rule.id)

    def settle(self, ev: Event, raised: list[str] | tuple[()]) -> None:
        """Main thread, after the engine evaluated ``ev``: record what the lane announced for it
        and the engine did not raise itself."""
        with self.lock:
            entry = self.pending.pop(id(ev), None)
            if entry is None:
                return
            if entry[0] is not ev:  # not this event (its id was reused): put it back
                self.pending[id(entry[0])] = entry
                return
            alerts = entry[1]
            for a in alerts:
                self.announced.discard((a.rule_id, a.pid, a.message))
        eng = self.engine
        for alert in alerts:
            key = (alert.rule_id, alert.pid, alert.message)
            if alert.rule_id in raised or key in eng._dedup:
                continue
            eng._dedup.add(key)
            alert.event_seqs = [ev.seq]
            eng.record(alert)
