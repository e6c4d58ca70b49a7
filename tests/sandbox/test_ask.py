"""Egress ask mode: the proxy holds a refused host until the operator answers (allow once, deny, or time out)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import Collector, Servers, connect_tunnel

from spyglass.sandbox.ask import EgressAsk
from spyglass.sandbox.egress import EgressPolicy
from spyglass.sandbox.proxy import EgressProxy, static_resolver
from spyglass.store import Store


@pytest.fixture
def asking(servers: Servers, short_dir: Path, tmp_path: Path) -> Iterator[Callable[[float], Any]]:
    made: list[EgressProxy] = []

    def make(timeout: float) -> tuple[EgressProxy, Collector, Path, io.StringIO]:
        store = Store(tmp_path / "store", create=True)
        asks = store.root / "sandbox" / "run-1" / "asks"
        col, prompts = Collector(), io.StringIO()
        p = EgressProxy(
            str(short_dir / f"p{len(made)}.sock"),
            EgressPolicy(["allowed.test", "127.0.0.0/8"], ["denied.test"], allow_host_loopback=True),
            sink=col,
            resolver=static_resolver(servers.resolve_table()),
            ask=EgressAsk(asks, timeout, sink=col, stream=prompts, poll=0.02),
        )
        p.start()
        made.append(p)
        return p, col, asks, prompts

    yield make
    for p in made:
        p.close()


def _tunnel_in_thread(sock: str, host: str) -> tuple[threading.Thread, list[bytes]]:
    out: list[bytes] = []

    def go() -> None:
        head, s = connect_tunnel(sock, host, 443)
        s.close()
        out.append(head)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


def _wait_file(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_the_operator_allows_once_or_denies(
    asking: Callable[[float], Any], spy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    decision: str,
) -> None:
    p, col, asks, prompts = asking(60.0)
    t, out = _tunnel_in_thread(p.socket_path, "denied.test")
    _wait_file(asks / "1.json")
    deadline = time.monotonic() + 30  # the question is written, then the operator told of it
    while "ASK #1" not in prompts.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "ASK #1" in prompts.getvalue() and "denied.test:443" in prompts.getvalue()
    monkeypatch.setenv("SPYGLASS_STORE", str(tmp_path / "store"))
    res = spy("sandbox", "answer", "1", decision)
    assert res.exit_code == 0, res.output
    t.join(30)
    assert out, "the request never got its answer"
    status = out[0].split(b"\r\n")[0]
    evs = col.wait_for(2)
    inter = [e for e in evs if e.type == "agent.intervention"]
    req = [e for e in evs if e.type == "proxy.request"]
    assert len(inter) == 1 and len(req) == 1
    assert inter[0].actor == "operator" and inter[0].verdict == decision
    assert (inter[0].address, inter[0].port) == ("denied.test", 443)
    if decision == "allow":
        assert b" 200 " in status
        assert (inter[0].action, req[0].decision, req[0].reason) == ("allow-once", "allow", "operator-allowed")
    else:
        assert status.startswith(b"HTTP/1.1 403")
        assert (inter[0].action, req[0].decision, req[0].reason) == ("deny", "deny", "denied-by-rule")
    # once means once: the next request to the host is asked again
    t2, _ = _tunnel_in_thread(p.socket_path, "denied.test")
    _wait_file(asks / "2.json")
    assert spy("sandbox", "answer", "2", "deny").exit_code == 0
    t2.join(30)


def test_no_answer_is_a_denial_and_literals_are_never_asked(asking: Callable[[float], Any]) -> None:
    p, col, asks, _ = asking(0.5)
    head, s = connect_tunnel(p.socket_path, "elsewhere.test", 443)
    s.close()
    assert head.startswith(b"HTTP/1.1 403")
    inter = [e for e in col.wait_for(2) if e.type == "agent.intervention"]
    assert inter and (inter[0].actor, inter[0].verdict, inter[0].action) == ("policy", "deny", "deny")
    head, s = connect_tunnel(p.socket_path, "1.1.1.1", 443)
    s.close()
    assert head.startswith(b"HTTP/1.1 403") and not (asks / "2.json").exists()


def test_answering_nothing_open_is_a_one_line_error(spy: Callable[..., Any], store_dir: Path) -> None:
    Store(store_dir, create=True)
    res = spy("sandbox", "answer", "7", "allow")
    assert res.exit_code == 2 and "no open question #7" in res.stderr
