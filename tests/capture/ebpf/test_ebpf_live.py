"""The real program, loaded into this kernel (needs root and BTF; skipped with the reason elsewhere).

Every workload is a real process tree; network traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from ebpf_helpers import HERE, WORKLOAD, normalize, run_under

pytestmark = pytest.mark.usefixtures("need_ebpf")


def _wait_for(cond: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (the comparison needs it)")
def test_same_events_as_strace(tmp_path: Path) -> None:
    """files created, renamed, deleted, linked, chmod-ed; relative, dirfd-relative and `..` paths;
    exec with argv and cwd; bind/sendto/connect on loopback; exit codes; a setsid daemon."""
    sets = {}
    for backend in ("strace", "ebpf"):
        ws = tmp_path / backend
        ws.mkdir()
        cap = run_under(backend, WORKLOAD.read_text(), ws, wait=20.0)
        assert cap.result.exit_code == 3, (backend, cap.result)
        assert cap.result.lost == 0 and cap.result.unparsed == 0
        assert (ws / "daemon.txt").exists()
        sets[backend] = normalize(cap.events, ws)
    assert sets["ebpf"] == sets["strace"], {
        "only strace": sorted(sets["strace"] - sets["ebpf"], key=str),
        "only ebpf": sorted(sets["ebpf"] - sets["strace"], key=str),
    }
    assert ("file.create", "WS/daemon.txt", None, True) in sets["ebpf"]
    assert ("file.mkdir", "WS/up", None, True) in sets["ebpf"]
    assert ("exit", ("sh", "-c", "exit 7"), 7, None) in sets["ebpf"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (the comparison needs it)")
def test_same_sensitive_privilege_and_process_events_as_strace(tmp_path: Path) -> None:
    """signals and pidfds aimed outside the tree, process memory, file handles, TIOCSTI, memfd,
    unshare, a credential change, fork and exit codes: the same calls, targets and outcomes (their
    detail texts are worded per backend: docs/design.md lists the differences)."""
    import subprocess
    import sys

    from spyglass.capture import get_backend
    from spyglass.capture.base import LaunchSpec

    other = subprocess.Popen(["sleep", "60"])
    sets: dict[str, set[tuple[object, ...]]] = {}
    try:
        for backend in ("strace", "ebpf"):
            ws = tmp_path / backend
            (ws / "sub").mkdir(parents=True)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PY": sys.executable, "OTHER": str(other.pid)}
            spec = LaunchSpec(["/bin/sh", str(HERE / "workload_sensitive.sh")], str(ws), env=env,
                              options={"seccomp": False})
            with open(os.devnull) as null:
                spec.stdio = (null.fileno(), 1, 2)
                session = get_backend(backend).start(spec)
                events = list(session.events())
            got: set[tuple[object, ...]] = set()
            for e in events:
                if e.type == "sys.sensitive":
                    got.add(("sensitive", e.syscall, e.target_pid == other.pid, e.ok))
                elif e.type == "priv.change":
                    got.add(("priv", e.syscall, e.detail, e.ok))
                elif e.type == "process.start" and e.ppid is not None:
                    got.add(("start", e.syscall))
                elif e.type == "process.exit":
                    got.add(("exit", e.exit_code, e.signal))
            sets[backend] = got
    finally:
        other.kill()
        other.wait()
    assert sets["ebpf"] == sets["strace"], {
        "only strace": sorted(sets["strace"] - sets["ebpf"], key=str),
        "only ebpf": sorted(sets["ebpf"] - sets["strace"], key=str),
    }
    assert ("sensitive", "ioctl", False, False) in sets["ebpf"]  # TIOCSTI into /dev/null: refused, recorded
    assert ("sensitive", "pidfd_send_signal", True, True) in sets["ebpf"]
    assert ("exit", 5, None) in sets["ebpf"]


def test_root_start_exec_and_signal_exit(tmp_path: Path) -> None:
    cap = run_under("ebpf", 'cd /tmp && exec "$PY" -c "import os; os.kill(os.getpid(), 9)"', tmp_path)
    res = cap.result
    assert res.signal == "SIGKILL" and res.exit_code is None and res.shell_exit_code == 137
    types = [e.type for e in cap.events]
    assert types[0] == "process.start" and cap.events[0].pid == res.root_pid
    execs = [e for e in cap.events if e.type == "process.exec" and e.ok]
    assert execs[-1].cwd == "/tmp" and execs[-1].argv and execs[-1].argv[1] == "-c"
    ends = [e for e in cap.events if e.type == "process.exit"]
    assert [(e.pid, e.signal) for e in ends] == [(res.root_pid, "SIGKILL")]


def test_wrapper_is_the_root_and_the_tree_is_followed(tmp_path: Path) -> None:
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend

    spec = LaunchSpec(["/bin/sh", "-c", "echo x > made.txt; exit 4"], str(tmp_path), wrapper=["/usr/bin/env", "-i"])
    session = EbpfBackend().start(spec)
    events = list(session.events())
    res = session.result()
    assert res.exit_code == 4
    execs = [e.argv for e in events if e.type == "process.exec" and e.ok]
    assert execs[0] and execs[0][0] == "/usr/bin/env"
    assert ["/bin/sh", "-c", "echo x > made.txt; exit 4"] in execs
    assert any(e.type == "file.create" and e.path == str(tmp_path / "made.txt") for e in events)
    assert session.tracer_pid == os.getpid()  # the reader is a thread of this process


def test_daemon_left_running_is_reported_and_untouched(tmp_path: Path) -> None:
    script = "(setsid sh -c 'sleep 2; echo late > after.txt' > /dev/null 2>&1 &); echo early > before.txt"
    cap = run_under("ebpf", script, tmp_path, wait=0.0)
    assert cap.result.exit_code == 0
    assert len(cap.result.still_running) >= 1
    detached = [e for e in cap.events if e.type == "process.detach"]
    assert {e.pid for e in detached} == {s.pid for s in cap.result.still_running}
    # recording is over: the daemon runs on normally (nothing was left inside it)
    assert _wait_for(lambda: (tmp_path / "after.txt").exists())
    assert (tmp_path / "after.txt").read_text() == "late\n"


def test_kill_tree_ends_the_run(tmp_path: Path) -> None:
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend

    spec = LaunchSpec(["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"], str(tmp_path))
    session = EbpfBackend().start(spec)
    seen = 0
    for ev in session.events():
        if ev.type == "process.exec" and ev.argv and ev.argv[0] == "sleep":
            seen += 1
            if seen == 2:
                session.kill_tree()
    res = session.result()
    assert res.signal == "SIGKILL", res
    assert not res.still_running, res


WITNESS = r"""
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
monitor = int(os.environ["MONITOR"])
os.kill(monitor, 0)
libc.syscall(434, monitor, 0)                       # pidfd_open
libc.syscall(310, monitor, None, 0, None, 0, 0)     # process_vm_readv, nothing to read
libc.syscall(304, -1, None, 0)                      # open_by_handle_at
libc.ioctl(0, 0x5412, b"x")                         # TIOCSTI
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)                   # io_uring_setup
libc.syscall(321, 99, None, 0)                      # bpf with a bad command
"""


def test_witness_integrity_syscalls_are_sensitive(tmp_path: Path) -> None:
    (tmp_path / "w.py").write_text(WITNESS)
    monitor = os.getpid()
    cap = run_under("ebpf", f'MONITOR={monitor} "$PY" w.py < /dev/null', tmp_path)
    sens = [(e.syscall, e.detail, e.target_pid) for e in cap.events if e.type == "sys.sensitive"]
    assert ("kill", "signal 0", monitor) in sens
    assert ("pidfd_open", f"pidfd_open pid={monitor}", monitor) in sens
    assert ("process_vm_readv", f"process_vm_readv pid={monitor}", monitor) in sens
    assert ("open_by_handle_at", "open_by_handle_at O_RDONLY (file unknown)", None) in sens  # a failed call
    assert ("ioctl", "TIOCSTI into /dev/null", None) in sens  # the sys-tty-inject rule reads "TIOCSTI"
    assert any(s[0] == "io_uring_setup" and s[1] == "io_uring_setup entries=4" for s in sens)


def test_losses_are_counted_and_lifecycle_survives(tmp_path: Path) -> None:
    """A tiny ring and a reader that waits for the root to exit: file records are dropped and counted, never silently;
    the lifecycle ring still carries every exit."""
    script = '"$PY" -c "import os\nfor i in range(20000): os.close(os.open(\'f\', os.O_WRONLY | os.O_CREAT))"; exit 5'
    cap = run_under("ebpf", script, tmp_path, ring_bytes=1 << 16, stall_reader=-1)
    res = cap.result
    assert res.exit_code == 5
    assert res.lost > 0
    assert any("lost" in n and "file" in n for n in res.notes), res.notes
    creates = [e for e in cap.events if e.type == "file.create" and e.path == str(tmp_path / "f")]
    assert 0 < len(creates) < 20000 and len(creates) + res.lost >= 20000
    exits = [e for e in cap.events if e.type == "process.exit"]
    assert any(e.pid == res.root_pid and e.exit_code == 5 for e in exits)


def _dns_server() -> tuple[int, object]:
    """A loopback UDP server answering every query with example.test = 127.0.0.9 (outside the run)."""
    import socket
    import struct
    import threading

    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.settimeout(30)

    def serve() -> None:
        for _ in range(2):
            try:
                query, peer = srv.recvfrom(512)
            except OSError:
                return
            head = struct.pack(">HHHHHH", struct.unpack(">H", query[:2])[0], 0x8180, 1, 1, 0, 0)
            answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([127, 0, 0, 9])
            srv.sendto(head + query[12:] + answer, peer)

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], srv


RESOLVER = r"""
import os, socket, struct
port = int(os.environ["DNSPORT"])
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x07example\x04test\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(q, ("127.0.0.1", port)); s.recvfrom(512)
s.sendto(q, ("127.0.0.1", port)); s.recvmsg(512)
t = socket.socket()
try:
    t.connect(("127.0.0.9", 1))
