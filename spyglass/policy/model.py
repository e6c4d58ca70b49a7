"""The policy, typed: what is normal for a deployment.

Every area reads the policy through these classes; attribute names are the
keys of ``spyglass.yaml``.  Paths are kept as written (``~`` unexpanded:
it means the run's HOME); relative paths are resolved against ``base_dir``
(the directory of the policy file, or the working directory without one).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal

import msgspec

from spyglass.policy import defaults
from spyglass.policy.paths import expand_home

Mode = Literal["observe", "contain", "enforce", "ask"]
MODES: tuple[Mode, ...] = ("observe", "contain", "enforce", "ask")


class NetworkPolicy(msgspec.Struct, frozen=True):
    """The policy's ``network:`` section."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    builtin_allow: bool = True

    @property
    def effective_allow(self) -> tuple[str, ...]:
        return (*defaults.ALLOWED_HOSTS, *self.allow) if self.builtin_allow else self.allow


class ExecPolicy(msgspec.Struct, frozen=True):
    """The policy's ``exec:`` section."""

    trusted: tuple[str, ...] = ()

    @property
    def effective_trusted(self) -> tuple[str, ...]:
        return (*defaults.TRUSTED_EXEC, *self.trusted)


class RuleOverride(msgspec.Struct, frozen=True):
    """A change to one rule: level, action, enabled, and (checked by the rule loader, see
    spyglass/rules/tuning.py) exceptions, append and override, as plain data."""

    level: str | None = None
    action: str | None = None
    enabled: bool | None = None
    exceptions: tuple[Any, ...] = ()
    append: dict[str, Any] = msgspec.field(default_factory=dict)
    override: dict[str, Any] = msgspec.field(default_factory=dict)


class RulesPolicy(msgspec.Struct, frozen=True):
    """The policy's ``rules:`` section."""

    paths: tuple[str, ...] = ()
    disable: tuple[str, ...] = ()
    overrides: dict[str, RuleOverride] = msgspec.field(default_factory=dict)
    #: ``{append: {lists, macros}, override: {lists, macros}}``: changes to the shared lists and macros
    #: (checked by the rule loader, spyglass/rules/tuning.py), as plain data
    library: dict[str, Any] = msgspec.field(default_factory=dict)


class SandboxPolicy(msgspec.Struct, frozen=True):
    """The policy's ``sandbox:`` section."""

    writable: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    pass_home: tuple[str, ...] = ()
    #: environment variables (names or globs) passed in besides the built-in allowlist
    env_pass: tuple[str, ...] = ()


class EvidencePolicy(msgspec.Struct, frozen=True):
    """The policy's ``evidence:`` section."""

    sign_key: str | None = None
    manifest_exclude: tuple[str, ...] = defaults.DEFAULT_MANIFEST_EXCLUDE
    max_files: int = 50000
    max_diff_bytes: int = 262144
    max_run_diff_bytes: int = 4194304
    test_patterns: tuple[str, ...] = defaults.DEFAULT_TEST_PATTERNS


class AnalysisPolicy(msgspec.Struct, frozen=True):
    """The policy's ``analysis:`` section."""

    grading_paths: tuple[str, ...] = ()
    ignore_paths: tuple[str, ...] = ()


class OtlpPolicy(msgspec.Struct, frozen=True):
    """Live OpenTelemetry export of every run (docs/otel.md)."""

    endpoint: str | None = None
    protocol: str | None = None  # "http/protobuf" or "grpc"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: float | None = None  # seconds for each export request


class BrokeredSecret(msgspec.Struct, frozen=True):
    """A secret the agent never sees: it gets ``placeholder`` in ``env``; the proxy sends the value to ``hosts``."""

    name: str
    env: str
    hosts: tuple[str, ...]
    from_env: str | None = None
    from_file: str | None = None
    mint: str | None = None
    revoke: str | None = None
    header: str = "Authorization"
    scheme: str = "bearer"  # bearer | token | basic | raw


