"""The trajectory schema: one typed event per kernel fact.

Field names on the wire follow OpenTelemetry semantic conventions where one
exists (``process.pid``, ``file.path``, ``server.address`` ...).  In Python the
fields have short snake_case names; ``FIELD_NAMES`` maps wire names to them.

Text that is not valid UTF-8 (file names, arguments) is stored in the text
field with each bad byte written as ``\\xHH`` and, beside it, the exact bytes
in ``raw_bytes[<wire field name>]`` as base64, so nothing is lost.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

SCHEMA_VERSION: Final = "1.0"

#: Every event type the schema knows.  Backends emit a subset.
EVENT_TYPES: Final = (
    "process.start",
    "process.exec",
    "process.exit",
    "process.detach",
    "file.read",
    "file.write",
    "file.create",
    "file.delete",
    "file.rename",
    "file.link",
    "file.symlink",
    "file.chmod",
    "file.chown",
    "file.mkdir",
    "file.truncate",
    "net.connect",
    "net.bind",
    "net.listen",
    "net.send",
    "net.dns",
    "priv.change",
    "sys.sensitive",
    "proxy.request",
    "sandbox.denied",
    "agent.permission_change",
    "agent.memory_change",
    "agent.intervention",
)

#: every file event but a read: what changes a file or its name, links, mode or owner
FILE_WRITE_TYPES: Final = frozenset(t for t in EVENT_TYPES if t.startswith("file.") and t != "file.read")


def _f(name: str, default: object = None) -> Any:
    return msgspec.field(default=default, name=name)


class Event(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    """One normalized kernel fact.  Unset optional fields are omitted on the wire."""

    seq: int = 0
    ts: int = 0  # ns since the epoch
    type: str
    pid: int = _f("process.pid", 0)
    ok: bool = True  # on the wire only when false
    errno: str | None = None
    syscall: str | None = None
    tid: int | None = _f("thread.id")

    # process.*
    ppid: int | None = _f("process.parent_pid")
    exe: str | None = _f("process.executable.path")
    argv: list[str] | None = _f("process.command_args")
    cwd: str | None = _f("process.working_directory")
    uid: int | None = _f("process.user.id")
    ruid: int | None = _f("process.real_user.id")
    gid: int | None = _f("process.group.id")
    rgid: int | None = _f("process.real_group.id")
    exit_code: int | None = _f("process.exit.code")
    signal: str | None = _f("process.exit.signal")

    # file.*
    path: str | None = _f("file.path")
    raw_path: str | None = _f("file.raw_path")
    target: str | None = _f("file.target")
    mode: str | None = _f("file.mode")
    flags: str | None = _f("file.flags")
    owner: int | None = _f("file.owner.id")
    group: int | None = _f("file.group.id")

    # net.*
    address: str | None = _f("server.address")
    port: int | None = _f("server.port")
    domain: str | None = _f("server.domain")
    transport: str | None = _f("network.transport")
    net_type: str | None = _f("network.type")
    nbytes: int | None = _f("network.io.bytes")
    dns_name: str | None = _f("dns.question.name")
    dns_answers: list[str] | None = _f("dns.answers")

    # sys.sensitive / priv.change
    target_pid: int | None = _f("target.pid")
    detail: str | None = None

    # proxy.request / sandbox.denied
    method: str | None = _f("http.request.method")
    decision: str | None = _f("proxy.decision")
    rule: str | None = _f("proxy.rule")
    reason: str | None = None
    bytes_out: int | None = _f("proxy.bytes_out")
    bytes_in: int | None = _f("proxy.bytes_in")

    # agent.permission_change / agent.memory_change: what kind of file, what changed in it
    config_kind: str | None = _f("agent.config.kind")
    changes: list[str] | None = _f("agent.config.changes")
    widened: list[str] | None = _f("agent.permission.widened")

    # agent.intervention: a tool call decided before it ran (``spyglass run --ask``)
    tool_name: str | None = _f("agent.tool.name")
    tool_call_id: str | None = _f("agent.tool.call_id")
    actor: str | None = _f("agent.intervention.by")  # "policy" | "operator"
    verdict: str | None = _f("agent.intervention.decision")  # "allow" | "deny"
    action: str | None = _f("agent.intervention.action")  # interrupt, terminate, hangup, allow-once, deny

    # exact bytes of fields that were not valid UTF-8: wire field name -> base64
    raw_bytes: dict[str, str] | None = None


def _wire_names() -> dict[str, str]:
    info = msgspec.structs.fields(Event)
    return {f.encode_name: f.name for f in info}


#: wire name ("file.path") -> attribute name ("path")
FIELD_NAMES: Final[dict[str, str]] = _wire_names()
#: attribute name -> wire name
WIRE_NAMES: Final[dict[str, str]] = {v: k for k, v in FIELD_NAMES.items()}


def get_field(event: Event, wire_name: str) -> object:
    """Value of a field by its wire name (``"file.path"``), or None."""
    attr = FIELD_NAMES.get(wire_name)
    return getattr(event, attr) if attr else None
