"""Short human descriptions of events and durations, for alert messages."""

from __future__ import annotations

from spyglass.events import Event

_VERBS = {
    "file.read": "read",
    "file.write": "write",
    "file.create": "create",
    "file.delete": "delete",
    "file.rename": "rename",
    "file.link": "link",
    "file.symlink": "symlink",
    "file.chmod": "chmod",
    "file.chown": "chown",
    "file.mkdir": "mkdir",
    "file.truncate": "truncate",
    "net.connect": "connect to",
    "net.bind": "bind",
    "net.listen": "listen on",
    "net.send": "send to",
}


def short_command(argv: list[str] | None, exe: str | None, limit: int = 60) -> str:
    text = " ".join(argv) if argv else (exe or "?")
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def host_port(ev: Event, domain: str | None = None) -> str:
    host = domain or ev.domain or ev.address or "?"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{ev.port}" if ev.port is not None else host


def describe(ev: Event, domain: str | None = None) -> str:
    """``read /home/u/.ssh/id_rsa``, ``connect to evil.example:443``, ``exec curl ...``."""
    t = ev.type
    if t.startswith("file."):
        verb = _VERBS.get(t, t)
        s = f"{verb} {ev.path or '?'}"
        if ev.target:
            s += f" -> {ev.target}"
        if t == "file.chmod" and ev.mode:
            s += f" ({ev.mode})"
        return s
    if t in ("net.connect", "net.bind", "net.listen", "net.send"):
        return f"{_VERBS[t]} {host_port(ev, domain)}"
    if t == "net.dns":
        return f"resolve {ev.dns_name or '?'}"
    if t == "process.exec":
        return "exec " + short_command(ev.argv, ev.exe, 100)
    if t == "process.start":
        return f"start pid {ev.pid}"
    if t == "sys.sensitive":
        s = ev.detail or ev.syscall or "sensitive call"
        if ev.target_pid is not None:
            s += f" on pid {ev.target_pid}"
        return s
    if t == "priv.change":
        s = ev.detail or ev.syscall or "privilege change"
        if ev.uid is not None:
            s += f" (uid {ev.uid})"
        return s
    if t == "proxy.request":
        return f"{ev.method or 'request'} {ev.domain or ev.address or '?'} ({ev.decision or '?'})"
    if t == "sandbox.denied":
        return f"sandbox denied {ev.path or ev.address or ev.syscall or '?'}"
    return t


def duration(ns: int) -> str:
    s = ns / 1e9
    if s < 1:
        return f"{ns / 1e6:g}ms"
    if s < 120:
        return f"{s:g}s"
    if s < 7200:
        return f"{s / 60:g}m"
    return f"{s / 3600:g}h"
