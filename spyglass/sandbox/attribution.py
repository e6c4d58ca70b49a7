"""Which process inside the sandbox opened a proxied connection.

The relay inside the sandbox tells the proxy the client's TCP source port; the
proxy knows the relay's host pid from the unix socket's peer credentials.
From outside, ``/proc/<relay>/net/tcp`` is the sandbox's own TCP table (it
shows the network namespace of that process), which gives the client
socket's inode; the process holding that inode in its fd table is the one to
blame.  All of this reads ``/proc`` from outside the sandbox, so it adds
nothing to the traced process's record.
"""

from __future__ import annotations

import os
import socket
import struct

from spyglass.capture.procfs import descendants


def peer_pid(sock: socket.socket) -> int | None:
    """The pid (in our pid namespace) of the process at the other end of a unix socket."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, _uid, _gid = struct.unpack("3i", creds)
    return pid or None


def tcp_socket_inode(netns_pid: int, local_port: int, remote_port: int) -> int | None:
    """Inode of the TCP socket ``*:local_port -> *:remote_port`` in the network namespace of ``netns_pid``."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{netns_pid}/net/{table}") as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) < 10:
                        continue
                    lport = int(parts[1].rsplit(":", 1)[1], 16)
                    rport = int(parts[2].rsplit(":", 1)[1], 16)
                    if lport == local_port and rport == remote_port:
                        return int(parts[9]) or None
        except (OSError, ValueError, IndexError):
            continue
    return None


def _ns(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _holders(want: str, pids: list[int], exclude: int | None) -> list[int]:
    found: list[int] = []
    for pid in pids:
        if pid == exclude:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == want:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


def socket_owner(inode: int, same_pidns_as: int, exclude: int | None = None) -> int | None:
    """The pid holding ``socket:[inode]`` among processes in the pid namespace of ``same_pidns_as``.

    Where several processes share the socket (inherited across fork) the most
    recently started one (highest pid) is taken.  ``same_pidns_as`` is the
    namespace's init (the sandbox's relay), so its descendants are looked at
    first: a few processes rather than every process of the machine, which
    keeps the look-up quick while the client still waits for its answer, even
    on a busy machine.  All processes in that namespace are looked at only
    where none of those holds it (a process reparented while the tree was read).
    """
    want = f"socket:[{inode}]"
    found = _holders(want, descendants(same_pidns_as), exclude)
    if found:
        return max(found)
    target_ns = _ns(same_pidns_as, "pid")
    if target_ns is None:
        return None
    pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    found = _holders(want, [p for p in pids if p != exclude and _ns(p, "pid") == target_ns], exclude)
    return max(found) if found else None


def client_pid(relay_pid: int, client_port: int, relay_port: int) -> int | None:
    """The process inside the sandbox that connected from ``client_port`` to the relay."""
    inode = tcp_socket_inode(relay_pid, client_port, relay_port)
    if inode is None:
        return None
    return socket_owner(inode, relay_pid, exclude=relay_pid)
