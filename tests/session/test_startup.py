"""The start-up path of ``spyglass run``: what a run imports before and while it records.

Each test runs ``spyglass run -q -- true`` in a fresh interpreter (a real run, real
backend) and looks at ``sys.modules`` when it exits: the modules a backend or
feature does not use must not be loaded (their import time is start-up time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _modules_of_run(tmp_path: Path, backend: str, *options: str) -> set[str]:
    """The modules loaded by ``spyglass run -q --backend BACKEND [OPTIONS] -- true`` (its exit code checked)."""
    out = tmp_path / "modules.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
        "from spyglass.cli.main import main\n"
        f"main(['run', '-q', '--backend', {backend!r}, *{list(options)!r}, '--', 'true'])\n"
    )
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "store"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("SPYGLASS_POLICY", None)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                         timeout=180, check=False)
    assert res.returncode == 0, res.stderr
    return set(out.read_text().split())


#: the strace parser: a run under eBPF never parses strace output
STRACE_PARSER = {f"spyglass.capture.strace.{m}" for m in ("decode", "state", "files", "parser", "backend",
                                                           "access", "privs", "net", "fastpath")}


def test_a_run_under_ebpf_does_not_import_the_strace_parser(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "capture" / "ebpf"))
    try:
        from ebpf_helpers import ebpf_skip_reason
    finally:
        sys.path.pop(0)
    why = ebpf_skip_reason()
    if why is not None:
        pytest.skip(why)
    loaded = _modules_of_run(tmp_path, "ebpf")
    assert "spyglass.capture.ebpf.session" in loaded  # it did run under eBPF
    assert not loaded & STRACE_PARSER, sorted(loaded & STRACE_PARSER)
    assert not loaded & FEATURES, sorted(loaded & FEATURES)


#: what a plain run (no --ask, no codex config, no signing key) has no use for
UNUSED = {"spyglass.agents.ask", "tomllib", "yaml", "jsonschema", "spyglass.rules.parse", "spyglass.rules.ruleset"}
#: ... nor, without an OTLP endpoint or the agent's hooks, these (what a run may need once the agent
#: runs is imported before it starts: a module loaded later could come from a __pycache__ the agent wrote)
FEATURES = {"spyglass.evidence.keys", "spyglass.otel.config", "spyglass.agents.hooks"}


def test_a_run_under_strace_does_not_import_the_ebpf_backend(tmp_path: Path) -> None:
    loaded = _modules_of_run(tmp_path, "strace")
    assert "spyglass.capture.strace.parser" in loaded
    assert not {m for m in loaded if m.startswith("spyglass.capture.ebpf")}


def test_a_second_run_imports_neither_the_rule_parser_nor_what_it_does_not_use(tmp_path: Path) -> None:
    _modules_of_run(tmp_path, "strace")  # fills the rule cache
    loaded = _modules_of_run(tmp_path, "strace")
    assert not loaded & UNUSED, sorted(loaded & UNUSED)
    assert not loaded & FEATURES, sorted(loaded & FEATURES)


def test_a_policy_file_is_not_parsed_again_by_the_next_run(tmp_path: Path) -> None:
    """A policy file is YAML checked against a JSON schema: the first run parses it, the next
    ones take it from the store's sealed cache (tests/rules/test_cache.py plays a forged entry)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: observe\nsecrets: ['~/.mine/**']\n")
    first = _modules_of_run(tmp_path, "strace", "--policy", str(policy))
    assert "yaml" in first and "jsonschema" in first
    again = _modules_of_run(tmp_path, "strace", "--policy", str(policy))
    assert not again & {"yaml", "jsonschema"}


def test_the_dataclasses_a_run_builds_have_docstrings(tmp_path: Path) -> None:
    """``@dataclass`` builds a missing docstring from ``inspect.signature`` at import (Python 3.11):
    every dataclass a run imports has one of its own (checked on a strace run: the eBPF decoder's
    own record classes are not covered here)."""
    out = tmp_path / "undocumented.txt"
    code = (
        "import atexit, dataclasses, sys\n"
        "def undocumented():\n"
        "    for name, m in list(sys.modules.items()):\n"
        "        for c in vars(m).values() if name.startswith('spyglass') else ():\n"
        "            if isinstance(c, type) and c.__module__ == name and dataclasses.is_dataclass(c)"
        " and (c.__doc__ or '').startswith(c.__name__ + '('):\n"
        "                yield name + '.' + c.__name__\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write('\\n'.join(sorted(set(undocumented())))))\n"
        "from spyglass.cli.main import main\n"
        "main(['run', '-q', '--backend', 'strace', '--', 'true'])\n"
    )
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "store"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("SPYGLASS_POLICY", None)
    work = tmp_path / "work"
    work.mkdir()
    for _ in range(2):  # the second run takes its rules from the cache, like most runs
        res = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                             timeout=180, check=False)
        assert res.returncode == 0, res.stderr
    assert out.read_text().split() == []
