"""The strace backend's watchdog: spyglass killed mid-run must not leave the tree running unwatched.

Under strace the recorder is the strace process, and spyglass reads what it
writes from a FIFO.  Killed (a SIGKILL from the run, the OOM killer), spyglass
can do nothing more; strace would go on until its next write found no reader,
then exit and so detach from every process of the tree, which would run on
unrecorded (its traced calls failing with ``ENOSYS`` under strace's seccomp
filter, or all of them allowed with ``--no-seccomp``).  The watchdog is a small
process started next to each run (the same class as the eBPF backend's
watchdog, ``capture/ebpf/watchdog.py``, starts it), outside the traced tree and
in a session of its own.  It holds one end of a socket pair whose other end
only spyglass holds, and a read end of the FIFO of its own, which it never
reads while spyglass lives.  When the socket closes without ``done`` (or
spyglass is found gone):

* it reads the FIFO, so strace never finds it without a reader: strace stays
  alive and keeps every process of the tree traced (and each child traced
  from its birth), and the lines it writes are kept for the note;
* it kills every process traced by that strace (``TracerPid``), the command
  and all their children (``/proc/PID/task/TID/children``: an untraced
  child too), again until none is left (bounded, ``_KILL_FOR``;
  ``on_monitor_lost: keep`` leaves them running); strace, left with no
  tracee, exits;
* it writes ``monitor-lost.json`` into the run directory: the next spyglass
  command marks the run ``monitor-lost`` (``Store.repair``), and ``show``
  prints the note (the signal that killed spyglass, when strace wrote it).

``done`` from spyglass (the run is over, or the tree was let go on purpose)
ends it at once.  It is a plain script started with the interpreter alone
(``python -I -S``, configuration as marshal) and never imports the package.
Like the eBPF watchdog it is a speed bump, not a wall: the run can signal it
too (recorded and alerted while spyglass lives), and a SIGKILL to spyglass,
strace and the watchdog at once (``kill -9 -1``) leaves an ``incomplete`` run
and whatever survived it unrecorded.  docs/threat-model.md says more.
"""

from __future__ import annotations

import os
import select
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.watchdog import Watchdog

_TICK = 0.1  # seconds between looks at spyglass
_KILL_FOR = 10.0  # seconds spent killing the tree (new children die as they appear)
_AFTER = 2.0  # seconds strace is given to exit once its tree is gone (its last lines are read meanwhile)
_KEEP_LINES = 500  # strace lines after spyglass's death kept in the note
_SIGNALS = (b"kill(", b"tkill(", b"tgkill(", b"pidfd_send_signal(")
_CONFIRM = 0.15  # seconds between the looks of _monitor_alone_stopped
_STOPPING_MAX = 1.0  # seconds a root with a stop pending may take to stop
_GRACE_AFTER = 30.0  # seconds after spyglass was last found stopped alone with no such grace


def _procfs() -> dict[str, Any]:
    """spyglass/capture/procfs.py: imported as usual inside spyglass, loaded by its path when this
    file runs as the watchdog's plain script (no package import)."""
    if __package__:
        from spyglass.capture import procfs

        return vars(procfs)
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "procfs.py")
    with open(path, "rb") as f:
        source = f.read()
    namespace: dict[str, Any] = {"__name__": "_spyglass_procfs", "__file__": path}
    exec(compile(source, path, "exec"), namespace)
    return namespace


def tracer_of(pid: int) -> int:
    """The ``TracerPid`` of ``pid`` (0: untraced or gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def traced_by(tracer: int) -> list[int]:
    """Every process whose tracer is ``tracer``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and tracer_of(int(name)) == tracer:
            out.append(int(name))
    return out


