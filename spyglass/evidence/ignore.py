"""Path patterns for workspace manifests: exclude globs and ``.gitignore`` rules.

Exclude globs are the policy's path patterns (the table in
:mod:`spyglass.policy.paths` and docs/policy.md), matched against paths
relative to a workspace root: a pattern without a ``/`` matches a name at any
depth (``*.pyc``); ``dir/**`` and ``dir/`` exclude a directory and everything
under it.

``.gitignore`` files follow git's rules for the common cases: comments,
``!`` negation, a trailing ``/`` for directories only, patterns anchored by a
leading or inner ``/``, ``**``.  Nested ``.gitignore`` files apply below
their directory; ``.git/info/exclude`` applies at the root.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import msgspec

from spyglass.policy.paths import GlobError, glob_text, glob_to_regex


def _translate(pat: str) -> str:
    """Regex source for a glob over '/'-separated paths (no anchoring): the policy's
    dialect (:func:`spyglass.policy.paths.glob_to_regex`) with git's reading of a
    trailing ``/**``; raises :class:`~spyglass.policy.paths.GlobError` on a bad pattern."""
    return glob_to_regex(pat, dir_itself=False)


def _glob_source(pattern: str, *, check: bool = True) -> str:
    """The regex source of one exclude glob (see :func:`compile_glob`); a bad glob raises GlobError
    (``check=False``: a character class the regex engine refuses is left to the caller's compile)."""
    text = glob_to_regex if check else glob_text
    pat = pattern.strip()
    if pat.startswith("./"):
        pat = pat[2:]
    if pat.startswith("/"):
        return text(pat[1:])
    if "/" not in pat.rstrip("/"):
        return "(?:.*/)?" + text(pat)
    return text(pat)


@lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex for one exclude glob, matched with ``fullmatch`` on a relative path
    (``dir/`` and ``dir/**``: the directory and everything under it)."""
    return re.compile(_glob_source(pattern))


class GlobSet:
    """A set of exclude globs; ``dir/**`` also matches ``dir`` itself so walks prune it.

    One combined regex says whether any pattern matches (most paths match none); the regex
    of each pattern, which says which one, compiles the first time one matches.  A bad glob
    is still refused here: every pattern is translated now, and one the regex engine refuses
    makes the combined regex fail, so that each is then compiled (and checked) at once."""

    def __init__(self, patterns: list[str] | tuple[str, ...] = ()) -> None:
        self.patterns = [p for p in patterns if p.strip()]
        dirs = [p for p in self.patterns if p.endswith("/**")]
        self._any = _either([_glob_source(p, check=False) for p in self.patterns])
        self._any_dir = _either([_glob_source(p[: -len("/**")], check=False) for p in dirs])
        self._each: tuple[list[re.Pattern[str]], list[tuple[str, re.Pattern[str]]]] | None = None
        if (self._any is None and self.patterns) or (self._any_dir is None and dirs):
            self._compiled()  # not combined: each regex is needed at once (and an invalid one raises)

    def _compiled(self) -> tuple[list[re.Pattern[str]], list[tuple[str, re.Pattern[str]]]]:
        each = self._each
        if each is None:
            each = self._each = (
                [compile_glob(p) for p in self.patterns],
                [(p, compile_glob(p[: -len("/**")])) for p in self.patterns if p.endswith("/**")],
            )
        return each

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, rel: str, is_dir: bool = False) -> str | None:
        """The first pattern matching ``rel`` (or None)."""
        if (self._any is not None and not self._any.fullmatch(rel)
                and (not is_dir or (self._any_dir is not None and not self._any_dir.fullmatch(rel)))):
            return None
        res, dir_res = self._compiled()
        for pat, rx in zip(self.patterns, res, strict=True):
            if rx.fullmatch(rel):
                return pat
        if is_dir:
            for pat, rx in dir_res:
                if rx.fullmatch(rel):
                    return pat
        return None


def _either(sources: list[str]) -> re.Pattern[str] | None:
    """A regex that fully matches what any of the regex ``sources`` fully matches (None: none, or
    they cannot be combined)."""
    if not sources:
        return None
    try:
        return re.compile("|".join(f"(?:{src})" for src in sources))
    except re.error:
        return None


class _Rule(msgspec.Struct, frozen=True):
    """One line of a .gitignore, compiled."""

    base: str  # directory of the .gitignore, relative to the root ("" at the root)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    source: str  # "path/.gitignore:line"
    #: the regex source for the last component alone, when the rule can match nothing else (no ``/``,
    #: no ``**``, no class, which could match a ``/``): ``*.log`` matches a path when it matches its name
    name_src: str | None = None


def _gitignore_rule(line: str, base: str, source: str) -> _Rule | None:
    line = line.rstrip("\n").rstrip("\r")
    if not line.strip() or line.startswith("#"):
        return None
    # trailing spaces are ignored unless escaped
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    negate = line.startswith("!")
    if negate or line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    try:
        src = _translate(line)
    except GlobError:
        return None  # git skips a pattern it cannot read
    name_src = None
    if not anchored:
        if "**" not in line and "[" not in line:
            name_src = src
        src = "(?:.*/)?" + src
    return _Rule(base, re.compile(src), negate, dir_only, source, name_src)


