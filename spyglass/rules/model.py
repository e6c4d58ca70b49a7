"""Parsed rules: what a rule file says, checked, before compilation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from spyglass.policy.yamlsrc import Pos
from spyglass.rules.condition import Cond, macro_names
from spyglass.rules.modifiers import FLAGS as MODIFIER_FLAGS
from spyglass.rules.modifiers import operators

#: operators (at most one per field test) and flags a field test may carry
OPERATORS = operators()
FLAGS = MODIFIER_FLAGS
MODIFIERS = OPERATORS + FLAGS
SCOPES = ("run", "process", "lineage", "child")


class ListRef(msgspec.Struct, frozen=True):
    """A value written ``$name``: every value of the shared list ``name``."""

    name: str


class FieldTest(msgspec.Struct):
    """One test of a selection: a field, its operator (None: equality) and the values."""

    field: str
    operator: str | None  # None: equality
    all: bool
    cased: bool
    values: list[Any]  # scalars and ListRef ("$name"; "$$x" is the text "$x")
    pos: Pos
    source: str = ""


class Selection(msgspec.Struct):
    """A named selection of a rule's detection: alternatives of field tests."""

    name: str
    #: OR of alternatives, each an AND of field tests
    alternatives: list[list[FieldTest]]
    pos: Pos = msgspec.field(default_factory=Pos)


class Detection(msgspec.Struct):
    """A rule's detection: its selections and the condition over them."""

    selections: dict[str, Selection]
    condition: Cond
    condition_text: str
    #: event types this detection can match; None: any
    types: frozenset[str] | None


class Step(msgspec.Struct):
    """One step of a sequence rule."""

    name: str
    detection: Detection
    count: int = 1
    distinct: str | None = None
    key: str | None = None


class Sequence(msgspec.Struct):
    """A sequence rule's steps, what they share (``by``) and the time they may take."""

    by: str  # run | process | lineage
    within_ns: int | None
    steps: list[Step]


class Threshold(msgspec.Struct):
    """A threshold rule: how many matches within how long, counted per ``by``."""

    count: int
    within_ns: int
    by: str
    distinct: str | None = None


class Rule(msgspec.Struct):
    """One rule of the pack or of a policy's rule files."""

    id: str
    title: str
    level: str
    action: str = "alert"
    description: str = ""
    tags: list[str] = msgspec.field(default_factory=list)
    message: str = ""
    detection: Detection | None = None
    threshold: Threshold | None = None
    sequence: Sequence | None = None
    enabled: bool = True
    source: str = ""
    pos: Pos = msgspec.field(default_factory=Pos)
    #: what changed the rule after its definition, in order: (part, "file:line ...")
    origin: list[tuple[str, str]] = msgspec.field(default_factory=list)

    @property
    def kind(self) -> str:
        if self.sequence is not None:
            return "sequence"
        return "threshold" if self.threshold is not None else "event"

    @property
    def types(self) -> frozenset[str] | None:
        """Event types this rule can be triggered by (None: any)."""
        if self.sequence is not None:
            out: set[str] = set()
            for st in self.sequence.steps:
                if st.detection.types is None:
                    return None
                out |= st.detection.types
            return frozenset(out)
        assert self.detection is not None
        return self.detection.types


class Library(msgspec.Struct):
    """Shared lists (``$name`` in values) and macros (``$name`` in conditions)."""

    lists: dict[str, list[Any]] = msgspec.field(default_factory=dict)
    macros: dict[str, Selection] = msgspec.field(default_factory=dict)
    list_pos: dict[str, tuple[str, Pos]] = msgspec.field(default_factory=dict)
    macro_pos: dict[str, tuple[str, Pos]] = msgspec.field(default_factory=dict)
    #: "list NAME" / "macro NAME" -> the appends and overrides applied, in order
    changes: dict[str, list[str]] = msgspec.field(default_factory=dict)


class RuleSet(msgspec.Struct):
    """The rules of a run (pack plus the policy's files, tuning applied); defined here, with the
    other plain data, so that a cached one loads without the parser (spyglass/rules/cache.py)."""

    rules: list[Rule] = msgspec.field(default_factory=list)
    library: Library = msgspec.field(default_factory=Library)
    files: list[str] = msgspec.field(default_factory=list)
    #: the changes applied (spyglass/rules/tuning.py), in order
    changes: list[Any] = msgspec.field(default_factory=list)

    def get(self, rule_id: str) -> Rule | None:
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None

    @property
    def enabled(self) -> list[Rule]:
        return [r for r in self.rules if r.enabled]


def field_tests(det: Detection, macros: dict[str, Selection], etype: str | None) -> Iterator[FieldTest]:
    """The tests of a detection that can matter for ``etype`` (alternatives of another type left out)."""
    sels = list(det.selections.values()) + [macros[n] for n in macro_names(det.condition) if n in macros]
    for sel in sels:
        for alt in sel.alternatives:
            if etype is not None and any(
                t.field == "type" and t.operator is None and not any(isinstance(v, ListRef) for v in t.values)
                and etype not in t.values for t in alt
            ):
                continue
            yield from alt
