"""A stored run that looks like the bundled demo, built from hand-made events.

Used by the report tests where the live demo cannot run, by the report
benchmark (``scale`` repeats the agent's work to reach any number of events)
and by scripts/screenshot.py.  Mirrors what ``spyglass demo`` records: the
agent reads its skill, runs the skill's script (which reads a decoy
~/.ssh/id_rsa and fires an alert), writes and renames files, leaves a helper
running, resolves localhost and talks to a loopback server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spyglass.events import Alert, Event, LineageEntry
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunWriter, Store, new_run_id

PY = "/usr/bin/python3.11"
T0 = 1_767_225_600_000_000_000  # 2026-01-01 00:00:00 UTC
LOADER = [
    "/etc/ld.so.cache",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libm.so.6",
    "/usr/lib/x86_64-linux-gnu/libz.so.1",
    "/usr/lib/locale/locale-archive",
]


class _Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self, ms: float = 1.0) -> int:
        self.t += int(ms * 1e6)
        return self.t


def _agent_events(root: Path, scale: int) -> Iterator[Event]:
    ws, home, skill = root / "workspace", root / "home", root / "skills" / "report-writer"
    clock = _Clock()
    agent = [PY, str(root / "agent.py")]
    script = [PY, str(skill / "scripts" / "make_report.py"), "data.csv"]
    yield Event(type="process.start", pid=1000, ts=clock(0), cwd=str(ws))
    yield Event(
        type="process.exec", pid=1000, ts=clock(), exe=PY, argv=agent, cwd=str(ws), uid=1000, gid=1000
    )
    for p in LOADER:
        yield Event(type="file.read", pid=1000, ts=clock(0.1), path=p)
    yield Event(type="file.read", pid=1000, ts=clock(), path=str(root / "agent.py"))
    yield Event(type="process.start", pid=1001, ppid=1000, ts=clock(2))
    yield Event(
        type="process.exec", pid=1001, ts=clock(), exe="/usr/bin/uname", argv=["uname", "-p"], cwd=str(ws)
    )
    yield Event(type="file.read", pid=1001, ts=clock(0.1), path="/etc/ld.so.cache")
    yield Event(type="process.exit", pid=1001, ts=clock(), exit_code=0)
    yield Event(type="file.read", pid=1000, ts=clock(5), path=str(skill / "SKILL.md"))
    for n in range(scale):
        base = 1100 + n * 10
        yield Event(type="process.start", pid=base, ppid=1000, ts=clock(10))
        yield Event(type="process.exec", pid=base, ts=clock(), exe=PY, argv=script, cwd=str(ws))
        for p in LOADER:
            yield Event(type="file.read", pid=base, ts=clock(0.1), path=p)
        for mod in ("csv", "os", "pathlib", "json", "re"):
            yield Event(
                type="file.read",
                pid=base,
                ts=clock(0.1),
                path=f"/usr/lib/python3.11/{mod}.py",
                ok=False,
                errno="ENOENT",
            )
            yield Event(
                type="file.read", pid=base, ts=clock(0.1), path=f"/usr/lib/python3.11/__pycache__/{mod}.pyc"
            )
        yield Event(type="file.read", pid=base, ts=clock(), path=str(skill / "scripts" / "make_report.py"))
        yield Event(type="file.read", pid=base, ts=clock(), path=str(ws / "data.csv"))
        yield Event(type="file.read", pid=base, ts=clock(3), path=str(home / ".ssh" / "id_rsa"))
        tmp = "report.tmp" if n == 0 else f"report-{n}.tmp"
        yield Event(
            type="file.create", pid=base, ts=clock(), path=str(ws / tmp), flags="O_WRONLY|O_CREAT|O_TRUNC"
        )
        yield Event(
            type="file.rename", pid=base, ts=clock(), path=str(ws / tmp), target=str(ws / "report.md")
        )
        yield Event(type="process.exit", pid=base, ts=clock(), exit_code=0)
    yield Event(
        type="file.create", pid=1000, ts=clock(4), path=str(ws / "notes.draft"), flags="O_WRONLY|O_CREAT"
    )
    yield Event(
        type="file.rename", pid=1000, ts=clock(), path=str(ws / "notes.draft"), target=str(ws / "notes.txt")
    )
    yield Event(type="process.start", pid=1002, ppid=1000, ts=clock(2))
    yield Event(type="process.start", pid=1003, ppid=1002, ts=clock(1))
    yield Event(type="process.exit", pid=1002, ts=clock(1), exit_code=0)
    yield Event(type="file.read", pid=1000, ts=clock(2), path="/etc/hosts")
    yield Event(type="net.dns", pid=1000, ts=clock(1), dns_name="localhost", dns_answers=["127.0.0.1"])
    for path in ("/status", "/upload"):
        yield Event(
            type="net.connect",
            pid=1000,
            ts=clock(3),
            address="127.0.0.1",
            port=41234,
            domain="localhost",
            transport="tcp",
            net_type="ipv4",
            syscall="connect",
        )
        yield Event(
            type="net.send",
            pid=1000,
            ts=clock(1),
            address="127.0.0.1",
            port=41234,
            domain="localhost",
            transport="tcp",
            nbytes=120 if path == "/status" else 180,
        )
    yield Event(type="file.read", pid=1000, ts=clock(), path=str(ws / "report.md"))
    yield Event(type="process.exit", pid=1000, ts=clock(5), exit_code=0)
    yield Event(type="file.create", pid=1003, ts=clock(500), path=str(ws / "helper-heartbeat.txt"))
    yield Event(type="process.exit", pid=1003, ts=clock(1), exit_code=0)


def _lay_out(root: Path) -> None:
    """The demo's skill and workspace files, so that coverage and paths are real."""
    import shutil

    from spyglass.demo import DEMO_DIR

    if not (root / "skills" / "report-writer").is_dir():
        shutil.copytree(DEMO_DIR / "skills", root / "skills", dirs_exist_ok=True)
    (root / "workspace").mkdir(parents=True, exist_ok=True)
    (root / "home" / ".ssh").mkdir(parents=True, exist_ok=True)


