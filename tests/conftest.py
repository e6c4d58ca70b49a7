"""Shared test helpers: an isolated store and in-process CLI invocation."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def spy(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Call the CLI in-process: ``spy("show", "latest", "--format", "json")``.

    The store is a fresh temporary directory (SPYGLASS_STORE).  Returns click's
    Result (``.exit_code``, ``.stdout``, ``.stderr``, ``.output``).
    """
    from spyglass.cli.main import _load_commands, cli

    _load_commands()
    monkeypatch.setenv("SPYGLASS_STORE", str(store_dir))

    def invoke(*args: str, input: str | None = None) -> Result:
        runner = CliRunner()
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False)

    yield invoke


@pytest.fixture(autouse=True)
def _no_sink_raised(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test in which a pipeline sink raised (the pipeline logs and counts such
    failures and goes on; a test must not pass over one).  A test about sink failures
    says so with ``@pytest.mark.sink_errors``."""
    from spyglass.pipeline import ERROR_LOG

    ERROR_LOG.clear()
    yield
    failures = list(ERROR_LOG)
    ERROR_LOG.clear()
    if failures and request.node.get_closest_marker("sink_errors") is None:
        pytest.fail("a pipeline sink raised: " + "; ".join(f"{name} on {what}" for name, what in failures[:5]))


@pytest.fixture(autouse=True)
def _private_state_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the user's policy or writes to the user's default store: the XDG
    config and state directories are fresh empty ones (subprocesses inherit them)."""
    base = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.delenv("SPYGLASS_POLICY", raising=False)
