"""What the user launched: the program, its interpreter, their install trees, and which agent it is.

The rules trust the directories a launched program is installed in (its
``node_modules``, its virtualenv, its prefix) for exec: the user chose to run
that program, with its interpreter and vendored binaries.  Which agent it is
comes from the adapters (:func:`spyglass.agents.adapters.launched_agent`),
whose declared state files are then its own (``file.agent_state``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from spyglass.agents.adapters import launched_agent
from spyglass.capture.which import which

#: directories too wide to trust as a whole because a program sits in them
_TOO_WIDE = frozenset({"/", "/tmp", "/var/tmp", "/dev/shm", "/home", "/root", "/usr", "/usr/local", "/opt"})


def resolve_program(argv0: str, cwd: str, env: Mapping[str, str] | None = None) -> str | None:
    """The file ``argv0`` runs: a path (relative to ``cwd``) or a name looked up on PATH."""
    if not argv0:
        return None
    if "/" in argv0:
        path = os.path.join(cwd, argv0)
        return os.path.abspath(path) if os.path.exists(path) else None
    found = which(argv0, (env or os.environ).get("PATH"))
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
        return which(parts[-1] if parts[1].startswith("-") else parts[1])
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
    and ``kind`` (the name of the agent adapter it is, or None)."""
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
    agent = launched_agent(programs)
    return {"programs": programs, "interpreters": interpreters, "trees": trees, "kind": agent and agent.name}
