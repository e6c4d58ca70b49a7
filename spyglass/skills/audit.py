"""Which line of a Python or Node script made a call: hooks injected into the sandbox.

The workspace gets a directory holding ``sitecustomize.py`` (below), put first
on ``PYTHONPATH`` so every Python process of the run loads it.  It installs a
:func:`sys.addaudithook` hook that writes one JSON line per interesting call
(open, connect, name lookup, URL request, process start, delete, rename,
chmod, exec of code) to ``audit-<pid>.jsonl`` beside it, with the first frame
outside the standard library and site-packages: the script's file and line.

Node processes load ``preload.js`` (``spyglass/skills/node_preload.js``) through
``NODE_OPTIONS=--require``: it wraps ``fs``, ``child_process``, ``http(s)`` and
``fetch`` and writes the same records to ``audit-node-<pid>.jsonl``.

The kernel's events stay the evidence; the audit lines only point at source
lines.  A script that removes the hook (it cannot: audit hooks cannot be
removed) or starts Python with ``-I``/``-S`` loses the pointer, not the event.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

AUDIT_DIR: Final = ".spyglass-audit"

SITECUSTOMIZE: Final = r"""
import os as _os, sys as _sys, json as _json, sysconfig as _sc
def _spyglass_install():
    here = _os.path.dirname(_os.path.abspath(__file__))
    try:
        fd = _os.open(_os.path.join(here, "audit-%d.jsonl" % _os.getpid()),
                      _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND | _os.O_CLOEXEC, 0o644)
    except OSError:
        return
    skip = tuple(p for p in {_sc.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} if p)
    skip += (here, "<frozen")
    argv = list(_sys.argv) or [_sys.executable]
    wanted = {"open", "socket.connect", "socket.getaddrinfo", "urllib.Request", "http.client.connect",
              "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.remove",
              "os.rmdir", "os.rename", "shutil.rmtree", "os.chmod", "exec", "compile", "shutil.copyfile",
              "os.mkdir"}
    busy = [False]
    def short(v):
        if isinstance(v, (bytes, bytearray)):
            v = bytes(v[:200]).decode("utf-8", "replace")
        if isinstance(v, (str, int, float, bool)) or v is None:
            return v if not isinstance(v, str) else v[:400]
        if isinstance(v, (list, tuple)):
            return [short(x) for x in list(v)[:20]]
        return type(v).__name__
    def hook(event, args):
        if event not in wanted or busy[0]:
            return
        busy[0] = True
        try:
            f = _sys._getframe(1)
            where = None
            inner = None
            while f is not None:
                fn = f.f_code.co_filename
                if fn.startswith("<") and not fn.startswith("<frozen") and inner is None:
                    inner = [fn, f.f_lineno]  # exec'd code: keep walking to the file that ran it
                elif not fn.startswith(skip) and not fn.startswith("<"):
                    where = [fn, f.f_lineno]
                    break
                f = f.f_back
            if where is None:
                where = inner
            if where is None:
                return
            if event == "open" and isinstance(args[0], str) and args[0].endswith((".py", ".pyc", ".so")):
                return
            if event in ("exec", "compile"):
                args = [str(args[0])[:200]] if event == "compile" else [getattr(args[0], "co_filename", "?")]
            rec = {"event": event, "args": short(list(args)), "file": where[0], "line": where[1],
                   "argv": argv, "cwd": _os.getcwd()}
            _os.write(fd, (_json.dumps(rec) + "\n").encode())
        except Exception:
            pass
        finally:
            busy[0] = False
    _sys.addaudithook(hook)
_spyglass_install()
del _spyglass_install
"""


class AuditRecord(msgspec.Struct):
    event: str
    args: list[Any]
    file: str
    line: int
    argv: list[str]
    cwd: str

    def where(self, roots: dict[str, str]) -> str:
        """``file:line`` with the file relative to the skill (``roots``: prefix -> label)."""
        for prefix, label in roots.items():
            if self.file.startswith(prefix.rstrip("/") + "/"):
                return f"{label}{self.file[len(prefix.rstrip('/')) + 1 :]}:{self.line}"
        return f"{self.file}:{self.line}"

    def host(self) -> str | None:
        if self.event == "urllib.Request" and self.args and isinstance(self.args[0], str):
            return (urlsplit(self.args[0]).hostname or "").lower() or None
        if self.event in ("socket.getaddrinfo", "http.client.connect") and self.args:
            idx = 1 if self.event == "http.client.connect" else 0
            v = self.args[idx] if len(self.args) > idx else None
            return v.lower() if isinstance(v, str) else None
        if self.event == "socket.connect" and len(self.args) > 1 and isinstance(self.args[1], list) and self.args[1]:
            v = self.args[1][0]
            return v.lower() if isinstance(v, str) else None
        return None

    def path(self) -> str | None:
        if self.event in (
            "open",
            "os.remove",
            "os.rmdir",
            "os.rename",
            "shutil.rmtree",
            "os.chmod",
            "shutil.copyfile",
            "os.mkdir",
        ):
            v = self.args[0] if self.args else None
            if isinstance(v, str):
                return os.path.normpath(os.path.join(self.cwd, os.path.expanduser(v)))
        return None

    def writes(self) -> bool:
        """A call that changes the file system (an ``open`` only when it opens for writing)."""
        if self.event != "open":
            return self.event != "exec"
        mode = self.args[1] if len(self.args) > 1 else None
        flags = self.args[2] if len(self.args) > 2 else None
        if isinstance(mode, str):
            return any(c in mode for c in "wax+")
        return isinstance(flags, int) and (flags & 3 != 0 or flags & 0o100 != 0)

    def command(self) -> list[str]:
        if self.event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn") and len(self.args) > 1:
            a = self.args[1]
            return [str(x) for x in a] if isinstance(a, list) else [str(a)]
        if self.event == "os.system" and self.args:
            return [str(self.args[0])]
        return []


def install(workspace: Path) -> tuple[Path, dict[str, str]]:
    """Write the hook into ``workspace``; return its directory and the environment that loads it."""
    d = workspace / AUDIT_DIR
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (d / "preload.js").write_text((Path(__file__).parent / "node_preload.js").read_text())
    return d, {"PYTHONPATH": str(d), "NODE_OPTIONS": f"--require {d / 'preload.js'}"}


def read_records(audit_dir: Path) -> list[AuditRecord]:
    out: list[AuditRecord] = []
    for f in sorted(audit_dir.glob("audit-*.jsonl")):
        for line in f.read_text(errors="replace").splitlines():
            try:
                d = json.loads(line)
                out.append(
                    AuditRecord(
                        d["event"],
                        list(d.get("args") or []),
                        str(d["file"]),
                        int(d["line"]),
                        [str(a) for a in d.get("argv") or []],
                        str(d.get("cwd") or "/"),
                    )
                )
            except (ValueError, KeyError, TypeError):
                continue
    return out
