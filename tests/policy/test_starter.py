"""`spyglass policy init` writes a file that means exactly the built-in defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from spyglass.evidence.gate import DEFAULT_REQUIREMENTS
from spyglass.policy import Policy, load_policy
from spyglass.policy.model import RulesPolicy

_IDENTITY = ("source", "base_dir", "digest", "text", "origin")  # where it came from, not what it says


def _meaning(p: Policy) -> dict[str, Any]:
    data = msgspec.to_builtins(p)
    for k in _IDENTITY:
        data.pop(k)
    return data


def test_starter_loads_equal_to_the_defaults(spy: Any, tmp_path: Path) -> None:
    path = tmp_path / "spyglass.yaml"
    res = spy("policy", "init", str(path))
    assert res.exit_code == 0, res.output
    starter = load_policy(path, tmp_path)
    default = Policy.default(tmp_path)
    assert _meaning(starter) == _meaning(default)
    assert starter.fail_on is None  # `run` does not start failing on alerts
    assert starter.workspace == ()  # the run's directory, as without a file
    assert tuple(starter.gate) == tuple(DEFAULT_REQUIREMENTS)
    assert starter.rules == RulesPolicy()
    # every top-level key of the policy file is written out (set or commented)
    import json

    from spyglass.policy.loader import __file__ as loader_file

    schema = json.loads((Path(loader_file).parent.parent / "schemas" / "policy.schema.json").read_text())
    text = path.read_text()
    for key in schema["properties"]:
        assert f"\n{key}:" in text or f"\n# {key}:" in text, key
    assert isinstance(yaml.safe_load(text), dict)


def test_starter_passes_lint(spy: Any, tmp_path: Path) -> None:
    path = tmp_path / "spyglass.yaml"
    assert spy("policy", "init", str(path)).exit_code == 0
    res = spy("policy", "lint", str(path))
    assert res.exit_code == 0, res.output
