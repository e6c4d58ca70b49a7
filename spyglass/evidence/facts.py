"""One pass over a run's events, collecting what the gate and the claim checks need."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from spyglass.events import Event
from spyglass.events.proctree import ProcessTable
from spyglass.evidence.testruns import (
    DEFAULT_EDIT_IGNORE,
    DEFAULT_TEST_PATTERNS,
    TestEvidence,
    TestRunTracker,
)
from spyglass.evidence.writes import EDIT_TYPES, OutsideWrite, OutsideWriteTracker, event_paths

MAX_SKILL_ACCESS = 50


class CommandRun(msgspec.Struct, kw_only=True):
    seq: int
    pid: int
    argv: list[str]
    exe: str | None = None
    cwd: str | None = None
    end_seq: int | None = None
    exit_code: int | None = None
    signal: str | None = None

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


class PathTouch(msgspec.Struct, kw_only=True):
    path: str
    types: list[str]
    first_seq: int
    last_seq: int
    count: int


class SkillAccess(msgspec.Struct, kw_only=True):
    path: str
    how: str  # read | exec
    seq: int
    pid: int


class FactOptions(msgspec.Struct):
    test_patterns: Sequence[str] = DEFAULT_TEST_PATTERNS
    edit_ignore: Sequence[str] = DEFAULT_EDIT_IGNORE
    outside_allowed: Sequence[str] = ()
    skill_dirs: Sequence[str] = ()


class RunFacts(msgspec.Struct):
    workspace: list[str]
    tests: TestEvidence
    outside_writes: list[OutsideWrite]
    commands: list[CommandRun]
    workspace_writes: dict[str, PathTouch]  # every successful change inside the workspace, by path
    skill_access: dict[str, list[SkillAccess]]  # skill dir -> reads and execs of its files
    events: int = 0
    procs: ProcessTable = msgspec.field(default_factory=ProcessTable)


def _skill_dir(s: str) -> str:
    p = Path(s)
    return str(p.parent if p.name == "SKILL.md" else p).rstrip("/")


def gather_facts(
    events: Iterable[Event], workspace: Sequence[str], options: FactOptions | None = None
) -> RunFacts:
    opts = options or FactOptions()
    roots = [str(w).rstrip("/") or "/" for w in workspace]
    procs = ProcessTable()
    tests = TestRunTracker(roots, opts.test_patterns, opts.edit_ignore)
    outside = OutsideWriteTracker(roots, opts.outside_allowed)
    commands: list[CommandRun] = []
    open_cmds: dict[int, list[int]] = {}
    ws_writes: dict[str, PathTouch] = {}
    skills = [_skill_dir(s) for s in opts.skill_dirs]
    skill_access: dict[str, list[SkillAccess]] = {s: [] for s in skills}
    n = 0

    def under_skill(path: str | None) -> str | None:
        if not path:
            return None
        for s in skills:
            if path.startswith(s + "/"):
                return s
        return None

    def note_skill(path: str | None, how: str, ev: Event) -> None:
        s = under_skill(path)
        if s is not None and path is not None and len(skill_access[s]) < MAX_SKILL_ACCESS:
            skill_access[s].append(SkillAccess(path=path, how=how, seq=ev.seq, pid=ev.pid))

    for ev in events:
        n += 1
        procs.update(ev)
        t = ev.type
        if t == "process.exec":
            if ev.ok and ev.argv is not None:
                commands.append(
                    CommandRun(seq=ev.seq, pid=ev.pid, argv=list(ev.argv), exe=ev.exe, cwd=ev.cwd)
                )
                open_cmds.setdefault(ev.pid, []).append(len(commands) - 1)
                if skills:
                    note_skill(ev.exe, "exec", ev)
                    for a in ev.argv[1:]:
                        if a.startswith("/"):
                            note_skill(a, "exec", ev)
            tests.feed(ev)
        elif t == "process.exit":
            for idx in open_cmds.pop(ev.pid, []):
                c = commands[idx]
                c.end_seq, c.exit_code, c.signal = ev.seq, ev.exit_code, ev.signal
            tests.feed(ev)
        elif t == "process.start":
            open_cmds.pop(ev.pid, None)
            tests.feed(ev)
        elif t == "file.read":
            if skills and ev.ok:
                note_skill(ev.path, "read", ev)
        elif t.startswith("file."):
            info = procs.procs.get(ev.pid)
            command = info.command_line if info is not None else None
            outside.feed(ev, command)
            if t in EDIT_TYPES:
                tests.feed(ev, command)
                if ev.ok:
                    for path in event_paths(ev):
                        if outside.inside(path):
                            pt = ws_writes.get(path)
                            if pt is None:
                                ws_writes[path] = PathTouch(
                                    path=path, types=[t], first_seq=ev.seq, last_seq=ev.seq, count=1
                                )
                            else:
                                pt.last_seq, pt.count = ev.seq, pt.count + 1
                                if t not in pt.types:
                                    pt.types.append(t)
    return RunFacts(
        workspace=roots,
        tests=tests.result(),
        outside_writes=outside.result(),
        commands=commands,
        workspace_writes=ws_writes,
        skill_access=skill_access,
        events=n,
        procs=procs,
    )
