"""JUnit XML for a gate result: one testcase per requirement (and per claim).

The layout is the one GitLab, Jenkins and most CI dashboards read::

    <testsuites name="spyglass gate" tests=".." failures="..">
      <testsuite name="spyglass gate: requirements" ...>
        <testcase classname="spyglass.gate.<run>" name="tests-passed-after-last-edit">
          <failure message="...">evidence</failure>      (when not met)
          <skipped message="..."/>                       (unchecked claims)
          <system-out>evidence</system-out>
        </testcase>
      </testsuite>
      <testsuite name="spyglass gate: claims" ...> (with --claims)
    </testsuites>
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from spyglass.evidence.outcome import FAIL, UNCHECKED, GateResult, Outcome


def _evidence_text(o: Outcome) -> str:
    ev = o.evidence
    lines = [o.summary, *ev.details]
    if ev.commands:
        lines.append("commands: " + "; ".join(ev.commands))
    if ev.files:
        lines.append("files: " + ", ".join(ev.files))
    if ev.seqs:
        lines.append("event seqs: " + ", ".join(map(str, ev.seqs)))
    if ev.alerts:
        lines.append("alerts: " + ", ".join(map(str, ev.alerts)))
    return "\n".join(lines)


def _clean(text: str) -> str:
    """Drop characters XML 1.0 cannot carry (control characters from command lines)."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)


def _suite(parent: ET.Element, name: str, run_id: str, outcomes: list[Outcome], stamp: str) -> None:
    fails = sum(o.status == FAIL for o in outcomes)
    skipped = sum(o.status == UNCHECKED for o in outcomes)
    suite = ET.SubElement(
        parent,
        "testsuite",
        {
            "name": name,
            "tests": str(len(outcomes)),
            "failures": str(fails),
            "errors": "0",
            "skipped": str(skipped),
            "timestamp": stamp,
            "time": "0",
        },
    )
    for o in outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"spyglass.gate.{run_id}",
                "name": _clean(o.name),
                "time": "0",
            },
        )
        text = _clean(_evidence_text(o))
        if o.status == FAIL:
            fail = ET.SubElement(case, "failure", {"message": _clean(o.summary), "type": o.kind})
            fail.text = text
        elif o.status == UNCHECKED:
            ET.SubElement(case, "skipped", {"message": _clean(o.summary)})
        out = ET.SubElement(case, "system-out")
        out.text = text


def to_junit(result: GateResult) -> str:
    stamp = datetime.now(UTC).replace(microsecond=0).isoformat()
    reqs = [o for o in result.outcomes if o.kind == "requirement"]
    claims = [o for o in result.outcomes if o.kind == "claim"]
    root = ET.Element(
        "testsuites",
        {
            "name": "spyglass gate",
            "tests": str(len(result.outcomes)),
            "failures": str(len(result.failed)),
            "errors": "0",
        },
    )
    _suite(root, "spyglass gate: requirements", result.run_id, reqs, stamp)
    if claims:
        _suite(root, "spyglass gate: claims", result.run_id, claims, stamp)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
