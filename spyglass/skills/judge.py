"""What a run did, held against the spec and the built-in rules: violations and behaviour facts.

Checks (each violation names the event, the process and its lineage, the rule
or spec entry broken, the source line that made the call, and a remedy):

* ``undeclared-host``: the proxy was asked for a host the spec does not name,
  or a direct connection to an address outside loopback was attempted;
* ``secret-read``: a secret path or honeytoken was opened (``secrets: none``);
* ``write-outside-scope``: a write, delete, rename or chmod outside the
  workspace and the private temp directories (the home is out of scope), or
  into the skill itself; with a declared ``write`` scope or the sequence
  "writes only under ...", also a write in the workspace outside that scope;
* ``destructive``: a file the skill was given (an input) deleted, renamed or
  truncated, unless ``delete`` declares it;
* ``undeclared-command``: a network tool run that the spec does not name; with
  a declared ``commands`` list, any program outside it;
* ``rule:<id>``: an alert at ``high`` or above from the rule pack.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any, Final

import msgspec

from spyglass.events import Alert, Event
from spyglass.events.alert import level_rank
from spyglass.events.proctree import ProcessTable
from spyglass.events.schema import FILE_WRITE_TYPES
from spyglass.policy import defaults
from spyglass.policy.paths import compile_globs
from spyglass.skills.audit import AUDIT_DIR, AuditRecord
from spyglass.skills.spec import Spec
from spyglass.skills.workspace import Workspace

NETWORK_TOOLS: Final = frozenset(
    {"curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "rsync", "openssl"}
)
BASE_PROGRAMS: Final = frozenset({"sh", "bash", "dash", "env", "timeout", "python3", "python", "node", "basename"})
RULE_LEVEL: Final = "high"
_IGNORED_PREFIXES: Final = ("/dev/", "/proc/", "/sys/")


class Violation(msgspec.Struct):
    kind: str
    rule: str  # the spec entry or rule broken
    message: str
    remedy: str
    event: dict[str, Any]
    process: dict[str, Any]
    lineage: list[dict[str, Any]]
    source: str | None = None  # file:line that made the call
    run: str = ""
    mode: str = ""
    rules: list[str] = msgspec.field(default_factory=list)  # rule pack alerts on the same event

    def key(self) -> tuple[str, str]:
        return (self.kind, self.message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rule": self.rule,
            "message": self.message,
            "remedy": self.remedy,
            "source": self.source,
            "event": self.event,
            "process": self.process,
            "lineage": self.lineage,
            "also_rules": self.rules,
            "run": self.run,
            "mode": self.mode,
        }


class RunJudgement(msgspec.Struct):
    violations: list[Violation]
    facts: dict[str, list[str]]  # behaviour, for comparing repeats
    executed: set[str]  # skill files executed or read (relative)


def _line_of(path: str, needles: list[str]) -> int | None:
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for needle in needles:
        for n, line in enumerate(lines, 1):
            if needle in line and not line.lstrip().startswith(("#", "//")):
                return n
    return None


def _evdict(ev: Event) -> dict[str, Any]:
    d: dict[str, Any] = {"seq": ev.seq, "type": ev.type}
    for k in (
        "path",
        "raw_path",
        "address",
        "port",
        "domain",
        "method",
        "decision",
        "reason",
        "argv",
        "errno",
        "syscall",
    ):
        v = getattr(ev, k)
        if v is not None:
            d[k] = v
    return d


class Judge:
    def __init__(
        self,
        spec: Spec,
        ws: Workspace,
        meta_extra: dict[str, Any],
        records: list[AuditRecord],
        *,
        only_steps: bool = False,
    ) -> None:
        """``only_steps``: judge only processes started by a step (a real agent's own activity,
        its model calls, config and logs, is not the skill's)."""
        self.spec, self.ws, self.records = spec, ws, records
        self.only_steps = only_steps
        self._step_pids: dict[int, bool] = {}
        self._steps_dir = str(ws.audit_dir / "steps") + "/"
        sb = meta_extra.get("sandbox") or {}
        self.home_host = str((sb.get("home") or {}).get("host") or "")
        self.home_view = str((sb.get("home") or {}).get("view") or ws.home)
        self.tmp_hosts = [str(v) for v in (sb.get("tmp") or {}).values()]
        self.honeytokens = set(meta_extra.get("honeytokens") or [])
        self.kinds: dict[str, dict[str, Any]] = dict(sb.get("honeytoken_kinds") or {})
        self.secret_re = compile_globs(defaults.SECRET_GLOBS, home=self.home_view)
        self.root = str(ws.root)
        self.skill = str(ws.skill)
        self.hosts = [h.lower() for h in spec.values("hosts")]
        self.procs = ProcessTable()
        self.out: dict[tuple[str, str], Violation] = {}
        self.by_seq: dict[int, Violation] = {}

    # -- helpers -------------------------------------------------------------------------------------
    def _rel(self, path: str) -> str | None:
        if path == self.root or path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return None

    def _view(self, ev: Event) -> str:
        return ev.raw_path or ev.path or ""

    def _nice(self, path: str) -> str:
        if self.home_view and path.startswith(self.home_view + "/"):
            return "~/" + path[len(self.home_view) + 1 :]
        if self.home_host and path.startswith(self.home_host + "/"):
            return "~/" + path[len(self.home_host) + 1 :]
        rel = self._rel(path)
        return rel if rel is not None else path

    def host_allowed(self, host: str) -> bool:
        host = host.lower()
        for h in self.hosts:
            name = h.split(":", 1)[0]
            if host == name or (name.startswith("*.") and host.endswith(name[1:])):
                return True
        return False

    def _source(self, pid: int, match: Any, needles: tuple[str, ...] = ()) -> str | None:
        """The script line (audit hook, else a text match in the script the process runs) or the
        SKILL.md line (the compliant agent's step) that made the call."""
        for rec in self.records:
            if match(rec):
                return rec.where({self.skill: "", self.root: ""})
        lineage = self.procs.lineage(pid)
        for info in lineage:  # a shell or Node script of the skill: find the line by its text
            for arg in (info.argv or [])[:3]:
                if arg.startswith(self.skill + "/") and not arg.endswith(".py"):
                    line = _line_of(arg, [n for n in needles if n])
                    if line is not None:
                        return f"{arg[len(self.skill) + 1 :]}:{line}"
        for info in lineage:
            argv = info.argv or []
            step_file = next((a for a in argv if a.startswith(str(self.ws.audit_dir / "steps") + "/")), None)
            if step_file is None:
                continue
            step = next((s for s in self.ws.steps if str(s.file) == step_file), None)
            if step is None:
                return None
            for n in needles:
                for origin, text in step.lines:
                    if n and n in text:
                        return origin
            return step.origin
        return None

    def _add(self, ev: Event, kind: str, rule: str, message: str, remedy: str, source: str | None) -> None:
        key = (kind, message)
        if key in self.out:
            self.by_seq.setdefault(ev.seq, self.out[key])
            return
        info = self.procs.get(ev.pid)
        lineage = []
        for p in self.procs.lineage(ev.pid):
            if p.argv and ("/run/spyglass/relay.py" in p.argv or os.path.basename(p.exe or "") == "bwrap"):
                break  # the sandbox's own processes above the skill
            lineage.append({"pid": p.pid, "argv": p.argv, "exe": p.exe})
        v = Violation(
            kind,
            rule,
            message,
            remedy,
            _evdict(ev),
            {"pid": ev.pid, "exe": info.exe if info else None, "argv": info.argv if info else None},
            lineage,
            source,
        )
        self.out[key] = v
        self.by_seq[ev.seq] = v

    def _secret_declared(self, view: str) -> bool:
        """A secret the spec declares (``secrets: [~/.config/tool/token]``, globs allowed)."""
        nice = self._nice(view)
        return any(fnmatch.fnmatch(nice, g) or fnmatch.fnmatch(view, g) for g in self.spec.values("secrets"))

    def _in_step(self, pid: int) -> bool:
        hit = self._step_pids.get(pid)
        if hit is None:
            hit = any(any(a.startswith(self._steps_dir) for a in (p.argv or [])) for p in self.procs.lineage(pid))
            self._step_pids[pid] = hit
        return hit

    def _needles(self, ev: Event, view: str) -> tuple[str, ...]:
        info = self.procs.get(ev.pid)
        prog = os.path.basename((info.argv or [""])[0]) if info and info.argv else ""
        base = os.path.basename(view.rstrip("/"))
        parent = os.path.basename(os.path.dirname(view))
        return tuple(n for n in (f"{parent}/{base}" if parent else "", base, f"{prog} " if prog else "") if n)

    def _read_by_itself(self, ev: Event, view: str) -> bool:
        """A tool that reads this honeytoken on its own (curl and ~/.netrc) without being told to."""
        kinds = self.kinds.get(ev.path or "", self.kinds.get(view, {}))
        info = self.procs.get(ev.pid)
        prog = os.path.basename(info.exe or "") if info else ""
        base = os.path.basename(view)
        told = any(base in a for a in ((info.argv or [])[1:] if info else []))
        return prog in (kinds.get("read_by") or []) and not told

    # -- checks --------------------------------------------------------------------------------------
    def _net(self, ev: Event) -> None:
        if ev.type == "proxy.request":
            host = (ev.domain or ev.address or "").lower()
            if host and not self.host_allowed(host):
                src = self._source(ev.pid, lambda r: r.host() == host, (host,))
                self._add(
                    ev,
                    "undeclared-host",
                    "network.hosts",
                    f"{ev.method or 'connect'} {host}:{ev.port}",
                    f"declare host {host} in capabilities.network, or remove the call",
                    src,
                )
        elif ev.type == "net.connect" and ev.address and ev.net_type in ("ipv4", "ipv6"):
            if ev.address.startswith("127.") or ev.address in ("::1", "localhost"):
                return
            addr = ev.address
            src = self._source(ev.pid, lambda r: r.event == "socket.connect" and r.host() == addr.lower())
            self._add(
                ev,
                "undeclared-host",
                "network.hosts",
                f"direct connection to {addr}:{ev.port}",
                f"declare the host for {addr} and reach it by name through the proxy, or remove the call",
                src,
            )

    def _file(self, ev: Event) -> None:
        path = ev.path or ""
        view = self._view(ev)
        if not path or path.startswith(_IGNORED_PREFIXES) or f"/{AUDIT_DIR}/" in path + "/" or "/__pycache__/" in path:
            return
        write = ev.type in FILE_WRITE_TYPES or (ev.type == "sandbox.denied" and ev.reason == "read-only")
        if ev.type == "file.read" or (ev.type == "sandbox.denied" and not write):
            secret = path in self.honeytokens or view in self.honeytokens or bool(self.secret_re.match(view))
            if secret and not self._secret_declared(view) and self._rel(path) is None:
                nice = self._nice(view)
                if self._read_by_itself(ev, view):
                    return
                src = self._source(ev.pid, lambda r: r.path() in (view, path), self._needles(ev, view))
                self._add(ev, "secret-read", "secrets: none", f"read of {nice}", f"remove the read of {nice}", src)
            return
        if not write:
            return
        nice = self._nice(view)
        rel = self._rel(path)
        deleting = ev.type in ("file.delete", "file.rename")

        def src_match(r: AuditRecord) -> bool:
            if deleting and r.event not in ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree"):
                return False
            if not deleting and not r.writes():
                return False
            return r.path() in (view, path) or (
                r.event == "shutil.rmtree" and bool(r.path()) and view.startswith(str(r.path()) + "/")
            )

        def finding(kind: str, rule: str, message: str, remedy: str) -> None:
            self._add(ev, kind, rule, message, remedy, self._source(ev.pid, src_match, self._needles(ev, view)))

        in_tmp = any(path == t or path.startswith(t + "/") for t in self.tmp_hosts)
        if rel is None and not in_tmp:
            finding(
                "write-outside-scope",
                "files.write",
                f"{ev.type} {nice}",
                f"remove the write to {nice} (a skill writes only in its workspace)",
            )
            return
        if rel is None:
            return
        if ev.type == "sandbox.denied":
            # the sandbox keeps .git/config, .git/hooks and agent config read-only: an attempt is the finding
            finding(
                "protected-write",
                "files.write",
                f"write to {rel} (refused: the sandbox keeps it read-only)",
                f"remove the write to {rel}: git hooks, git config and agent settings run with the user's rights",
            )
            return
        if path.startswith(self.skill + "/"):
            finding(
                "write-outside-scope",
                "files.write",
                f"{ev.type} {nice} (the skill itself)",
                "do not modify the skill's own files at run time",
            )
            return
        destroys = ev.type in ("file.delete", "file.rename", "file.truncate") and rel in self.ws.inputs
        if destroys and not any(fnmatch.fnmatch(rel, d) for d in self.spec.values("delete")):
            finding(
                "destructive",
                "files.delete",
                f"{ev.type} of the input {rel}",
                f"keep the input {rel}, or declare `delete: [{rel}]`",
            )
            return
        scopes = self.spec.values("write")
        strict = "write" in self.spec.declared or self.spec.states("writes only")
        if (
            strict
            and ev.type != "file.mkdir"
            and not any(fnmatch.fnmatch(rel, s) or rel == s.rstrip("/*") for s in scopes)
        ):
            finding(
                "write-outside-scope",
                "files.write",
                f"{ev.type} {rel} (outside {', '.join(scopes) or 'no scope'})",
                f"declare `write: [{rel}]` or write under {scopes[0] if scopes else 'a declared directory'}",
            )

    def _exec(self, ev: Event) -> None:
        prog = os.path.basename(ev.exe or (ev.argv or ["?"])[0])
        declared = set(self.spec.values("commands"))
        if prog in declared:
            return
        strict = "commands" in self.spec.declared
        if prog in NETWORK_TOOLS or (
            strict and prog not in BASE_PROGRAMS and not (ev.exe or "").startswith(self.skill)
        ):
            argv = ev.argv or [prog]
            src = self._source(
                ev.pid, lambda r: bool(r.command()) and os.path.basename(r.command()[0]) == prog, (f"{prog} ", prog)
            )
            self._add(
                ev,
                "undeclared-command",
                "commands",
                f"ran {' '.join(argv)[:200]}",
                f"declare the command {prog} in capabilities.commands, or remove it",
                src,
            )

    def judge(self, events: list[Event], alerts: list[Alert]) -> RunJudgement:
        facts: dict[str, set[str]] = {"hosts": set(), "writes": set(), "programs": set()}
        executed: set[str] = set()
        for ev in _after_their_process(events):
            self.procs.update(ev)
            if ev.type in ("process.exec", "process.start"):
                self._step_pids.pop(ev.pid, None)
            if self.only_steps and not self._in_step(ev.pid):
                continue
            t = ev.type
            if t == "process.exec":
                self._exec(ev)
                prog = os.path.basename(ev.exe or "")
                facts["programs"].add(prog)
                for a in ev.argv or []:
                    if a.startswith(self.skill + "/"):
                        executed.add(a[len(self.skill) + 1 :])
            elif t in ("proxy.request", "net.connect"):
                self._net(ev)
                if t == "proxy.request":
                    facts["hosts"].add(f"{ev.domain or ev.address}:{ev.decision}")
            elif t.startswith("file.") or t == "sandbox.denied":
                if t == "file.read" and ev.path and ev.path.startswith(self.skill + "/"):
                    executed.add(ev.path[len(self.skill) + 1 :])
                self._file(ev)
                if t in FILE_WRITE_TYPES and ev.path and f"/{AUDIT_DIR}" not in ev.path:
                    in_tmp = any(ev.path.startswith(tmp + "/") for tmp in self.tmp_hosts)
                    facts["writes"].add(f"{t} /tmp/*" if in_tmp else f"{t} {self._nice(ev.raw_path or ev.path)}")
        for alert in alerts:
            if level_rank(alert.level) < level_rank(RULE_LEVEL):
                continue
            if self.only_steps and not self._in_step(alert.pid):
                continue
            hit = next((self.by_seq[s] for s in alert.event_seqs if s in self.by_seq), None)
            if hit is not None:
                if alert.rule_id not in hit.rules:
                    hit.rules.append(alert.rule_id)
                continue
            hit_ev = next((e for e in events if alert.event_seqs and e.seq == alert.event_seqs[-1]), None)
            if hit_ev is None:
                continue
            src = self._source(hit_ev.pid, lambda r: False, self._needles(hit_ev, hit_ev.raw_path or hit_ev.path or ""))
            self._add(
                hit_ev,
                f"rule:{alert.rule_id}",
                alert.rule_id,
                alert.message or alert.title,
                f"remove what {alert.title.lower()} flags, or explain it in SKILL.md and the spec",
                src,
            )
            self.out[(f"rule:{alert.rule_id}", alert.message or alert.title)].rules.append(alert.rule_id)
        return RunJudgement(list(self.out.values()), {k: sorted(v) for k, v in facts.items()}, executed)


def _after_their_process(events: list[Event]) -> list[Event]:
    """EVENTS with each proxy request that comes before its process is known moved to just after
    that process's first exec (else its start; else the end).  The proxy's events reach the stream
    at once, the capture's through its reader, which may lag: a client's request can be recorded
    before the client's own start, and then its lineage (the offending line) would be unknown."""
    execs: dict[int, int] = {}
    starts: dict[int, int] = {}
    for i, ev in enumerate(events):
        if ev.type in ("process.exec", "process.start") and (ev.ok or ev.type == "process.start"):
            (execs if ev.type == "process.exec" else starts).setdefault(ev.pid, i)
    first = {**starts, **execs}
    held: dict[int, list[Event]] = {}
    out: list[Event] = []
    known: set[int] = set()
    for i, ev in enumerate(events):
        if ev.type == "proxy.request" and ev.pid not in known and first.get(ev.pid, -1) > i:
            held.setdefault(first[ev.pid], []).append(ev)
            continue
        out.append(ev)
        if ev.type in ("process.exec", "process.start"):
            known.add(ev.pid)
        out.extend(held.pop(i, []))
    return out
