r"""Path helpers shared by the policy, the rules, the evidence and the analysis:
the one glob dialect, home expansion, "is under".

Every path pattern of a policy (``secrets``, ``honeytokens``,
``evidence.manifest_exclude``, ``analysis.grading_paths``, ``analysis.ignore_paths``) is translated here, by
:func:`glob_to_regex`, and checked when the policy loads.  The table of what
each form means is in docs/rules.md ("Path patterns"):

=================  ===========================================================
``*``              any characters within one path segment (not ``/``)
``?``              one character, not ``/``
``[abc]``          a class; ``[!abc]`` or ``[^abc]`` negated; ``\]`` for a ``]``
``\x``             the character ``x`` itself
``**/x``           ``x`` at any depth (also ``x`` itself)
``dir/**``         ``dir`` and everything below it
``dir/``           the same as ``dir/**``
``a**b``           any characters, ``/`` included
``~``, ``~/x``     the run's home directory (the agent's ``HOME``)
``/abs/x``         an absolute path
``x``              (no ``/``) a name at any depth
``rel/x``          relative: under a workspace root (exclude, grading and ignore
                   paths); at any depth for ``secrets`` and ``honeytokens``
=================  ===========================================================

The ``.gitignore`` reader (:mod:`spyglass.evidence.ignore`) keeps git's own
anchoring and directory-only rules and shares this translator.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from functools import lru_cache


class GlobError(ValueError):
    """A pattern that is not a valid glob; ``col`` is the 1-based column of the fault."""

    def __init__(self, message: str, pattern: str, col: int) -> None:
        super().__init__(f"bad path pattern {pattern!r}: {message} (column {col})")
        self.reason = message
        self.pattern = pattern
        self.col = col


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


def _class(pattern: str, i: int) -> tuple[str, int]:
    """The regex of the class opening at ``pattern[i] == "["`` and the index of its ``]``."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    members: list[str] = []
    while j < len(pattern) and pattern[j] != "]":
        if pattern[j] == "\\" and j + 1 < len(pattern):
            j += 1
            members.append(re.escape(pattern[j]))
        else:
            members.append(pattern[j] if pattern[j] not in "\\[" else "\\" + pattern[j])
        j += 1
    if j >= len(pattern):
        raise GlobError("unterminated character class '['", pattern, i + 1)
    if not members:
        raise GlobError("empty character class (write \\] for a ']' in a class)", pattern, i + 1)
    return ("[^" if negate else "[") + "".join(members) + "]", j


@lru_cache(maxsize=4096)
def glob_to_regex(pattern: str, *, dir_itself: bool = True) -> str:
    """Regular expression text (for ``fullmatch``) equivalent to a path glob; raises
    :class:`GlobError` on a pattern that is not one (an unterminated ``[``).

    ``dir_itself=False`` is git's reading of a trailing ``/**`` (what is below the
    directory, not the directory) and leaves a trailing ``/`` to the caller."""
    text = _glob_text(pattern, dir_itself)
    try:
        re.compile(text)
    except re.error as exc:  # a class the regex engine refuses ("[z-a]")
        raise GlobError(exc.msg, pattern, 1) from None
    return text


def glob_text(pattern: str) -> str:
    """The regex text of a glob, not checked by the regex engine (see :func:`_glob_text`)."""
    return _glob_text(pattern)


@lru_cache(maxsize=4096)
def _glob_text(pattern: str, dir_itself: bool = True) -> str:
    """The regex text of a glob, not yet compiled (``glob_to_regex`` checks it compiles); raises
    :class:`GlobError` on what is no glob (an unterminated ``[``), but not on a class the regex
    engine refuses (the caller compiles it: a set of globs compiles them all as one regex)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    if dir_itself and n > 1 and pattern.endswith("/") and not pattern.endswith("\\/"):
        pattern, n = pattern + "**", n + 2  # "dir/" is "dir/**"
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
                if before_slash and j == n and i > 0 and dir_itself:
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
            cls, i = _class(pattern, i)
            out.append(cls)
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def check_glob(pattern: str) -> GlobError | None:
    """The fault of ``pattern``, or None when it is a valid glob."""
    try:
        glob_to_regex(pattern)
    except GlobError as exc:
        return exc
    return None


def compile_globs(patterns: Iterable[str], home: str | None = None, *, cased: bool = True) -> re.Pattern[str]:
    """One regex matching any of the globs (after home expansion and anchoring).

    Compiled once per process for the same globs (a run's engine and its rules ask for the
    same lists), and as one regex: each glob is compiled alone only to name a bad one."""
    return _compile_globs(tuple(anchor(p, home) for p in patterns), cased)


@lru_cache(maxsize=512)
def _compile_globs(anchored: tuple[str, ...], cased: bool) -> re.Pattern[str]:
    if not anchored:
        return re.compile(r"(?!)")
    flags = 0 if cased else re.IGNORECASE
    try:
        parts = [_glob_text(p) for p in anchored]
        return re.compile("|".join(f"(?:{p})" for p in parts), flags | re.DOTALL)
    except (re.error, GlobError):
        for p in anchored:
            glob_to_regex(p)  # raises GlobError naming the bad one
        raise


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


_SPECIAL = "*?[\\"
#: base names whose verdict a GlobMatcher remembers
BASES_MAX = 16_384


class LazyPattern:
    """A regular expression compiled at its first ``search`` or ``fullmatch`` (most of a run's
    globs and rule expressions are never run: a cheaper test rules the event out first); from
    then on both are the compiled pattern's own methods, so a call costs what a compiled
    pattern's does.  Only for text known to compile (checked when its rules or globs loaded)."""

    __slots__ = ("flags", "fullmatch", "pattern", "search")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self.search: Callable[[str], re.Match[str] | None] = self._search
        self.fullmatch: Callable[[str], re.Match[str] | None] = self._fullmatch

    def compiled(self) -> re.Pattern[str]:
        rx = re.compile(self.pattern, self.flags)
        self.search, self.fullmatch = rx.search, rx.fullmatch
        return rx

    def _search(self, text: str) -> re.Match[str] | None:
        return self.compiled().search(text)

    def _fullmatch(self, text: str) -> re.Match[str] | None:
        return self.compiled().fullmatch(text)


