"""The strace line parser: text in, events out, no I/O.

Input is what ``strace -f -q -yy -ttt -s 4096 --decode-pids=pidns -e trace=...``
writes, one line at a time (decoded with ``errors="surrogateescape"``)::

    1234  1700000000.123456 openat(AT_FDCWD</home/x>, "a.txt", O_RDONLY) = 3</home/x/a.txt>
    1234  1700000000.123500 vfork( <unfinished ...>
    1240  1700000000.123600 execve("/usr/bin/sh", ["sh", "-c", "exit 3"], ...) = 0
    1234  1700000000.123700 <... vfork resumed>) = 1240
    1240  1700000000.124000 +++ exited with 3 +++

The parser stitches ``<unfinished ...>``/``<... NAME resumed>`` pairs per
thread, keeps the process table (threads map to their thread-group leader;
``pid`` on every event is the leader, ``tid`` the thread when it differs),
tracks each process's cwd and ids, and hands each completed call to the
handler for its name (:mod:`.files`, :mod:`.net`, :mod:`.privs`; process life
is handled here; the processes' file-system views, a chroot's root and a mount
namespace of their own, in :mod:`.rootviews`).  A line it cannot understand is counted in ``unparsed``;
nothing raises.

A child may show up before its parent's clone returns (strace ``-f`` prints
whatever stops first).  The child is then attributed to the most recent clone
still in flight, whose arguments (``CLONE_THREAD`` or not) are already
printed, and ``process.start`` is emitted once, when the child is first seen.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from spyglass.capture import ident
from spyglass.capture.fields import to_text
from spyglass.capture.strace import access, files, net, privs
from spyglass.capture.strace.decode import unquote
from spyglass.capture.strace.execfd import descriptor_path, fd_named
from spyglass.capture.strace.fastpath import FastPaths
from spyglass.capture.strace.paths import RealpathDir
from spyglass.capture.strace.rootviews import ProtectedViews, inherit_root
from spyglass.capture.strace.state import Call, FdLink, HostsFile, PgidOf, Proc, TraceState, live_parent
from spyglass.events.schema import Event

Handler = Callable[[TraceState, Call], "Event | None"]

_LINE = re.compile(r"(\d+) +(\d+)\.(\d+) ")
_CALL = re.compile(r"([a-z_][a-z0-9_]*)\(")
_RESUMED = re.compile(r"<\.\.\. ([a-z_][a-z0-9_]*) resumed>")
_RET = re.compile(
    r"\) += (-?\d+|\?|0x[0-9a-fA-F]+)"
    r"(?: /\* (\d+) in strace's PID NS \*/)?"
    r'(?:<((?:\\.|"(?:[^"\\]|\\.)*"|->|<(?:char|block) \d+:\d+>|[^<>"\\])*)>(?:\(deleted\))?)?'
    r"(?: (E[A-Z0-9]+) \([^()]*\)| \(errno (\d+)\)| <unavailable>)?$"
)
_LOOSE_RET = re.compile(r"(-?\d+|\?)(?: (E[A-Z0-9]+))?")
_EXIT = re.compile(
    r"\+\+\+ (?:exited with (-?\d+)|killed by ([A-Z0-9]+)( \(core dumped\))?"
    r"|superseded by execve in pid (\d+)) \+\+\+"
)
_STR = r'"[^"\\]*(?:\\.[^"\\]*)*"(?:\.\.\.)?'
_STRING = re.compile(_STR)
_EXECVE = re.compile(rf"(?P<path>{_STR}), \[(?P<argv>.*)\], (?:0x[0-9a-f]+|NULL)")
_EXECVEAT = re.compile(rf"(?P<dirfd>[^,]+), (?P<path>{_STR}), \[(?P<argv>.*)\], (?:0x[0-9a-f]+|NULL)")
_PID_CHANGED = re.compile(r" <pid changed to (\d+) \.\.\.>$")
_UNFINISHED = " <unfinished ...>"
_DETACHED = " <detached ...>"
_SCALE = {n: 10 ** (9 - n) for n in range(10)}


CLONES = frozenset({"clone", "clone3", "fork", "vfork"})
EXECS = frozenset({"execve", "execveat"})


class _Pending(msgspec.Struct):
    """The first half of a call printed with ``<unfinished ...>``."""

    name: str
    args: str
    ts: int
    tid: int
    claimed: int | None = None  # a child adopted before this clone returned
    pid_changed: bool = False  # an execve by a non-leader thread


class StraceParser:
    """Turns strace output lines into :class:`~spyglass.events.Event` objects.

    ``cwd``, ``uid`` and ``gid`` are those the traced command starts with.
    ``realpath_dir(pid, abs_dir)`` resolves symlinks in the directory part of
    paths that strace did not resolve itself (default: none are resolved).
    ``hosts_file(pid, path)`` reads a hosts file a process opened and returns
    address -> name; DNS answers seen later (or earlier) take precedence.
    """

    def __init__(
        self,
        *,
        cwd: str = "/",
        uid: int = 0,
        gid: int = 0,
        realpath_dir: RealpathDir | None = None,
        hosts_file: HostsFile | None = None,
        fd_link: FdLink | None = None,
        pgid_of: PgidOf | None = None,
        protected: ident.Identities | None = None,
    ) -> None:
        self.protected = protected  # protected files by device and inode (spyglass.capture.ident)
        self._views = ProtectedViews(protected) if protected is not None else None
        self.state = TraceState(cwd, uid, gid, realpath_dir, hosts_file, fd_link, pgid_of)
        self.lines = 0
        self.unparsed = 0
        self.root_pid: int | None = None
        self.root_exited = False
        self.root_exit_code: int | None = None
        self.root_signal: str | None = None
        self._pending: dict[int, _Pending] = {}
        self._handlers: dict[str, Handler] = {**files.HANDLERS, **net.HANDLERS, **privs.HANDLERS, **access.HANDLERS}
        self._fastpaths = FastPaths(self.state)
        self.fast = True  # the fast paths (tests turn them off to compare with the general path)

    # --- public -------------------------------------------------------------

    def feed(self, line: str) -> list[Event]:
        """Events for one line of strace output (often none)."""
        self.lines += 1
        out: list[Event] = []
        try:
            if self.fast:
                fast = self._fastpaths.feed(line)
                if fast is not None:
                    if self.state.overlays and fast:
                        self.state.overlays.apply(fast)
                    if self._views is not None and fast:
                        self._views.identify(fast)
                    return fast
            if not self._feed(line.rstrip("\r\n"), out):
                self.unparsed += 1
        except Exception:  # malformed input must never stop a capture
            self.unparsed += 1
        if self.state.overlays and out:
            self.state.overlays.apply(out)
        if self._views is not None and out:
            self._views.identify(out)
        return out

    def finish(self) -> list[Event]:
        """Flush calls still unfinished (capture ended mid-call) as events with ``ok=False``."""
        out: list[Event] = []
        for tid in list(self._pending):
            self._flush(tid, out)
        return out

    def live(self) -> list[Proc]:
        """Traced processes whose exit has not been seen."""
        return [p for p in self.state.procs.values() if p.alive]

    def live_tids(self) -> list[int]:
        """Every live thread id of the traced tree."""
        return list(self.state.leader_of)

    # --- lines --------------------------------------------------------------

    def _feed(self, line: str, out: list[Event]) -> bool:
        m = _LINE.match(line)
        if m is None:
            s = line.strip()
            return not s or s.startswith("strace: ")
        tid = int(m.group(1))
        frac = m.group(3)
        ts = int(m.group(2)) * 1_000_000_000 + int(frac) * _SCALE.get(len(frac), 0)
        rest = line[m.end() :]
        first = rest[:1]
        if first == "<":
            return self._resumed(tid, ts, rest, out)
        if first == "+":
            return self._exit_line(tid, ts, rest, out)
        if first == "-":
            return rest.startswith("--- ")
        return self._call_line(tid, ts, rest, out)

    def _call_line(self, tid: int, ts: int, rest: str, out: list[Event]) -> bool:
        mc = _CALL.match(rest)
        if mc is None:
            return False
        name = mc.group(1)
        body = rest[mc.end() :]
        proc = self._proc(tid, ts, out)
        if body.endswith("...>"):
            if body.endswith(_UNFINISHED):
                self._pending[tid] = _Pending(name, body[: -len(_UNFINISHED)], ts, tid)
                return True
            pc = _PID_CHANGED.search(body)
            if pc is not None:  # exec by a thread: it continues as the leader
                self._pending[int(pc.group(1))] = _Pending(name, body[: pc.start()], ts, tid, pid_changed=True)
                return True
            if body.endswith(_DETACHED):
                self._pending[tid] = _Pending(name, body[: -len(_DETACHED)], ts, tid)
                return True
        return self._complete(tid, proc, name, body, ts, out, None)

    def _resumed(self, tid: int, ts: int, rest: str, out: list[Event]) -> bool:
        mr = _RESUMED.match(rest)
        if mr is None:
            return False
        name = mr.group(1)
        body = rest[mr.end() :]
        proc = self._proc(tid, ts, out)
        pending = self._pending.pop(tid, None)
        if pending is not None and pending.name != name:
            pending = None
        if body.startswith(_UNFINISHED + ")"):  # the thread died inside the call
            if pending is not None:
                self._unfinished(pending, out)
            return True
        args = pending.args + body if pending is not None else body
        return self._complete(tid, proc, name, args, ts, out, pending)

    def _complete(
        self, tid: int, proc: Proc, name: str, text: str, ts: int, out: list[Event], pending: _Pending | None
    ) -> bool:
        handler = self._handlers.get(name)
        if handler is None and name not in CLONES and name not in EXECS:
            return True  # a call we do not report
        mt = _RET.search(text)
        if mt is not None:
            args = text[: mt.start()]
            rs = mt.group(1)
            ret = None if rs == "?" else int(rs, 16) if rs.startswith("0x") else int(rs)
            if mt.group(2):
                ret = int(mt.group(2))
            ann = mt.group(3)
            err = mt.group(4) or (f"errno {mt.group(5)}" if mt.group(5) else None)
        else:
            idx = text.rfind(") = ")
            ml = _LOOSE_RET.match(text, idx + 4) if idx >= 0 else None
            if ml is None:
                return False
            args, ann, err = text[:idx], None, ml.group(2)
            ret = None if ml.group(1) == "?" else int(ml.group(1))
        c = Call(name, tid, proc, ts, args, ret, ann, err)
        if name in EXECS:
            self._exec(c, out, pending is not None and pending.pid_changed)
            if out and out[-1].type == "process.exec" and out[-1].ok:
                sock = privs.stdio_socket(self.state, c)
                if sock is not None:
                    out.append(sock)
        elif name in CLONES:
            self._clone(c, out, pending)
        elif handler is not None:
            ev = handler(self.state, c)
            if ev is not None:
                out.append(ev)
        return True

    # --- processes ----------------------------------------------------------

    def _proc(self, tid: int, ts: int, out: list[Event]) -> Proc:
        st = self.state
        leader = st.leader_of.get(tid)
        if leader is not None:
            return st.procs[leader]
        for p in reversed(self._pending.values()):
            if p.name in CLONES and p.claimed is None and p.tid in st.leader_of:
                p.claimed = tid
                parent = st.procs[st.leader_of[p.tid]]
                return self._adopt(parent, tid, "CLONE_THREAD" in p.args, ts, p.name, out)
        if self.root_pid is not None:
            known = live_parent(st.procs, tid)
            if known is not None:
                return self._adopt(st.procs[known[0]], tid, known[1], ts, "clone", out)
        # born before we looked: the root, or a process strace attached to
        proc = Proc(pid=tid, ppid=None, cwd=st.initial_cwd, ruid=st.uid, euid=st.uid, rgid=st.gid, egid=st.gid)
        if self.root_pid is None:
            self.root_pid = tid
        st.procs[tid] = proc
        st.leader_of[tid] = tid
        st.seen.add(tid)
        self._started(proc, ts, None, out)
        return proc

    def _adopt(self, parent: Proc, child: int, thread: bool, ts: int, syscall: str, out: list[Event]) -> Proc:
        st = self.state
        st.seen.add(child)
        if thread:
            st.leader_of[child] = parent.pid
            parent.threads.add(child)
            return parent
        proc = parent.child(child)
        st.procs[child] = proc
        if st.overlays.by_fd:
            st.overlays.forked(parent.pid, child)
        inherit_root(st, parent.pid, child)
        st.leader_of[child] = child
        self._started(proc, ts, syscall, out)
        return proc

    def _started(self, proc: Proc, ts: int, syscall: str | None, out: list[Event]) -> None:
        proc.started = True
        cwd, raw = to_text(proc.cwd, "process.working_directory", None)
        out.append(
            Event(
                type="process.start",
                ts=ts,
                pid=proc.pid,
                ppid=proc.ppid,
                syscall=syscall,
                cwd=cwd,
                uid=proc.euid,
                gid=proc.egid,
                raw_bytes=raw,
            )
        )

    def _clone(self, c: Call, out: list[Event], pending: _Pending | None) -> None:
        child = c.ret
        if not c.ok or child is None or child <= 0:
            return
        if pending is not None and pending.claimed == child:
            return  # already adopted when it showed up first
        if child in self.state.leader_of:
            return
        self._adopt(c.proc, child, "CLONE_THREAD" in c.args, c.ts, c.name, out)
        if "CLONE_UNTRACED" in c.args:
            # the tracer cannot follow this child: say so (the backend kills it)
            self.state.untraced.add(child)
            out.append(
                self.state.event(
                    c, "sys.sensitive", detail=f"CLONE_UNTRACED child {child} escapes the tracer", target_pid=child
                )
            )

    def _exec(self, c: Call, out: list[Event], pid_changed: bool) -> None:
        st = self.state
        m = _EXECVE.match(c.args) if c.name == "execve" else _EXECVEAT.match(c.args)
        if m is None:  # unusual shape: fall back to the general splitter
            off = 1 if c.name == "execveat" else 0
            dirfd = c.arg(0) if off else None
            path_tok, argv_text = c.arg(off), c.arg(off + 1)[1:-1]
        else:
            dirfd = m.groupdict().get("dirfd")
            path_tok, argv_text = m.group("path"), m.group("argv")
        raw = unquote(path_tok)
        ok = pid_changed or c.ok
        via_fd = descriptor_path(raw, dirfd)
        exe = (fd_named(st, c, raw, dirfd, ok) if via_fd else None) or st.resolve(c, raw, dirfd)
        argv = [unquote(x) for x in _STRING.findall(argv_text)]
        # run through a descriptor: the path as typed stays (evasion-memfd-exec names it), whatever
        # the descriptor was taken to be
        typed: str | None = via_fd
        if via_fd is None and ok and st.realpath_dir is not None and not exe.startswith("/proc/"):
            # the kernel runs the file a symlink points at (a venv's python is a link to the
            # interpreter): that file is the executable; the path as resolved lexically stays in raw_path
            real = st.realpath_dir(c.proc.pid, exe)
            if real and real != exe:
                typed, exe = exe, real
        proc = c.proc
        if ok:
            proc.argv, proc.exe = argv, exe
            for t in proc.threads:  # exec ends every other thread
                st.leader_of.pop(t, None)
                self._pending.pop(t, None)
            proc.threads.clear()
        rb: dict[str, str] | None = None
        exe_text, rb = to_text(exe, "process.executable.path", rb)
        typed_text: str | None = None
        if typed is not None:
            typed_text, rb = to_text(typed, "file.raw_path", rb)
        cwd_text, rb = to_text(proc.cwd, "process.working_directory", rb)
        args_text: list[str] = []
        for i, arg in enumerate(argv):
            text, rb = to_text(arg, f"process.command_args[{i}]", rb)
            args_text.append(text)
        out.append(
            Event(
                type="process.exec",
                ts=c.ts,
                pid=proc.pid,
                tid=c.tid if c.tid != proc.pid else None,
                syscall=c.name,
                ok=ok,
                errno=None if ok else c.err,
                exe=exe_text,
                raw_path=typed_text,
                argv=args_text,
                cwd=cwd_text,
                uid=proc.euid,
                ruid=proc.ruid,
                gid=proc.egid,
                rgid=proc.rgid,
                raw_bytes=rb,
            )
        )

    def _exit_line(self, tid: int, ts: int, rest: str, out: list[Event]) -> bool:
        me = _EXIT.match(rest)
        if me is None:
            return False
        st = self.state
        if me.group(4):  # "superseded by execve in pid T": thread T now runs as this leader
            old = int(me.group(4))
            if old != tid:
                st.leader_of.pop(old, None)
                proc = st.procs.get(tid)
                if proc is not None:
                    proc.threads.discard(old)
            return True
        leader = st.leader_of.get(tid)
        if leader is None:
            return True  # a thread we never saw, or already gone
        proc = st.procs[leader]
        if tid != leader:  # a thread ended; the process goes on
            self._flush(tid, out)
            st.leader_of.pop(tid, None)
            proc.threads.discard(tid)
            return True
        for t in (tid, *proc.threads):
            self._flush(t, out)
            st.leader_of.pop(t, None)
        proc.threads.clear()
        proc.alive = False
        if st.procs.get(leader) is proc:  # exited processes are forgotten (pids get reused)
            del st.procs[leader]
        code = int(me.group(1)) if me.group(1) is not None else None
        sig = me.group(2)
        out.append(
            Event(
                type="process.exit",
                ts=ts,
                pid=leader,
                syscall="exit_group" if code is not None else None,
                exit_code=code,
                signal=sig,
                detail="core dumped" if me.group(3) else None,
            )
        )
        if leader == self.root_pid:
            self.root_exited = True
            self.root_exit_code, self.root_signal = code, sig
        return True

    # --- calls that never completed --------------------------------------------

    def _flush(self, tid: int, out: list[Event]) -> None:
        pending = self._pending.pop(tid, None)
        if pending is not None:
            self._unfinished(pending, out)

    def _unfinished(self, p: _Pending, out: list[Event]) -> None:
        """A call cut short (process died, or capture detached): reported with ``ok=False``."""
        handler = self._handlers.get(p.name)
        leader = self.state.leader_of.get(p.tid)
        if handler is None or leader is None:
            return
        c = Call(p.name, p.tid, self.state.procs[leader], p.ts, p.args, None, None, None)
        try:
            ev = handler(self.state, c)
        except Exception:
            return
        if ev is not None:
            ev.ok = False
            ev.detail = ev.detail or "unfinished"
            out.append(ev)
