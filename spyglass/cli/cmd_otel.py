"""``spyglass export``: send stored runs to an OpenTelemetry collector, or write OTLP/JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from spyglass.cli.common import echo_json, format_option, open_store, store_option

_EXPORT_HELP = """Send RUN (id, unique prefix or `latest`) as OpenTelemetry traces and logs.

\b
One trace per run: an `invoke_agent` span, an `execute_tool` span per tool
call, a span per process; every event and alert is a log record tied to the
span of its process (docs/otel.md has the mapping table).  Ids are derived
from the run id, so exporting a run again sends the same trace.

\b
--otlp URL sends to a collector (http/protobuf: http://HOST:4318, grpc:
http://HOST:4317); --otlp-file F writes OTLP/JSON lines instead (one
ExportTraceServiceRequest or ExportLogsServiceRequest per line).  Without
--otlp, the OTEL_EXPORTER_OTLP_ENDPOINT/_HEADERS/_PROTOCOL variables apply.

\b
Exit code: 0 all sent; 1 some records could not be sent (said on stderr);
2 usage error.

\b
Examples:
  spyglass export latest --otlp http://127.0.0.1:4318
  spyglass export latest --otlp http://127.0.0.1:4317 --protocol grpc
  spyglass export 20261201T1012 --otlp-file run.otlp.jsonl
"""


@click.command("export", help=_EXPORT_HELP)
@store_option
@format_option("json")
@click.option("--otlp", "url", metavar="URL", help="Collector base URL.")
@click.option("--otlp-file", "file", type=click.Path(dir_okay=False, path_type=Path), help="Write OTLP/JSON here.")
@click.option(
    "--protocol",
    type=click.Choice(["http/protobuf", "grpc"]),
    default=None,
    help="OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf).",
)
@click.option("--header", "headers", multiple=True, metavar="NAME=VALUE", help="Header for each request (repeatable).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Seconds for each export request, retries included (default 5).",
)
@click.argument("runs", nargs=-1)
def export_cmd(
    store_path: Path | None,
    fmt: str,
    url: str | None,
    file: Path | None,
    protocol: str | None,
    headers: tuple[str, ...],
    timeout: float | None,
    runs: tuple[str, ...],
) -> None:
    import msgspec

    from spyglass.errors import UsageError
    from spyglass.otel.config import OtlpTarget, parse_headers, resolve_target
    from spyglass.otel.export import export_run
    from spyglass.store import RunReader

    hdrs = parse_headers(",".join(headers), "--header") if headers else {}
    if file is not None:
        if url:
            raise UsageError("give --otlp or --otlp-file, not both")
        targets = [OtlpTarget(file=file, source="option")]
    else:
        target = resolve_target(url=url, protocol=protocol, headers=hdrs)
        if target is None:
            raise UsageError(
                "nowhere to export to", hint="give --otlp URL or --otlp-file FILE (or set OTEL_EXPORTER_OTLP_ENDPOINT)"
            )
        targets = [target if timeout is None else msgspec.structs.replace(target, timeout=timeout)]
    if file is not None and len(runs) > 1:
        raise UsageError("--otlp-file takes one run")
    store = open_store(store_path)
    results = []
    for ref in runs or ("latest",):
        reader = RunReader(store, store.resolve(ref))
        for t in targets:
            results.append(export_run(reader, t))
    if fmt == "json":
        echo_json(results if len(results) > 1 else results[0])
    for r in results:
        sent = r["spans"]["sent"] + r["logs"]["sent"]
        total = r["spans"]["emitted"] + r["logs"]["emitted"]
        line = (
            f"spyglass: exported run {r['run']}: {r['spans']['sent']} spans, {r['logs']['sent']} log records "
            f"to {r['file'] or r['endpoint']}"
        )
        if not r["complete"]:
            line += f"; {total - sent} of {total} not sent" + (f" ({r['error']})" if r["error"] else "")
        click.echo(line, err=True)
    if not all(r["complete"] for r in results):
        sys.exit(1)


COMMANDS = [export_cmd]
