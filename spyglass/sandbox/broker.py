"""Brokered secrets: the agent holds a placeholder, the egress proxy holds the value.

For each ``secrets.broker`` entry of the policy the run gets:

* a placeholder, unique to the run (``spyglass-ph-<name>-<random>``), put in the
  agent's environment under the entry's ``env`` name.  The placeholder is also
  a honeytoken: the proxy scans for it like the decoy home's canary, and the
  :class:`BrokerGuard` sink watches command lines for it;
* the real value, obtained outside the sandbox before the agent starts (from
  spyglass's own environment, a file, or a ``mint`` command that issues a
  short-lived credential) and kept in memory only;
* substitution: requests to the entry's ``hosts`` pass through the TLS
  interceptor (:mod:`spyglass.sandbox.intercept`), which replaces the
  placeholder in the request headers (inside ``Basic`` credentials too) with
  the value, or adds the configured header when the agent sent none;
* revocation: a minted value's ``revoke`` command runs when the run ends.

The value is never written anywhere: not to events, alerts, the store, the
terminal recording (its redactor gets the value) or the agent's files.
"""

from __future__ import annotations

import base64
import os
import secrets as _secrets
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import SpyglassError
from spyglass.events import Alert, Event, LineageEntry
from spyglass.logs import get_logger
from spyglass.sandbox.egress import EgressPolicy

log = get_logger("spyglass.sandbox.broker")

MINT_TIMEOUT = 60.0
PLACEHOLDER_PREFIX = "spyglass-ph-"
MISUSE_RULE = "secret-placeholder-misuse"


class BrokerError(SpyglassError):
    exit_code = 5  # the run cannot start as asked


class Secret(msgspec.Struct):
    name: str
    env: str
    hosts: tuple[str, ...]
    header: str
    scheme: str
    placeholder: str
    value: str = ""
    revoke: str | None = None
    minted: bool = False
    policy: EgressPolicy | None = None

    def allows(self, host: str, port: int) -> bool:
        assert self.policy is not None
        return self.policy.decide(host, port).allow

    def header_value(self) -> str:
        if self.scheme == "bearer":
            return f"Bearer {self.value}"
        if self.scheme == "token":
            return f"token {self.value}"
        if self.scheme == "basic":
            return "Basic " + base64.b64encode(self.value.encode()).decode()
        return self.value


def _plain_header(val: str) -> str:
    """A header's text, with ``Basic`` credentials decoded (where a placeholder may hide)."""
    if val.startswith("Basic "):
        try:
            return val + " " + base64.b64decode(val[6:], validate=True).decode()
        except Exception:
            return val
    return val


def _sh(
    cmd: str, *, stdin: str | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", cmd], input=stdin, capture_output=True, text=True, timeout=MINT_TIMEOUT,
        env=dict(env) if env is not None else None, check=False,
    )


