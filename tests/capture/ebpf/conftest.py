"""Fixtures for the eBPF backend tests (helpers live in ebpf_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ebpf_helpers import ebpf_skip_reason


@pytest.fixture
def need_ebpf() -> None:
    """Skip (with the reason) unless the real program loads here."""
    why = ebpf_skip_reason()
    if why is not None:
        pytest.skip(why)
