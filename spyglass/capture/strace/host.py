"""Host-side helpers of the strace backend.

``realpath_dir`` and ``hosts_file`` are injected into the pure parser.  Both
look at a traced process through ``/proc/<pid>/root``, so a process in a
chroot or a sandbox's mount namespace is seen from its own file-system view.
When the process is gone they fall back to the identity (paths) or to the
host's file (hosts).

``adopt_orphans``/``reap_zombies`` deal with ``strace -D``: the tracer runs
as the command's grandchild and is orphaned at start-up.  While a session
starts we are a child subreaper, so the orphaned strace becomes our child
and we can reap it (where PID 1 does not reap, as in many containers,
orphans would otherwise stay zombies).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

from spyglass.capture.procfs import realpath_in_root as realpath_in_root
from spyglass.capture.procfs import running as running
from spyglass.capture.procfs import state as state
from spyglass.capture.strace.dns import parse_hosts

_MAX_HOSTS_BYTES = 1 << 20


def realpath_dir(pid: int, abs_dir: str) -> str:
    """Resolve symlinks in a path as live process ``pid`` sees it; once it is gone, as the
    host sees it (the same file system unless the process ran in a mount namespace)."""
    root = f"/proc/{pid}/root"
    try:
        os.stat(root)
    except OSError:
        root = "/"
    resolved = realpath_in_root(root, abs_dir, pid)
    return resolved if resolved is not None else abs_dir


def hosts_file(pid: int, path: str) -> dict[str, str]:
    """Address -> name from the hosts file at ``path`` as process ``pid`` sees it."""
    for candidate in (f"/proc/{pid}/root{path}", path):
        try:
            with open(candidate, "rb") as f:
                data = f.read(_MAX_HOSTS_BYTES)
        except OSError:
            continue
        return parse_hosts(data.decode("utf-8", "replace"))
    return {}


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_subreaper_lock = threading.Lock()
_subreaper_users = 0
_subreaper_ours = False


def _prctl(option: int, arg: object) -> int:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, arg, 0, 0, 0))
    except (OSError, AttributeError):
        return -1


def adopt_orphans(on: bool) -> None:
    """Become (``on``) or stop being a child subreaper; nested calls are counted."""
    global _subreaper_users, _subreaper_ours
    with _subreaper_lock:
        if on:
            _subreaper_users += 1
            if _subreaper_users == 1:
                current = ctypes.c_int(0)
                _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(current))
                _subreaper_ours = not current.value and _prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0
        elif _subreaper_users > 0:
            _subreaper_users -= 1
            if _subreaper_users == 0 and _subreaper_ours:
                _prctl(_PR_SET_CHILD_SUBREAPER, 0)
                _subreaper_ours = False


def _parent_and_state(pid: int) -> tuple[int, bytes, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    name = data[data.find(b"(") + 1 : data.rfind(b")")].decode("utf-8", "replace")
    fields = data[data.rfind(b")") + 2 :].split()
    if len(fields) < 2:
        return None
    return int(fields[1]), fields[0], name


def reap_child(pid: int, timeout: float = 5.0) -> bool:
    """Wait for ``pid`` if it is our child (an adopted strace that is exiting)."""
    info = _parent_and_state(pid)
    if info is None or info[0] != os.getpid():
        return False
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return True
        except ChildProcessError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def reap_zombies(comm: str) -> int:
    """Reap our own zombie children named ``comm``; returns how many."""
    me = os.getpid()
    reaped = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = _parent_and_state(int(entry))
        if info is None or info != (me, b"Z", comm):
            continue
        try:
            if os.waitpid(int(entry), os.WNOHANG)[0]:
                reaped += 1
        except ChildProcessError:
            pass
    return reaped


def fd_link(pid: int, fd: int) -> str | None:
    """What descriptor ``fd`` of live process ``pid`` names (a path, or ``pipe:[N]``-style text);
    for ``fd`` -1 (``state.EXE``) the file the process runs."""
    try:
        return os.readlink(f"/proc/{pid}/exe" if fd == -1 else f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None


def pgid_of(pid: int) -> int | None:
    """The process group of live process ``pid``, or None when it is gone."""
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass

def grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """A larger FIFO buffer lets strace write bursts without waiting for the parser."""
    import fcntl

    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except OSError:  # above /proc/sys/fs/pipe-max-size for an unprivileged user
        pass

def tracer_of(pid: int) -> int | None:
    """The pid ptrace-attached to ``pid`` (``TracerPid``), if any."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1]) or None
    except (OSError, ValueError):
        pass
    return None

def children_of_self() -> list[int]:
    """Our direct children (every thread's), from /proc."""
    out: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="utf-8") as f:
                out.extend(int(p) for p in f.read().split())
        except (OSError, ValueError):
            continue
    return out

def comm_is(pid: int, comm: str) -> bool:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() == comm
    except OSError:
        return False


def private_dir(prefix: str) -> str:
    """A new directory only this user can enter, made as ``tempfile.mkdtemp(prefix=prefix)`` makes it
    (``mkdir`` mode 0700 under a random name: never one that exists) in ``$TMPDIR``, ``$TEMP`` or
    ``$TMP``, else /tmp, /var/tmp, /usr/tmp: without importing ``tempfile`` and ``shutil`` (and with
    them ``random``, ``bz2``, ``lzma``: 3-4 ms of a strace run's start)."""
    bases = [d for d in (os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")) if d]
    last: OSError | None = None
    for base in [*bases, "/tmp", "/var/tmp", "/usr/tmp"]:
        for _ in range(100):
            path = os.path.join(os.path.abspath(base), prefix + os.urandom(6).hex())
            try:
                os.mkdir(path, 0o700)
                return path
            except FileExistsError:
                continue
            except OSError as exc:  # not there, not a directory, not writable: the next place
                last = exc
                break
    raise last or FileExistsError(f"no free name for a directory {prefix}*")


def remove_dir(path: str, names: tuple[str, ...]) -> None:
    """Remove the directory ``path`` made by :func:`private_dir` and the ``names`` in it; anything
    else found there (put there by a process of the user) goes too, as ``shutil.rmtree`` removes it
    (never following a symlink).  Errors are ignored."""
    for name in names:
        try:
            os.unlink(os.path.join(path, name))
        except OSError:
            pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        import shutil  # not empty: rare, and shutil costs milliseconds at import

        shutil.rmtree(path, ignore_errors=True)
