"""A BPF ring buffer read through its memory mapping, without libbpf callbacks.

Layout (kernel ``bpf_ringbuf``): page 0 holds the consumer position (we
write it), page 1 the producer position (read only), then the data pages,
mapped twice in a row so that a record that wraps is contiguous.  Every
record starts with an 8-byte header: a 32-bit length with a BUSY bit (still
being written) and a DISCARD bit, and a page offset; records are 8-byte
aligned.  Reading never blocks the producer: a full ring makes the program
drop (and count) records, it never waits for us.

So that a burst does not fill the ring while the reader decodes what it read
before (decoding costs several times what copying a record out does), the
reader *spills*: once the kernel's part is past an eighth of the ring (a
margin for a reader kept off the CPU for a while), its complete records are
copied out, undecoded, to a queue in user memory
(:meth:`Ring.spill`, at most ``spill_max`` bytes); :meth:`Ring.read` takes
the spilled records first, so the order is the kernel's.

The consumer position is written as one aligned 8-byte store (a memoryview of
native format ``Q``): the kernel compares it with the producer's at every
reservation, from another CPU, while it is written.  ``struct``'s ``<Q``
writes the eight bytes one at a time, and a value seen half written can be far
below the real one (a carry out of the low bytes), so the ring looks full and
the program drops the record: 3 in 30 eBPF untars of 12,000 files lost one
that way (``benchmarks/bench_live.py --compare``; 0 in 30 with one store).
"""

from __future__ import annotations

import mmap
import struct
import time
from collections import deque

_BUSY = 1 << 31
_DISCARD = 1 << 30
_HDR = 8
#: the spill starts past ``size >> SPILL_SHIFT`` bytes pending in the mapping (an eighth)
SPILL_SHIFT = 3


class Ring:
    def __init__(self, fd: int, size: int, spill_max: int = 0) -> None:
        page = mmap.PAGESIZE
        #: records copied out of the mapping and not read yet (:meth:`spill`), their bytes in ring terms
        self._spilled: deque[bytes] = deque()
        self._spilled_bytes = 0
        self.spill_max = spill_max
        self.spilled = 0  # records spilled in all
        self.spilled_peak = 0  # the most bytes held spilled at once
        self.fd = fd
        self.size = size
        self._mask = size - 1
        self._cons = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._data = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        self._page = page
        #: the two positions, each read and written as one native 8-byte word (module docstring)
        self._cons_pos = memoryview(self._cons).cast("Q")
        self._prod_pos = memoryview(self._data)[:8].cast("Q")
        #: the data as 32-bit words: a record's header (8-byte aligned) read as one word too
        self._words = memoryview(self._data).cast("I")

    def read(self, limit: int = 1 << 30) -> list[bytes]:
        """Every complete record available now (up to ``limit`` bytes), oldest first: the spilled
        ones, then the mapping's."""
        if not self._spilled:
            return self._take(limit)
        out: list[bytes] = []
        spilled, took = self._spilled, 0
        while spilled and took < limit:
            data = spilled.popleft()
            out.append(data)
            took += _size(data)
        self._spilled_bytes -= took
        if took < limit:
            out += self._take(limit - took)
        return out

    def spill(self) -> int:
        """Past an eighth of the ring, copy its complete records out to the spill queue (up to
        ``spill_max`` bytes held); returns the records spilled now.  Reading copies each record
        out anyway: a spilled one costs a queue's push and pop more, and memory until it is read."""
        room = self.spill_max - self._spilled_bytes
        if room <= 0 or self._kernel_pending() <= self.size >> SPILL_SHIFT:
            return 0
        got = self._take(room)
        if got:
            self._spilled.extend(got)
            self._spilled_bytes += sum(_size(d) for d in got)
            self.spilled += len(got)
            self.spilled_peak = max(self.spilled_peak, self._spilled_bytes)
        return len(got)

    def _take(self, limit: int) -> list[bytes]:
        out: list[bytes] = []
        cons = self._cons_pos[0]
        prod = self._prod_pos[0]
        start = cons
        data, words, page, mask = self._data, self._words, self._page, self._mask
        while cons < prod and cons - start < limit:
            at = page + (cons & mask)
            hdr = words[at >> 2]
            if hdr & _BUSY:
                break
            length = hdr & ~(_BUSY | _DISCARD)
            if not hdr & _DISCARD:
                out.append(data[at + _HDR : at + _HDR + length])  # one copy, straight from the mapping
            cons += (length + _HDR + 7) & ~7
        if cons != start:
            self._cons_pos[0] = cons  # one store: the kernel may read it meanwhile
        return out

    def pending(self) -> int:
        """Bytes written by the kernel and not read yet (spilled ones included)."""
        return self._spilled_bytes + self._kernel_pending()

    def _kernel_pending(self) -> int:
        return int(self._prod_pos[0] - self._cons_pos[0])

    def close(self) -> None:
        self._cons_pos.release()
        self._prod_pos.release()
        self._words.release()
        self._data.close()
        self._cons.close()


