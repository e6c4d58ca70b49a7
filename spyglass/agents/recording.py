"""A model script made from a recorded agent session, for replaying it exactly.

Each assistant turn of the log becomes one step: its text (``say``) and the
shell commands it ran (``run``).  Non-shell tool calls of a codex rollout
(``update_plan`` ...) are kept as explicit ``tool_calls``.  The last turn of a
codex session is its final answer; a mini-swe-agent session ends with the
command that printed ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, kept as is.
"""

from __future__ import annotations

import json

from spyglass.agents.agent_logs import AgentLog
from spyglass.agents.script import DEFAULT_MODEL, Script, Step, ToolCallSpec


def script_from_log(log: AgentLog, model: str = DEFAULT_MODEL) -> Script:
    """The script that makes a stub model answer as the recorded model did."""
    steps: list[Step] = []
    for turn in log.turns:
        others = []
        for name, args in turn.other_calls:
            try:
                parsed = json.loads(args)
            except ValueError:
                parsed = args
            others.append(ToolCallSpec(name, parsed if isinstance(parsed, dict | str) else args))
        if turn.text is None and not turn.calls and not others:
            continue
        steps.append(Step(say=turn.text, run=tuple(c.command for c in turn.calls), tool_calls=tuple(others)))
    if not steps:
        steps.append(Step(say="(the recorded session had no assistant turns)"))
    return Script(steps=tuple(steps), model=model, source=log.source or "<agent log>")
