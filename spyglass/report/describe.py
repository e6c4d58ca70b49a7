"""One-line descriptions of events and processes, shared by the terminal and HTML reports."""

from __future__ import annotations

import shlex
from typing import Any, Final

from spyglass.events import Alert, Event, LineageEntry
from spyglass.events.proctree import ProcInfo

#: helper programs that runtimes start on their own (platform probes, loader cache
#: queries); a process running one of these that wrote nothing, contacted nothing,
#: fired no alert and started nothing is folded away as routine
ROUTINE_PROGRAMS: Final = frozenset(
    {
        "ldconfig",
        "ldconfig.real",
        "uname",
        "locale",
        "getconf",
        "lsb_release",
        "tput",
        "dircolors",
        "ld.so",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
        "arch",
        "nproc",
    }
)

#: event-type groups used for colours, filters and the activity histogram
CATEGORIES: Final = ("process", "file-read", "file-change", "net", "security")


def category(event_type: str) -> str:
    if event_type.startswith("process."):
        return "process"
    if event_type == "file.read":
        return "file-read"
    if event_type.startswith("file."):
        return "file-change"
    if event_type.startswith(("net.", "proxy.")):
        return "net"
    return "security"  # priv.change, sys.sensitive, sandbox.denied


def _launcher_label(argv: list[str]) -> str | None:
    """A short name for spyglass's own sandbox launcher processes (bwrap, the relay)."""
    name = argv[0].rsplit("/", 1)[-1] if argv else ""
    inner = argv[argv.index("--") + 1 :] if "--" in argv else []
    if name == "bwrap" and "--unshare-net" in argv:
        return "[sandbox: bwrap] " + _launcher_inner(inner)
    if any(a.endswith("/spyglass/relay.py") for a in argv[:4]):
        return "[sandbox: proxy relay] " + _launcher_inner(inner)
    return None


def _launcher_inner(inner: list[str]) -> str:
    label = _launcher_label(inner)
    return label if label is not None else shlex.join(inner)


def launcher_name(argv: list[str] | None) -> str | None:
    """``sandbox: bwrap`` / ``sandbox: proxy relay`` for spyglass's own launchers, else None."""
    label = _launcher_label(argv) if argv else None
    return label[1:].split("]", 1)[0] if label else None


#: the sandbox's relay socket, as the processes inside see it (spyglass/sandbox/bwrap.py)
RELAY_SOCKET = "/run/spyglass/proxy.sock"


def host_role(address: str | None, port: int | None, meta: Any) -> str:
    """What a contacted address is: ``plumbing`` (the sandbox's own proxy relay), ``ipc`` (a unix
    socket: nscd, D-Bus ...) or ``host``."""
    if not address:
        return "host"
    extra = getattr(meta, "extra", None) or {}
    sandbox = extra.get("sandbox") if isinstance(extra, dict) else None
    relay = sandbox.get("relay") if isinstance(sandbox, dict) else None
    relay_port = relay.get("port") if isinstance(relay, dict) else None
    if address == RELAY_SOCKET or (
        relay_port is not None and port == relay_port and address in ("127.0.0.1", "::1", "localhost")
    ):
        return "plumbing"
    if address.startswith(("/", "@")):
        return "ipc"
    return "host"


def command_text(argv: list[str] | None, exe: str | None = None, *, limit: int = 0) -> str:
    """A shell-quoted command line; with ``limit``, shortened at a word boundary.

    The sandbox's own launchers (bwrap with its many mount options, the proxy
    relay) are shown by name with the command they start."""
    text = (_launcher_label(argv) or shlex.join(argv)) if argv else (exe or "?")
    return shorten(text, limit) if limit else text


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a space, marked with " …"."""
    if limit <= 0 or len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, max(limit - 2, 1))
    if cut < limit // 2:
        cut = max(limit - 2, 1)
    return text[:cut].rstrip() + " …"


def is_routine_program(exe: str | None, argv: list[str] | None = None) -> bool:
    name = (exe or (argv[0] if argv else "") or "").rsplit("/", 1)[-1]
    return name in ROUTINE_PROGRAMS


def describe_event(ev: Event) -> str:
    """What the event did, in a few words (without its type and pid)."""
    t = ev.type
    if t == "process.exec":
        return command_text(ev.argv, ev.exe)
    if t == "process.start":
        return f"child of {ev.ppid}" if ev.ppid is not None else "started"
    if t == "process.exit":
        if ev.signal:
            return f"killed by {ev.signal}"
        return f"exit {ev.exit_code}" if ev.exit_code is not None else "exited"
    if t == "process.detach":
        return "still running when recording stopped"
    if ev.path is not None:
        text = ev.path
        if ev.target:
            text += f" -> {ev.target}"
        if ev.mode and t in ("file.chmod", "file.create", "file.mkdir"):
            text += f" (mode {ev.mode})"
        return text
    if t == "proxy.request":
        host = ev.domain or ev.address or "?"
        port = f":{ev.port}" if ev.port is not None else ""
        dec = ev.decision or "?"
        rule = f" by {ev.rule}" if ev.rule else ""
        return f"{ev.method or 'CONNECT'} {host}{port} {dec}{rule}"
    if ev.address is not None:
        host = f"{ev.domain} ({ev.address})" if ev.domain else ev.address
        port = f":{ev.port}" if ev.port is not None else ""
        proto = f"{ev.transport} " if ev.transport else ""
        return f"{proto}{host}{port}"
    if ev.dns_name is not None:
        ans = ", ".join(ev.dns_answers or [])
        return f"{ev.dns_name} = {ans}" if ans else ev.dns_name
    if t == "priv.change":
        ids = [f"{k} {v}" for k, v in (("uid", ev.uid), ("gid", ev.gid)) if v is not None]
        return " ".join(filter(None, [ev.syscall, *ids, ev.detail]))
    if t == "sys.sensitive":
        tgt = f" pid {ev.target_pid}" if ev.target_pid is not None else ""
        return f"{ev.syscall or ''}{tgt} {ev.detail or ''}".strip()
    if t == "sandbox.denied":
        return " ".join(filter(None, [ev.syscall, ev.detail, ev.reason]))
    return ev.detail or ev.syscall or ""


def lineage_root_first(alert: Alert) -> list[LineageEntry]:
    """The alert's lineage from the agent's root process down to the offender.

    The schema orders it root first; a lineage that starts with the offender
    itself (nearest first) is turned round."""
    chain = list(alert.lineage)
    if len(chain) > 1 and chain[0].pid == alert.pid and chain[-1].pid != alert.pid:
        chain.reverse()
    return chain


def format_ts(ns: int | None) -> str:
    """An event or run time (ns since the epoch) as UTC text; ``-`` when unknown."""
    import datetime as _dt

    if not ns:
        return "-"
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def exit_text(p: ProcInfo) -> str:
    """How a process ended: its exit code, the signal that killed it, or that it is still running."""
    if p.detached:
        return "still running"
    if p.signal:
        return f"killed by {p.signal}"
    if p.exit_code is not None:
        return f"exit {p.exit_code}"
    return "no exit seen"
