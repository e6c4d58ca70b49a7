"""OpenTelemetry export of runs (docs/otel.md): the mapping, the SDK emitter, the live sink and its worker."""
