"""run.json: the metadata of one run."""

from __future__ import annotations

from typing import Any

import msgspec

from spyglass.events import SCHEMA_VERSION

STATUSES = ("running", "complete", "incomplete", "interrupted", "monitor-lost", "failed", "evidence-incomplete")


class RunMeta(msgspec.Struct, omit_defaults=False, kw_only=True):
    id: str
    schema_version: str = SCHEMA_VERSION
    spyglass_version: str = ""
    task: str | None = None
    agent_id: str | None = None
    command: list[str] = msgspec.field(default_factory=list)
    cwd: str = ""
    workspace: list[str] = msgspec.field(default_factory=list)
    skills: list[str] = msgspec.field(default_factory=list)
    backend: str = ""
    mode: str = "observe"
    sandbox: bool = False
    policy_digest: str | None = None
    started: int = 0  # ns since the epoch
    ended: int | None = None
    status: str = "running"
    exit_code: int | None = None
    signal: str | None = None
    counts: dict[str, int] = msgspec.field(default_factory=dict)  # events, alerts, per type
    capture: dict[str, Any] = msgspec.field(default_factory=dict)  # lines, unparsed, lost, notes
    still_running: list[dict[str, Any]] = msgspec.field(default_factory=list)
    stopped_by: str | None = None  # rule id that killed the agent (enforce mode)
    monitor_pid: int | None = None
    host: str = ""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)  # other components' facts

    @property
    def duration_s(self) -> float | None:
        if self.ended is None or not self.started:
            return None
        return (self.ended - self.started) / 1e9


_enc = msgspec.json.Encoder(order="sorted")
_dec = msgspec.json.Decoder(RunMeta)


def encode_meta(meta: RunMeta) -> bytes:
    return msgspec.json.format(_enc.encode(meta), indent=2) + b"\n"


def decode_meta(data: bytes) -> RunMeta:
    return _dec.decode(data)
