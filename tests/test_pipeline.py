from __future__ import annotations

import pytest

from spyglass.errors import EXIT_CANNOT_RUN, EXIT_USAGE, MissingToolError
from spyglass.events import Alert, Event
from spyglass.pipeline import ERROR_LOG, Pipeline, RunContext, Sink, SinkStartError


class Collect(Sink):
    name = "collect"

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.all: list[str] = []
        self.alerts: list[str] = []

    def file_read(self, ev: Event) -> None:
        self.reads.append(ev.seq)

    def event(self, ev: Event) -> None:
        self.all.append(ev.type)

    def alert(self, a: Alert) -> None:
        self.alerts.append(a.rule_id)


class Broken(Sink):
    name = "broken"

    def event(self, ev: Event) -> None:
        raise RuntimeError("boom")


class Alerter(Sink):
    name = "alerter"

    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def net_connect(self, ev: Event) -> None:
        self.ctx.raise_alert(Alert(rule_id="net", title="t", level="low", event_seqs=[ev.seq]))


@pytest.mark.sink_errors
def test_hooks_by_type_numbering_and_failure_isolation() -> None:
    c = Collect()
    pipe = Pipeline([Broken(), Alerter(), c])
    pipe.start()
    pipe.feed(Event(type="process.start", pid=1))
    pipe.feed(Event(type="file.read", pid=1, path="/a"))
    pipe.feed(Event(type="net.connect", pid=1, address="127.0.0.1", port=1))
    pipe.done()
    assert c.reads == [2]
    assert c.all == ["process.start", "file.read", "net.connect"]
    assert c.alerts == ["net"]
    assert pipe.errors == {"broken": 3}
    assert ERROR_LOG[0][0] == "broken"  # what the suite's conftest checks after every test


class CannotStart(Sink):
    name = "cannot-start"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def start(self, ctx: RunContext) -> None:
        raise self.exc


class Counts(Sink):
    name = "counts"

    def __init__(self) -> None:
        self.started = self.finished = 0

    def start(self, ctx: RunContext) -> None:
        self.started += 1

    def done(self, ctx: RunContext) -> None:
        self.finished += 1


@pytest.mark.parametrize(
    ("exc", "code"),
    [(ValueError("bad pattern"), EXIT_USAGE), (MissingToolError("git", "git"), EXIT_CANNOT_RUN)],
)
def test_a_sink_that_cannot_start_raises_with_its_name_and_cause(exc: Exception, code: int) -> None:
    before, after = Counts(), Counts()
    pipe = Pipeline([before, CannotStart(exc), after])
    with pytest.raises(SinkStartError) as err:
        pipe.start()
    assert err.value.sink == "cannot-start" and err.value.exit_code == code
    assert str(err.value).startswith("cannot-start could not start: ")
    pipe.done()  # only the sinks that started are told the run is over
    assert (before.started, before.finished, after.started, after.finished) == (1, 1, 0, 0)


def test_process_table_is_current_before_sinks_run() -> None:
    seen: list[str | None] = []

    class Look(Sink):
        def start(self, ctx: RunContext) -> None:
            self.ctx = ctx

        def file_read(self, ev: Event) -> None:
            p = self.ctx.procs.get(ev.pid)
            seen.append(p.exe if p else None)

    pipe = Pipeline([Look()])
    pipe.start()
    pipe.feed(Event(type="process.start", pid=1))
    pipe.feed(Event(type="process.start", pid=2, ppid=1))
    pipe.feed(Event(type="process.exec", pid=2, exe="/bin/cat", argv=["cat", "x"]))
    pipe.feed(Event(type="file.read", pid=2, path="/x"))
    assert seen == ["/bin/cat"]
    assert [p.pid for p in pipe.ctx.procs.lineage(2)] == [2, 1]
