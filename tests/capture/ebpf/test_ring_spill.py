"""The events ring's spill: a burst's records copied out undecoded once the ring is past an eighth full.

The ring here is a memfd laid out as the kernel lays out a BPF ring buffer (consumer page,
producer page, data), written by the test in the kernel's record format: a live program
cannot be made to stop at a chosen fill level.  The live run below uses the real program."""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from spyglass.capture.ebpf.ring import Ring

PAGE = mmap.PAGESIZE
SIZE = 1 << 16


class _FakeKernel:
    """Writes records into the memfd as the kernel would (8-byte header, 8-byte aligned)."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("ring-test")
        os.ftruncate(self.fd, 2 * PAGE + 2 * SIZE)
        self.prod = 0

    def put(self, payload: bytes, busy: bool = False) -> None:
        at = 2 * PAGE + (self.prod % SIZE)
        hdr = len(payload) | (1 << 31 if busy else 0)
        os.pwrite(self.fd, struct.pack("<II", hdr, 0) + payload, at)
        self.prod += (len(payload) + 8 + 7) & ~7
        os.pwrite(self.fd, struct.pack("<Q", self.prod), PAGE)

    def fill_to(self, nbytes: int, tag: str) -> list[bytes]:
        out = []
        i = 0
        while self.prod < nbytes:
            rec = f"{tag}{i:06d}".encode().ljust(120, b".")
            self.put(rec)
            out.append(rec)
            i += 1
        return out


@pytest.fixture
def kernel() -> Iterator[_FakeKernel]:
    k = _FakeKernel()
    yield k
    os.close(k.fd)


def test_below_an_eighth_nothing_is_spilled(kernel: _FakeKernel) -> None:
    ring = Ring(kernel.fd, SIZE, spill_max=1 << 20)
    kernel.fill_to(SIZE // 16, "a")
    assert ring.spill() == 0 and ring.spilled == 0


def test_past_an_eighth_the_records_are_spilled_and_read_back_first_in_order(kernel: _FakeKernel) -> None:
    ring = Ring(kernel.fd, SIZE, spill_max=1 << 20)
    first = kernel.fill_to(SIZE // 2 + 1024, "a")
    assert ring.spill() == len(first)
    assert ring.pending() == kernel.prod  # spilled bytes still count as pending (the merge's "behind")
    later = kernel.fill_to(kernel.prod + 2048, "b")  # arrived after the spill, still in the mapping
    got: list[bytes] = []
    while ring.pending():
        got += ring.read(4096)  # in steps, as the reader reads
    assert got == first + later
    assert ring.spilled == len(first) and ring.spilled_peak > SIZE // 2


def test_the_spill_holds_at_most_spill_max_bytes(kernel: _FakeKernel) -> None:
    ring = Ring(kernel.fd, SIZE, spill_max=8192)
    recs = kernel.fill_to(SIZE // 2 + 1024, "a")
    n = ring.spill()
    assert 0 < n < len(recs)
    assert ring.spilled_peak <= 8192 + 128  # one record past the bound at most
    assert ring.spill() == 0  # full: the rest stays in the ring (and a full ring drops, counted)
    assert ring.read() == recs


def test_a_record_still_being_written_stops_the_spill(kernel: _FakeKernel) -> None:
    ring = Ring(kernel.fd, SIZE, spill_max=1 << 20)
    recs = kernel.fill_to(SIZE // 2 + 1024, "a")
    kernel.put(b"x" * 64, busy=True)
    kernel.fill_to(kernel.prod + 1024, "b")
    assert ring.spill() == len(recs)
    assert ring.read() == recs  # nothing past the busy record


@pytest.mark.usefixtures("need_ebpf")
def test_a_burst_into_a_small_ring_is_spilled_and_every_record_accounted(tmp_path: Path) -> None:
    """A 64 KiB events ring and 20,000 creates: the reader wakes every 20 ms and finds the ring past
    an eighth full, so it spills; every create is an event or a counted loss, never silently gone."""
    from ebpf_helpers import run_under

    script = '"$PY" -c "import os\nfor i in range(20000): os.close(os.open(\'f\', os.O_WRONLY | os.O_CREAT))"; exit 5'
    cap = run_under("ebpf", script, tmp_path, ring_bytes=1 << 16, spill_bytes=64 << 20)
    res = cap.result
    assert res.exit_code == 5
    assert int(res.handover.get("spilled", 0)) > 0, res.handover
    creates = [e for e in cap.events if e.type == "file.create" and e.path == str(tmp_path / "f")]
    assert len(creates) + res.lost >= 20000 and len(creates) <= 20000
    exits = [e for e in cap.events if e.type == "process.exit"]
    assert any(e.pid == res.root_pid and e.exit_code == 5 for e in exits)
