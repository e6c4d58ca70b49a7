"""The decoder puts a chrooted process's root in front of its paths (RecordDecoder.chroots): the
program reads absolute names as the process gives them and its walks stop at the process's root.
Records are built as the program emits them (``records.build``); the chroot itself is played live
under both backends in tests/witness/test_chroot_paths.py."""

from __future__ import annotations

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.decoder import RecordDecoder

ROOT_PID = 4242


def _sys(nr: int, pid: int, *blobs: bytes, ret: int = 0) -> bytes:
    full = (*blobs, b"", b"", b"", b"")[:4]
    return R.build(R.REC_SYS, nr=nr, pid=pid, tid=pid, ret=ret, blobs=full)  # type: ignore[arg-type]


def _walk(path: str) -> bytes:
    """A directory walk as the program writes it: the components leaf first, each NUL-ended."""
    return b"".join(p.encode() + b"\0" for p in reversed(path.strip("/").split("/")))


def test_a_chrooted_process_and_its_children_are_named_below_its_root() -> None:
    dec = RecordDecoder()
    dec.add_root(ROOT_PID, "/work", 0, 0, 0)
    out: list = []
    dec.feed_many([
        _sys(161, ROOT_PID, b"/srv/jail\0"),  # chroot
        _sys(257, ROOT_PID, b"/etc/x\0", ret=3),  # openat, absolute
        _sys(257, ROOT_PID, b"y\0", b"", _walk("/etc"), ret=4),  # relative to a dirfd the program walked
        R.build(R.REC_FORK, pid=5000, ppid=ROOT_PID, blobs=(b"", b"", b"", _walk("/tmp"))),
        _sys(257, 5000, b"/z\0", ret=3),
    ], out)
    (chroot,) = [e for e in out if e.syscall == "chroot"]
    assert (chroot.detail, chroot.path) == ("chroot /srv/jail", "/srv/jail")
    opened = [(e.pid, e.path, e.raw_path) for e in out if e.type == "file.read"]
    assert opened == [(ROOT_PID, "/srv/jail/etc/x", "/etc/x"), (ROOT_PID, "/srv/jail/etc/y", "y"),
                      (5000, "/srv/jail/z", "/z")], opened
    (child,) = [e for e in out if e.type == "process.start" and e.pid == 5000]
    assert child.cwd == "/srv/jail/tmp"


def test_a_reused_pid_forked_by_a_process_that_never_chrooted_has_no_root() -> None:
    dec = RecordDecoder()
    dec.add_root(ROOT_PID, "/work", 0, 0, 0)
    out: list = []
    dec.feed_many([
        R.build(R.REC_FORK, pid=5000, ppid=ROOT_PID),
        _sys(161, 5000, b"/srv/jail\0"),
        R.build(R.REC_EXIT, pid=5000),
        R.build(R.REC_FORK, pid=5000, ppid=ROOT_PID),  # the pid again, for a child of an unchrooted parent
        _sys(257, 5000, b"/etc/x\0", ret=3),
    ], out)
    assert [e.path for e in out if e.type == "file.read"] == ["/etc/x"]
