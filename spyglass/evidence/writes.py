"""Which events change files, and which of those landed outside the workspace."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

from spyglass.events import Event
from spyglass.events.schema import FILE_WRITE_TYPES
from spyglass.evidence.ignore import GlobSet
from spyglass.policy.paths import DirSet

#: events that change a file's content, name or permissions (an "edit")
EDIT_TYPES: Final = frozenset(
    {
        "file.write",
        "file.create",
        "file.delete",
        "file.rename",
        "file.truncate",
        "file.chmod",
        "file.link",
        "file.symlink",
    }
)

#: written all the time by ordinary programs and not storage: never reported as outside writes
PSEUDO_PATHS: Final = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/console",
    "/dev/ptmx",
    "/dev/pts/**",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/stdin",
    "/dev/fd/**",
    "/proc/self/**",
    "/proc/thread-self/**",
)
MAX_SEQS = 10
_MEMO_MAX = 100_000
#: how many changed paths inside the workspace the tracker names (past it: :attr:`inside_overflow`)
MAX_INSIDE = 1 << 18


def event_paths(ev: Event) -> list[str]:
    """The paths an event acts on (both ends of a rename or link)."""
    out = [ev.path] if ev.path else []
    if ev.target and ev.type in ("file.rename", "file.link"):
        out.append(ev.target)
    return out


class OutsideWrite(msgspec.Struct, kw_only=True):
    path: str
    types: list[str]
    count: int
    seqs: list[int]  # the first MAX_SEQS
    pids: list[int]
    commands: list[str]  # command lines of the writers (first few)
    #: made new during the run (an exclusive create, mkdir, link) and removed again: no lasting change
    transient: bool = False


class AbsGlobs(GlobSet):
    """Globs over absolute paths ("/tmp/**")."""

    def match_abs(self, path: str) -> str | None:
        return self.match(path.lstrip("/"))


def abs_globs(patterns: Iterable[str]) -> AbsGlobs:
    return AbsGlobs(["/" + p.lstrip("/") for p in patterns])


class OutsideWriteTracker:
    """Collects successful file changes outside the workspace roots, path by path.

    ``allowed`` are extra absolute globs that do not count (``/tmp/**``);
    pseudo-devices such as ``/dev/null`` never count.
    """

    def __init__(self, roots: Sequence[str], allowed: Iterable[str] = ()) -> None:
        self.roots = [r.rstrip("/") or "/" for r in roots]
        # for inside(): one C-level test per event instead of a string built per root
        self._everywhere = "/" in self.roots
        self._root_set = frozenset(self.roots)
        self._prefixes = tuple(r + "/" for r in self.roots if r != "/")
        patterns = [*PSEUDO_PATHS, *allowed]
        # "/literal/dir/**" patterns are a directory test; only the others need a glob match
        trees = {p for p in patterns if p.endswith("/**") and not any(c in p[:-3] for c in "*?[\\")}
        self._trees = DirSet("/" + t[:-3].lstrip("/") for t in trees)
        self._ignore = abs_globs([p for p in patterns if p not in trees])
        self._ignored: dict[str, bool] = {}  # path -> ignored (memo of the glob match, bounded)
        self._by_path: dict[str, OutsideWrite] = {}
        self._new: dict[str, bool] = {}  # the first change surely made the path
        self._gone: dict[str, bool] = {}  # the last change removed it
        #: the paths inside the roots that the events show changed (the after-manifest reads them again)
        self.inside_paths: set[str] = set()
        self.inside_overflow = False  # more than MAX_INSIDE of them: not all are named

    def inside(self, path: str) -> bool:
        return self._everywhere or path in self._root_set or path.startswith(self._prefixes)

    def ignored(self, path: str) -> bool:
        """A path whose changes never count (pseudo-devices, the allowed globs); memoised."""
        if path in self._trees:
            return True
        hit = self._ignored.get(path)
        if hit is None:
            if len(self._ignored) >= _MEMO_MAX:
                self._ignored.clear()
            hit = self._ignored[path] = self._ignore.match_abs(path) is not None
        return hit

    def feed(self, ev: Event, command: str | Callable[[], str | None] | None = None) -> None:
        """Note ``ev`` if it changed a file; ``command``: its process's command line (or a function
        giving it, called only for a write outside the workspace)."""
        if ev.type not in FILE_WRITE_TYPES or not ev.ok:
            return
        if ev.flags and "O_TMPFILE" in ev.flags:
            return  # an anonymous file: it has no name unless a later link gives it one
        for i, path in enumerate(event_paths(ev)):
            if self.inside(path):
                if len(self.inside_paths) < MAX_INSIDE:
                    self.inside_paths.add(path)
                elif path not in self.inside_paths:
                    self.inside_overflow = True
                continue
            if self.ignored(path):
                continue
            w = self._by_path.get(path)
            if w is None:
                w = self._by_path[path] = OutsideWrite(
                    path=path, types=[], count=0, seqs=[], pids=[], commands=[]
                )
                self._new[path] = _surely_new(ev, i)
            self._gone[path] = ev.type == "file.delete" or (ev.type == "file.rename" and i == 0)
            w.count += 1
            if ev.type not in w.types:
                w.types.append(ev.type)
            if len(w.seqs) < MAX_SEQS:
                w.seqs.append(ev.seq)
            if ev.pid not in w.pids and len(w.pids) < MAX_SEQS:
                w.pids.append(ev.pid)
            if callable(command):
                command = command()
            if command and command not in w.commands and len(w.commands) < 3:
                w.commands.append(command)

    def result(self) -> list[OutsideWrite]:
        for path, w in self._by_path.items():
            w.transient = self._new.get(path, False) and self._gone.get(path, False)
        return sorted(self._by_path.values(), key=lambda w: w.path)


def _surely_new(ev: Event, index: int) -> bool:
    """Whether this event certainly made its path (it fails when the path exists)."""
    if ev.type == "file.create":
        return bool(ev.flags and "O_EXCL" in ev.flags)
    if ev.type in ("file.mkdir", "file.symlink"):
        return True
    return ev.type == "file.link" and index == 1
