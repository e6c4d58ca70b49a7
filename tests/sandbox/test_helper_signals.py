"""Signals from a sandboxed run to spyglass's sandbox helpers: real bubblewrap, real strace.

The relay is the sandbox's PID-namespace init (pid 1 inside): `kill -STOP 1` is a critical
attack on the monitor (and the kernel drops it), and `kill -9 -1` no longer reaches the relay,
so the proxy stays reachable.  The benign twin: a run that signals its own children raises
nothing, and orphans reparented to the relay are reaped (no zombies)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import needs_bwrap, needs_strace

from spyglass.errors import EXIT_KILLED
from spyglass.store import RunReader, Store

pytestmark = [needs_bwrap, needs_strace]
#: strace (a traced relay receives even the signals the kernel drops for a namespace's init, and
#: strace names pids in its own namespace) and the default backend (eBPF as root: pids as written)
backends = pytest.mark.parametrize("backend", ["strace", "auto"])

PROBE = (
    "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 3128), timeout=10); print(\"relay-alive\")'"
)


def _run(tmp_path: Path, backend: str, script: str, *opts: str) -> tuple[subprocess.CompletedProcess[str], RunReader]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if k not in ("SPYGLASS_STORE", "SPYGLASS_POLICY")}
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--store", str(store), "--backend", backend, *opts,
         "--", "sh", "-c", script],
        cwd=ws, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    s = Store(store)
    return res, RunReader(s, s.resolve("latest"))


@backends
def test_stopping_the_sandbox_init_is_critical_and_has_no_effect(tmp_path: Path, backend: str) -> None:
    res, reader = _run(tmp_path, backend, f"cat /proc/1/cmdline; echo; kill -STOP 1; sleep 0.5; {PROBE}", "--sandbox")
    assert "relay.py" in res.stdout.splitlines()[0]  # pid 1 inside is spyglass's relay
    assert "relay-alive" in res.stdout, res.stdout + res.stderr
    alert = next(a for a in reader.alerts() if a.rule_id == "evasion-kill-monitor")
    assert alert.level == "critical" and "SIGSTOP" in alert.message
    assert reader.meta.status == "complete"


@backends
def test_stopping_the_sandbox_init_is_killed_in_enforce_mode(tmp_path: Path, backend: str) -> None:
    res, reader = _run(tmp_path, backend, "kill -STOP 1; sleep 30; echo survived", "--mode", "enforce")
    assert res.returncode == EXIT_KILLED and "survived" not in res.stdout, res.stdout + res.stderr
    assert any(a.rule_id == "evasion-kill-monitor" and a.action == "kill" for a in reader.alerts())


@backends
def test_kill_all_inside_does_not_reach_the_relay(tmp_path: Path, backend: str) -> None:
    script = f"sleep 60 & sleep 0.2; kill -9 -1; wait; echo killed-sibling; {PROBE}"
    res, reader = _run(tmp_path, backend, script, "--sandbox")
    assert "killed-sibling" in res.stdout and "relay-alive" in res.stdout, res.stdout + res.stderr
    assert reader.meta.status == "complete" and res.returncode == 0


@backends
def test_signals_to_own_children_are_silent_and_orphans_are_reaped(tmp_path: Path, backend: str) -> None:
    script = (
        "sleep 30 & kill $!; wait; (sleep 0.1 &); sleep 1"
        "; cat /proc/[0-9]*/stat 2>/dev/null | grep -c ') Z ' || true"
        f"; {PROBE}"
    )
    res, reader = _run(tmp_path, backend, script, "--sandbox")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "0" and "relay-alive" in res.stdout, res.stdout  # no zombie left
    assert not [a for a in reader.alerts() if a.rule_id in ("evasion-kill-monitor", "sys-kill-foreign")]
