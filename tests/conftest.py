"""Shared test helpers: an isolated store and in-process CLI invocation."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
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


#: ``python -c CODE [ARGS...]`` in a fresh process (:func:`fresh_python`)
FreshPython = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def fresh_python(tmp_path: Path) -> FreshPython:
    """Run ``python -c CODE [ARGS...]`` in a fresh process whose store, configuration and cache are
    its own under ``tmp_path`` (and no ``SPYGLASS_POLICY``): ``fresh_python(code, *args, cwd=DIR)``
    (``cwd`` defaults to ``tmp_path``) gives the completed process, output captured."""
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "store"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("SPYGLASS_POLICY", None)

    def run(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd or tmp_path, env=env, capture_output=True,
                              text=True, timeout=180, check=False)

    return run


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


# --- capture backends: attack tests that concern capture run under each -----------------------

#: the live capture backends an attack test is played under (``@pytest.mark.backends(...)`` narrows it)
BACKENDS = ("strace", "ebpf")
_SKIP: dict[str, str | None] = {}


def backend_skip_reason(name: str) -> str | None:
    """Why backend ``name`` cannot record here (None: it can); checked once per session."""
    if name not in _SKIP:
        import shutil

        if name == "strace":
            _SKIP[name] = None if shutil.which("strace") else "strace not installed"
        elif name == "ebpf":
            from spyglass.capture.ebpf import probe

            found = probe.static_problem()
            if found is not None:
                _SKIP[name] = f"eBPF backend unavailable: {found[0]}"
            else:
                ok, why = probe.try_load()
                _SKIP[name] = None if ok else f"eBPF program refused: {why}"
        else:
            _SKIP[name] = None
    return _SKIP[name]


@pytest.fixture
def needs_ebpf() -> None:
    """Skips the test, with the reason, where the eBPF program cannot run here (a module that
    needs it says ``pytestmark = pytest.mark.usefixtures("needs_ebpf")``)."""
    why = backend_skip_reason("ebpf")
    if why is not None:
        pytest.skip(why)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "capture_backend" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("backends")
        names = marker.args if marker is not None and marker.args else BACKENDS
        metafunc.parametrize("capture_backend", names, indirect=True)


@pytest.fixture
def capture_backend(request: pytest.FixtureRequest) -> str:
    """The backend this test is played under (one test per backend, skipped with the reason
    where the backend cannot run)."""
    name = str(request.param)
    why = backend_skip_reason(name)
    if why is not None:
        pytest.skip(why)
    return name
