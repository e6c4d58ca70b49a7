"""Checking claims against the record: each claim passes, fails (a false completion), or is unchecked.

* ``tests_passed``: the same test as ``tests-passed-after-last-edit``.
* ``tests_run``: at least one test run was recorded.
* files changed / created / deleted: each path (relative to a workspace root,
  or absolute) is in the workspace diff with that status; without manifests,
  the write events decide.
* commands: an executed command has the same argv (the program compared by
  its base name, a script run through its interpreter accepted), or is the
  script of a ``sh -c`` that ran; a claimed exit code must match.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence

from spyglass.evidence.changes import WorkspaceChanges
from spyglass.evidence.claims import ClaimedCommand, ClaimedFile, Claims
from spyglass.evidence.facts import CommandRun, RunFacts
from spyglass.evidence.gateinputs import resolve_claim_path, tests_outcome
from spyglass.evidence.outcome import FAIL, UNCHECKED, Evidence, Outcome, judged


def _split(cmd: str) -> list[str] | None:
    try:
        return shlex.split(cmd)
    except ValueError:
        return None


# -- matching commands ------------------------------------------------------------------
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "busybox"})
_INTERP = re.compile(r"(python|pypy)[0-9.]*|node|ruby|perl")


def shell_script(argv: Sequence[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` style command lines (``bash -lc 'pytest -q'``)."""
    if not argv or os.path.basename(argv[0]) not in _SHELLS:
        return None
    for i in range(1, len(argv) - 1):
        a = argv[i]
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            return argv[i + 1]
    return None


def _same_argv(a: Sequence[str], b: Sequence[str]) -> bool:
    return (
        len(a) == len(b)
        and len(a) > 0
        and os.path.basename(a[0]) == os.path.basename(b[0])
        and list(a[1:]) == list(b[1:])
    )


def _ws(s: str) -> str:
    return " ".join(s.split())


def argv_forms(argv: Sequence[str]) -> list[Sequence[str]]:
    """The ways a command line can be named: as it is, a script without its interpreter
    (``python3 tools/x.py`` as ``tools/x.py``), a module without ``python -m``."""
    forms: list[Sequence[str]] = [argv]
    if len(argv) > 1 and _INTERP.fullmatch(os.path.basename(argv[0])):
        if argv[1] == "-m" and len(argv) > 2:
            forms.append(argv[2:])
        elif not argv[1].startswith("-"):
            forms.append(argv[1:])
    return forms


def command_matches(claim: ClaimedCommand, run: CommandRun) -> bool:
    argv = run.argv
    tokens = claim.argv
    if tokens and argv:
        for a in argv_forms(tokens):
            if any(_same_argv(a, b) for b in argv_forms(argv)):
                return True
    script = shell_script(argv)
    if script is not None and _ws(script) == _ws(claim.command):
        return True
    inner = shell_script(tokens) if tokens else None
    if inner is not None:
        if script is not None and _ws(script) == _ws(inner):
            return True
        inner_tokens = _split(inner)
        if inner_tokens and any(_same_argv(inner_tokens, b) for b in argv_forms(argv)):
            return True
    return False


# -- checking ---------------------------------------------------------------------------
def _files_outcome(
    kind: str,
    files: list[ClaimedFile],
    facts: RunFacts,
    changes: WorkspaceChanges | None,
    workspace: Sequence[str],
) -> Outcome:
    label = {"changed": "files_changed", "added": "files_created", "deleted": "files_deleted"}[kind]
    ev = Evidence()
    missing: list[str] = []
    if changes is not None:
        status = {"added": {"added"}, "deleted": {"removed"}, "changed": {"added", "removed", "modified"}}[
            kind
        ]
        by_abs = {c.abs_path: c for c in changes.all_changes()}
        for f in files:
            hit = next((by_abs[p] for p in resolve_claim_path(f.path, workspace) if p in by_abs), None)
            if hit is not None and hit.status in status:
                ev.files.append(hit.path)
                ev.details.append(f"{f.path}: {hit.status}")
                continue
            missing.append(f.path)
            written = next(
                (
                    facts.workspace_writes[p]
                    for p in resolve_claim_path(f.path, workspace)
                    if p in facts.workspace_writes
                ),
                None,
            )
            if hit is not None:
                ev.details.append(f"{f.path}: {hit.status}, not {kind}")
            elif written is not None:
                ev.seqs.append(written.first_seq)
                ev.details.append(f"{f.path}: written (seq {written.first_seq}) but no different at the end")
            else:
                ev.details.append(f"{f.path}: not changed")
    else:
        ev.details.append("this run has no workspace manifests; judged from the write events")
        want = {
            "added": {"file.create", "file.rename", "file.link", "file.symlink"},
            "deleted": {"file.delete", "file.rename"},
        }.get(kind)
        for f in files:
            w = next(
                (
                    facts.workspace_writes[p]
                    for p in resolve_claim_path(f.path, workspace)
                    if p in facts.workspace_writes
                ),
                None,
            )
            if w is not None and (want is None or set(w.types) & want):
                ev.files.append(w.path)
                ev.seqs.append(w.first_seq)
                ev.details.append(f"{f.path}: {', '.join(w.types)} (seq {w.first_seq})")
            else:
                missing.append(f.path)
                ev.details.append(f"{f.path}: no such write recorded")
    if missing:
        return judged(
            label, "claim", False,
            f"false completion: {len(missing)} of {len(files)} claimed file(s) were not "
            f"{kind}: {', '.join(missing[:5])}",
            ev,
        )
    return judged(label, "claim", True, f"all {len(files)} claimed file(s) {kind}", ev)


