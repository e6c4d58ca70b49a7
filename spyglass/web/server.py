"""``spyglass ui``: a local web UI over the run store, live while runs go on.

A threaded HTTP server bound to loopback.  Every request must carry the
random token the server was started with (``?token=`` in the URL it
prints), so other local users and web pages cannot read the store through
it.  Pages:

``/``            the runs (filter by agent, task, status, level), kept current by
                 server-sent events from ``/api/runs/stream``
``/run/ID``      the run's HTML report (the same as ``spyglass report``); while the
                 run goes on, new alerts and counts arrive from
                 ``/api/run/ID/stream`` and show at the top, and the page reloads
                 into the full report when the run ends

The server reads the store only; each request opens the index afresh
(SQLite connections stay in their thread).
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from spyglass.errors import SpyglassError
from spyglass.events import LEVELS, level_rank
from spyglass.store import RunReader, Store
from spyglass.web.pages import live_report, runs_page

POLL_S = 0.25


def run_rows(root: Path, filters: dict[str, str], limit: int = 500) -> list[dict[str, Any]]:
    """The runs, newest first, with live alert counts for those still running."""
    store = Store(root, repair=False)
    try:
        rows = store.index.rows()
    finally:
        store.index.close()
    out: list[dict[str, Any]] = []
    for r in reversed(rows):
        row = {
            "id": r["id"],
            "task": r["task"],
            "agent_id": r["agent_id"],
            "status": r["status"],
            "exit_code": r["exit_code"],
            "started": r["started"],
            "events": r["events"],
            "alerts": r["alerts"],
            "max_level": r["max_level"],
            "command": r["command"],
            "top_alert": None,
        }
        _alert_facts(root / "runs" / r["id"] / "alerts.jsonl", row)
        if _keep(row, filters):
            out.append(row)
        if len(out) >= limit:
            break
    return out


def _alert_facts(path: Path, row: dict[str, Any]) -> None:
    """Count, highest level and the worst alert's rule, from alerts.jsonl (current while a run goes on)."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return
    best: dict[str, Any] | None = None
    n = 0
    for line in lines:
        try:
            a = json.loads(line)
        except ValueError:
            continue  # a line being written
        n += 1
        if best is None or level_rank(a.get("level", "")) > level_rank(best.get("level", "")):
            best = a
    row["alerts"] = max(n, row["alerts"] or 0)
    if best is not None:
        row["max_level"] = best.get("level")
        row["top_alert"] = {"rule_id": best.get("rule_id"), "title": best.get("title"), "level": best.get("level")}


def _keep(row: dict[str, Any], f: dict[str, str]) -> bool:
    if f.get("agent") and not (row["agent_id"] or "").startswith(f["agent"]):
        return False
    if f.get("task") and row["task"] != f["task"]:
        return False
    if f.get("status") and row["status"] != f["status"]:
        return False
    lv = f.get("level")
    return not (lv and level_rank(row["max_level"] or "") < level_rank(lv))


class _Handler(BaseHTTPRequestHandler):
    server: UiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if not hmac.compare_digest(q.get("token", ""), self.server.token):
            self._send(403, b"forbidden: open the URL that `spyglass ui` printed\n", "text/plain")
            return
        filters = {k: q[k] for k in ("agent", "task", "status", "level") if q.get(k)}
        try:
            if url.path == "/":
                rows = run_rows(self.server.root, filters)
                self._send(200, runs_page(rows, filters, self.server.token, LEVELS).encode())
            elif url.path == "/api/runs":
                self._send(200, json.dumps(run_rows(self.server.root, filters)).encode(), "application/json")
            elif url.path == "/api/runs/stream":
                self._stream(self._runs_updates(filters))
            elif url.path.startswith("/run/"):
                run_id = url.path[5:]
                reader = self._reader(run_id)
                self._send(200, live_report(reader, self.server.token))
            elif url.path.startswith("/api/run/") and url.path.endswith("/stream"):
                run_id = url.path[len("/api/run/") : -len("/stream")]
                self._stream(self._run_updates(self._reader(run_id), int(q.get("after", "0") or 0)))
            else:
                self._send(404, b"not found\n", "text/plain")
        except SpyglassError as exc:
            self._send(404, f"{exc}\n".encode(), "text/plain")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _reader(self, run_id: str) -> RunReader:
        if "/" in run_id or run_id.startswith("."):
            raise SpyglassError(f"no run {run_id!r}")
        store = Store(self.server.root, repair=False)
        store.index.close()
        return RunReader(store, run_id)

    # -- server-sent events ------------------------------------------------------
    def _stream(self, updates: Iterator[tuple[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        last_beat = time.monotonic()
        for kind, data in updates:
            if self.server.stopping.is_set():
                return
            if kind == "beat":
                if time.monotonic() - last_beat < 15:
                    continue
                payload = b": keep-alive\n\n"
            else:
                payload = f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
            last_beat = time.monotonic()
            self.wfile.write(payload)
            self.wfile.flush()

    def _runs_updates(self, filters: dict[str, str]) -> Iterator[tuple[str, Any]]:
        last = ""
        while not self.server.stopping.is_set():
            rows = run_rows(self.server.root, filters)
            text = json.dumps(rows)
            yield ("runs", rows) if text != last else ("beat", None)
            last = text
            time.sleep(POLL_S)

    def _run_updates(self, reader: RunReader, after: int) -> Iterator[tuple[str, Any]]:
        sent = after
        status = ""
        while not self.server.stopping.is_set():
            try:
                meta = reader.store.read_meta(reader.id)
            except SpyglassError:
                return
            alerts = reader.alerts(on_bad_line=lambda *_: None)
            for a in alerts[sent:]:
                yield "alert", {
                    "seq": a.seq, "rule_id": a.rule_id, "title": a.title, "level": a.level,
                    "message": a.message, "pid": a.pid, "argv": a.argv or [],
                    "tool_call": next((e.tool_call for e in reversed(a.lineage) if e.tool_call), None),
                }
            sent = max(sent, len(alerts))
            size = reader.events_path.stat().st_size if reader.events_path.exists() else 0
            yield "status", {"status": meta.status, "alerts": sent, "event_bytes": size}
            if meta.status != "running" and meta.status != status and status:
                return
            status = meta.status
            if meta.status != "running":
                return
            time.sleep(POLL_S)


class UiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise SpyglassError(f"the UI listens on loopback only, not {host}")
        self.root = root
        self.token = token or secrets.token_urlsafe(18)
        self.stopping = threading.Event()
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}/?token={self.token}"

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()


def start_ui(root: Path, port: int = 0) -> UiServer:
    """A UI server on loopback, serving in a daemon thread; ``.url`` carries the token."""
    server = UiServer(root, port=port)
    threading.Thread(target=server.serve_forever, name="spyglass-ui", daemon=True).start()
    return server
