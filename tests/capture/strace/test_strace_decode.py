"""strace value decoding, the DNS decoder, lexical paths, and the parser's robustness."""

from __future__ import annotations

import random
import re
import socket
import struct

import pytest

from spyglass.capture.fields import to_text
from spyglass.capture.strace import fastpath as fastpath_mod
from spyglass.capture.strace import parser as parser_mod
from spyglass.capture.strace.decode import (
    ann_path,
    parse_fd,
    parse_pid,
    parse_sock_ann,
    parse_sockaddr,
    split_args,
    unquote,
    unquote_bytes,
)
from spyglass.capture.strace.dns import parse_hosts, parse_response
from spyglass.capture.strace.host import realpath_in_root
from spyglass.capture.strace.paths import normalize, split_dir


@pytest.mark.parametrize(
    ("token", "raw"),
    [
        (r'"plain"', b"plain"),
        (r'"caf\303\251"', "café".encode()),
        (r'"\377\376"', b"\xff\xfe"),
        (r'"\1772"', b"\x7f2"),  # three octal digits, then a literal digit
        (r'"\0\1\377"', b"\x00\x01\xff"),
        (r'"q\"uote\\n\n\t"', b'q"uote\\n\n\t'),
        (r'"\x41\x7e"', b"A~"),
        (r'"cut"...', b"cut"),
    ],
)
def test_quoted_strings_decode_to_exact_bytes(token: str, raw: bytes) -> None:
    assert unquote_bytes(token) == raw
    text, rb = to_text(unquote(token), "file.path", None)
    if rb is None:
        assert text.encode() == raw
    else:
        assert text == raw.decode("utf-8", "backslashreplace")


def test_split_args_respects_strings_annotations_and_brackets() -> None:
    args = (
        r'3<UNIX-STREAM:[7,"/run/a,b>c"]>, "x, \"y\"", {msg_name={sa_family=AF_INET, sin_port=htons(1)}, '
        r"msg_iov=[{iov_base=\"a,b\", iov_len=3}]}, [1<<CAP_CHOWN|1<<CAP_KILL], 0"
    )
    parts = split_args(args)
    assert len(parts) == 5
    assert parts[0] == r'3<UNIX-STREAM:[7,"/run/a,b>c"]>'
    assert parts[3] == "[1<<CAP_CHOWN|1<<CAP_KILL]" and parts[4] == "0"
    assert split_args("") == []


def test_fd_annotations() -> None:
    assert parse_fd("AT_FDCWD</home/x>") == (None, "/home/x")
    fd = parse_fd(r"7</tmp/q\"uote\76>(deleted)")
    assert fd is not None and fd.num == 7 and ann_path(fd.ann) == '/tmp/q"uote>'
    dev = parse_fd("0</dev/null<char 1:3>>")
    assert dev is not None and ann_path(dev.ann) == "/dev/null"
    assert parse_fd("garbage(") is None
    assert parse_pid("2 /* 12378 in strace's PID NS */") == 12378 and parse_pid("-1") == -1


@pytest.mark.parametrize(
    ("ann", "expect"),
    [
        ("TCP:[5107]", ("tcp", "ipv4", None, None, None)),
        (
            "TCP:[127.0.0.1:47492->127.0.0.1:40307]",
            ("tcp", "ipv4", ("127.0.0.1", 47492), ("127.0.0.1", 40307), None),
        ),
        ("TCPv6:[[::1]:50258->[::1]:60001]", ("tcp", "ipv6", ("::1", 50258), ("::1", 60001), None)),
        ("UDP:[0.0.0.0:37426]", ("udp", "ipv4", ("0.0.0.0", 37426), None, None)),
        ('UNIX-STREAM:[6668,"/tmp/so>ck"]', ("unix", "unix", None, None, "/tmp/so>ck")),
        ("NETLINK:[ROUTE:12389]", ("netlink", None, None, None, None)),
        ("socket:[99]", (None, None, None, None, None)),
    ],
)
def test_socket_annotations(ann: str, expect: tuple[object, ...]) -> None:
    info = parse_sock_ann(ann)
    assert info is not None
    assert (info.transport, info.net_type, info.local, info.remote, info.unix_path) == expect


def test_sockaddrs() -> None:
    v4 = parse_sockaddr('{sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("1.2.3.4")}')
    assert v4 == ("ipv4", "1.2.3.4", 443)
    v6 = parse_sockaddr(
        '{sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "fd00::1", '
        "&sin6_addr), sin6_scope_id=0}"
    )
    assert v6 == ("ipv6", "fd00::1", 53)
    assert parse_sockaddr('{sa_family=AF_UNIX, sun_path=@"abs"}') == ("unix", "@abs", None)
    spoof = parse_sockaddr(
        '{sa_family=AF_UNIX, sun_path="/x{sa_family=AF_INET, sin_port=htons(1), '
        'sin_addr=inet_addr(\\"6.6.6.6\\")}"}'
    )
    assert spoof is not None and spoof.family == "unix"
    assert parse_sockaddr("NULL") is None
    assert parse_sockaddr("{sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}") is None


