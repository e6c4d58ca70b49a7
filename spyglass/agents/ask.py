""" "Ask before it runs": the policy's look at a tool call before the agent runs it.

With ``spyglass run --ask`` (or ``mode: ask`` in the policy), the agent's
PreToolUse hook (:mod:`spyglass.agents.hooks`) hands each tool call to
:class:`PolicyAsk` before anything runs.  It reads the call's command (or
file path) for what a rule forbids: a secret path (the policy's secret
globs), a host the network policy does not allow or denies, a persistence
file (shell start-up files, cron, systemd and autostart entries, SSH
authorized keys, agent configuration).  A call that touches none runs.  One
that does is put to the operator on the terminal (``/dev/tty``: allow once
or deny) when there is one, and denied when there is none.

Every decision on a flagged call is an :class:`Intervention` (who decided,
when, what, the decision), recorded as an ``agent.intervention`` event.  The
kernel rules still watch what runs: a command that does the forbidden thing
in a way this reading missed still raises its alerts.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from spyglass.agents.hooks import HookReport
from spyglass.events.schema import Event
from spyglass.policy.hosts import HostMatcher
from spyglass.policy.paths import compile_globs, expand_home

#: files whose change makes something run later (persistence), as globs (~ is the run's HOME)
PERSISTENCE_GLOBS = (
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.profile",
    "~/.zshrc",
    "~/.zprofile",
    "~/.zshenv",
    "~/.config/fish/config.fish",
    "~/.ssh/authorized_keys*",
    "~/.ssh/rc",
    "~/.config/autostart/**",
    "~/.config/systemd/user/**",
    "/etc/systemd/**",
    "/etc/cron*/**",
    "/etc/crontab",
    "/var/spool/cron/**",
    "/etc/profile",
    "/etc/profile.d/**",
    "/etc/rc.local",
    "/etc/ld.so.preload",
    "~/.claude/settings*.json",
    "~/.claude/CLAUDE.md",
    "~/.codex/config.toml",
    "~/.codex/AGENTS.md",
    "~/.gitconfig",
    "~/.config/git/**",
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://(\[[0-9a-f:]+\]|[^/:\s'\"@]+)(?::(\d+))?", re.I)
_PATHISH = re.compile(r"(?:~|\.{0,2})/[^\s'\"<>|;&()]+|\.[A-Za-z0-9_.-]+")


class Intervention(msgspec.Struct):
    """A decision on a tool call before it ran."""

    ts: float
    by: str  # "policy" (no terminal: denied) or "operator"
    tool: str
    tool_use_id: str | None
    what: str  # the command or path
    finding: str  # what the policy saw in it
    decision: str  # "allow" (once) or "deny"
    pid: int | None = None  # the hook process

    def to_event(self) -> Event:
        return Event(
            type="agent.intervention",
            ts=int(self.ts * 1e9),
            pid=self.pid or 0,
            tool_name=self.tool,
            tool_call_id=self.tool_use_id,
            actor=self.by,
            verdict=self.decision,
            detail=self.what,
            reason=self.finding,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "by": self.by,
            "tool": self.tool,
            "tool_use_id": self.tool_use_id,
            "what": self.what,
            "finding": self.finding,
            "decision": self.decision,
        }


def _words(text: str) -> list[str]:
    try:
        words = shlex.split(text, comments=False)
    except ValueError:
        words = text.split()
    return [*words, *_PATHISH.findall(text)]


class PolicyAsk:
    """The decider of the PreToolUse hook: the policy's reading of a call, then the operator."""

    def __init__(
        self,
        secret_globs: list[str],
        allow_hosts: list[str],
        deny_hosts: list[str],
        *,
        home: str,
        cwd: str,
        prompt: Callable[[str], bool] | None = None,
    ) -> None:
        self.home, self.cwd = home, cwd
        self.secrets = compile_globs(secret_globs, home)
        self.persistence = compile_globs(PERSISTENCE_GLOBS, home)
        self.hosts = HostMatcher(allow_hosts, deny_hosts)
        self.prompt = prompt if prompt is not None else tty_prompt
        self.interventions: list[Intervention] = []
        self.pending: list[Intervention] = []  # not yet fed to the pipeline
        self._lock = threading.Lock()

    def _path(self, word: str) -> str:
        p = expand_home(word, self.home)
        return os.path.normpath(p if p.startswith("/") else os.path.join(self.cwd, p))

    def findings(self, text: str) -> list[str]:
        """What ``text`` (a command or a path) touches that a rule forbids."""
        out: list[str] = []
        for w in _words(text):
            if "/" not in w and not w.startswith("."):
                continue
            p = self._path(w)
            if self.secrets.fullmatch(p) and f"secret {p}" not in out:
                out.append(f"secret {p}")
            elif self.persistence.fullmatch(p) and f"persistence file {p}" not in out:
                out.append(f"persistence file {p}")
        for m in _URL.finditer(text):
            host, port = m.group(1).strip("[]"), int(m.group(2)) if m.group(2) else None
            is_ip = bool(re.fullmatch(r"[\d.]+|[0-9a-f:]+", host, re.I))
            domain, addr = (None, host) if is_ip else (host, None)
            if self.hosts.denied(domain, addr, port) or not self.hosts.allowed(domain, addr, port):
                out.append(f"host {host}{f':{port}' if port else ''} not allowed")
        return out

    def __call__(self, rep: HookReport) -> tuple[str, str | None]:
        text = rep.command or next(
            (v for k, v in rep.tool_input.items() if k in ("file_path", "path", "notebook_path", "url")), None
        )
        if not isinstance(text, str):
            return "allow", None
        found = self.findings(text)
        if not found:
            return "allow", None
        finding = "; ".join(found)
        question = f"{rep.tool_name or 'tool'} wants to run: {text}\n  it touches {finding}"
        with self._lock:  # one question at a time
            answer = self.prompt(question)
        by = "operator" if answer is not None else "policy"
        decision = "allow" if answer else "deny"
        iv = Intervention(time.time(), by, rep.tool_name, rep.tool_use_id, text, finding, decision, rep.pid)
        with self._lock:
            self.interventions.append(iv)
            self.pending.append(iv)
        reason = f"spyglass: {'the operator denied' if by == 'operator' else 'the policy forbids'} it ({finding})"
        return decision, None if decision == "allow" else reason

    def take_pending(self) -> list[Intervention]:
        with self._lock:
            out, self.pending = self.pending, []
        return out


def tty_prompt(question: str) -> bool | None:
    """Ask on the controlling terminal: True (allow once), False (deny), None (no terminal)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return None
    with os.fdopen(fd, "r+", buffering=1, encoding="utf-8", errors="replace") as tty:
        if not tty.isatty():
            return None
        tty.write(f"\nspyglass: {question}\n  allow once? [y/N] ")
        tty.flush()
        answer = tty.readline().strip().lower()
    return answer in ("y", "yes", "a", "allow")