def _size(data: bytes) -> int:
    """The bytes a record took in the ring (header and padding included)."""
    return (len(data) + _HDR + 7) & ~7


_TS = struct.Struct("<Q")  # a record's CLOCK_BOOTTIME stamp, at offset 16 of its header
#: records stamped this recently when the rings are read wait for the next read
HOLD_NS = 2_000_000


def record_ts(data: bytes) -> int:
    return _TS.unpack_from(data, 16)[0] if len(data) >= 24 else 0


class KernelOrder:
    """The records of several rings, in kernel time order, up to a watermark.

    A fork (life ring) must be decoded before its child's first calls (events ring), and an
    exit after the calls that preceded it; rings read one after the other can split such a
    pair across two reads.  So the records stamped within ``HOLD_NS`` of the moment the rings
    are read are held back to the next read, by when anything stamped before them has arrived
    (a record is submitted microseconds after its stamp); the last read holds nothing back.

    ``chunk`` bounds the bytes taken from each ring per read (a burst is then decoded in
    short steps, between which the reader looks at the alert ring): a ring left with
    records unread lowers the watermark to its last record read (minus the hold), since
    what it still holds is stamped after that.  ``early`` records (read by the caller
    ahead of these rings, :class:`~spyglass.capture.ebpf.lookout.Lookout`) join the merge.
    """

    def __init__(self, rings: list[Ring], hold_ns: int = HOLD_NS, chunk: int | None = None) -> None:
        self.rings = rings
        self.hold_ns = hold_ns
        self.chunk = chunk
        self._held: list[bytes] = []
        self.behind = False  # the last read left records in a ring

    def read(self, last: bool = False, early: list[bytes] | None = None, early_ns: int | None = None) -> list[bytes]:
        """``early_ns``: when the rings of the ``early`` records were last read (before this call):
        a record of theirs stamped later may still come, so the watermark is no later than that
        read (minus the hold) either; else a stall between the two reads (the interpreter lock
        under load) lets a child's calls out before the fork read next time."""
        mark = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - self.hold_ns
        if early_ns is not None:
            mark = min(mark, early_ns - self.hold_ns)
        raw = self._held + early if early else self._held
        self.behind = False
        for r in self.rings:
            if self.chunk is None or last:
                raw = raw + r.read()
                continue
            got = r.read(self.chunk)
            if got:
                raw = raw + got
                if r.pending() > 0:  # the rest is stamped after what was read (within the hold)
                    self.behind = True
                    mark = min(mark, record_ts(got[-1]) - self.hold_ns)
        if len(raw) > 1:
            raw.sort(key=record_ts)
        if last:
            self._held = []
            return raw
        cut = len(raw)
        while cut and record_ts(raw[cut - 1]) > mark:
            cut -= 1
        self._held = raw[cut:]
        return raw[:cut]

    def due_in(self) -> float | None:
        """Seconds until the oldest held record may go (None: nothing held)."""
        if not self._held:
            return None
        wait = record_ts(self._held[0]) + self.hold_ns - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        return max(0.0, wait / 1e9)
