"""Hostile input: billion laughs, binary and oversized policies, control characters in what the agent
names, a command that does not exist, and signals to spyglass.  Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.procfs import running

PY = sys.executable
LAUGHS = "".join(
    f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9 if i else ['"lol"'] * 9) + "]\n"
    for i in range(9)
)


@pytest.mark.backends("auto")  # not about capture
def test_billion_laughs_in_a_policy_is_refused_with_its_place(setup: Any, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(LAUGHS)
    assert len(LAUGHS) < 600
    for args in (["run", "--store", str(setup.store), "--policy", str(bomb), "--", "true"],
                 ["policy", "lint", str(bomb)]):
        res = setup.spyglass(*args, timeout=60)
        assert res.returncode == 2, res.stderr
        assert f"{bomb}:" in res.stdout + res.stderr and "aliases expand to more than" in res.stdout + res.stderr
        assert "Traceback" not in res.stderr


@pytest.mark.backends("auto")  # not about capture
def test_billion_laughs_in_a_rule_file_is_refused_with_its_place(setup: Any, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(LAUGHS)
    pol = tmp_path / "policy.yaml"
    pol.write_text(f"rules:\n  paths: [{rules}]\n")
    res = setup.spyglass("run", "--store", str(setup.store), "--policy", str(pol), "--", "true", timeout=60)
    assert res.returncode == 2 and f"{rules}:5:4:" in res.stderr, res.stderr


@pytest.mark.backends("auto")  # not about capture
def test_binary_and_oversized_policies_name_the_place(setup: Any, tmp_path: Path) -> None:
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"mode: observe\nsecrets: ['\xff\xfe\x00']\n")
    res = setup.spyglass("policy", "lint", str(binary))
    assert res.returncode == 2 and f"{binary}:2:12: not UTF-8" in res.stdout, res.stdout + res.stderr
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"mode: observe\n\x00\x01\x02")
    res = setup.spyglass("run", "--store", str(setup.store), "--policy", str(nul), "--", "true")
    assert res.returncode == 2 and f"{nul}:2:" in res.stderr and "Traceback" not in res.stderr, res.stderr
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * 120_000)
    res = setup.spyglass("run", "--store", str(setup.store), "--policy", str(big), "--", "true")
    assert res.returncode == 2 and "larger than the limit of 1048576 bytes" in res.stderr, res.stderr


FORGED = "id_rsa\x1b[2J\x1b[H\nspyglass: no alerts, all clear\r\x07"


def test_control_characters_in_a_file_name_are_shown_not_obeyed(setup: Any) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / FORGED).write_text("key\n")
    res = setup.run('cat "$HOME"/.ssh/id_rsa* > /dev/null')
    outputs = {"run": res.stderr}
    for cmd in (["show"], ["alerts"], ["events"], ["ls"]):
        out = setup.spyglass(*cmd, "--store", str(setup.store))
        outputs[cmd[0]] = out.stdout + out.stderr
    for name, text in outputs.items():
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text, name
        assert not any(line.startswith("spyglass: no alerts") for line in text.splitlines()), (name, text)
    assert "\\x1b[2J\\x1b[H\\nspyglass: no alerts, all clear\\r\\x07" in outputs["alerts"]
    assert "HIGH cred-secret-read" in outputs["run"]
    # JSON keeps the real name
    alerts = json.loads(setup.spyglass("alerts", "--store", str(setup.store), "--format", "json").stdout)
    assert any(FORGED in a["message"] for a in alerts)


def test_benign_twin_plain_names_are_printed_as_they_are(setup: Any) -> None:
    res = setup.run("echo hi > 'plain name – ünïcode.txt'")
    out = setup.spyglass("events", "--store", str(setup.store)).stdout
    assert res.returncode == 0 and "plain name – ünïcode.txt" in out


@pytest.mark.backends("auto")  # not about capture
def test_a_command_that_does_not_exist_exits_127_and_is_recorded(setup: Any) -> None:
    res = setup.spyglass("run", "--store", str(setup.store), "--", "nosuchcmd-spyglass-test")
    assert res.returncode == 127
    assert res.stderr.strip() == "spyglass: nosuchcmd-spyglass-test: command not found"
    runs = json.loads(setup.spyglass("ls", "--store", str(setup.store), "--format", "json").stdout)
    assert [(r["status"], r["exit_code"]) for r in runs] == [("failed", 127)]
    assert "not started: nosuchcmd-spyglass-test: command not found" in setup.spyglass(
        "show", "--store", str(setup.store)).stdout


def _cleanup(proc: subprocess.Popen[str]) -> None:
    """Whatever happened, leave nothing of this test running (its own session's process group)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait(timeout=30)


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_spyglass_reaches_the_agent_and_the_run_is_interrupted(setup: Any, sig: int) -> None:
    name = signal.Signals(sig).name[3:]
    script = (f"trap 'echo {name} > got; exit 3' {name}; touch ready; "
              "while :; do sleep 0.1; done")
    proc = subprocess.Popen([PY, "-m", "spyglass", "run", "--backend", setup.backend, "--store", str(setup.store),
                             "--", "/bin/sh", "-c",
                             script], cwd=setup.ws, env=setup.env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # no terminal: the signal reaches spyglass alone
    try:
        _wait_for(setup.ws / "ready")
        os.kill(proc.pid, sig)
        proc.communicate(timeout=60)
    finally:
        _cleanup(proc)
    assert (setup.ws / "got").read_text().strip() == name  # forwarded to the agent
    runs = json.loads(setup.spyglass("ls", "--store", str(setup.store), "--format", "json").stdout)
    assert runs[-1]["status"] == "interrupted"


def test_an_agent_that_ignores_the_signal_is_stopped_after_the_grace(setup: Any) -> None:
    marker = f"ignores-term-{os.getpid()}-{time.monotonic_ns()}"  # this test's own, not a neighbour's
    script = f"trap '' TERM; : {marker}; touch ready; while :; do sleep 0.1; done"
    proc = subprocess.Popen([PY, "-m", "spyglass", "run", "--backend", setup.backend, "--store", str(setup.store),
                             "--", "/bin/sh", "-c",
                             script], cwd=setup.ws, env=setup.env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _wait_for(setup.ws / "ready")
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        _cleanup(proc)
    runs = json.loads(setup.spyglass("ls", "--store", str(setup.store), "--format", "json").stdout)
    assert runs[-1]["status"] == "interrupted"
    assert not _running_with(marker)  # the tree is gone


def _running_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes() and running(int(name)):
                found.append(int(name))
        except OSError:
            continue
    return found
