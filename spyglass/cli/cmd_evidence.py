"""Evidence commands: ``verify``, ``gate``, ``changes``, ``keys generate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spyglass.cli.common import (
    check_output_path,
    echo_json,
    format_option,
    is_tty,
    open_reader,
    store_option,
    write_output,
)
from spyglass.safetext import visible, visible_lines

if TYPE_CHECKING:
    from spyglass.evidence.changes import WorkspaceChanges
    from spyglass.evidence.verify import VerifyResult

_PUBKEY = click.option(
    "--pubkey",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Trusted Ed25519 public key (PEM, ssh-ed25519 line, or raw base64/hex): the checkpoint must be "
    "signed by it.",
)


def _pubkey_raw(path: Path | None) -> bytes | None:
    if path is None:
        return None
    from spyglass.evidence.keys import load_public_key_raw

    return load_public_key_raw(path)


# -- verify --------------------------------------------------------------------------
_VERIFY_HELP = """Check a run's record against its hash chain and checkpoint.

\b
Detects an edited, inserted, deleted or reordered record, records cut off
the end or added after the final checkpoint, a missing or forged
checkpoint, edited run metadata, a record rewritten and re-chained after
the run (the final checkpoint no longer matches the anchor kept in the
index, or the one given with --anchor), and (with --pubkey) a checkpoint
not signed by the trusted key.  Names the first bad record.

\b
Exit code:
  0  verified
  3  tampered
  4  incomplete: the run has no final checkpoint (it never finished), or
     its evidence is incomplete (a store write failed)
  2  usage error (no such run, unreadable key)
"""


def _verify_text(v: VerifyResult) -> str:
    head = {"verified": "verified", "tampered": "TAMPERED", "incomplete": "INCOMPLETE"}[v.status]
    lines = [f"run {v.run_id}: {head}"]
    first = v.first_problem
    if first is not None:
        what = "first bad record" if first.line is not None else "problem"
        seq = f" (seq {first.seq})" if first.seq is not None else ""
        lines.append(f"  {what}: {first}{seq}")
    cp = v.checkpoint
    for name, s in v.streams.items():
        cover = "" if s.checkpoint_count is None else f", checkpoint counts {s.checkpoint_count}"
        lines.append(f"  {name}: {s.records} records{cover}")
    if cp is None:
        lines.append("  checkpoint: none")
    elif cp:
        lines.append(
            f"  checkpoint: {'final' if cp.get('final') else 'periodic (not final)'}, "
            f"spyglass {cp.get('spyglass_version')}"
        )
    if v.signature:
        sig = v.signature
        state = "valid" if sig.get("valid") else "INVALID"
        trust = ", matches --pubkey" if sig.get("pinned") else ""
        lines.append(f"  signature: {state}, key {sig.get('key')}{trust}")
    if v.anchor and v.anchor.get("expected"):
        state = "matches" if v.anchor.get("matches") else "DOES NOT MATCH"
        lines.append(f"  anchor: {state} {v.anchor['source']}")
    others = [p for p in v.problems if p is not first]
    for p in others[:10]:
        lines.append(f"  also: {p}")
    if len(others) > 10:
        lines.append(f"  … and {len(others) - 10} more")
    for n in v.notes:
        lines.append(f"  note: {n}")
    from spyglass.safetext import visible

    return "\n".join(visible(line) for line in lines)


@click.command("verify", help=_VERIFY_HELP)
@store_option
@format_option("json")
@_PUBKEY
@click.option(
    "--anchor",
    default=None,
    metavar="sha256:HEX",
    help="The anchor `spyglass run` printed at the end of the run (default: the one in the store's index).",
)
@click.argument("run", default="latest")
def verify_cmd(store_path: Path | None, fmt: str, pubkey: Path | None, anchor: str | None, run: str) -> None:
    from spyglass.evidence.verify import verify_run

    reader = open_reader(store_path, run)
    anchors: list[tuple[str, str]] = []
    if anchor:
        anchors.append(("--anchor", anchor if anchor.startswith("sha256:") else f"sha256:{anchor}"))
    indexed = reader.store.index.anchor(reader.id)
    if indexed:
        anchors.append((f"the index {reader.store.root / 'index.sqlite'}", indexed))
    result = verify_run(reader.dir, pubkey_raw=_pubkey_raw(pubkey), meta=reader.meta, anchors=anchors)
    if fmt == "json":
        echo_json(result.to_dict())
    else:
        click.echo(_verify_text(result))
    sys.exit(result.exit_code)


# -- gate ------------------------------------------------------------------------------
_GATE_HELP = """Decide from the record whether a run meets its requirements (for CI).

