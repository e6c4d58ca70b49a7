"""Small readers of ``/proc`` shared by the capture backends, the sandbox and the run core.

Standard library only and no import of the package: the eBPF watchdog, a plain
script that starts without importing spyglass, loads this file by its path.
"""

from __future__ import annotations

import os


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
            try:
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in seen:
                    seen.add(kid)
                    out.append(kid)
                    todo.append(kid)
    return out


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def kill_all(pids: list[int]) -> None:
    """SIGKILL every pid of a tree so that none of them acts on another's death.

    Every pid is sent SIGSTOP first, then SIGKILL.  Otherwise a shell whose child is killed first
    runs its next command (a write, say) before its own kill arrived, and killing a PID namespace's
    init does not stop its members at once either (the init's memory is torn down first).  The
    kills go to children before their parents: a parent's death can leave a stopped child's
    process group orphaned, and the kernel then sends that group SIGCONT (and SIGHUP), which
    would let the child run before its own kill.  The kills are sent whatever happens to the
    stops (nothing is left stopped).
    """
    import signal

    try:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
    finally:
        listed = set(pids)
        parent = {pid: _parent(pid) for pid in listed}

        def depth(pid: int) -> int:
            n, seen = 0, {pid}
            up = parent.get(pid)
            while up is not None and up in listed and up not in seen:
                seen.add(up)
                n += 1
                up = parent.get(up)
            return n

        for pid in sorted(listed, key=depth, reverse=True):  # the deepest first
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