except OSError:
    pass
"""


def test_dns_answers_from_recvfrom_and_recvmsg_name_connections(tmp_path: Path) -> None:
    port, srv = _dns_server()
    (tmp_path / "r.py").write_text(RESOLVER)
    try:
        cap = run_under("ebpf", f'DNSPORT={port} "$PY" r.py', tmp_path)
    finally:
        srv.close()  # type: ignore[attr-defined]
    dns = [(e.syscall, e.dns_name, e.dns_answers, e.address, e.port) for e in cap.events if e.type == "net.dns"]
    assert ("recvfrom", "example.test", ["127.0.0.9"], "127.0.0.1", port) in dns
    assert ("recvmsg", "example.test", ["127.0.0.9"], "127.0.0.1", port) in dns
    conn = next(e for e in cap.events if e.type == "net.connect" and e.address == "127.0.0.9")
    assert conn.domain == "example.test" and conn.transport == "tcp" and not conn.ok


def test_a_command_the_kernel_cannot_follow_never_runs(tmp_path: Path) -> None:
    """The tracked table full (filled here with pids no process can have): the command's fork
    cannot enter it, so the kernel kills it at exec, before its first instruction, and the run
    counts the lost fork."""
    import struct

    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import preload
    from spyglass.capture.ebpf.libbpf import map_update
    from spyglass.capture.ebpf.session import EbpfSession

    obj = preload.load_object(preload.RING, preload.LIFE)
    fd = obj.map_fd("tracked")
    for i in range(65536):  # above any pid_max: never a real process
        map_update(fd, struct.pack("<I", 0x7FFF0000 + i), b"\x01")
    marker = tmp_path / "ran"
    spec = LaunchSpec(["/bin/sh", "-c", f"touch {marker}"], str(tmp_path), wait_descendants=0)
    session = EbpfSession(spec, obj, preload.RING, preload.LIFE)
    events = list(session.events())
    res = session.result()
    assert not marker.exists()
    assert res.signal == "SIGKILL" and res.lost >= 1 and any("fork 1" in n for n in res.notes), res
    assert not [e for e in events if e.type == "process.exec" and e.ok]
