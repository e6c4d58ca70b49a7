"""WitnessGuard: a pipeline sink that raises a critical alert when the run touches the witness.

It judges each event of the run live against what is protected
(:class:`~spyglass.witness.protected.Protected`: the store, the policy and rule
files, the signing key, the policy locations, spyglass's own source and rule
pack, by path and by device and inode).  Any change to one of them by a process
of the run (``witness-tamper``, critical; the agent is stopped in enforce mode)
and any read of the signing key (``witness-key-read``, high) is an alert.  The
guard stats paths of the live filesystem, so it runs live only; ``check`` leaves
its alerts as recorded.

Spyglass's own ``__pycache__`` is no alert (any Python process of the run that
imports spyglass writes there), but what the run wrote there is removed when the
run ends, and what the events did not show is found then
(:mod:`spyglass.witness.endofrun`).
"""

from __future__ import annotations

import os
import time
from functools import lru_cache

from spyglass.capture.ident import MOUNT_CALLS
from spyglass.events import FILE_WRITE_TYPES, Alert, Event, LineageEntry
from spyglass.pipeline import RunContext, Sink
from spyglass.witness.binds import Binds
from spyglass.witness.endofrun import WRITTEN, EndOfRun
from spyglass.witness.protected import OWN_SOURCE, FileId, Protected, file_id

__all__ = ["KEY_READ_RULE", "OWN_SOURCE", "TAMPER_RULE", "FileId", "Protected", "WitnessGuard", "file_id"]

TAMPER_RULE = "witness-tamper"
KEY_READ_RULE = "witness-key-read"
_HANDLE_CALLS = ("open_by_handle_at", "name_to_handle_at")
_DIR_CHANGES = frozenset({"file.rename", "file.delete", "file.mkdir", "file.symlink", "file.link"})
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_TRUNC", "O_CREAT", "O_APPEND")
#: io_uring renames, links and deletes without a system call of their own (eBPF records the first
#: operation of each kind per process; strace none): its use leaves no verdict remembered per name
_URING_CALLS = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register"})

#: alerts of one rule per process (an ``rm -rf`` of the store is one story, not a thousand)
MAX_PER_PROCESS = 5


