"""Fixtures for the sandbox tests (helpers live in sandbox_helpers.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sandbox_helpers import CANARY, Collector, Servers, start_servers

from spyglass.sandbox.decoy import canary_patterns
from spyglass.sandbox.egress import EgressPolicy
from spyglass.sandbox.proxy import EgressProxy, static_resolver


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = start_servers(tmp_path_factory.mktemp("servers"))
    yield s
    s.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory for unix sockets (their paths are limited to 108 bytes)."""
    d = tempfile.mkdtemp(prefix="sg-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def proxy(servers: Servers, short_dir: Path) -> Iterator[tuple[EgressProxy, Collector]]:
    """A running egress proxy that allows allowed.test (and loopback addresses), denies denied.test."""
    col = Collector()
    p = EgressProxy(
        str(short_dir / "proxy.sock"),
        EgressPolicy(["allowed.test", "127.0.0.0/8"], ["denied.test"], allow_host_loopback=True),
        canary_patterns=canary_patterns(CANARY),
        sink=col,
        resolver=static_resolver(servers.resolve_table()),
        head_timeout=2.0,
    )
    p.start()
    yield p, col
    p.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace that is a git checkout (``git init``, one file)."""
    d = tmp_path / "ws"
    d.mkdir()
    subprocess.run(["git", "init", "-q", str(d)], check=True)
    (d / "README").write_text("hello\n")
    return d
