"""The parser's fast paths make exactly the events of the general path.

Every recorded trace of this directory, a trace of a real untar (fchmod, fchown,
mkdirat next to openat) and lines written to hit each branch (errors, threads,
AT_FDCWD, relative names, AT_REMOVEDIR, -1 owners, escapes left to the general
path) are parsed twice, with and without the fast paths, and compared.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import msgspec
import pytest

from spyglass.capture.strace.command import strace_command
from spyglass.capture.strace.parser import StraceParser

DATA = Path(__file__).parent / "data"

HEAD = [
    '100 1796075675.000001 execve("/usr/bin/tar", ["tar"], 0x7ffe /* 3 vars */) = 0',
    "100 1796075675.000002 clone(child_stack=NULL, flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND) = 101",
]
LINES = [
    '100 1796075675.000003 mkdirat(4</w/u>, "lib", 0755) = 0',
    '100 1796075675.000004 mkdirat(AT_FDCWD</w>, "u/lib2", 0700) = -1 EEXIST (File exists)',
    '101 1796075675.000005 mkdirat(4</w/u>, "../up", 0755) = 0',
    "100 1796075675.000006 fchown(5</w/u/lib/a.py>, 0, 0) = 0",
    "100 1796075675.000007 fchown(5</w/u/lib/a.py>, -1, 1000) = 0",
    "101 1796075675.000008 fchown(6</w/u/b>, 1000, -1) = -1 EPERM (Operation not permitted)",
    "100 1796075675.000009 fchmod(5</w/u/lib/a.py>, 0644) = 0",
    "100 1796075675.000010 fchmod(5</w/u/lib/a.py>, 04755) = -1 EPERM (Operation not permitted)",
    "101 1796075675.000011 fchmod(7</w/u/t>, 0) = 0",
    '100 1796075675.000012 unlinkat(4</w/u>, "lib/a.py", 0) = 0',
    '100 1796075675.000013 unlinkat(4</w/u>, "lib", AT_REMOVEDIR) = 0',
    '101 1796075675.000014 unlinkat(AT_FDCWD</w>, "gone", 0) = -1 ENOENT (No such file or directory)',
    '100 1796075675.000015 unlinkat(4</w/u>, "/abs/x", 0) = 0',
    '100 1796075675.000016 mkdirat(4</w/u>, "caf\\303\\251", 0755) = 0',  # escapes: the general path
    '100 1796075675.000017 unlinkat(4</w/u/caf\\303\\251>, "x", 0) = 0',
    "100 1796075675.000018 fchmod(5</w/u/x> (deleted), 0644) = 0",
    "999 1796075675.000019 fchmod(5</w/u/x>, 0644) = 0",  # a thread not seen yet
    '100 1796075675.000020 openat(4</w/u>, "n.txt", O_WRONLY|O_CREAT|O_EXCL, 0600) = 8</w/u/n.txt>',
    "100 1796075675.000021 fchmod(8</w/u/n.txt>, 0600) = 0",
]


def _parse(lines: list[str], fast: bool) -> tuple[list[object], int]:
    parser = StraceParser(cwd="/w")
    parser.fast = fast
    out: list[object] = []
    for line in lines:
        out.extend(msgspec.to_builtins(ev) for ev in parser.feed(line))
    out.extend(msgspec.to_builtins(ev) for ev in parser.finish())
    fds = {pid: dict(p.fds) for pid, p in parser.state.procs.items()}
    return [out, fds, {pid: p.cwd for pid, p in parser.state.procs.items()}], parser.unparsed


def _same(lines: list[str]) -> None:
    assert _parse(lines, True) == _parse(lines, False)


def test_written_lines() -> None:
    _same(HEAD + LINES)
    parser = StraceParser(cwd="/w")
    fast = parser._fastpaths.feed
    taken: list[str] = []

    def counting(line: str) -> object:
        got = fast(line)
        if got is not None:
            taken.append(line)
        return got

    parser._fastpaths.feed = counting  # type: ignore[method-assign]
    for line in HEAD + LINES:
        parser.feed(line)
    assert len(taken) >= 14  # the fast paths did take the lines they are for


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.strace")))
def test_recorded_traces(name: str) -> None:
    _same((DATA / name).read_text(errors="surrogateescape").splitlines())


def test_a_real_untar(tmp_path: Path) -> None:
    if shutil.which("strace") is None or shutil.which("tar") is None:
        pytest.skip("strace and tar are needed")
    src = tmp_path / "src"
    for i in range(60):
        d = src / f"d{i % 6}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text("x")
    with tarfile.open(tmp_path / "a.tar", "w") as tf:
        tf.add(src, arcname="src")
    out = tmp_path / "out"
    out.mkdir()
    trace = tmp_path / "trace"
    subprocess.run(strace_command(str(trace), ["tar", "xf", str(tmp_path / "a.tar"), "-C", str(out)]), check=True)
    lines = trace.read_text(errors="surrogateescape").splitlines()
    assert sum("fchmod(" in line or "mkdirat(" in line for line in lines) >= 60
    _same(lines)
