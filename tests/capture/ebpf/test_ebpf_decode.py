"""The record decoder, without root: a recorded fixture and hand-built records.

``data/workload.records`` holds the raw records the kernel program emitted for
``workload.sh`` run in /tmp/spyglass-ebpf-fixture (each as a little-endian u32
length and the bytes), written by the session's ``dump_records`` option::

    EbpfBackend().start(LaunchSpec(["/bin/sh", "-c", WORKLOAD.read_text()], "/tmp/spyglass-ebpf-fixture",
        env={"PATH": "/usr/bin:/bin", "PY": "/usr/bin/python3", "LANG": "C.UTF-8"}, wait_descendants=3.0,
        options={"dump_records": "tests/capture/ebpf/data/workload.records"}))

(The record layout changed? Regenerate it that way, as root, in an empty directory of that name.)
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

from ebpf_helpers import DATA, normalize

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.decoder import RecordDecoder
from spyglass.events.schema import Event

FIXTURE_WS = Path("/tmp/spyglass-ebpf-fixture")


def _fixture_records() -> list[bytes]:
    data = (DATA / "workload.records").read_bytes()
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<I", data, off)
        out.append(data[off + 4 : off + 4 + n])
        off += 4 + n
    return out


def _decode(recs: list[bytes], dec: RecordDecoder | None = None) -> tuple[list[Event], RecordDecoder]:
    dec = dec or RecordDecoder()
    events: list[Event] = []
    for r in recs:
        events.extend(dec.feed(r))
    return events, dec


def test_fixture_decodes_to_the_workload() -> None:
    events, dec = _decode(_fixture_records())
    assert dec.unparsed == 0
    got = normalize(events, FIXTURE_WS)
    want = {
        ("file.mkdir", "WS/sub", None, True),
        ("file.create", "WS/sub/a.txt", None, True),
        ("file.rename", "WS/sub/a.txt", "WS/sub/b.txt", True),
        ("file.link", "WS/sub/c.txt", "WS/sub/b.txt", True),
        ("file.symlink", "WS/sub/d.txt", "b.txt", True),
        ("file.chmod", "WS/sub/c.txt", None, True),
        ("file.read", "WS/sub/b.txt", None, True),  # cat ../sub/b.txt from inside sub
        ("file.delete", "WS/sub/b.txt", None, True),
        ("file.create", "WS/sub/e.txt", None, True),  # dirfd-relative
        ("file.rename", "WS/sub/e.txt", "WS/sub/f.txt", True),
        ("file.delete", "WS/sub/f.txt", None, True),
        ("file.mkdir", "WS/up", None, True),  # "../up" relative to a dirfd
        ("file.create", "WS/daemon.txt", None, True),  # by the setsid daemon after the root exited
        ("exec", ("sh", "-c", "exit 7"), "WS"),
        ("exit", ("sh", "-c", "exit 7"), 7, None),
        ("exec", ("mv", "sub/a.txt", "sub/b.txt"), "WS"),
        ("exec", ("cat", "../sub/b.txt"), "WS/sub"),
        ("net.bind", "127.0.0.1", "udp", True),
        ("net.send", "127.0.0.1", "udp", True),
        ("net.connect", "127.0.0.1", "tcp", False),
    }
    assert want <= got, sorted(want - got, key=str)
    root_exit = [e for e in events if e.type == "process.exit" and e.exit_code == 3]
    assert len(root_exit) == 1
    chmod = next(e for e in events if e.type == "file.chmod")
    assert chmod.mode == "0600" and chmod.raw_path == "sub/c.txt" and chmod.syscall == "fchmodat"
    create = next(e for e in events if e.type == "file.create" and e.path and e.path.endswith("/a.txt"))
    assert create.flags == "O_WRONLY|O_CREAT|O_TRUNC" and create.mode == "0666"
    starts = [e for e in events if e.type == "process.start"]
    assert (
        starts and all(e.ppid for e in starts) and {e.syscall for e in starts} <= {"clone", "vfork", "fork", "clone3"}
    )


def test_exec_resolves_symlinks_and_keeps_the_typed_path() -> None:
    rec = R.build(
        R.REC_EXEC, nr=59, pid=10, tid=10, ppid=10, ts=5, ids=(1000, 1000, 100, 100),
        blobs=(b"/usr/bin/sh\0", b"sh\0-c\0true\0", b"dash\0bin\0usr\0", b"w\0tmp\0"),
    )  # fmt: skip
    (ev,), _ = _decode([rec], RecordDecoder(boot_offset=1_000))
    assert ev.type == "process.exec" and ev.ts == 1_005
    assert ev.exe == "/usr/bin/dash" and ev.raw_path == "/usr/bin/sh"
    assert ev.argv == ["sh", "-c", "true"] and ev.cwd == "/tmp/w" and ev.uid == 1000


def test_non_utf8_names_keep_their_bytes() -> None:
    rec = R.build(
        R.REC_SYS,
        nr=257,
        pid=7,
        tid=7,
        args=(0xFFFFFF9C, 0, 0o101, 0o644, 0, 0),
        blobs=(b"caf\xe9\0", b"", b"d\0", b""),
    )
    (ev,), _ = _decode([rec])
    assert ev.type == "file.create" and ev.path == "/d/caf\\xe9"
    assert base64.b64decode((ev.raw_bytes or {})["file.path"]) == b"/d/caf\xe9"


def test_exit_statuses() -> None:
    recs = [
        R.build(R.REC_EXIT, pid=5, ret=3 << 8),
        R.build(R.REC_EXIT, pid=6, ret=9),
        R.build(R.REC_EXIT, pid=7, ret=11 | 0x80),
    ]
    evs, _ = _decode(recs)
    assert [(e.exit_code, e.signal, e.detail) for e in evs] == [
        (3, None, None), (None, "SIGKILL", None), (None, "SIGSEGV", "core dumped"),
    ]  # fmt: skip


def _dns_answer(name: str, addr: bytes) -> bytes:
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    head = struct.pack(">HHHHHH", 0x1234, 0x8180, 1, 1, 0, 0)
    answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + addr
    return head + q + struct.pack(">HH", 1, 1) + answer


def test_dns_answers_name_later_connections() -> None:
    src = struct.pack("<H", 2) + struct.pack(">H", 53) + bytes([127, 0, 0, 53]) + b"\0" * 8
    dst = struct.pack("<H", 2) + struct.pack(">H", 443) + bytes([127, 0, 0, 9]) + b"\0" * 8
    udp = (2, 2, 17, 0, b"")
    recs = [
        R.build(R.REC_SYS, nr=45, pid=3, tid=3, ret=60, sock=udp,
                blobs=(_dns_answer("example.test", bytes([127, 0, 0, 9])), src, b"", b"")),
        R.build(R.REC_SYS, nr=42, pid=3, tid=3, ret=-115, blobs=(b"", dst, b"", b""), sock=(2, 1, 6, 0, b"")),
    ]  # fmt: skip
    (dns, conn), _ = _decode(recs)
    assert dns.type == "net.dns" and dns.dns_name == "example.test" and dns.dns_answers == ["127.0.0.9"]
    assert conn.type == "net.connect" and conn.ok and conn.errno == "EINPROGRESS"
    assert (conn.address, conn.port, conn.domain, conn.transport) == ("127.0.0.9", 443, "example.test", "tcp")


def test_socket_addresses() -> None:
    v6 = struct.pack("<H", 10) + struct.pack(">H", 8080) + b"\0" * 4 + b"\0" * 15 + b"\1" + b"\0" * 4
    assert R.sockaddr(v6) == R.Addr("ipv6", "::1", 8080)
    assert R.sockaddr(struct.pack("<H", 1) + b"\0hidden") == R.Addr("unix", "@hidden", None)
    assert R.sockaddr(struct.pack("<H", 1) + b"/run/x.sock\0\0") == R.Addr("unix", "/run/x.sock", None)
    assert R.sockaddr(struct.pack("<H", 16) + b"\0" * 10) is None  # netlink: not a destination


def test_signals_to_processes_outside_the_tree_only() -> None:
    dec = RecordDecoder()
    dec.add_root(100, "/", 0, 0, 0)
    recs = [
        R.build(R.REC_SYS, nr=62, pid=100, tid=100, args=(100, 15, 0, 0, 0, 0)),  # to itself: silent
        R.build(R.REC_SYS, nr=62, pid=100, tid=100, args=(4242, 0, 0, 0, 0, 0)),
        R.build(R.REC_SYS, nr=434, pid=100, tid=100, ret=5, args=(4242, 0, 0, 0, 0, 0)),
        R.build(R.REC_SYS, nr=16, pid=100, tid=100, ret=-25, args=(0, 0x5412, 0, 0, 0, 0)),
    ]
    evs, _ = _decode(recs, dec)
    assert [(e.syscall, e.detail, e.target_pid) for e in evs] == [
        ("kill", "signal 0", 4242), ("pidfd_open", "pidfd_open pid=4242", 4242), ("ioctl", "TIOCSTI into fd 0", None),
    ]  # fmt: skip
    assert evs[2].errno == "ENOTTY" and not evs[2].ok


def test_io_uring_opcodes_once_per_process() -> None:
    recs = [R.build(R.REC_URING, pid=9, tid=9, args=(18, 0, 0, 0, 0, 0)) for _ in range(3)]
    evs, _ = _decode(recs)
    assert [(e.type, e.detail) for e in evs] == [("sys.sensitive", "io_uring IORING_OP_OPENAT")]


def test_bad_records_are_counted_not_raised() -> None:
    good = R.build(R.REC_EXIT, pid=5)
    evs, dec = _decode([b"short", R.build(99), good[:40], good])
    assert dec.unparsed == 3 and dec.records == 4
    assert [e.type for e in evs] == ["process.exit"]
