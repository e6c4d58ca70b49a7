"""The eBPF backend's watchdog: what happens when spyglass itself is stopped or killed.

Under eBPF the recorder *is* spyglass: the kernel program writes records into
rings that a thread of spyglass reads.  An agent allowed to signal spyglass
(the same user, observe mode) can stop or kill it; the program would then go
on filling rings nobody reads, or be detached with spyglass's descriptors,
and the agent would work on unrecorded.  The watchdog is a small process
started next to each run, outside the followed tree and in a session of its
own, holding duplicates of the program's links and maps and one end of a
socket pair whose other end only spyglass holds:

* spyglass found stopped (SIGSTOP or SIGTSTP from the run) while the agent
  runs: resumed with SIGCONT, and told so on the socket (the run records
  ``monitor-stopped:``); both stopped is a Ctrl-Z at the terminal, left alone;
* the socket closes without ``done`` (spyglass is dead): the links it holds
  keep the program attached, so the tree is still followed in the kernel.  It
  drains the rings (what happened after spyglass died, the signal that killed
  it included), kills every followed process until none is left (bounded;
  ``keep`` leaves them running), writes ``monitor-lost.json`` into the run
  directory and exits.  The next spyglass command marks the run
  ``monitor-lost`` from that file (``Store.repair``);
* ``done`` from spyglass: exits at once (spyglass then detaches the program).

It is spawned before the command starts, so an agent that kills spyglass at
its first instruction still leaves a watchdog to notice (it learns the
command's pid from a ``root`` line; without one it kills what the program
follows).  It runs as a plain script with the
interpreter alone (``python -I -S``: no site-packages, no package, no json or
socket module; its configuration is passed as marshal), since it runs beside
every run and takes CPU from it, and imports site-packages and the decoder only
when spyglass is gone.  It is a speed bump, not a wall: an agent that may signal
spyglass may signal the watchdog too (that signal is recorded while spyglass
lives).  docs/threat-model.md says what this does and does not withstand.
"""

from __future__ import annotations

import os
import select
import sys
import time

# The script starts with ``python -I -S`` and these four modules only (the interpreter alone; json,
# socket, pathlib, typing, signal's enums and site-packages cost more than all of it): the rest is imported
# where it is used, the package and site-packages only once spyglass is gone (:func:`lost`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from spyglass.capture.ebpf.libbpf import BpfObject
    from spyglass.events.schema import Event

_CONFIRM = 0.15  # seconds between the looks of _monitor_alone_stopped
_STOPPING_MAX = 1.0  # seconds an agent with a stop pending may take to stop
_GRACE_AFTER = 30.0  # seconds after spyglass was last found stopped alone with no such grace
_TICK = 0.1
_KILL_FOR = 10.0  # seconds spent killing the tree (new children die as they appear)
_KEEP_EVENTS = 500  # events after spyglass's death kept in the note


def _procfs() -> dict[str, Any]:
    """spyglass/capture/procfs.py: imported as usual inside spyglass, loaded by its path when this
    file runs as the watchdog's plain script (no package import)."""
    if __package__:
        from spyglass.capture import procfs

        return vars(procfs)
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "procfs.py")
    with open(path, "rb") as f:  # a few lines of source: compiled here, no importlib.util
        source = f.read()
    namespace: dict[str, Any] = {"__name__": "_spyglass_procfs", "__file__": path}
    exec(compile(source, path, "exec"), namespace)
    return namespace


_PROCFS = _procfs()
_state: Callable[[int], bytes] = _PROCFS["state"]
_alive: Callable[[int], bool] = _PROCFS["running"]
_stop_pending: Callable[[int], bool] = _PROCFS["stop_pending"]
_children: Callable[[int], list[int]] = _PROCFS["children"]
_stopped_alone: Callable[..., bool] = _PROCFS["stopped_alone"]


def _job_stopped(root: int) -> bool:
    """The agent stopped with spyglass (job control): its root stopped, or held in ``D`` with a stop
    pending by a vfork child that is stopped itself (a Ctrl-Z reaching a shell between its vfork and
    the child's exec: the shell takes its stop only once the child has run on)."""
    state = _state(root)
    if state == b"T":
        return True
    if state != b"D" or not _stop_pending(root):
        return False
    return any(_state(child) == b"T" for child in _children(root))


