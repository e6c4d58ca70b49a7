"""A stub for the duration of one run (`spyglass run --model-script`)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from spyglass.agents.replay import stub_session
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store.meta import RunMeta


def test_stub_session_points_codex_at_the_stub_and_cleans_up(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [{"say": "hi"}]}))
    with stub_session(script, ["codex", "exec", "x"], {"PATH": "/bin"}) as session:
        scratch = session.scratch
        assert session.agent == "codex"
        assert session.env["OPENAI_BASE_URL"] == session.url and session.env["PATH"] == "/bin"
        config = (Path(session.env["CODEX_HOME"]) / "config.toml").read_text()
        assert f'base_url = "{session.url}"' in config
        with urllib.request.urlopen(f"{session.url}/models", timeout=10) as resp:
            assert resp.status == 200
        meta = RunMeta(id="r")
        pipe = Pipeline([session], RunContext(run=meta))
        pipe.start()
        pipe.done()
        assert meta.extra["model_stub"]["requests"] == 1
        assert meta.extra["model_stub"]["script"] == str(script)
    assert not scratch.exists()


def test_a_wrapper_command_can_name_the_agent(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [{"say": "hi"}]}))
    with stub_session(script, ["sh", "-c", "mini -y"], {}, agent="mini", variables={"A": "1"}) as session:
        assert session.env["MSWEA_CONFIGURED"] == "true"
        assert session.stub.variables == {"A": "1"}
