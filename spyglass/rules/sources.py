"""The rule files a run uses, read once: the built-in pack, then the policy's ``rules.paths``.

Light on purpose (no YAML, no rule parser): the rule cache (spyglass/rules/cache.py)
hashes these texts to find a parsed rule set, and the parser parses the very same
texts on a miss, so what was hashed is what was parsed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import SourceError


def pack_dir() -> Path:
    return Path(__file__).resolve().parent / "pack"


def rule_files(path: Path) -> list[Path]:
    """A rule file, or every *.yaml / *.yml file below a directory, sorted."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return [path]


def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if not rel.startswith("..") else str(path)  # relative only inside the working directory


class RuleSources(msgspec.Struct):
    """The texts of the rule files of a run, and the files that could not be read."""

    #: (name shown in messages, text), in load order
    texts: list[tuple[str, str]] = msgspec.field(default_factory=list)
    #: files that could not be read
    errors: list[SourceError] = msgspec.field(default_factory=list)


def read_sources(paths: Sequence[Path], *, pack: bool = True) -> RuleSources:
    """The texts of the rule files (and of the built-in pack first), each file once."""
    from spyglass.policy.loader import read_source

    files: list[Path] = []
    out = RuleSources()
    if pack:
        files += rule_files(pack_dir())
    for p in paths:
        if not p.exists():
            out.errors.append(SourceError("no such file or directory", str(p)))
            continue
        files += rule_files(p)
    seen: set[Path] = set()
    pack_prefix = str(pack_dir())
    for f in files:
        # the pack alone (rglob does not enter linked directories, pack_dir() is resolved): only a
        # link can name a file twice, so only links are resolved (each resolve is a stat per component)
        r = f.resolve() if paths or f.is_symlink() else f
        if r in seen:
            continue
        seen.add(r)
        shown = _display(f) if not str(f).startswith(pack_prefix) else f"spyglass/rules/pack/{f.name}"
        try:
            out.texts.append((shown, read_source(f, shown)))
        except SourceError as exc:
            out.errors.append(exc)
    return out


def policy_rule_paths(policy: Any, extra_paths: Iterable[str | Path] = ()) -> list[Path]:
    return [Path(p) for p in (*(policy.rules.paths if policy is not None else ()), *extra_paths)]
