"""Unexplained activity: what a run touched that its baseline never did.

The baseline is other runs of the same task and/or ``expected`` patterns a
policy declares.  Every leaf (command, file, host) of the run that no baseline
run touched and no pattern covers is listed, grouped by kind and ranked by how
unusual it is:

* file: ``1 − c / n`` where n is the number of components of the normalized
  path and c the length of the longest directory prefix the baseline touched
  anything under (a file in a directory the baseline never went near scores
  higher than a new file beside the baseline's files);
* command: 1.0 for an executable the baseline never ran, 0.5 for new
  arguments to a known executable;
* host: 1.0 for a new host name, 0.5 for a new port of a known host.

Ties go to the resource accessed more often.  Reads and executions of paths
the task declares as grading or oracle material (``grading_paths``, default
``tests/**`` and ``solution/**`` below the workspace) are reported as
``scoring-file-access``, whether the baseline also read them or not, and rank
first among unexplained items.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from spyglass.analysis.normalize import GlobSet
from spyglass.analysis.profile import KINDS, Profile

DEFAULT_GRADING_PATHS: Final = ("tests/**", "solution/**")
#: ops that count as reading scoring material
SCORING_OPS: Final = frozenset({"read", "exec"})
SCORING: Final = "scoring-file-access"
UNEXPLAINED: Final = "unexplained"


class Item(msgspec.Struct, frozen=True):
    kind: str
    name: str
    ops: dict[str, int]
    score: float
    category: str = UNEXPLAINED
    #: the closest thing the baseline did touch (directory, executable or host name), if any
    nearest: str | None = None

    @property
    def count(self) -> int:
        return sum(self.ops.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "ops": dict(sorted(self.ops.items())),
            "count": self.count,
            "score": round(self.score, 4),
            "category": self.category,
            "nearest": self.nearest,
        }


class UnexplainedReport(msgspec.Struct):
    run_id: str
    baseline: list[str]
    expected: list[str]
    grading_paths: list[str]
    items: list[Item] = msgspec.field(default_factory=list)
    #: every read of scoring material, explained by the baseline or not
    scoring_access: list[Item] = msgspec.field(default_factory=list)
    #: resources the baseline touched, but not with this op (e.g. written where the baseline only read)
    new_access: list[Item] = msgspec.field(default_factory=list)
    #: leaves every baseline run touched that this run did not
    missing: list[tuple[str, str]] = msgspec.field(default_factory=list)

    def by_kind(self) -> dict[str, list[Item]]:
        return {k: [i for i in self.items if i.kind == k] for k in KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "baseline": self.baseline,
            "expected": self.expected,
            "grading_paths": self.grading_paths,
            "unexplained": {k: [i.to_dict() for i in v] for k, v in self.by_kind().items()},
            "ranked": [i.to_dict() for i in self.items],
            "scoring_access": [i.to_dict() for i in self.scoring_access],
            "new_access": [i.to_dict() for i in self.new_access],
            "missing": [{"kind": k, "name": n} for k, n in self.missing],
        }


class Expected:
    """Patterns of resources a policy declares as expected: ``KIND:GLOB`` or a file glob.

    ``file:`` globs follow :class:`~spyglass.analysis.normalize.GlobSet`;
    ``command:`` and ``host:`` globs are shell-style with ``*`` matching anything.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = list(patterns)
        files: list[str] = []
        other: dict[str, list[str]] = {"command": [], "host": []}
        for p in self.patterns:
            kind, sep, rest = p.partition(":")
            if sep and kind in other:
                other[kind].append(rest)
            elif sep and kind == "file":
                files.append(rest)
            else:
                files.append(p)
        self._files = GlobSet(files)
        self._other = {
            k: re.compile("|".join(fnmatch.translate(g) for g in v)) if v else None for k, v in other.items()
        }

    def match(self, kind: str, name: str) -> bool:
        if kind == "file":
            return self._files.match(name)
        rx = self._other.get(kind)
        return rx is not None and rx.match(name) is not None