def _command_outcome(claim: ClaimedCommand, facts: RunFacts) -> Outcome:
    name = f"command `{claim.command}`" + (
        f" (exit {claim.exit_code})" if claim.exit_code is not None else ""
    )
    ev = Evidence(details=[f"claimed in {claim.where}"] if claim.where else [])
    matches = [r for r in facts.commands if command_matches(claim, r)]
    if not matches:
        return judged(name, "claim", False, "false completion: no such command was executed", ev)
    for r in matches[:5]:
        ev.seqs.append(r.seq)
        ev.commands.append(r.command)
    if claim.exit_code is not None:
        same = [r for r in matches if r.exit_code == claim.exit_code]
        if not same:
            codes = ", ".join(str(r.exit_code) for r in matches[:5])
            return judged(
                name, "claim", False,
                f"ran (seq {matches[0].seq}) but exited {codes}, not {claim.exit_code} as claimed",
                ev,
            )
        return judged(name, "claim", True, f"executed (seq {same[0].seq}), exit {claim.exit_code} as claimed", ev)
    return judged(
        name, "claim", True,
        f"executed {len(matches)} time(s), first at seq {matches[0].seq}"
        f" (exit {matches[0].exit_code})",
        ev,
    )


def check_claims(
    claims: Claims, facts: RunFacts, changes: WorkspaceChanges | None, workspace: Sequence[str]
) -> list[Outcome]:
    out: list[Outcome] = []
    if claims.tests_passed is True:
        o = tests_outcome(facts.tests, "tests_passed", kind="claim")
        o.evidence.details.insert(0, f"claimed by {claims.tests_passed_from}")
        if o.status == FAIL:
            o.summary = "false completion: " + o.summary
        out.append(o)
    elif claims.tests_passed is False:
        out.append(
            Outcome(
                name="tests_passed",
                kind="claim",
                status=UNCHECKED,
                summary="the agent does not claim that the tests passed",
            )
        )
    if claims.tests_run is True:
        runs = facts.tests.runs
        ev = Evidence(
            details=[f"claimed by {claims.tests_run_from}"],
            seqs=[r.seq for r in runs[:10]],
            commands=[r.command for r in runs[:10]],
        )
        if runs:
            out.append(
                judged("tests_run", "claim", True, f"{len(runs)} test run(s) recorded", ev)
            )
        else:
            out.append(
                judged("tests_run", "claim", False, "false completion: no test command was executed", ev)
            )
    for kind in ("changed", "added", "deleted"):
        files = [f for f in claims.files if f.kind == kind]
        if files:
            out.append(_files_outcome(kind, files, facts, changes, workspace))
    seen: set[tuple[str, int | None]] = set()
    for cc in claims.commands:
        key = (cc.command, cc.exit_code)
        if key not in seen:
            seen.add(key)
            out.append(_command_outcome(cc, facts))
    for field_name, value in claims.unchecked.items():
        shown = json.dumps(value)[:80]
        out.append(
            Outcome(
                name=field_name,
                kind="claim",
                status=UNCHECKED,
                summary=f"not a claim spyglass can check ({shown})",
            )
        )
    if not out:
        out.append(
            Outcome(
                name="claims",
                kind="claim",
                status=UNCHECKED,
                summary=f"no checkable claim found in {claims.source}",
            )
        )
    return out
