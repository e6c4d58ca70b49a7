"""What each known agent keeps for itself, and where a launched program is installed.

Two facts the rules need about the program the user launched:

* ``STATE_GLOBS``: per agent kind, the files the agent writes as its own state
  (config it rewrites, caches, SQLite databases and their journals, locks,
  bundled system skills, shell snapshots, session transcripts, its own login).
  The agent writing these is not persistence; anything else writing them is.
  Instructions and settings a user writes (``config.toml``, ``AGENTS.md``,
  ``settings.json``, user skills, hooks) are deliberately not in these lists.
* :func:`install_trees`: the directories a launched program is installed in
  (its ``node_modules``, its virtualenv, its prefix), trusted for exec: the
  user chose to run that program, with its interpreter and vendored binaries.

This module is a leaf (it imports nothing of spyglass) so the agent adapters
can take its tables over as they are.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

#: agent kind -> globs (``~`` is the run's HOME) of the agent's own state files
STATE_GLOBS: dict[str, tuple[str, ...]] = {
    "codex": (
        "~/.codex", "~/.codex/skills", "~/.codex/memories/**", "~/.codex/*.sqlite", "~/.codex/*.sqlite-*",
        "~/.codex/*.db", "~/.codex/*.db-*",
        "~/.codex/installation_id", "~/.codex/auth.json", "~/.codex/version.json",
        "~/.codex/models_cache.json", "~/.codex/internal_storage.json", "~/.codex/history.jsonl",
        "~/.codex/*.tmp", "~/.codex/.tmp*/**", "~/.codex/tmp/**", "~/.codex/cache/**",
        "~/.codex/sessions/**", "~/.codex/archived_sessions/**", "~/.codex/log/**", "~/.codex/logs/**",
        "~/.codex/shell_snapshots/**", "~/.codex/thread-writer-locks/**", "~/.codex/skills/.system/**",
        "~/.codex/*.lock", "~/.codex/.lock*",
    ),
    "claude_code": (
        "~/.claude", "~/.claude.json", "~/.claude.json.*", "~/.claude/projects/**", "~/.claude/todos/**",
        "~/.claude/statsig/**", "~/.claude/shell-snapshots/**", "~/.claude/ide/**",
        "~/.claude/history.jsonl", "~/.claude/.credentials.json", "~/.claude/session-env/**",
        "~/.claude/file-history/**", "~/.claude/plans/**", "~/.claude/debug/**", "~/.claude/*.lock",
        "~/.claude/local/**", "~/.claude/downloads/**",
    ),
    "mini": (
        "~/.config", "~/.config/mini-swe-agent", "~/.config/mini-swe-agent/.env",
        "~/.config/mini-swe-agent/*.traj.json",
        "~/.config/mini-swe-agent/last_*", "~/.local/share/mini-swe-agent/**",
    ),
    "aider": ("~/.aider/**", "~/.aider.*.history*", "~/.aider*"),
    "goose": ("~/.config/goose/sessions/**", "~/.local/share/goose/**", "~/.local/state/goose/**"),
    "opencode": ("~/.local/share/opencode/**", "~/.local/state/opencode/**"),
}

#: directories too wide to trust as a whole because a program sits in them
_TOO_WIDE = frozenset({"/", "/tmp", "/var/tmp", "/dev/shm", "/home", "/root", "/usr", "/usr/local", "/opt"})


#: agent kind -> markers of its program: base names, and path parts of its package
PROGRAM_MARKERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "codex": (("codex", "codex.js"), ("/@openai/codex",)),
    "claude_code": (("claude", "claude.exe", "cli.js"), ("/@anthropic-ai/claude-code",)),
    "mini": (("mini", "mini-swe-agent", "mini-extra"), ("/minisweagent/",)),
    "aider": (("aider",), ("/aider/",)),
    "goose": (("goose",), ()),
    "opencode": (("opencode",), ("/opencode-ai/",)),
}


def agent_kind(programs: list[str]) -> str | None:
    """The agent a launched program is, from its resolved paths (package directory first,
    then the file name); None for anything else."""
    for kind, (_names, parts) in PROGRAM_MARKERS.items():
        if any(part in p for p in programs for part in parts):
            return kind
    for kind, (names, _parts) in PROGRAM_MARKERS.items():
        if any(p.rsplit("/", 1)[-1] in names for p in programs):
            if kind == "claude_code" and all(p.rsplit("/", 1)[-1] == "cli.js" for p in programs):
                continue
            return kind
    return None


def state_globs(kind: str | None) -> list[str]:
    """The state globs of one agent kind (none for an unknown program)."""
    return list(STATE_GLOBS.get(kind, ())) if kind else []


def resolve_program(argv0: str, cwd: str, env: Mapping[str, str] | None = None) -> str | None:
    """The file ``argv0`` runs: a path (relative to ``cwd``) or a name looked up on PATH."""
    if not argv0:
        return None
    if "/" in argv0:
        path = os.path.join(cwd, argv0)
        return os.path.abspath(path) if os.path.exists(path) else None
    found = shutil.which(argv0, path=(env or os.environ).get("PATH"))
    return os.path.abspath(found) if found else None


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    parts = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not parts:
        return None
    if parts[0].endswith("/env") and len(parts) > 1:
        return shutil.which(parts[-1] if parts[1].startswith("-") else parts[1])
    return parts[0]


def _tree_of(path: str, home: str | None) -> str | None:
    """The install tree a program file belongs to: the outermost ``node_modules`` on its
    path, the virtualenv holding it, or the prefix of a ``bin`` directory."""
    parts = path.split("/")
    if "node_modules" in parts:
        i = parts.index("node_modules")
        return "/".join(parts[: i + 1])
    d = os.path.dirname(path)
    while d not in ("/", ""):
        if os.path.exists(os.path.join(d, "pyvenv.cfg")):
            return d
        d = os.path.dirname(d)
    parent = os.path.dirname(path)
    if os.path.basename(parent) == "bin":
        prefix = os.path.dirname(parent)
        if prefix not in _TOO_WIDE and prefix != home:
            return prefix
    return None


def install_trees(argv: list[str], cwd: str, env: Mapping[str, str] | None = None,
                  home: str | None = None) -> dict[str, object]:
    """What the user launched with ``argv``: ``programs`` (the program file as named and
    resolved), ``interpreters`` (its ``#!`` interpreter), ``trees`` (their install trees)
    and ``kind`` (the agent it is, or None)."""
    programs: list[str] = []
    interpreters: list[str] = []
    trees: list[str] = []
    first = resolve_program(argv[0], cwd, env) if argv else None
    if first is None:
        return {"programs": [], "interpreters": [], "trees": [], "kind": None}
    for p in (first, os.path.realpath(first)):
        if p not in programs:
            programs.append(p)
    interp = _shebang(os.path.realpath(first))
    if interp:
        for p in (interp, os.path.realpath(interp)):
            if p not in interpreters:
                interpreters.append(p)
    for p in programs + interpreters:
        t = _tree_of(p, home)
        if t and t not in trees and t not in _TOO_WIDE and t != home:
            trees.append(t)
    return {"programs": programs, "interpreters": interpreters, "trees": trees, "kind": agent_kind(programs)}
