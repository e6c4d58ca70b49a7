"""Where telemetry goes: an OTLP endpoint (HTTP/protobuf or gRPC) or an OTLP/JSON file.

For ``spyglass run`` the endpoint comes from ``--otlp URL``, else the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` (with ``OTEL_EXPORTER_OTLP_HEADERS`` and
``OTEL_EXPORTER_OTLP_PROTOCOL``), else the policy's ``otlp`` section; without
any of them nothing is exported and the SDK is never imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import msgspec

from spyglass.errors import UsageError

PROTOCOLS: Final = ("http/protobuf", "grpc")
DEFAULT_TIMEOUT: Final = 5.0


class OtlpTarget(msgspec.Struct, frozen=True):
    """Where and how the OpenTelemetry export goes."""

    endpoint: str | None = None  # base URL: http://host:4318 (http/protobuf) or http://host:4317 (grpc)
    protocol: str = "http/protobuf"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT  # seconds per export request
    file: Path | None = None  # OTLP/JSON lines instead of a network endpoint
    source: str = "option"  # where the endpoint came from: option, environment, policy

    def describe(self) -> str:
        if self.file is not None:
            return str(self.file)
        return f"{self.endpoint} ({self.protocol})"

    def to_json(self) -> dict[str, Any]:
        # headers may hold credentials: only their names are kept
        return {
            "endpoint": self.endpoint,
            "protocol": self.protocol,
            "file": str(self.file) if self.file else None,
            "headers": sorted(self.headers),
            "source": self.source,
        }


def parse_headers(text: str, what: str = "OTEL_EXPORTER_OTLP_HEADERS") -> dict[str, str]:
    """``k1=v1,k2=v2`` (values percent-decoded, as the OTLP exporter spec says)."""
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what}: {part.strip()!r} is not NAME=VALUE")
        out[unquote(key.strip())] = unquote(value.strip())
    return out


def check_endpoint(url: str, protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown OTLP protocol {protocol!r}", hint=f"one of {', '.join(PROTOCOLS)}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"OTLP endpoint {url!r} is not an http(s) URL",
            hint="e.g. http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc)",
        )
    return url


def resolve_target(
    *,
    url: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    policy: Any = None,
) -> OtlpTarget | None:
    """The live export target of a run, or None when export is off."""
    env = os.environ if env is None else env
    pol_endpoint = getattr(policy, "endpoint", None) if policy is not None else None
    env_endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
    if url:
        endpoint, source = url, "option"
    elif env_endpoint:
        endpoint, source = env_endpoint, "environment"
    elif pol_endpoint:
        endpoint, source = pol_endpoint, "policy"
    else:
        return None
    proto = (
        protocol
        or (env.get("OTEL_EXPORTER_OTLP_PROTOCOL") if source != "policy" else None)
        or getattr(policy, "protocol", None)
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    merged: dict[str, str] = dict(getattr(policy, "headers", None) or {})
    if env.get("OTEL_EXPORTER_OTLP_HEADERS"):
        merged.update(parse_headers(env["OTEL_EXPORTER_OTLP_HEADERS"]))
    merged.update(headers or {})
    timeout = getattr(policy, "timeout", None) or DEFAULT_TIMEOUT
    return OtlpTarget(check_endpoint(endpoint, proto), proto, merged, float(timeout), None, source)