def _dir_prefixes(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _exe_of(command: str) -> str:
    return command.split(" ", 1)[0]


def _host_name(host: str) -> str:
    if host.startswith("unix:"):
        return host
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if ":" in host else host


def unexplained(
    profile: Profile,
    baseline: Sequence[Profile] = (),
    *,
    expected: Iterable[str] = (),
    grading_paths: Iterable[str] = DEFAULT_GRADING_PATHS,
) -> UnexplainedReport:
    """The resources of ``profile`` that no baseline run touched and no expected pattern covers."""
    exp = Expected(expected)
    grading = list(grading_paths)
    gset = GlobSet(grading)
    report = UnexplainedReport(profile.run_id, [b.run_id for b in baseline], exp.patterns, grading)

    seen: dict[str, dict[str, set[str]]] = {k: {} for k in KINDS}  # kind -> name -> ops
    in_all: dict[str, set[str]] | None = None
    for b in baseline:
        names: dict[str, set[str]] = {k: set() for k in KINDS}
        for kind in KINDS:
            for name, op in b.edges[kind]:
                seen[kind].setdefault(name, set()).add(op)
                names[kind].add(name)
        if in_all is None:
            in_all = names
        else:
            for k in KINDS:
                in_all[k] &= names[k]

    dirs: set[str] = set()
    for name in seen["file"]:
        dirs.update(_dir_prefixes(name))
    exes = {_exe_of(c) for c in seen["command"]}
    hostnames = {_host_name(h) for h in seen["host"]}

    items: list[Item] = []
    for kind in KINDS:
        for name, ops in profile.resources(kind).items():
            if kind == "file":
                scoring_ops = {op: n for op, n in ops.items() if op in SCORING_OPS}
                if scoring_ops and gset.match(name):
                    report.scoring_access.append(Item(kind, name, scoring_ops, 1.0, SCORING))
            known = seen[kind].get(name)
            if known is not None:
                new_ops = {op: n for op, n in ops.items() if op not in known}
                if new_ops:
                    report.new_access.append(Item(kind, name, new_ops, 0.25, UNEXPLAINED, name))
                continue
            if exp.match(kind, name):
                continue
            score, nearest = _novelty(kind, name, dirs, exes, hostnames)
            is_scoring = kind == "file" and gset.match(name) and any(op in SCORING_OPS for op in ops)
            items.append(Item(kind, name, dict(ops), score, SCORING if is_scoring else UNEXPLAINED, nearest))
    items.sort(key=lambda i: (i.category != SCORING, -i.score, -i.count, KINDS.index(i.kind), i.name))
    report.items = items
    report.new_access.sort(key=lambda i: (-i.count, i.kind, i.name))
    report.scoring_access.sort(key=lambda i: i.name)
    if in_all is not None:
        report.missing = sorted(
            (k, n) for k in KINDS for n in in_all[k] if n not in profile.resources(k) and not exp.match(k, n)
        )
    return report


def _novelty(
    kind: str, name: str, dirs: set[str], exes: set[str], hosts: set[str]
) -> tuple[float, str | None]:
    if kind == "file":
        parts = name.split("/")
        common = 0
        nearest: str | None = None
        for i in range(len(parts) - 1, 0, -1):
            prefix = "/".join(parts[:i])
            if prefix in dirs:
                common, nearest = i, prefix or "/"
                break
        # an absolute path's first component is empty: do not count the root as shared
        n = len(parts) - (1 if name.startswith("/") else 0)
        c = common - (1 if name.startswith("/") and common else 0)
        return 1.0 - c / n if n else 1.0, nearest
    if kind == "command":
        exe = _exe_of(name)
        return (0.5, exe) if exe in exes else (1.0, None)
    hn = _host_name(name)
    return (0.5, hn) if hn in hosts else (1.0, None)


def format_unexplained_text(r: UnexplainedReport, limit: int = 50) -> str:
    out = [f"run {r.run_id} against {len(r.baseline)} baseline run(s)"
           + (f" and {len(r.expected)} expected pattern(s)" if r.expected else "")]
    if not r.items:
        out.append("nothing unexplained: every command, file and host was touched by a baseline run")
    else:
        out.append(f"{len(r.items)} unexplained resource(s), most unusual first:")
        for i in r.items[:limit]:
            ops = ", ".join(f"{op} ×{n}" for op, n in sorted(i.ops.items()))
            tag = "  [scoring-file access]" if i.category == SCORING else ""
            out.append(f"  {i.score:4.2f}  {i.kind:<7} {i.name}  ({ops}){tag}")
        if len(r.items) > limit:
            out.append(f"  … {len(r.items) - limit} more")
    if r.scoring_access:
        out.append("scoring-file access (grading paths read):")
        for i in r.scoring_access:
            out.append(f"  {i.name}  ({', '.join(f'{op} ×{n}' for op, n in sorted(i.ops.items()))})")
    if r.new_access:
        out.append("new kinds of access to resources the baseline touched:")
        for i in r.new_access[:limit]:
            out.append(f"  {i.kind:<7} {i.name}  ({', '.join(sorted(i.ops))})")
    if r.missing:
        out.append("touched by every baseline run but not by this one:")
        for k, n in r.missing[:limit]:
            out.append(f"  {k:<7} {n}")
    return "\n".join(out)
