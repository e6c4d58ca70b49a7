"""Fields a rule can test: the event's own fields plus derived ones.

Derived fields come only from the event stream (the process table, files the
run wrote, names it resolved), the policy and the run's metadata (workspace,
HOME), never from the host at evaluation time, so a replayed run gives the
alerts the live run gave.  ``FIELDS`` is the registry the compiler and
``docs/rules.md`` use: name -> kind, Python expression, description.

``FieldSpec.key`` marks fields whose value depends only on the event's
``file.path`` (``"path"``) or ``file.target`` (``"target"``) and on settings
fixed for the whole run (workspace, HOME, secret globs): the compiler decides
once per distinct path which rules can still match, and skips the rest.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from spyglass.events.schema import FIELD_NAMES


class FieldSpec(msgspec.Struct, frozen=True):
    """A field rules may test: its kind, how it is computed from the event, its doc."""

    kind: str  # "str", "int", "bool", "list"
    expr: str  # Python expression over ``ev`` (the event) and ``fx`` (FieldContext)
    doc: str
    derived: bool = True
    key: str = ""  # "path" / "target": a function of that event field and the run's settings only


#: what each field of the event itself holds (wire name -> description)
EVENT_FIELD_DOCS: Final = {
    "seq": "position of the event in the run (1, 2, 3 ...)",
    "ts": "time in nanoseconds since the epoch",
    "type": "event type (process.exec, file.read, net.connect ...)",
    "process.pid": "process id of the process that acted",
    "ok": "the system call succeeded",
    "errno": "error name when it failed (ENOENT, EACCES ...)",
    "syscall": "the raw system call the event came from",
    "thread.id": "thread id when it differs from the pid",
    "process.parent_pid": "parent pid (process.start)",
    "process.user.id": "effective user id (process.exec, priv.change)",
    "process.real_user.id": "real user id",
    "process.group.id": "effective group id",
    "process.real_group.id": "real group id",
    "process.exit.code": "exit status (process.exit)",
    "process.exit.signal": "signal that ended the process (process.exit)",
    "file.path": "absolute, normalized path the kernel acted on",
    "file.raw_path": "the path argument as the program wrote it, where it differs",
    "file.target": "second path of file.rename / file.link / file.symlink",
    "file.mode": "mode argument (0755, S_ISUID|0755 ...)",
    "file.flags": "open flags (O_WRONLY|O_CREAT|O_TRUNC ...)",
    "file.owner.id": "new owner (file.chown)",
    "file.group.id": "new group (file.chown)",
    "server.address": "peer IP address, or unix socket path",
    "server.port": "peer port",
    "network.transport": "tcp or udp",
    "network.type": "ipv4, ipv6 or unix",
    "network.io.bytes": "bytes sent (net.send)",
    "dns.question.name": "name looked up (net.dns)",
    "dns.answers": "addresses the lookup returned (net.dns)",
    "target.pid": "pid a signal, ptrace or similar call was aimed at (sys.sensitive)",
    "detail": "what a sys.sensitive / priv.change / proxy.request / sandbox.denied event was "
              "(`io_uring_setup`, `memfd:NAME`, `PTRACE_ATTACH`, `setuid(0)`, `canary` ...)",
    "http.request.method": "method of a proxy.request (CONNECT, GET, POST, SOCKS5 ...)",
    "proxy.decision": "allow or deny (proxy.request)",
    "proxy.rule": "the network.allow/deny entry or rule that decided (proxy.request)",
    "reason": "why the proxy or the sandbox decided (`not-allowed`, `canary`, `read-only`, `hidden` ...)",
    "proxy.bytes_out": "bytes sent upstream (proxy.request)",
    "proxy.bytes_in": "bytes returned to the client (proxy.request)",
    "agent.config.kind": "which agent file changed: claude-settings, claude-state, codex-config, mcp, memory "
                         "(agent.permission_change, agent.memory_change)",
    "agent.config.changes": "the keys (`+permissions.allow[]=Bash(curl:*)`, `~approval_policy: ...`) or lines "
                            "(`+line`, `-line`) that changed",
    "agent.permission.widened": "what the change allowed that was not allowed before (new allowed tool, "
                                "sandbox off, approval off, new MCP server, new hook)",
    "agent.tool.name": "the agent's tool a decision was about: Bash, Write ... (agent.intervention)",
    "agent.tool.call_id": "the tool call's id in the agent's log (agent.intervention)",
    "agent.intervention.by": "who decided: policy (no terminal to ask) or operator (agent.intervention)",
    "agent.intervention.decision": "allow (once) or deny (agent.intervention)",
    "agent.intervention.action": "what the operator did: interrupt, terminate, hangup (a signal to spyglass), "
                                 "allow-once, deny (egress ask mode)",
}

_KINDS: Final = {
    "seq": "int", "ts": "int", "process.pid": "int", "ok": "bool", "thread.id": "int",
    "process.parent_pid": "int", "process.user.id": "int", "process.real_user.id": "int",
    "process.group.id": "int", "process.real_group.id": "int", "process.exit.code": "int",
    "file.owner.id": "int", "file.group.id": "int", "server.port": "int", "network.io.bytes": "int",
    "target.pid": "int", "proxy.bytes_out": "int", "proxy.bytes_in": "int",
    "dns.answers": "list", "process.command_args": "list",
    "agent.config.changes": "list", "agent.permission.widened": "list",
}


def _event_fields() -> dict[str, FieldSpec]:
    out: dict[str, FieldSpec] = {}
    for wire, attr in FIELD_NAMES.items():
        if wire == "raw_bytes":
            continue
        key = {"file.path": "path", "file.target": "target"}.get(wire, "")
        doc = EVENT_FIELD_DOCS.get(wire, "event field")
        out[wire] = FieldSpec(_KINDS.get(wire, "str"), f"ev.{attr}", doc, derived=False, key=key)
    return out


def _f(kind: str, expr: str, doc: str, key: str = "") -> FieldSpec:
    return FieldSpec(kind, expr, doc, True, key)


FIELDS: Final[dict[str, FieldSpec]] = {
    **_event_fields(),
    # the event's process, from the event or the process table
    "process.executable.path": _f("str", "fx.exe()", "executable of the event's process"),
    "process.executable": _f("str", "fx.exe()", "executable of the event's process (alias)"),
    "process.name": _f("str", "fx.name()", "base name of the executable"),
    "process.command_args": _f("list", "fx.argv()", "argv of the event's process"),
    "process.command_line": _f("str", "fx.cmdline()", "argv joined with spaces"),
    "process.working_directory": _f("str", "fx.cwd()", "working directory of the event's process"),
    "process.is_root": _f("bool", "fx.is_root()", "the process is the run's root (the agent)"),
    "process.executable.trusted": _f(
        "bool", "fx.exe_trusted()", "the executable lies in a trusted directory (exec.trusted, the "
        "system's bin and lib directories, the workspace's virtualenvs and node_modules/.bin)"),
    "process.executable.created_by_run": _f(
        "bool", "fx.exe_created()", "the executable was written by an earlier event of this run"),
    "process.executable.in_workspace": _f("bool", "fx.exe_in_ws()", "the executable is in the workspace"),
    "process.executable.launched": _f(
        "bool", "fx.launched_exe()", "the executable is the program the user launched, its interpreter, or "
        "lies in its install tree (node_modules, virtualenv, prefix), and this run did not write it"),
    "process.identity": _f(
        "str", "fx.identity()", "base name of what the executable really is: a copy, rename or link of a "
        "program keeps its source's name; a program the run wrote from scratch has none (empty)"),
    "process.parent.pid": _f("int", "fx.parent_pid()", "parent pid"),
    "process.parent.executable": _f("str", "fx.parent_exe()", "parent's executable"),
    "process.parent.name": _f("str", "fx.parent_name()", "parent's executable base name"),
    "process.parent.command_line": _f("str", "fx.parent_cmdline()", "parent's command line"),
    "process.ancestors.executable": _f(
        "list", "fx.anc_exe()", "executables of all ancestors (nearest first, not the process itself)"),
    "process.ancestors.name": _f("list", "fx.anc_name()", "base names of all ancestors' executables"),
    "process.ancestors.command_line": _f("list", "fx.anc_cmdline()", "command lines of all ancestors"),
    # files
    "file.name": _f("str", "fx.file_name()", "base name of file.path", "path"),
    "file.extension": _f("str", "fx.file_ext()", "extension of file.path without the dot", "path"),
    "file.directory": _f("str", "fx.file_dir()", "directory part of file.path", "path"),
    "file.in_workspace": _f("bool", "fx.in_ws(ev.path)", "file.path is inside a workspace root", "path"),
    "file.in_temp": _f(
        "bool", "fx.in_temp(ev.path)", "file.path is in an allowed temp/cache location (/tmp, ~/.cache, ...)",
        "path"),
    "file.in_home": _f("bool", "fx.in_home(ev.path)", "file.path is under the run's HOME", "path"),
    "file.writable": _f(
        "bool", "fx.writable(ev.path)", "file.path is where the run may write (workspace or temp/cache)", "path"),
    "file.is_secret": _f(
        "bool", "fx.is_secret(ev.path)", "file.path matches a secret glob (and no exception such as *.pub)",
        "path"),
    "file.is_honeytoken": _f("bool", "fx.is_honeytoken(ev.path)", "file.path is a honeytoken", "path"),
    "file.created_by_run": _f(
        "bool", "fx.created(ev.path)",
        "file.path was created or written by an earlier event of this run (and not deleted since)"),
    "file.secret_copy": _f(
        "bool", "fx.secret_copy(ev.path)", "file.path holds a copy of a secret this run made (copied, renamed, "
        "linked or written by a process that had read a secret)"),
    "file.target.is_secret": _f(
        "bool", "fx.is_secret(ev.target)", "file.target matches a secret glob", "target"),
    "file.target.secret_copy": _f("bool", "fx.secret_copy(ev.target)", "file.target holds a copy of a secret"),
    "file.pre_existing": _f(
        "bool", "fx.pre_existing(ev.path)", "the file existed before the run: in the workspace it is in the "
        "before-manifest (not git-ignored, not a build/cache dir); elsewhere the run did not create it"),
    "file.target.pre_existing": _f(
        "bool", "fx.pre_existing(ev.target)", "file.target existed before the run"),
    "file.user_data": _f(
        "bool", "fx.user_data(ev.path)", "a pre-existing file in a data format (database, document, mail, "
        "calendar, key store, archive, image)"),
    "file.has_copy": _f(
        "bool", "fx.has_copy(ev.path)", "the run wrote a (transformed) copy of this file earlier"),
    "file.agent_state": _f(
        "bool", "fx.is_agent_state(ev.path)", "file.path is the launched agent's own state (its adapter's "
        "`state`: databases, caches, locks, sessions, bundled skills, its login)", "path"),
    "file.is_directory": _f("bool", "fx.is_dir_open()", "the open was of a directory (O_DIRECTORY)"),
    "file.mode.executable": _f("bool", "fx.mode_has(0o111)", "file.mode has an execute bit"),
    "file.mode.setuid": _f("bool", "fx.mode_has(0o6000)", "file.mode has the setuid or setgid bit"),
    "file.mode.world_writable": _f("bool", "fx.mode_has(0o002)", "file.mode is writable by others"),
    "file.proc_other": _f(
        "bool", "fx.proc_other()", "file.path is under /proc/<pid>/ of another process than the event's"),
    "file.proc_is_monitor": _f(
        "bool", "fx.proc_is_monitor()", "file.path (or the path as typed) is /proc/<pid>/{mem,environ,fd/*,"
        "map_files/*,root/*,cwd/*,pagemap} of spyglass, its tracer or a helper (or one of their threads)"),
    "file.contains_workspace": _f(
        "bool", "fx.contains_ws(ev.path)", "file.path is a workspace root or a directory above one", "path"),
    "file.target.name": _f("str", "fx.target_name()", "base name of file.target", "target"),
    "file.target.in_workspace": _f(
        "bool", "fx.in_ws(ev.target)", "file.target is inside the workspace", "target"),
    "file.target.writable": _f(
        "bool", "fx.writable(ev.target)", "file.target is in workspace or temp", "target"),
    "file.target.in_home": _f("bool", "fx.in_home(ev.target)", "file.target is under HOME", "target"),
    # network
    "server.domain": _f(
        "str", "fx.domain()", "the name the run resolved for server.address (event or earlier net.dns)"),
    "server.host": _f("str", "fx.host()", "server.domain if known, else server.address"),
    "server.allowed": _f(
        "bool", "fx.allowed()", "the host (and port) is allowed by network.allow and not denied by network.deny"),
    "server.denied": _f("bool", "fx.denied()", "the host matches network.deny"),
    "server.is_ip_literal": _f(
        "bool", "fx.ip_literal()", "an IP address the run did not get from a name lookup"),
    "server.is_loopback": _f("bool", "fx.ip_flag('is_loopback')", "a loopback address"),
    "server.is_private": _f(
        "bool", "fx.ip_flag('is_private')", "a private, link-local or loopback address"),
    "server.is_metadata": _f("bool", "fx.is_metadata()", "a cloud metadata service address"),
    "server.is_dns": _f(
        "bool", "fx.is_dns()", "port 53 to a resolver of /etc/resolv.conf as recorded for the run (name lookups)"),
    "network.is_inet": _f("bool", "fx.is_inet()", "an IPv4/IPv6 socket (not a unix socket)"),
    # targets of sys.sensitive / kill / ptrace
    "target.in_run": _f("bool", "fx.target_in_run()", "target.pid is a process of this run"),
    "target.is_monitor": _f(
        "bool", "fx.target_is_monitor()",
        "target.pid is spyglass, its tracer or a sandbox helper (RunMeta.extra monitor_pids, sandbox.helper_pids)"),
    "target.process.executable": _f("str", "fx.target_exe()", "executable of target.pid (if in the run)"),
    "target.process.command_line": _f(
        "str", "fx.target_cmdline()", "command line of target.pid (if in the run)"),
}

_MODE_NUM = re.compile(r"(?:0o)?([0-7]{3,6})\b")
_MODE_FLAGS: Final = {"S_ISUID": 0o4000, "S_ISGID": 0o2000, "S_ISVTX": 0o1000}


def parse_mode(text: str | None) -> int | None:
    """Numeric mode from ``0755``, ``04755``, ``S_ISUID|0755``; None if absent."""
    if not text:
        return None
    value = 0
    found = False
    for part in text.replace(" ", "").split("|"):
        if part in _MODE_FLAGS:
            value |= _MODE_FLAGS[part]
            found = True
            continue
        m = _MODE_NUM.fullmatch(part)
        if m:
            value |= int(m.group(1), 8)
            found = True
    return value if found else None
