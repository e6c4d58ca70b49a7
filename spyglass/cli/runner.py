"""What ``spyglass run`` does with its options, without click.

The click command (spyglass/cli/cmd_run.py) and the direct path (spyglass/cli/direct.py, a
command line parsed without loading click) both call :func:`run` with the same arguments.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from spyglass import phases
from spyglass.cli.plain import echo_err


def run(
    *,
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
    from spyglass.cli.plain import open_store
    from spyglass.session import RunOptions, run_session
    from spyglass.session.core import follows

    if model_vars:
        from spyglass.cli.cmd_agents import parse_vars
    phases.mark("imports")
    opts = RunOptions(
        argv=list(command),
        policy_file=policy_file,
        task=task,
        agent_id=agent_id,
        workspace=list(workspaces),
        skills=list(skills),
        wait_descendants=wait_descendants,
        descendants=descendants,
        backend=backend,
        seccomp=not no_seccomp,
        mode=mode,
        sandbox=sandbox,
        fail_on=fail_on,
        sign_key=sign_key,
        workspace_evidence=not no_workspace_evidence,
        record_tty=record_tty,
        live_alerts=not quiet,
        model_script=model_script,
        model_vars=parse_vars(model_vars) if model_vars else {},
        model_port=model_port,
        ask=ask,
        agent_hooks=agent_hooks,
        agent_kind=agent_kind,
        agent_log=agent_log,
        otlp=otlp,
        otlp_protocol=otlp_protocol,
        alerts_format=alerts_format,
        ask_egress=ask_egress,
    )
    from spyglass.store.store import default_store_path

    if not wait_for_tree and follows(opts, store_path or default_store_path()):  # back when the agent exits
        from spyglass.cli.follow import fork_recorder

        fork_recorder(opts)  # returns in the recorder only
    store = open_store(store_path, create=True)
    result = run_session(opts, store)
    meta = result.meta
    if result_file is not None:
        write_result_file(result_file, result)
    if meta.status == "failed":  # the agent never started: one line, the run recorded as failed
        for note in result.notes:
            echo_err(f"spyglass: {note}")
        sys.exit(result.verdict_code if result.verdict_code is not None else result.exit_code)
    if not quiet and alerts_format == "text":  # with JSON alerts, stderr stays JSON lines
        from spyglass.report.terminal import print_run_summary
        from spyglass.store import RunReader

        try:
            reader = RunReader(store, meta.id)
            reader.meta = meta  # the final status even when run.json could not be written
            print_run_summary(reader, sys.stderr)
        except Exception as exc:  # a store that could not be written may not be readable either
            echo_err(f"spyglass: cannot show the run's summary: {exc}")
        echo_err(f"spyglass: recorded run {meta.id} in {store.root}")
        for note in result.notes:
            echo_err(f"spyglass: {note}")
    code = result.verdict_code if result.verdict_code is not None else result.exit_code
    _say_outcome(meta, code, result.exit_code, result.fail_on, quiet)
    if result.partial:
        failed = ", ".join(f"{k} ({v}x)" for k, v in sorted(result.sink_errors.items()))
        echo_err(f"spyglass: evidence is partial: {failed} failed during the run (see `spyglass show`)")
    sys.exit(code)


def _say_outcome(meta: Any, code: int, agent_code: int, fail_on: str | None, quiet: bool) -> None:
    """The last lines of a run: its anchor, and why the exit code is not the agent's (only when it
    is spyglass's: an agent that exits 6, 7 or 8 itself is not explained as an alert, a rule or the
    evidence)."""
    from spyglass.errors import EXIT_ALERT, EXIT_EVIDENCE, EXIT_KILLED
    from spyglass.rules.sinks import fail_on_exceeded

    anchor = meta.extra.get("anchor")
    if anchor and not quiet:
        echo_err(f"spyglass: anchor {anchor} (keep it: `spyglass verify {meta.id} --anchor ...`)")
    if meta.status == "evidence-incomplete":
        for line in meta.extra.get("evidence_failures") or []:
            echo_err(f"spyglass: not saved: {line}")
        unsaved = meta.extra.get("unsaved_alerts") or []
        if unsaved:
            echo_err(f"spyglass: {len(unsaved)} alert(s) fired but could not be saved")
        run_dir = meta.extra.get("run_dir")
        if isinstance(run_dir, dict):
            echo_err(f"spyglass: {run_dir.get('problem')}; restored {run_dir.get('restored')}")
    if code == EXIT_KILLED and meta.stopped_by:
        echo_err(f"spyglass: rule {meta.stopped_by} stopped the agent (exit 7)")
    elif code == EXIT_ALERT and fail_on_exceeded(meta.extra.get("max_level"), fail_on):
        echo_err(f"spyglass: an alert at or above {fail_on} fired (exit 6)")
    elif code == EXIT_EVIDENCE and code != agent_code:
        echo_err("spyglass: the evidence is incomplete (exit 8)")


def write_result_file(path: Path, result: Any) -> None:
    """The run's outcome as JSON for a harness; a path that cannot be written is one line, not a traceback."""
    import json

    from spyglass.errors import UsageError

    meta = result.meta
    data = {
        "id": meta.id, "status": meta.status, "exit_code": result.exit_code,
        "verdict_code": result.verdict_code, "max_level": meta.extra.get("max_level"),
        "alerts": meta.counts.get("alerts", 0), "events": meta.counts.get("events", 0),
        "anchor": meta.extra.get("anchor"),
    }
    try:
        path.write_text(json.dumps(data) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write the result file {path}: {exc.strerror}",
                         hint="give a path in a directory that exists and can be written") from None


