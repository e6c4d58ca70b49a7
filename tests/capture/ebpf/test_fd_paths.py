"""Paths through one of the caller's descriptors (``/dev/fd/N/NAME`` and its ``/proc`` spellings): the
program walks descriptor N's file when the call is made, and the decoder records the real path with
the typed one as ``raw_path``.  Real processes under the real program; the decoder alone below."""

from __future__ import annotations

from pathlib import Path

import pytest
from ebpf_helpers import run_under

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.decoder import RecordDecoder

#: each spelling once, by a process that exits at once; then names no descriptor of the caller resolves
SCRIPT = r"""
mkdir d other
exec "$PY" -c '
import os, threading
d = os.open("d", os.O_RDONLY | os.O_DIRECTORY)
os.dup2(d, 57)
os.mkdir(f"/dev/fd/{d}/a")
os.close(os.open(f"/proc/self/fd/{d}/b", os.O_CREAT | os.O_WRONLY))
os.close(os.open(f"/proc/{os.getpid()}/fd/57/c", os.O_CREAT | os.O_WRONLY))
t = threading.Thread(target=lambda: os.mkdir(f"/proc/thread-self/fd/{d}/e")); t.start(); t.join()
os.rename(f"/dev/fd/{d}/a", f"/dev/fd/57/a2")
os.chmod(f"/dev/fd/{d}/b", 0o600)
os.unlink(f"/proc/self/fd/{d}/c")
os.mkdir(f"//proc/./self/task/{threading.get_native_id()}//fd/./{d}/f")  # each / doubled or with ".": the same
for bad in (f"/dev/fd/0{d}/x", f"/proc/self/task/1/fd/{d}/y", f"/proc/1/fd/{d}/z"):
    try:
        os.mkdir(bad)
    except OSError:
        pass
os._exit(0)
'
"""


@pytest.mark.usefixtures("need_ebpf")
def test_each_spelling_is_walked_when_the_call_is_made(tmp_path: Path) -> None:
    cap = run_under("ebpf", SCRIPT, tmp_path)
    d = tmp_path / "d"
    got = {(e.type, e.path, e.target) for e in cap.events if e.raw_path and "fd/" in e.raw_path}
    assert (d / "a2").is_dir() and (d / "e").is_dir() and (d / "b").exists()
    for want in [("file.mkdir", f"{d}/a", None), ("file.create", f"{d}/b", None), ("file.create", f"{d}/c", None),
                 ("file.mkdir", f"{d}/e", None), ("file.mkdir", f"{d}/f", None), ("file.rename", f"{d}/a", f"{d}/a2"),
                 ("file.chmod", f"{d}/b", None), ("file.delete", f"{d}/c", None)]:
        assert want in got, (want, sorted(got, key=str))
    # not walked (a leading zero, another process's or thread's table): the name as typed (normalised),
    # left for the guard to read from the writer's /proc (or to take pessimistically once it is gone)
    left = sorted(str(e.path) for e in cap.events if e.type == "file.mkdir" and str(e.path)[-2:] in ("/x", "/y", "/z"))
    assert len(left) == 3 and all("/fd/" in p and not p.startswith(str(d)) for p in left), left


def _sys(nr: int, *blobs: bytes, pid: int = 10) -> bytes:
    full = (*blobs, b"", b"", b"", b"")[:4]
    return R.build(R.REC_SYS, nr=nr, pid=pid, tid=pid, blobs=full)  # type: ignore[arg-type]


def test_the_decoder_puts_the_walked_descriptor_in_front_of_the_rest() -> None:
    dec = RecordDecoder()
    dec.add_root(10, "/w", 0, 0, 0)
    out: list = []
    dec.feed_many([
        _sys(83, b"/dev/fd/3/x\0", b"", b"runs\0st\0"),  # mkdir, descriptor 3 walked
        _sys(82, b"/proc/self/fd/3/x\0", b"/dev/fd/4/y\0", b"runs\0st\0", b"cache\0st\0"),  # rename
        _sys(90, b"/dev/fd/5\0", b"", b"index.sqlite\0st\0"),  # chmod of the descriptor's own file
        _sys(83, b"/dev/fd/9/z\0"),  # nothing walked (no such descriptor): as typed
        _sys(83, b"/dev/fd/3/../q\0", b"", b"runs\0st\0"),
    ], out)
    got = [(e.type, e.path, e.target, e.raw_path) for e in out if e.type.startswith("file.")]
    assert got == [
        ("file.mkdir", "/st/runs/x", None, "/dev/fd/3/x"),
        ("file.rename", "/st/runs/x", "/st/cache/y", "/proc/self/fd/3/x"),
        ("file.chmod", "/st/index.sqlite", None, "/dev/fd/5"),
        ("file.mkdir", "/dev/fd/9/z", None, None),
        ("file.mkdir", "/st/q", None, "/dev/fd/3/../q"),
    ], got
