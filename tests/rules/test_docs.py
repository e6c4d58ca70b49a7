"""docs/rules.md describes every field, modifier, policy list and built-in rule there is."""

from __future__ import annotations

from pathlib import Path

from spyglass.rules.fields import FIELDS
from spyglass.rules.model import MODIFIERS
from spyglass.rules.parse import POLICY_LISTS
from spyglass.rules.ruleset import load_ruleset

DOC = (Path(__file__).resolve().parents[2] / "docs" / "rules.md").read_text()


def test_every_field_and_modifier_is_documented() -> None:
    assert [f for f in FIELDS if f"| `{f}` |" not in DOC] == []
    assert [m for m in MODIFIERS if f"`{m}`" not in DOC] == []
    assert [n for n in POLICY_LISTS if f"| `${n}` |" not in DOC] == []


def test_every_pack_rule_is_in_the_table_with_its_level_and_action() -> None:
    rs = load_ruleset()
    missing = [r.id for r in rs.rules if f"| `{r.id}` | {r.level} | {r.action} |" not in DOC]
    assert missing == []
    assert f"{len(rs.rules)} rules in `spyglass/rules/pack/`" in DOC
