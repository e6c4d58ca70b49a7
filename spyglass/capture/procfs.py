"""Small readers of ``/proc`` shared by the capture backends, the sandbox and the run core.

Standard library only and no import of the package: the eBPF watchdog, a plain
script that starts without importing spyglass, loads this file by its path.
"""

from __future__ import annotations

import os
import stat as _stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def state(pid: int | str) -> bytes:
    """The state letter of ``pid`` (``R``, ``S``, ``T``, ``Z`` ...), empty when it is gone
    (``PID/task/TID`` for one thread)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return b""
    # the name in parentheses may hold anything, ")" and spaces too: the state follows the last ")"
    end = stat.rfind(b")")
    return stat[end + 2 : end + 3]


#: SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU as bits of /proc/PID/status's signal masks
_STOP_BITS = sum(1 << (sig - 1) for sig in (19, 20, 21, 22))


def stop_pending(pid: int) -> bool:
    """Whether a stop signal is on its way to ``pid`` (sent, not yet taken: it stops when next
    scheduled, which on a busy machine may be a while)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & _STOP_BITS:
            return True
    return False


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie.  A process whose first thread exited
    (``SYS_exit``) shows that thread's zombie state while its other threads run on: it runs."""
    got = state(pid)
    if got != b"Z":
        return got not in (b"X", b"")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(state(f"{pid}/task/{tid}") not in (b"Z", b"X", b"") for tid in tids if tid != str(pid))


def children(pid: int, tid: int | None = None) -> list[int]:
    """The children forked by thread ``tid`` of ``pid`` (its main thread by default), from
    ``/proc/PID/task/TID/children``; empty when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid or pid}/children", "rb") as f:
            return [int(k) for k in f.read().split()]
    except (OSError, ValueError):
        return []


def stopped_alone(
    monitor: int, root: int, job_stopped: Callable[[int], bool], *, grace: bool, confirm: float, stopping_max: float,
    state_of: Callable[[int], bytes] = state, pending: Callable[[int], bool] = stop_pending,
) -> bool:
    """A watchdog's judgement: spyglass (``monitor``) stopped while the run's ``root`` is not
    stopped by job control (``job_stopped``: each backend says what that looks like), and still
    so ``confirm`` seconds later.  A stop sent to a whole process group reaches its members one
    by one (each stops when next scheduled), so one look can find spyglass stopped before the
    root is.  A root with a stop still pending (not scheduled yet, on a busy machine) is given up
    to ``stopping_max`` seconds to take it, and only while it can run (``R`` or ``S``): a root kept
    from running (a vfork parent waits in ``D``, its stop pending for as long as its child likes)
    must not hold spyglass stopped.  No such grace without ``grace`` (the caller's: soon after
    spyglass was last found stopped alone, a root never scheduled could otherwise hold it stopped
    a second at a time, again and again).  ``state_of`` and ``pending`` read /proc."""
    deadline = time.monotonic() + stopping_max
    look = 0
    while True:
        if state_of(monitor) not in (b"T", b"t") or job_stopped(root):
            return False
        if look and not (
            grace and pending(root) and state_of(root) in (b"R", b"S") and time.monotonic() < deadline
        ):
            return True
        look += 1
        time.sleep(confirm)


def resume(monitor: int, sock: int) -> None:
    """A watchdog's act on spyglass found stopped alone: ``SIGCONT``, and ``stopped <ns>`` on the
    socket ``sock`` (spyglass records ``monitor-stopped:``)."""
    import _signal  # type: ignore[import-not-found]  # signal's C module (the watchdogs load no enums)

    try:
        os.kill(monitor, _signal.SIGCONT)
        os.write(sock, f"stopped {time.time_ns()}\n".encode())  # a short line: written whole
    except OSError:
        pass


def descendants(root: int, limit: int = 65536) -> list[int]:
    """The live descendants of ``root``, parents before their children, from
    ``/proc/PID/task/TID/children``; empty where it has none or the kernel lacks those files.
    A process reparented while the tree is read may be missed: callers look again."""
    out: list[int] = []
    todo, seen = [root], {root}
    while todo and len(out) < limit:
        pid = todo.pop(0)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            for kid in children(pid, int(tid)):
                if kid not in seen:
                    seen.add(kid)
                    out.append(kid)
                    todo.append(kid)
    return out


def start_time(pid: int) -> int:
    """When ``pid`` started (clock ticks after boot; 0 when it is gone): with its pid, a process's
    identity (a pid is reused, a start time with it is not)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 else 0


