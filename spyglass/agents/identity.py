"""A persistent agent identity: the same agent gets the same ``agent.id`` in every run.

In order of precedence the id is ``--agent-id``, the policy's ``agent_id``, or
derived.  A derived id is ``<kind>-<digest>``: ``kind`` is the agent adapter's
kind where spyglass knows the agent (``codex``, ``mini``, ``claude``), else the
base name of the program run; the digest is the first 12 hex digits of the
sha256 of ``kind``, the agent executable's resolved path, the agent's config
directory where it has one (``~/.codex``, ``~/.claude``), the user name and the
host name.  Re-running the same agent binary as the same user on the same host
gives the same id; another binary, user, host or config home gives another.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence

import msgspec

from spyglass.agents.awareness import agent_signature
from spyglass.capture.which import which

#: agent kind -> (environment variable naming its config home, default relative to HOME)
_CONFIG_HOMES: dict[str, tuple[str, str]] = {
    "codex": ("CODEX_HOME", ".codex"),
    "claude": ("CLAUDE_CONFIG_DIR", ".claude"),
    "mini": ("MSWEA_GLOBAL_CONFIG_DIR", ".config/mini-swe-agent"),
}


class AgentIdentity(msgspec.Struct, frozen=True):
    """Who the agent of a run is: its id, its kind, and where the id came from."""

    id: str
    name: str  # the agent's kind or program name
    source: str  # "option", "policy" or "derived"
    basis: dict[str, str]  # what a derived id was computed from

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "source": self.source, "basis": self.basis}


def _kind(argv: Sequence[str], exe: str | None, kind: str | None) -> str:
    if kind:
        return kind
    sig = agent_signature(exe, list(argv))
    if sig:
        return sig
    for a in argv[:3]:
        base = os.path.basename(a)
        if base in ("claude", "claude-code"):
            return "claude"
    if argv:
        base = os.path.basename(argv[0])
        if base.startswith("python") and len(argv) > 1 and not argv[1].startswith("-"):
            return os.path.basename(argv[1]).removesuffix(".py") or base
        return base or "agent"
    return "agent"


def _resolve_exe(argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> str:
    if not argv:
        return ""
    a0 = argv[0]
    found = a0 if "/" in a0 else which(a0, env.get("PATH"))
    if not found:
        return a0
    path = found if os.path.isabs(found) else os.path.join(cwd, found)
    return os.path.realpath(path)


def derive_identity(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    kind: str | None = None,
    explicit: str | None = None,
    policy_id: str | None = None,
    user: str | None = None,
    host: str | None = None,
) -> AgentIdentity:
    """The agent identity of a run of ``argv`` (see the module's text for the rule)."""
    exe = _resolve_exe(argv, cwd, env)
    name = _kind(argv, exe, kind)
    if explicit:
        return AgentIdentity(explicit, name, "option", {})
    if policy_id:
        return AgentIdentity(policy_id, name, "policy", {})
    home = env.get("HOME") or os.path.expanduser("~")
    config = ""
    if name in _CONFIG_HOMES:
        var, rel = _CONFIG_HOMES[name]
        config = os.path.realpath(env.get(var) or os.path.join(home, rel))
    try:
        who = user or login_name()
    except Exception:  # no passwd entry for this uid
        who = str(os.getuid())
    basis = {
        "kind": name,
        "executable": exe,
        "config": config,
        "user": who,
        "host": host or os.uname().nodename,  # socket.gethostname()
    }
    digest = hashlib.sha256("\0".join(basis[k] for k in sorted(basis)).encode()).hexdigest()[:12]
    return AgentIdentity(f"{name}-{digest}", name, "derived", basis)


def login_name() -> str:
    """``getpass.getuser()``: ``$LOGNAME``, ``$USER``, ``$LNAME`` or ``$USERNAME``, else the user's
    passwd entry (KeyError when there is none); without importing ``getpass`` (and ``termios``)
    at every run's start."""
    for var in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        name = os.environ.get(var)
        if name:
            return name
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
