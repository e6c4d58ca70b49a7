"""Which policy file a command uses, and the policy a recorded run used.

A policy is never picked up from a directory the agent may write.  The
precedence is: ``--policy FILE``; ``$SPYGLASS_POLICY``; the user's config
directory (``$XDG_CONFIG_HOME/spyglass/policy.yaml``, else
``~/.config/spyglass/policy.yaml``); the system file
``/etc/spyglass/policy.yaml``; the built-in defaults.  A ``spyglass.yaml`` in
the working directory is used only when named explicitly
(``--policy spyglass.yaml``); :func:`ignored_workspace_policy` says when one
was present and ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import SourceError

POLICY_ENV = "SPYGLASS_POLICY"
USER_POLICY = "spyglass/policy.yaml"
SYSTEM_POLICY = Path("/etc/spyglass/policy.yaml")
WORKSPACE_POLICY = "spyglass.yaml"


class PolicySource(msgspec.Struct, frozen=True):
    """Where a policy comes from: a file and why it was chosen, or the built-in defaults."""

    path: Path | None
    origin: str  # "--policy", "SPYGLASS_POLICY", "user config", "system", "built-in defaults"


def user_policy_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / USER_POLICY


def locate_policy(
    explicit: str | Path | None, cwd: str | Path, env: Mapping[str, str] | None = None
) -> PolicySource:
    """The policy file by precedence; an explicit or ``$SPYGLASS_POLICY`` file must exist."""
    env = os.environ if env is None else env
    if explicit is not None:
        p = Path(explicit)
        if not p.is_absolute():
            p = Path(cwd) / p
        if not p.is_file():
            raise SourceError("policy file not found", str(explicit))
        return PolicySource(p, "--policy")
    named = env.get(POLICY_ENV)
    if named:
        p = Path(named)
        if not p.is_absolute():
            p = Path(cwd) / p
        if not p.is_file():
            raise SourceError(f"policy file not found (from ${POLICY_ENV})", named)
        return PolicySource(p, POLICY_ENV)
    user = user_policy_path(env)
    if user.is_file():
        return PolicySource(user, "user config")
    if SYSTEM_POLICY.is_file():
        return PolicySource(SYSTEM_POLICY, "system")
    return PolicySource(None, "built-in defaults")


def ignored_workspace_policy(source: PolicySource, cwd: str | Path) -> str | None:
    """A one-line notice when ``cwd/spyglass.yaml`` exists but is not the policy in use."""
    candidate = Path(cwd) / WORKSPACE_POLICY
    if not candidate.is_file():
        return None
    if source.path is not None and _same_file(source.path, candidate):
        return None
    return (
        f"spyglass: ignored {candidate} (a workspace policy is used only when named: "
        f"--policy {WORKSPACE_POLICY}); using {describe_source(source)}"
    )


def source_line(source: PolicySource) -> str:
    """The line ``run`` prints when the policy is not the built-in defaults: the file, why, its age."""
    import time

    try:
        mtime = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(os.stat(source.path or "").st_mtime))
    except OSError:
        mtime = "unknown"
    from spyglass.safetext import visible

    return visible(f"spyglass: policy {describe_source(source)}, last modified {mtime}")


def policy_locations(cwd: str | Path, env: Mapping[str, str] | None = None) -> list[tuple[Path, bool]]:
    """Every place the precedence chain reads a policy from, as (path, is a directory): the
    ``$SPYGLASS_POLICY`` file, the user config directory's ``spyglass/`` and ``/etc/spyglass/``.
    A run that writes any of them changes the next run's policy (``witness-tamper``)."""
    env = os.environ if env is None else env
    out: list[tuple[Path, bool]] = []
    named = env.get(POLICY_ENV)
    if named:
        p = Path(named)
        out.append((p if p.is_absolute() else Path(cwd) / p, False))
    out.append((user_policy_path(env).parent, True))
    out.append((SYSTEM_POLICY.parent, True))
    return out


def describe_source(source: PolicySource) -> str:
    if source.path is None:
        return "the built-in defaults"
    return f"{source.path} ({source.origin})"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def recorded_policy(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """The policy a run recorded (``run.json`` extra ``policy``): source, origin, digest, text."""
    rec = extra.get("policy")
    return rec if isinstance(rec, dict) else None
