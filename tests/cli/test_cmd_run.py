"""`spyglass run` and `spyglass demo` as a user runs them: real processes, real strace."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spyglass.store import RunReader, Store

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")


def _spyglass(
    store: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "SPYGLASS_STORE": str(store), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "spyglass", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_exit_code_passes_through(tmp_path: Path) -> None:
    res = _spyglass(tmp_path / "s", "run", "-q", "--", "sh", "-c", "exit 3", cwd=tmp_path)
    assert res.returncode == 3
    res = _spyglass(tmp_path / "s", "run", "-q", "--", "sh", "-c", "kill -9 $$", cwd=tmp_path)
    assert res.returncode == 137
    meta = RunReader(Store(tmp_path / "s"), Store(tmp_path / "s").resolve("latest")).meta
    assert meta.signal == "SIGKILL" and meta.status == "complete"


@pytest.mark.parametrize("code", [6, 7, 8])
def test_agent_exit_codes_like_spyglass_verdicts_are_not_explained_as_them(tmp_path: Path, code: int) -> None:
    """An agent that exits 6, 7 or 8 itself gets its code passed through, and no line saying an
    alert fired, a rule stopped it or the evidence is incomplete (it said "an alert at or above
    None fired" for 6)."""
    res = _spyglass(tmp_path / "s", "run", "-q", "--", "sh", "-c", f"exit {code}", cwd=tmp_path)
    assert res.returncode == code
    assert "(exit" not in res.stderr and "None" not in res.stderr, res.stderr


def test_agent_output_passes_through_and_summary_goes_to_stderr(tmp_path: Path) -> None:
    res = _spyglass(tmp_path / "s", "run", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2", cwd=tmp_path)
    assert res.returncode == 0
    assert res.stdout == "to-stdout\n"
    assert "to-stderr" in res.stderr and "spyglass: recorded run" in res.stderr


def test_missing_strace_names_the_package(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "true"):
        (bindir / tool).symlink_to(f"/bin/{tool}")
    res = _spyglass(tmp_path / "s", "run", "--backend", "strace", "--", "true", cwd=tmp_path, env={"PATH": str(bindir)})
    assert res.returncode == 5
    assert "strace is not installed" in res.stderr and "apt-get install strace" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_kill_9_of_the_monitor_leaves_an_incomplete_readable_run(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spyglass",
            "run",
            "-q",
            "--",
            "sh",
            "-c",
            "echo one > first.txt; echo two > second.txt; exec sleep 30",
        ],
        cwd=ws,
        env={**os.environ, "SPYGLASS_STORE": str(store)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        events_file: Path | None = None
        while time.monotonic() < deadline:
            runs = list((store / "runs").glob("*/events.jsonl")) if (store / "runs").exists() else []
            # wait for the write itself (the command line that names the file comes first)
            if runs and f'"file.path":"{ws / "second.txt"}"'.encode() in runs[0].read_bytes():
                events_file = runs[0]
                break
            time.sleep(0.1)
        assert events_file is not None, "the events never reached the store"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["pkill", "-KILL", "-f", "sleep 30$"], check=False)
    res = _spyglass(store, "show", "latest", "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    # strace: incomplete; eBPF: its watchdog kills the tree and notes it, so monitor-lost
    status = data["run"]["status"]
    assert status in ("incomplete", "monitor-lost")
    assert {"/".join([str(ws), "first.txt"]), str(ws / "second.txt")} <= set(data["files_written"]["file.create"])
    text = _spyglass(store, "show", "latest").stdout
    assert status in text


def test_demo_records_and_trips_the_secret_alert(tmp_path: Path) -> None:
    res = _spyglass(tmp_path / "s", "demo", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "cred-secret-read" in res.stdout
    store = Store(tmp_path / "s")
    reader = RunReader(store, store.resolve("latest"))
    evs = list(reader.events())
    types = {e.type for e in evs}
    assert {"process.exec", "file.rename", "net.connect", "file.create"} <= types
    # the helper outlived the agent and its write is still in the run (grace period)
    assert any(e.path and e.path.endswith("helper-heartbeat.txt") for e in evs)
    assert any(e.type == "net.connect" and e.domain == "localhost" for e in evs)
    assert [a.rule_id for a in reader.alerts()] == ["cred-secret-read"]


def test_fail_on_gives_exit_6(tmp_path: Path, spy: Any) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("not a key")
    res = _spyglass(
        tmp_path / "s",
        "run",
        "-q",
        "--fail-on",
        "high",
        "--",
        "cat",
        str(home / ".ssh" / "id_rsa"),
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    assert res.returncode == 6, res.stderr


def test_bad_policy_refuses_to_start(tmp_path: Path) -> None:
    policy = tmp_path / "spyglass.yaml"
    policy.write_text("mode: observe\nnetwork:\n  alow: [x]\n")
    marker = tmp_path / "ran"
    res = _spyglass(tmp_path / "s", "run", "--policy", "spyglass.yaml", "--", "touch", str(marker), cwd=tmp_path)
    assert res.returncode == 2
    assert "spyglass.yaml:3:3" in res.stderr
    assert not marker.exists()


def test_recorded_events_validate_against_the_published_schema(tmp_path: Path) -> None:
    import jsonschema

    from spyglass.events.jsonschema import event_schema

    ws = tmp_path / "ws"
    ws.mkdir()
    res = _spyglass(
        tmp_path / "s",
        "run",
        "-q",
        "--",
        "sh",
        "-c",
        "echo a > a; mv a b; cat b missing; ln -s b c; chmod 600 b; rm b; mkdir d; "
        f"{sys.executable} -c 'import socket; s=socket.socket(); s.connect_ex((\"127.0.0.1\", 9))'",
        cwd=ws,
    )
    assert res.returncode == 0, res.stderr
    validator = jsonschema.Draft202012Validator(event_schema())
    store = Store(tmp_path / "s")
    path = store.run_dir(store.resolve("latest")) / "events.jsonl"
    lines = path.read_text().splitlines()
    types = set()
    for line in lines:
        if line.startswith('{"seal":'):
            continue  # a block seal of the store (spyglass.store.chain), not an event
        record = json.loads(line)
        errors = list(validator.iter_errors(record))
        assert not errors, (line, errors[0].message)
        types.add(record["type"])
    assert {"file.create", "file.rename", "file.symlink", "file.chmod", "file.delete", "file.mkdir"} <= types
    assert {"net.connect", "process.exec", "process.exit", "process.start"} <= types


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@needs_bwrap
def test_sandbox_refuses_writes_outside_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    res = _spyglass(
        tmp_path / "s",
        "run",
        "-q",
        "--sandbox",
        "--",
        "sh",
        "-c",
        "echo inside > ok.txt; echo outside > /etc/spyglass-test-outside.txt",
        cwd=ws,
    )
    assert res.returncode != 0
    assert (ws / "ok.txt").read_text() == "inside\n"
    assert not Path("/etc/spyglass-test-outside.txt").exists()
    store = Store(tmp_path / "s")
    reader = RunReader(store, store.resolve("latest"))
    assert reader.meta.sandbox and reader.meta.mode == "contain"
    evs = list(reader.events())
    denied = [e for e in evs if e.type == "sandbox.denied"]
    assert any(e.path == "/etc/spyglass-test-outside.txt" and e.errno == "EROFS" for e in denied), denied


def test_sandbox_asked_but_impossible_refuses_to_run(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "true", "touch", "strace"):
        target = shutil.which(tool)
        assert target is not None
        (bindir / tool).symlink_to(target)
    marker = tmp_path / "ran"
    res = _spyglass(
        tmp_path / "s", "run", "--sandbox", "--", "touch", str(marker), cwd=tmp_path, env={"PATH": str(bindir)}
    )
    assert res.returncode == 5, res.stderr
    assert "bwrap" in res.stderr or "bubblewrap" in res.stderr
    assert "Traceback" not in res.stderr
    assert not marker.exists()


def test_default_policy_leaves_interpreter_caches_out_of_the_workspace_diff(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mod.py").write_text("X = 1\n")
    res = _spyglass(
        tmp_path / "s",
        "run",
        "-q",
        "--",
        sys.executable,
        "-c",
        "import sys; sys.dont_write_bytecode = False; import mod; open('out.txt', 'w').write('x')",
        cwd=ws,
        env={"PYTHONDONTWRITEBYTECODE": ""},
    )
    assert res.returncode == 0, res.stderr
    assert list((ws / "__pycache__").glob("mod.*.pyc")), "the workload made no bytecode cache"
    data = json.loads(_spyglass(tmp_path / "s", "changes", "latest", "--format", "json").stdout)
    text = json.dumps(data)
    assert "out.txt" in text
    assert "__pycache__" not in text