def _monitor_alone_stopped(monitor: int, root: int, grace: bool = True) -> bool:
    """spyglass stopped while the agent is not, and still so a moment later (``procfs.stopped_alone``:
    a root with a stop pending gets up to ``_STOPPING_MAX`` to take it, while it can run; none
    without ``grace``, within ``_GRACE_AFTER`` of the last time spyglass was found stopped alone)."""
    return _stopped_alone(monitor, root, _job_stopped, grace=grace, confirm=_CONFIRM, stopping_max=_STOPPING_MAX,
                          state_of=_state, pending=_stop_pending)  # fmt: skip


def _command_of(monitor: int) -> int:
    """The command before spyglass named it (``root``): spyglass's child that is not this watchdog
    (both are forked by its main thread); 0: none yet.  Until the command exists, spyglass found
    stopped is no act of the run (a Ctrl-Z while it sets up): it is left alone."""
    return next((c for c in _children(monitor) if c != os.getpid()), 0)


def watch(cfg: dict[str, Any]) -> int:
    sock = int(cfg["sock"])  # the socket's descriptor, read and written as is (no socket module)
    monitor = int(cfg["monitor"])
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
        root = int(cfg.get("root") or 0) or _command_of(monitor)
        if root and _monitor_alone_stopped(monitor, root, grace=time.monotonic() - last_alone > _GRACE_AFTER):
            last_alone = time.monotonic()
            _PROCFS["resume"](monitor, sock)  # (the agent stopped too is job control: left alone)
        elif not _alive(monitor):
            break
    lost(cfg)
    return 0


def _write_note(cfg: dict[str, Any], note: dict[str, Any]) -> None:
    if not cfg.get("note"):
        return
    import json

    path = str(cfg["note"])
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(note, indent=1, default=str))
        os.replace(tmp, path)
    except OSError:
        pass  # the run directory is gone or full: the run is still found running, then incomplete