\b
Requirements (--require, repeatable or comma-separated; default: the
policy's `gate:` list, else evidence-verified, tests-passed-after-last-edit,
no-alerts-at-or-above=high):
  tests-passed-after-last-edit      tests ran after the last edit and exited 0
  no-alerts-at-or-above=LEVEL       no alert at or above LEVEL
  skill-used=NAME                   a file of skill NAME was read or executed
  no-writes-outside-workspace[=GLOB,...]  nothing outside the workspace changed
  workspace-changed                 at least one workspace file changed
  evidence-verified                 the record verifies (hash chain, checkpoint)

\b
--claims FILE checks what the agent claimed against the record: a JSON
document ({"tests_passed": true, "files_changed": [...], "commands_run":
[...]}) or the JSONL output of `codex exec --json`.  A claim without
evidence is a false completion and fails the gate.

\b
Exit code: 0 every requirement and claim holds, 1 one does not, 2 usage error.
"""


def _policy(policy_path: Path | None, cwd: str, meta: Any) -> Any:
    """The explicit --policy, else the policy recorded with the run."""
    from spyglass.policy import load_policy
    from spyglass.policy.loader import policy_for_run

    if policy_path is not None:
        return load_policy(str(policy_path), cwd)
    return policy_for_run(meta.extra, meta.policy_digest, meta.cwd or cwd)


@click.command("gate", help=_GATE_HELP)
@store_option
@format_option("json", "junit")
@click.option("--require", "requires", multiple=True, metavar="REQ", help="A requirement (repeatable).")
@click.option(
    "--claims",
    "claims_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The agent's claims: JSON, or `codex exec --json` output.",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Policy file for `gate:` and `evidence.test_patterns` (default: the policy recorded with the run).",
)
@click.option(
    "--test-pattern",
    "test_patterns",
    multiple=True,
    metavar="CMD",
    help="Also count this command as a test run (e.g. 'bats', 'just test'; repeatable).",
)
@click.option(
    "--ignore-edit",
    "ignore_edits",
    multiple=True,
    metavar="GLOB",
    help="Writes to these workspace paths are not edits (e.g. the agent's own log: '.aider*'; repeatable).",
)
@_PUBKEY
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to this file instead of stdout.",
)
@click.argument("run", default="latest")
def gate_cmd(
    store_path: Path | None,
    fmt: str,
    requires: tuple[str, ...],
    claims_path: Path | None,
    policy_path: Path | None,
    test_patterns: tuple[str, ...],
    ignore_edits: tuple[str, ...],
    pubkey: Path | None,
    output: Path | None,
    run: str,
) -> None:
    import os

    from spyglass.evidence.claims import load_claims
    from spyglass.evidence.gate import DEFAULT_REQUIREMENTS, GateOptions, parse_requirements, run_gate
    from spyglass.evidence.junit import to_junit
    from spyglass.evidence.outcome import format_text
    from spyglass.evidence.testruns import DEFAULT_EDIT_IGNORE

    if output is not None:
        check_output_path(output)
    reader = open_reader(store_path, run)
    policy = _policy(policy_path, os.getcwd(), reader.meta)
    texts = list(requires) or list(getattr(policy, "gate", ()) or ()) or list(DEFAULT_REQUIREMENTS)
    reqs = parse_requirements(texts)
    claims = load_claims(claims_path) if claims_path is not None else None
    opts = GateOptions(
        test_patterns=[*policy.evidence.test_patterns, *test_patterns],
        edit_ignore=[*DEFAULT_EDIT_IGNORE, *ignore_edits],
        pubkey_raw=_pubkey_raw(pubkey),
    )
    result = run_gate(reader, reqs, claims=claims, options=opts)
    if fmt == "json":
        import json

        text = json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str)
    elif fmt == "junit":
        text = to_junit(result)
    else:
        colour = output is None and is_tty()
        text = format_text(result, color=colour)
    if output is not None:
        write_output(output, text if text.endswith("\n") else text + "\n")
        click.echo(f"spyglass: gate {'passed' if result.passed else 'failed'}; report in {output}", err=True)
    else:
        click.echo(text.rstrip("\n"), color=fmt == "text" and is_tty())
    sys.exit(result.exit_code)


# -- changes -----------------------------------------------------------------------------
#: a command longer than this is cut in the text of `changes` (the JSON keeps it whole)
_COMMAND_CHARS = 160


def _agent_dir(meta: Any) -> str | None:
    """The agent's per-run directory of a ``--model-script`` run (spyglass made it for the agent)."""
    extra = meta.extra if isinstance(meta.extra, dict) else {}
    stub = extra.get("model_stub")
    d = stub.get("agent_dir") if isinstance(stub, dict) else None
    return d.rstrip("/") + "/" if isinstance(d, str) and d else None


