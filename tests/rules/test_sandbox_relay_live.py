"""A sandboxed run's connections to its own relay (127.0.0.1:3128 inside the sandbox, the only way
out) are not egress to an unlisted host, even when the policy's allowlist leaves loopback out
(Claude Code in `--sandbox` with `network: {builtin_allow: false, allow: [...]}` raised
net-egress-unlisted for 127.0.0.1:3128).  Any other unlisted address still fires: another port of
the sandbox's loopback, and the same 127.0.0.1:3128 in a run that is not sandboxed.  Real
`spyglass run`, real bubblewrap, both backends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.timeout(300),
]

POLICY = "network:\n  builtin_allow: false\n  allow: ['*.anthropic.com']\n"
# the agent's shape: it talks to the proxy at 127.0.0.1:3128 (HTTPS_PROXY) and the proxy refuses
# nothing it may reach; the attacker's: a listener of its own on another loopback port, reached
CLIENT = """
import socket, sys
port = int(sys.argv[1])
if sys.argv[2] == "listen":
    srv = socket.socket(); srv.bind(("127.0.0.1", port)); srv.listen(1)
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"CONNECT api.anthropic.com:443 HTTP/1.1\\r\\nHost: api.anthropic.com:443\\r\\n\\r\\n")
s.close()
print("connected", port)
"""


def _run(tmp_path: Path, name: str, backend: str, sandbox: bool, *client_args: str) -> list[str]:
    home = tmp_path / name / "home"
    ws = home / "proj"
    ws.mkdir(parents=True)
    (ws / "client.py").write_text(CLIENT)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPYGLASS_", "XDG_", "PYTEST_"))}
    env["HOME"] = str(home)
    spy = [sys.executable, "-m", "spyglass"]
    argv = [*spy, "run", "-q", "--policy", str(policy), "--backend", backend, *(["--sandbox"] if sandbox else []),
            "--", "python3", "client.py", *client_args]
    res = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=240, check=False)
    assert f"connected {client_args[0]}" in res.stdout, res.stderr[-2000:]
    out = subprocess.run([*spy, "alerts", "latest", "--format", "json"], cwd=ws, env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [f"{a['rule_id']}: {a['message']}" for a in json.loads(out) if a["rule_id"] == "net-egress-unlisted"]


def test_the_relay_is_not_unlisted_egress_but_other_loopback_ports_are(tmp_path: Path, capture_backend: str) -> None:
    # the agent through the relay: silent
    assert _run(tmp_path, "agent", capture_backend, True, "3128", "use") == []
    # the attacker's own listener on the sandbox's loopback: still unlisted
    fired = _run(tmp_path, "attacker", capture_backend, True, "4444", "listen")
    assert any("127.0.0.1:4444" in f for f in fired), fired


def test_port_3128_outside_a_sandbox_is_still_judged(tmp_path: Path, capture_backend: str) -> None:
    """The relay's allowance belongs to the sandbox: unsandboxed, 127.0.0.1:3128 is whatever listens
    on the host there, and a policy without loopback still reports it."""
    fired = _run(tmp_path, "plain", capture_backend, False, "3128", "listen")
    assert any("127.0.0.1:3128" in f for f in fired), fired
