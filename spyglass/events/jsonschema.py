"""The published JSON Schema of an event (``spyglass/schemas/event.schema.json``).

Regenerate with ``python -m spyglass.events.jsonschema > spyglass/schemas/event.schema.json``;
a test checks the committed file matches.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from spyglass.events.schema import EVENT_TYPES, SCHEMA_VERSION, Event


def event_schema() -> dict[str, Any]:
    raw = msgspec.json.schema(Event)
    body: dict[str, Any] = raw["$defs"]["Event"]
    body["properties"]["type"] = {"enum": list(EVENT_TYPES)}
    body["properties"]["chain"] = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
    body["properties"]["seq"]["minimum"] = 1
    body["required"] = ["seq", "ts", "type", "process.pid"]
    body["additionalProperties"] = False
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://spyglass.dev/schemas/event-{SCHEMA_VERSION}.json",
        "title": f"spyglass event (schema {SCHEMA_VERSION})",
        "description": "One line of events.jsonl. Field names follow OpenTelemetry semantic conventions.",
        **body,
    }


def main() -> None:
    print(json.dumps(event_schema(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
