"""A checked rule set compiles each event type at its first event (or when warmed): same alerts."""

from __future__ import annotations

from pathlib import Path

from spyglass.events import Event
from spyglass.pipeline import RunContext
from spyglass.policy import Policy
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import load_ruleset

HOME = "/home/u"
WS = "/work/task"


def _events() -> list[Event]:
    return [
        Event(type="process.start", pid=10, ppid=1, ts=1, seq=1),
        Event(type="process.exec", pid=10, ts=2, seq=2, exe="/usr/bin/curl", argv=["curl", "http://x.example"],
              ok=True),
        Event(type="file.read", pid=10, ts=3, seq=3, path=f"{HOME}/.ssh/id_rsa", ok=True),
        Event(type="file.write", pid=10, ts=4, seq=4, path=f"{WS}/.git/hooks/pre-commit", ok=True),
        Event(type="file.write", pid=10, ts=5, seq=5, path=f"{HOME}/.bashrc", ok=True),
        Event(type="net.connect", pid=10, ts=6, seq=6, address="203.0.113.9", port=443, ok=True),
        Event(type="process.exit", pid=10, ts=7, seq=7, exit_code=0),
    ]


def _alerts(engine: RuleEngine, warm: bool | None = None) -> list[tuple[str, int]]:
    engine.start(RunContext(root_cwd=WS, workspace=[WS], home=HOME))
    if warm is not None:
        engine.warm(lambda: warm)
    for ev in _events():
        engine.event(ev)
    return sorted((a.rule_id, a.pid) for a in engine.alerts)


def test_lazy_and_warmed_engines_raise_what_the_eager_one_raises() -> None:
    pol = Policy.default(WS)
    rs = load_ruleset(pol)
    eager = RuleEngine(rs, pol, home=HOME)
    eager._eager = True  # every type compiled at start, as on a cache miss
    expected = _alerts(eager)
    assert expected  # the events do raise alerts
    lazy = RuleEngine(rs, pol, home=HOME, validated=True)
    assert _alerts(lazy) == expected
    assert lazy.compiled is not None and lazy.compiled.build is not None
    assert "process.exec" in lazy.compiled.source and "net.bind" not in lazy.compiled.source
    for warm in (False, True):
        warmed = RuleEngine(rs, pol, home=HOME, validated=True)
        assert _alerts(warmed, warm) == expected
        assert warmed.compiled is not None
        assert "file.read" in warmed.compiled.source  # compiled before any event
        assert ("agent.memory_change" in warmed.compiled.source) is warm or "agent.memory_change" not in (
            warmed.compiled.types)


def test_a_checked_set_compiles_its_regular_expressions_at_their_first_use(tmp_path: Path) -> None:
    """A set the rule cache saw compile (``validated``) leaves each expression of its rules
    uncompiled until an event reaches it; the alerts are those of the checked (eager) set."""
    from spyglass.policy.paths import LazyPattern
    from spyglass.rules.ruleset import parse_files

    f = tmp_path / "rules.yaml"
    f.write_text("""\
id: shell-fetch
title: A shell that fetches
level: low
detection:
  e:
    type: process.exec
    process.name: sh
    process.command_line|re: ['curl\\s+http', 'wget\\s+-q']
    process.command_line|contains: [example, invalid]
""")
    rs, errors = parse_files([f], pack=False)
    assert not errors, errors
    evs = [Event(type="process.start", pid=1, ts=1, seq=1),
           Event(type="process.exec", pid=1, ts=2, seq=2, exe="/bin/ls", argv=["ls", "curl http://x.example"]),
           Event(type="process.exec", pid=1, ts=3, seq=3, exe="/bin/sh", argv=["sh", "-c", "curl  http://x.example"]),
           Event(type="process.exec", pid=1, ts=4, seq=4, exe="/bin/sh", argv=["sh", "-c", "wget -q x.invalid"]),
           Event(type="process.exec", pid=1, ts=5, seq=5, exe="/bin/sh", argv=["sh", "-c", "curl http://ok.org"])]

    def run(engine: RuleEngine, upto: int) -> list[int]:
        engine.start(RunContext(root_cwd=WS, workspace=[WS], home=HOME))
        for ev in evs[:upto]:
            engine.event(ev)
        return [a.event_seqs[0] for a in engine.alerts]

    eager = RuleEngine(rs, Policy.default(WS), home=HOME)
    assert run(eager, len(evs)) == [3, 4]
    lazy = RuleEngine(rs, Policy.default(WS), home=HOME, validated=True)
    assert run(lazy, 2) == []  # /bin/ls: the cheaper image test ruled it out
    assert lazy.compiled is not None and "process.exec" in lazy.compiled.source
    fn = lazy._dispatch["process.exec"]
    assert fn is not None
    pending = [v for v in fn.__globals__.values() if isinstance(v, LazyPattern)]
    assert pending and all(p.search == p._search for p in pending)  # none compiled yet
    lazy = RuleEngine(rs, Policy.default(WS), home=HOME, validated=True)
    assert run(lazy, len(evs)) == [3, 4]