class Broker:
    """The run's brokered secrets; :meth:`open` obtains the values, :meth:`close` revokes minted ones."""

    def __init__(self, entries: Sequence[Any], *, environ: Mapping[str, str] | None = None,
                 base_dir: str | None = None) -> None:
        self.entries = list(entries)
        self.environ = dict(os.environ if environ is None else environ)
        self.base_dir = base_dir or os.getcwd()
        self.secrets: list[Secret] = []
        self.revoked: list[dict[str, Any]] = []
        self.substitutions: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.entries)

    # ------------------------------------------------------------ values
    def open(self) -> Broker:
        try:
            self._open()
        except BaseException:
            self.close()  # values minted before the failure are revoked at once
            raise
        return self

    @property
    def source_files(self) -> list[str]:
        """The files values are read from: hidden inside the sandbox."""
        out = []
        for e in self.entries:
            if e.from_file is not None:
                p = Path(os.path.expanduser(e.from_file))
                out.append(str(p if p.is_absolute() else Path(self.base_dir, p)))
        return out

    def _open(self) -> None:
        for e in self.entries:
            placeholder = f"{PLACEHOLDER_PREFIX}{e.name}-{_secrets.token_hex(12)}"
            s = Secret(name=e.name, env=e.env, hosts=tuple(e.hosts), header=e.header, scheme=e.scheme,
                       placeholder=placeholder, revoke=e.revoke, minted=e.mint is not None,
                       policy=EgressPolicy(list(e.hosts), [], allow_host_loopback=True))
            self.secrets.append(s)
            s.value = self._obtain(e)

    def _obtain(self, e: Any) -> str:
        if e.from_env is not None:
            value = self.environ.get(e.from_env)
            if not value:
                raise BrokerError(f"secrets.broker.{e.name}: ${e.from_env} is not set in spyglass's environment",
                                  hint=f"export {e.from_env}=... before `spyglass run`")
            return value
        if e.from_file is not None:
            path = Path(os.path.expanduser(e.from_file))
            if not path.is_absolute():
                path = Path(self.base_dir, path)
            try:
                value = path.read_text(encoding="utf-8").splitlines()[0].strip() if path.stat().st_size else ""
            except (OSError, IndexError, UnicodeDecodeError) as exc:
                raise BrokerError(f"secrets.broker.{e.name}: cannot read {path}: {exc}") from None
            if not value:
                raise BrokerError(f"secrets.broker.{e.name}: {path} is empty")
            return value
        try:
            res = _sh(e.mint, env=self.environ)
        except subprocess.TimeoutExpired:
            raise BrokerError(f"secrets.broker.{e.name}: mint command timed out after {MINT_TIMEOUT:.0f} s") from None
        value = res.stdout.strip().splitlines()[0].strip() if res.stdout.strip() else ""
        if res.returncode != 0 or not value:
            why = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1][:200]
            raise BrokerError(f"secrets.broker.{e.name}: mint command failed: {why}")
        return value

    def close(self) -> None:
        """Revoke minted values, then forget every value."""
        for s in self.secrets:
            if s.minted and s.revoke and s.value:
                env = {**self.environ, "SPYGLASS_SECRET": s.value, "SPYGLASS_SECRET_NAME": s.name}
                try:
                    res = _sh(s.revoke, stdin=s.value + "\n", env=env)
                    self.revoked.append({"name": s.name, "ok": res.returncode == 0, "exit": res.returncode})
                except subprocess.TimeoutExpired:
                    self.revoked.append({"name": s.name, "ok": False, "exit": None})
                    log.warning("secrets.broker.%s: revoke command timed out", s.name)
            s.value = ""

    # ------------------------------------------------------------ for the sandbox
    def agent_env(self) -> dict[str, str]:
        return {s.env: s.placeholder for s in self.secrets}

    @property
    def placeholders(self) -> list[bytes]:
        return [s.placeholder.encode() for s in self.secrets]

    @property
    def values(self) -> tuple[str, ...]:
        """The real values, for redaction of anything spyglass writes."""
        return tuple(s.value for s in self.secrets if s.value)

    def intercepts(self, host: str, port: int) -> bool:
        """Whether requests to ``host:port`` go through the interceptor (some secret may be sent there)."""
        return any(s.allows(host, port) for s in self.secrets)

    def allowed_placeholders(self, host: str, port: int) -> set[bytes]:
        return {s.placeholder.encode() for s in self.secrets if s.allows(host, port)}

    def substitute(self, host: str, port: int, headers: Any) -> tuple[list[str], list[str]]:
        """Rewrite ``headers`` (a mutable mapping) for a request to ``host:port``.

        Only each secret's own ``header`` is rewritten (inside ``Basic`` credentials too), never
        ``Host``, ``Origin`` or any other header a server might echo back.  Returns (names
        substituted, names whose placeholder was sent here but may not be): a misused
        placeholder is left in place and the request must be refused."""
        used: list[str] = []
        misused: list[str] = []
        for s in self.secrets:
            allowed = s.allows(host, port)
            if any(s.placeholder in _plain_header(headers[k]) for k in list(headers.keys())) and not allowed:
                misused.append(s.name)
                continue
            if not allowed:
                continue
            key = next((k for k in list(headers.keys()) if k.lower() == s.header.lower()), None)
            if key is None:
                headers[s.header] = s.header_value()
                used.append(s.name)
                continue
            val = headers[key]
            new = val.replace(s.placeholder, s.value)
            if new == val and val.startswith("Basic "):
                try:
                    raw = base64.b64decode(val[6:], validate=True).decode()
                except Exception:
                    raw = ""
                if s.placeholder in raw:
                    new = "Basic " + base64.b64encode(raw.replace(s.placeholder, s.value).encode()).decode()
            if new != val:
                headers[key] = new
                used.append(s.name)
        for n in used:
            self.substitutions[n] = self.substitutions.get(n, 0) + 1
        return used, misused

    def mask(self, data: bytes) -> bytes:
        """A response with every value turned back into its placeholder (a server that echoes
        the request must not hand the value to the agent)."""
        for s in self.secrets:
            if s.value and s.value.encode() in data:
                data = data.replace(s.value.encode(), s.placeholder.encode())
        return data

    def describe(self) -> list[dict[str, Any]]:
        """For run.json: names, variables, hosts and what happened; never values or placeholders."""
        return [{"name": s.name, "env": s.env, "hosts": list(s.hosts), "minted": s.minted,
                 "substituted": self.substitutions.get(s.name, 0)} for s in self.secrets]


