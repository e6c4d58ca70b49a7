"""Claude Code (npm ``@anthropic-ai/claude-code``): a native binary, ``bin/claude.exe`` in the package.

Recognised by the npm package its executable belongs to, or by the names
``claude.exe``/``claude`` in records of other machines.  Pointed at the stub
by ``ANTHROPIC_BASE_URL`` and a config dir of its own (``CLAUDE_CONFIG_DIR``,
so the user's ``~/.claude`` is never touched) whose ``settings.json`` may add
per-run PreToolUse/PostToolUse hooks (:mod:`spyglass.agents.hooks`).

It runs each Bash tool call as ``/bin/bash -c 'source SNAPSHOT ... && eval
'CMD' < /dev/null && pwd -P >| /tmp/claude-XXXX-cwd'``: :meth:`model_command`
finds ``CMD`` in it.  At start it snapshots the user's shell (``bash -c -l
'SNAPSHOT_FILE=...'``, which sources ``~/.bashrc``) and reads the environment
(``bash -c env``): both are its own.

Its log: the session transcript ``$CLAUDE_CONFIG_DIR/projects/<cwd>/<session>.jsonl``
(``assistant`` lines with ``tool_use`` blocks, ``user`` lines with their
``tool_result``), and the same shape on stdout with ``--output-format stream-json``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spyglass.agents.adapters.base import AgentAdapter, base, npm_package
from spyglass.agents.agent_logs import AgentLog, ToolCall, Turn, iso_ts

if TYPE_CHECKING:  # the hooks' server loads only in a run that starts it
    from spyglass.agents.hooks import Decider, HookServer

PACKAGE = "@anthropic-ai/claude-code"
#: what turns off everything that phones home (telemetry, update checks, error reports, the rest)
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
_EDIT_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
_EXIT = re.compile(r"^Exit code (\d+)")


class ClaudeCodeAdapter(AgentAdapter):
    name = "claude"
    title = "Claude Code"
    package = "@anthropic-ai/claude-code (npm)"
    gives = ("live", "transcript", "hooks", "claims")
    internal_markers = ("SNAPSHOT_FILE=", "# Snapshot file", "spyglass-hook.py")
    internal_commands = frozenset({"env"})
    log_patterns = (re.compile(r"/projects/[^/]+/[0-9a-f-]{36}\.jsonl$"),)
    state = (
        "~/.claude", "~/.claude.json", "~/.claude.json.*", "~/.claude/projects/**", "~/.claude/todos/**",
        "~/.claude/statsig/**", "~/.claude/shell-snapshots/**", "~/.claude/ide/**",
        "~/.claude/history.jsonl", "~/.claude/.credentials.json", "~/.claude/session-env/**",
        "~/.claude/file-history/**", "~/.claude/plans/**", "~/.claude/debug/**", "~/.claude/*.lock",
        "~/.claude/local/**", "~/.claude/downloads/**", "~/.claude/backups/**", "~/.claude/plugins/**",
        "~/.claude/cache/**", "~/.claude/telemetry/**", "~/.claude/.claude.json", "~/.claude/.claude.json.*",
        "~/.claude/sessions", "~/.claude/sessions/**",
    )  # fmt: skip
    program_names = ("claude", "claude.exe", "cli.js")
    package_parts = ("/@anthropic-ai/claude-code",)

    def identify(self, exe: str | None, argv: Sequence[str] | None) -> bool:
        args = list(argv or [])
        node = bool(args) and base(args[0]) in ("node", "nodejs")
        for path in (exe, *(args[1:2] if node else [])):
            pkg = npm_package(path) if path and path.startswith("/") else None
            if pkg is not None:
                return pkg[0] == PACKAGE or pkg[0].startswith(PACKAGE + "-")
        a0 = base(args[0]) if args else ""
        return base(exe) == "claude.exe" or a0 in ("claude", "claude.exe")

    def model_command(self, text: str) -> str:
        """``CMD`` of the ``... && eval 'CMD' < /dev/null && pwd -P >| ...`` it runs a Bash call with."""
        at = text.find(" eval ")
        if at < 0 or "source " not in text[:at]:
            return text
        lex = shlex.shlex(text[at + 6 :], posix=True)
        lex.whitespace_split = True
        try:
            word = lex.get_token()
        except ValueError:
            return text
        return word if word else text

    def prepare_env(
        self, env: dict[str, str], stub_url: str, scratch: Path, model: str, argv: Sequence[str]
    ) -> dict[str, str]:
        env = super().prepare_env(env, stub_url, scratch, model, argv)
        env.update(QUIET_ENV)
        env["ANTHROPIC_BASE_URL"] = stub_url.removesuffix("/v1")
        env["ANTHROPIC_API_KEY"] = "spyglass-stub"
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # it refuses --dangerously-skip-permissions as root otherwise
        config = config_dir(scratch / "claude-config", str(self.home(env)))
        env["CLAUDE_CONFIG_DIR"] = str(config)
        return env

    def start_hooks(
        self, env: dict[str, str], scratch: Path, *, ask: bool = False, decider: Decider | None = None,
        view: str | None = None,
    ) -> HookServer | None:
        """PreToolUse/PostToolUse hooks in the per-run ``settings.json`` reporting to a unix socket."""
        from spyglass.agents.hooks import HookServer, install_hooks

        config = Path(env.get("CLAUDE_CONFIG_DIR") or config_dir(scratch / "claude-config"))
        sock = _hook_socket(config.parent / "hook.sock", scratch, view)
        server = HookServer(sock, decider)
        settings_path = config / "settings.json"
        try:
            settings = json.loads(settings_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            settings = {"env": dict(QUIET_ENV)}
        settings["hooks"] = install_hooks(config, str(sock), ask=ask)
        settings_path.write_text(json.dumps(settings, indent=2), encoding="utf-8")
        return server

    def hooks_argv(
        self, argv: Sequence[str], scratch: Path, *, ask: bool = False, decider: Decider | None = None,
        view: str | None = None,
    ) -> tuple[list[str], HookServer] | None:
        """``--settings FILE`` with the hooks added to the command line: the user's own settings stay."""
        from spyglass.agents.hooks import HookServer, install_hooks

        scratch.mkdir(parents=True, exist_ok=True)
        sock = _hook_socket(scratch / "hook.sock", scratch, view)
        server = HookServer(sock, decider)
        settings = scratch / "spyglass-settings.json"
        hooks = install_hooks(scratch, str(sock), ask=ask)
        settings.write_text(json.dumps({"hooks": hooks}, indent=2), encoding="utf-8")
        return [*argv, "--settings", str(settings)], server

    def parse_log(self, text: str, whole: Any, lines: list[dict[str, Any]], source: str) -> AgentLog | None:
        if not any(
            o.get("type") in ("assistant", "user")
            and isinstance(o.get("message"), dict)
            and ("sessionId" in o or "session_id" in o)
            for o in lines
        ):
            return None
        return parse_transcript(lines)

    def home(self, env: Mapping[str, str]) -> Path:
        """``CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
        return Path(env.get("CLAUDE_CONFIG_DIR") or _user_dir(env))

    def is_named_in(self, programs: Sequence[str]) -> bool:
        """By name only beside another program file: a lone ``cli.js`` is any node program's."""
        return super().is_named_in(programs) and not all(base(p) == "cli.js" for p in programs)

    def install_root(self, exe: str | None, argv: Sequence[str] | None = None) -> str | None:
        pkg = npm_package(exe) if exe else None
        if pkg is None or not pkg[0].startswith(PACKAGE):
            return None
        return pkg[1]

    def mcp_servers(self, cwd: str, env: Mapping[str, str], argv: Sequence[str] = ()) -> dict[str, list[str]]:
        """stdio servers of the project's ``.mcp.json``, the user's ``.claude.json`` (``mcpServers``)
        and the ``--mcp-config`` files (or JSON) of its command line."""
        out: dict[str, list[str]] = {}
        config = self.home(env)
        user_json = (
            Path(config, ".claude.json") if env.get("CLAUDE_CONFIG_DIR") else Path(config).parent / ".claude.json"
        )
        sources: list[Path | str] = [user_json, Path(cwd, ".mcp.json")]
        args = list(argv)
        for i, a in enumerate(args):
            given = args[i + 1] if a == "--mcp-config" and i + 1 < len(args) else None
            if a.startswith("--mcp-config="):
                given = a.split("=", 1)[1]
            if given:
                sources.append(given if given.lstrip().startswith("{") else Path(cwd, given))
        for path in sources:
            try:
                data = json.loads(path if isinstance(path, str) else path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            tables = [data.get("mcpServers")]
            project = (data.get("projects") or {}).get(cwd) if isinstance(data.get("projects"), dict) else None
            if isinstance(project, dict):
                tables.append(project.get("mcpServers"))
            for table in tables:
                for name, spec in table.items() if isinstance(table, dict) else []:
                    if (
                        isinstance(spec, dict)
                        and isinstance(spec.get("command"), str)
                        and spec.get("type", "stdio") == "stdio"
                    ):
                        extra: list[Any] = spec["args"] if isinstance(spec.get("args"), list) else []
                        out[str(name)] = [spec["command"], *(str(a) for a in extra)]
        return out


def _user_dir(env: Mapping[str, str]) -> str:
    return str(Path(env.get("HOME") or os.path.expanduser("~")) / ".claude")


def config_dir(directory: Path, user_dir: str | None = None, hooks: Mapping[str, Any] | None = None) -> Path:
    """A per-run ``CLAUDE_CONFIG_DIR``: ``settings.json`` (with ``hooks`` if given) and links to
    the user's ``skills``, ``agents``, ``commands`` and ``CLAUDE.md``, so the agent sees the same."""
    directory.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {"env": dict(QUIET_ENV)}
    if hooks:
        settings["hooks"] = dict(hooks)
    (directory / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    if user_dir:
        for name in ("skills", "agents", "commands", "CLAUDE.md"):
            src = Path(user_dir) / name
            if src.exists() and not (directory / name).exists():
                (directory / name).symlink_to(src.resolve())
    return directory


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(c.get("text")) for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def parse_transcript(lines: list[dict[str, Any]]) -> AgentLog:
    """A session transcript (or ``--output-format stream-json`` output): the assistant's
    messages (one line per content block, grouped by message id) with their ``tool_use``
    blocks, and the ``tool_result`` of each from the user lines that follow."""
    log = AgentLog(agent="claude", format="claude-transcript")
    by_msg: dict[str, Turn] = {}
    by_id: dict[str, ToolCall] = {}
    n = 0
    for o in lines:
        typ = o.get("type")
        msg = o.get("message")
        if typ == "result" and isinstance(o.get("result"), str):
            log.final = o["result"]
            log.events += 1
            continue
        if typ not in ("assistant", "user") or not isinstance(msg, dict):
            continue
        log.events += 1
        content = msg.get("content")
        if typ == "user":
            result: dict[str, Any] = o["toolUseResult"] if isinstance(o.get("toolUseResult"), dict) else {}
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                call = by_id.get(str(block.get("tool_use_id")))
                if call is None:
                    continue
                out = _text_of(block.get("content")) or ""
                call.output = out
                m = _EXIT.match(out) if block.get("is_error") else None
                call.exit_code = int(m.group(1)) if m else (1 if block.get("is_error") else 0)
                if call.tool in _EDIT_TOOLS and result.get("type") == "create":
                    log.files = [(p, "added" if p == call.command else k) for p, k in log.files]
            continue
        key = str(msg.get("id") or o.get("uuid") or len(log.turns))
        turn = by_msg.get(key)
        if turn is None:
            turn = by_msg[key] = Turn()
            log.turns.append(turn)
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                turn.text = "\n".join([*([turn.text] if turn.text else []), block["text"]])
            elif block.get("type") == "tool_use":
                name = str(block.get("name") or "")
                inp: dict[str, Any] = block["input"] if isinstance(block.get("input"), dict) else {}
                cid = str(block.get("id")) if block.get("id") else None
                if name == "Bash" and isinstance(inp.get("command"), str):
                    n += 1
                    call = ToolCall(n=n, command=inp["command"], turn=len(log.turns) - 1, tool=name, call_id=cid)
                    call.ts = iso_ts(o.get("timestamp"))
                    turn.calls.append(call)
                    if cid:
                        by_id[cid] = call
                else:
                    turn.other_calls.append((name, json.dumps(inp)))
                    path = inp.get(_EDIT_TOOLS.get(name, ""))
                    if isinstance(path, str):
                        log.files.append((path, "changed"))
                        if cid:  # for the result: a Write that created the file
                            by_id[cid] = ToolCall(n=0, command=path, tool=name, call_id=cid)
    return log


def _hook_socket(sock: Path, scratch: Path, view: str | None) -> Path:
    """Where the hooks' socket goes: ``sock`` in the run's scratch, unless the name the agent connects
    to (in a sandbox, its view of scratch) is too long for a socket's address; then a short directory
    of the host's /tmp (a sandbox with a short view needs none: a directory there would not be seen)."""
    import tempfile

    from spyglass.agents.hooks import SOCKET_PATH_MAX

    seen = str(sock).replace(str(scratch), view, 1) if view else str(sock)
    if len(os.fsencode(seen)) <= SOCKET_PATH_MAX:
        return sock

    return Path(tempfile.mkdtemp(prefix="spyglass-hook-")) / "hook.sock"
