"""spyglass itself killed (SIGKILL) while the agent runs: the agent's tree must not run on unwatched.

The agent leaves a double-forked daemon in a session of its own (``progs/daemonize.py``), then
keeps working; the test kills spyglass.  Under strace the watchdog (capture/strace/watchdog.py)
keeps strace tracing, kills every traced process and leaves the note; under eBPF the eBPF
watchdog does the same from its map.  With ``--sandbox`` bubblewrap's ``--die-with-parent`` ends
the sandbox as well.  Either way every process of the tree is gone and the run reads as
``monitor-lost`` (verify: exit 4, INCOMPLETE).

The benign twin: a run that ends normally leaves its daemon running (observe mode's
``descendants: detach``, docs/design.md "The run ends with its tree"), and the watchdog, told the
run is over, exits without touching it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spyglass.store import RunReader, Store, default_store_path

PROG = Path(__file__).resolve().parent / "progs" / "daemonize.py"
PY = os.path.realpath(sys.executable)
Start = Callable[[list[str]], "subprocess.Popen[bytes]"]  # the start_until_ready fixture (conftest.py)

pytestmark = pytest.mark.timeout(240)


def _named(prefix: str) -> dict[int, str]:
    """Live processes whose name starts with ``prefix`` (zombies are dead)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index(b"(") + 1 : stat.rfind(b")")].decode(errors="replace")
        if comm.startswith(prefix) and stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X"):
            out[int(entry)] = comm
    return out


def _until(check: Callable[[], bool], timeout: float = 60.0) -> bool:
    """``check()`` came true within ``timeout`` seconds (a bound, not a measure)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return False


def _final_note(store: Path) -> bool:
    for note in store.glob("runs/*/monitor-lost.json"):
        try:
            return bool(json.loads(note.read_text()).get("final"))
        except ValueError:
            return False
    return False


def _spy(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spyglass", *args, "--store", str(store), "latest"],
                          capture_output=True, text=True, timeout=120, check=False)


def _run_agent(cwd: Path, store: Path, backend: str, script: str) -> subprocess.CompletedProcess[bytes]:
    """``spyglass run`` of a Python agent ``script`` in ``cwd``, in a session of its own, output dropped."""
    return subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", backend, "--store", str(store), "--", PY, "-c", script],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180, check=False,
        start_new_session=True,
    )  # fmt: skip


def _cleanup(tag: str) -> None:
    for pid in _named(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.parametrize("sandbox", [False, True], ids=["plain", "sandbox"])
def test_spyglass_killed_mid_run_leaves_no_process_of_the_run(
    tmp_path: Path, capture_backend: str, sandbox: bool, start_until_ready: Start
) -> None:
    if sandbox and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    tag, store = f"k{secrets.token_hex(3)}", tmp_path / "store"
    argv = [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store),
            *(["--sandbox"] if sandbox else []), "--", PY, str(PROG), tag, "stay"]
    try:
        proc = start_until_ready(argv)
        assert sorted(_named(tag).values()) == [f"{tag}-a", f"{tag}-d"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _until(lambda: not _named(tag)), f"left running after spyglass died: {_named(tag)}"
        assert _until(lambda: _final_note(store)), "no note from the watchdog"
        show = _spy(store, "show")
        assert show.returncode == 0 and "monitor-lost" in show.stdout, show.stdout + show.stderr
        verify = _spy(store, "verify")
        assert verify.returncode == 4 and "INCOMPLETE" in verify.stdout, verify.stdout + verify.stderr
    finally:
        _cleanup(tag)


def test_benign_twin_a_daemon_left_by_a_finished_run_keeps_running(tmp_path: Path, capture_backend: str) -> None:
    tag, store = f"b{secrets.token_hex(3)}", tmp_path / "store"
    try:
        res = subprocess.run(
            [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store), "--",
             PY, str(PROG), tag, "leave"],
            cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False, start_new_session=True,
        )  # fmt: skip
        assert res.returncode >= 0, res.stderr
        s = Store(store)
        s.repair()
        meta = RunReader(s, s.resolve("latest")).meta
        assert meta.status == "complete", meta.status
        notes = meta.capture["notes"]
        assert any(n.startswith(("detached from 1 process", "stopped following 1 process")) for n in notes), notes
        helpers = meta.extra["monitor_pids"]  # strace or spyglass, and the watchdog
        assert len(helpers) >= 2, helpers
        assert _until(lambda: not any(_alive(p) for p in helpers)), "the monitor's helpers outlived the run"
        assert list(_named(tag).values()) == [f"{tag}-d"], "the daemon was killed though the run ended normally"
        assert not list(store.glob("runs/*/monitor-lost.json"))
    finally:
        _cleanup(tag)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


#: the agent kills its parent (spyglass, not strace) with SIGKILL, then keeps working (bounded)
KILL_PARENT = (
    "import os, time; open('agent.pid', 'w').write(str(os.getpid())); os.kill(os.getppid(), 9)\n"
    "for _ in range(600): time.sleep(0.1); os.close(os.open('/dev/null', os.O_RDONLY))"
)
#: the agent kills spyglass's watchdog (its parent's child that is neither itself nor strace), then exits
KILL_WATCHDOG = r"""
import os, signal, time
me, spy = os.getpid(), os.getppid()
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == me:
        continue
    try:
        stat = open(f"/proc/{entry}/stat", "rb").read()
        cmd = open(f"/proc/{entry}/cmdline", "rb").read()
    except OSError:
        continue
    helper = any(a.endswith(b"/watchdog.py") for a in cmd.split(b"\0"))
    if int(stat[stat.rfind(b")") + 2 :].split()[1]) == spy and helper:
        os.kill(int(entry), signal.SIGKILL)
