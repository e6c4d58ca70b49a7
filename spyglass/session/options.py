"""What a caller asks of a recording session: one dataclass for the CLI and the API.

A feature that needs a new knob adds a field here (with a default that keeps
today's behaviour) and, if it takes part in the run, a sink factory in
:mod:`spyglass.session.sinks`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec


class RunOptions(msgspec.Struct):
    """Options of one recorded run; ``None`` means "the policy's"."""

    argv: list[str]
    cwd: str = msgspec.field(default_factory=os.getcwd)
    env: dict[str, str] | None = None  # None: ours
    policy_file: Path | None = None  # None: $SPYGLASS_POLICY, user, system file, else the defaults
    task: str | None = None
    agent_id: str | None = None
    workspace: list[str] = msgspec.field(default_factory=list)  # empty: the policy's, else cwd
    skills: list[str] = msgspec.field(default_factory=list)
    wait_descendants: float = 0.0
    descendants: str | None = None  # kill | follow | detach; None: the policy's, else by mode
    backend: str = "auto"  # auto: ebpf where it can run, else strace (the choice and why go in run.json)
    seccomp: bool = True
    mode: str | None = None  # None: the policy's
    sandbox: bool = False  # observe -> contain
    fail_on: str | None = None  # None: the policy's
    sign_key: Path | None = None  # None: the policy's evidence.sign_key
    workspace_evidence: bool = True
    live_alerts: bool = True  # the stderr alert printer
    alerts_format: str = "text"  # the printer's lines: "text", or "json" (one alert object per line)
    model_script: Path | None = None
    model_vars: dict[str, str] = msgspec.field(default_factory=dict)
    agent_kind: str | None = None
    agent_log: Path | None = None
    model_port: int = 0  # the --model-script stub's port (0: any free one)
    ask: bool = False  # the agent's hooks ask the policy (and the operator) before each tool call
    agent_hooks: bool = False  # per-run hooks report each tool call live (Claude Code)
    record_tty: bool = False  # or the policy's terminal.record
    #: egress ask mode: seconds the proxy holds a refused host for the operator's answer (None: off)
    ask_egress: float | None = None
    #: live OpenTelemetry export (None: OTEL_EXPORTER_OTLP_ENDPOINT, else the policy's otlp.endpoint)
    otlp: str | None = None
    otlp_protocol: str | None = None
    #: the egress proxy's name resolver, ``(host, port) -> [(address, port)]``; None: the host's.
    #: ``spyglass skill verify`` pins the hosts a skill declares to loopback stand-ins with
    #: :func:`spyglass.sandbox.resolve.static_resolver`
    sandbox_resolver: Callable[[str, int], Sequence[tuple[str, int]]] | None = None
    #: let the egress proxy reach loopback addresses the resolver returns (the stand-ins)
    sandbox_host_loopback: bool = False
    #: more sinks, after the built-in ones (a harness's own collectors)
    sinks: list[object] = msgspec.field(default_factory=list)
    #: ``descendants: follow``: ``(run id, exit code so far, followed pids)`` once the agent has exited
    #: and the processes it left are still recorded (``spyglass run`` gives the prompt back then)
    on_following: Callable[[str, int, list[int]], None] | None = None
