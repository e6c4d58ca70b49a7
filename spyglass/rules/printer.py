"""The live alert printer: one line on stderr per alert, as it fires."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import IO

from spyglass.events import Alert
from spyglass.pipeline import RunContext
from spyglass.rules.describe import short_command
from spyglass.safetext import visible
from spyglass.termcolor import use_color

_COLORS = {"info": "2", "low": "36", "medium": "33", "high": "31", "critical": "1;31"}


#: a message longer than this is shortened in its middle on the live line (the stored alert keeps it
#: whole): a command line of thousands of characters (an agent's shell-snapshot script) would bury
#: the lines around it; its start and its end (a path, a host) stay
MESSAGE_CHARS = 400
_MESSAGE_TAIL = 100


def _shorten(text: str) -> str:
    if len(text) <= MESSAGE_CHARS:
        return text
    head = MESSAGE_CHARS - _MESSAGE_TAIL - 1
    return f"{text[:head]}…{text[-_MESSAGE_TAIL:]}"


def format_alert_line(alert: Alert, color: bool = False) -> str:
    """``spyglass: HIGH cred-secret-read pid 4242 (cat /h/.ssh/id_rsa): read secret ...``; an alert
    of no process (found at the end of the run): ``spyglass: CRITICAL witness-tamper: ...``."""
    level = visible(alert.level.upper())
    if color:
        level = f"\033[{_COLORS.get(alert.level, '0')}m{level}\033[0m"
    what = _shorten(visible(alert.message))
    if not alert.pid and not alert.argv and not alert.exe:
        return f"spyglass: {level} {visible(alert.rule_id)}: {what}"
    cmd = visible(short_command(alert.argv, alert.exe, 50))
    return f"spyglass: {level} {visible(alert.rule_id)} pid {alert.pid} ({cmd}): {what}"


class AlertPrinter:
    """Pipeline sink: prints every alert raised by any sink.

    An alert the rule engine's fast lane announced ahead of the stream is printed
    when announced (on the capture's reader thread) and not again when recorded,
    unless the store could not save it: then again, marked NOT SAVED (``json``: when
    recorded, with its ``seq`` and event).  The two are matched by rule, process and
    the event's time, not by message: the eBPF look-ahead decides an event with a
    process table of its own, so around an exec its message can name the command
    the process ran before (the recorded one names the new one)."""

    name = "alert-printer"

    def __init__(self, stream: IO[str] | None = None, color: bool | None = None, fmt: str = "text") -> None:
        self.stream = stream
        self.color = color
        self.fmt = fmt  # "text": one readable line; "json": the alert as one JSON line (run, host, agent, task)
        self._unsaved: set[int] = set()
        #: (rule, pid, event time) of the alerts printed when announced and not recorded yet
        self._announced: Counter[tuple[str, int, int]] = Counter()
        self._lock = threading.Lock()  # two threads print: whole lines, one at a time
        #: lines the stream refused (stderr on a full disk): written again at the end of the run
        self._pending: list[str] = []

    def start(self, ctx: RunContext) -> None:
        # the store writer (ahead of us) adds the seq of every alert it could not save
        self._unsaved = ctx.unsaved_alerts

    def announce(self, alert: Alert) -> None:
        if self.fmt == "json":  # machines get the alert whole (its seq, its event), when recorded
            return
        with self._lock:
            self._announced[(alert.rule_id, alert.pid, alert.ts)] += 1
            self._print(alert)

    def alert(self, alert: Alert) -> None:
        with self._lock:
            key = (alert.rule_id, alert.pid, alert.ts)
            left = self._announced.get(key, 0)
            if left:
                if left == 1:
                    del self._announced[key]
                else:
                    self._announced[key] = left - 1
                if alert.seq not in self._unsaved:
                    return  # printed when announced; an alert the store could not save is said again
            self._print(alert)

    def _print(self, alert: Alert) -> None:
        stream = self.stream or sys.stderr
        if self.fmt == "json":
            import msgspec

            self._write(stream, msgspec.json.encode(alert).decode())
            return
        color = use_color(stream, self.color)
        line = format_alert_line(alert, color)
        if alert.seq in self._unsaved:
            line += "  [NOT SAVED: the store could not be written]"
        self._write(stream, line)

    def _write(self, stream: IO[str], line: str) -> None:
        try:
            stream.write(line + "\n")
            stream.flush()
        except OSError:  # stderr redirected to a full disk: the alert must still be told, later
            self._pending.append(line)

    def done(self, ctx: RunContext) -> None:
        """Write the lines the stream refused when their alerts fired (space may be back)."""
        if not self._pending:
            return
        stream = self.stream or sys.stderr
        with self._lock:
            lines, self._pending = self._pending, []
        for line in lines:
            try:
                stream.write(line + ("" if self.fmt == "json" else "  [printed late: the terminal output "
                                                                  "could not be written when it fired]") + "\n")
                stream.flush()
            except OSError:
                self._pending.append(line)