def _changes_text(run_id: str, ch: WorkspaceChanges, stat_only: bool, own_dir: str | None = None,
                  cut: bool = False) -> str:
    """The text of `changes`; ``own_dir``: the agent's per-run directory, whose writes are counted on one
    line; ``cut``: commands over ``_COMMAND_CHARS`` are shortened."""
    lines = [f"run {run_id}: workspace {', '.join(ch.roots)}"]
    if not ch.changed:
        lines.append("  no file in the workspace changed")
    for c in ch.all_changes():
        tag = {"added": "A", "removed": "D", "modified": "M"}[c.status]
        info = ""
        if c.status == "modified":
            parts = []
            for w in c.what:
                if w == "mode" and c.before and c.after:
                    parts.append(f"mode {c.before.mode} -> {c.after.mode}")
                elif w == "kind" and c.before and c.after:
                    parts.append(f"{c.before.kind} -> {c.after.kind}")
                else:
                    parts.append(w)
            info = ", ".join(parts)
        elif c.after is not None:
            info = f"{c.after.size} bytes"
        note = f"; {c.diff_note}" if c.diff_note and not stat_only else ""
        lines.append(f"  {tag}  {c.path}" + (f"  ({info}{note})" if info or note else ""))
    if ch.outside_writes:
        lines.append("written outside the workspace:")
        own = [ow for ow in ch.outside_writes if own_dir and ow.path.startswith(own_dir)]
        if own:
            lines.append(f"  + {len(own)} in the agent's own per-run directory {own_dir} (changes --full)")
        for ow in ch.outside_writes:
            if own_dir and ow.path.startswith(own_dir):
                continue
            cmd = ow.commands[0] if ow.commands else ""
            if cut and len(cmd) > _COMMAND_CHARS:
                cmd = cmd[: _COMMAND_CHARS - 1] + "…"
            by = f", by `{cmd}`" if cmd else ""
            by += "; created and removed again" if ow.transient else ""
            lines.append(f"  W  {ow.path}  ({', '.join(ow.types)} x{ow.count}, first seq {ow.seqs[0]}{by})")
    for n in ch.notes:
        lines.append(f"note: {n}")
    out = [visible(line) for line in lines]  # names come from the agent: no control character reaches the terminal
    patch = ch.patch()
    if patch and not stat_only:
        out.append("")
        out.append(visible_lines(patch.rstrip("\n"), keep_tabs=True))
    return "\n".join(out)


@click.command("changes")
@store_option
@format_option("json", "patch")
@click.option("--stat", "stat_only", is_flag=True, help="Only the list of files, no diffs.")
@click.option("--full", is_flag=True,
              help="List the writes in the agent's own per-run directory too, and whole command lines.")