def _dns(qname: str, answers: list[tuple[int, bytes]], *, flags: int = 0x8180, qd: int = 1) -> bytes:
    q = b"".join(bytes([len(p)]) + p.encode() for p in qname.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    rrs = b"".join(b"\xc0\x0c" + struct.pack(">HHIH", t, 1, 60, len(d)) + d for t, d in answers)
    return struct.pack(">HHHHHH", 0x1234, flags, qd, len(answers), 0, 0) + q + rrs


def test_dns_responses() -> None:
    resp = parse_response(
        _dns(
            "Api.Example.test",
            [
                (5, b"\x04edge\xc0\x0c"),
                (1, socket.inet_aton("10.0.0.1")),
                (28, socket.inet_pton(socket.AF_INET6, "fd00::2")),
                (16, b"\x03txt"),
            ],
        )
    )
    assert resp is not None and resp.name == "api.example.test"
    assert resp.answers == ["edge.api.example.test", "10.0.0.1", "fd00::2"]
    assert resp.addresses == ["10.0.0.1", "fd00::2"]


@pytest.mark.parametrize(
    "payload",
    [
        _dns("a.test", [(1, socket.inet_aton("1.2.3.4"))], flags=0x0100),  # a query
        _dns("a.test", [], qd=2),
        _dns("a.test", [(1, socket.inet_aton("1.2.3.4"))])[:-2],  # truncated
        b"\x12\x34\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c",  # pointer loop
        b"",
        b"\xff" * 11,
    ],
)
def test_dns_rejects_what_is_not_a_response(payload: bytes) -> None:
    assert parse_response(payload) is None


def test_hosts_file_parsing() -> None:
    table = parse_hosts(
        "# c\n127.0.0.1 localhost vm\n127.0.0.77\tSpyglass-Test.internal # x\nbad line\n::1 v6\n"
    )
    assert table == {"127.0.0.1": "localhost", "127.0.0.77": "spyglass-test.internal", "::1": "v6"}


def test_lexical_paths() -> None:
    assert normalize("/a/./b/../c//d/") == "/a/c/d"
    assert normalize("//x") == "/x" and normalize("/..") == "/" and normalize("/plain/path") == "/plain/path"
    assert (
        split_dir("/a/b/c") == ("/a/b", "c")
        and split_dir("/") == ("/", "")
        and split_dir("/a/..") == ("/a/..", "")
    )


def test_realpath_in_root(tmp_path) -> None:
    (tmp_path / "real" / "dir").mkdir(parents=True)
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "abs").symlink_to("/real/dir")  # absolute: relative to the given root
    (tmp_path / "loop").symlink_to("loop")
    root = str(tmp_path)
    assert realpath_in_root(root, "/link/dir") == "/real/dir"
    assert realpath_in_root(root, "/abs/../dir") == "/real/dir"
    assert realpath_in_root(root, "/link/missing/../x") == "/real/x"
    assert realpath_in_root(root, "/loop/x") is None


def test_injected_realpath_resolves_the_directory_part(parse, one) -> None:
    lines = [
        '9 1700000000.000001 openat(AT_FDCWD</w>, "lnk/f", O_RDONLY) = -1 ENOENT (No such file or directory)'
    ]
    seen: list[tuple[int, str]] = []

    def realpath_dir(pid: int, path: str) -> str:
        seen.append((pid, path))
        return path.replace("/w/lnk", "/target")

    events, _ = parse(lines=lines, realpath_dir=realpath_dir)
    ev = one(events, type="file.read")
    assert (ev.path, ev.raw_path) == ("/target/f", "lnk/f") and seen == [(9, "/w/lnk")]


def test_proc_pid_cwd_of_another_traced_process(parse) -> None:
    lines = [
        '1 1700000000.000001 chdir("/one") = 0',
        "1 1700000000.000002 clone(child_stack=NULL, flags=SIGCHLD) = 2",
        '2 1700000000.000003 chdir("/two") = 0',
        '2 1700000000.000004 unlink("/proc/1/cwd/secret") = 0',
        '2 1700000000.000005 unlink("/proc/thread-self/cwd/x") = 0',
    ]
    events, _ = parse(lines=lines)
    assert [e.path for e in events if e.type == "file.delete"] == ["/one/secret", "/two/x"]