time.sleep(1.5)
"""


def _names_the_kill(lost: dict[str, Any], pid: int, backend: str) -> None:
    """The watchdog's note names the SIGKILL and its sender: always under eBPF (the kernel's record of
    the call waits in the ring); under strace only when the watchdog read strace's line of the call.
    strace can write the first part of a line (the call, before its result) and spyglass can read it
    before the kill takes it: the rest, `) = 0`, names no one.  A clean-clone CI run saw that once in
    this test, and repeated first-step kills saw it several times (docs/threat-model.md)."""
    signals = [(x["detail"], x["process.pid"]) for x in lost["signals"]]
    if backend == "strace" and not signals:
        assert lost["detail"].startswith(f"monitor-lost: spyglass (pid {lost['monitor_pid']}) died"), lost
        return
    assert signals == [("SIGKILL", pid)] and f"from pid {pid}" in lost["detail"], lost


def _killed_with_a_note(store: Path, pid: int, backend: str) -> None:
    """The agent ``pid``, which killed spyglass, was killed by the watchdog, whose final note names the
    kill; the run reads ``monitor-lost``."""
    try:
        assert _until(lambda: not _alive(pid)), "the agent was left running after it killed spyglass"
        assert _until(lambda: _final_note(store)), f"no note from the watchdog in {store}"
        s = Store(store)
        s.repair()
        meta = RunReader(s, s.resolve("latest")).meta
        assert meta.status == "monitor-lost", meta.status
        lost = meta.extra["monitor_lost"]
        assert pid in lost["killed"], lost
        _names_the_kill(lost, pid, backend)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_the_agent_killing_spyglass_is_named_in_the_note_and_dies(tmp_path: Path, capture_backend: str) -> None:
    store = tmp_path / "store"
    res = _run_agent(tmp_path, store, capture_backend, KILL_PARENT)
    assert res.returncode == -9
    _killed_with_a_note(store, int((tmp_path / "agent.pid").read_text()), capture_backend)


#: the agent kills spyglass at its first step (a shell builtin, no interpreter to start first), then
#: becomes a long sleep with the same pid
KILL_AT_ONCE = "echo $$ > agent.pid; kill -KILL $PPID; exec sleep 120"


def _default_layout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A workspace and a HOME of its own, no --store: the run goes where a user's would."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPYGLASS_")}
    return ws, dict(env, HOME=str(tmp_path / "home"))


def test_the_agent_killing_spyglass_at_its_first_step_finds_a_watchdog(tmp_path: Path, capture_backend: str) -> None:
    """No window at the start: the watchdog is spawned before the command starts.  With the eBPF
    watchdog spawned after the command, this test failed in 3 runs of 3: the agent was left running
    (under strace it failed once, under load)."""
    ws, env = _default_layout(tmp_path)
    store = default_store_path(env)
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--", "sh", "-c", KILL_AT_ONCE],
        cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180, check=False,
        start_new_session=True,
    )  # fmt: skip
    assert res.returncode == -9
    _killed_with_a_note(store, int((ws / "agent.pid").read_text()), capture_backend)


def test_benign_twin_an_agent_done_at_its_first_step_leaves_a_complete_run(tmp_path: Path,
                                                                            capture_backend: str) -> None:
    """The same shell, quick and harmless: the run completes, no note, no alert, and the watchdog
    (spawned before the command) is gone once the run is over."""
    ws, env = _default_layout(tmp_path)
    store = default_store_path(env)
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--", "sh", "-c",
         "echo $$ > agent.pid"],
        cwd=ws, env=env, capture_output=True, text=True, timeout=180, check=False, start_new_session=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    s = Store(store)
    s.repair()
    reader = RunReader(s, s.resolve("latest"))
    assert reader.meta.status == "complete", reader.meta.status
    assert not list(store.glob("runs/*/monitor-lost.json"))
    assert list(reader.alerts()) == []
    helpers = reader.meta.extra["monitor_pids"]
    assert len(helpers) >= 2, helpers  # strace or spyglass, and the watchdog
    assert _until(lambda: not any(_alive(p) for p in helpers)), "the monitor's helpers outlived the run"


def test_killing_the_watchdog_is_critical_and_noted(tmp_path: Path, capture_backend: str) -> None:
    store = tmp_path / "store"
    _run_agent(tmp_path, store, capture_backend, KILL_WATCHDOG)
    s = Store(store)
    reader = RunReader(s, s.resolve("latest"))
    assert "evasion-kill-monitor" in {a.rule_id for a in reader.alerts()}
    assert any(n.startswith("monitor-helper-lost:") for n in reader.meta.capture["notes"]), reader.meta.capture


#: the agent stops spyglass's watchdog (SIGSTOP), waits until it runs again (bounded: a watchdog nobody
#: resumes stays stopped), then kills spyglass and keeps working (bounded)
STOP_WATCHDOG_THEN_KILL = r"""
import os, signal, time
me, spy = os.getpid(), os.getppid()
open("agent.pid", "w").write(str(me))