def build_sample_run(
    store: Store, root: Path | str = "/tmp/spyglass-demo-sample", *, scale: int = 1, task: str = "demo"
) -> str:
    """Record the sample run into ``store``; returns its id.  ``scale`` repeats the skill script."""
    root = Path(root)
    _lay_out(root)
    meta = RunMeta(
        id=new_run_id(),
        task=task,
        agent_id="spyglass-demo",
        command=[PY, str(root / "agent.py")],
        cwd=str(root / "workspace"),
        workspace=[str(root / "workspace")],
        skills=[str(root / "skills" / "report-writer")],
        backend="strace",
        mode="observe",
        started=T0,
        host="demo-host",
        spyglass_version="0.1.0",
    )
    meta.extra["home"] = str(root / "home")
    writer = RunWriter(store, meta)
    ctx = RunContext(run_id=meta.id, root_cwd=meta.cwd, workspace=meta.workspace, run=meta)
    pipe = Pipeline([writer], ctx)
    fired = False
    last_ts = T0
    for ev in _agent_events(root, scale):
        pipe.feed(ev)
        last_ts = ev.ts
        if not fired and ev.path and ev.path.endswith("/.ssh/id_rsa"):
            fired = True
            lineage = [
                LineageEntry(pid=p.pid, exe=p.exe, argv=p.argv, cwd=p.cwd)
                for p in reversed(ctx.procs.lineage(ev.pid))
            ]
            info = ctx.procs.get(ev.pid)
            ctx.raise_alert(
                Alert(
                    ts=ev.ts,
                    rule_id="secret-file-read",
                    title="A private key or credential file was read",
                    level="high",
                    message=f"read {ev.path}",
                    event_seqs=[ev.seq],
                    pid=ev.pid,
                    exe=info.exe if info else None,
                    argv=info.argv if info else None,
                    cwd=info.cwd if info else None,
                    lineage=lineage,
                    tags=["attack.credential_access", "attack.t1552.004"],
                )
            )
        if ev.type == "process.exit" and ev.pid == 1000:
            ctx.raise_alert(
                Alert(
                    ts=ev.ts,
                    rule_id="process-outlived-agent",
                    title="A process outlived the agent",
                    level="low",
                    message="pid 1003 was still running when the agent exited",
                    event_seqs=[ev.seq],
                    pid=1003,
                    lineage=[
                        LineageEntry(pid=p.pid, exe=p.exe, argv=p.argv)
                        for p in reversed(ctx.procs.lineage(1003))
                    ],
                )
            )
    meta.ended = last_ts
    writer.finish("complete", exit_code=0)
    return meta.id
