"""Agents spyglass knows by their program and their own files only: aider, goose, opencode.

Each declares the file names and package of its program (so a run that
launches it trusts its writes to its own state) and its state globs; none
recognises its execs, prepares a stub environment or reads a log, so a run of
one is followed like the generic agent's (the process tree gives its tool
calls).  Move one to a module of its own when it gets more than that.
"""

from __future__ import annotations

from spyglass.agents.adapters.base import AgentAdapter


class AiderAdapter(AgentAdapter):
    name = "aider"
    title = "aider"
    package = "aider-chat (PyPI)"
    state = ("~/.aider/**", "~/.aider.*.history*", "~/.aider*")
    program_names = ("aider",)
    package_parts = ("/aider/",)


class GooseAdapter(AgentAdapter):
    name = "goose"
    title = "goose"
    package = "goose (release binary)"
    state = ("~/.config/goose/sessions/**", "~/.local/share/goose/**", "~/.local/state/goose/**")
    program_names = ("goose",)


class OpencodeAdapter(AgentAdapter):
    name = "opencode"
    title = "opencode"
    package = "opencode-ai (npm)"
    state = ("~/.local/share/opencode/**", "~/.local/state/opencode/**")
    program_names = ("opencode",)
    package_parts = ("/opencode-ai/",)
