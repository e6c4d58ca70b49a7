"""Fixtures for evidence tests (helpers live in evidence_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from evidence_helpers import MakeRun, record_events

from spyglass.store import RunReader, Store


@pytest.fixture
def make_run(tmp_path: Path) -> MakeRun:
    """Record a run from events into a fresh store; returns its RunReader."""
    store = Store(tmp_path / "store", create=True)

    def make(events: Any, alerts: Any = (), **kw: Any) -> RunReader:
        return record_events(store, events, alerts, **kw)

    return make
