"""``monitoring``: the live export is on exactly when an endpoint is named (option, environment
or policy), and a run without one does not load the export's configuration code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

from spyglass.otel.wiring import monitoring
from spyglass.policy.model import OtlpPolicy, Policy

URL = "http://127.0.0.1:4318"  # loopback: nothing is sent (the sinks are built, never started)


def _target(tmp_path: Path, env: dict[str, str], policy: Policy, otlp: str | None = None) -> tuple[str, str] | None:
    mon = monitoring(["true"], cwd=str(tmp_path), env=env, home=str(tmp_path), workspace=[], policy=policy,
                     otlp=otlp, quiet=True, watch_config=False)
    if mon.target is None:
        assert mon.sinks == []
        return None
    assert len(mon.sinks) == 1
    return str(mon.target.endpoint), mon.target.source


def test_each_place_an_endpoint_is_named_turns_the_export_on(tmp_path: Path) -> None:
    plain = Policy.default(tmp_path)
    with_endpoint = msgspec.structs.replace(plain, otlp=OtlpPolicy(endpoint=URL))
    assert _target(tmp_path, {}, plain) is None
    assert _target(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, plain) is None
    assert _target(tmp_path, {}, plain, otlp=URL) == (URL, "option")
    assert _target(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": URL}, plain) == (URL, "environment")
    assert _target(tmp_path, {}, with_endpoint) == (URL, "policy")


def test_no_endpoint_loads_no_export_configuration(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from spyglass.otel.wiring import monitoring\n"
        "from spyglass.policy.model import Policy\n"
        f"monitoring(['true'], cwd={str(tmp_path)!r}, env={{}}, home={str(tmp_path)!r}, workspace=[],"
        f" policy=Policy.default({str(tmp_path)!r}), watch_config=False)\n"
        "print('spyglass.otel.config' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