class TerminalPolicy(msgspec.Struct, frozen=True):
    """``run --record-tty``: the agent's terminal on record (asciicast v2 in the run's evidence)."""

    record: bool = False
    #: regular expressions masked in the recording (built-in token shapes are always masked)
    redact: tuple[str, ...] = ()


class RetentionPolicy(msgspec.Struct, frozen=True):
    """Limits ``spyglass prune`` applies, and every ``run`` after it finishes (all unset: keep everything)."""

    max_age: str | None = None  # "30d"
    max_size: str | None = None  # "5G"
    max_runs_per_task: int | None = None
    keep_level: str | None = "high"  # runs with alerts at or above are kept; null: no protection

    @property
    def enabled(self) -> bool:
        return self.max_age is not None or self.max_size is not None or self.max_runs_per_task is not None


class Policy(msgspec.Struct, frozen=True):
    """A whole policy, defaults filled in (docs/policy.md)."""

    mode: Mode = "observe"
    fail_on: str | None = None
    #: processes alive after the agent's exit and the grace period: kill, follow or detach (None: by mode)
    descendants: str | None = None
    #: writable roots as absolute paths; empty: the run's working directory
    workspace: tuple[str, ...] = ()
    #: extra secret globs (the built-in ones always apply)
    secrets: tuple[str, ...] = ()
    #: ``secrets.broker``: secrets handed to the agent as placeholders only
    broker: tuple[BrokeredSecret, ...] = ()
    #: globs of decoy files whose mere reading is a finding
    honeytokens: tuple[str, ...] = ()
    network: NetworkPolicy = msgspec.field(default_factory=NetworkPolicy)
    exec: ExecPolicy = msgspec.field(default_factory=ExecPolicy)
    rules: RulesPolicy = msgspec.field(default_factory=RulesPolicy)
    sandbox: SandboxPolicy = msgspec.field(default_factory=SandboxPolicy)
    evidence: EvidencePolicy = msgspec.field(default_factory=EvidencePolicy)
    #: `spyglass gate` requirements (the built-in list unless the file says otherwise)
    gate: tuple[str, ...] = defaults.DEFAULT_GATE
    analysis: AnalysisPolicy = msgspec.field(default_factory=AnalysisPolicy)
    #: the agent's persistent identity (default: derived, docs/otel.md)
    agent_id: str | None = None
    otlp: OtlpPolicy = msgspec.field(default_factory=OtlpPolicy)
    retention: RetentionPolicy = msgspec.field(default_factory=RetentionPolicy)
    terminal: TerminalPolicy = msgspec.field(default_factory=TerminalPolicy)
    #: the file it came from (None: built-in defaults)
    source: str | None = None
    base_dir: str = ""
    digest: str = ""
    #: the file's full text (empty for the built-in defaults), recorded with each run
    text: str = ""
    #: why this file was chosen (``--policy``, ``SPYGLASS_POLICY``, ``user config``, ...)
    origin: str = "built-in defaults"

    @classmethod
    def default(cls, cwd: str | Path | None = None) -> Policy:
        base = str(Path(cwd or os.getcwd()).resolve())
        return cls(base_dir=base, digest=hashlib.sha256(b"spyglass-default-policy-v1").hexdigest())

    @property
    def secret_globs(self) -> tuple[str, ...]:
        return (*defaults.SECRET_GLOBS, *self.secrets)

    def resolve_path(self, path: str, home: str | None = None) -> str:
        """An absolute path for a policy path (``~`` against ``home``, relative to ``base_dir``)."""
        p = expand_home(path, home or os.path.expanduser("~"))
        if not os.path.isabs(p):
            p = os.path.join(self.base_dir or os.getcwd(), p)
        return os.path.normpath(p)

    def workspace_for(self, cwd: str) -> list[str]:
        """The writable roots of a run started in ``cwd``."""
        return list(self.workspace) if self.workspace else [cwd]