def state(pid):
    stat = open(f"/proc/{pid}/stat", "rb").read()
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]

def watchdog():
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            stat = open(f"/proc/{entry}/stat", "rb").read()
            cmd = open(f"/proc/{entry}/cmdline", "rb").read()
        except OSError:
            continue
        helper = any(a.endswith(b"/watchdog.py") for a in cmd.split(b"\0"))
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == spy and helper:
            return int(entry)

for _ in range(600):
    wd = watchdog()
    if wd:
        break
    time.sleep(0.05)
os.kill(wd, signal.SIGSTOP)
for _ in range(300):
    time.sleep(0.05)
    if state(wd) not in (b"T", b"t"):
        break
os.kill(spy, signal.SIGKILL)
for _ in range(600):
    time.sleep(0.1); os.close(os.open("/dev/null", os.O_RDONLY))
"""


def test_the_agent_stopping_the_watchdog_before_killing_spyglass_is_resumed_and_dies(
    tmp_path: Path, capture_backend: str
) -> None:
    """A stopped watchdog would sleep through spyglass's death: spyglass resumes it (as it resumes
    spyglass), so the kill that follows still ends the tree and leaves the note."""
    store = tmp_path / "store"
    res = _run_agent(tmp_path, store, capture_backend, STOP_WATCHDOG_THEN_KILL)
    assert res.returncode == -9
    pid = int((tmp_path / "agent.pid").read_text())
    try:
        assert _until(lambda: _final_note(store)), "no note from the watchdog: it slept through spyglass's death"
        assert _until(lambda: not _alive(pid)), "the agent was left running after it killed spyglass"
        s = Store(store)
        s.repair()
        reader = RunReader(s, s.resolve("latest"))
        assert reader.meta.status == "monitor-lost"
        assert any("watchdog" in a.message and a.rule_id == "evasion-monitor-lost" for a in reader.alerts()), [
            (a.rule_id, a.message) for a in reader.alerts()]
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_benign_twin_a_process_of_the_run_stopped_by_the_run_stays_stopped(tmp_path: Path,
                                                                            capture_backend: str) -> None:
    """Only spyglass's own watchdog is resumed: a stop inside the tree (job control of the agent's own
    children) is the agent's business, and the watchdog left alone is never reported."""
    store = tmp_path / "store"
    script = ("import os, signal, subprocess, time\n"
              "child = subprocess.Popen(['sleep', '30'])\n"
              "os.kill(child.pid, signal.SIGSTOP)\n"
              "time.sleep(1.5)\n"
              "stat = open(f'/proc/{child.pid}/stat').read()\n"
              "open('child.state', 'w').write(stat[stat.rfind(')') + 2])\n"
              "child.kill(); child.wait()\n")
    res = _run_agent(tmp_path, store, capture_backend, script)
    assert res.returncode == 0
    assert (tmp_path / "child.state").read_text() in ("T", "t")  # (t: a stop under strace, its tracer)
    s = Store(store)
    reader = RunReader(s, s.resolve("latest"))
    assert reader.meta.status == "complete"
    assert not any(n.startswith("monitor-stopped:") for n in reader.meta.capture["notes"]), reader.meta.capture
    assert "evasion-monitor-lost" not in {a.rule_id for a in reader.alerts()}


