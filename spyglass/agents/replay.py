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

from spyglass.agents.adapters import adapter_for, adapter_named
from spyglass.agents.hooks import Decider, HookServer
from spyglass.agents.model_stub import StubServer, start_stub
from spyglass.agents.script import Script, load_script
from spyglass.agents.setup import agent_env, agent_kind
from spyglass.pipeline import RunContext

#: the name the agent uses for the stub inside a sandbox (resolved by the egress proxy only)
STUB_HOST = "spyglass-model.test"


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
        hooks: bool = True,
        ask: bool = False,
        decider: Decider | None = None,
        sandbox_dir: str | None = None,
    ) -> None:
        self.script = script if isinstance(script, Script) else load_script(script)
        self._own_scratch = scratch is None
        self.scratch = Path(scratch) if scratch is not None else Path(tempfile.mkdtemp(prefix="spyglass-stub-"))
        self.agent = agent or agent_kind(list(argv))
        self.stub: StubServer = start_stub(self.script, port, variables=dict(variables or {}), log_path=log_path)
        self.hooks: HookServer | None = None
        #: inside a sandbox (own network namespace, private /tmp) the agent reaches the stub by a
        #: name the egress proxy resolves to it, and sees ``scratch`` at ``sandbox_dir``
        self.sandbox_dir = sandbox_dir
        agent_url = f"http://{STUB_HOST}:{self.stub.port}/v1" if sandbox_dir else self.stub.url
        try:
            self.env = agent_env(list(argv), agent_url, self.scratch, base_env, self.script.model, self.agent)
            adapter = adapter_named(self.agent) if self.agent else adapter_for(None, list(argv))
            if hooks or ask:
                self.hooks = adapter.start_hooks(self.env, self.scratch, ask=ask, decider=decider, view=sandbox_dir)
            if sandbox_dir:
                self._to_sandbox_view(sandbox_dir)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return self.stub.url

    def _to_sandbox_view(self, inside: str) -> None:
        """Paths of ``scratch`` in the environment and in the files written there, as the sandbox sees them."""
        host = str(self.scratch)
        self.env = {k: v.replace(host, inside) for k, v in self.env.items()}
        for path in self.scratch.rglob("*"):
            if path.suffix in (".json", ".toml") and path.is_file() and not path.is_symlink():
                text = path.read_text(encoding="utf-8")
                if host in text:
                    path.write_text(text.replace(host, inside), encoding="utf-8")

    def sandbox_options(self) -> dict[str, Any]:
        """What the sandbox needs to let the agent reach the stub: the stub's name pinned to its
        address, allowed as spyglass's own service (the rest of the host's loopback stays shut)."""
        from spyglass.sandbox.resolve import default_resolver

        port = self.stub.port

        def resolver(host: str, want: int) -> Sequence[tuple[str, int]]:
            if host.lower() == STUB_HOST and want == port:
                return [("127.0.0.1", port)]
            return default_resolver(host, want)

        return {"own_services": [f"{STUB_HOST}:{port}", f"127.0.0.1:{port}"], "resolver": resolver}

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
            "hook_reports": len(self.hooks.reports) if self.hooks is not None else None,
            "agent_dir": None if self._own_scratch else str(self.scratch),
        }

    def done(self, ctx: RunContext) -> None:
        ctx.note_fact("model_stub", self.summary())

    def close(self) -> None:
        if self.hooks is not None:
            self.hooks.close()
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


def hooks_for_run(
    argv: Sequence[str],
    scratch: Path,
    *,
    sandbox_dir: str | None = None,
    ask: bool = False,
    decider: Decider | None = None,
    agent: str | None = None,
) -> tuple[list[str], HookServer] | None:
    """Per-run hooks for an agent running against its real model (``--ask``, ``--agent-hooks``):
    the command line that loads them and the server they report to; None if the agent has none.
    In a sandbox, ``scratch`` (under the run's private /tmp) is seen at ``sandbox_dir``."""
    adapter = adapter_named(agent) if agent else adapter_for(None, list(argv))
    got = adapter.hooks_argv(argv, scratch, ask=ask, decider=decider, view=sandbox_dir)
    if got is None or not sandbox_dir:
        return got
    new_argv, server = got
    host = str(scratch)
    for path in scratch.glob("*.json"):
        path.write_text(path.read_text(encoding="utf-8").replace(host, sandbox_dir), encoding="utf-8")
    return [a.replace(host, sandbox_dir) for a in new_argv], server
