"""OpenAI Codex CLI (npm ``@openai/codex``): a node launcher that runs a native binary.

Recognised by the npm package its executable belongs to (``@openai/codex``,
``@openai/codex-linux-x64`` ...), or by the names ``codex``/``codex.js`` in
records of other machines.  Pointed at the stub by a ``CODEX_HOME`` of its
own.  Its logs: the ``exec --json`` stream on stdout (also the older
``{"msg": ...}`` form) and the session rollouts under ``$CODEX_HOME/sessions``;
both give tool calls, and the stream also the files it changed and its final
message (the claims :mod:`spyglass.evidence.claims` checks).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spyglass.agents.adapters.base import AgentAdapter, base, npm_package
from spyglass.agents.agent_logs import (
    AgentLog,
    ToolCall,
    Turn,
    command_of_string,
    iso_ts,
    shell_command,
    unwrap_shell,
)

#: The provider id codex's config.toml gets for the stub.
CODEX_PROVIDER = "spyglass-stub"


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def codex_config_toml(stub_url: str, model: str = "spyglass-stub") -> str:
    """A codex ``config.toml`` that uses the stub over the responses API, runs
    commands without asking, and turns off update checks, analytics and
    remote plugins/apps."""
    return f"""# written by spyglass: codex against a scripted model on loopback
