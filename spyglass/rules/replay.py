"""Evaluating rules offline: over a list of events, a JSONL file, or a stored run.

``check`` uses :func:`check_run`; it runs the events through a Pipeline with
the same RuleEngine that ``spyglass run`` uses live, so the alerts are the
same ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from spyglass.events import Alert, Event
from spyglass.pipeline import Pipeline, RunContext, default_home
from spyglass.policy import Policy
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import RuleSet


class _Entry(msgspec.Struct):
    path: str


class _ManifestPaths(msgspec.Struct):
    files: list[_Entry] = msgspec.field(default_factory=list)


class AlertCollector:
    """A sink that keeps the alerts raised during a replay."""

    name = "alert-collector"

    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def alert(self, alert: Alert) -> None:
        self.alerts.append(alert)


def evaluate(
    events: Iterable[Event],
    ruleset: RuleSet,
    policy: Policy | None = None,
    *,
    meta: Any = None,
    cwd: str = "",
    workspace: list[str] | None = None,
    home: str | None = None,
    renumber: bool = False,
    before: Sequence[object] = (),
    workspace_before: frozenset[str] | None = None,
) -> list[Alert]:
    """Alerts the rule set raises over ``events`` (kept seq numbers unless ``renumber``).

    ``before`` are sinks that run ahead of the engine, as they did live (the
    agent-awareness sink that labels processes with the agent's tool calls)."""
    ws = workspace if workspace is not None else (list(meta.workspace) if meta is not None else [])
    root = cwd or (meta.cwd if meta is not None else "")
    extra: dict[str, Any] = meta.extra if meta is not None else {}
    monitors = [int(p) for p in extra.get("monitor_pids", []) if isinstance(p, int)]
    ctx = RunContext(
        run_id=meta.id if meta is not None else "", root_cwd=root, workspace=ws or ([root] if root else []),
        home=home or extra.get("home") or default_home(), run=meta, monitor_pids=monitors,
    )
    if workspace_before is not None:
        ctx.workspace_before = workspace_before
    engine = RuleEngine(ruleset, policy, home=home, fast_lane=False)  # a replay has no reader thread
    collector = AlertCollector()
    pipe = Pipeline([*before, engine, collector], ctx)
    pipe.start()
    for ev in events:
        pipe.feed(ev, renumber=renumber)
    pipe.done()
    return collector.alerts


def check_run(
    reader: Any, ruleset: RuleSet, policy: Policy | None = None, *, before: Sequence[object] = ()
) -> list[Alert]:
    """Re-evaluate a stored run (a RunReader): the alerts the live run would have raised.

    ``before``: sinks to run ahead of the engine (see :func:`evaluate`)."""
    import copy

    meta = copy.deepcopy(reader.meta)
    run_dir = getattr(reader, "dir", None)
    before_paths = _manifest_paths(Path(run_dir) / "evidence" / "manifest-before.json") if run_dir else None
    return evaluate(reader.events(), ruleset, policy, meta=meta, before=before, workspace_before=before_paths)


def _manifest_paths(path: Path) -> frozenset[str] | None:
    """Paths of a stored workspace manifest (the files that existed before the run)."""
    import msgspec

    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return frozenset(f.path for f in msgspec.json.decode(data, type=_ManifestPaths).files)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def read_events_file(path: Path) -> list[Event]:
    """Events of a JSONL file; a bad line is an error with its line number."""
    import msgspec

    from spyglass.errors import SourceError
    from spyglass.events.codec import decode_event, record_lines

    out: list[Event] = []
    try:
        f = path.open("rb")
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror}", str(path)) from None
    with f:
        for n, line in record_lines(f):
            try:
                out.append(decode_event(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise SourceError(f"not an event: {exc}", str(path), n, 1) from None
    return out
