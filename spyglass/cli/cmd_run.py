"""``spyglass run`` and ``spyglass demo``: record an agent and everything it starts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from spyglass.cli.common import LongFlags, store_option

_HELP = """Run CMD under capture and record everything it and its descendants do.

\b
The agent's stdin, stdout and stderr pass through untouched; spyglass's own
messages (live alerts, the summary) go to stderr.  The policy is --policy
FILE, else $SPYGLASS_POLICY, else ~/.config/spyglass/policy.yaml, else
/etc/spyglass/policy.yaml, else safe defaults; a ./spyglass.yaml in the
agent's workspace is used only when named (`--policy spyglass.yaml`).
The policy's text is recorded with the run.

\b
Exit code: the agent's own exit code (128+N if it died of signal N), unless
  6  --fail-on LEVEL (or fail_on) and an alert at or above LEVEL fired
  7  enforce mode and a kill rule stopped the agent
  5  spyglass could not run the agent (backend or sandbox unavailable)
  8  the evidence is incomplete: the store could not be written (one line
     names the cause and the path; the run is marked evidence-incomplete)
  127  CMD not found (recorded as a failed run)
  2  usage error (no command, bad policy or rule file)

SIGINT or SIGTERM to spyglass is passed on to the agent's processes, which
get 5 seconds to exit before they are killed (a second signal kills them at
once); the run is recorded as interrupted.

With --descendants follow, run returns when the agent exits (its exit code,
or 6/7 for what fired until then) while a recorder in the background keeps
recording the processes it left and completes the run when they exit
(`spyglass show` says "still recording" meanwhile); --wait-for-tree waits.

\b
Examples:
  spyglass run -- python agent.py
  spyglass run --task fix-bug-12 --agent-id codex -- codex exec "fix the bug"
  spyglass run --sandbox --fail-on high -- ./agent.sh
  spyglass run --model-script session.json -- codex exec --json "replay"
