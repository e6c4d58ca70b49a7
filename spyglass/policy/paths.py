"""Path helpers shared by the policy and the rules: globs, home expansion, "is under".

Glob syntax: ``*`` matches within one path segment, ``?`` one character,
``[abc]``/``[!abc]`` a class, ``**`` any number of segments (``a/**`` also
matches ``a`` itself, ``**/x`` matches ``x`` at any depth).  A glob that
starts with neither ``/`` nor ``~`` matches at any depth (``.env*`` is
``**/.env*``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


def expand_home(pattern: str, home: str | None) -> str:
    """``~`` and ``~/x`` against ``home`` (the run's HOME); other text unchanged."""
    if home and (pattern == "~" or pattern.startswith("~/")):
        return home.rstrip("/") + pattern[1:]
    return pattern


def anchor(pattern: str, home: str | None = None) -> str:
    p = expand_home(pattern, home)
    if not p.startswith("/") and not p.startswith("~"):
        p = "**/" + p
    return p


@lru_cache(maxsize=4096)
def glob_to_regex(pattern: str) -> str:
    """Regular expression text (for fullmatch) equivalent to a path glob."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                before_slash = i == 0 or pattern[i - 1] == "/"
                j = i + 2
                if before_slash and j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
                if before_slash and j == n and i > 0:
                    # "a/**": drop the slash already written, match a and below
                    out.pop()
                    out.append("(?:/.*)?")
                    i = j
                    continue
                out.append(".*")
                i = j
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_globs(patterns: Iterable[str], home: str | None = None, *, cased: bool = True) -> re.Pattern[str]:
    """One regex matching any of the globs (after home expansion and anchoring)."""
    parts = [glob_to_regex(anchor(p, home)) for p in patterns]
    if not parts:
        return re.compile(r"(?!)")
    flags = 0 if cased else re.IGNORECASE
    return re.compile("|".join(f"(?:{p})" for p in parts), flags | re.DOTALL)


def normalize_dir(path: str) -> str:
    return path.rstrip("/") or "/"


class DirSet:
    """Fast "is this path one of these directories or below one of them"."""

    __slots__ = ("exact", "prefixes", "root")

    def __init__(self, dirs: Iterable[str]) -> None:
        norm = sorted({normalize_dir(d) for d in dirs if d})
        self.root = "/" in norm
        self.exact = frozenset(norm)
        self.prefixes = tuple(d + "/" for d in norm if d != "/")

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        if self.root and path.startswith("/"):
            return True
        return path in self.exact or path.startswith(self.prefixes)

    def __bool__(self) -> bool:
        return bool(self.exact)

    def __repr__(self) -> str:
        return f"DirSet({sorted(self.exact)!r})"
