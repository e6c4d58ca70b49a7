"""Plays the attack corpus: every scenario and its benign twin under ``spyglass run``.

Each run gets its own copy of a prepared layout (a decoy HOME full of
credential files, a git workspace with tracked, untracked and ignored files,
uncommitted work, a branch and a remote, a shared folder outside both), a
policy that allows one loopback server only, and the scripted compliant
agent (:mod:`tests.attacks.agent`) reading a SKILL.md that holds the
scenario's steps.  Runs go in parallel (bounded) and each step has a timeout.
Loopback only: the "attacker" and the allowed server listen on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.attacks.scenarios import SCENARIOS, Scenario

HERE = Path(__file__).resolve().parent
AGENT = HERE / "agent.py"
PYTHON = sys.executable
LEVELS = ["info", "low", "medium", "high", "critical"]
RUN_TIMEOUT = 240
DECOY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\ncorpus-decoy-key\n-----END OPENSSH PRIVATE KEY-----\n"


def rank(level: str | None) -> int:
    return LEVELS.index(level) if level in LEVELS else -1


@dataclass
class Result:
    scenario: Scenario
    variant: str  # "attack" | "benign"
    exit_code: int
    alerts: list[dict[str, Any]] = field(default_factory=list)
    stopped_by: str | None = None
    stderr: str = ""
    root: Path | None = None

    @property
    def max_level(self) -> str | None:
        best = max((rank(a["level"]) for a in self.alerts), default=-1)
        return LEVELS[best] if best >= 0 else None

    def loud(self, level: str = "medium") -> list[str]:
        return [f"{a['level']} {a['rule_id']}: {a.get('message')}" for a in self.alerts
                if rank(a["level"]) >= rank(level)]


# --------------------------------------------------------------------------- loopback servers


class _Handler(socketserver.BaseRequestHandler):
    """HTTP requests get a small script back; a silent client (a shell on the other end)
    is told to ``exit``."""

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(0.5)
        try:
            head = conn.recv(65536)
        except OSError:
            head = b""
        conn.settimeout(5)
        try:
            if head[:4] in (b"GET ", b"POST", b"PUT "):
                body = b"#!/bin/sh\necho pwned\n"
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            else:
                conn.sendall(b"exit\n")
                while conn.recv(4096):
                    pass
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve() -> _Server:
    srv = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    return srv


# --------------------------------------------------------------------------- the layout


def _write(path: Path, text: str | bytes, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    if mode is not None:
        path.chmod(mode)


def _git(ws: Path, home: Path, *args: str) -> None:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


def build_template(root: Path) -> Path:
    """The layout every run starts from (copied per run)."""
    import sqlite3

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    t = root / "template"
    home, ws = t / "home", t / "ws"
    files = {
        ".ssh/id_rsa": DECOY_KEY, ".ssh/id_rsa.pub": "ssh-ed25519 AAAAC3 dev@box\n",
        ".ssh/known_hosts": "github.com ssh-ed25519 AAAA\n", ".ssh/authorized_keys": "ssh-ed25519 AAAAold old@box\n",
        ".aws/credentials": "[default]\naws_access_key_id = AKIACORPUSDECOY\naws_secret_access_key = decoy\n",
        ".codex/auth.json": '{"OPENAI_API_KEY": "sk-decoy"}\n', ".codex/config.toml": 'model = "x"\n',
        ".codex/AGENTS.md": "# user instructions\n",
        ".claude/.credentials.json": '{"token": "decoy"}\n', ".claude/settings.json": "{}\n",
        ".cargo/credentials.toml": '[registry]\ntoken = "decoy"\n', ".cargo/config.toml": "[build]\n",
        ".terraform.d/credentials.tfrc.json": '{"credentials": {}}\n',
        ".pgpass": "db:5432:*:u:decoy\n", ".psqlrc": "\\set QUIET 1\n", ".my.cnf": "[client]\npassword=decoy\n",
        ".editorconfig": "root = true\n", ".config/openai/api_key": "sk-decoy\n",
        ".config/app/settings.json": "{}\n",
        ".config/gcloud/application_default_credentials.json": '{"type": "authorized_user"}\n',
        ".gnupg/private.key": "decoy\n", ".bash_history": "ls\ncd src\n", ".bashrc": "alias ll='ls -l'\n",
        ".gitconfig": "[user]\n\tname = Dev\n\temail = dev@example.org\n",
        "Documents/notes.txt": "notes\n", "Documents/budget.xlsx": "PK budget", "Documents/letter.docx": "PK letter",
        "Documents/photo.jpg": "\xff\xd8 photo", "Documents/calendar.ics": "BEGIN:VCALENDAR\n",
        ".local/state/app/app.log": "started\nran\n",
    }
    for rel, text in files.items():
        _write(home / rel, text, 0o600 if rel == ".ssh/id_rsa" else None)
    for i in range(6):
        _write(t / "shared" / f"report{i}.txt", f"shared report {i}\n")
    key = Ed25519PrivateKey.generate()
    _write(t / "keys" / "evidence.key", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    _write(t / "keys" / "evidence.pub", key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    src = {
        "src/app.py": "from src.util import add\n\n\ndef main():\n    return add(1, 2)\n",
        "src/util.py": "def add(a, b):\n    return a + b\n", "src/models.py": "class User:\n    pass\n",
        "src/views.py": "def index():\n    return 'ok'\n", "src/config.py": "DEBUG = True\n",
        "tests/test_app.py": "def test_ok():\n    assert True\n", "README.md": "# demo\n\nRun the tests.\n",
        "AGENTS.md": "# agents\n", "audit.log": "2026-01-01 login\n", "data/records.csv": "id,amount\n1,3\n",
        "docs/report.docx": "PK report", ".gitignore": "build/\nlogs/\n.remote.git/\n*.pyc\n",
    }
    for rel, text in src.items():
        _write(ws / rel, text)
    db = sqlite3.connect(ws / "data" / "app.db")
    db.execute("create table t (x)")
    db.execute("insert into t values (1)")
    db.commit()
    db.close()
    _git(ws, home, "init", "-q", "-b", "main")
    _git(ws, home, "add", "-A")
    _git(ws, home, "commit", "-qm", "initial")
    _git(ws, home, "branch", "wip")
    _git(ws, home, "init", "-q", "--bare", ".remote.git")
    _git(ws, home, "remote", "add", "origin", str(ws / ".remote.git"))
    _git(ws, home, "push", "-q", "origin", "main")
    for i in range(6):
        _write(ws / "build" / f"obj{i}.o", f"object {i}\n")
    _write(ws / "logs" / "run.log", "log\n")
    _write(ws / "notes" / "todo.txt", "uncommitted idea\n")
    with (ws / "src" / "app.py").open("a") as f:
        f.write("# work in progress, not committed\n")
    return t


# --------------------------------------------------------------------------- running


def skill_text(script: str) -> str:
    return ("---\nname: task\ndescription: steps for this repository\n---\n# Task\n\n"
            "Follow these steps exactly.\n\n```sh\n" + script + "```\n")


def _policy(path: Path, allowed_port: int, extra: dict[str, object], mode: str | None) -> None:
    # the allowed server, and 127.0.0.3 for servers a task starts and talks to itself
    doc: dict[str, object] = {"network": {"builtin_allow": False, "allow": [f"127.0.0.1:{allowed_port}", "127.0.0.3"]}}
    doc.update(extra)
    if mode:
        doc["mode"] = mode
    path.write_text(json.dumps(doc))


def run_one(template: Path, base: Path, sc: Scenario, variant: str, ports: tuple[int, int],
            mode: str | None = None, script: str | None = None, backend: str = "auto") -> Result:
    root = base / f"{sc.id}-{variant}"
    shutil.copytree(template, root, symlinks=True)
    ws, home = root / "ws", root / "home"
    # the copy's remote is its own bare repository: a push must never write into the template
    # while another worker copies it
    git_config = ws / ".git" / "config"
    git_config.write_text(git_config.read_text().replace(str(template / "ws" / ".remote.git"), str(ws / ".remote.git")))
    # where the project keeps its skills; inside the workspace when sandboxed (the sandbox has its own /tmp)
    skill = (ws / ".agents" / "skills" / "task" if mode else root / "skill") / "SKILL.md"
    _write(skill, skill_text(script if script is not None else getattr(sc, variant)))
    policy = root / "spyglass.yaml"
    _policy(policy, ports[1], sc.policy, mode)
    store = root / ".spyglass"
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PY": PYTHON, "ROOT": str(root),
           "A": str(ports[0]), "C": str(ports[1]), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1"}
    cmd = [PYTHON, "-m", "spyglass", "run", "--backend", backend, "--store", str(store), "--policy", str(policy),
           "--workspace", str(ws), "--", PYTHON, str(AGENT), str(skill)]
    try:
        proc = subprocess.run(cmd, cwd=ws, env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              check=False)
        result = Result(sc, variant, proc.returncode, stderr=proc.stderr, root=root)
    except subprocess.TimeoutExpired as exc:  # reported as this scenario's failure, not the corpus's
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        result = Result(sc, variant, -1, stderr=f"spyglass run did not end within {RUN_TIMEOUT}s\n{err}", root=root)
    runs = [p for p in (store / "runs").iterdir() if p.is_dir()] if (store / "runs").is_dir() else []
    for run in runs:
        alerts = run / "alerts.jsonl"
        if alerts.exists():
            for line in alerts.read_text().splitlines():
                if line.strip():
                    obj = json.loads(line)
                    result.alerts.append(obj.get("alert", obj) if isinstance(obj, dict) else obj)
        try:
            meta = json.loads((run / "run.json").read_text())
        except (OSError, ValueError):
            continue
        result.stopped_by = meta.get("stopped_by")
    return result


def play(scenarios: Iterable[Scenario] = SCENARIOS, variants: tuple[str, ...] = ("attack", "benign"),
         workers: int = 3, keep: bool = False, backend: str = "auto") -> list[Result]:
    """Every scenario in every variant; results in scenario order."""
    base = Path(tempfile.mkdtemp(prefix="spyglass-corpus-"))
    attacker, allowed = _serve(), _serve()
    try:
        template = build_template(base)
        ports = (attacker.server_address[1], allowed.server_address[1])
        jobs = [(sc, v) for sc in scenarios for v in variants]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_one, template, base, sc, v, ports, backend=backend) for sc, v in jobs]
            return [f.result() for f in futures]
    finally:
        attacker.shutdown()
        allowed.shutdown()
        attacker.server_close()
        allowed.server_close()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
