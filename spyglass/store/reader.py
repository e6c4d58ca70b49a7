"""Reading a stored run: metadata, events (tolerant of damage), alerts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from spyglass.events import Alert, Event
from spyglass.events.codec import decode_alert, iter_event_stream
from spyglass.logs import get_logger
from spyglass.store.meta import RunMeta
from spyglass.store.store import Store

log = get_logger("spyglass.store")

#: called with (file, line number, what is wrong) for each line that cannot be read
OnBadLine = Callable[[Path, int, str], None]


def _warn(path: Path, lineno: int, why: str) -> None:
    log.warning("%s:%d: skipped unreadable record: %s", path, lineno, why)


class RunReader:
    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.id = run_id
        self.dir = store.run_dir(run_id)
        self.meta: RunMeta = store.read_meta(run_id)

    @property
    def events_path(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def alerts_path(self) -> Path:
        return self.dir / "alerts.jsonl"

    def events(self, on_bad_line: OnBadLine = _warn) -> Iterator[Event]:
        """Every readable event in order; a damaged line is reported and skipped."""
        yield from iter_event_file(self.events_path, on_bad_line)

    def alerts(self, on_bad_line: OnBadLine = _warn) -> list[Alert]:
        out: list[Alert] = []
        path = self.alerts_path
        if not path.exists():
            return out
        with path.open("rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    out.append(decode_alert(line))
                except msgspec.DecodeError as exc:
                    on_bad_line(path, n, str(exc))
        return out


def iter_event_file(path: Path, on_bad_line: OnBadLine = _warn) -> Iterator[Event]:
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    with f:
        yield from iter_event_stream(f, lambda n, why: on_bad_line(path, n, why))


def open_run(ref: str = "latest", store: Store | str | Path | None = None) -> RunReader:
    """Open a stored run by id, unique prefix or ``latest``."""
    st = store if isinstance(store, Store) else Store(store)
    return RunReader(st, st.resolve(ref))
