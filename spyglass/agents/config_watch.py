"""Permission and memory changes: what an agent's settings and memory files became.

A pipeline sink.  At the start it reads the files that decide what an agent
may do (Claude Code ``.claude/settings.json`` and ``settings.local.json``,
``~/.claude.json``'s MCP servers, codex ``config.toml``, ``.mcp.json`` and
``.cursor/mcp.json``) and what it remembers (``CLAUDE.md``, ``AGENTS.md``,
``GEMINI.md``, codex memories, ``.cursor/rules``, ``.cursorrules``,
``copilot-instructions.md``) in the workspace, the working directory and
HOME.  When a process of the run writes one of them (any path whose name
and place say it is such a file, known at the start or not), the file is
read again once that process exits, or at the end of the run, and the
difference becomes an ``agent.permission_change`` or ``agent.memory_change``
event: the keys that changed (settings), or the lines (memory).  A change
that allows more than before (a new allowed tool or command, a new hook,
approval or sandbox turned off, a new MCP server) lists it in
``agent.permission.widened``; rule ``agent-permission-widened`` alerts on it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, Final

from spyglass.events.schema import FILE_WRITE_TYPES, Event
from spyglass.pipeline import RunContext, Sink

MAX_BYTES: Final = 1 << 20
MAX_CHANGES: Final = 50
MEMORY_NAMES: Final = frozenset(
    {"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENTS.override.md", "GEMINI.md", ".cursorrules",
     "copilot-instructions.md"}
)
#: values of codex settings that take a guard away
_CODEX_OPEN: Final = {
    "approval_policy": {"never", "on-failure"},
    "sandbox_mode": {"danger-full-access"},
    "sandbox_workspace_write.network_access": {"True", "true"},
}
_CLAUDE_OPEN_MODES: Final = {"bypassPermissions", "acceptEdits"}


def classify(path: str, codex_home: str | None = None) -> str | None:
    """The kind of agent file at ``path``, or None if it is not one."""
    head, _, base = path.rpartition("/")  # os.path.basename and dirname, without their calls
    parent = head.rpartition("/")[2]
    if parent == ".claude" and base in ("settings.json", "settings.local.json"):
        return "claude-settings"
    if base == ".claude.json":
        return "claude-state"
    if base == ".mcp.json" or (parent == ".cursor" and base == "mcp.json"):
        return "mcp"
    if base == "config.toml" and (parent == ".codex" or (codex_home and os.path.dirname(path) == codex_home)):
        return "codex-config"
    if base in MEMORY_NAMES or "/.cursor/rules/" in path or "/.codex/memories/" in path:
        return "memory"
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        return None
    return data.decode("utf-8", "replace")


def parse_settings(kind: str, text: str | None) -> dict[str, Any] | None:
    """The settings as a dict ({} for a missing file), or None if unreadable (being written, say)."""
    if text is None or not text.strip():
        return {}
    try:
        if kind == "codex-config":
            import tomllib  # only for codex's config (its import compiles regular expressions)

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError:  # tomllib.TOMLDecodeError is one
        return None
    if kind == "claude-state" and isinstance(data, dict):  # only the MCP servers of this big state file
        keep: dict[str, Any] = {"mcpServers": data.get("mcpServers") or {}}
        for proj, conf in (data.get("projects") or {}).items():
            if isinstance(conf, dict) and conf.get("mcpServers"):
                keep[f"projects.{proj}.mcpServers"] = conf["mcpServers"]
        return keep
    return data if isinstance(data, dict) else None


def _flatten(node: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(node, dict):
        if not node and prefix:
            out[prefix] = "{}"
        for k, v in node.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(node, list) and all(isinstance(v, str | int | float | bool) for v in node):
        for v in node:
            out[f"{prefix}[]={v}"] = ""
    else:
        out[prefix] = json.dumps(node, sort_keys=True) if isinstance(node, list | dict) else str(node)


def diff_settings(kind: str, before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(changes, widened): each key added (+), removed (-) or changed (~), and what now allows more."""
    a: dict[str, str] = {}
    b: dict[str, str] = {}
    _flatten(before, "", a)
    _flatten(after, "", b)
    changes: list[str] = []
    widened: list[str] = []
    for key in sorted(set(a) | set(b)):
        if key in a and key not in b:
            changes.append(f"-{key}" + (f": {a[key]}" if a[key] else ""))
            if kind == "claude-settings" and (key.startswith(("permissions.deny[]", "permissions.ask[]"))):
                widened.append(f"no longer {key.split('[]=')[0].rsplit('.', 1)[1]}: {key.split('[]=', 1)[1]}")
        elif key not in a:
            changes.append(f"+{key}" + (f": {b[key]}" if b[key] else ""))
            widened.extend(_widens(kind, key, None, b[key]))
        elif a[key] != b[key]:
            changes.append(f"~{key}: {a[key]} -> {b[key]}")
            widened.extend(_widens(kind, key, a[key], b[key]))
    return changes, _dedup(widened)


