"""Pointing real agents at a model stub: codex's CODEX_HOME, mini-swe-agent's environment.

``spyglass run --model-script`` uses :func:`agent_env` to start the agent
against the stub with everything that phones home turned off; tests use the
same functions.  Nothing here starts a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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


def codex_skill_dir(home: str | Path) -> Path:
    """Where codex looks for user skills under a ``CODEX_HOME`` (``<home>/skills``)."""
    return Path(home) / "skills"


def mini_env(
    stub_url: str, model: str = "spyglass-stub", config_dir: str | Path | None = None
) -> dict[str, str]:
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


def agent_kind(argv: list[str] | tuple[str, ...]) -> str | None:
    """``"codex"``, ``"mini"`` or None, from the command a user runs."""
    for a in argv[:3]:
        base = a.rsplit("/", 1)[-1]
        if base in ("codex", "codex.js"):
            return "codex"
        if base in ("mini", "mini-swe-agent", "mini-extra"):
            return "mini"
    return None


def agent_env(
    argv: list[str] | tuple[str, ...],
    stub_url: str,
    scratch: str | Path,
    base_env: Mapping[str, str],
    model: str = "spyglass-stub",
    kind: str | None = None,
) -> dict[str, str]:
    """The environment to run ``argv`` against the stub: for every agent the
    OpenAI variables; for codex a fresh ``CODEX_HOME`` in ``scratch`` (unless
    ``base_env`` already names one, which is then left alone); for mini-swe-agent
    its no-setup variables and a config dir in ``scratch``.

    ``kind`` ("codex", "mini") overrides recognising the agent from ``argv``
    (for a wrapper script around the agent).

    For codex the user's ``CODEX_HOME`` (or ``~/.codex``) is not used, since its
    config points at a real provider; its ``skills`` and ``AGENTS.md`` are linked
    into the fresh one so the agent sees the same skills."""
    env = dict(base_env)
    env.update(
        {
            "OPENAI_BASE_URL": stub_url,
            "OPENAI_API_BASE": stub_url,
            "OPENAI_API_KEY": env.get("OPENAI_API_KEY") or "spyglass-stub",
        }
    )
    kind = kind or agent_kind(argv)
    scratch = Path(scratch)
    if kind == "codex":
        home = codex_home(scratch / "codex-home", stub_url, model)
        user_home = env.get("CODEX_HOME") or (str(Path(env["HOME"]) / ".codex") if env.get("HOME") else None)
        if user_home:
            for name in ("skills", "AGENTS.md"):
                src = Path(user_home) / name
                if src.exists() and not (home / name).exists():
                    (home / name).symlink_to(src.resolve())
        env["CODEX_HOME"] = str(home)
    elif kind == "mini":
        env.update(mini_env(stub_url, model, scratch / "mini-config"))
    return env
