"""Protected files by device and inode: the decoder's mapping (no root) and the strace memo."""

from __future__ import annotations

import os
from pathlib import Path

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.decoder import RecordDecoder
from spyglass.capture.ident import Identities, kernel_dev


def _kdev(st_dev: int) -> int:
    return os.major(st_dev) << 20 | os.minor(st_dev)


def test_kernel_dev_is_stats_st_dev(tmp_path: Path) -> None:
    st = os.stat(tmp_path)
    assert kernel_dev(_kdev(st.st_dev)) == st.st_dev


def test_an_open_that_reached_a_protected_inode_gets_its_path(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_text("x")
    st = os.stat(key)
    dec = RecordDecoder(protected=Identities({(st.st_dev, st.st_ino): str(key)}))
    rec = R.build(R.REC_SYS, nr=257, pid=7, tid=7, ret=3, args=(2**64 - 100, 0, 0, 0, 0, 0),
                  blobs=(b"/tmp/other-name\0", b"", b"", b""), file_id=(_kdev(st.st_dev), st.st_ino))
    (ev,) = dec.feed(rec)
    assert (ev.type, ev.path, ev.raw_path) == ("file.read", str(key), "/tmp/other-name")
    other = R.build(R.REC_SYS, nr=257, pid=7, tid=7, ret=4, args=(2**64 - 100, 0, 0, 0, 0, 0),
                    blobs=(b"/tmp/plain\0", b"", b"", b""), file_id=(_kdev(st.st_dev), st.st_ino + 1))
    (ev2,) = dec.feed(other)
    assert (ev2.path, ev2.raw_path) == ("/tmp/plain", None)


def test_the_strace_memo_sees_hard_links_and_forgets_on_change(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_text("x")
    st = os.stat(key)
    ids = Identities({(st.st_dev, st.st_ino): str(key)})
    link = tmp_path / "l"
    assert ids.by_path(str(link)) is None  # not there yet: remembered as nothing
    os.link(key, link)
    assert ids.by_path(str(link)) is None
    ids.forget()  # a file.link event
    assert ids.by_path(str(link)) == str(key)
    assert ids.by_path(str(key)) == str(key)
