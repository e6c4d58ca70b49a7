"""The rules' run state keeps per-process facts only while the process lives."""

from __future__ import annotations

import pytest

from spyglass.events import Event
from spyglass.rules.runstate import RunState


def test_a_process_state_goes_at_its_exit_and_a_copy_chain_before_it_stays() -> None:
    st = RunState()
    for pid in range(1000, 6000):
        st.note_fork(pid, 1)
        st.note_exec(pid)
        st.note_read(Event(type="file.read", pid=pid, path=f"/ws/src/m{pid}.py"), secret=pid == 1000)
        st.update(Event(type="file.create", pid=pid, path=f"/ws/out/o{pid}.json", flags="O_WRONLY|O_CREAT"))
        st.note_exit(pid)
    assert not st.recent and not st.created_by and not st.pending_out and not st.redirect and not st.read_secret
    # what the run learnt from them stays: the output is a copy of what was read, the secret's copy is tainted
    assert st.origin["/ws/out/o1001.json"] == "/ws/src/m1001.py"
    assert "/ws/out/o1000.json" in st.tainted


def test_full_tables_forget_their_older_half_and_keep_tracking_the_new(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunState, "MAX_PATHS", 64)
    monkeypatch.setattr(RunState, "MAX_COPIES", 64)
    monkeypatch.setattr(RunState, "MAX_DNS", 64)
    st = RunState()
    for i in range(1000):
        pid = 2000 + i
        st.note_exec(pid)
        st.note_read(Event(type="file.read", pid=pid, path=f"/ws/src/m{i}.py"), secret=i % 10 == 0)
        st.update(Event(type="file.create", pid=pid, path=f"/ws/out/o{i}.json", flags="O_WRONLY|O_CREAT"))
        st.update(Event(type="net.dns", pid=pid, dns_name=f"h{i}.example.", dns_answers=[f"10.0.{i // 250}.{i % 250}"]))
        st.note_exit(pid)
        assert len(st.written) <= 64 and len(st.origin) <= 64 and len(st.copied) <= 64
        assert len(st.tainted) <= 64 and len(st.dns) <= 64
    # the newest facts are all there: what was written, copied from what, tainted, resolved
    assert "/ws/out/o999.json" in st.written and "/ws/out/o0.json" not in st.written
    assert st.origin["/ws/out/o999.json"] == "/ws/src/m999.py" and st.copied["/ws/src/m999.py"] == "/ws/out/o999.json"
    assert "/ws/out/o990.json" in st.tainted and "/ws/out/o991.json" not in st.tainted
    assert st.dns["10.0.3.249"] == "h999.example"


def test_the_memo_of_copy_sources_stays_under_its_cap_and_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunState, "MAX_SOURCES", 16)
    st = RunState()
    for i in range(200):
        st.note_read(Event(type="file.read", pid=7, path=f"/usr/lib/x86_64-linux-gnu/libz{i}.so.1"), secret=False)
        st.note_read(Event(type="file.read", pid=7, path=f"/ws/src/m{i}.py"), secret=False)
        assert len(st._source) <= 16
        assert st.recent[7][-1] == f"/ws/src/m{i}.py"  # a library is never a copy's source
        assert not any(p.endswith(".so.1") for p in st.recent[7])