def _widens(kind: str, key: str, old: str | None, new: str) -> list[str]:
    if kind == "claude-settings":
        if key.startswith("permissions.allow[]="):
            return [f"allowed: {key.split('=', 1)[1]}"]
        if key.startswith("permissions.additionalDirectories[]="):
            return [f"directory opened: {key.split('=', 1)[1]}"]
        if key == "permissions.defaultMode" and new in _CLAUDE_OPEN_MODES:
            return [f"permission mode {new}"]
        if key.startswith("hooks.") and old is None:
            return [f"hook added: {key}"]
        if key in ("enableAllProjectMcpServers",) and new.lower() == "true":
            return ["all project MCP servers enabled"]
        if key.startswith("enabledMcpjsonServers[]="):
            return [f"MCP server enabled: {key.split('=', 1)[1]}"]
    if kind == "codex-config":
        for setting, open_values in _CODEX_OPEN.items():
            if key.endswith(setting) and new in open_values:
                return [f"{setting} = {new}"]
        if key.startswith("mcp_servers.") and old is None:
            return [f"MCP server added: {key.split('.')[1]}"]
    if "mcpServers." in key and old is None:
        name = key.split("mcpServers.", 1)[1].split(".", 1)[0]
        return [f"MCP server added: {name}"]
    return []


def diff_memory(before: str, after: str) -> list[str]:
    import difflib  # only when there is a diff to show

    out = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith(("+++", "---", "@@")):
            continue
        out.append(line[:500])
    return out


def _dedup(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


class ConfigWatch(Sink):
    """Pipeline sink: agent permission and memory files, before and after each write."""

    name = "config-watch"

    def __init__(self, roots: Iterable[str], home: str, env: dict[str, str] | None = None) -> None:
        env = env or {}
        self.home = home
        self.codex_home = os.path.realpath(env.get("CODEX_HOME") or os.path.join(home, ".codex"))
        self.claude_home = os.path.realpath(env.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude"))
        self.roots = _dedup(os.path.realpath(r) for r in roots)
        self.snap: dict[str, str] = {}  # path -> text at the start or at the last diff
        self.dirty: dict[str, set[int]] = {}  # path -> pids that wrote it since
        self.ctx: RunContext | None = None
        self.emitted = 0

    def candidates(self) -> list[str]:
        h = self.home
        out = [
            os.path.join(self.claude_home, "settings.json"),
            os.path.join(self.claude_home, "settings.local.json"),
            os.path.join(self.claude_home, "CLAUDE.md"),
            os.path.join(h, ".claude.json"),
            os.path.join(self.codex_home, "config.toml"),
            os.path.join(self.codex_home, "AGENTS.md"),
            os.path.join(h, ".cursor", "mcp.json"),
        ]
        for r in self.roots:
            out += [os.path.join(r, ".claude", n) for n in ("settings.json", "settings.local.json", "CLAUDE.md")]
            out += [os.path.join(r, n) for n in (*sorted(MEMORY_NAMES), ".mcp.json")]
            out += [os.path.join(r, ".cursor", "mcp.json"), os.path.join(r, ".codex", "config.toml")]
            out += [os.path.join(r, ".github", "copilot-instructions.md")]
            out += _listing(os.path.join(r, ".cursor", "rules"))
        out += _listing(os.path.join(self.codex_home, "memories"))
        return _dedup(out)

    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        for path in self.candidates():
            text = _read(path)
            if text is not None:
                self.snap[path] = text

    def _kind(self, path: str) -> str | None:
        kind = classify(path, self.codex_home)
        if kind is None and os.path.dirname(path) == self.claude_home:
            base = os.path.basename(path)
            kind = "claude-settings" if base in ("settings.json", "settings.local.json") else None
        return kind

    def event(self, ev: Event) -> None:
        t = ev.type
        if t in FILE_WRITE_TYPES and ev.ok:
            for p in (ev.path, ev.target):
                if p and self._kind(p) is not None:
                    self.dirty.setdefault(p, set()).add(ev.pid)
        elif t == "process.exit" and self.dirty:
            ready = [p for p, pids in self.dirty.items() if ev.pid in pids]
            for p in ready:
                pids = self.dirty[p]
                pids.discard(ev.pid)
                if not pids:
                    del self.dirty[p]
                self._check(p, ev.pid)

    def flush(self) -> None:
        """Diff every file written and not diffed yet (at the end of the run)."""
        for p, pids in list(self.dirty.items()):
            del self.dirty[p]
            self._check(p, min(pids) if pids else 0)

    def _check(self, path: str, pid: int) -> None:
        kind = self._kind(path)
        if kind is None or self.ctx is None or self.ctx.pipeline is None:
            return
        before_text = self.snap.get(path, "")
        after_text = _read(path) or ""
        if after_text == before_text:
            return
        widened: list[str] = []
        if kind == "memory":
            changes = diff_memory(before_text, after_text)
            etype = "agent.memory_change"
        else:
            before, after = parse_settings(kind, before_text), parse_settings(kind, after_text)
            if before is None or after is None:
                changes, widened = [f"~{os.path.basename(path)}: unparsable"], []
            else:
                changes, widened = diff_settings(kind, before, after)
            if not changes:
                self.snap[path] = after_text
                return
            etype = "agent.permission_change"
        self.snap[path] = after_text
        more = len(changes) - MAX_CHANGES
        changes = changes[:MAX_CHANGES] + ([f"... {more} more"] if more > 0 else [])
        ev = Event(
            type=etype,
            pid=pid,
            path=path,
            config_kind=kind,
            changes=changes,
            widened=widened or None,
        )
        self.emitted += 1
        self.ctx.pipeline.feed(ev)

    def done(self, ctx: RunContext) -> None:
        self.flush()


def _listing(d: str) -> list[str]:
    try:
        return [os.path.join(d, n) for n in sorted(os.listdir(d))]
    except OSError:
        return []
