"""The bundled demo: an agent-like program, a workspace, a skill and a loopback server."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec

DEMO_DIR = Path(__file__).resolve().parent

FAKE_KEY = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
spyglass-demo-decoy-key-not-a-real-secret-AAAAAAAAAAAAAAAAAAAAAAAAAAAA
-----END OPENSSH PRIVATE KEY-----
"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class Demo(msgspec.Struct):
    root: Path
    workspace: Path
    skill: Path
    home: Path
    server: ThreadingHTTPServer

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def argv(self) -> list[str]:
        return [sys.executable, str(self.root / "agent.py")]

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        env.update(
            HOME=str(self.home),
            DEMO_SKILL_DIR=str(self.skill),
            DEMO_SERVER_PORT=str(self.port),
            PYTHONDONTWRITEBYTECODE="1",
        )
        return env

    @property
    def policy(self) -> Path:
        return self.root / "spyglass.yaml"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def prepare(dest: Path) -> Demo:
    """Lay the demo out under ``dest`` (fresh each time) and start its server."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(DEMO_DIR / "agent.py", dest / "agent.py")
    shutil.copytree(DEMO_DIR / "workspace", dest / "workspace")
    shutil.copytree(DEMO_DIR / "skills", dest / "skills")
    home = dest / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(FAKE_KEY)
    (home / ".ssh" / "id_rsa").chmod(0o600)
    (dest / "spyglass.yaml").write_text(
        "# The demo's policy: the defaults, plus what a sandboxed demo must see.\n"
        "sandbox:\n"
        "  readonly:\n"
        "    - agent.py\n"
        "    - skills\n"
        "  env:\n"
        "    pass: [DEMO_*]\n"
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, name="demo-server", daemon=True).start()
    return Demo(
        root=dest,
        workspace=dest / "workspace",
        skill=dest / "skills" / "report-writer",
        home=home,
        server=server,
    )
