"""Live tool-call reports from an agent's own hooks (Claude Code's PreToolUse/PostToolUse).

For a Claude Code run, spyglass writes per-run hooks into the run's own
``settings.json`` (never the user's).  Each hook is a small stdlib-only
Python script (:data:`HOOK_SCRIPT`, copied next to the settings) that sends
the hook's input (tool_use id, tool name, tool input) as one JSON line to a
unix socket the monitor listens on (:class:`HookServer`), and waits for the
answer: ``allow``, or ``deny`` with a reason (``--ask``: the policy or the
operator decided).  A PreToolUse hook runs before the tool does, so the
monitor knows the tool call before its first process starts.

When the socket cannot be reached the script appends the report to a spool
file beside it and lets the call run, except in ask mode, where it denies
(nobody could be asked).  The kernel record stays the source of truth:
hooks only name what the processes were for.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

#: The hook script: stdlib only, so any python3 runs it (inside a sandbox too).
HOOK_SCRIPT = r"""# written by spyglass: reports each tool call of this run to the monitor
import json, os, socket, sys, time
phase, sock_path, spool, ask = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "ask"
try:
    data = json.load(sys.stdin)
except ValueError:
    data = {}
msg = {"phase": phase, "ts": time.time(), "pid": os.getpid(), "ppid": os.getppid(), "input": data}
answer = None
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(600)
    s.connect(sock_path)
    s.sendall((json.dumps(msg) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    answer = json.loads(buf or b"{}")
except (OSError, ValueError):
    with open(spool, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(msg) + "\n")
    if ask and phase == "pre":
        answer = {"decision": "deny", "reason": "spyglass: the monitor could not be asked"}
if phase == "pre" and answer and answer.get("decision") == "deny":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                      "permissionDecisionReason": answer.get("reason") or "denied by spyglass"}}))
"""


class HookReport(msgspec.Struct):
    """One hook call: ``phase`` "pre" (before the tool runs) or "post"."""

    phase: str
    tool_use_id: str | None
    tool_name: str
    tool_input: dict[str, Any]
    ts: float
    pid: int | None = None  # the hook process
    decision: str | None = None  # pre: allow | deny
    reason: str | None = None
    raw: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def command(self) -> str | None:
        cmd = self.tool_input.get("command")
        return cmd if isinstance(cmd, str) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "tool_use_id": self.tool_use_id,
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
            "ts": self.ts,
            "pid": self.pid,
            "decision": self.decision,
            "reason": self.reason,
        }


#: decides a PreToolUse report: (decision "allow"/"deny", reason)
Decider = Callable[[HookReport], tuple[str, str | None]]


def report_of(msg: dict[str, Any]) -> HookReport:
    data = msg.get("input") if isinstance(msg.get("input"), dict) else {}
    assert isinstance(data, dict)
    tin = data.get("tool_input") if isinstance(data.get("tool_input"), dict) else {}
    tid = data.get("tool_use_id")
    return HookReport(
        phase=str(msg.get("phase") or "pre"),
        tool_use_id=str(tid) if tid else None,
        tool_name=str(data.get("tool_name") or ""),
        tool_input=dict(tin or {}),
        ts=float(msg.get("ts") or time.time()),
        pid=msg.get("pid") if isinstance(msg.get("pid"), int) else None,
        raw=data,
    )


class HookServer:
    """The monitor's end: a unix socket that collects :class:`HookReport` s and answers them."""

    def __init__(self, path: str | Path, decider: Decider | None = None) -> None:
        self.path = str(path)
        self.decider = decider
        self.reports: list[HookReport] = []
        self.on_report: list[Callable[[HookReport], None]] = []
        self._lock = threading.Lock()
        if os.path.exists(self.path):
            os.unlink(self.path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _bind(self._sock, self.path)
        os.chmod(self.path, 0o600)  # the agent runs as we do; nobody else reports or asks
        self._sock.listen(16)
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="spyglass-hooks", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            try:
                conn.settimeout(30)
                while not buf.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                msg = json.loads(buf or b"{}")
            except (OSError, ValueError):
                return
            rep = report_of(msg if isinstance(msg, dict) else {})
            rep.pid = _peer_pid(conn) or rep.pid
            if rep.phase == "pre":
                decision, reason = ("allow", None)
                if self.decider is not None:
                    try:
                        decision, reason = self.decider(rep)
                    except Exception as exc:  # a decider that fails must not let the call through silently
                        decision, reason = "deny", f"spyglass: the policy check failed ({exc})"
                rep.decision, rep.reason = decision, reason
            with self._lock:
                self.reports.append(rep)
                listeners = list(self.on_report)
            for fn in listeners:
                fn(rep)
            try:
                conn.sendall((json.dumps({"decision": rep.decision or "allow", "reason": rep.reason}) + "\n").encode())
            except OSError:
                pass

    def snapshot(self) -> list[HookReport]:
        with self._lock:
            return list(self.reports)

    def close(self) -> None:
        """Stop listening: the thread in ``accept`` is woken (``shutdown``) and gone before the
        descriptor is closed, never left blocked on a number the process may give another socket."""
        self._closed = True
        try:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            if self._thread is not threading.current_thread():
                self._thread.join(timeout=5)
            self._sock.close()
        finally:
            try:
                os.unlink(self.path)
            except OSError:
                pass


#: the longest path a unix socket's address holds (sun_path, with its terminating NUL)
SOCKET_PATH_MAX = 107


def _bind(sock: socket.socket, path: str) -> None:
    """Bind ``sock`` at ``path``; a path longer than an address holds is bound through a descriptor
    of its directory (``/proc/self/fd/N/NAME``): the socket is created there all the same, for a
    client that reaches the directory by a shorter name (a sandbox's view of it)."""
    if len(os.fsencode(path)) <= SOCKET_PATH_MAX:
        sock.bind(path)
        return
    fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)


def _peer_pid(conn: socket.socket) -> int | None:
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid, _uid, _gid = struct.unpack("3i", creds)
    return pid or None


def hook_settings(script: Path, sock: str, spool: Path, *, ask: bool, python: str | None = None) -> dict[str, Any]:
    """The ``hooks`` table of a Claude Code ``settings.json`` that runs ``script`` for every tool call."""
    py = python or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)

    def cmd(phase: str) -> str:
        import shlex

        return shlex.join([py, "-I", str(script), phase, sock, str(spool), "ask" if ask else "report"])

    return {
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": cmd("pre"), "timeout": 600}]}],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": cmd("post")}]}],
    }


def install_hooks(directory: Path, sock: str, *, ask: bool = False) -> dict[str, Any]:
    """Write the hook script into ``directory``; return the settings' ``hooks`` table."""
    script = directory / "spyglass-hook.py"
    script.write_text(HOOK_SCRIPT, encoding="utf-8")
    return hook_settings(script, sock, directory / "spyglass-hooks.jsonl", ask=ask)
