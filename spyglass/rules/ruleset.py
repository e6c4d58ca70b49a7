"""A rule set: the built-in pack plus the policy's rule files, checked as a whole.

Loading is all or nothing: any error in any file (YAML, unknown key or
field or modifier, bad regex, a condition naming a missing selection, a
duplicate id, a list or macro defined twice) raises :class:`RuleSetError`
listing every error with ``file:line:col``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from spyglass.errors import SourceError
from spyglass.policy.yamlsrc import Pos
from spyglass.rules.eventtypes import retype
from spyglass.rules.model import Rule, RuleSet
from spyglass.rules.parse import _FileParser, library_names, parse_rule_text
from spyglass.rules.sources import RuleSources, pack_dir, policy_rule_paths, read_sources
from spyglass.rules.tuning import apply_changes, policy_changes

__all__ = ["RuleSet", "RuleSetError", "load_ruleset", "pack_dir", "parse_files"]
_T = TypeVar("_T")


class RuleSetError(SourceError):
    def __init__(self, errors: list[SourceError]) -> None:
        first = errors[0]
        more = f" (and {len(errors) - 1} more; `spyglass rules lint` lists them)" if len(errors) > 1 else ""
        super().__init__(first.message + more, first.path, first.line, first.col)
        self.errors = errors


def parse_files(paths: Sequence[Path], *, pack: bool = True) -> tuple[RuleSet, list[SourceError]]:
    """Parse rule files (and the built-in pack) into a RuleSet plus every error found."""
    return parse_sources(read_sources(paths, pack=pack))


def parse_sources(sources: RuleSources) -> tuple[RuleSet, list[SourceError]]:
    """Parse rule texts already read into a RuleSet plus every error found."""
    texts = sources.texts
    errors = list(sources.errors)
    macros: set[str] = set()
    lists: set[str] = set()
    for shown, text in texts:
        m, li = library_names(text, shown)
        macros |= m
        lists |= li
    rs = RuleSet(files=[s for s, _ in texts])
    seen: dict[str, Rule] = {}
    for shown, text in texts:
        parsed = parse_rule_text(text, shown, macros, lists)
        errors += parsed.errors
        rs.changes += parsed.changes
        lib, new = rs.library, parsed.library
        errors += _define("list", lib.lists, lib.list_pos, new.lists, new.list_pos, shown)
        errors += _define("macro", lib.macros, lib.macro_pos, new.macros, new.macro_pos, shown)
        for rule in parsed.rules:
            if rule.id in seen:
                other = seen[rule.id]
                errors.append(SourceError(f"rule id {rule.id!r} is already used at {other.source}:{other.pos.line}"
                                          " (to change that rule, write `modify: ID`; docs/rules.md, tuning)",
                                          shown, rule.pos.line, rule.pos.col))
                continue
            seen[rule.id] = rule
            rs.rules.append(rule)
    if not errors:
        errors += apply_changes(rs, rs.changes)
    _retype(rs)
    return rs, errors


def _define(
    kind: str,
    names: dict[str, _T],
    pos: dict[str, tuple[str, Pos]],
    new: dict[str, _T],
    new_pos: dict[str, tuple[str, Pos]],
    shown: str,
) -> list[SourceError]:
    """Add a file's lists or macros (``kind``) to the set's; a name defined twice is an error."""
    errors = []
    for name, value in new.items():
        if name in names:
            where = new_pos[name][1]
            first = pos[name]
            errors.append(SourceError(f"{kind} {name!r} is already defined at {first[0]}:{first[1].line}",
                                      shown, where.line, where.col))
            continue
        names[name] = value
        pos[name] = new_pos[name]
    return errors


def _retype(rs: RuleSet) -> None:
    for rule in rs.rules:
        for det in _detections(rule):
            retype(det, rs.library.macros)


def _detections(rule: Rule) -> Iterable[Any]:
    if rule.detection is not None:
        yield rule.detection
    if rule.sequence is not None:
        for st in rule.sequence.steps:
            yield st.detection


def load_ruleset(
    policy: Any = None,
    extra_paths: Iterable[str | Path] = (),
    *,
    pack: bool = True,
    sources: RuleSources | None = None,
) -> RuleSet:
    """The rules a run uses: the pack, ``policy.rules.paths`` and ``extra_paths`` (or the
    ``sources`` already read from them), with ``rules.disable`` and ``rules.overrides``
    applied.  Raises RuleSetError."""
    if sources is None:
        sources = read_sources(policy_rule_paths(policy, extra_paths), pack=pack)
    rs, errors = parse_sources(sources)
    if policy is not None and not errors:
        ids = {r.id for r in rs.rules}
        where = policy.source or "policy"
        for key, names in (("disable", policy.rules.disable), ("overrides", policy.rules.overrides)):
            errors += [SourceError(f"rules.{key} names an unknown rule {rid!r}", where)
                       for rid in names if rid not in ids]
        if not errors:
            changes, errors = policy_changes(policy, lambda path: _FileParser("", path, set(rs.library.macros),
                                                                              set(rs.library.lists)))
            if not errors:
                errors += apply_changes(rs, list(changes))
                rs.changes += changes
                _retype(rs)
    if errors:
        raise RuleSetError(errors)
    return rs