class _File(msgspec.Struct):
    """The rules of one ignore file as a few regexes whose alternatives are its rules, last first
    and named ``r<number>``: ``fullmatch`` gives the last matching rule of the set, as git reads
    them.  The rules that can match a path's last component only are matched against it alone."""

    base: str
    rules: list[_Rule]
    #: (rules matched against the name, the others), for files (no ``dir/`` rule) and for directories
    files: tuple[re.Pattern[str] | None, re.Pattern[str] | None] = (None, None)
    dirs: tuple[re.Pattern[str] | None, re.Pattern[str] | None] = (None, None)
    combined: bool = True  # False: the regexes could not be combined, each rule is tried


def _combine(rules: list[tuple[int, str]]) -> re.Pattern[str] | None:
    if not rules:
        return None
    return re.compile("|".join(f"(?P<r{i}>{src})" for i, src in reversed(rules)))


def _split(rules: list[_Rule], numbered: list[int]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    names = [(i, rules[i].name_src or "") for i in numbered if rules[i].name_src is not None]
    paths = [(i, rules[i].regex.pattern) for i in numbered if rules[i].name_src is None]
    return _combine(names), _combine(paths)


def _last(m: re.Match[str] | None) -> int:
    """The number of the rule that matched (-1: none)."""
    if m is None:
        return -1
    if m.lastgroup is None:
        raise LookupError("no rule group matched")
    return int(m.lastgroup[1:])


class GitIgnore(msgspec.Struct):
    """The ``.gitignore`` rules found in a tree; the last matching rule wins, as in git."""

    rules: list[_Rule] = msgspec.field(default_factory=list)
    files: list[str] = msgspec.field(default_factory=list)
    by_file: list[_File] = msgspec.field(default_factory=list)  # in the order they were added

    def add_file(self, path: Path, base: str) -> None:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        shown = f"{base}/{path.name}" if base else str(path.name)
        self.files.append(shown)
        added: list[_Rule] = []
        for n, line in enumerate(text.splitlines(), 1):
            rule = _gitignore_rule(line, base, f"{shown}:{n}")
            if rule is not None:
                added.append(rule)
        if not added:
            return
        self.rules.extend(added)
        try:
            every = list(range(len(added)))
            files = _split(added, [i for i in every if not added[i].dir_only])
            self.by_file.append(_File(base, added, files, _split(added, every)))
        except re.error:  # a rule's regex does not combine with the others: each is tried
            self.by_file.append(_File(base, added, combined=False))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        for f in reversed(self.by_file):  # the last file with a matching rule decides
            if f.base:
                if not rel.startswith(f.base + "/"):
                    continue
                sub = rel[len(f.base) + 1 :]
            else:
                sub = rel
            if f.combined:
                by_name, by_path = f.dirs if is_dir else f.files
                try:
                    last = max(_last(by_name.fullmatch(sub.rpartition("/")[2])) if by_name is not None else -1,
                               _last(by_path.fullmatch(sub)) if by_path is not None else -1)
                except LookupError:  # cannot be told from the match: rule by rule
                    last = -2
                if last == -1:
                    continue
                if last >= 0:
                    return not f.rules[last].negate
            for rule in reversed(f.rules):
                if (is_dir or not rule.dir_only) and rule.regex.fullmatch(sub):
                    return not rule.negate
        return False

