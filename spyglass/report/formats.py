"""Output formats of a stored run: one registry for ``spyglass report --format`` and exporters.

Each entry renders a run (and the policy it is judged under) to bytes:

==========  ==============================================================
terminal    what ``spyglass show`` prints, without colour
json        the run's metadata, the rules that fired, the alerts
html        the self-contained HTML report
sarif       SARIF 2.1.0 for GitHub code scanning
junit       the gate's verdict (the policy's ``gate:`` list) as JUnit XML
==========  ==============================================================

Another format (an exporter: OpenTelemetry, a SIEM's JSON) joins with
:func:`register`; ``report --format`` lists whatever is registered.  The
entries import what they need when they render, so the registry itself
costs nothing to import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from spyglass.store import RunReader

Render = Callable[["RunReader", Any], bytes]


class OutputFormat(msgspec.Struct, frozen=True):
    name: str
    description: str
    #: file name suffix a user would give it
    suffix: str
    #: (run, policy) -> the document
    render: Render


FORMATS: dict[str, OutputFormat] = {}


def register(fmt: OutputFormat) -> OutputFormat:
    FORMATS[fmt.name] = fmt
    return fmt


def get(name: str) -> OutputFormat:
    from spyglass.errors import UsageError

    fmt = FORMATS.get(name)
    if fmt is None:
        raise UsageError(f"unknown output format {name!r}", hint=f"known: {', '.join(sorted(FORMATS))}")
    return fmt


def _dump(doc: Any) -> bytes:
    import json

    return (json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n").encode()


def _terminal(reader: RunReader, policy: Any) -> bytes:
    import io

    from spyglass.report.terminal import print_run_summary

    buf = io.StringIO()
    print_run_summary(reader, buf, color=False)
    return buf.getvalue().encode()


def _json(reader: RunReader, policy: Any) -> bytes:
    from spyglass.rules.ruleset import load_ruleset
    from spyglass.rules.sarif import to_json_report

    return _dump(to_json_report(reader.alerts(), load_ruleset(policy).rules, reader.meta))


def _html(reader: RunReader, policy: Any) -> bytes:
    from spyglass.report.html import html_report_bytes

    return html_report_bytes(reader)


def _sarif(reader: RunReader, policy: Any) -> bytes:
    from spyglass.rules.ruleset import load_ruleset
    from spyglass.rules.sarif import to_sarif

    alerts = reader.alerts()
    wanted = {s for a in alerts for s in a.event_seqs[-1:]}
    events = {e.seq: e for e in reader.events() if e.seq in wanted} if wanted else {}
    doc = to_sarif(alerts, load_ruleset(policy).rules, reader.meta, events,
                   policy_source=getattr(policy, "source", None))
    return _dump(doc)


def _junit(reader: RunReader, policy: Any) -> bytes:
    from spyglass.evidence.gate import GateOptions, parse_requirements, run_gate
    from spyglass.evidence.junit import to_junit

    result = run_gate(reader, parse_requirements(list(policy.gate)),
                      options=GateOptions(test_patterns=list(policy.evidence.test_patterns)))
    text = to_junit(result)
    return (text if text.endswith("\n") else text + "\n").encode()


register(OutputFormat("terminal", "what `spyglass show` prints (plain text)", ".txt", _terminal))
register(OutputFormat("json", "run metadata, the rules that fired and the alerts", ".json", _json))
register(OutputFormat("html", "a self-contained HTML page", ".html", _html))
register(OutputFormat("sarif", "SARIF 2.1.0 for GitHub code scanning", ".sarif", _sarif))
register(OutputFormat("junit", "the gate's verdict (the policy's `gate:` list) as JUnit XML", ".xml", _junit))
