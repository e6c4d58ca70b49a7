"""The event schema: the floor every other part of spyglass stands on."""

from spyglass.events.alert import ACTIONS, LEVELS, Alert, LineageEntry, level_rank
from spyglass.events.schema import (
    EVENT_TYPES,
    FIELD_NAMES,
    FILE_WRITE_TYPES,
    SCHEMA_VERSION,
    WIRE_NAMES,
    Event,
    get_field,
)

__all__ = [
    "ACTIONS",
    "EVENT_TYPES",
    "FIELD_NAMES",
    "FILE_WRITE_TYPES",
    "LEVELS",
    "SCHEMA_VERSION",
    "WIRE_NAMES",
    "Alert",
    "Event",
    "LineageEntry",
    "get_field",
    "level_rank",
]
