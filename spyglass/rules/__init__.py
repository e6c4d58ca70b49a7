"""Security rules: the rule language, the built-in pack and the engine that evaluates them.

Heavy modules load on first use: ``from spyglass.rules import RuleEngine``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.printer import AlertPrinter
    from spyglass.rules.ruleset import RuleSet, RuleSetError, load_ruleset
    from spyglass.rules.sinks import build_sinks, fail_on_exceeded

__all__ = [
    "AlertPrinter",
    "RuleEngine",
    "RuleSet",
    "RuleSetError",
    "build_sinks",
    "fail_on_exceeded",
    "load_ruleset",
]

_LAZY = {
    "RuleEngine": "spyglass.rules.engine",
    "AlertPrinter": "spyglass.rules.printer",
    "RuleSet": "spyglass.rules.ruleset",
    "RuleSetError": "spyglass.rules.ruleset",
    "load_ruleset": "spyglass.rules.ruleset",
    "build_sinks": "spyglass.rules.sinks",
    "fail_on_exceeded": "spyglass.rules.sinks",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'spyglass.rules' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
