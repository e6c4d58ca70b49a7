"""The manifest walk's hashing threads (spyglass/evidence/hashers.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from spyglass.evidence.hashers import Hashers
from tests.conftest import REPO


def _slow_square(x: int) -> int:
    time.sleep(0.001 * (x % 3))  # out of order on purpose
    return x * x


def test_results_come_in_hand_over_order_and_the_threads_end() -> None:
    before = set(threading.enumerate())
    pool: Hashers[int] = Hashers(4, _slow_square)
    for i in range(50):
        assert pool.submit(i) == i
    assert pool.results() == [i * i for i in range(50)]
    assert set(threading.enumerate()) == before


def test_a_call_that_raised_raises_from_results_after_every_thread_ended() -> None:
    def fn(x: int) -> int:
        if x == 7:
            raise ValueError("seven")
        return x

    before = set(threading.enumerate())
    pool: Hashers[int] = Hashers(3, fn)
    for i in range(20):
        pool.submit(i)
    with pytest.raises(ValueError, match="seven"):
        pool.results()
    assert set(threading.enumerate()) == before


def test_no_results_asked_for_nothing_handed_over() -> None:
    pool: Hashers[int] = Hashers(2, _slow_square)
    assert pool.results() == []


def test_the_threads_load_no_module_a_run_has_not_loaded_before_its_agent_starts() -> None:
    """The after-walk runs once the agent has ended: a module first imported then could come from
    byte-code the agent forged (docs/threat-model.md).  ``threading`` is loaded by every run."""
    code = ("import sys, spyglass.evidence.hashers as h\n"
            "before = set(sys.modules)\n"
            "pool = h.Hashers(4, len)\n"
            "[pool.submit(b'x' * i) for i in range(100)]\n"
            "assert pool.results() == list(range(100))\n"
            "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
