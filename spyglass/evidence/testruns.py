"""Test runs recognised in a run's events, and the agent's last edit to the workspace.

A test run is a ``process.exec`` whose command line matches a pattern such
as ``pytest`` or ``python -m pytest``: the first word names the program (by
its base name, ``python`` also matching ``python3`` and ``python3.11``), the
other words must appear in order, next to each other, among its arguments.
A script run through an interpreter (``python3 /venv/bin/pytest -q``) is
matched from the script's name.  The test run's process tree (its children,
and further execs of the same process) belongs to it; a test command started
inside another test run (``pytest`` under ``tox``) is part of the outer one.

Its result is the exit code of the matched process.  Options that make a
test command run no tests (``--collect-only``, ``--help``, ``--no-run`` ...)
keep it from counting.

The last edit is the last successful change (write, create, delete, rename,
truncate, chmod, link) to a path inside the workspace made by a process
outside every test run's tree, leaving out caches (``__pycache__``,
``.pytest_cache``, ``.git`` ...).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

import msgspec

from spyglass.events import Event
from spyglass.evidence.ignore import GlobSet
from spyglass.evidence.writes import EDIT_TYPES, event_paths
from spyglass.policy.defaults import DEFAULT_TEST_PATTERNS as POLICY_TEST_PATTERNS

DEFAULT_TEST_PATTERNS: tuple[str, ...] = tuple(POLICY_TEST_PATTERNS)

#: writes to these (relative to a workspace root) are never the agent's "last edit"
DEFAULT_EDIT_IGNORE: tuple[str, ...] = (
    "**/__pycache__/**",
    "**/*.pyc",
    "**/.pytest_cache/**",
    "**/.mypy_cache/**",
    "**/.ruff_cache/**",
    "**/.hypothesis/**",
    "**/.coverage",
    "**/.coverage.*",
    ".git/**",
    ".spyglass/**",
)

#: arguments after which a test command runs no tests
NO_RUN_FLAGS = frozenset(
    {
        "--help",
        "-h",
        "--version",
        "--collect-only",
        "--co",
        "--fixtures",
        "--markers",
        "--setup-plan",
        "--no-run",
        "-list",
        "--listTests",
        "--dry-run",
        "--just-print",
        "--showconfig",
    }
)
_INTERPRETERS = re.compile(r"(python|pypy)[0-9.]*|node|ruby|perl|sh|bash|dash|zsh|env")
_PYTHON = re.compile(r"python[0-9.]*")


def _prog(word: str) -> str:
    return os.path.basename(word)


def _prog_matches(pattern_word: str, program: str) -> bool:
    pw = _prog(pattern_word)
    if pw == program:
        return True
    return pw == "python" and _PYTHON.fullmatch(program) is not None


def _contains(seq: Sequence[str], sub: Sequence[str]) -> bool:
    if not sub:
        return True
    n = len(sub)
    return any(list(seq[i : i + n]) == list(sub) for i in range(len(seq) - n + 1))


class TestPattern(msgspec.Struct, frozen=True):
    __test__ = False  # not a pytest test class

    text: str
    words: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> TestPattern:
        words = tuple(shlex.split(text))
        if not words:
            raise ValueError("empty test pattern")
        return cls(text, words)

    def match(self, argv: Sequence[str]) -> bool:
        if not argv:
            return False
        if self._match(argv):
            return True
        # a script run through its interpreter: python3 /venv/bin/pytest -q
        prog = _prog(argv[0])
        if _INTERPRETERS.fullmatch(prog) and len(argv) > 1 and not argv[1].startswith("-"):
            return self._match(argv[1:])
        return False

    def _match(self, argv: Sequence[str]) -> bool:
        return _prog_matches(self.words[0], _prog(argv[0])) and _contains(argv[1:], self.words[1:])


def compile_patterns(patterns: Sequence[str]) -> list[TestPattern]:
    return [TestPattern.parse(p) for p in patterns]


def runs_no_tests(argv: Sequence[str]) -> str | None:
    """The argument that keeps a test command from running tests, if any."""
    for a in argv[1:]:
        if a in NO_RUN_FLAGS:
            return a
        if a == "-n" and _prog(argv[0]) == "make":
            return a
    return None


class TestRun(msgspec.Struct, kw_only=True):
    __test__ = False  # not a pytest test class

    command: str
    argv: list[str]
    pattern: str
    pid: int
    seq: int  # the exec event
    start_ts: int
    cwd: str | None = None
    end_seq: int | None = None  # the exit event
    end_ts: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    after_last_edit: bool = False
    edits_inside: int = 0  # workspace writes by the test run's own processes (caches left out)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and self.signal is None

    @property
    def duration_s(self) -> float | None:
        return None if self.end_ts is None else round((self.end_ts - self.start_ts) / 1e9, 3)

    def describe(self) -> str:
        if self.exit_code is not None:
            result = f"exit {self.exit_code}"
        elif self.signal:
            result = f"killed by {self.signal}"
        else:
            result = "no exit seen"
        return f"`{self.command}` (seq {self.seq}, {result})"


class Edit(msgspec.Struct, kw_only=True):
    seq: int
    ts: int
    type: str
    path: str
    pid: int
    command: str | None = None


class NotCounted(msgspec.Struct, kw_only=True):
    seq: int
    command: str
    reason: str


class TestEvidence(msgspec.Struct, kw_only=True):
    __test__ = False  # not a pytest test class

    runs: list[TestRun] = msgspec.field(default_factory=list)
    last_edit: Edit | None = None
    not_counted: list[NotCounted] = msgspec.field(default_factory=list)
    patterns: list[str] = msgspec.field(default_factory=list)

    def after_last_edit(self) -> list[TestRun]:
        return [r for r in self.runs if r.after_last_edit]


class TestRunTracker:
    """Feed it every event in order (``feed``), then read ``result()``."""

    __test__ = False  # not a pytest test class

    def __init__(self, workspace: Sequence[str], patterns: Sequence[str] = DEFAULT_TEST_PATTERNS,
                 edit_ignore: Sequence[str] = DEFAULT_EDIT_IGNORE) -> None:
        self.workspace = workspace
        self.patterns = patterns
        self.edit_ignore = edit_ignore
        self._compiled: list[TestPattern] = compile_patterns(patterns)
        self._ignore = GlobSet(list(edit_ignore))
        self._runs: list[TestRun] = []
        self._run_of: dict[int, int] = {}  # live pid -> index in _runs
        self._last_edit: Edit | None = None
        self._not_counted: list[NotCounted] = []
        self._roots = [r.rstrip("/") for r in workspace]

    def _rel(self, path: str) -> str | None:
        for root in self._roots:
            if path == root:
                return "."
            if path.startswith(root + "/"):
                return path[len(root) + 1 :]
        return None

    def is_edit(self, ev: Event) -> str | None:
        """The workspace path an event edits (None when it is not an edit that counts)."""
        if ev.type not in EDIT_TYPES or not ev.ok:
            return None
        for path in event_paths(ev):
            rel = self._rel(path)
            if rel is not None and self._ignore.match(rel) is None:
                return path
        return None

    def feed(self, ev: Event, command: str | None = None) -> None:
        t = ev.type
        if t == "process.start":
            if ev.ppid is not None and ev.ppid in self._run_of:
                self._run_of[ev.pid] = self._run_of[ev.ppid]
            else:
                self._run_of.pop(ev.pid, None)  # a reused pid starts outside any test run
        elif t == "process.exec":
            if ev.ok and ev.pid not in self._run_of and ev.argv:
                self._exec(ev)
        elif t == "process.exit":
            idx = self._run_of.pop(ev.pid, None)
            if idx is not None:
                run = self._runs[idx]
                if run.pid == ev.pid and run.end_seq is None:
                    run.end_seq, run.end_ts = ev.seq, ev.ts
                    run.exit_code, run.signal = ev.exit_code, ev.signal
        elif t in EDIT_TYPES:
            path = self.is_edit(ev)
            if path is None:
                return
            idx = self._run_of.get(ev.pid)
            if idx is not None:
                self._runs[idx].edits_inside += 1
            else:
                self._last_edit = Edit(seq=ev.seq, ts=ev.ts, type=t, path=path, pid=ev.pid, command=command)

    def _exec(self, ev: Event) -> None:
        argv = ev.argv or []
        for pat in self._compiled:
            if pat.match(argv):
                cmd = shlex.join(argv)
                flag = runs_no_tests(argv)
                if flag is not None:
                    self._not_counted.append(
                        NotCounted(seq=ev.seq, command=cmd, reason=f"{flag} runs no tests")
                    )
                    return
                self._runs.append(
                    TestRun(
                        command=cmd,
                        argv=list(argv),
                        pattern=pat.text,
                        pid=ev.pid,
                        seq=ev.seq,
                        start_ts=ev.ts,
                        cwd=ev.cwd,
                    )
                )
                self._run_of[ev.pid] = len(self._runs) - 1
                return

    def result(self) -> TestEvidence:
        last = self._last_edit
        for run in self._runs:
            run.after_last_edit = last is None or run.seq > last.seq
        return TestEvidence(
            runs=list(self._runs),
            last_edit=last,
            not_counted=list(self._not_counted),
            patterns=list(self.patterns),
        )
