"""Where the export goes: --otlp, the OTEL_EXPORTER_OTLP_* variables, the policy; and when export is off."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spyglass.errors import UsageError
from spyglass.otel.config import parse_headers, resolve_target
from spyglass.policy.model import OtlpPolicy
from spyglass.store import RunReader, Store


def test_precedence_option_environment_policy() -> None:
    pol = OtlpPolicy(endpoint="http://127.0.0.1:1", protocol="grpc", headers={"x-team": "a"}, timeout=2)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:2",
        "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret, x-team=b",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    t = resolve_target(url="http://127.0.0.1:3", env=env, policy=pol)
    assert t is not None and t.endpoint == "http://127.0.0.1:3" and t.source == "option"
    assert t.headers == {"x-team": "b", "api-key": "s=cret"} and t.timeout == 2
    t = resolve_target(env=env, policy=pol)
    assert t is not None
    assert (t.endpoint, t.protocol, t.source) == ("http://127.0.0.1:2", "http/protobuf", "environment")
    t = resolve_target(env={}, policy=pol)
    assert t is not None and (t.endpoint, t.protocol, t.source) == ("http://127.0.0.1:1", "grpc", "policy")
    assert resolve_target(env={}, policy=OtlpPolicy()) is None
    assert t.to_json()["headers"] == ["x-team"]  # names only: values may be credentials


def test_bad_values_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="not NAME=VALUE"):
        parse_headers("novalue")
    with pytest.raises(UsageError, match="unknown OTLP protocol"):
        resolve_target(url="http://127.0.0.1:1", protocol="udp", env={})
    with pytest.raises(UsageError, match="not an http"):
        resolve_target(url="127.0.0.1:4317", env={})


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_run_without_export_never_imports_the_sdk(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from spyglass.cli.main import main\n"
        "try:\n    main(['run', '-q', '--', 'true'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'grpc', 'google.protobuf'))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={**env, "SPYGLASS_STORE": str(tmp_path / "s")},
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_stalled_collector_from_the_policy_costs_the_run_nothing_but_the_bounded_wait(
    spy: Callable[..., Any], store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a collector that accepts connections and never answers
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(64)
    port = stalled.getsockname()[1]
    try:
        (tmp_path / "spyglass.yaml").write_text(
            f"otlp:\n  endpoint: http://127.0.0.1:{port}\n  timeout: 1\n  headers:\n    api-key: secret\n"
        )
        monkeypatch.chdir(tmp_path)
        # a workspace policy is used only when named (the agent could write it)
        res = spy("run", "--policy", str(tmp_path / "spyglass.yaml"), "--", "sh", "-c", "echo hi > out.txt; exit 4")
        assert res.exit_code == 4  # the agent's own exit code, untouched
        st = Store(store_dir)
        meta = RunReader(st, st.resolve("latest")).meta
        assert meta.status == "complete" and (tmp_path / "out.txt").read_text() == "hi\n"
        otlp = meta.extra["otlp"]
        assert otlp["source"] == "policy" and otlp["complete"] is False and otlp["headers"] == ["api-key"]
        assert otlp["logs"]["sent"] == 0 and otlp["logs"]["unsent"] == meta.counts["events"]
        assert "not sent" in res.stderr
        assert b"secret" not in (Path(st.run_dir(meta.id)) / "run.json").read_bytes()
    finally:
        stalled.close()
