"""The per-path decisions of the rule engine: remembered, bounded, and never wrong.

A path decided while the run held no copy of a secret is decided again once it
does; a full memo forgets its older half and decides those paths again; the
alerts are always those of the engine without the memo (``per_path=False``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from spyglass.events import Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.policy import Policy
from spyglass.rules import context, pathmemo
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import load_ruleset
from spyglass.rules.runstate import RunState

HOME = "/home/u"
WS = "/work/task"


def _alerts(events: list[Event], per_path: bool = True) -> list[tuple[str, int, str]]:
    pol = Policy.default(WS)
    engine = RuleEngine(load_ruleset(pol), pol, home=HOME, validated=True, per_path=per_path)
    pipe = Pipeline([engine], RunContext(root_cwd=WS, workspace=[WS], home=HOME))
    pipe.start()
    for ev in events:
        pipe.feed(ev, renumber=False)
    return sorted((a.rule_id, a.pid, a.message) for a in engine.alerts)


def _run(seq: list[dict[str, Any]]) -> list[Event]:
    return [Event(seq=i + 1, ts=1000 * (i + 1), **kw) for i, kw in enumerate(seq)]


def _proc(pid: int, exe: str, *argv: str) -> list[dict[str, Any]]:
    return [dict(type="process.start", pid=pid, ppid=1),
            dict(type="process.exec", pid=pid, exe=exe, argv=[exe.rsplit("/", 1)[-1], *argv], cwd=WS)]


def test_a_path_decided_before_a_secret_was_copied_to_it_alerts_after() -> None:
    out = f"{WS}/out/notes.txt"
    events = _run([
        dict(type="process.start", pid=10, cwd=WS),
        *_proc(11, "/usr/bin/cat", out),
        dict(type="file.read", pid=11, path=out, flags="O_RDONLY"),  # decided: no secret, no copy yet
        dict(type="process.exit", pid=11, exit_code=0),
        *_proc(12, "/usr/bin/python3", "x.py"),
        dict(type="file.read", pid=12, path=f"{HOME}/.ssh/id_rsa", flags="O_RDONLY"),
        dict(type="file.write", pid=12, path=out, flags="O_WRONLY|O_CREAT|O_TRUNC"),  # a copy of the key
        dict(type="process.exit", pid=12, exit_code=0),
        *_proc(13, "/usr/bin/cat", out),
        dict(type="file.read", pid=13, path=out, flags="O_RDONLY"),  # the same path: now a secret's copy
        dict(type="process.exit", pid=13, exit_code=0),
    ])
    got = _alerts(events)
    assert got == _alerts(events, per_path=False)
    assert [a for a in got if a[0] == "cred-secret-read" and a[1] == 13 and out in a[2]]
    assert not [a for a in got if a[1] == 11]


def test_a_path_is_decided_at_its_second_sight_and_a_full_memo_forgets_its_older_half() -> None:
    calls: list[str] = []

    def prefilter(ev: Event, fx: Any) -> tuple[bool | None, ...]:
        calls.append(ev.path or "")
        return (ev.path == "/x/secret", None)

    def specialized(cands: tuple[int, ...]) -> Any:
        return (lambda ev, fx, c=cands: c) if cands else None

    fn, _, _ = pathmemo.path_dispatch(prefilter, (0, 1), specialized, with_target=False)
    fx: Any = SimpleNamespace(state=RunState())

    def see(path: str) -> tuple[int, ...]:
        got: tuple[int, ...] = fn(Event(type="file.read", path=path), fx)
        return got

    assert see("/x/once") == (0, 1) and calls == []  # first sight: every matcher, no decision
    assert see("/x/secret") == (0, 1) and see("/x/secret") == (0, 1) and calls == ["/x/secret"]
    cap = pathmemo.MEMO_MAX
    paths = [f"/x/f{i}" for i in range(cap + cap // 2)]
    for p in paths:
        assert see(p) == (0, 1)
        assert see(p) == (1,)  # decided: only the second matcher can match
    assert len(calls) == len(paths) + 1
    calls.clear()
    assert see("/x/secret") == (0, 1)  # forgotten: seen again first, decided at the next sight
    assert see("/x/secret") == (0, 1) and calls == ["/x/secret"]
    calls.clear()
    assert see(paths[-1]) == (1,)  # a recent one is still decided
    assert calls == []


def test_the_engine_with_small_caches_raises_what_it_raises_without_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pathmemo, "MEMO_MAX", 16)
    monkeypatch.setattr(context, "SECRET_CACHE_MAX", 16)
    seq: list[dict[str, Any]] = [dict(type="process.start", pid=10, cwd=WS)]
    for k in range(6):
        pid = 100 + k
        seq += _proc(pid, "/usr/bin/python3", "tool.py")
        seq += [dict(type="file.read", pid=pid, path=f"{WS}/src/m{k}_{i}.py", flags="O_RDONLY") for i in range(40)]
        seq += [dict(type="file.create", pid=pid, path=f"/tmp/t{k}_{i}.json", flags="O_WRONLY|O_CREAT")
                for i in range(20)]
        seq.append(dict(type="file.read", pid=pid, path=f"{HOME}/.aws/credentials", flags="O_RDONLY"))
        seq.append(dict(type="process.exit", pid=pid, exit_code=0))
    events = _run(seq)
    got = _alerts(events)
    assert got == _alerts(events, per_path=False)
    assert {a[1] for a in got if a[0] == "cred-secret-read"} == {100 + k for k in range(6)}


def test_the_secret_cache_stays_under_its_cap_and_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "SECRET_CACHE_MAX", 32)
    pol = Policy.default(WS)
    engine = RuleEngine(load_ruleset(pol), pol, home=HOME, validated=True)
    engine.start(RunContext(root_cwd=WS, workspace=[WS], home=HOME))
    fx = engine.fx
    for i in range(200):
        assert fx.is_secret(f"{WS}/f{i}.py") is False
        assert fx.is_secret(f"{HOME}/.ssh/id_rsa{i}") is True
        assert len(fx._secret_cache) <= 32
    assert fx.is_secret(f"{HOME}/.ssh/id_rsa0") is True and fx.is_secret(f"{WS}/f0.py") is False


def test_a_secret_path_seen_once_among_many_new_paths_alerts() -> None:
    seq: list[dict[str, Any]] = [dict(type="process.start", pid=10, cwd=WS), *_proc(20, "/usr/bin/python3", "t.py")]
    seq += [dict(type="file.create", pid=20, path=f"/tmp/tmp{i:06x}.json", flags="O_WRONLY|O_CREAT|O_EXCL")
            for i in range(300)]
    seq.append(dict(type="file.read", pid=20, path=f"{HOME}/.ssh/id_ed25519_deploy", flags="O_RDONLY"))
    seq += [dict(type="file.delete", pid=20, path=f"/tmp/tmp{i:06x}.json") for i in range(300)]
    events = _run(seq)
    got = _alerts(events)
    assert got == _alerts(events, per_path=False)
    assert [a for a in got if a[0] == "cred-secret-read" and "id_ed25519_deploy" in a[2]]
