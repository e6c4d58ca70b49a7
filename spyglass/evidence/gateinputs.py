"""What gate requirements and claim checks look at: the run's facts, loaded once.

Shared by :mod:`spyglass.evidence.requirements` and :mod:`spyglass.evidence.claimcheck`
(neither imports the gate).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from spyglass.events import Alert
from spyglass.evidence.changes import WorkspaceChanges
from spyglass.evidence.facts import FactOptions, RunFacts, gather_facts
from spyglass.evidence.outcome import Evidence, Outcome, judged
from spyglass.evidence.testruns import DEFAULT_EDIT_IGNORE, DEFAULT_TEST_PATTERNS, TestEvidence
from spyglass.evidence.verify import VerifyResult

if TYPE_CHECKING:
    from spyglass.evidence.anchorcheck import AnchoredAlerts
    from spyglass.store import RunReader

MAX_LISTED = 20


class GateOptions(msgspec.Struct):
    test_patterns: Sequence[str] = DEFAULT_TEST_PATTERNS
    edit_ignore: Sequence[str] = DEFAULT_EDIT_IGNORE
    pubkey_raw: bytes | None = None


class GateInputs(msgspec.Struct):
    """What the requirements look at, loaded once and only when needed."""

    reader: RunReader
    options: GateOptions
    _facts: RunFacts | None = None
    _changes: WorkspaceChanges | None = None
    _changes_loaded: bool = False
    _verify: VerifyResult | None = None
    _alerts: list[Alert] | None = None
    _anchor_problem: str | None = None
    notes: list[str] = msgspec.field(default_factory=list)

    @property
    def workspace(self) -> list[str]:
        meta = self.reader.meta
        return list(meta.workspace) or ([meta.cwd] if meta.cwd else [])

    @property
    def facts(self) -> RunFacts:
        if self._facts is None:
            opts = FactOptions(
                test_patterns=self.options.test_patterns,
                edit_ignore=self.options.edit_ignore,
                skill_dirs=self.reader.meta.skills,
            )
            bad: list[str] = []
            self._facts = gather_facts(
                self.reader.events(on_bad_line=lambda p, n, why: bad.append(f"{p.name}:{n}")),
                self.workspace,
                opts,
            )
            if bad:
                self.notes.append(f"{len(bad)} unreadable event line(s) skipped (first: {bad[0]})")
        return self._facts

    @property
    def changes(self) -> WorkspaceChanges | None:
        if not self._changes_loaded:
            from spyglass.evidence.workspace import load_workspace_changes

            self._changes = load_workspace_changes(self.reader.dir)
            self._changes_loaded = True
        return self._changes

    @property
    def verify(self) -> VerifyResult:
        if self._verify is None:
            from spyglass.evidence.anchorcheck import index_anchors
            from spyglass.evidence.verify import verify_run

            # exactly what `spyglass verify` checks, the anchor kept in the index included
            self._verify = verify_run(
                self.reader.dir, pubkey_raw=self.options.pubkey_raw, meta=self.reader.meta,
                anchors=index_anchors(self.reader),
            )
        return self._verify

    @property
    def anchor_problem(self) -> str:
        """Why the run's files do not match the anchor the index keeps ("" if they do)."""
        if self._anchor_problem is None:
            from spyglass.evidence.anchorcheck import anchor_mismatch

            self._anchor_problem = anchor_mismatch(self.reader) or ""
        return self._anchor_problem

    @property
    def anchored_alerts(self) -> AnchoredAlerts | None:
        """The index's alert count and level, when the files do not match their anchor (else None)."""
        if not self.anchor_problem:
            return None
        from spyglass.evidence.anchorcheck import anchored_alerts

        return anchored_alerts(self.reader)

    @property
    def alerts(self) -> list[Alert]:
        if self._alerts is None:
            self._alerts = self.reader.alerts()
        return self._alerts


def tests_outcome(tests: TestEvidence, name: str, kind: str = "requirement") -> Outcome:
    """Did a test run start after the last edit, and did every such run pass?"""
    ev = Evidence()
    last = tests.last_edit
    if last is not None:
        who = f" by `{last.command}`" if last.command else ""
        ev.details.append(f"last edit: seq {last.seq}, {last.type} {last.path}{who}")
        ev.seqs.append(last.seq)
        ev.files.append(last.path)
    else:
        ev.details.append("no edit to the workspace was seen")
    for nc in tests.not_counted:
        ev.details.append(f"not counted: `{nc.command}` (seq {nc.seq}): {nc.reason}")
    if not tests.runs:
        return judged(name, kind, False, "no test run was recorded", ev)
    if len(tests.runs) > MAX_LISTED:
        ev.details.append(f"{len(tests.runs)} test runs; the last {MAX_LISTED} are listed")
    for r in tests.runs[-MAX_LISTED:]:
        ev.commands.append(r.command)
        ev.seqs.append(r.seq)
        place = "after" if r.after_last_edit else "before"
        ev.details.append(f"test run {r.describe()} {place} the last edit")
    after = tests.after_last_edit()
    if not after:
        latest = tests.runs[-1]
        where = f" (seq {last.seq}: {last.path})" if last is not None else ""
        return judged(
            name, kind, False,
            f"the workspace was edited{where} after the last test run {latest.describe()}",
            ev,
        )
    failed = [r for r in after if not r.passed]
    if failed:
        return judged(
            name, kind, False,
            "test run(s) after the last edit did not pass: "
            + "; ".join(r.describe() for r in failed[:3]),
            ev,
        )
    return judged(
        name, kind, True,
        f"{len(after)} test run(s) after the last edit, all exit 0: "
        + "; ".join(r.describe() for r in after[:3]),
        ev,
    )


def resolve_claim_path(path: str, roots: Sequence[str]) -> list[str]:
    """Absolute candidates for a path the agent named (relative paths against each root)."""
    if os.path.isabs(path):
        return [os.path.normpath(path)]
    p = re.sub(r"^\./", "", path)
    return [os.path.normpath(str(Path(r) / p)) for r in roots]
