"""``spyglass run``: record an agent and everything it starts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from spyglass.cli.common import store_option

_HELP = """Run CMD under capture and record everything it and its descendants do.

\b
The agent's stdin, stdout and stderr pass through untouched; spyglass's own
messages (live alerts, the summary) go to stderr.

\b
Exit code: the agent's own exit code (128+N if it died of signal N), unless
  6  --fail-on LEVEL and an alert at or above LEVEL fired
  7  enforce mode and a kill rule stopped the agent
  5  spyglass could not run the agent (backend or sandbox unavailable)
  2  usage error (no command, bad policy or rule file)

\b
Examples:
  spyglass run -- python agent.py
  spyglass run --task fix-bug-12 --agent-id codex -- codex exec "fix the bug"
  spyglass run --wait-descendants 5 -- ./start-daemons.sh
"""


@click.command("run", help=_HELP, context_settings={"ignore_unknown_options": False})
@store_option
@click.option("--task", help="Task label (used by `compare --by task`).")
@click.option("--agent-id", help="Agent label (e.g. codex, claude-code).")
@click.option(
    "--workspace", "workspaces", multiple=True, type=click.Path(file_okay=False),
    help="Writable root of the task (repeatable; default: the current directory).",
)
@click.option(
    "--skills", "skills", multiple=True, type=click.Path(exists=True, file_okay=False),
    help="Skill directory given to the agent (repeatable; for coverage).",
)
@click.option(
    "--wait-descendants", type=float, default=0.0, show_default=True, metavar="SECONDS",
    help="Keep recording processes that outlive the agent for this long.",
)
@click.option("--backend", default="strace", show_default=True, help="Capture backend.")
@click.option(
    "--no-seccomp", is_flag=True,
    help="strace: trace without --seccomp-bpf (slower, but setuid programs such as sudo work).",
)
@click.option("-q", "--quiet", is_flag=True, help="No summary at the end.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(
    store_path: Path | None,
    task: str | None,
    agent_id: str | None,
    workspaces: tuple[str, ...],
    skills: tuple[str, ...],
    wait_descendants: float,
    backend: str,
    no_seccomp: bool,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    from spyglass.capture import get_backend
    from spyglass.cli.common import open_store
    from spyglass.report.digest import digest_run
    from spyglass.report.summary import print_summary
    from spyglass.runner import RunRequest, record
    from spyglass.store import RunReader

    if wait_descendants < 0:
        raise click.BadParameter("must be >= 0", param_hint="--wait-descendants")
    store = open_store(store_path, create=True)
    be = get_backend(backend)
    request = RunRequest(
        argv=list(command),
        task=task,
        agent_id=agent_id,
        workspace=list(workspaces),
        skills=list(skills),
        wait_descendants=wait_descendants,
        backend_options={"seccomp": not no_seccomp},
    )
    outcome = record(request, be, store)
    if not quiet:
        print_summary(digest_run(RunReader(store, outcome.meta.id)), sys.stderr)
        click.echo(f"spyglass: recorded run {outcome.meta.id} in {store.root}", err=True)
    sys.exit(outcome.exit_code)


COMMANDS = [run_cmd]


@click.command("demo")
@store_option
@click.option(
    "--dir", "demo_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Where to lay out the demo (default: a fresh temporary directory).",
)
def demo_cmd(store_path: Path | None, demo_dir: Path | None) -> None:
    """Record the bundled demo agent and show what spyglass saw.

    The demo agent reads a skill, runs the skill's script (which also reads a
    decoy ~/.ssh/id_rsa), writes and renames files in its workspace, leaves a
    helper process running, resolves localhost and talks to a loopback HTTP
    server that spyglass starts for it.
    """
    import os
    import tempfile

    from spyglass import demo
    from spyglass.capture import get_backend
    from spyglass.cli.common import open_store
    from spyglass.report.digest import digest_run
    from spyglass.report.summary import print_summary
    from spyglass.runner import RunRequest, record
    from spyglass.store import RunReader

    dest = demo_dir or Path(tempfile.mkdtemp(prefix="spyglass-demo-"))
    d = demo.prepare(dest)
    store = open_store(store_path, create=True)
    try:
        request = RunRequest(
            argv=d.argv,
            cwd=str(d.workspace),
            env=d.env(dict(os.environ)),
            task="demo",
            agent_id="spyglass-demo",
            workspace=[str(d.workspace)],
            skills=[str(d.skill)],
            wait_descendants=2.0,
        )
        outcome = record(request, get_backend("strace"), store)
    finally:
        d.close()
    print_summary(digest_run(RunReader(store, outcome.meta.id)), sys.stdout)
    click.echo(f"\nspyglass: demo laid out in {dest}; run recorded as {outcome.meta.id} in {store.root}")
    click.echo("next: spyglass show latest | spyglass events latest --type file. | spyglass ls")
    sys.exit(0 if outcome.exit_code == 0 else outcome.exit_code)


COMMANDS.append(demo_cmd)
