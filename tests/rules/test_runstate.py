"""The rules' run state keeps per-process facts only while the process lives."""

from __future__ import annotations

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
