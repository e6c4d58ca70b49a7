"""mini-swe-agent (PyPI ``mini-swe-agent``): a Python program that runs each command with ``sh -c``.

Recognised by the distribution its console script belongs to
(``mini_swe_agent-*.dist-info`` next to it), by ``python -m minisweagent...``,
or by the names ``mini``/``mini-extra``.  Pointed at the stub through
litellm's ``openai/`` prefix and the variables that skip its first-run setup.
Its log: the trajectory (``-o FILE``, default
``~/.config/mini-swe-agent/last_mini_run.traj.json``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spyglass.agents.adapters.base import AgentAdapter, base, python_dist
from spyglass.agents.agent_logs import AgentLog, ToolCall, Turn, log_from_argv

_NAMES = ("mini", "mini-extra", "mini-swe-agent")


def mini_env(stub_url: str, model: str = "spyglass-stub", config_dir: str | Path | None = None) -> dict[str, str]:
    """Environment for mini-swe-agent (litellm ``openai/`` prefix) against the stub."""
    env = {
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_MODEL_NAME": f"openai/{model}",
        "MSWEA_SILENT_STARTUP": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_BASE": stub_url,
        "OPENAI_BASE_URL": stub_url,
        "OPENAI_API_KEY": "spyglass-stub",
        "NO_COLOR": "1",
    }
    if config_dir is not None:
        env["MSWEA_GLOBAL_CONFIG_DIR"] = str(config_dir)
    return env


class MiniSweAgentAdapter(AgentAdapter):
    name = "mini"
    title = "mini-swe-agent"
    package = "mini-swe-agent (PyPI)"
    gives = ("live", "transcript", "claims")
    log_patterns = (re.compile(r"\.traj\.json$"),)
    state = (
        "~/.config", "~/.config/mini-swe-agent", "~/.config/mini-swe-agent/**", "~/.config/mini-swe-agent/.env",
        "~/.config/mini-swe-agent/*.traj.json", "~/.config/mini-swe-agent/last_*",
        "~/.local/share/mini-swe-agent/**", "~/.cache/litellm/**",
    )  # fmt: skip
    program_names = _NAMES
    package_parts = ("/minisweagent/",)

    def identify(self, exe: str | None, argv: Sequence[str] | None) -> bool:
        args = list(argv or [])
        a0 = base(args[0]) if args else ""
        exe_b = base(exe)
        if a0.startswith("python") or exe_b.startswith("python"):
            if len(args) > 1 and args[1].startswith("/") and python_dist(args[1], "mini-swe-agent"):
                return True
            if len(args) > 1 and base(args[1]) in _NAMES:
                return True
            if "-m" in args[1:3]:
                i = args.index("-m")
                return i + 1 < len(args) and args[i + 1].startswith("minisweagent")
            return False
        if exe and exe.startswith("/") and exe_b in _NAMES and python_dist(exe, "mini-swe-agent"):
            return True
        return a0 in _NAMES or exe_b in ("mini", "mini-extra")

    def prepare_env(
        self, env: dict[str, str], stub_url: str, scratch: Path, model: str, argv: Sequence[str]
    ) -> dict[str, str]:
        env = super().prepare_env(env, stub_url, scratch, model, argv)
        env.update(mini_env(stub_url, model, scratch / "mini-config"))
        return env

    def parse_log(self, text: str, whole: Any, lines: list[dict[str, Any]], source: str) -> AgentLog | None:
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return parse_trajectory(whole)
        return None

    def log_from_argv(self, argv: Sequence[str] | None, cwd: str | None) -> str | None:
        return log_from_argv(list(argv or []), cwd)

    def install_root(self, exe: str | None, argv: Sequence[str] | None = None) -> str | None:
        args = list(argv or [])
        script = args[1] if len(args) > 1 and args[1].startswith("/") else exe
        site = python_dist(script, "mini-swe-agent") if script else None
        return str(Path(site).parents[2]) if site else None  # VENV (VENV/lib/python3.X/site-packages)


def parse_trajectory(data: dict[str, Any]) -> AgentLog:
    log = AgentLog(agent="mini", format="mini-trajectory")
    exits: dict[str, int] = {}
    outputs: dict[str, str] = {}
    for m in data.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            rc = (m.get("extra") or {}).get("returncode")
            if isinstance(rc, int):
                exits[m["tool_call_id"]] = rc
            if isinstance(m.get("content"), str):
                outputs[m["tool_call_id"]] = m["content"]
    n = 0
    for m in data.get("messages") or []:
        if not isinstance(m, dict):
            continue
        log.events += 1
        if m.get("role") != "assistant":
            continue
        extra = m.get("extra") or {}
        content = m.get("content")
        turn = Turn(text=content if isinstance(content, str) and content else None)
        ts = extra.get("timestamp")
        for a in extra.get("actions") or []:
            if isinstance(a, dict) and isinstance(a.get("command"), str):
                n += 1
                cid = a.get("tool_call_id") if isinstance(a.get("tool_call_id"), str) else None
                turn.calls.append(
                    ToolCall(
                        n=n,
                        command=a["command"],
                        turn=len(log.turns),
                        tool="bash",
                        call_id=cid,
                        argv=["/bin/sh", "-c", a["command"]],
                        exit_code=exits.get(cid or ""),
                        ts=ts if isinstance(ts, int | float) else None,
                        output=outputs.get(cid or ""),
                    )
                )
        log.turns.append(turn)
    return log
