"""Realistic benign work raises nothing at medium or above; `check` reproduces live alerts exactly."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from spyglass.events import level_rank


def _write_wheel(dest: Path) -> Path:
    """A tiny pure-Python wheel, written by hand (no network, no build backend)."""
    name, ver = "tinypkg", "0.1"
    files = {
        "tinypkg/__init__.py": b"def double(x):\n    return 2 * x\n",
        f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
        f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                         b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{ver}.dist-info/RECORD,,")
    whl = dest / f"{name}-{ver}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{name}-{ver}.dist-info/RECORD", "\n".join(record) + "\n")
    return whl


_SERVER = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4); s.settimeout(60)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.recv(1024); c.sendall(b"ok"); c.close()
"""


@pytest.fixture
def local_server() -> Iterator[int]:
    """A loopback server in its own process (outside the traced tree)."""
    p = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    port = int(p.stdout.readline())
    yield port
    p.kill()
    p.wait()


def test_benign_session_is_quiet(live, tmp_path: Path, local_server: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    whl = _write_wheel(tmp_path)
    (ws / "test_tiny.py").write_text("from tinypkg import double\n\ndef test_double():\n    assert double(2) == 4\n")
    (ws / "notes.md").write_text("# notes\n")
    r = live(f'''
set -e
$PY -m venv --without-pip .venv
$PY -m pip --python .venv/bin/python install -q --no-index --no-deps "{whl}"
git init -q .
git add test_tiny.py notes.md
git -c user.email=dev@example.com -c user.name=dev commit -q -m "initial"
PYTHONPATH=.venv/lib/python3.11/site-packages $PY -m pytest -q -p no:cacheprovider test_tiny.py > /dev/null
cat notes.md > /dev/null; echo "more" >> notes.md
mkdir -p /tmp/sg-benign-$$ && echo scratch > /tmp/sg-benign-$$/x && rm -rf /tmp/sg-benign-$$
$PY -c "
import socket
addr = socket.getaddrinfo('localhost', {local_server}, socket.AF_INET, socket.SOCK_STREAM)[0][4]
s = socket.create_connection(addr); s.sendall(b'hi'); s.recv(10); s.close()
"
''', workspace=ws)
    assert r.exit_code == 0
    loud = [(a.level, a.rule_id, a.message) for a in r.alerts if level_rank(a.level) >= level_rank("medium")]
    assert loud == []
    assert any(e.type == "net.connect" and e.ok for e in r.reader.events())


def test_check_reproduces_live_alerts(live, spy, tmp_path: Path) -> None:
    from spyglass.rules.replay import check_run
    from spyglass.rules.ruleset import load_ruleset

    r = live('''
cat "$HOME/.ssh/id_rsa" > /dev/null
echo x >> "$HOME/.bashrc"
$PY -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(('9.9.9.9', 53))
s.connect(('169.254.169.254', 80))
"
''')
    assert r.alerts and [msgspec.to_builtins(a) for a in r.alerts] == [msgspec.to_builtins(a) for a in r.stored]
    policy = r.reader.meta  # the run's own metadata carries home and workspace
    again = check_run(r.reader, load_ruleset(), None)
    assert [msgspec.to_builtins(a) for a in again] == [msgspec.to_builtins(a) for a in r.stored]
    assert policy.extra["home"] == str(r.home)
    # the CLI says so too
    res = spy("check", "--store", str(r.store.root), "latest", "--format", "json")
    assert res.exit_code == 0, res.output
    out = msgspec.json.decode(res.stdout)
    assert out["matches_recorded"] is True and len(out["alerts"]) == len(r.stored)
    res = spy("check", "--store", str(r.store.root), "latest", "--fail-on", "high")
    assert res.exit_code == 6
    res = spy("alerts", "--store", str(r.store.root), "latest", "--format", "json")
    assert [a["rule_id"] for a in msgspec.json.decode(res.stdout)] == [a.rule_id for a in r.stored]
