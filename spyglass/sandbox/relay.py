"""The relay: runs first inside the sandbox, forwards 127.0.0.1:PORT to the egress proxy.

Usage (inside the sandbox)::

    python3 relay.py SOCKET PORT -- COMMAND [ARGS...]

It binds ``127.0.0.1:PORT`` *before* starting the command, so the proxy is
reachable from the first instruction the agent runs; then it starts the
command as its child, forwards each accepted TCP connection to the unix
``SOCKET`` (bind-mounted from outside, where spyglass's proxy listens),
passes signals on to the command, and exits with the command's status.
It is the sandbox's PID-namespace init (bwrap ``--as-pid-1``): the kernel
drops SIGKILL and SIGSTOP sent to it from inside, ``kill(-1)`` inside does
not reach it, and it reaps the orphans reparented to it.

Each forwarded connection starts with an 8-byte header (``\\0SG1``, the
client's source port and the relay's port, both big-endian u16) so that the
proxy can tell which process opened it.

One thread, one ``selectors`` loop, ``read``/``write`` on the sockets: the
capture backend traces thread creation and the socket calls (each a ptrace
stop), and none of the relay's copying is the agent's doing.  Half-closed
connections are passed on (``shutdown(SHUT_WR)`` once the buffered bytes are
out); at most 256 KiB wait per direction before reading pauses.

This file uses the standard library only and imports nothing from spyglass:
it is copied into the run's directory and started with ``python -I -S`` so
that it works whatever the sandbox hides.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import socket
import struct
import sys

MAGIC = b"\x00SG1"
CHUNK = 65536
HIGH_WATER = 256 * 1024
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
    signal.SIGCONT,
)


class Direction:
    """Bytes from ``src`` to ``dst``."""

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src, self.dst = src, dst
        self.buf = bytearray()
        self.eof = False  # src has no more to say
        self.shut = False  # dst was told (SHUT_WR)

    @property
    def done(self) -> bool:
        return self.shut


class Link:
    """One client connection and its upstream unix connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.out = Direction(client, upstream)
        self.back = Direction(upstream, client)
        self.closed = False


class Relay:
    def __init__(self, listener: socket.socket, sock_path: str, port: int) -> None:
        self.sel = selectors.DefaultSelector()
        self.listener = listener
        self.sock_path = sock_path
        self.port = port
        self.links: dict[int, tuple[Link, Direction | None]] = {}
        listener.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, None)

    # ------------------------------------------------------------ set-up
    def accept(self) -> None:
        while True:
            try:
                client, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.sock_path)
                os.write(upstream.fileno(), MAGIC + struct.pack(">HH", addr[1] & 0xFFFF, self.port))
            except OSError:
                client.close()
                upstream.close()
                continue
            client.setblocking(False)
            upstream.setblocking(False)
            link = Link(client, upstream)
            self.sel.register(client, selectors.EVENT_READ, link)
            self.sel.register(upstream, selectors.EVENT_READ, link)

    # ------------------------------------------------------------ copying
    def _interest(self, link: Link) -> None:
        for sock in (link.client, link.upstream):
            mask = 0
            for d in (link.out, link.back):
                if d.src is sock and not d.eof and len(d.buf) < HIGH_WATER:
                    mask |= selectors.EVENT_READ
                if d.dst is sock and d.buf:
                    mask |= selectors.EVENT_WRITE
            try:
                if mask:
                    self.sel.modify(sock, mask, link)
                else:
                    self.sel.unregister(sock)
            except KeyError:
                if mask:
                    self.sel.register(sock, mask, link)
            except (ValueError, OSError):
                pass

    def _flush(self, d: Direction) -> None:
        while d.buf:
            try:
                n = os.write(d.dst.fileno(), d.buf)
            except (BlockingIOError, InterruptedError):
                return
            del d.buf[:n]
        if d.eof and not d.shut:
            d.shut = True
            try:
                d.dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _fill(self, d: Direction) -> None:
        try:
            data = os.read(d.src.fileno(), CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            d.eof = True
        else:
            d.buf += data
        self._flush(d)

    def service(self, link: Link, sock: socket.socket, mask: int) -> None:
        try:
            for d in (link.out, link.back):
                if mask & selectors.EVENT_WRITE and d.dst is sock:
                    self._flush(d)
                if mask & selectors.EVENT_READ and d.src is sock and not d.eof:
                    self._fill(d)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EINTR):
                self.close(link)
                return
        if link.out.done and link.back.done:
            self.close(link)
        else:
            self._interest(link)

    def close(self, link: Link) -> None:
        if link.closed:
            return
        link.closed = True
        for sock in (link.client, link.upstream):
            try:
                self.sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()

    def run_until(self, child: int) -> int:
        """Relay until ``child`` exits; return its wait status.

        The relay is the PID namespace's init (bwrap ``--as-pid-1``): orphans of the agent are
        reparented to it, and it reaps them as they exit (SIGCHLD wakes the loop)."""
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")
        while True:
            status = _reap(child)
            if status is not None:
                return status
            for key, mask in self.sel.select(timeout=None):
                if key.data is None:
                    self.accept()
                elif key.data == "wake":
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except (BlockingIOError, InterruptedError):
                        pass
                else:
                    self.service(key.data, key.fileobj, mask)  # type: ignore[arg-type]


def _reap(child: int) -> int | None:
    """Reap every exited child; ``child``'s wait status once it has exited, else None."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == 0:
            return None
        if pid == child:
            return status


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: relay.py SOCKET PORT -- COMMAND [ARGS...]\n")
        return 2
    sock_path, port_s, command = argv[0], argv[1], argv[3:]
    # signals that arrive before the command runs are held, then passed on to it
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port_s)))
    listener.listen(512)
    port = listener.getsockname()[1]
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
            os._exit(127 if exc.errno == errno.ENOENT else 126)
    for fwd in FORWARDED:
        signal.signal(fwd, lambda s, _f: _forward(child, s))
    # as the namespace's init the kernel drops the signals it does not handle, but not while it
    # is traced (a tracer sees them all): ignore the rest, so that none stops or ends it
    for other in signal.valid_signals():
        if other not in (*FORWARDED, signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            try:
                signal.signal(other, signal.SIG_IGN)
            except (OSError, ValueError):
                pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    status = Relay(listener, sock_path, port).run_until(child)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:  # die the same way, so the status reaches bwrap and the caller unchanged
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        return 128 + sig
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _forward(child: int, sig: int) -> None:
    try:
        os.kill(child, sig)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
