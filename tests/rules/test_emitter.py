"""The generated rule code's glob gate: one test of a path against every glob of a function's
glob tests, before any of them runs (spyglass/rules/emitter.py, ``Emitter.glob_gate``).

A path no glob names (an untar's new files) then costs one matcher run per event instead of
one per test.  The gate may only ever skip tests that would have failed: the whole pack over
a random stream raises the same alerts with and without gates, with the per-path memo and
without it; and a test written after its gate was made is refused, not left uncovered.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from spyglass.policy.paths import GlobMatcher
from spyglass.rules import modifiers
from spyglass.rules.emitter import Emitter, Shared
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import load_ruleset
from tests.rules.test_engine import HOME, _alerts, stream


def _pack_functions(rs: Any) -> dict[str, str]:
    engine = RuleEngine(rs, home=HOME)
    assert engine.compiled is not None
    return engine.compiled.source


def test_the_pack_raises_the_same_alerts_with_and_without_gates(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = load_ruleset()
    for seed in (4, 5):
        events = stream(4000, seed)
        gated = _alerts(events, rs)
        gated_slow = _alerts(events, rs, per_path=False)
        with monkeypatch.context() as m:
            m.setattr(modifiers, "GATED", frozenset())
            plain = _alerts(events, rs)
        assert gated == plain == gated_slow
        assert len({a["rule_id"] for a in plain}) >= 25  # the stream reaches most of the pack


def test_the_file_types_of_the_pack_are_gated() -> None:
    source = _pack_functions(load_ruleset())
    create = source["file.create"]
    gates = set(re.findall(r"\((v\d+) if \1 is not _U else \(\1 := (_k\d+)\.fullmatch\(ev\.path\) is not None\)\)",
                           create))
    assert len(gates) == 1  # one gate for the path's glob tests, fetched once per event
    tests = re.findall(r"and (_k\d+)\.fullmatch\(ev\.path\) is not None\)", create)
    assert len(tests) >= 5  # each of them after it
    assert "\x00" not in "".join(source.values())  # no mark left in any function


def _emitter() -> Emitter:
    return Emitter("file.create", {}, {}, HOME, Shared({}))


def test_the_gate_is_the_union_of_the_globs_and_one_test_has_none() -> None:
    em = _emitter()
    one = em.glob_gate("ev.path", ["**/.git/hooks/*"], True)
    em.glob_gate("ev.path", ["~/.ssh/*", "/etc/cron.d/*"], True)
    text = em.gated(f"x and {one}")
    name = re.search(r"(_k\d+)\.fullmatch", text)
    assert name is not None
    union = em.shared.ns[name.group(1)]
    assert isinstance(union, GlobMatcher)
    for path, hit in [(f"{HOME}/project/.git/hooks/pre-commit", True), (f"{HOME}/.ssh/id_rsa", True),
                      ("/etc/cron.d/job", True), (f"{HOME}/project/src/a.py", None), ("/etc/passwd", None)]:
        assert union.fullmatch(path) is hit, path
    lone = _emitter()
    mark = lone.glob_gate("ev.target", ["/tmp/*"], True)
    assert lone.gated(f"({mark} and y)") == "(True and y)"  # one test: no gate


def test_a_glob_test_written_after_its_gate_is_refused() -> None:
    em = _emitter()
    first = em.glob_gate("ev.path", ["/a/*"], True)
    em.glob_gate("ev.path", ["/b/*"], True)
    em.gated(first)
    em.glob_gate("ev.path", ["/c/*"], True)  # the gate made above does not cover /c
    with pytest.raises(AssertionError, match="after its gate"):
        em.gated(first)