def writer_of(fd: int) -> int:
    """The strace holding a write end of the FIFO whose read end is ``fd`` (0: none found): the tracer
    when spyglass died before it could send the command's pid (``root``).  One that traces processes
    first: with ``-DD`` the command, not yet exec'd, is a strace holding the FIFO too."""
    me = os.fstat(fd)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/comm", "rb") as f:
                if not f.read().startswith(b"strace"):
                    continue
            entries = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for entry in entries:
            try:
                st = os.stat(f"/proc/{name}/fd/{entry}")
            except OSError:  # closed meanwhile
                continue
            if (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino):
                found.append(int(name))
                break
    return next((pid for pid in found if traced_by(pid)), found[0] if found else 0)


def waits_on_fifo(tracer: int, fifo: int) -> bool:
    """strace waits in a call on the FIFO whose read end is ``fifo`` (a write: it writes nothing
    else there): the FIFO is full, spyglass reads nothing, and every process of the run that makes
    a traced call waits for strace in a ptrace stop (``t``) that is no job control."""
    try:
        with open(f"/proc/{tracer}/syscall", "rb") as f:
            fields = f.read().split()  # "running", or the call's number and its arguments
        if len(fields) < 2 or not fields[0].isdigit():
            return False
        held = os.stat(f"/proc/{tracer}/fd/{int(fields[1], 16)}")
        mine = os.fstat(fifo)
    except (OSError, ValueError):
        return False
    return (held.st_dev, held.st_ino) == (mine.st_dev, mine.st_ino)


def _job_stopped(root: int, tracer: int, fifo: int) -> bool:
    """The run's root stopped with spyglass by job control.  A Ctrl-Z reaches spyglass's process
    group, not strace's (``-DD``: a group of its own), so strace runs on and holds the traced root
    in a group stop (``t``; ``T`` once untraced).  A traced root waits in ``t`` for other reasons
    too: strace stopped itself (never by a Ctrl-Z), or strace blocked writing into the FIFO that
    the stopped spyglass does not read; then it is no job control, unless the root has a stop
    pending (a Ctrl-Z that came while spyglass was more than the FIFO behind: the root takes it
    once strace lets it go)."""
    state: Callable[[int], bytes] = PROCFS["state"]
    got = state(root)
    if got == b"T":
        return True
    if got != b"t" or not tracer or state(tracer) in (b"T", b"t", b""):
        return False
    return not waits_on_fifo(tracer, fifo) or bool(PROCFS["stop_pending"](root))


def _monitor_alone_stopped(cfg: dict[str, Any], root: int, grace: bool = True) -> bool:
    """spyglass stopped while the run's root is not stopped by job control (``procfs.stopped_alone``,
    as the eBPF watchdog decides it, with ``_job_stopped`` above)."""
    fifo = int(cfg["fifo"])

    def job(pid: int) -> bool:  # (looked at only once spyglass is found stopped)
        return _job_stopped(pid, int(cfg.get("tracer") or 0) or tracer_of(pid), fifo)

    stopped_alone: Callable[..., bool] = PROCFS["stopped_alone"]
    return stopped_alone(int(cfg["monitor"]), root, job, grace=grace, confirm=_CONFIRM, stopping_max=_STOPPING_MAX)


def watch(cfg: dict[str, Any]) -> int:
    sock, monitor = int(cfg["sock"]), int(cfg["monitor"])
    alive: Callable[[int], bool] = PROCFS["running"]
    buf = b""
    last_alone = -_GRACE_AFTER - 1.0  # when spyglass was last found stopped alone
    while True:
        ready, _, _ = select.select([sock], [], [], _TICK)
        if ready:
            try:
                data = os.read(sock, 256)
            except OSError:
                data = b""
            if not data:
                break  # spyglass is gone
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                word, _, arg = line.partition(b" ")
                if word == b"done":
                    return 0
                if word == b"root":  # the command, started once this watchdog existed: its pid and start
                    pid, _, start = arg.partition(b" ")
                    if pid.isdigit() and start.isdigit():
                        cfg["root"], cfg["root_start"] = int(pid), int(start)
                if word == b"tracer" and arg.isdigit():  # strace, found by spyglass just now: its start too
                    cfg["tracer"], cfg["tracer_start"] = int(arg), PROCFS["start_time"](int(arg))
        root = int(cfg.get("root") or 0)  # (none yet: spyglass stopped is no act of a run not started)
        if root and _monitor_alone_stopped(cfg, root, grace=time.monotonic() - last_alone > _GRACE_AFTER):
            # stopped, spyglass reads nothing: the run goes on unjudged (a kill rule's verdict waits)
            # until strace finds the FIFO full
            last_alone = time.monotonic()
            PROCFS["resume"](monitor, sock)
        elif not ready and not alive(monitor):
            break
    lost(cfg)
    return 0


