"""A BPF ring buffer read through its memory mapping, without libbpf callbacks.

Layout (kernel ``bpf_ringbuf``): page 0 holds the consumer position (we
write it), page 1 the producer position (read only), then the data pages,
mapped twice in a row so that a record that wraps is contiguous.  Every
record starts with an 8-byte header: a 32-bit length with a BUSY bit (still
being written) and a DISCARD bit, and a page offset; records are 8-byte
aligned.  Reading never blocks the producer: a full ring makes the program
drop (and count) records, it never waits for us.
"""

from __future__ import annotations

import mmap
import struct

_BUSY = 1 << 31
_DISCARD = 1 << 30
_HDR = 8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class Ring:
    def __init__(self, fd: int, size: int) -> None:
        page = mmap.PAGESIZE
        self.fd = fd
        self.size = size
        self._mask = size - 1
        self._cons = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._data = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        self._page = page
        self._view = memoryview(self._data)

    def read(self, limit: int = 1 << 30) -> list[bytes]:
        """Every complete record available now (up to ``limit`` bytes), oldest first."""
        out: list[bytes] = []
        cons = _U64.unpack_from(self._cons, 0)[0]
        prod = _U64.unpack_from(self._data, 0)[0]
        start = cons
        view, page, mask = self._view, self._page, self._mask
        while cons < prod and cons - start < limit:
            at = page + (cons & mask)
            hdr = _U32.unpack_from(view, at)[0]
            if hdr & _BUSY:
                break
            length = hdr & ~(_BUSY | _DISCARD)
            if not hdr & _DISCARD:
                out.append(bytes(view[at + _HDR : at + _HDR + length]))
            cons += (length + _HDR + 7) & ~7
        if cons != start:
            _U64.pack_into(self._cons, 0, cons)
        return out

    def pending(self) -> int:
        """Bytes written by the kernel and not read yet."""
        return int(_U64.unpack_from(self._data, 0)[0] - _U64.unpack_from(self._cons, 0)[0])

    def close(self) -> None:
        self._view.release()
        self._data.close()
        self._cons.close()
