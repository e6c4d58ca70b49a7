"""The relay on its own (no sandbox): forwarding, the attribution header, exit status, signals."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from sandbox_helpers import serve_each

from spyglass.sandbox import relay
from spyglass.sandbox.proxy import RELAY_MAGIC

CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"hello " * 50000)
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print(len(out), out[:11].decode().replace(" ", "_"), s.getsockname()[1])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def upper_server(path: Path, headers: list[bytes]) -> socket.socket:
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(8)

    def one(c: socket.socket) -> None:
        head = b""
        while len(head) < 8:
            head += c.recv(8 - len(head))
        headers.append(head)
        data = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
        c.sendall(data.upper())  # answers after the client's EOF: a half-closed connection
        c.close()

    serve_each(srv, one)
    return srv


def test_forwards_with_the_header_and_passes_half_close_and_exit_status(short_dir: Path) -> None:
    headers: list[bytes] = []
    srv = upper_server(short_dir / "p.sock", headers)
    port = free_port()
    script = short_dir / "client.py"
    script.write_text(CLIENT)
    proc = subprocess.run(
        [
            sys.executable,
            relay.__file__,
            str(short_dir / "p.sock"),
            str(port),
            "--",
            "sh",
            "-c",
            f"{sys.executable} {script} {port}; exit 7",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    srv.close()
    assert proc.returncode == 7
    n, start, client_port = proc.stdout.split()
    assert (int(n), start) == (300000, "HELLO_HELLO")
    assert headers == [RELAY_MAGIC + struct.pack(">HH", int(client_port), port)]


MANY = """
import socket, sys, threading
port, bad = int(sys.argv[1]), []
def one(i):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(b"q" * (300000 + i))
        s.shutdown(socket.SHUT_WR)
        out = b""
        while d := s.recv(65536):
            out += d
        if not out.endswith(b"got %d" % (300000 + i)):
            bad.append((i, len(out), out[-20:]))
    except OSError as e:
        bad.append((i, repr(e)))
ts = [threading.Thread(target=one, args=(i,)) for i in range(24)]
[t.start() for t in ts]
[t.join() for t in ts]
print("lost:", bad)
"""


def slow_counting_server(path: Path) -> socket.socket:
    """Reads each connection to its EOF in small, slow bites (the relay's buffer fills and its
    reading pauses), then answers with 200 kB and the count after the client's half-close."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(64)

    def one(c: socket.socket) -> None:
        with c:
            head = b""
            while len(head) < 8:
                head += c.recv(8 - len(head))
            n, bites = 0, 0
            while d := c.recv(4096 if bites % 3 else 65536):
                n, bites = n + len(d), bites + 1
                if bites % 16 == 0:
                    time.sleep(0.005)
            c.sendall(b"x" * 200000 + b"got %d" % n)

    serve_each(srv, one)
    return srv


def test_many_large_half_closed_connections_against_a_slow_upstream_lose_nothing(short_dir: Path) -> None:
    """Each direction's half-close is passed on after its buffered bytes, also when reading paused at
    the high-water mark and resumed; 24 at once, each a bounded wait (a loss fails, never hangs)."""
    srv = slow_counting_server(short_dir / "p.sock")
    port = free_port()
    script = short_dir / "many.py"
    script.write_text(MANY)
    try:
        proc = subprocess.run(
            [sys.executable, relay.__file__, str(short_dir / "p.sock"), str(port), "--",
             sys.executable, str(script), str(port)],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:
        srv.close()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "lost: []"


def test_signals_reach_the_command_and_its_death_is_passed_on(short_dir: Path) -> None:
    port = free_port()
    ready = short_dir / "ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            relay.__file__,
            str(short_dir / "none.sock"),
            str(port),
            "--",
            "sh",
            "-c",
            # the command says it is ready once its trap is set: the signal cannot come too early
            f"trap 'exit 42' TERM; echo ready > {ready}; sleep 30 & wait",
        ],
    )
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text().strip() == "ready"):
            assert proc.poll() is None, "the relay ended before the command was ready"
            assert time.monotonic() < deadline, "the command never said it was ready"
            threading.Event().wait(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 42
    finally:
        proc.kill()
    killed = subprocess.run(
        [
            sys.executable,
            relay.__file__,
            str(short_dir / "none.sock"),
            str(free_port()),
            "--",
            "sh",
            "-c",
            "kill -KILL $$",
        ],
        timeout=30,
    )
    assert killed.returncode == -signal.SIGKILL


def test_usage_and_missing_command(short_dir: Path) -> None:
    assert relay.main([]) == 2
    out = subprocess.run(
        [
            sys.executable,
            relay.__file__,
            str(short_dir / "x.sock"),
            str(free_port()),
            "--",
            "/nonexistent/agent",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 127 and "/nonexistent/agent" in out.stderr
