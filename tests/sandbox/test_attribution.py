"""Which process opened a connection: found among the namespace init's descendants (real processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from spyglass.sandbox import attribution

CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


def test_the_client_is_found_among_the_descendants_and_the_listener_is_not_blamed() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        # a grandchild holds the socket: the look-up walks the tree, not just the children
        proc = subprocess.Popen(
            ["/bin/sh", "-c", f'"{sys.executable}" -c \'{CLIENT}\' {port}; :'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout is not None
            client_port = int(proc.stdout.readline())
            conn, _ = srv.accept()
            with conn:
                kids = attribution.descendants(os.getpid())
                assert proc.pid in kids and len(kids) >= 2
                owner = attribution.client_pid(os.getpid(), client_port, port)
                assert owner in kids and owner != proc.pid  # the python grandchild, not the shell
                with open(f"/proc/{owner}/cmdline", "rb") as f:
                    assert b"create_connection" in f.read()
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)


def test_a_closed_connection_has_no_owner() -> None:
    assert attribution.client_pid(os.getpid(), 1, 2) is None
    assert attribution.descendants(2**22 + 12345) == []
