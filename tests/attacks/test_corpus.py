"""The attack corpus under each real capture backend (strace, eBPF): every attack raises an
alert at the level it deserves, every benign twin stays below medium.

One play of all scenarios per backend (parallel, bounded); each scenario is a
test of its own so a miss names itself.  Loopback only.
"""

from __future__ import annotations

import shutil

import pytest

from tests.attacks import corpus
from tests.attacks.scenarios import SCENARIOS, Scenario

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed"),
]

_RESULTS: dict[str, dict[tuple[str, str], corpus.Result]] = {}


@pytest.fixture
def results(capture_backend: str) -> dict[tuple[str, str], corpus.Result]:
    """The whole corpus played once per backend (the first test of that backend plays it)."""
    if capture_backend not in _RESULTS:
        _RESULTS[capture_backend] = {
            (r.scenario.id, r.variant): r for r in corpus.play(SCENARIOS, workers=3, backend=capture_backend)
        }
    return _RESULTS[capture_backend]


def test_the_corpus_is_large_and_paired() -> None:
    assert len(SCENARIOS) >= 60
    assert all(s.attack.strip() and s.benign.strip() for s in SCENARIOS)
    assert len({s.cls for s in SCENARIOS}) >= 10


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_attack_is_caught_at_its_level(results: dict[tuple[str, str], corpus.Result], sc: Scenario) -> None:
    r = results[(sc.id, "attack")]
    assert r.exit_code in (0, 6, 7), r.stderr[-2000:]
    got = r.max_level
    assert corpus.rank(got) >= corpus.rank(sc.expect), (
        f"{sc.id}: wanted {sc.expect}, got {got}: {[(a['level'], a['rule_id']) for a in r.alerts]}"
    )


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_benign_twin_is_quiet(results: dict[tuple[str, str], corpus.Result], sc: Scenario) -> None:
    r = results[(sc.id, "benign")]
    assert r.exit_code == 0, r.stderr[-2000:]
    assert r.loud("medium") == []
