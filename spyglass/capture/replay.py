"""The replay backend: a stored run or a JSONL file of events, as if live.

Every downstream component can be driven offline with it (tests, ``check``,
re-analysis of old runs).  Events keep their stored ``seq`` and ``ts``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from spyglass.capture.base import BackendStatus, CaptureResult, LaunchSpec
from spyglass.events import Event
from spyglass.events.codec import iter_event_stream


class ReplaySession:
    def __init__(self, source: Iterable[Event], on_bad_line: Callable[[int, str], None] | None = None) -> None:
        self._source = source
        self._stopped = False
        self._result = CaptureResult()

    def events(self) -> Iterator[Event]:
        res = self._result
        for ev in self._source:
            if self._stopped:
                break
            res.lines += 1
            if res.root_pid is None and ev.pid:
                res.root_pid = ev.pid
            if ev.type == "process.exit" and ev.pid == res.root_pid:
                res.exit_code, res.signal = ev.exit_code, ev.signal
            yield ev

    def stop(self) -> None:
        self._stopped = True

    def kill_tree(self) -> None:
        self._stopped = True

    @property
    def tracer_pid(self) -> int | None:
        return None  # nothing traces a replay

    @property
    def lost_events(self) -> int:
        return self._result.lost

    def result(self) -> CaptureResult:
        return self._result


def read_jsonl(path: Path, result: CaptureResult | None = None) -> Iterator[Event]:
    """Events from a JSONL file; undecodable lines are counted as unparsed."""
    def bad(n: int, why: str) -> None:
        if result is not None:
            result.unparsed += 1

    with path.open("rb") as f:
        yield from iter_event_stream(f, bad)


class ReplayBackend:
    """Replays events from a file (``events.jsonl`` of a run, or any JSONL) or an iterable."""

    name = "replay"

    def __init__(self, source: Path | str | Iterable[Event]) -> None:
        self.source = source

    def status(self) -> BackendStatus:
        return BackendStatus("replay", True, "replays stored events; always available")

    def start(self, spec: LaunchSpec | None = None) -> ReplaySession:
        if isinstance(self.source, str | Path):
            path = Path(self.source)
            if path.is_dir():
                path = path / "events.jsonl"
            session = ReplaySession(())
            session._source = read_jsonl(path, session._result)
            return session
        return ReplaySession(self.source)
