"""``spyglass show`` as text: alerts first with lineage, tree with routine helpers folded,
clean when piped, wrapped (never cut) on a terminal."""

from __future__ import annotations

import io
import re
from pathlib import Path

from spyglass.events import Alert, Event, LineageEntry
from spyglass.pipeline import Pipeline, RunContext
from spyglass.report.terminal import print_run_summary, wrap_line
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id

ESC = re.compile(r"\x1b\[")


def test_piped_summary_is_plain_and_ordered(sample_run: RunReader) -> None:
    buf = io.StringIO()
    print_run_summary(sample_run, buf)
    text = buf.getvalue()
    assert not ESC.search(text)
    lines = text.splitlines()
    assert lines[0].startswith(f"run {sample_run.id}  [complete]")
    assert "agent     spyglass-demo    task demo" in text
    assert "mode observe    backend strace" in text
    # alerts before the process tree, grouped by level, the worst first
    i_alerts, i_procs = text.index("Alerts (2)"), text.index("Processes (")
    assert i_alerts < i_procs
    assert text.index("  HIGH (1)") < text.index("  LOW (1)")
    assert "secret-file-read: A private key or credential file was read" in text
    # lineage from the agent down to the offender, and the event that fired it
    block = text[text.index("secret-file-read") : text.index("LOW (1)")]
    assert "lineage" in block and "agent.py" in block and "make_report.py data.csv" in block
    lineage = block.split("lineage", 1)[1]
    assert lineage.index("agent.py") < lineage.index("make_report.py")  # root first
    assert re.search(r"event    #\d+ file\.read .*/home/\.ssh/id_rsa", block)
    # the process tree, with uname folded
    assert "+ 1 routine helper folded (uname)" in text
    assert "uname -p" not in text
    # files and hosts
    assert "Files renamed (2)" in text and "report.tmp -> " in text
    assert "localhost (127.0.0.1):41234" in text and "x2  direct" in text
    assert "Skill coverage" in text and "report-writer: 100%" in text


def _long_run(tmp_path: Path) -> tuple[RunReader, list[str]]:
    store = Store(tmp_path / "s", create=True)
    argv = ["python3", "-c", " ".join(f"word{i}" for i in range(60)), "--output=/very/long/path/" + "x" * 90]
    m = RunMeta(id=new_run_id(), command=argv, started=10**9, mode="enforce", backend="strace")
    w = RunWriter(store, m)
    pipe = Pipeline([w], RunContext(run_id=m.id))
    pipe.feed(Event(type="process.start", pid=5, ts=10**9))
    pipe.feed(Event(type="process.exec", pid=5, ts=10**9 + 1, exe="/usr/bin/python3", argv=argv))
    pipe.feed(Event(type="file.delete", pid=5, ts=10**9 + 2, path="/w/" + "d" * 120))
    w.alert(
        Alert(
            rule_id="r1",
            title="Something bad",
            level="critical",
            event_seqs=[3],
            pid=5,
            argv=argv,
            lineage=[LineageEntry(pid=5, argv=argv), LineageEntry(pid=1, argv=["bash"])],
        )
    )
    w.finish("complete", exit_code=1)
    return RunReader(store, m.id), argv


def test_piped_lines_are_never_cut(tmp_path: Path) -> None:
    reader, _argv = _long_run(tmp_path)
    buf = io.StringIO()
    print_run_summary(reader, buf)
    text = buf.getvalue()
    assert not ESC.search(text)
    # the offender's command line is whole; the tree and lineage elide long ones ...
    assert "word0 word1" in text and "word59" in text
    assert "word0 word1 word2 word3 word4 word5 word6 word7 word8 word9 word10 word11 word12" in text
    assert [line for line in text.splitlines() if "word59" in line and "…" not in line]
    assert "--full" in text or "…" in text
    # ... which `show --full` prints whole
    buf = io.StringIO()
    print_run_summary(reader, buf, full=True)
    text = buf.getvalue()
    assert "…" not in text
    assert "word0 word1" in text and "word59" in text
    assert "/very/long/path/" + "x" * 90 in text
    assert "Files deleted (1)" in text and "/w/" + "d" * 120 in text
    assert "CRITICAL (1)" in text


def test_terminal_output_has_colour_and_wraps_at_words(tmp_path: Path) -> None:
    reader, argv = _long_run(tmp_path)
    buf = io.StringIO()
    print_run_summary(reader, buf, color=True)
    raw = buf.getvalue()
    assert ESC.search(raw)
    plain = ESC.sub("", re.sub(r"\x1b\[[0-9;]*m", "", raw))
    words_in = set(" ".join(argv).split())
    words_out = {w.strip("'") for w in plain.split()}
    # every word of the command line appears whole, even the one longer than the screen
    assert words_in <= words_out
    for line in plain.splitlines():
        if len(line) > 80:  # only a single word longer than the width may exceed it
            assert len(line.split()) <= 2, line


def test_wrap_line_hangs_and_keeps_words() -> None:
    text = "    process  123 " + " ".join(["alpha"] * 30)
    parts = wrap_line(text, 40)
    assert len(parts) > 1 and all(len(p) <= 40 for p in parts)
    assert all(p.startswith("        ") for p in parts[1:])
    assert " ".join(" ".join(parts).split()) == " ".join(text.split())
    assert wrap_line("short", 40) == ["short"] and wrap_line("x" * 50, 0) == ["x" * 50]


def test_write_headings_read_as_english() -> None:
    """`show` heads each kind of write with a phrase of its own ("Directories made", not
    "Files directories made")."""
    from spyglass.report.terminal import WRITE_LABELS

    headings = dict(WRITE_LABELS)
    assert headings["file.mkdir"] == "Directories made" and headings["file.symlink"] == "Symlinks made"
    assert headings["file.chown"] == "Owner changed" and headings["file.create"].startswith("Files ")
    assert not any(h.startswith("Files ") and h[6:].split()[0] in ("directories", "symlinks", "owner", "mode")
                   for h in headings.values())