def lost(cfg: dict[str, Any]) -> None:
    """spyglass died during the run: kill the command at once, then the tree (a first time before
    the decoder is loaded), drain the rings, kill again until none is left, leave the note."""
    monitor = int(cfg["monitor"])
    died = time.time_ns()
    import _signal  # type: ignore[import-not-found]  # signal's C module (no enums)

    root, keep = int(cfg.get("root") or 0), bool(cfg.get("keep"))
    started: Callable[[int], int] = _PROCFS["start_time"]
    root_start = int(cfg.get("root_start") or 0)
    killed: list[int] = []

    def kill(pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                continue
            if pid not in killed:
                killed.append(pid)

    # the command first, by its pid and start time: before any import or file written (the rest of
    # the tree once the program's table can be read, below)
    root_alive = bool(root) and started(root) == root_start and _alive(root)
    if root_alive and not keep:
        kill([root])
    _write_note(cfg, {"detail": f"monitor-lost: spyglass (pid {monitor}) died during the run", "ts": died,
                      "monitor_pid": monitor, "final": False})  # at once; completed below
    sys.path.insert(0, str(cfg["package_root"]))
    # ctypes and the package alone (no site-packages): the first kill of the rest comes before the
    # decoder's imports, which take tens of ms (what the tree does meanwhile waits in the rings)
    from spyglass.capture.ebpf.libbpf import LibbpfError, map_keys

    def tracked() -> list[int]:
        try:
            return [int.from_bytes(k, "little") for k in map_keys(int(cfg["tracked"]), 4)]
        except LibbpfError:
            return []

    def members() -> list[int]:
        # the root by its pid and start time (looked at each time: gone, its pid may be another
        # process's by now, one the program does not follow); the rest as the program follows them
        mine = root if root and started(root) == root_start else 0
        return [p for p in dict.fromkeys([mine, *tracked()]) if p and _alive(p)]

    at_death = tracked()
    alive_at_death = list(dict.fromkeys([*([root] if root_alive else []), *members()]))
    if not keep:
        kill(alive_at_death)
    if sys.flags.no_site:  # started with -S: site-packages (msgspec) now
        import site

        site.main()
    import msgspec

    from spyglass.capture.ebpf.decoder import RecordDecoder
    from spyglass.capture.ebpf.ring import Ring

    dec = RecordDecoder(int(cfg["boot"]))
    rings = [Ring(int(fd), int(size)) for fd, size in cfg["rings"]]
    dec.seen.update(at_death)  # signals inside the tree stay inside it
    if root:
        dec.seen.add(root)
    events: list[Event] = []

    def drain() -> None:
        for r in rings:
            for data in r.read():
                events.extend(dec.feed(data))

    end = time.monotonic() + _KILL_FOR
    while True:
        drain()
        alive = members()
        if keep or not alive or time.monotonic() >= end:
            break
        kill(alive)
        time.sleep(0.02)
    drain()
    groups = {-int(g) for g in cfg.get("monitor_pgids", [])}
    hits = [e for e in events if e.type == "sys.sensitive" and e.target_pid is not None
            and (e.target_pid == monitor or e.target_pid in groups)]  # fmt: skip
    by = "; ".join(f"{e.detail} from pid {e.pid} ({e.syscall})" for e in hits[:3])
    detail = (
        f"monitor-lost: spyglass (pid {monitor}) died while {len(alive_at_death) or 1} process(es) of the run"
        f" were alive{': ' + by if by else ''}"
        + ("" if keep else f"; the watchdog killed {len(killed)} process(es)")
    )
    note = {
        "detail": detail,
        "ts": died,
        "monitor_pid": monitor,
        "signals": [msgspec.to_builtins(e) for e in hits],
        "alive": alive_at_death,
        "killed": killed,
        "events_after": [msgspec.to_builtins(e) for e in events[:_KEEP_EVENTS]],
        "events_after_total": len(events),
        "final": True,
    }
    _write_note(cfg, note)


if __package__:  # inside spyglass (the script itself never imports the package)
    from spyglass.capture.watchdog import Watchdog as _Watchdog

    class Watchdog(_Watchdog):
        """spyglass's side of the eBPF watchdog: started with the program's links and maps."""

        script = os.path.realpath(__file__)

        @classmethod
        def start(
            cls, obj: BpfObject, opts: dict[str, object], sizes: tuple[int, int], boot: int, notes: list[str],
            root: int, on_pid: Callable[[Sequence[int]], None] | None = None,
        ) -> Watchdog | None:
            """The watchdog of a loaded, attached program following ``root`` (0: the command is not started
            yet; spyglass sends ``root PID START`` once it is) (``options={"watchdog": False}``: none);
            ``on_pid`` gets its pid once it is started (``LaunchSpec.on_monitor``)."""
            if opts.get("watchdog") is False:
                return None
            ring, life = sizes
            maps = [obj.map_fd("tracked"), obj.map_fd("life"), obj.map_fd("events"), obj.map_fd("alert")]
            cfg: dict[str, Any] = {
                "links": obj.link_fds(), "tracked": maps[0],
                "rings": [[maps[1], life], [maps[2], ring], [maps[3], 256 << 10]],
                "boot": boot, "note": opts.get("monitor_note"), "keep": opts.get("on_monitor_lost") == "keep",
                "monitor_pgids": [os.getpgrp()], "root": root, "root_start": _PROCFS["start_time"](root) if root else 0,
            }  # fmt: skip
            try:
                return cls(cfg, [*obj.link_fds(), *maps], on_pid)
            except OSError as exc:  # no socket pair
                notes.append(f"no watchdog (spyglass's own death would go unnoticed): {exc}")
                return None


def main() -> int:
    import _signal  # signal's C module: signal.py adds enums (a third of the start)
    import marshal

    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a Ctrl-C to spyglass's group is not for us
    _signal.signal(_signal.SIGHUP, _signal.SIG_IGN)
    cfg: dict[str, Any] = marshal.loads(bytes.fromhex(sys.argv[1]))
    return watch(cfg)


if __name__ == "__main__":
    sys.exit(main())