def _checked_text(pattern: str) -> str:
    """The regex text of a glob, checked as :func:`glob_to_regex` checks it; only a glob with
    a class (``[...]``) can make text the regex engine refuses, so only that one is compiled."""
    return glob_to_regex(pattern) if "[" in pattern else _glob_text(pattern)


class GlobMatcher:
    """:func:`compile_globs` for matching many distinct paths: the same answers, most paths
    decided without running a regular expression.

    Each glob (after home expansion and anchoring) is sorted by shape: ``**/NAME``
    (NAME without ``/``, ``**`` or a class) is a test on the base name alone,
    remembered per base name; an absolute glob can only match paths that start
    with its literal head (``/home/u/.ssh`` of ``/home/u/.ssh/**``), one C-level
    ``startswith`` over all heads at once, and only then is its expression run;
    any other glob runs only on paths that contain its longest literal part
    (``.git/config`` of ``**/.git/config``).  Without ``cased`` the literal
    tests compare lower-cased ASCII (a path or glob with other characters is
    left to the expression).  ``fullmatch`` returns True or None, like a
    match object's truth.  Each expression is compiled when it is first run
    (a bad glob is refused here, at construction, all the same)."""

    __slots__ = ("_all", "_anchored", "_base_rx", "_bases", "_cased", "_heads", "_other", "pattern")

    def __init__(self, patterns: Iterable[str], home: str | None = None, *, cased: bool = True) -> None:
        pats = [anchor(p, home) for p in patterns]
        flags = re.DOTALL | (0 if cased else re.IGNORECASE)
        self._cased = cased
        texts = [_checked_text(p) for p in pats]
        self.pattern = "|".join(f"(?:{t})" for t in texts)  # what compile_globs would compile
        self._all = LazyPattern(self.pattern or r"(?!)", flags)
        anchored: list[tuple[str, LazyPattern]] = []
        bases: list[str] = []
        other: list[tuple[str, LazyPattern]] = []
        for p, text in zip(pats, texts, strict=True):
            rx = LazyPattern(text, flags)
            while p.startswith("**/**/"):  # anchoring put "**/" before a "**/NAME"
                p = p[3:]
            if p.startswith("**/") and "/" not in p[3:] and "**" not in p[3:] and "[" not in p[3:]:
                bases.append(_glob_text(p[3:]))
                continue
            if not p.isascii():
                other.append(("", rx))
                continue
            key = p if cased else p.lower()
            i = next((k for k, c in enumerate(key) if c in _SPECIAL), len(key))
            head = key[:i].rstrip("/")
            if key.startswith("/") and head:
                anchored.append((head, rx))
            else:  # the longest literal run ("/" at its ends may belong to a "**": left out)
                needle = max(re.split(r"[*?\\[\]]", key), key=len).strip("/")
                other.append((needle if "\\" not in key and "[" not in key else "", rx))
        self._anchored = anchored
        self._heads = tuple(h for h, _ in anchored)
        self._base_rx = LazyPattern("|".join(f"(?:{b})" for b in bases), flags) if bases else None
        self._bases: dict[str, bool] = {}
        self._other = other

    def fullmatch(self, path: str) -> bool | None:
        key = path
        if not self._cased:
            if not path.isascii():
                return True if self._all.fullmatch(path) is not None else None
            key = path.lower()
        if self._heads and key.startswith(self._heads):
            for head, rx in self._anchored:
                if key.startswith(head) and rx.fullmatch(path) is not None:
                    return True
        brx = self._base_rx
        if brx is not None:
            name = path.rpartition("/")[2]
            hit = self._bases.get(name)
            if hit is None:
                if len(self._bases) >= BASES_MAX:  # full: the older half goes (dicts keep insertion order)
                    for old in list(itertools.islice(self._bases, BASES_MAX // 2)):
                        self._bases.pop(old, None)  # another thread may be dropping it too
                hit = self._bases[name] = brx.fullmatch(name) is not None
            if hit:
                return True
        for needle, rx in self._other:
            if needle in key and rx.fullmatch(path) is not None:
                return True
        return None


def glob_matcher(patterns: Iterable[str], home: str | None = None, *, cased: bool = True) -> GlobMatcher:
    """The :class:`GlobMatcher` of these globs, one per process: a run's rule functions ask for
    the same few lists hundreds of times (514 asks for 20 lists in the pack: 31 ms of start-up);
    what it remembers (base names' verdicts) depends on the globs alone."""
    return _glob_matcher(tuple(patterns), home, cased)


@lru_cache(maxsize=256)
def _glob_matcher(patterns: tuple[str, ...], home: str | None, cased: bool) -> GlobMatcher:
    return GlobMatcher(patterns, home, cased=cased)
