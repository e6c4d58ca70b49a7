"""A task suite on disk, in the layout agent-skill benchmarks share.

::

    SUITE/
      inject.yaml                  optional: the injections `--inject` uses by default
      TASK/
        instruction.md             what the agent is asked to do
        task.toml                  optional: [metadata], [agent] timeout_sec, [verifier] timeout_sec
        environment/               files the workspace starts with (copied fresh for every trial)
        skills/NAME/SKILL.md       skills given to the agent (placed where each agent looks)
        solution/solve.sh          optional: a reference solution (never shown to the agent)
        tests/test.sh              the verifier: runs in the workspace after the agent, writes a reward
        model/script.json          optional: a scripted model (spyglass's model-stub format); without
                                   one the agent talks to the user's real model

A directory is a task when it holds ``instruction.md``.  The verifier writes
its reward (a number, 1 for success) to ``$REWARD_FILE``; without a reward
file the verifier's exit status decides (0: reward 1).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import SourceError, UsageError


class Task(msgspec.Struct, frozen=True):
    name: str
    dir: Path
    instruction: str
    config: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def environment(self) -> Path | None:
        p = self.dir / "environment"
        return p if p.is_dir() else None

    @property
    def skills(self) -> list[Path]:
        root = self.dir / "skills"
        if not root.is_dir():
            return []
        return sorted(p for p in root.iterdir() if (p / "SKILL.md").is_file())

    @property
    def verifier(self) -> Path | None:
        p = self.dir / "tests" / "test.sh"
        return p if p.is_file() else None

    @property
    def model_script(self) -> Path | None:
        p = self.dir / "model" / "script.json"
        return p if p.is_file() else None

    def timeout(self, section: str, default: float) -> float:
        sec = self.config.get(section)
        value = sec.get("timeout_sec") if isinstance(sec, dict) else None
        return float(value) if isinstance(value, int | float) and value > 0 else default


class Suite(msgspec.Struct, frozen=True):
    dir: Path
    tasks: list[Task]

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def inject_file(self) -> Path | None:
        p = self.dir / "inject.yaml"
        return p if p.is_file() else None

    def task(self, name: str) -> Task:
        for t in self.tasks:
            if t.name == name:
                return t
        raise UsageError(f"no task {name!r} in {self.dir}", hint=f"tasks: {', '.join(t.name for t in self.tasks)}")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not UTF-8 text (byte {exc.start})", str(path)) from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror}", str(path)) from None


def load_task(directory: Path) -> Task:
    instruction = _text(directory / "instruction.md").strip()
    if not instruction:
        raise SourceError("instruction.md is empty", str(directory / "instruction.md"), 1, 1)
    config: dict[str, Any] = {}
    toml_path = directory / "task.toml"
    if toml_path.is_file():
        try:
            config = tomllib.loads(_text(toml_path))
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
            line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
            msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
            raise SourceError(f"not valid TOML: {msg}", str(toml_path), line, col) from None
    for section in ("agent", "verifier"):
        sec = config.get(section)
        value = sec.get("timeout_sec") if isinstance(sec, dict) else None
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value <= 0):
            raise SourceError(f"[{section}] timeout_sec must be a positive number of seconds, not {value!r}",
                              str(toml_path))
    return Task(name=directory.name, dir=directory.resolve(), instruction=instruction, config=config)


def load_suite(directory: str | Path, only: list[str] | None = None) -> Suite:
    """The tasks of a suite directory (or a single task directory), sorted by name."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"no suite at {root}", hint="give a directory of task folders (each with instruction.md)")
    if (root / "instruction.md").is_file():
        tasks = [load_task(root)]
    else:
        tasks = [load_task(d) for d in sorted(root.iterdir()) if d.is_dir() and (d / "instruction.md").is_file()]
    if only:
        unknown = sorted(set(only) - {t.name for t in tasks})
        if unknown:
            raise UsageError(f"no task {unknown[0]!r} in {root}")
        tasks = [t for t in tasks if t.name in only]
    if not tasks:
        raise UsageError(f"{root} holds no task", hint="a task is a folder with instruction.md")
    return Suite(dir=root.resolve(), tasks=tasks)