@click.argument("run", default="latest")
def changes_cmd(store_path: Path | None, fmt: str, stat_only: bool, full: bool, run: str) -> None:
    """What a run changed in its workspace: added, removed and modified files with diffs.

    Taken from the workspace manifests recorded before and after the run
    (the run must have been recorded with workspace evidence), plus the files
    outside the workspace that the events show written.  `--format patch`
    prints only the unified diffs (usable with `git apply`).
    """
    from spyglass.errors import UsageError
    from spyglass.evidence.changes import encode_changes
    from spyglass.evidence.workspace import load_workspace_changes

    reader = open_reader(store_path, run)
    ch = load_workspace_changes(reader.dir)
    if ch is None:
        from spyglass.evidence.workspace import MANIFEST_AFTER, MANIFEST_BEFORE

        evidence = reader.dir / "evidence"
        if (evidence / MANIFEST_BEFORE).exists() and not (evidence / MANIFEST_AFTER).exists():
            raise UsageError(
                f"run {reader.id} has no workspace manifest after the run (the run is {reader.meta.status})",
                hint="it did not finish; `spyglass show` lists the files it was seen writing",
            )
        raise UsageError(
            f"run {reader.id} has no workspace evidence (no manifests in {evidence})",
            hint="it was recorded without workspace manifests; `spyglass show` lists files written",
        )
    if fmt == "json":
        import json

        data = json.loads(encode_changes(ch))
        data["run_id"] = reader.id
        if stat_only:
            for group in ("added", "removed", "modified"):
                for c in data[group]:
                    c.pop("diff", None)
        echo_json(data)
    elif fmt == "patch":
        sys.stdout.write(ch.patch())
    else:
        click.echo(_changes_text(reader.id, ch, stat_only, None if full else _agent_dir(reader.meta), cut=not full))


# -- keys ------------------------------------------------------------------------------------
@click.group("keys")
def keys_group() -> None:
    """Signing keys for run checkpoints (Ed25519)."""


@keys_group.command("generate")
@format_option("json")
@click.option("--force", is_flag=True, help="Overwrite existing key files.")
@click.option(
    "--agent-user",
    default=None,
    metavar="USER",
    help="The user agents run as (default: you, as `spyglass run` starts the agent as its own user): "
    "warn when that user can read the private key.",
)
@click.argument(
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    default="~/.config/spyglass/signing.key",
)
def keys_generate_cmd(fmt: str, force: bool, agent_user: str | None, path: Path) -> None:
    """Make a key pair: PATH (private, mode 0600) and PATH.pub (public).

    Sign runs with `spyglass run --sign-key PATH` (or `evidence.sign_key` in
    the policy) and check them with `spyglass verify RUN --pubkey PATH.pub`.
    Keep the private key where the agent cannot read it (another user, a CI
    secret, a path the sandbox hides): whoever holds it can re-sign an
    edited record.
    """
    import os

    from spyglass.evidence.keys import generate_keypair, readable_by

    files = generate_keypair(path.expanduser(), force=force)
    who: str | int = agent_user if agent_user is not None else os.getuid()
    exposed = readable_by(files.private, who)
    if exposed:
        name = agent_user or "you (the user agents run as by default)"
        click.echo(
            f"spyglass: warning: {files.private} is readable by {name}: an agent running as that user can "
            "read it and re-sign an edited record (reading it raises a high alert); keep the key under "
            "another user, in a CI secret, or run agents in --sandbox",
            err=True,
        )
    if fmt == "json":
        echo_json(
            {
                "private_key": str(files.private),
                "public_key": str(files.public),
                "fingerprint": files.fingerprint,
                "readable_by_agent": exposed,
            }
        )
        return
    click.echo(f"private key: {files.private} (keep it out of the agent's reach)")
    click.echo(f"public key:  {files.public}")
    click.echo(f"fingerprint: {files.fingerprint}")


COMMANDS = [verify_cmd, gate_cmd, changes_cmd, keys_group]