def _stat_fields(pid: int | str) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the name: state, ppid, pgrp, session ... (empty when
    the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return []
    return stat[stat.rfind(b")") + 2 :].split()


def _whole_groups(listed: set[int]) -> list[int]:
    """The process groups all of whose members are listed (from a walk of ``/proc``); none when a
    process cannot be read (``hidepid``): its group is not known to hold only the tree."""
    members: dict[int, set[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except (FileNotFoundError, ProcessLookupError):
                continue  # gone meanwhile
            except OSError:
                return []
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2:
                members.setdefault(int(fields[2]), set()).add(int(entry))
    return [g for g, m in members.items() if g > 1 and m <= listed]


def kill_all(pids: list[int], stop: bool = True) -> None:
    """SIGKILL every pid of a tree so that none of them acts on another's death.

    Every pid is sent SIGSTOP first, then SIGKILL.  Otherwise a shell whose child is killed first
    runs its next command (a write, say) before its own kill arrived, and killing a PID namespace's
    init does not stop its members at once either (the init's memory is torn down first).  A
    death can also leave a stopped process group orphaned, and the kernel then sends the group
    SIGCONT (and SIGHUP), which would let its members run before their own kill: so every process
    group made only of listed processes is killed first, in one call (``kill(-PGID)`` reaches its
    members at once), and the rest children before their parents.  The kills are sent whatever
    happens to the stops (nothing is left stopped).  ``stop=False`` for processes under ptrace
    (strace): a SIGSTOP becomes a stop the tracer must handle, and a tracer busy elsewhere left
    them stopped with their kill pending; then, with nothing stopped, parents are killed before
    their children (a shell killed after its child could act on that death first).
    """
    import signal

    try:
        for pid in pids if stop else ():
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
    finally:
        listed = set(pids)
        try:
            groups = _whole_groups(listed)
        except OSError:
            groups = []
        for pgid in groups:
            try:
                os.kill(-pgid, signal.SIGKILL)
            except OSError:
                pass
        parent: dict[int, int | None] = {}
        for pid in listed:
            fields = _stat_fields(pid)
            parent[pid] = int(fields[1]) if len(fields) > 1 else None
        depth: dict[int, int] = {}

        def depth_of(pid: int) -> int:
            chain: list[int] = []
            while pid in listed and pid not in depth and pid not in chain:
                chain.append(pid)
                up = parent.get(pid)
                if up is None:
                    break
                pid = up
            base = depth.get(pid, -1) if pid in listed and pid not in chain else -1
            for i, p in enumerate(reversed(chain)):
                depth[p] = base + 1 + i
            return depth[chain[0]] if chain else depth.get(pid, 0)

        # stopped: the deepest first; running (traced), parents first: a shell killed after its child
        # could act on that death before its own kill lands (run its next command, or exit 0)
        for pid in sorted(listed, key=depth_of, reverse=stop):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


_MAX_LINKS = 40
#: the names in /proc that mean the process that uses them
_SELF = ("self", "thread-self")


def realpath_in_root(root: str, path: str, pid: int | None = None) -> str | None:
    """``path`` with every symlink resolved as the process whose root is ``root`` sees it.

    Components that do not exist are kept as written (``..`` after them folds
    lexically).  None when the links loop.  With ``pid``, ``/proc/self`` and
    ``/proc/thread-self`` met on the way (typed, or in a link's target: ``ln -s
    /proc/self/fd/7 x``) are process ``pid``'s ``/proc/PID``, never the caller's,
    read from the host's ``/proc`` (a process in a PID namespace of its own has
    another number in its own); what its links there name (``fd/N``, ``cwd``) is
    the host's name, so the rest is resolved from the host's root.  Once ``pid``
    is gone, ``/proc/PID/...`` is kept as written.
    """
    return realpath_as(root, path, pid)[0]


def realpath_as(root: str, path: str, pid: int | None = None) -> tuple[str | None, bool]:
    """:func:`realpath_in_root`, and whether a ``/proc/self`` (or ``thread-self``) was met on the way."""
    todo = [p for p in path.split("/") if p]
    todo.reverse()
    done: list[str] = []
    links = 0
    missing = crossed = False
    while todo:
        name = todo.pop()
        if name == ".":
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        if missing:
            done.append(name)
            continue
        if pid is not None and name in _SELF and done == ["proc"]:
            root, done, crossed = "", ["proc", str(pid)], True  # the writer's, on the host
            continue
        host = root + "/" + "/".join([*done, name])
        try:
            st = os.lstat(host)
        except OSError:
            missing = True
            done.append(name)
            continue
        if not _stat.S_ISLNK(st.st_mode):
            done.append(name)
            continue
        links += 1
        if links > _MAX_LINKS:
            return None, crossed
        try:
            target = os.readlink(host)
        except OSError:
            done.append(name)
            continue
        if target.startswith("/"):
            done = []
        todo.extend(reversed([p for p in target.split("/") if p]))
    return "/" + "/".join(done), crossed
