"""``spyglass model-stub`` and ``spyglass agents``: real agents against a scripted model."""

from __future__ import annotations

from pathlib import Path

import click

from spyglass.cli.common import format_option, store_option, write_output

_STUB_HELP = """Serve SCRIPT (a model script, JSON) as a model on loopback (OpenAI and Anthropic APIs).

\b
Serves POST /v1/chat/completions, POST /v1/responses, the Anthropic
POST /v1/messages (plain and streamed) and /v1/messages/count_tokens,
and GET /v1/models.  Each answer is the step whose number is the count of
assistant turns already in the request, so retries get the same answer.
Point an agent at the printed URL (OPENAI_BASE_URL; ANTHROPIC_BASE_URL
without /v1), or let
`spyglass run --model-script SCRIPT -- AGENT ...` do it for one run.
Script format: docs/agents.md.  Ctrl-C, SIGTERM or SIGHUP stops it and
prints how many requests it served.

\b
Examples:
  spyglass model-stub session.json --port 8765
  spyglass model-stub task.json --var ATTACKER_PORT=9000 --log requests.jsonl
"""


def parse_vars(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r}: expected NAME=VALUE", param_hint="--var")
        out[name] = value
    return out


@click.command("model-stub", help=_STUB_HELP)
@click.argument("script", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (keep it loopback).")
@click.option(
    "--var",
    "var_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="Value for ${NAME} in the script (repeatable; overrides the script's vars).",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append every request (JSON lines) to this file.",
)
def model_stub_cmd(script: Path, port: int, host: str, var_pairs: tuple[str, ...], log_path: Path | None) -> None:
    from spyglass.agents.model_stub import start_stub
    from spyglass.agents.script import load_script

    loaded = load_script(script)
    try:
        stub = start_stub(loaded, port, host=host, variables=parse_vars(var_pairs), log_path=log_path)
    except OSError as exc:
        from spyglass.errors import UsageError

        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    click.echo(f"spyglass model-stub: serving {script} ({len(loaded)} steps) at {stub.url}", err=True)
    click.echo(stub.url)
    _stop_on_signals()
    try:
        stub.serve_forever_in_foreground()
    except KeyboardInterrupt:
        pass
    finally:
        stub.close()
        click.echo(f"spyglass model-stub: {len(stub.requests)} request(s) served", err=True)


def _stop_on_signals() -> None:
    """Ctrl-C, SIGTERM and SIGHUP end the stub cleanly, even when it was started with SIGINT ignored
    (a shell's background job): a server left running after its session is worse than one stopped."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


@click.group("agents")
def agents_group() -> None:
    """Real agents: tool calls of a run, replay scripts from agent logs, agent setup."""


@agents_group.command("tool-calls")
@store_option
@click.argument("run", default="latest")
@click.option(
    "--agent-log",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The agent's log (codex --json output or session rollout, Claude Code session transcript, "
    "mini-swe-agent trajectory); "
    "default: the session log the agent was seen writing.",
)
@format_option("json")
def tool_calls_cmd(store_path: Path | None, run: str, agent_log: Path | None, fmt: str) -> None:
    """Which process subtree each tool call of RUN caused, and which processes were the agent's own."""
    from spyglass.agents.agent_logs import read_agent_log
    from spyglass.agents.awareness import AgentView, find_agent_log, link_tool_calls
    from spyglass.cli.common import echo_json, open_reader

    reader = open_reader(store_path, run)
    events = list(reader.events())
    log_path = str(agent_log) if agent_log else find_agent_log(events)
    calls = []
    if log_path and Path(log_path).is_file():
        calls = read_agent_log(log_path).tool_calls
    elif log_path:
        log_path = None
    view: AgentView = link_tool_calls(events, calls, log_path)
    if fmt == "json":
        echo_json({"run": reader.meta.id, **view.to_json()})
        return
    click.echo(
        f"run {reader.meta.id}: agent {view.agent or 'not recognised'}"
        f"{', log ' + log_path if log_path else ', no agent log (linked from the process tree)'}"
    )
    for link in view.links:
        ex = f"killed by {link.signal}" if link.signal else f"exit {link.exit_code}"
        click.echo(f"  {link.label}")
        click.echo(
            f"      pid {link.root_pid}, {len(link.pids)} processes, events {link.first_seq}..{link.last_seq}"
            f" ({link.events}), {ex}, from the {link.source}"
        )
    for c in view.unlinked:
        click.echo(f"  tool call {c.n}: {c.command}  (no process seen)")
    if view.internal:
        click.echo(f"  agent's own commands: {len(view.internal)}")


@agents_group.command("script-from-log")
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the script here (default: stdout).",
)
@click.option("--model", default="spyglass-stub", show_default=True, help="Model name the stub reports.")
def script_from_log_cmd(log: Path, output: Path | None, model: str) -> None:
    """Make a model script from an agent LOG (codex --json output or rollout, mini-swe-agent
    trajectory), to replay the session with `spyglass run --model-script`."""
    import json

    from spyglass.agents.agent_logs import read_agent_log
    from spyglass.agents.recording import script_from_log

    script = script_from_log(read_agent_log(log), model=model)
    text = json.dumps(script.to_json(), indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)
        click.echo(f"spyglass: wrote {len(script)} steps to {output}", err=True)


@agents_group.command("env")
@click.argument("agent", type=click.Choice(["codex", "claude", "mini", "generic"]))
@click.option("--stub-url", required=True, help="The stub's URL (printed by `spyglass model-stub`).")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the generated agent configuration (CODEX_HOME, CLAUDE_CONFIG_DIR ...).",
)
def env_cmd(agent: str, stub_url: str, directory: Path) -> None:
    """Print `export` lines that point AGENT at a running stub (for running it by hand)."""
    import os
    import shlex

    from spyglass.agents.setup import agent_env

    base: dict[str, str] = {"HOME": os.environ.get("HOME", "")}
    env = agent_env([agent], stub_url, directory, base, kind=agent)
    for k, v in sorted(env.items()):
        if k != "HOME":
            click.echo(f"export {k}={shlex.quote(v)}")


COMMANDS = [model_stub_cmd, agents_group]
