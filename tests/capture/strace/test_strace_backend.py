"""The strace backend with real strace and real processes (no mocks)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from spyglass.capture.base import CaptureResult, LaunchSpec
from spyglass.capture.strace.backend import StraceBackend, strace_command
from spyglass.errors import MissingToolError
from spyglass.events.codec import field_bytes
from spyglass.events.schema import Event

STATUS = StraceBackend().status()
pytestmark = [
    pytest.mark.skipif(not STATUS.available, reason=f"strace unusable here: {STATUS.problem}"),
    pytest.mark.timeout(60),
]
PY = sys.executable


def run(argv: list[str], cwd: Path, **spec: object) -> tuple[list[Event], CaptureResult]:
    session = StraceBackend().start(LaunchSpec(argv=argv, cwd=str(cwd), **spec))  # type: ignore[arg-type]
    events = list(session.events())
    return events, session.result()


def py(code: str) -> list[str]:
    return [PY, "-S", "-c", code]


def _kill_all(res: CaptureResult) -> None:
    for proc in res.still_running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def real(p: Path) -> str:
    return os.path.realpath(p)


def test_status_reports_version() -> None:
    assert STATUS.name == "strace" and "strace" in STATUS.detail and not STATUS.problem


def test_missing_strace_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    backend = StraceBackend()
    status = backend.status()
    assert not status.available and status.fix == "sudo apt-get install strace"
    with pytest.raises(MissingToolError) as err:
        backend.start(LaunchSpec(argv=["true"], cwd=str(tmp_path)))
    assert err.value.tool == "strace" and "apt-get install strace" in str(err.value)


def test_command_line() -> None:
    cmd = strace_command("/tmp/f", ["echo", "hi"])
    assert cmd[:6] == ["strace", "-DD", "-f", "-q", "-yy", "-ttt"] and "--seccomp-bpf" in cmd
    assert cmd[-3:] == ["--", "echo", "hi"] and "--seccomp-bpf" not in strace_command(
        "/f", ["x"], seccomp=False
    )


def test_events_stream_while_the_command_runs(tmp_path: Path) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    code = (
        "import os, sys, time\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "deadline = time.time() + 20\n"
        f"while not os.path.exists({str(go)!r}) and time.time() < deadline: time.sleep(0.01)\n"
        f"sys.exit(0 if os.path.exists({str(go)!r}) else 1)\n"
    )
    session = StraceBackend().start(LaunchSpec(argv=py(code), cwd=str(tmp_path)))
    for ev in session.events():
        if ev.type == "file.create" and ev.path == real(ready):
            go.touch()  # the program only exits 0 if it sees this while still running
    assert session.result().exit_code == 0


def test_relative_paths_resolve(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "x").write_text("x")
    (tmp_path / "rel").write_text("r")
    events, res = run(["sh", "-c", "cd sub && cat ../x"], tmp_path)
    (read,) = [ev for ev in events if ev.type == "file.read" and ev.raw_path == "../x"]
    assert read.path == real(tmp_path / "x") and read.ok
    code = "import os; d = os.open('.', os.O_RDONLY); os.open('rel', os.O_RDONLY, dir_fd=d)"
    events, _ = run(py(code), tmp_path)
    (read,) = [ev for ev in events if ev.raw_path == "rel"]
    assert read.path == real(tmp_path / "rel") and read.type == "file.read"
    events, _ = run(py("open('/proc/self/cwd/x').read()"), tmp_path)
    (read,) = [ev for ev in events if ev.raw_path == "/proc/self/cwd/x"]
    assert read.path == real(tmp_path / "x")
    assert res.unparsed == 0 and res.exit_code == 0 and res.lines > 0


def test_rename_over_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    events, _ = run(py("import os; os.rename('a', 'b')"), tmp_path)
    (ren,) = [ev for ev in events if ev.type == "file.rename"]
    assert (ren.path, ren.target, ren.ok, ren.raw_path) == (
        real(tmp_path / "a"),
        real(tmp_path / "b"),
        True,
        "a",
    )


def test_symlinks_resolve_to_what_was_read(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".ssh").mkdir(parents=True)
    work.mkdir()
    key = home / ".ssh" / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (work / "key").symlink_to(key)
    (work / "sshdir").symlink_to(home / ".ssh")
    go = tmp_path / "go"
    code = (
        "import os, time\n"
        "open('key').read()\n"
        "try: open('sshdir/missing')\n"
        "except OSError: pass\n"
        "deadline = time.time() + 20\n"  # stay alive until the failed open has been resolved
        f"while not os.path.exists({str(go)!r}) and time.time() < deadline: time.sleep(0.01)\n"
    )
    session = StraceBackend().start(
        LaunchSpec(argv=py(code), cwd=str(work), env={**os.environ, "HOME": str(home)})
    )
    events = []
    for ev in session.events():
        events.append(ev)
        if ev.raw_path == "sshdir/missing":
            go.touch()
    (read,) = [ev for ev in events if ev.raw_path == "key"]
    assert read.path == real(key) and read.type == "file.read"
    (miss,) = [ev for ev in events if ev.raw_path == "sshdir/missing"]
    assert miss.path == real(home / ".ssh") + "/missing" and miss.errno == "ENOENT"


def test_invalid_utf8_name_round_trips(tmp_path: Path) -> None:
    name = os.fsencode(real(tmp_path)) + b"/bad-\xff\xfe-caf\xc3\xa9.txt"
    events, _ = run(py(f"open({name!r}, 'wb').close()"), tmp_path)
    (ev,) = [ev for ev in events if ev.type == "file.create" and ev.path.startswith(real(tmp_path))]
    assert ev.raw_bytes is not None and field_bytes(ev, "file.path") == name


def test_no_extra_descriptors_reach_the_command(tmp_path: Path) -> None:
    out = tmp_path / "fds"
    code = (
        f"import os; fds = os.listdir('/proc/self/fd'); open({str(out)!r}, 'w').write(' '.join(sorted(fds)))"
    )
    run(py(code), tmp_path)
    fds = set(out.read_text().split()) - {"3"}  # 3: the listing's own directory
    assert fds == {"0", "1", "2"}


@pytest.fixture
def loopback_server() -> Iterator[tuple[socket.socket, int]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv, srv.getsockname()[1]
    srv.close()


def _dns_stub(name: str, answer: str) -> tuple[socket.socket, int]:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))

    def serve() -> None:
        try:
            query, peer = udp.recvfrom(512)
        except OSError:
            return
        end = 12
        while query[end]:
            end += query[end] + 1
        asked = b".".join(query[i + 1 : i + 1 + query[i]] for i in _labels(query, 12, end)).decode()
        rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 30, 4) + socket.inet_aton(answer)
        head = query[:2] + struct.pack(">HHHHH", 0x8180, 1, 1 if asked == name else 0, 0, 0)
        udp.sendto(head + query[12 : end + 5] + (rr if asked == name else b""), peer)

    threading.Thread(target=serve, daemon=True).start()
    return udp, udp.getsockname()[1]


def _labels(data: bytes, start: int, end: int) -> Iterator[int]:
    i = start
    while i < end:
        yield i
        i += data[i] + 1


def test_connection_named_by_a_dns_answer(tmp_path: Path, loopback_server: tuple[socket.socket, int]) -> None:
    _, tcp_port = loopback_server
    udp, dns_port = _dns_stub("stub.spyglass.test", "127.0.0.1")
    code = (
        "import socket, struct\n"
        "q = struct.pack('>HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)\n"
        "q += b''.join(bytes([len(p)]) + p.encode() for p in 'stub.spyglass.test'.split('.')) + b'\\0'\n"
        "q += struct.pack('>HH', 1, 1)\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"u.sendto(q, ('127.0.0.1', {dns_port}))\n"
        "data, _ = u.recvfrom(512)\n"
        f"socket.create_connection((socket.inet_ntoa(data[-4:]), {tcp_port})).close()\n"
    )
    try:
        events, res = run(py(code), tmp_path)
    finally:
        udp.close()
    assert res.exit_code == 0
    (dns,) = [ev for ev in events if ev.type == "net.dns"]
    assert (dns.dns_name, dns.dns_answers, dns.port) == ("stub.spyglass.test", ["127.0.0.1"], dns_port)
    (conn,) = [ev for ev in events if ev.type == "net.connect" and ev.port == tcp_port]
    assert (conn.address, conn.transport, conn.domain, conn.ok) == (
        "127.0.0.1",
        "tcp",
        "stub.spyglass.test",
        True,
    )


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_connection_named_by_the_process_hosts_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.0.77 spyglass-test.internal\n")
    srv = socket.socket()
    srv.bind(("127.0.0.77", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    prog = tmp_path / "prog.py"
    prog.write_text(f"import socket\nsocket.create_connection(('spyglass-test.internal', {port})).close()\n")
    inner = f"mount --bind {hosts} /etc/hosts && exec {PY} -S {prog}"
    try:
        events, res = run(["unshare", "-m", "sh", "-c", inner], tmp_path)
    finally:
        srv.close()
    assert res.exit_code == 0
    (conn,) = [ev for ev in events if ev.type == "net.connect" and ev.address == "127.0.0.77"]
    assert conn.domain == "spyglass-test.internal" and conn.port == port
    assert any(ev.type == "sys.sensitive" and ev.syscall == "mount" for ev in events)


DAEMON = """
import os, sys, time
r, w = os.pipe()
if os.fork():
    os.read(r, 1)  # the daemon is up (and strace has seen it): the root may go
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
open({ready!r}, "w").close()
os.write(w, b"x")
time.sleep(1)
open({path!r}, "w").write("late")
"""


def test_daemon_outliving_the_root_is_followed_during_the_grace_period(tmp_path: Path) -> None:
    out = tmp_path / "daemon.txt"
    code = DAEMON.format(path=str(out), ready=str(tmp_path / "ready"))
    events, res = run(py(code), tmp_path, wait_descendants=3.0)
    assert [ev for ev in events if ev.type == "file.create" and ev.path == real(out)]
    assert res.still_running == [] and not [ev for ev in events if ev.type == "process.detach"]
    assert res.exit_code == 0


def test_daemon_is_detached_without_a_grace_period(tmp_path: Path) -> None:
    out = tmp_path / "daemon.txt"
    code = DAEMON.format(path=str(out), ready=str(tmp_path / "ready"))
    events, res = run(py(code), tmp_path, wait_descendants=0.0)
    try:
        starts = {ev.pid: ev.ppid for ev in events if ev.type == "process.start"}
        (child,) = [pid for pid, ppid in starts.items() if ppid == res.root_pid]
        (daemon,) = [pid for pid, ppid in starts.items() if ppid == child]
        running = {p.pid: p.argv for p in res.still_running}
        assert running.get(daemon)  # the intermediate child may still be exiting, too
        detached = {ev.pid: ev.argv for ev in events if ev.type == "process.detach"}
        assert detached == running
        assert not [ev for ev in events if ev.path == real(out)]
        assert res.exit_code == 0 and any("seccomp" in note for note in res.notes)
    finally:
        _kill_all(res)


def test_exit_codes(tmp_path: Path) -> None:
    _, res = run(["sh", "-c", "exit 3"], tmp_path)
    assert (res.exit_code, res.signal, res.shell_exit_code) == (3, None, 3)
    _, res = run(["sh", "-c", "kill -9 $$"], tmp_path)
    assert (res.exit_code, res.signal, res.shell_exit_code) == (None, "SIGKILL", 137)
    events, res = run(["sh", "-c", "exit 0"], tmp_path, options={"seccomp": False})
    assert res.exit_code == 0 and events[0].type == "process.start" and res.root_pid == events[0].pid


def test_kill_tree(tmp_path: Path) -> None:
    session = StraceBackend().start(
        LaunchSpec(argv=["sh", "-c", "sleep 30 & sleep 30; wait"], cwd=str(tmp_path))
    )
    sleeps = 0
    events = []
    for ev in session.events():
        events.append(ev)
        if ev.type == "process.exec" and ev.ok and ev.argv == ["sleep", "30"]:
            sleeps += 1
            if sleeps == 2:
                session.kill_tree()
    res = session.result()
    assert res.signal == "SIGKILL" and res.still_running == []
    killed = {ev.pid for ev in events if ev.type == "process.exit" and ev.signal == "SIGKILL"}
    assert len(killed) == 3


def test_stop_detaches(tmp_path: Path) -> None:
    # without seccomp: a process detached from strace's seccomp filter would see its traced
    # calls fail with ENOSYS (here: the dynamic loader's openat of libc)
    spec = LaunchSpec(argv=["sleep", "30"], cwd=str(tmp_path), options={"seccomp": False})
    session = StraceBackend().start(spec)
    events = []
    for ev in session.events():
        events.append(ev)
        if ev.type == "process.exec" and ev.ok:
            session.stop()
    res = session.result()
    try:
        assert [p.argv for p in res.still_running] == [["sleep", "30"]]
        assert [ev.pid for ev in events if ev.type == "process.detach"] == [res.still_running[0].pid]
        assert res.exit_code is None and res.notes == ["detached from 1 process(es) still running"]
        assert _running(res.still_running[0].pid)
    finally:
        _kill_all(res)


def test_abandoning_the_stream_detaches(tmp_path: Path) -> None:
    spec = LaunchSpec(argv=["sleep", "30"], cwd=str(tmp_path), options={"seccomp": False})
    session = StraceBackend().start(spec)
    stream = session.events()
    pid = None
    for ev in stream:
        if ev.type == "process.exec" and ev.ok:
            pid = ev.pid
            break
    stream.close()
    assert pid is not None
    try:
        for _ in range(200):  # strace lets go of it (TracerPid back to 0) while it keeps running
            status = Path(f"/proc/{pid}/status").read_text()
            if "TracerPid:\t0" in status:
                break
            threading.Event().wait(0.05)
        assert "TracerPid:\t0" in status and _running(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_kill_tree_from_a_signal_handler(tmp_path: Path) -> None:
    """The CLI calls kill_tree()/stop() from signal handlers, possibly in the middle of parsing."""
    code = "while True: open('/etc/hostname').close()"
    session = StraceBackend().start(LaunchSpec(argv=py(code), cwd=str(tmp_path)))
    old = signal.signal(signal.SIGALRM, lambda *_: session.kill_tree())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        reads = sum(1 for ev in session.events() if ev.type == "file.read")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert reads > 0 and session.result().signal == "SIGKILL"


def test_exec_of_a_memfd_names_the_memory_file(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "keep = open(__file__ if '__file__' in dir() else '/etc/hostname')\n"
        "keep.close()\n"
        "fd = os.memfd_create('payload', 0)\n"
        "os.write(fd, open('/bin/true', 'rb').read())\n"
        "os.execv(f'/proc/self/fd/{fd}', ['payload'])\n"
    )
    execs = _payload_execs(code, tmp_path)
    assert [e.exe for e in execs] == ["/memfd:payload (deleted)"]


def _payload_execs(code: str, tmp_path: Path) -> list[Event]:
    """The execs of ``payload`` by a Python program under strace (which must exit 0)."""
    events, res = run(py(code), tmp_path)
    assert res.exit_code == 0
    return [e for e in events if e.type == "process.exec" and e.argv == ["payload"]]


def test_a_memory_file_dup_ed_onto_a_trusted_programs_descriptor_is_named_as_what_runs(tmp_path: Path) -> None:
    """The attacker: a traced open of /bin/true, then (untraced) close and dup of a memory file onto
    that number, and an exec of /proc/self/fd/N: the exec names the memory file, not /bin/true."""
    code = (
        "import os\n"
        "fd = os.open('/bin/true', os.O_RDONLY)\n"
        "mem = os.memfd_create('payload', 0)\n"
        "os.write(mem, open('/bin/true', 'rb').read())\n"
        "os.close(fd)\n"
        "os.dup2(mem, fd, inheritable=True)\n"
        "os.execv(f'/proc/self/fd/{fd}', ['payload'])\n"
    )
    execs = _payload_execs(code, tmp_path)
    assert [e.exe for e in execs] == ["/memfd:payload (deleted)"]
    assert (execs[0].raw_path or "").startswith("/proc/self/fd/")  # the descriptor path stays: the rule names it


def test_exec_through_a_symlink_names_the_file_it_points_at(tmp_path: Path) -> None:
    link = tmp_path / "mytrue"
    link.symlink_to("/bin/true")
    events, res = run([str(link)], tmp_path)
    assert res.exit_code == 0
    (ex,) = [e for e in events if e.type == "process.exec"]
    assert ex.exe == os.path.realpath("/bin/true")
    assert ex.raw_path == str(link)


def test_a_burst_arrives_whole_and_in_order_through_the_lingering_hand_over(tmp_path: Path) -> None:
    # a line or two per FIFO read, handed over in batches gathered for up to the linger: nothing lost,
    # nothing twice, the trace's order kept
    n = 300
    script = f"i=0; while [ $i -lt {n} ]; do : > f$i; /bin/true; i=$((i+1)); done"
    events, res = run(["sh", "-c", script], tmp_path)
    assert res.exit_code == 0
    made = [ev.path for ev in events if ev.type == "file.create" and ev.ok]
    assert made == [real(tmp_path / f"f{i}") for i in range(n)]
    execs = [ev for ev in events if ev.type == "process.exec" and ev.exe == os.path.realpath("/bin/true")]
    assert len(execs) == n and len({ev.pid for ev in execs}) == n
    starts = {ev.pid for ev in events if ev.type == "process.start"}
    assert {ev.pid for ev in execs} <= starts
    assert [ev.ts for ev in events if ev.pid == res.root_pid] == sorted(
        ev.ts for ev in events if ev.pid == res.root_pid
    )
