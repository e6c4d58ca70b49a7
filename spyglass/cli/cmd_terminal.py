"""``spyglass terminal RUN``: the run's recorded terminal (``run --record-tty``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from spyglass.cli.common import echo_json, format_option, open_reader, store_option
from spyglass.errors import SpyglassError


class NoRecording(SpyglassError):
    exit_code = 1


@click.command("terminal")
@store_option
@format_option("json", "cast")
@click.option("--play", is_flag=True, help="Replay the output in real time on this terminal.")
@click.option("--speed", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Playback speed for --play.")
@click.argument("run", default="latest")
def terminal_cmd(store_path: Path | None, fmt: str, play: bool, speed: float, run: str) -> None:
    """What the agent printed and what the operator typed, with times.

    \b
    Recorded by `spyglass run --record-tty` (or policy terminal.record) as
    evidence/terminal.cast (asciicast v2, covered by the run's checkpoint;
    secrets masked).  Lines marked `>` were typed by the operator on
    spyglass's terminal; the rest is the agent's output.
    \b
      --format text   lines with their time since the run started (default)
      --format json   the same as JSON objects
      --format cast   the raw asciicast file (play it with asciinema)
    Exit 1 when the run has no recording.
    """
    from spyglass.tty import cast_path, lines, read_cast

    reader = open_reader(store_path, run)
    path = cast_path(reader.dir)
    if path is None:
        raise NoRecording(f"run {reader.meta.id} has no terminal recording",
                          hint="record one with `spyglass run --record-tty -- CMD`")
    if fmt == "cast":
        sys.stdout.write(path.read_text(encoding="utf-8"))
        return
    try:
        if play:
            _, events = read_cast(path)
            last = 0.0
            for ev in events:
                if ev.code != "o":
                    continue
                time.sleep(max(0.0, (ev.t - last) / speed))
                last = ev.t
                sys.stdout.write(ev.data)
                sys.stdout.flush()
            return
        rows = lines(path)
    except ValueError as exc:
        raise SpyglassError(str(exc)) from None
    if fmt == "json":
        echo_json([{"t": r.t, "who": r.who, "text": r.text} for r in rows])
        return
    for r in rows:
        mark = ">" if r.who == "operator" else " "
        click.echo(f"{r.t:9.3f}s {mark} {r.text}")


COMMANDS = [terminal_cmd]
