"""What operator monitoring adds to a run: the agent's identity, the permission and
memory watch, and (when an endpoint is set) the live OpenTelemetry export.

The session's feature-sink factory ``_monitoring`` (``spyglass/session/sinks.py``)
calls :func:`monitoring` once; the session sets the run's ``agent_id`` and
``extra["agent_identity"]`` from it, and the sinks come after the built-in ones
(the export after the watch, so that it sees the events the watch adds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from spyglass.agents.identity import AgentIdentity, derive_identity


class Monitoring(msgspec.Struct):
    """The run's live monitoring: the agent's identity, the sinks that export, the target."""

    identity: AgentIdentity
    sinks: list[object] = msgspec.field(default_factory=list)
    target: Any = None  # OtlpTarget or None


def monitoring(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    home: str,
    workspace: Sequence[str],
    policy: Any,
    agent_id: str | None = None,
    agent_kind: str | None = None,
    otlp: str | None = None,
    otlp_protocol: str | None = None,
    quiet: bool = False,
    watch_config: bool = True,
) -> Monitoring:
    """Identity and sinks for one run; raises UsageError for a bad endpoint before the run starts."""
    identity = derive_identity(
        argv, cwd=cwd, env=env, kind=agent_kind, explicit=agent_id, policy_id=getattr(policy, "agent_id", None)
    )
    out = Monitoring(identity)
    if watch_config:
        from spyglass.agents.config_watch import ConfigWatch

        out.sinks.append(ConfigWatch([*workspace, cwd], home, dict(env)))
    pol_otlp = getattr(policy, "otlp", None)
    if not (otlp or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or getattr(pol_otlp, "endpoint", None)):
        return out  # no endpoint anywhere: resolve_target would say None (the export's code stays unloaded)
    from spyglass.otel.config import resolve_target

    target = resolve_target(url=otlp, protocol=otlp_protocol, env=env, policy=pol_otlp)
    if target is not None:
        from spyglass.otel.sink import OtlpSink

        out.target = target
        out.sinks.append(OtlpSink(target, quiet=quiet))
    return out