class WitnessGuard(Sink):
    name = "witness-guard"

    def __init__(self, protected: Protected, *, mode: str = "observe") -> None:
        self.protected = protected
        self.mode = mode
        self.ctx: RunContext | None = None
        self.alerts: list[Alert] = []
        self._seen: set[tuple[str, int, str]] = set()
        self._per_proc: dict[tuple[str, int], int] = {}
        #: paths of spyglass's own source the run's alerts named
        self._told: set[str] = set()
        #: the start's state and the checks against it at the end
        self.end = EndOfRun(protected)
        #: the run's mounts of a directory: a name below one is judged as the directory's too
        self.binds = Binds()

    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.end.start(ctx.run_dir)

    def done(self, ctx: RunContext) -> None:
        """The end of the run's checks (:class:`~spyglass.witness.endofrun.EndOfRun`): a protected
        place or spyglass's own source changed in a way no alert of the run said is an alert now
        (too late to stop); what the run wrote in spyglass's own ``__pycache__`` goes."""
        for path, what in self.end.changed_places():  # the policy and rule files, the key, the policy locations
            if os.path.normpath(path) not in self._told:
                self._end_alert(ctx, f"{what} changed during the run (found at its end): {path}")
        source = self.end.clean_own_source(ctx)
        untold = [p for p in source if p not in self._told]  # not said by an alert of the run already
        for path in untold[:MAX_PER_PROCESS]:
            self._end_alert(ctx, f"{OWN_SOURCE} changed during the run (found at its end): {path}")
        found = self.end.check_imports(ctx)
        for path in found.changed[:MAX_PER_PROCESS]:
            self._end_alert(ctx, f"a module spyglass runs changed during the run (found at its end): {path}")
        for path in found.shadowing[:MAX_PER_PROCESS]:
            self._end_alert(ctx, "a file the next spyglass would import appeared on its import path during "
                                 f"the run (found at its end): {path}")

    def _end_alert(self, ctx: RunContext, message: str) -> None:
        alert = Alert(ts=time.time_ns(), rule_id=TAMPER_RULE, title="Witness tampered with", level="critical",
                      message=message, tags=["attack.defense_evasion", "attack.t1070"])
        self.alerts.append(alert)
        ctx.raise_alert(alert)

    def event(self, ev: Event) -> None:
        if ev.type == "sys.sensitive":
            if ev.syscall in MOUNT_CALLS:  # a name may reach another file now
                self.protected.mounted()
                if ev.ok and ev.syscall == "mount" and ev.path and ev.target:  # a directory mounted there
                    self.binds.mounted(ev.path, ev.target)
                elif ev.ok and ev.path and ev.syscall in ("open_tree", "move_mount"):
                    self.binds.new_api(ev.pid, ev.syscall, ev.path, (ev.detail or "").startswith("open_tree clone"))
            elif ev.syscall in _URING_CALLS:
                self.protected.distrust()
        if not ev.path or not ev.path.startswith("/"):
            return
        t = ev.type
        if t == "file.rename" and not ev.ok and ev.errno == "EEXIST":
            # renameat2(RENAME_NOREPLACE) refusing to replace: nothing was touched, and mv, which tries
            # it first, follows with the plain rename that is the real change (one alert, not two)
            return
        # failed or not: a call recorded as failed (or unfinished: its process killed in it) may have
        # changed the name all the same, and forgetting costs a few stats
        if t == "file.mkdir":
            if ev.ok or ev.errno != "EEXIST":  # refused as the name exists (tar's, for each file): nothing made
                self.protected.made_dir(ev.path, made=ev.ok)
        elif t in _DIR_CHANGES:
            self.protected.forget_dirs()
        handle = ev.syscall in _HANDLE_CALLS
        writes = t in FILE_WRITE_TYPES or (
            handle and bool(ev.flags) and any(f in (ev.flags or "") for f in _WRITE_FLAGS)
        )
        if writes and ev.ok:  # byte-code written: checked at the end if the next spyglass may import it
            dest = ev.target if ev.target and t in ("file.rename", "file.link") else ev.path
            if dest.endswith(WRITTEN):
                self.end.note_written(dest)
        if writes or handle:
            # a link or rename is judged on its source without following it (the link itself may be the store)
            what = self.protected.which(ev.path, follow=t not in ("file.rename", "file.link", "file.symlink"),
                                        pid=ev.pid, made=ev.ok and _made_anew(t, ev.flags),
                                        done=bool(ev.ok) or not ev.errno)
            if what == OWN_SOURCE and t == "file.mkdir" and os.path.basename(ev.path) == "__pycache__":
                what = None  # Python making the cache of a subpackage that had none (what it writes there goes)
            if what is None and ev.target and t in ("file.rename", "file.link"):
                what = self.protected.which(ev.target, pid=ev.pid)
            if what is None and self.protected.mounts_seen and self.ctx is not None:
                what = self.protected.in_mounts(ev.path, (p.pid for p in self.ctx.procs.lineage(ev.pid)))
            gone = what is None and self.binds.points and file_id(f"/proc/{ev.pid}/root") is None
            for other in self.binds.names(ev.path) if gone else ():  # the writer's mounts gone with it
                what = self.protected.which(other, follow=t not in ("file.rename", "file.link", "file.symlink"))
                if what is not None:
                    break
            if what is not None:
                if not ev.ok:
                    pass
                elif t == "file.link" and ev.path:  # the new name is a way in: watch it too
                    self.protected.protect_name(ev.path, what)
                    if ev.target and os.path.normpath(ev.target) in self.protected.secrets:
                        self.protected.secrets[os.path.normpath(ev.path)] = what
                elif t == "file.rename" and ev.target:  # follows the store under its new name, in event order
                    self.protected.follow_rename(ev.path, ev.target, what)
                verb = "opened by file handle" if handle and not writes else _verb(t)
                self._raise(ev, TAMPER_RULE, "critical", "kill", "Witness tampered with",
                            f"{what} {verb}: {ev.path}" + (f" -> {ev.target}" if ev.target else "") + _as(ev)
                            + _failed(ev))
                self._told.update(os.path.normpath(p) for p in (ev.path, ev.target) if p)
                return
        if t == "file.read" or handle:
            what = self.protected.secret(ev.path)
            if what is not None:
                title = "Signing key read" if what == "the signing key" else "Witness key read"
                self._raise(ev, KEY_READ_RULE, "high", "alert", title,
                            f"{what} read: {ev.path}{_as(ev)}{_failed(ev)}")

    def _raise(self, ev: Event, rule: str, level: str, action: str, title: str, message: str) -> None:
        if self.ctx is None:
            return
        key = (rule, ev.pid, message)
        if key in self._seen:
            return
        self._seen.add(key)
        per_proc = self._per_proc.get((rule, ev.pid), 0) + 1
        self._per_proc[(rule, ev.pid)] = per_proc
        if per_proc > MAX_PER_PROCESS:  # rm -rf of a store: the first few say it, the rest are noise
            return
        procs = self.ctx.procs
        info = procs.procs.get(ev.pid)
        alert = Alert(
            ts=ev.ts,
            rule_id=rule,
            title=title,
            level=level,
            action=action,
            message=message,
            event_seqs=[ev.seq],
            pid=ev.pid,
            exe=info.exe if info is not None else ev.exe,
            argv=list(info.argv) if info is not None and info.argv else None,
            cwd=info.cwd if info is not None else None,
            lineage=[LineageEntry(pid=p.pid, exe=p.exe, argv=list(p.argv) if p.argv else None, cwd=p.cwd)
                     for p in reversed(procs.lineage(ev.pid))],
            tags=["attack.defense_evasion", "attack.t1070"] if rule == TAMPER_RULE else ["attack.credential_access"],
        )
        self.alerts.append(alert)
        self.ctx.raise_alert(alert)
        if action == "kill" and self.mode == "enforce" and self.ctx.stop_agent is not None:
            self.ctx.stop_agent(rule)