class _Fifo:
    """The watchdog's own read end of strace's FIFO, read once spyglass is gone."""

    def __init__(self, fd: int) -> None:
        self.fd, self.total, self._buf = fd, 0, b""
        self.lines: list[str] = []
        os.set_blocking(fd, False)

    def drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                return
            *lines, self._buf = (self._buf + chunk).split(b"\n")
            self.total += len(lines)
            room = _KEEP_LINES - len(self.lines)
            if room > 0:
                self.lines.extend(x.decode("utf-8", "replace") for x in lines[:room])


def _signals(lines: list[str], monitor: int) -> list[dict[str, Any]]:
    """The signals strace saw sent to spyglass: ``PID TIME kill(MONITOR, SIGKILL) = 0``."""
    out = []
    for line in lines:
        parts = line.split(None, 2)  # strace pads the pid to five columns
        if len(parts) < 3 or not parts[0].isdigit() or not parts[2].encode().startswith(_SIGNALS):
            continue
        call, _, rest = parts[2].partition("(")
        args = [a.strip() for a in rest.split(")", 1)[0].split(",")]
        target = args[0]  # (tgkill's first argument is the process; a tkill of one of its threads is missed)
        if target.split("<", 1)[0] == str(monitor) or target == f"-{monitor}":  # -yy may name a pidfd
            sig = next((a for a in args if a.startswith("SIG")), "?")
            out.append({"detail": sig, "process.pid": int(parts[0]), "syscall": call})
    return out


def lost(cfg: dict[str, Any]) -> None:
    """spyglass died during the run: keep strace tracing, kill the tree, leave the note."""
    import json

    monitor, root, keep = int(cfg["monitor"]), int(cfg.get("root") or 0), bool(cfg.get("keep"))
    died = time.time_ns()

    def note(body: dict[str, Any]) -> None:
        if not cfg.get("note"):
            return
        path = str(cfg["note"])
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(json.dumps(body, indent=1))
            os.replace(path + ".tmp", path)
        except OSError:
            pass  # the run directory is gone or full: the run is still found running, then incomplete

    note({"detail": f"monitor-lost: spyglass (pid {monitor}) died during the run", "ts": died,
          "monitor_pid": monitor, "final": False})  # fmt: skip
    fifo = _Fifo(int(cfg["fifo"]))
    fifo.drain()
    running: Callable[[int], bool] = PROCFS["running"]
    below: Callable[[int], list[int]] = PROCFS["descendants"]
    kill_all: Callable[..., None] = PROCFS["kill_all"]
    started: Callable[[int], int] = PROCFS["start_time"]
    root_start = int(cfg.get("root_start") or 0)
    if root and started(root) != root_start:
        root = 0  # gone, its pid perhaps another process's now: not ours to kill
    tracer = int(cfg.get("tracer") or 0) or tracer_of(root) or (0 if root else writer_of(int(cfg["fifo"])))
    tracer_start = int(cfg.get("tracer_start") or 0) if cfg.get("tracer") else started(tracer)

    def strace_alive() -> bool:
        try:
            with open(f"/proc/{tracer}/comm", "rb") as f:
                if not f.read().startswith(b"strace"):
                    return False
        except OSError:
            return False
        return started(tracer) == tracer_start and running(tracer)  # that strace, not one with its pid since

    def members() -> list[int]:
        # the tree: what strace traces (every process of it from its birth), the command, and their children
        # (the root by its pid and start time each time: killed meanwhile, its pid may be reused)
        mine = root if root and started(root) == root_start else 0
        tops = [mine, *(traced_by(tracer) if tracer and strace_alive() else ())]
        found = dict.fromkeys(p for p in tops if p)
        for top in list(found):
            found.update(dict.fromkeys(below(top)))
        found.pop(tracer, None)
        return [p for p in found if p != os.getpid() and running(p)]

    alive_at_death = members()
    killed: list[int] = []
    end = time.monotonic() + _KILL_FOR
    while not keep:
        fifo.drain()
        alive = members()
        if not alive or time.monotonic() >= end:
            break
        kill_all(alive, stop=False)  # traced: a SIGSTOP would be strace's to handle
        killed.extend(p for p in alive if p not in killed)
        time.sleep(0.02)
    end = time.monotonic() + _AFTER
    while not keep and tracer and strace_alive() and time.monotonic() < end:  # its last lines
        fifo.drain()
        time.sleep(0.02)
    fifo.drain()
    hits = _signals(fifo.lines, monitor)
    by = "; ".join(f"{h['detail']} from pid {h['process.pid']} ({h['syscall']})" for h in hits[:3])
    n = len(alive_at_death)
    detail = (
        f"monitor-lost: spyglass (pid {monitor}) died "
        + (f"while {n} process(es) of the run were alive" if n else "during the run (its processes died with it)")
        + (f": {by}" if by else "")
        + ("; they were left running, no longer recorded" if keep and n
           else f"; the watchdog killed {len(killed)} process(es)" if n else "")
    )
    note({"detail": detail, "ts": died, "monitor_pid": monitor, "tracer_pid": tracer, "signals": hits,
          "alive": alive_at_death, "killed": killed, "lines_after": fifo.lines, "events_after_total": fifo.total,
          "final": True})  # fmt: skip


