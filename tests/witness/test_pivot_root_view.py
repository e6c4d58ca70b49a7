"""A root agent reads a secret after making a directory above it its root (``unshare -m``, ``pivot_root``).

In a mount namespace of its own whose root is ``tmp``, the agent names ``tmp/home/.ssh/id_rsa``
``/home/.ssh/id_rsa``, and both backends record that name as it sees it: the eBPF program's walks
stop at the process's root, and ``strace -yy`` names a file of a mount the tracer cannot reach from
its own root the way the namespace does.  The secret is still known by device and inode: under
eBPF from the opened descriptor, under strace (once the run entered a mount namespace of its own)
by a ``stat`` through the process's ``/proc/PID/root``, so the read is ``cred-secret-read`` on the
secret's own path.  The ``unshare`` and the mounts are ``sys-namespace-change``.  The benign twin
reads a plain file the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

PROG = Path(__file__).resolve().parent / "progs" / "pivot_read.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pivot_root needs root")


def _pivot_read(setup: Any, name: str) -> tuple[set[str], str]:
    new_root = Path(setup.env["HOME"]).parent  # HOME is new_root/home
    res = setup.run(f"{setup.python} {PROG} {new_root} {name}")
    if "unshare failed" in res.stderr or "pivot_root failed" in res.stderr:
        pytest.skip(f"cannot pivot_root here: {res.stderr[-300:]}")
    assert res.returncode == 0, res.stderr
    return {str(a["rule_id"]) for a in setup.alerts()}, res.stdout


def test_a_secret_read_after_pivot_root_is_a_secret_read(setup: Any) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    rules, out = _pivot_read(setup, "/home/.ssh/id_rsa")
    assert "PRIVATE KEY" in out  # the attack read the secret
    assert {"sys-namespace-change", "cred-secret-read"} <= rules, rules
    (read,) = [a for a in setup.alerts() if a["rule_id"] == "cred-secret-read"]
    assert read["message"].endswith(f"read secret {ssh / 'id_rsa'}"), read


def test_benign_twin_a_plain_file_read_after_pivot_root_is_no_secret_read(setup: Any) -> None:
    (Path(setup.env["HOME"]) / "notes.txt").write_text("hello\n")
    rules, out = _pivot_read(setup, "/home/notes.txt")
    assert "hello" in out
    assert "cred-secret-read" not in rules, rules