model = {_toml_str(model)}
model_provider = "{CODEX_PROVIDER}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.{CODEX_PROVIDER}]
name = "spyglass model stub"
base_url = {_toml_str(stub_url)}
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
"""


def codex_home(directory: str | Path, stub_url: str, model: str = "spyglass-stub") -> Path:
    """Create (or update) a ``CODEX_HOME`` at ``directory`` whose config.toml points at
    ``stub_url`` (``http://127.0.0.1:PORT/v1``); returns the directory."""
    home = Path(directory)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(codex_config_toml(stub_url, model), encoding="utf-8")
    return home


class CodexAdapter(AgentAdapter):
    name = "codex"
    title = "codex"
    package = "@openai/codex (npm)"
    gives = ("live", "transcript", "claims")
    internal_markers = (
        "# Snapshot file",  # a snapshot of the user's shell environment
        "__codex_snapshot",
        "/shell_snapshots/",  # checking a snapshot it wrote
    )
    wrapper_markers = ("__CODEX_SNAPSHOT_OVERRIDE",)
    log_patterns = (re.compile(r"/sessions/\d{4}/\d\d/\d\d/rollout-[^/]+\.jsonl$"),)
    state = (
        "~/.codex", "~/.codex/skills", "~/.codex/memories/**", "~/.codex/*.sqlite", "~/.codex/*.sqlite-*",
        "~/.codex/*.sqlite*", "~/.codex/*.db", "~/.codex/*.db-*",
        "~/.codex/installation_id", "~/.codex/auth.json", "~/.codex/version.json",
        "~/.codex/models_cache.json", "~/.codex/internal_storage.json", "~/.codex/history.jsonl",
        "~/.codex/*.tmp", "~/.codex/.tmp*/**", "~/.codex/tmp/**", "~/.codex/cache/**",
        "~/.codex/sessions/**", "~/.codex/archived_sessions/**", "~/.codex/log/**", "~/.codex/logs/**",
        "~/.codex/shell_snapshots/**", "~/.codex/thread-writer-locks/**", "~/.codex/skills/.system/**",
        "~/.codex/*.lock", "~/.codex/.lock*",
    )  # fmt: skip
    program_names = ("codex", "codex.js")
    package_parts = ("/@openai/codex",)

    def identify(self, exe: str | None, argv: Sequence[str] | None) -> bool:
        args = list(argv or [])
        if self.is_setup_reexec(args):
            return True
        for path in (exe, *(args[1:2] if args and base(args[0]) in ("node", "nodejs") else [])):
            pkg = npm_package(path) if path and path.startswith("/") else None
            if pkg is not None and pkg[0].startswith("@openai/codex"):
                return True
        a0 = base(args[0]) if args else ""
        if base(exe) == "codex" or a0 in ("codex", "codex.js"):
            return True
        node = a0 in ("node", "nodejs") or base(exe) in ("node", "nodejs")
        return node and len(args) > 1 and base(args[1]) in ("codex", "codex.js")

    def is_setup_reexec(self, argv: Sequence[str] | None) -> bool:
        return any(a.startswith("--codex-run-as-") for a in (argv or [])[1:3])

    def prepare_env(
        self, env: dict[str, str], stub_url: str, scratch: Path, model: str, argv: Sequence[str]
    ) -> dict[str, str]:
        """A fresh ``CODEX_HOME`` in ``scratch`` whose config points at the stub; the user's
        ``skills`` and ``AGENTS.md`` are linked into it so the agent sees the same skills."""
        env = super().prepare_env(env, stub_url, scratch, model, argv)
        home = codex_home(scratch / "codex-home", stub_url, model)
        user_home = self.home(env)
        if user_home:
            for name in ("skills", "AGENTS.md"):
                src = user_home / name
                if src.exists() and not (home / name).exists():
                    (home / name).symlink_to(src.resolve())
        env["CODEX_HOME"] = str(home)
        return env

    def prepare_env_in_home(self, env: dict[str, str], stub_url: str, model: str) -> dict[str, str] | None:
        """Its config.toml for the stub written into its home (``CODEX_HOME``, else ``~/.codex``)."""
        home = self.home(env)
        if home is None:
            return None
        env = super().prepare_env(env, stub_url, home, model, ())
        env["CODEX_HOME"] = str(codex_home(home, stub_url, model))
        return env

    def home(self, env: Mapping[str, str]) -> Path | None:
        """``CODEX_HOME``, else ``~/.codex``."""
        if env.get("CODEX_HOME"):
            return Path(env["CODEX_HOME"])
        return Path(env["HOME"]) / ".codex" if env.get("HOME") else None

    def parse_log(self, text: str, whole: Any, lines: list[dict[str, Any]], source: str) -> AgentLog | None:
        kinds = {str(o.get("type")) for o in lines}
        if kinds & {"session_meta", "response_item", "event_msg", "turn_context"}:
            return parse_rollout(lines)
        if kinds & {"thread.started", "turn.started", "item.started", "item.completed", "turn.completed"}:
            return parse_exec_json(lines)
        if any(isinstance(o.get("msg"), dict) for o in lines):
            return parse_exec_json(lines)
        return None

    def install_root(self, exe: str | None, argv: Sequence[str] | None = None) -> str | None:
        pkg = npm_package(exe) if exe else None
        if pkg is None or not pkg[0].startswith("@openai/codex"):
            return None
        scope = Path(pkg[1]).parent  # node_modules/@openai: the launcher and its native binary's package
        return str(scope) if scope.name.startswith("@") else pkg[1]

    def mcp_servers(self, cwd: str, env: Mapping[str, str], argv: Sequence[str] = ()) -> dict[str, list[str]]:
        """``[mcp_servers.NAME]`` tables with a ``command`` in ``$CODEX_HOME/config.toml``."""
        home = self.home(env)
        if home is None:
            return {}
        try:
            text = (home / "config.toml").read_text(encoding="utf-8")
            import tomllib  # only when there is a config (its import compiles regular expressions)

            data = tomllib.loads(text)
        except (OSError, ValueError):
            return {}
        out: dict[str, list[str]] = {}
        servers = data.get("mcp_servers")
        for name, spec in servers.items() if isinstance(servers, dict) else []:
            if isinstance(spec, dict) and isinstance(spec.get("command"), str):
                args: list[Any] = spec["args"] if isinstance(spec.get("args"), list) else []
                out[str(name)] = [spec["command"], *(str(a) for a in args)]
        return out


def _item_fields(item: dict[str, Any]) -> dict[str, Any]:
    details = item.get("details")
    return {**item, **details} if isinstance(details, dict) else item


def parse_exec_json(lines: list[dict[str, Any]]) -> AgentLog:
    """codex exec --json (and the older ``{"msg": ...}`` events): commands, file changes,
    messages in order.  The output does not mark turn boundaries, so a turn is a
    message and the command right after it, or a command alone."""
    log = AgentLog(agent="codex", format="codex-exec-json")
    n = 0
    seen: dict[str, ToolCall] = {}

    def call_for(key: str, command: Any) -> ToolCall:
        nonlocal n
        call = seen.get(key)
        if call is None:
            if not log.turns or log.turns[-1].calls or log.turns[-1].other_calls:
                log.turns.append(Turn())
            n += 1
            if isinstance(command, list):
                words = [str(a) for a in command]
                argv: list[str] | None = words
                text = unwrap_shell(words) or " ".join(words)
            else:
                text, argv = command_of_string(str(command))
            raw = shlex.join(command) if isinstance(command, list) else str(command)
            call = ToolCall(
                n=n, command=text, turn=len(log.turns) - 1, tool="exec_command", call_id=key, argv=argv, raw=raw
            )
            seen[key] = call
            log.turns[-1].calls.append(call)
        return call

    for i, obj in enumerate(lines):
        ev = obj["msg"] if isinstance(obj.get("msg"), dict) else obj
        typ = ev.get("type")
        if typ is not None:
            log.events += 1
        item = ev.get("item")
        if isinstance(item, dict):
            item = _item_fields(item)
            itype = item.get("type") or item.get("item_type")
            done = typ == "item.completed"
            if itype in ("agent_message", "assistant_message") and done:
                text = item.get("text") or item.get("message")
                log.turns.append(Turn(text=text if isinstance(text, str) else None))
            elif itype == "command_execution" and isinstance(item.get("command"), str | list) and item["command"]:
                call = call_for(str(item.get("id")), item["command"])
                if isinstance(item.get("exit_code"), int):
                    call.exit_code = item["exit_code"]
            elif itype == "file_change" and done and item.get("status") != "failed":
                for ch in item.get("changes") or []:
                    if isinstance(ch, dict) and isinstance(ch.get("path"), str):
                        kind = {"add": "added", "delete": "deleted"}.get(str(ch.get("kind")), "changed")
                        log.files.append((ch["path"], kind))
        elif typ == "exec_command_begin" and isinstance(ev.get("command"), str | list) and ev["command"]:
            call_for(str(ev.get("call_id", f"line{i}")), ev["command"])
        elif typ == "exec_command_end":
            key = str(ev.get("call_id", ""))
            if key in seen or isinstance(ev.get("command"), str | list):
                call = call_for(key or f"line{i}", ev.get("command") or "")
                code = ev.get("exit_code")
                call.exit_code = code if isinstance(code, int) else None
        elif typ == "agent_message" and isinstance(ev.get("message"), str):
            log.turns.append(Turn(text=ev["message"]))
        elif typ == "task_complete" and isinstance(ev.get("last_agent_message"), str):
            log.final = ev["last_agent_message"]
        elif typ == "patch_apply_begin" and isinstance(ev.get("changes"), dict):
            for path, change in ev["changes"].items():
                kind = "changed"
                if isinstance(change, dict):
                    kind = "added" if "add" in change else "deleted" if "delete" in change else "changed"
                log.files.append((str(path), kind))
    return log


def parse_rollout(lines: list[dict[str, Any]]) -> AgentLog:
    """A session rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``)."""
    log = AgentLog(agent="codex", format="codex-rollout")
    n = 0
    by_id: dict[str, ToolCall] = {}
    cur: Turn | None = None
    in_turn = False
    for line in lines:
        payload = line.get("payload")
        if not isinstance(payload, dict):
            continue
        log.events += 1
        if line.get("type") == "event_msg":
            item = payload.get("item")
            if (
                payload.get("type") == "item_completed"
                and isinstance(item, dict)
                and item.get("type") == "CommandExecution"
            ):
                call = by_id.get(str(item.get("id")))
                if call is not None:
                    if isinstance(item.get("exit_code"), int):
                        call.exit_code = item["exit_code"]
                    cmd = item.get("command")
                    if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
                        call.argv = cmd
            continue
        if line.get("type") != "response_item":
            continue
        typ = payload.get("type")
        assistant = typ in ("function_call", "custom_tool_call", "local_shell_call", "reasoning") or (
            typ == "message" and payload.get("role") == "assistant"
        )
        if not assistant:
            in_turn = False
            continue
        if not in_turn or cur is None:
            cur = Turn()
            log.turns.append(cur)
            in_turn = True
        if typ == "message":
            texts = [
                str(c["text"])
                for c in payload.get("content") or []
                if isinstance(c, dict) and isinstance(c.get("text"), str)
            ]
            if texts:
                cur.text = "\n".join([*([cur.text] if cur.text else []), *texts])
        elif typ == "function_call":
            name = str(payload.get("name") or "")
            raw_args = payload.get("arguments")
            args = raw_args if isinstance(raw_args, str) else "{}"
            command = shell_command(name, args)
            if command is None:
                cur.other_calls.append((name, args))
                continue
            n += 1
            cid = payload.get("call_id") if isinstance(payload.get("call_id"), str) else None
            call = ToolCall(n=n, command=command, turn=len(log.turns) - 1, tool=name, call_id=cid)
            call.ts = iso_ts(line.get("timestamp"))
            cur.calls.append(call)
            if cid:
                by_id[cid] = call
    return log
