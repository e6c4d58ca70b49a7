"""Alerts: a rule hit, pointing at the events that fired it."""

from __future__ import annotations

from typing import Final

import msgspec

LEVELS: Final = ("info", "low", "medium", "high", "critical")
ACTIONS: Final = ("alert", "block", "kill")


def level_rank(level: str) -> int:
    """0 for info up to 4 for critical; -1 for an unknown level."""
    try:
        return LEVELS.index(level)
    except ValueError:
        return -1


class LineageEntry(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One process on the way from the agent's root process to the offender."""

    pid: int
    exe: str | None = None
    argv: list[str] | None = None
    cwd: str | None = None
    tool_call: str | None = None  # "tool call 3: pytest -q" where the agent log links it


class Alert(msgspec.Struct, omit_defaults=True, kw_only=True):
    seq: int = 0  # position in alerts.jsonl, 1-based
    ts: int = 0
    rule_id: str
    title: str
    level: str
    action: str = "alert"
    message: str = ""
    event_seqs: list[int] = msgspec.field(default_factory=list)
    pid: int = 0
    exe: str | None = None
    argv: list[str] | None = None
    cwd: str | None = None
    lineage: list[LineageEntry] = msgspec.field(default_factory=list)
    tags: list[str] = msgspec.field(default_factory=list)
    # where it came from, so that an alert read alone still says so (set by the pipeline)
    run_id: str | None = None
    host: str | None = None
    agent_id: str | None = None
    task: str | None = None
    policy_digest: str | None = None
