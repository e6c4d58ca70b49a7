"""What every agent adapter provides, and the helpers they share.

An adapter knows one agent CLI: how to recognise it (by the package its
executable belongs to, with its program name as the fallback for records of
other machines), how to point it at the model stub, how to read its session
log into tool calls and claims, which files are its own state (for the rules
and the workspace evidence), where its install tree is (for exec trust), and
which MCP servers its configuration starts.  Copy ``generic.py`` to add one.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spyglass.agents.agent_logs import AgentLog

if TYPE_CHECKING:  # the hooks' server loads only in a run that starts it
    from spyglass.agents.hooks import Decider, HookServer


def base(s: str | None) -> str:
    return s.rsplit("/", 1)[-1] if s else ""


@functools.lru_cache(maxsize=512)
def npm_package(path: str) -> tuple[str, str] | None:
    """(name, directory) of the npm package a file belongs to: the nearest ``package.json``
    above its resolved path that names a package, or None (also when the path does not exist here)."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    d = os.path.dirname(real)
    for _ in range(8):
        pj = os.path.join(d, "package.json")
        try:
            with open(pj, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return data["name"], d
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return None


@functools.lru_cache(maxsize=512)
def python_dist(script: str, dist: str) -> str | None:
    """The ``site-packages`` directory holding ``DIST-*.dist-info`` of the environment a
    console script (``VENV/bin/NAME``) belongs to, or None."""
    try:
        real = Path(os.path.realpath(script))
    except (OSError, ValueError):
        return None
    lib = real.parent.parent / "lib"
    want = dist.replace("-", "_").lower()
    try:
        for site in lib.glob("python3*/site-packages"):
            for info in site.glob("*.dist-info"):
                if info.name.lower().startswith(want + "-"):
                    return str(site)
    except OSError:
        return None
    return None


class AgentAdapter:
    """One agent CLI.  The defaults describe an agent spyglass knows nothing about."""

    #: short name used in run.json (``extra.agent.agent``), ``--agent`` and the docs
    name = "generic"
    #: what the docs and ``show`` call it
    title = "generic agent"
    #: the package it is installed from (npm or PyPI), for the docs
    package = ""
    #: what it gives: tool calls "live" (process tree), "transcript", "hooks", "claims"
    gives: tuple[str, ...] = ("live",)
    #: text in a shell script that marks a script the agent runs for itself
    internal_markers: tuple[str, ...] = ()
    #: text marking a wrapper that sets up and then execs the model's command in the same process
    wrapper_markers: tuple[str, ...] = ()
    #: commands (whole command strings) the agent runs for itself through a shell
    internal_commands: frozenset[str] = frozenset()
    #: paths it writes its session log to
    log_patterns: tuple[re.Pattern[str], ...] = ()
    #: globs (``~`` is the run's HOME) of its own state: config it rewrites, caches, databases and
    #: their journals, locks, bundled system skills, shell snapshots, session transcripts, its login.
    #: It writing these is not persistence; anything else writing them is.  Instructions and
    #: settings a user writes (``config.toml``, ``AGENTS.md``, ``settings.json``, user skills,
    #: hooks) are deliberately not in it.
    state: tuple[str, ...] = ()
    #: file names of its program, and parts of the path of the package it is installed from:
    #: how the program a user launched (its resolved paths) is known to be this agent
    program_names: tuple[str, ...] = ()
    package_parts: tuple[str, ...] = ()

    # -- recognising --------------------------------------------------------------
    def identify(self, exe: str | None, argv: Sequence[str] | None) -> bool:
        """Is this exec the agent itself (its launcher, binary or a re-execution)?"""
        return False

    def is_setup_reexec(self, argv: Sequence[str] | None) -> bool:
        """A re-execution of the agent that sets a command up and then becomes it."""
        return False

    def is_package_of(self, programs: Sequence[str]) -> bool:
        """Is a launched program (as named and resolved) a file of this agent's package?"""
        return any(part in p for p in programs for part in self.package_parts)

    def is_named_in(self, programs: Sequence[str]) -> bool:
        """Does a launched program (as named and resolved) carry one of this agent's program names?"""
        return any(base(p) in self.program_names for p in programs)

    def model_command(self, text: str) -> str:
        """The model's command inside the shell script the agent runs it with (default: as is)."""
        return text

    # -- the model stub ---------------------------------------------------------------
    def prepare_env(
        self, env: dict[str, str], stub_url: str, scratch: Path, model: str, argv: Sequence[str]
    ) -> dict[str, str]:
        """``env`` (a copy of the user's) changed so that the agent talks to the stub at
        ``stub_url`` (``http://127.0.0.1:PORT/v1``) with its state in ``scratch``."""
        env.update(
            {
                "OPENAI_BASE_URL": stub_url,
                "OPENAI_API_BASE": stub_url,
                "OPENAI_API_KEY": env.get("OPENAI_API_KEY") or "spyglass-stub",
                "ANTHROPIC_BASE_URL": stub_url.removesuffix("/v1"),
                "ANTHROPIC_API_KEY": "spyglass-stub",
            }
        )
        return env

    def prepare_env_in_home(self, env: dict[str, str], stub_url: str, model: str) -> dict[str, str] | None:
        """Like :meth:`prepare_env`, but the agent keeps its real layout: its configuration for the
        stub is written into its own home (:meth:`home`; for a HOME made for the run, as a bench
        trial's).  None where it has no such home: then :meth:`prepare_env` with a scratch directory."""
        return None

    def start_hooks(
        self, env: dict[str, str], scratch: Path, *, ask: bool = False, decider: Decider | None = None,
        view: str | None = None,
    ) -> HookServer | None:
        """Install per-run hooks that report each tool call live (and let ``decider`` deny one),
        in the configuration :meth:`prepare_env` made; None if the agent has no hooks.  ``view``:
        where the agent sees ``scratch`` (a sandbox's private /tmp), when not at its own path."""
        return None

    def hooks_argv(
        self, argv: Sequence[str], scratch: Path, *, ask: bool = False, decider: Decider | None = None,
        view: str | None = None,
    ) -> tuple[list[str], HookServer] | None:
        """For a run against its real model: ``argv`` changed to load per-run hooks (written in
        ``scratch``) besides the user's own configuration, and the server they report to; None if
        the agent has no hooks."""
        return None

    # -- its logs ---------------------------------------------------------------------
    def parse_log(self, text: str, whole: Any, lines: list[dict[str, Any]], source: str) -> AgentLog | None:
        """The log read, if it is in a format of this agent (``whole``: the text as one JSON
        value or None; ``lines``: the JSON-lines objects), else None."""
        return None

    def looks_like_log(self, path: str) -> bool:
        return any(p.search(path) for p in self.log_patterns)

    def log_from_argv(self, argv: Sequence[str] | None, cwd: str | None) -> str | None:
        """The log file its command line names, if any."""
        return None

    # -- its files --------------------------------------------------------------------
    def home(self, env: Mapping[str, str]) -> Path | None:
        """The directory it keeps its configuration, skills and state in under ``env``, or None."""
        return None

    def state_globs(self, home: str) -> list[str]:
        """:attr:`state` under ``home``: writing these is the agent doing its job, not a change to report."""
        h = home.rstrip("/")
        return [h + g[1:] if g.startswith("~/") else g for g in self.state]

    def install_root(self, exe: str | None, argv: Sequence[str] | None = None) -> str | None:
        """The directory of its install tree (trusted for exec), from the executable seen."""
        return None

    def mcp_servers(self, cwd: str, env: Mapping[str, str], argv: Sequence[str] = ()) -> dict[str, list[str]]:
        """MCP servers its configuration starts over stdio: name -> argv."""
        return {}
