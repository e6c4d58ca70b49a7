"""The decoder follows the run's overlay mounts event by event (spyglass/capture/overlays.py): a
batch of records holding the mount, a read below it and the unmount maps the read.  Records are
built as the program emits them (``records.build``); the mount itself is played live in
tests/witness/test_secret_through_overlay.py."""

from __future__ import annotations

from pathlib import Path

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.decoder import RecordDecoder

PID = 4242


def _sys(nr: int, *blobs: bytes, args: tuple[int, ...] = (0, 0, 0, 0, 0, 0), ret: int = 0) -> bytes:
    full = (*blobs, b"", b"", b"", b"")[:4]
    return R.build(R.REC_SYS, nr=nr, pid=PID, tid=PID, ret=ret, args=args, blobs=full)  # type: ignore[arg-type]


def test_a_read_between_a_mount_and_its_unmount_in_one_batch_is_mapped(tmp_path: Path) -> None:
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "id_rsa").write_text("k")
    dec = RecordDecoder()
    dec.add_root(PID, str(tmp_path), 0, 0, 0)
    batch = [
        _sys(257, b"/mnt/o/id_rsa\0", ret=3),  # before the mount: its own name
        _sys(165, b"/mnt/o\0", b"overlay\0", b"", f"lowerdir={lower}\0".encode()),  # mount
        _sys(257, b"/mnt/o/id_rsa\0", ret=3),  # openat, read-only
        _sys(166, b"/mnt/o\0"),  # umount2
        _sys(257, b"/mnt/o/id_rsa\0", ret=3),  # after: its own name again
    ]
    out: list = []
    dec.feed_many(batch, out)
    reads = [(e.path, e.raw_path) for e in out if e.type == "file.read"]
    assert reads == [("/mnt/o/id_rsa", None), (f"{lower}/id_rsa", "/mnt/o/id_rsa"), ("/mnt/o/id_rsa", None)], out