PROCFS: dict[str, Any] = dict(_procfs())  # procfs.py's names


def open_end(fifo: str, spec: LaunchSpec) -> int | None:
    """The watchdog's own read end of ``fifo`` (a description of its own: its non-blocking flag is
    not the reader's), opened while the FIFO still has a name; None: no watchdog
    (``options={"watchdog": False}``) or no descriptor (:func:`start` says so)."""
    if spec.options.get("watchdog") is False:
        return None
    try:
        return os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None


def start(fd: int | None, root: int, spec: LaunchSpec, notes: list[str]) -> tuple[Watchdog | None, int | None]:
    """spyglass's side: the watchdog of the run of ``root`` (0: not started yet; spyglass sends
    ``root PID START`` once it is), given ``fd``, its read end of the FIFO
    strace writes into (:func:`open_end`), which the caller closes after ``Watchdog.close``;
    ``options={"watchdog": False}``: none."""
    from spyglass.capture import procfs
    from spyglass.capture.watchdog import Watchdog

    opts = spec.options
    if opts.get("watchdog") is False:
        return None, None
    if fd is None:
        notes.append("no watchdog (spyglass's own death would go unnoticed): no descriptor for the FIFO")
        return None, None
    try:
        cfg = {"fifo": fd, "root": root, "root_start": procfs.start_time(root) if root else 0,
               "note": opts.get("monitor_note"),
               "keep": opts.get("on_monitor_lost") == "keep"}  # fmt: skip
        return Watchdog(cfg, [fd], spec.on_monitor, script=__file__), fd
    except OSError as exc:  # no descriptor or no socket pair
        if fd is not None:
            os.close(fd)
        notes.append(f"no watchdog (spyglass's own death would go unnoticed): {exc}")
        return None, None


def main() -> int:
    import _signal  # type: ignore[import-not-found]  # signal's C module, as the eBPF watchdog
    import marshal

    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a Ctrl-C to spyglass's group is not for us
    _signal.signal(_signal.SIGHUP, _signal.SIG_IGN)
    cfg: dict[str, Any] = marshal.loads(bytes.fromhex(sys.argv[1]))
    return watch(cfg)


if __name__ == "__main__":
    sys.exit(main())
