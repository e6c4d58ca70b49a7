"""The ring's consumer position as the kernel sees it while the reader writes it.

The kernel reads the consumer position at every reservation, from another CPU, to decide
whether a record fits.  A position seen half written can be far below the real one, so the
ring looks full and the program drops the record (about one eBPF untar of 12,000 files in ten
lost one so, with the ring almost empty).  Here another process plays the kernel: it maps the
same page and reads the position as one 8-byte word, as the kernel does, as fast as it can,
while :class:`~spyglass.capture.ebpf.ring.Ring` takes records and moves the position on.  The
ring is a memfd laid out as the kernel lays out a BPF ring buffer (a live program's reads of
the position cannot be watched); the writes are the reader's own code.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import time

from spyglass.capture.ebpf.ring import Ring

PAGE = mmap.PAGESIZE
SIZE = 1 << 16

#: the kernel's part, in a process of its own: every read of the consumer position (one 8-byte
#: load) must be at least the one before; offsets 8 and 16 of the page are the two sides' flags
_WATCHER = r"""
import mmap, os, sys
fd = int(sys.argv[1])
m = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
words = memoryview(m).cast("Q")
words[2] = 1  # ready
last = back = reads = 0
while not words[1]:
    for _ in range(1000):
        pos = words[0]
        if pos < last:
            back += 1
        last = pos
    reads += 1000
print(back, reads, last)
"""


def test_the_kernel_never_sees_the_consumer_position_go_back() -> None:
    fd = os.memfd_create("ring-positions")
    try:
        os.ftruncate(fd, 2 * PAGE + 2 * SIZE)
        ring = Ring(fd, SIZE)
        page = mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        words = memoryview(page).cast("Q")  # [0] consumer, [1] and [2] the flags; producer at PAGE
        producer = PAGE // 8
        watcher = subprocess.Popen([sys.executable, "-c", _WATCHER, str(fd)], pass_fds=(fd,),
                                   stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not words[2] and watcher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert words[2], "the watcher did not start"
        record = b"r" * 120  # 128 bytes a record: the position's low byte carries every other take
        prod = taken = 0
        stop = time.monotonic() + 1.0
        while time.monotonic() < stop:
            for _ in range(200):
                at = 2 * PAGE + (prod & (SIZE - 1))
                header = len(record).to_bytes(4, "little") + bytes(4)
                os.pwrite(fd, header + record, at)
                prod += 128
                words[producer] = prod
                got = ring.read()
                assert got == [record]
                taken += 1
        words[1] = 1  # done
        out, _ = watcher.communicate(timeout=30)
        back, reads, last = (int(x) for x in out.split())
        words.release()
        page.close()
        ring.close()
    finally:
        os.close(fd)
    assert last == prod and taken > 10_000  # the watcher saw the writes, to the last
    assert reads > 100_000
    assert back == 0, f"the consumer position went back {back} times in {reads} reads ({taken} records taken)"
