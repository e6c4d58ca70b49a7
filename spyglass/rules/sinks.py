"""What ``spyglass run`` plugs into its pipeline for security rules, and the exit rule."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from spyglass.events import level_rank
from spyglass.policy import Policy
from spyglass.rules.engine import RuleEngine
from spyglass.rules.model import RuleSet


def build_sinks(
    policy: Policy,
    *,
    ruleset: RuleSet | None = None,
    extra_rules: Iterable[str | Path] = (),
    printer: bool = True,
    stream: IO[str] | None = None,
    home: str | None = None,
    mode: str | None = None,
) -> list[Any]:
    """Sinks for a live run: the rule engine, then (optionally) the stderr printer.

    Loads the rule set from the policy if none is given; a bad rule or policy
    raises (RuleSetError, a SourceError) before anything starts.  ``home`` is
    the agent's HOME (it is also recorded in ``RunMeta.extra["home"]`` so a
    replay expands ``~`` the same way).
    """
    from spyglass.rules.printer import AlertPrinter
    from spyglass.rules.ruleset import load_ruleset

    rs = ruleset if ruleset is not None else load_ruleset(policy, extra_rules)
    sinks: list[Any] = [RuleEngine(rs, policy, home=home, mode=mode)]
    if printer:
        sinks.append(AlertPrinter(stream))
    return sinks


def fail_on_exceeded(max_level: str | None, fail_on: str | None) -> bool:
    """True when an alert at or above ``fail_on`` fired (``spyglass run`` then exits 6)."""
    if not fail_on or not max_level:
        return False
    return level_rank(max_level) >= level_rank(fail_on) >= 0


def max_level(levels: Iterable[str]) -> str | None:
    best: str | None = None
    for lv in levels:
        if best is None or level_rank(lv) > level_rank(best):
            best = lv
    return best
