"""``spyglass run --model-script``: a stub model for the duration of one run.

    with stub_session("session.json", command, dict(os.environ)) as session:
        request.env = session.env          # the agent talks to the stub
        outcome = record(request, backend, store, sinks)
        meta_extra["model_stub"] = session.summary()

The stub listens on 127.0.0.1 (a free port unless one is given); the agent
is pointed at it through its environment (:func:`spyglass.agents.setup.agent_env`):
``OPENAI_BASE_URL``/``OPENAI_API_BASE`` for any OpenAI client, a generated
``CODEX_HOME`` for codex, the no-setup variables for mini-swe-agent.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from spyglass.agents.model_stub import StubServer, start_stub
from spyglass.agents.script import Script, load_script
from spyglass.agents.setup import agent_env, agent_kind
from spyglass.pipeline import RunContext


class StubSession:
    """A started stub, the agent's environment pointing at it, and a scratch directory.

    It is also a pipeline sink: at the end of the run it stores :meth:`summary`
    in the run's metadata (``run.json`` ``extra.model_stub``).
    """

    name = "model-stub"

    def __init__(
        self,
        script: str | Path | Script,
        argv: Sequence[str],
        base_env: Mapping[str, str],
        *,
        port: int = 0,
        variables: Mapping[str, str] | None = None,
        log_path: str | Path | None = None,
        scratch: str | Path | None = None,
        agent: str | None = None,
    ) -> None:
        self.script = script if isinstance(script, Script) else load_script(script)
        self._own_scratch = scratch is None
        self.scratch = (
            Path(scratch) if scratch is not None else Path(tempfile.mkdtemp(prefix="spyglass-stub-"))
        )
        self.agent = agent or agent_kind(list(argv))
        self.stub: StubServer = start_stub(
            self.script, port, variables=dict(variables or {}), log_path=log_path
        )
        try:
            self.env = agent_env(
                list(argv), self.stub.url, self.scratch, base_env, self.script.model, self.agent
            )
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return self.stub.url

    def summary(self) -> dict[str, Any]:
        """What the stub served, for the run's metadata."""
        return {
            "script": self.script.source,
            "url": self.stub.url,
            "agent": self.agent,
            "steps": len(self.script),
            "requests": len(self.stub.requests),
            "steps_served": self.stub.steps_served,
            "errors": [r.error for r in self.stub.requests if r.error],
        }

    def done(self, ctx: RunContext) -> None:
        ctx.note_fact("model_stub", self.summary())

    def close(self) -> None:
        self.stub.close()
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> StubSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def stub_session(
    script: str | Path | Script,
    argv: Sequence[str],
    base_env: Mapping[str, str],
    **kwargs: Any,
) -> StubSession:
    """Start a stub serving ``script`` and build the environment for ``argv`` (see :class:`StubSession`)."""
    return StubSession(script, argv, base_env, **kwargs)
