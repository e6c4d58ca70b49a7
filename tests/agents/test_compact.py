"""Agent awareness keeps compact per-process records: the same view, a fraction of the memory."""

from __future__ import annotations

from spyglass.agents.compact import PidStats, compact, expand
from spyglass.events import Event


def test_pid_stats_first_last_count() -> None:
    st = PidStats()
    for seq, pid in enumerate([5, 6, 5, 5, 7, 6], start=1):
        st.note(pid, seq)
    assert st.get(5) == (1, 4, 3) and st.get(6) == (2, 6, 2) and st.get(7) == (5, 5, 1)
    assert st.get(8) is None


def test_compact_and_expand_keep_what_linking_reads() -> None:
    strings: dict[str, str] = {}
    evs = [
        Event(type="process.start", pid=2, ppid=1, seq=1),
        Event(type="process.exec", pid=2, exe="/bin/sh", argv=["sh", "-c", "ls -la"], seq=2, cwd="/ws"),
        Event(type="process.exit", pid=2, exit_code=3, signal="SIGTERM", seq=3),
    ]
    back = [expand(c) for ev in evs if (c := compact(ev, strings)) is not None]
    assert [(e.type, e.pid, e.seq, e.ppid, e.exe, e.argv, e.exit_code, e.signal) for e in back] == [
        ("process.start", 2, 1, 1, None, None, None, None),
        ("process.exec", 2, 2, None, "/bin/sh", ["sh", "-c", "ls -la"], None, None),
        ("process.exit", 2, 3, None, None, None, 3, "SIGTERM"),
    ]


def test_failed_execs_and_other_events_are_not_kept_and_repeated_commands_are_shared() -> None:
    strings: dict[str, str] = {}
    assert compact(Event(type="process.exec", pid=2, ok=False, exe="/x"), strings) is None
    assert compact(Event(type="process.detach", pid=2), strings) is None
    a = compact(Event(type="process.exec", pid=2, exe="/bin/ls", argv=["ls", "-la"]), strings)
    b = compact(Event(type="process.exec", pid=3, exe="/bin/ls", argv=["ls", "-la"]), strings)
    assert a is not None and b is not None and a[5] is b[5] and a[4] is b[4]