class BrokerGuard:
    """Pipeline sink: a placeholder in a command line, followed by egress the secret does not allow.

    The shell expands ``$GITHUB_TOKEN`` into the argv of ``curl``; if that
    process (or one it started) then asks the proxy for a host the secret may
    not go to, the placeholder is on its way there: critical, and in enforce
    mode the agent is stopped.  Requests the interceptor refused for carrying a
    placeholder to the wrong host raise the same alert.
    """

    name = "secret-broker"

    def __init__(self, broker: Broker, *, enforce: bool = False) -> None:
        self.broker = broker
        self.enforce = enforce
        self._holders: dict[int, str] = {}  # pid -> secret name whose placeholder its argv carries
        self.ctx: Any = None

    def start(self, ctx: Any) -> None:
        self.ctx = ctx

    def done(self, ctx: Any) -> None:
        """The agent is gone: revoke minted values now, and say in the run what was brokered."""
        self.broker.close()
        ctx.note_fact("broker", {"secrets": self.broker.describe(), "revoked": self.broker.revoked})

    def process_exec(self, ev: Event) -> None:
        argv = " ".join(ev.argv or ())
        for s in self.broker.secrets:
            if s.placeholder in argv:
                self._holders[ev.pid] = s.name

    def process_start(self, ev: Event) -> None:
        parent = ev.ppid
        if parent is not None and parent in self._holders:
            self._holders[ev.pid] = self._holders[parent]

    def proxy_request(self, ev: Event) -> None:
        host, port = ev.address or "", ev.port or 0
        if ev.detail == MISUSE_RULE:
            self._alert(ev, f"a request carried a brokered secret's placeholder to {host}, which it may not reach")
            return
        name = self._holders.get(ev.pid)
        if name is None or not host:
            return
        s = next(x for x in self.broker.secrets if x.name == name)
        if not s.allows(host, port):
            self._alert(ev, f"a process whose command line holds the {name} placeholder contacted {host}:{port}")

    def _alert(self, ev: Event, message: str) -> None:
        if self.ctx is None:
            return
        chain = self.ctx.procs.lineage(ev.pid)
        me = chain[0] if chain else None
        self.ctx.raise_alert(Alert(
            ts=ev.ts, rule_id=MISUSE_RULE, title="Brokered secret sent where it may not go", level="critical",
            action="kill" if self.enforce else "alert", message=message, event_seqs=[ev.seq] if ev.seq else [],
            pid=ev.pid, exe=me.exe if me else None, argv=me.argv if me else None, cwd=me.cwd if me else None,
            lineage=[LineageEntry(pid=p.pid, exe=p.exe, argv=p.argv, cwd=p.cwd) for p in reversed(chain)],
            tags=["sandbox", "secrets", "exfiltration"],
        ))
        if self.enforce and self.ctx.stop_agent is not None:
            self.ctx.stop_agent(MISUSE_RULE)


def open_for_run(entries: Sequence[Any], env: Mapping[str, str], *, base_dir: str,
                 sandbox_on: bool) -> tuple[Broker, dict[str, str]]:
    """The run's brokered secrets with their values obtained now, and the agent's environment
    without them (a ``from_env`` variable and any variable holding a value are dropped)."""
    if not sandbox_on:
        raise BrokerError(
            "secrets.broker needs the sandbox: only traffic through spyglass's egress proxy can carry the secret",
            hint="run with --sandbox (or mode: contain/enforce), or remove secrets.broker from the policy",
        )
    broker = Broker(entries, environ=env, base_dir=base_dir).open()
    sources = {e.from_env for e in entries if e.from_env}
    values = broker.values
    return broker, {k: v for k, v in env.items() if k not in sources and not any(x in v for x in values)}