def test_garbage_never_raises_and_is_counted(parse, fixture_lines) -> None:
    lines = fixture_lines("procs") + fixture_lines("net")
    rng = random.Random(7)
    junk = [
        "",
        "strace: Process 12 attached",
        "garbage",
        "1 2 3",
        "12 1.5 openat(",
        "\udcff\x00",
        "12 1.5 +++ ???",
    ]
    for _ in range(400):
        line = rng.choice(lines)
        a, b = sorted(rng.randrange(len(line) + 1) for _ in range(2))
        junk.append(line[:a] + line[b:])
        junk.append(line[: rng.randrange(len(line) + 1)])
    events, parser = parse(lines=junk)
    assert parser.lines == len(junk)
    assert parser.unparsed > 0
    assert all(ev.type for ev in events)
    _, clean = parse(
        lines=["", "strace: Process 12 attached", "1 1700000000.000001 --- SIGCHLD {si_pid=2} ---"]
    )
    assert clean.unparsed == 0


@pytest.mark.parametrize("name", ["files", "procs", "net", "resolver", "priv", "names"])
def test_fast_path_gives_the_same_events(parse, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, _ = parse(name)
    assert any(ev.syscall == "openat" for ev in fast)
    monkeypatch.setattr(fastpath_mod, "_FAST_OPEN", re.compile(r"(?!x)x"))
    slow, _ = parse(name)
    assert fast == slow


def _first_complete_lines(fixture_lines) -> dict[str, str]:
    """syscall name -> a complete line from the fixtures (stitched if need be), made successful."""
    found: dict[str, str] = {"vfork": "7 1700000000.000001 vfork() = 8"}  # recorded only as unfinished
    # as strace 6.1 prints it (tests/witness/progs/pivot_read.py); traced since the fixtures were recorded
    found["pivot_root"] = '7 1700000000.000001 pivot_root(".", "old") = 0'
    for name in ("files", "procs", "priv", "net", "resolver", "names", "pidns", "access", "clock", "newmount",
                 "chroot"):
        pending: dict[str, str] = {}
        for line in fixture_lines(name):
            pid = line.split(" ", 1)[0]
            resumed = re.match(r"\d+ +\d+\.\d+ <\.\.\. ([a-z0-9_]+) resumed>(.*)", line)
            if line.endswith(" <unfinished ...>"):
                pending[pid] = line[: -len(" <unfinished ...>")]
                continue
            if resumed and pid in pending:
                line = pending.pop(pid) + resumed.group(2)
            m = re.match(r"\d+ +\d+\.\d+ ([a-z0-9_]+)\(", line)
            ret = parser_mod._RET.search(line)
            if not m or not ret or m.group(1) in found:
                continue
            if ret.group(1) == "-1":  # recorded failing only (bpf, init_module...): make it succeed
                line = line[: ret.start()] + ") = 0"
            found[m.group(1)] = line
    return found


def test_every_traced_call_reports_success_and_failure(parse, fixture_lines) -> None:
    """Each traced call recorded in the fixtures, once as recorded and once turned into EPERM."""
    from spyglass.capture.strace.command import FD_SET, TRACE_SET

    lines = _first_complete_lines(fixture_lines)
    traced = (*TRACE_SET, *FD_SET)
    names = [n for n in traced if not n.startswith("?") and n != "fork"]  # fork: glibc uses clone
    assert set(names) <= set(lines), set(names) - set(lines)
    silent_on_failure = {"clone", "clone3", "vfork", "chdir", "fchdir", "recvfrom", "recvmsg", *FD_SET}
    silent_on_failure.add("ioctl")  # the first one seen is a terminal query, not TIOCSTI
    for name in names:
        line = lines[name]
        ret = parser_mod._RET.search(line)
        assert ret is not None
        failed = line[: ret.start()] + ") = -1 EPERM (Operation not permitted)"
        ok_events, ok_parser = parse(lines=[line])
        bad_events, bad_parser = parse(lines=[failed])
        assert ok_parser.unparsed == 0 and bad_parser.unparsed == 0, name
        ok_calls = [ev for ev in ok_events if ev.syscall == name]
        bad_calls = [ev for ev in bad_events if ev.syscall == name]
        assert all(ev.ok for ev in ok_calls), name
        if name in silent_on_failure:
            assert bad_calls == [], name
            continue
        if name in ("kill", "tkill", "tgkill") and not ok_calls:
            continue  # a signal to itself: not reported either way
        if name in ("adjtimex", "clock_adjtime") and not ok_calls:  # a read of the clock's state (or a struct
            assert [ev.ok for ev in bad_calls] == [False], name  # strace could not show); refused: an attempt
            continue
        assert [ev.type for ev in bad_calls] == [ev.type for ev in ok_calls] != [], name
        assert all(ev.ok is False and ev.errno == "EPERM" for ev in bad_calls), name


def test_proc_self_names_the_traced_process(parse, pick) -> None:
    """/proc/self is the traced process, never the monitor; /proc/<pid>/exe is the program it runs."""
    lines = [
        '5 1700000000.000001 execve("/usr/bin/codex", ["codex"], 0x1 /* 2 vars */) = 0',
        '5 1700000000.000002 execve("/proc/self/exe", ["codex", "sandbox"], 0x1 /* 2 vars */) = 0',
        '5 1700000000.000003 openat(AT_FDCWD</w>, "/proc/self/environ", O_RDONLY) = -1 EACCES (Denied)',
        '5 1700000000.000004 unlink("/proc/thread-self/x") = -1 EPERM (Operation not permitted)',
    ]
    seen: list[str] = []

    def realpath_dir(pid: int, path: str) -> str:
        seen.append(path)
        return path

    events, _ = parse(lines=lines, realpath_dir=realpath_dir)
    execs = pick(events, type="process.exec")
    assert [ev.exe for ev in execs] == ["/usr/bin/codex", "/usr/bin/codex"]
    assert pick(events, type="file.read")[0].path == "/proc/5/environ"
    assert pick(events, type="file.delete")[0].path == "/proc/5/task/5/x"
    assert not [p for p in seen if p.startswith("/proc")]


def test_an_exec_with_a_socket_for_stdin_and_stdout_is_reported(parse) -> None:
    """dup2 of a TCP socket onto fds 0 and 1, inherited by a child that runs a shell."""
    sock = "3<TCP:[127.0.0.1:40000->127.0.0.1:4444]>"
    lines = [
        f"5 1700000000.000001 dup2({sock}, 0</dev/pts/0<char 136:0>>) = 0{sock[1:]}",
        f"5 1700000000.000002 dup2({sock}, 1</dev/pts/0<char 136:0>>) = 1{sock[1:]}",
        "5 1700000000.000003 clone(child_stack=NULL, flags=SIGCHLD) = 6",
        '6 1700000000.000004 execve("/bin/sh", ["/bin/sh", "-i"], 0x1 /* 2 vars */) = 0',
        '5 1700000000.000005 execve("/bin/true", ["true"], 0x1 /* 2 vars */) = 0',
    ]
    events, parser = parse(lines=lines)
    assert parser.unparsed == 0
    hits = [(ev.pid, ev.detail) for ev in events if ev.type == "sys.sensitive"]
    assert (6, "stdio-socket: fd 0 TCP:[127.0.0.1:40000->127.0.0.1:4444], "
               "fd 1 TCP:[127.0.0.1:40000->127.0.0.1:4444]") in hits
    # a redirection of stdout to a file, then an exec: nothing to report
    quiet, _ = parse(lines=[
        "7 1700000000.000001 dup2(3</w/out.txt>, 1</dev/pts/0<char 136:0>>) = 1</w/out.txt>",
        '7 1700000000.000002 execve("/bin/cat", ["cat"], 0x1 /* 2 vars */) = 0',
    ])
    assert [ev for ev in quiet if ev.type == "sys.sensitive"] == []


def test_proc_self_fd_naming_a_proc_file_is_not_a_directory() -> None:
    """A descriptor last seen on a /proc file cannot be the directory of /proc/self/fd/N/NAME:
    the number was reused by another thread (Claude Code polls /proc/self/statm while it
    creates and deletes its task files through /proc/self/fd/N/NAME)."""
    from spyglass.capture.strace.paths import ProcLookup, map_proc_alias

    class Procs(ProcLookup):
        def __init__(self, fds: dict[int, str]) -> None:
            self.fds = fds

        def cwd_of(self, pid: int) -> str | None:
            return "/w"

        def fd_path(self, pid: int, fd: int) -> str | None:
            return self.fds.get(fd)

        def exe_of(self, pid: int) -> str | None:
            return None

    stale = Procs({12: "/proc/7/statm"})
    assert map_proc_alias("/proc/self/fd/12/b5.output", 7, 8, stale) == "/proc/7/fd/12/b5.output"
    assert map_proc_alias("/proc/self/fd/12", 7, 8, stale) == "/proc/7/statm"
    real = Procs({12: "/tmp/claude-0/tasks"})
    assert map_proc_alias("/proc/self/fd/12/b5.output", 7, 8, real) == "/tmp/claude-0/tasks/b5.output"
