"""Real agents: a scripted model server, agent adapters, and agent awareness.

* :mod:`spyglass.agents.adapters`: one adapter per agent CLI (codex, Claude Code, mini-swe-agent,
  generic): recognising it, preparing it for the stub, reading its logs, its state files, hooks, MCP servers.
* :mod:`spyglass.agents.script`: the script format (assistant turns a stub model answers with).
* :mod:`spyglass.agents.model_stub`: the HTTP server on loopback that serves a script, in the wire
  formats of :mod:`spyglass.agents.wire_openai` and :mod:`spyglass.agents.wire_anthropic`.
* :mod:`spyglass.agents.setup`: the environment an adapter prepares for the stub (CODEX_HOME, config dirs).
* :mod:`spyglass.agents.agent_logs`: tool calls read from agent logs (the data model, the dispatch).
* :mod:`spyglass.agents.awareness`: which processes are the agent's own, which ran a tool call
  (:mod:`spyglass.agents.view` holds what it finds; :mod:`spyglass.agents.mcp` the MCP servers).
* :mod:`spyglass.agents.hooks`: live tool-call reports from the agent's own hooks (Claude Code).
* :mod:`spyglass.agents.ask`: "ask before it runs": the policy's look at a tool call before it runs.
* :mod:`spyglass.agents.recording`: a script made from a recorded agent session, for replay.
* :mod:`spyglass.agents.replay`: the stub for one run (``--model-script``), and per-run hooks.

Nothing is imported here: the CLI imports what it needs when a command runs.
"""