@lru_cache(maxsize=1024)
def _made_anew(t: str, flags: str | None) -> bool:
    """The call, having succeeded, made its name anew: a ``mkdir``, or an open with ``O_CREAT`` and
    ``O_EXCL`` (which fails on any name that exists, a symlink included; not ``O_TMPFILE``, whose
    name is the directory).  Memoised: a run has a handful of distinct flag sets."""
    if t == "file.mkdir":
        return True
    if t != "file.create" or not flags:
        return False
    names = flags.split("|")
    return "O_EXCL" in names and "O_CREAT" in names and "O_TMPFILE" not in names


def _failed(ev: Event) -> str:
    """An attempt that failed (EACCES from a store owned by another user) is as telling as a success: said so."""
    return "" if ev.ok else f" (attempted; failed: {ev.errno or 'error'})"


def _as(ev: Event) -> str:
    """The name the run used, where the capture recorded the protected file's own path instead (a link)."""
    return f" (opened as {ev.raw_path})" if ev.raw_path and ev.raw_path != ev.path else ""


def _verb(etype: str) -> str:
    return {
        "file.write": "opened for writing",
        "file.create": "created or opened for writing",
        "file.delete": "deleted",
        "file.rename": "renamed",
        "file.link": "hard-linked",
        "file.symlink": "linked",
        "file.chmod": "chmod-ed",
        "file.chown": "chown-ed",
        "file.mkdir": "written (mkdir)",
        "file.truncate": "truncated",
    }.get(etype, "changed")
