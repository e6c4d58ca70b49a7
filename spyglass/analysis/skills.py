"""Skill directories: recognising skills and listing their files.

A skill in the Agent Skills layout is a directory with a ``SKILL.md`` whose
YAML front matter gives ``name`` and ``description``, and optionally
``scripts/``, ``references/`` and ``assets/``.  A directory given as a skill is
read as follows:

* it holds a ``SKILL.md``: one skill, named by the front matter (else by the
  directory name);
* else, each sub-directory (at any depth up to 3) holding a ``SKILL.md`` is a
  skill: a collection such as ``~/.claude/skills``;
* else the directory as a whole is one skill named after it.

A skill's files are its regular files, leaving out hidden files and
directories, ``__pycache__`` and compiled Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec

from spyglass.errors import UsageError

SKILL_FILE: Final = "SKILL.md"
PARTS: Final = ("scripts", "references", "assets")
MAX_FILES: Final = 20000
_SKIP_DIRS: Final = frozenset({"__pycache__", "node_modules"})


class Skill(msgspec.Struct, frozen=True):
    name: str
    dir: str  # absolute
    description: str | None = None
    files: tuple[str, ...] = ()  # relative POSIX paths, sorted
    agent_skill: bool = False  # has SKILL.md
    problems: tuple[str, ...] = ()

    def part(self, rel: str) -> str:
        """Which part of the layout a file belongs to: ``SKILL.md``, ``scripts`` … or ``other``."""
        if rel == SKILL_FILE:
            return SKILL_FILE
        head = rel.split("/", 1)[0]
        return head if head in PARTS else "other"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dir": self.dir,
            "description": self.description,
            "agent_skill": self.agent_skill,
            "files": list(self.files),
            "problems": list(self.problems),
        }


def parse_front_matter(text: str) -> tuple[dict[str, Any], list[str]]:
    """The YAML front matter of a SKILL.md as a dict, and any problems found."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, ["SKILL.md has no front matter (a first line '---')"]
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return {}, ["SKILL.md front matter is not closed by '---'"]
    body = "\n".join(lines[1:end])
    import yaml

    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        return {}, [f"SKILL.md front matter is not valid YAML{where}: {getattr(exc, 'problem', exc)}"]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return {}, ["SKILL.md front matter is not a mapping"]
    problems = [f"SKILL.md front matter has no {k!r}" for k in ("name", "description") if not data.get(k)]
    return data, problems


def list_files(root: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        base = Path(dirpath)
        for fn in filenames:
            if fn.startswith(".") or fn.endswith((".pyc", ".pyo")):
                continue
            p = base / fn
            if p.is_file():
                out.append(p.relative_to(root).as_posix())
                if len(out) >= MAX_FILES:
                    return sorted(out)
    return sorted(out)


def load_skill(path: str | Path) -> Skill:
    """One skill directory (with or without SKILL.md)."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise UsageError(f"skill directory not found: {path}")
    files = tuple(list_files(root))
    md = root / SKILL_FILE
    if not md.is_file():
        return Skill(name=root.name, dir=str(root), files=files)
    try:
        text = md.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return Skill(name=root.name, dir=str(root), files=files, agent_skill=True, problems=(str(exc),))
    meta, problems = parse_front_matter(text)
    name = meta.get("name")
    desc = meta.get("description")
    return Skill(
        name=str(name) if name else root.name,
        dir=str(root),
        description=str(desc) if desc else None,
        files=files,
        agent_skill=True,
        problems=tuple(problems),
    )


def find_skills(paths: Iterable[str | Path], max_depth: int = 3) -> list[Skill]:
    """The skills in the given directories (a skill, or a collection of skills)."""
    out: list[Skill] = []
    for p in paths:
        root = Path(p).expanduser().resolve()
        if not root.is_dir():
            raise UsageError(f"skill directory not found: {p}")
        if (root / SKILL_FILE).is_file():
            out.append(load_skill(root))
            continue
        found = _nested_skill_dirs(root, max_depth)
        if found:
            out.extend(load_skill(d) for d in found)
        else:
            out.append(load_skill(root))
    return out


def _nested_skill_dirs(root: Path, max_depth: int) -> list[Path]:
    found: list[Path] = []
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).parts) - base_depth
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        if depth > 0 and SKILL_FILE in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []
        elif depth >= max_depth:
            dirnames[:] = []
    return sorted(found)