#: the agent's root leaves a child that goes on (the run follows it) and exits at once
ROOT_LEAVES_A_CHILD = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    open('child.pid', 'w').write(str(os.getpid()))\n"
    "    for _ in range(1200): time.sleep(0.1)\n"
    "    os._exit(0)\n"
    "open('root.pid', 'w').write(str(os.getpid()))\n"
)


def _with_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """A process outside the run that gets ``pid`` (the kernel's next pid set just below it), or None."""
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def test_the_root_s_pid_taken_by_another_process_is_not_killed_by_the_watchdog(tmp_path: Path,
                                                                               capture_backend: str) -> None:
    """The run's first process exited long ago and its pid is another process's now (pids wrap: 32768
    of them by default): spyglass killed, the watchdog kills what the run left, never that process."""
    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        pytest.skip("the next pid cannot be chosen here (not root)")
    store = tmp_path / "store"
    spy = subprocess.Popen(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store),
         "--descendants", "follow", "--", PY, "-c", ROOT_LEAVES_A_CHILD],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    innocent = None
    child = 0
    try:
        assert _until(lambda: (tmp_path / "root.pid").exists() and (tmp_path / "child.pid").exists())
        root, child = int((tmp_path / "root.pid").read_text()), int((tmp_path / "child.pid").read_text())
        assert _until(lambda: not os.path.exists(f"/proc/{root}")), "the root was never reaped"
        innocent = _with_pid(root)
        if innocent is None:
            pytest.skip(f"pid {root} went to another process first")
        monitor = json.loads(next(store.glob("runs/*/run.json")).read_text())["monitor_pid"]  # (follow: a child)
        assert _alive(child) and _alive(monitor)
        os.kill(monitor, signal.SIGKILL)
        assert _until(lambda: _final_note(store)), "no note from the watchdog"
        assert _until(lambda: not _alive(child)), "the run's process was left running"
        assert innocent.poll() is None, "the watchdog killed a process that only has the root's old pid"
    finally:
        for pid in (child,):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if innocent is not None:
            innocent.kill()
            innocent.wait()
        if spy.poll() is None:
            spy.kill()
            spy.wait()
