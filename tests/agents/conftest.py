"""Shared fixtures of the agent tests: the `agents` marker, event streams shaped like real agent runs."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from spyglass.events import Event


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "agents: runs real agent CLIs (codex, mini-swe-agent) against the model stub"
    )


NODE_CODEX = "/w/.cache/agents/node_modules/.bin/codex"
NATIVE = "/w/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
WRAPPER = (
    '__CODEX_SNAPSHOT_OVERRIDE_SET_0="${CODEX_THREAD_ID+x}"\n. "/h/.codex/shell_snapshots/x.sh"\nexec "$@"'
)
SNAPSHOT = 'if [ -r "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi\necho \'# Snapshot file\'\ndeclare -f'


class Events:
    def __init__(self) -> None:
        self.out: list[Event] = []

    def add(self, **kw: object) -> None:
        self.out.append(Event(seq=len(self.out) + 1, **kw))  # type: ignore[arg-type]

    def start(self, pid: int, ppid: int | None) -> None:
        self.add(type="process.start", pid=pid, ppid=ppid)

    def exec(self, pid: int, exe: str, *argv: str, ok: bool = True) -> None:
        self.add(type="process.exec", pid=pid, exe=exe, argv=list(argv), ok=ok)

    def exit(self, pid: int, code: int = 0) -> None:
        self.add(type="process.exit", pid=pid, exit_code=code)

    def read(self, pid: int, path: str) -> None:
        self.add(type="file.read", pid=pid, path=path)


def codex_run(commands: list[str]) -> list[Event]:
    """node launcher -> native codex -> probes, shell snapshot, re-exec setup -> bash -lc CMD per command."""
    e = Events()
    e.start(100, None)
    e.exec(100, NODE_CODEX, NODE_CODEX, "exec", "--json", "task")
    e.exec(100, "/usr/local/bin/node", "node", NODE_CODEX, "exec", ok=False)  # PATH search miss
    e.exec(100, "/usr/bin/node", "node", NODE_CODEX, "exec", "--json", "task")
    e.start(101, 100)
    e.exec(101, NATIVE, NATIVE, "exec", "--json", "task")
    e.start(102, 101)
    e.exec(102, "/usr/bin/lsb_release", "lsb_release", "-a")
    e.start(103, 102)  # lsb_release's own subshell
    e.exec(103, "/usr/bin/getopt", "getopt", "--name", "lsb_release")
    e.exit(103)
    e.exit(102)
    e.start(104, 101)
    e.exec(104, "/usr/bin/getconf", "getconf", "LONG_BIT")
    e.exit(104)
    e.start(105, 101)
    e.exec(105, "/usr/bin/bash", "/bin/bash", "-lc", SNAPSHOT)
    e.start(106, 105)
    e.exec(106, "/usr/bin/id", "id", "-u")
    e.exit(106)
    e.exit(105)
    e.start(107, 101)
    e.exec(107, "/usr/bin/bash", "/bin/bash", "-c", 'set -e; . "/h/.codex/shell_snapshots/x.tmp-1"')
    e.exit(107)
    pid = 200
    for i, cmd in enumerate(commands):
        root = pid + 10 * i
        e.start(root, 101)
        e.exec(
            root, "/proc/99/exe", "/proc/self/exe", "--codex-run-as-process-setup", "51", "101", "pipe", ""
        )
        if i % 2:  # codex's other way: a wrapper restores its shell snapshot, then execs the command
            e.exec(root, "/usr/bin/bash", "/bin/bash", "-c", WRAPPER)
            e.exec(root, "/usr/bin/bash", "/bin/bash", "-c", cmd)
        else:
            e.exec(root, "/usr/bin/bash", "/bin/bash", "-lc", cmd)
        e.start(root + 1, root)
        e.exec(root + 1, "/usr/bin/id", "id", "-u")  # the login profile
        e.exit(root + 1)
        e.start(root + 2, root)
        e.exec(root + 2, "/usr/bin/python3", "python3", "x.py")
        e.read(root + 2, f"/w/file{i}")
        e.exit(root + 2)
        e.exit(root, 3 if "fail" in cmd else 0)
    e.add(
        type="file.create", pid=101, path="/h/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-x.jsonl"
    )
    e.exit(101)
    e.exit(100)
    return e.out


def rollout(commands: list[str]) -> str:
    lines = []
    for i, cmd in enumerate(commands, start=1):
        lines.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": f"c{i}",
                    "arguments": json.dumps({"cmd": cmd}),
                },
            }
        )
        lines.append(
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": f"c{i}"}}
        )
    return "".join(json.dumps(x) + "\n" for x in lines)


@pytest.fixture
def codex_events() -> Callable[[list[str]], list[Event]]:
    """codex_events(["cmd", ...]): the events of a codex run that ran those commands."""
    return codex_run


@pytest.fixture
def make_rollout() -> Callable[[list[str]], str]:
    """make_rollout(["cmd", ...]): a codex session rollout whose model asked for those commands."""
    return rollout


@pytest.fixture
def events() -> Events:
    """A builder of hand-written event streams (``events.start(pid, ppid)``, ``events.exec(...)`` ...)."""
    return Events()