"""


@click.command("run", cls=LongFlags, help=_HELP)
@store_option
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Policy file (default: $SPYGLASS_POLICY, ~/.config/spyglass/policy.yaml, /etc/spyglass/policy.yaml, "
    "else built-in defaults; never ./spyglass.yaml unless named).",
)
@click.option("--task", help="Task label (used by `compare --by task`).")
@click.option(
    "--agent-id",
    help="The agent's persistent identity (default: the policy's agent_id, else derived from the agent's kind, "
    "executable, config home, user and host; docs/otel.md).",
)
@click.option(
    "--workspace",
    "workspaces",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Writable root of the task (repeatable; default: policy `workspace`, else the current directory).",
)
@click.option(
    "--skills",
    "skills",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Skill directory given to the agent (repeatable; for `coverage` and `gate`).",
)
@click.option(
    "--wait-descendants",
    type=click.FloatRange(min=0),
    default=3.0,
    show_default=True,
    metavar="SECONDS",
    help="Keep recording processes that outlive the agent for this long, then apply --descendants.",
)
@click.option(
    "--descendants",
    type=click.Choice(["kill", "follow", "detach"]),
    default=None,
    help="Processes still alive after the grace period: kill them (default in contain/enforce), "
    "follow them until they exit (run returns when the agent exits; a recorder in the background "
    "completes the run when they are gone), or detach from them with a high alert (default in observe; "
    "under seccomp tracing their traced calls then fail with ENOSYS).",
)
@click.option(
    "--wait-for-tree",
    is_flag=True,
    help="With --descendants follow: return only when the whole tree is gone (the exit code then covers "
    "what the followed processes did too).",
)
@click.option(
    "--mode",
    type=click.Choice(["observe", "contain", "enforce", "ask"]),
    default=None,
    help="Override the policy's mode: observe (record and alert), contain (sandbox), "
    "enforce (sandbox, and kill rules stop the agent), ask (observe, and the agent's hooks ask "
    "before a risky tool call, as --ask).",
)
@click.option("--sandbox", is_flag=True, help="Confine the agent (bubblewrap, decoy home, egress proxy): mode contain.")
@click.option(
    "--fail-on",
    type=click.Choice(["info", "low", "medium", "high", "critical"]),
    default=None,
    help="Exit 6 if an alert at or above this level fired (policy: fail_on).",
)
@click.option(
    "--sign-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Sign the run's checkpoint with this Ed25519 private key (policy: evidence.sign_key).",
)
@click.option("--no-workspace-evidence", is_flag=True, help="Do not fingerprint the workspace before and after.")
@click.option(
    "--model-script",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve this model script on loopback for the run and point the agent at it (docs/agents.md).",
)
@click.option("--model-var", "model_vars", multiple=True, metavar="NAME=VALUE", help="${NAME} in the model script.")
@click.option(
    "--model-port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port of the --model-script stub on 127.0.0.1 (default: any free port).",
)
@click.option(
    "--ask",
    is_flag=True,
    help="Ask before a tool call runs: the agent's hooks (Claude Code) hand each call to the policy; "
    "one that touches a secret, a host not allowed or a persistence file is put to you on the "
    "terminal (allow once / deny), or denied without one.  Decisions are agent.intervention events.",
)
@click.option(
    "--agent-hooks",
    is_flag=True,
    help="Claude Code: per-run hooks (loaded with --settings, beside your own) report each tool call "
    "live, so processes carry its id from the start (automatic with --model-script).",
)
@click.option(
    "--agent",
    "agent_kind",
    type=click.Choice(["codex", "claude", "mini", "generic"]),
    default=None,
    help="Which agent CMD runs, when spyglass cannot tell (for --model-script).",
)
@click.option(
    "--agent-log",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The agent's log (codex --json output or rollout, Claude Code transcript, mini-swe-agent trajectory); "
    "default: the log the agent is seen writing.",
)
@click.option(
    "--otlp",
    metavar="URL",
    default=None,
    help="Export the run live to this OpenTelemetry collector (default: OTEL_EXPORTER_OTLP_ENDPOINT, "
    "else the policy's otlp.endpoint; docs/otel.md).",
)
@click.option(
    "--otlp-protocol",
    type=click.Choice(["http/protobuf", "grpc"]),
    default=None,
    help="OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL, else the policy's, else http/protobuf).",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "ebpf", "strace"]),
    default="auto",
    show_default=True,
    help="Capture backend: ebpf (kernel-side, needs root and BTF), strace (ptrace, portable), "
    "or auto (ebpf where it can run, else strace; the choice and its reason are kept in the run).",
)
@click.option(
    "--no-seccomp",
    is_flag=True,
    help="strace: trace without --seccomp-bpf (slower, but setuid programs such as sudo work).",
)
@click.option(
    "--record-tty",
    is_flag=True,
    help="Record the agent's terminal output and the operator's input (asciicast v2, evidence/terminal.cast; "
    "secrets masked). Policy: terminal.record.",
)
@click.option(
    "--ask-egress",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="Sandbox: a host the policy refuses is put to the operator, who answers from another terminal "
    "with `spyglass sandbox answer N allow|deny` within SECONDS (then: deny); docs/otel.md.",
)
@click.option(
    "--alerts-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Live alerts on stderr as text lines, or as JSON lines (each with run id, host, agent id and task; "
    "no summary then).",
)
@click.option(
    "--result-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="When the run ends, write its id, status, exit code and highest alert level there as JSON (for harnesses).",
)
@click.option("-q", "--quiet", is_flag=True, help="No live alerts and no summary.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(
    store_path: Path | None,
    policy_file: Path | None,
    task: str | None,
    agent_id: str | None,
    workspaces: tuple[str, ...],
    skills: tuple[str, ...],
    wait_descendants: float,
    descendants: str | None,
    wait_for_tree: bool,
    mode: str | None,
    sandbox: bool,
    fail_on: str | None,
    sign_key: Path | None,
    no_workspace_evidence: bool,
    model_script: Path | None,
    model_vars: tuple[str, ...],
    model_port: int,
    ask: bool,
    agent_hooks: bool,
    agent_kind: str | None,
    agent_log: Path | None,
    otlp: str | None,
    otlp_protocol: str | None,
    backend: str,
    no_seccomp: bool,
    record_tty: bool,
    ask_egress: float | None,
    alerts_format: str,
    result_file: Path | None,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    """What it does: :func:`spyglass.cli.runner.run` (which spyglass/cli/direct.py calls too)."""
    params = dict(locals())
    from spyglass.cli.runner import run

    run(**params)


@click.command("demo")
@store_option
@click.option(
    "--dir",
    "demo_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to lay out the demo (default: a fresh temporary directory).",
)
@click.option("--sandbox", is_flag=True, help="Run the demo agent in the sandbox.")
def demo_cmd(store_path: Path | None, demo_dir: Path | None, sandbox: bool) -> None:
    """Record the bundled demo agent and show what spyglass saw.

    The demo agent reads a skill, runs the skill's script (which also reads a
    decoy ~/.ssh/id_rsa: spyglass raises an alert), writes and renames files
    in its workspace, leaves a helper process running, resolves localhost and
    talks to a loopback HTTP server that spyglass starts for it.
    """
    import os
    import tempfile

    from spyglass import demo
    from spyglass.cli.common import open_store
    from spyglass.report.terminal import print_run_summary
    from spyglass.session import RunOptions, run_session
    from spyglass.store import RunReader

    dest = demo_dir or Path(tempfile.mkdtemp(prefix="spyglass-demo-"))
    d = demo.prepare(dest)
    store = open_store(store_path, create=True)
    try:
        opts = RunOptions(
            argv=d.argv,
            cwd=str(d.workspace),
            env=d.env(dict(os.environ)),
            task="demo",
            agent_id="spyglass-demo",
            workspace=[str(d.workspace)],
            skills=[str(d.skill)],
            wait_descendants=2.0,
            sandbox=sandbox,
            policy_file=d.policy,
        )
        result = run_session(opts, store)
    finally:
        d.close()
    meta = result.meta
    click.echo("")
    print_run_summary(RunReader(store, meta.id), sys.stdout)
    click.echo(f"\nspyglass: demo laid out in {dest}; run recorded as {meta.id} in {store.root}")
    click.echo(
        "next: spyglass show latest | spyglass alerts latest | spyglass report latest --format html -o r.html"
    )
    sys.exit(result.exit_code)


COMMANDS = [run_cmd, demo_cmd]
