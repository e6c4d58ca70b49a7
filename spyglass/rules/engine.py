"""The rule engine: a pipeline sink that evaluates the rule set on every event.

``RuleEngine(ruleset, policy)`` compiles the rules when the run starts (the
lists that depend on the run, such as the workspace and HOME, are known
then), evaluates each event against only the rules that can match its type
(and, for file events, its path), and raises alerts through
``ctx.raise_alert``.  ``kill`` rules stop the agent when the mode is
``enforce``.  The same engine over a replayed run gives the same alerts:
everything it uses comes from the events, the policy and the run's metadata.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spyglass.events import EVENT_TYPES, Alert, Event, LineageEntry
from spyglass.events.proctree import ProcessTable
from spyglass.pipeline import RunContext, Sink, default_home
from spyglass.policy import Policy
from spyglass.rules.compiler import CompiledSet, Matcher, compile_matchers
from spyglass.rules.context import FieldContext, RunState
from spyglass.rules.describe import describe, duration, short_command
from spyglass.rules.fastlane import FastLane, fast_matchers
from spyglass.rules.fields import FIELDS
from spyglass.rules.model import Rule, RuleSet
from spyglass.rules.pathmemo import UNBUILT, MatchFn
from spyglass.rules.runfacts import record_launch, run_facts
from spyglass.rules.state import ProcRef, SequenceTracker, ThresholdCounter
from spyglass.rules.tracking import track

if TYPE_CHECKING:
    from spyglass.rules.codecache import CodeCache

_PROC_TYPES = frozenset({"process.start", "process.exec", "process.exit", "process.detach"})
_TEMPLATE = re.compile(r"\{([a-z_][a-z0-9_.]*)(?:\|([^{}]*))?\}")  # {field} or {field|when missing}
MAX_DEDUP = 100_000
_NO_PIDS: frozenset[int] = frozenset()
#: the event types of nearly every run, compiled before the agent starts (RuleEngine.warm)
_WARM_FIRST = ("process.start", "process.exec", "process.exit", "file.read")


def _getter(name: str) -> Callable[[Event, FieldContext], Any]:
    fn: Callable[[Event, FieldContext], Any] = eval(f"lambda ev, fx: {FIELDS[name].expr}")
    return fn


def _hashable(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


class RuleEngine(Sink):
    name = "rules"

    def __init__(
        self,
        ruleset: RuleSet,
        policy: Policy | None = None,
        *,
        mode: str | None = None,
        home: str | None = None,
        workspace: list[str] | None = None,
        monitor_pids: tuple[int, ...] = (),
        per_path: bool = True,
        validated: bool = False,
        fast_lane: bool = True,
    ) -> None:
        self.ruleset = ruleset
        self.policy = policy or Policy.default()
        self.rules: list[Rule] = ruleset.enabled
        self._mode = mode
        self._home = home
        self._workspace = workspace
        self._monitor_pids = monitor_pids
        self._per_path = per_path
        self._fast_lane = fast_lane
        self.lane: FastLane | None = None
        self._raised_now: list[str] = []  # ids of the rules that raised on the event being evaluated
        self.alerts: list[Alert] = []
        self.stopped_by: str | None = None
        self.ctx: RunContext | None = None
        self.compiled: CompiledSet | None = None
        self.state = RunState()
        self._dedup: set[tuple[str, int, str]] = set()
        self._getters: dict[str, Callable[[Event, FieldContext], Any]] = {}
        self._compile_lock = threading.Lock()
        #: compiles the generated rule code (None: ``compile``; a run sets its store's code cache)
        self.code_cache: CodeCache | None = None
        #: compile every event type's function in start() (else each at its type's first event)
        self._eager = not validated
        if not validated:
            # compile all now so a broken rule stops the run before it starts (``validated``: the
            # rule cache saw these rules compile for this policy and home before, spyglass/rules/cache.py)
            self.start(RunContext(root_cwd="/", workspace=["/"]))
            self.ctx = None
        self._eager = False

    # -- set-up ----------------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.state = RunState()
        self.alerts = []
        self._dedup = set()
        self.stopped_by = None
        meta = ctx.run
        home = (self._home or ctx.home or default_home()).rstrip("/") or "/"
        if meta is not None and getattr(meta, "status", "") == "running":
            record_launch(meta, home)
        if self._workspace:
            ws = list(self._workspace)
        elif self.policy.workspace:
            ws = list(self.policy.workspace)
        else:
            ws = list(ctx.workspace) or ([ctx.root_cwd] if ctx.root_cwd else [])
        self.mode = self._mode or (meta.mode if meta is not None else None) or self.policy.mode
        self.home = home
        self.workspace = ws
        fx_args, lists = run_facts(self.policy, ctx, self.state, home, ws, self._monitor_pids,
                                   self.ruleset.library.lists)
        self.fx = FieldContext(**fx_args)
        #: for would_block, which other threads call: its own context, never the pipeline's
        self._veto_fx = FieldContext(**fx_args)
        self._veto_lock = threading.Lock()
        self._block_rules = frozenset(
            i for i, r in enumerate(self.rules) if r.action == "block" and r.kind == "event"
        )
        self.lists = lists
        matchers: list[Matcher] = []
        self._trackers: dict[int, SequenceTracker | ThresholdCounter] = {}
        #: rule index -> matcher index of each step of a sequence rule
        self._steps: dict[int, list[int]] = {}
        for ri, rule in enumerate(self.rules):
            if rule.sequence is not None:
                self._steps[ri] = []
                for si, st in enumerate(rule.sequence.steps):
                    self._steps[ri].append(len(matchers))
                    matchers.append(Matcher(ri, si, st.detection))
                self._trackers[ri] = SequenceTracker(
                    [(st.count, st.distinct is not None, st.key is not None) for st in rule.sequence.steps],
                    rule.sequence.by, rule.sequence.within_ns,
                )
            else:
                assert rule.detection is not None
                matchers.append(Matcher(ri, -1, rule.detection))
                if rule.threshold is not None:
                    th = rule.threshold
                    self._trackers[ri] = ThresholdCounter(th.count, th.within_ns, th.distinct is not None)
        # (not for the validating compile: the lane's functions are subsets of the others)
        early = fast_matchers(self.rules, matchers) if self._fast_lane and not self._eager else frozenset()
        self.compiled = compile_matchers(matchers, lists, self.ruleset.library.macros, home,
                                         per_path=self._per_path, lazy=not self._eager, early=early,
                                         code=self.code_cache.compile if self.code_cache is not None else None)
        self._active = self.compiled.active
        for m_idx in self._steps.values():
            for i in m_idx[1:]:
                self._active[i] = False  # nothing waits at a later step yet
        by_type = self.compiled.by_type
        self._fallback = self.compiled.fallback
        self._dispatch: dict[str, MatchFn | None] = {t: by_type.get(t) for t in EVENT_TYPES}
        self._late: dict[str, MatchFn | None] = {}  # for events the fast lane saw (event())
        if self.compiled.build is not None:  # lazy: each type compiles at its first event
            self._dispatch.update({t: self._first_of(t) for t in self.compiled.types})
            self._fallback = self._first_of(None)
        self._matchers = matchers
        self._nprocs = len(ctx.procs.procs)
        self.lane = None
        if early:
            # the lane's context and its look-ahead's: a run state of the lane's own, shared by both;
            # a process table each (the look-ahead follows events out of order)
            lane_args = {**fx_args, "state": RunState()}
            self.lane = FastLane(self, FieldContext(**{**lane_args, "procs": ProcessTable(evict=True)}),
                                 FieldContext(**{**lane_args, "procs": ProcessTable(evict=True)}),
                                 self.compiled, early)

    def warm(self, more: Callable[[], bool] = lambda: False) -> None:
        """Compile now the functions of the event types every run sees, then of the others in
        order while ``more()`` says there is idle time (the eBPF program still loading)."""
        compiled = self.compiled
        if compiled is None or compiled.build is None:
            return
        for i, t in enumerate(_WARM_FIRST + tuple(x for x in EVENT_TYPES if x not in _WARM_FIRST)):
            if i >= len(_WARM_FIRST) and not more():
                return
            if t in compiled.types and self._dispatch.get(t) is not None:
                with self._compile_lock:
                    fn = compiled.build(t)
                    if self.compiled is compiled:
                        self._dispatch[t] = fn

    def _first_of(self, etype: str | None) -> MatchFn:
        """A stand-in that compiles ``etype``'s function at the first event of that type, puts
        it in its place and runs it (the proxy's veto thread may be first: hence the lock)."""
        compiled = self.compiled

        def first(ev: Event, fx: FieldContext) -> tuple[int, ...]:
            assert compiled is not None and compiled.build is not None
            with self._compile_lock:
                fn = compiled.build(etype)
                if self.compiled is compiled:  # not restarted meanwhile
                    if etype is None:
                        self._fallback = fn
                    else:
                        self._dispatch[etype] = fn
            return fn(ev, fx) if fn is not None else ()

        return first

    # -- per event -------------------------------------------------------------------
    def event(self, ev: Event) -> None:
        t = ev.type
        fx = self.fx
        if t in _PROC_TYPES:
            n = len(fx.procs.procs)
            fx.procs_changed(t == "process.start" or n != self._nprocs)
            self._nprocs = n
        lane = self.lane
        seen = lane.verdicts.pop(id(ev), None) if lane is not None and lane.verdicts else None
        if seen is not None and seen[0] is ev and seen[2] == fx.facts_version():  # the lane's decided: the rest
            fn = self._late.get(t, UNBUILT)
            if fn is UNBUILT:
                fn = self._late_of(t)
            hits = fn(ev, fx) if fn is not None else ()
            if seen[1]:
                hits = tuple(sorted({*hits, *seen[1]})) if hits else seen[1]
        else:
            fn = self._dispatch.get(t, self._fallback)
            hits = fn(ev, fx) if fn is not None else ()
        if hits:
            self._raised_now.clear()
            for i in reversed(hits):
                self._hit(self._matchers[i], ev)
        if lane is not None and lane.pending:
            lane.settle(ev, self._raised_now if hits else ())
        track(ev, fx, self.state)

    def _late_of(self, t: str) -> MatchFn | None:
        """The function over the matchers of type ``t`` that the fast lane does not evaluate."""
        compiled = self.compiled
        assert compiled is not None and compiled.build_late is not None  # a lane exists: the set is lazy
        with self._compile_lock:
            fn = compiled.build_late(t if t in EVENT_TYPES else None)
            if self.compiled is compiled:
                self._late[t] = fn
        return fn

    def urgent(self, ev: Event) -> None:
        """The fast lane: called on the capture's reader thread before the event is queued."""
        if self.lane is not None:
            self.lane.see(ev)

    def lookout(self, ev: Event) -> None:
        """The fast lane on an event decoded ahead of order (``LaunchSpec.lookout``)."""
        if self.lane is not None:
            self.lane.peek(ev)

    def would_block(self, ev: Event) -> str | None:
        """The id of a ``block`` rule that this would-be event matches, or None.

        For the egress proxy's veto hook (it calls from its own thread): only
        single-event rules with ``action: block`` count, and nothing changes
        (no alert, no state, its own field context)."""
        if not self._block_rules:
            return None
        fn = self._dispatch.get(ev.type, self._fallback)
        if fn is None:
            return None
        with self._veto_lock:
            self._veto_fx.procs_changed(True)
            hits = fn(ev, self._veto_fx)
        for i in hits:
            m = self._matchers[i]
            if m.step == -1 and m.rule_index in self._block_rules:
                return self.rules[m.rule_index].id
        return None

    def _value(self, name: str, ev: Event, fx: FieldContext | None = None) -> Any:
        g = self._getters.get(name)
        if g is None:
            g = self._getters[name] = _getter(name)
        fx = fx or self.fx
        fx.ev = ev
        return g(ev, fx)

    def _proc_ref(self, ev: Event, by: str) -> ProcRef:
        """The event's process as a sequence scope needs it (ancestors only for ``lineage``)."""
        if by == "run":
            return ProcRef(ev.pid, None, _NO_PIDS)
        if by != "lineage":
            info = self.fx.procs.procs.get(ev.pid)
            return ProcRef(ev.pid, info.ppid if info is not None else ev.ppid, _NO_PIDS)
        cache = self.fx.per_pid
        ref: ProcRef | None = cache.get(("ref", ev.pid))
        if ref is None:
            lin = self.fx.procs.lineage(ev.pid)
            ppid = lin[0].ppid if lin else ev.ppid
            ref = cache[("ref", ev.pid)] = ProcRef(ev.pid, ppid, frozenset(p.pid for p in lin[1:]))
        return ref

    def _scope_key(self, by: str, ev: Event) -> object:
        if by in ("process", "child"):
            return ev.pid
        if by == "lineage":
            cache = self.fx.per_pid
            branch: int | None = cache.get(("branch", ev.pid))
            if branch is None:
                lin = self.fx.procs.lineage(ev.pid)
                # the branch: the ancestor just below the run's root (or the root itself)
                branch = cache[("branch", ev.pid)] = lin[-2].pid if len(lin) >= 2 else ev.pid
            return branch
        return None

    def _hit(self, m: Matcher, ev: Event) -> None:
        ri = m.rule_index
        rule = self.rules[ri]
        if rule.sequence is not None:
            tracker = self._trackers[ri]
            assert isinstance(tracker, SequenceTracker)
            st = rule.sequence.steps[m.step]
            key = self._value(st.key, ev) if st.key else None
            value = _hashable(self._value(st.distinct, ev)) if st.distinct else None
            ref = self._proc_ref(ev, tracker.by)
            done = tracker.feed(m.step, ev.ts, ev.seq, ref, None if key is None else str(key), value)
            for s, mi in enumerate(self._steps[ri]):
                if s:
                    self._active[mi] = tracker.waiting(s)
            if done is not None:
                seqs = sorted({s for step in done.seqs for s in step})
                self._raise(rule, ev, seqs, self._sequence_message(rule, seqs, ev))
            return
        if rule.threshold is not None:
            th = rule.threshold
            counter = self._trackers[ri]
            assert isinstance(counter, ThresholdCounter)
            value = _hashable(self._value(th.distinct, ev)) if th.distinct else None
            hit = counter.add(self._scope_key(th.by, ev), ev.ts, ev.seq, value)
            if hit is not None:
                msg = self._message(rule, ev) if rule.message else (
                    f"{rule.title}: {len(hit)} within {duration(th.within_ns)}, last: {self._describe(ev)}"
                )
                self._raise(rule, ev, hit, msg)
            return
        msg = self._message(rule, ev)
        dkey = (rule.id, ev.pid, msg)
        if dkey in self._dedup:
            return
        if len(self._dedup) >= MAX_DEDUP:
            self._dedup.clear()
        self._dedup.add(dkey)
        self._raised_now.append(rule.id)
        self._raise(rule, ev, [ev.seq], msg)

    # -- messages ----------------------------------------------------------------------
    def _describe(self, ev: Event, fx: FieldContext | None = None) -> str:
        fx = fx or self.fx
        fx.ev = ev
        return describe(ev, fx.domain() if ev.type.startswith("net.") else None)

    def message(self, rule: Rule, ev: Event, fx: FieldContext | None = None) -> str:
        return self._message(rule, ev, fx)

    def _message(self, rule: Rule, ev: Event, fx: FieldContext | None = None) -> str:
        if not rule.message:
            return f"{rule.title}: {self._describe(ev, fx)}"

        def sub(m: re.Match[str]) -> str:
            v = self._value(m.group(1), ev, fx)
            if isinstance(v, list):
                return " ".join(str(x) for x in v)
            if m.group(2) is not None and (v is None or v == ""):
                return str(m.group(2))
            return "?" if v is None else str(v)

        return _TEMPLATE.sub(sub, rule.message)

    def _sequence_message(self, rule: Rule, seqs: list[int], last: Event) -> str:
        if rule.message:
            return self._message(rule, last)
        return f"{rule.title}: ... {self._describe(last)} (events {', '.join(map(str, seqs[:6]))}" + (
            ", ...)" if len(seqs) > 6 else ")"
        )

    # -- alerts ------------------------------------------------------------------------
    def _raise(self, rule: Rule, ev: Event, seqs: list[int], message: str) -> None:
        self.record(self.build_alert(rule, ev, seqs, message, self.fx))

    def build_alert(self, rule: Rule, ev: Event, seqs: list[int], message: str, fx: FieldContext) -> Alert:
        assert self.ctx is not None
        fx.ev = ev
        labels = self.ctx.tool_calls
        lineage = [
            LineageEntry(pid=p.pid, exe=p.exe, argv=list(p.argv) if p.argv else None, cwd=p.cwd,
                         tool_call=labels.get(p.pid))
            for p in reversed(fx.procs.lineage(ev.pid))
        ]
        argv = fx.argv()
        return Alert(
            ts=ev.ts,
            rule_id=rule.id,
            title=rule.title,
            level=rule.level,
            action=rule.action,
            message=message,
            event_seqs=seqs,
            pid=ev.pid,
            exe=fx.exe(),
            argv=list(argv) if argv else None,
            cwd=fx.cwd(),
            lineage=lineage,
            tags=list(rule.tags),
        )

    def record(self, alert: Alert) -> None:
        """The alert joins the run (store, printer, enforcer …); a kill rule stops the agent."""
        assert self.ctx is not None
        self.alerts.append(alert)
        self.ctx.raise_alert(alert)
        if alert.action == "kill":
            self.enforce(alert.rule_id)

    def enforce(self, rule_id: str) -> None:
        """A kill rule fired: in enforce mode the agent is stopped (once)."""
        if self.mode == "enforce" and self.stopped_by is None:
            self.stopped_by = rule_id
            if self.ctx is not None and self.ctx.stop_agent is not None:
                self.ctx.stop_agent(rule_id)


def command_of(alert: Alert) -> str:
    return short_command(alert.argv, alert.exe)
