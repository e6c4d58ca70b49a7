"""The attack corpus under the real strace backend: every attack raises an alert at the
level it deserves, every benign twin stays below medium.

One module-wide play of all scenarios (parallel, bounded); each scenario is a
test of its own so a miss names itself.  Loopback only.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.attacks import corpus
from tests.attacks.scenarios import SCENARIOS, Scenario

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed"),
]

_RESULTS: dict[tuple[str, str], corpus.Result] = {}


@pytest.fixture(scope="module")
def results() -> Iterator[dict[tuple[str, str], corpus.Result]]:
    if not _RESULTS:
        for r in corpus.play(SCENARIOS, workers=3):
            _RESULTS[(r.scenario.id, r.variant)] = r
    yield _RESULTS


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
