"""Real agents: a scripted model server, agent configuration, and agent awareness.

* :mod:`spyglass.agents.script`: the script format (assistant turns a stub model answers with).
* :mod:`spyglass.agents.model_stub`: an OpenAI-compatible HTTP server on loopback that serves a script.
* :mod:`spyglass.agents.setup`: pointing codex and mini-swe-agent at a stub (CODEX_HOME, env).
* :mod:`spyglass.agents.agent_logs`: tool calls read from agent logs (codex ``--json``, mini trajectories).
* :mod:`spyglass.agents.awareness`: which processes are the agent's own, which ran a tool call.
* :mod:`spyglass.agents.recording`: a script made from a recorded agent session, for replay.

Nothing is imported here: the CLI imports what it needs when a command runs.
"""
