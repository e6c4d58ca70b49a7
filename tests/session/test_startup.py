"""The start-up path of ``spyglass run``: what a run imports before and while it records.

Each test runs ``spyglass run -q -- true`` in a fresh interpreter (a real run, real
backend) and looks at ``sys.modules`` when it exits: the modules a backend or
feature does not use must not be loaded (their import time is start-up time).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest


def _modules_of_run(tmp_path: Path, fresh_python: Any, backend: str, *options: str) -> set[str]:
    """The modules loaded by ``spyglass run -q --backend BACKEND [OPTIONS] -- true`` (its exit code checked)."""
    out = tmp_path / "modules.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
        "from spyglass.cli.launch import main\n"  # the console script's entry point
        f"main(['run', '-q', '--backend', {backend!r}, *{list(options)!r}, '--', 'true'])\n"
    )
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    res = fresh_python(code, cwd=work)
    assert res.returncode == 0, res.stderr
    return set(out.read_text().split())


#: the strace parser: a run under eBPF never parses strace output
STRACE_PARSER = {f"spyglass.capture.strace.{m}" for m in ("decode", "state", "files", "parser", "backend",
                                                           "access", "privs", "net", "fastpath")}


def test_a_run_under_ebpf_does_not_import_the_strace_parser(tmp_path: Path, fresh_python: Any) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "capture" / "ebpf"))
    try:
        from ebpf_helpers import ebpf_skip_reason
    finally:
        sys.path.pop(0)
    why = ebpf_skip_reason()
    if why is not None:
        pytest.skip(why)
    loaded = _modules_of_run(tmp_path, fresh_python, "ebpf")
    assert "spyglass.capture.ebpf.session" in loaded  # it did run under eBPF
    assert not loaded & STRACE_PARSER, sorted(loaded & STRACE_PARSER)
    assert not loaded & FEATURES, sorted(loaded & FEATURES)
    assert not loaded & STDLIB_UNUSED_EBPF, sorted(loaded & STDLIB_UNUSED_EBPF)


#: what a plain run (no --ask, no codex config, no signing key) has no use for
UNUSED = {"spyglass.agents.ask", "tomllib", "yaml", "jsonschema", "spyglass.rules.parse", "spyglass.rules.ruleset"}
#: ... nor, without an OTLP endpoint or the agent's hooks, these (what a run may need once the agent
#: runs is imported before it starts: a module loaded later could come from a __pycache__ the agent wrote)
FEATURES = {"spyglass.evidence.keys", "spyglass.otel.config", "spyglass.agents.hooks"}
#: standard modules a run that goes well has no use for (logging loads at the first record shown:
#: spyglass/logs.py; the host name, random bytes and PATH lookups need none of them; strace's work
#: directory is made without tempfile and shutil; click's "did you mean" for ``-q`` needs difflib,
#: and the login name getpass: cli/common.py LongFlags, agents/identity.py login_name) ...
STDLIB_UNUSED = {"logging", "socket", "secrets", "pkgutil", "shutil", "tempfile", "random", "difflib", "getpass",
                 # msgspec takes typing's own helpers, not typing_extensions' with what it loads (spyglass/__init__.py)
                 "typing_extensions", "inspect", "ast", "dis", "tokenize"}
#: ... under eBPF too
STDLIB_UNUSED_EBPF = STDLIB_UNUSED | {"click"}  # a plain command line is parsed without it (cli/direct.py)


def test_a_run_under_strace_does_not_import_the_ebpf_backend(tmp_path: Path, fresh_python: Any) -> None:
    loaded = _modules_of_run(tmp_path, fresh_python, "strace")
    assert "spyglass.capture.strace.parser" in loaded
    assert not {m for m in loaded if m.startswith("spyglass.capture.ebpf")}
    assert not loaded & STDLIB_UNUSED_EBPF, sorted(loaded & STDLIB_UNUSED_EBPF)


def test_a_second_run_imports_neither_the_rule_parser_nor_what_it_does_not_use(tmp_path: Path,
                                                                                fresh_python: Any) -> None:
    _modules_of_run(tmp_path, fresh_python, "strace")  # fills the rule cache
    loaded = _modules_of_run(tmp_path, fresh_python, "strace")
    assert not loaded & UNUSED, sorted(loaded & UNUSED)
    assert not loaded & FEATURES, sorted(loaded & FEATURES)


def test_a_policy_file_is_not_parsed_again_by_the_next_run(tmp_path: Path, fresh_python: Any) -> None:
    """A policy file is YAML checked against a JSON schema: the first run parses it, the next
    ones take it from the store's sealed cache (tests/rules/test_cache.py plays a forged entry)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: observe\nsecrets: ['~/.mine/**']\n")
    first = _modules_of_run(tmp_path, fresh_python, "strace", "--policy", str(policy))
    assert "yaml" in first and "jsonschema" in first
    again = _modules_of_run(tmp_path, fresh_python, "strace", "--policy", str(policy))
    assert not again & {"yaml", "jsonschema"}


def test_a_run_builds_no_dataclass(tmp_path: Path, capture_backend: str, fresh_python: Any) -> None:
    """A run's own record types are ``msgspec.Struct`` s: building a ``@dataclass`` class costs
    0.5-1 ms at import on this machine (code generated and ``exec``-ed per method, Python 3.11), a
    Struct 0.05 ms; 67 of them were 35-48 ms of every start-up.  Each backend runs twice (the second
    takes its rules from the cache, like most runs), and no spyglass module may build a dataclass on
    the way."""
    out = tmp_path / "built.txt"
    code = (
        "import atexit, dataclasses, sys\n"
        "built = []\n"
        "orig = dataclasses._process_class\n"
        "def spy(cls, *a, **k):\n"
        "    built.append(cls.__module__ + '.' + cls.__qualname__)\n"
        "    return orig(cls, *a, **k)\n"
        "dataclasses._process_class = spy\n"
        f"atexit.register(lambda: open({str(out)!r}, 'a').write(''.join(b + '\\n' for b in built"
        " if b.startswith('spyglass'))))\n"
        "from spyglass.cli.main import main\n"
        "main(['run', '-q', '--backend', sys.argv[1], '--', 'true'])\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    for _ in range(2):
        res = fresh_python(code, capture_backend, cwd=work)
        assert res.returncode == 0, res.stderr
    assert out.read_text().split() == []
    # the spy sees a dataclass built after it is installed (the check can fail)
    probe = "class Probe:\n    a: int\nProbe.__module__ = 'spyglass.probe'\ndataclasses.dataclass(Probe)\n"
    spied = code.replace("from spyglass.cli.main", probe + "from spyglass.cli.main")
    res = fresh_python(spied, capture_backend, cwd=work)
    assert res.returncode == 0, res.stderr
    assert out.read_text().split(), "the spy saw no dataclass where one is built"


def test_the_after_walk_s_hashing_threads_import_nothing_after_the_agent_ran(tmp_path: Path,
                                                                          fresh_python: Any) -> None:
    """The agent makes 70 files of 300 KB: the after-walk hands the large ones to its threads
    (spyglass/evidence/hashers.py), which need no module first imported once the agent has run
    (one could come from byte-code the agent forged meanwhile)."""
    out = tmp_path / "seen.txt"
    agent = "for i in $(seq 70); do head -c 300000 /dev/zero > f$i; done"
    code = (
        "import atexit, sys\n"
        "import spyglass.evidence.hashers as h\n"
        "made = []\n"
        "orig = h.Hashers.__init__\n"
        "def init(self, *a, **k):\n"
        "    made.append(sorted(sys.modules))\n"
        "    orig(self, *a, **k)\n"
        "h.Hashers.__init__ = init\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(repr((made, sorted(sys.modules)))))\n"
        "from spyglass.cli.launch import main\n"
        f"main(['run', '-q', '--backend', 'strace', '--', 'sh', '-c', {agent!r}])\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    res = fresh_python(code, cwd=work)
    assert res.returncode == 0, res.stderr
    made, at_exit = ast.literal_eval(out.read_text())
    assert len(made) == 1, "the after-walk used no hashing threads"
    assert set(at_exit) == set(made[0])  # nothing imported from the threads' start to the exit
    assert not {"concurrent.futures", "queue"} & set(at_exit)


def test_the_end_of_run_check_of_imports_comes_before_the_diff_loads_difflib(tmp_path: Path,
                                                                            fresh_python: Any) -> None:
    """``difflib`` (and ``heapq``) load only for a diff, after the agent ran; the witness's check
    of what spyglass runs looks at them as if loaded (witness/imports.py ``LIBRARIES``) and must run
    first, so that their byte-code forged meanwhile is removed before it loads."""
    out = tmp_path / "order.txt"
    code = (
        "import atexit, sys\n"
        "import spyglass.witness.imports as imp\n"
        "order = []\n"
        "real = imp.check\n"
        "def check(*a, **k):\n"
        "    order.append(('check', 'difflib' in sys.modules))\n"
        "    return real(*a, **k)\n"
        "imp.check = check\n"
        "import builtins\n"
        "real_import = builtins.__import__\n"
        "def spy(name, *a, **k):\n"
        "    if name == 'difflib' and 'difflib' not in sys.modules:\n"
        "        order.append(('difflib', None))\n"
        "    return real_import(name, *a, **k)\n"
        "builtins.__import__ = spy\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(repr(order)))\n"
        "from spyglass.cli.launch import main\n"
        "main(['run', '-q', '--backend', 'strace', '--', 'sh', '-c', 'echo two >> notes.txt'])\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("one\n")
    res = fresh_python(code, cwd=work)
    assert res.returncode == 0, res.stderr
    order = ast.literal_eval(out.read_text())
    assert order == [("check", False), ("difflib", None)], order  # the diff was made, after the check


#: what a run may import after its agent started: only for a diff of the workspace, after the
#: witness's check of them (above)
AFTER_LAUNCH = {"difflib", "heapq", "_heapq"}


def test_a_run_imports_nothing_after_the_launch_but_what_a_diff_needs(tmp_path: Path, capture_backend: str,
                                                                     fresh_python: Any) -> None:
    """A module first imported once the agent runs could be loaded from byte-code the agent wrote
    in a ``__pycache__`` meanwhile (docs/threat-model.md): the capture's threads, the rules, the
    finish (the after-walk, its threads, the diff) import nothing else.  (A codec named to ``open``
    is such a module: ``encoding="ascii"`` loads ``encodings.ascii`` at its first use.)"""
    out = tmp_path / "late.txt"
    # (70 files of 300 KB: the after-walk hands the ones after its 64th to its hashing threads)
    agent = ("echo two >> notes.txt; for i in $(seq 70); do head -c 300000 /dev/zero > z$i; done; "
             "cat /etc/hostname /proc/self/status > /dev/null; sh -c 'exit 3'; true")
    code = (
        "import atexit, sys\n"
        "import spyglass.pipeline as p\n"
        "snap = {}\n"
        "real = p.Pipeline.launched\n"
        "def launched(self):\n"
        "    snap['at'] = set(sys.modules)\n"
        "    return real(self)\n"
        "p.Pipeline.launched = launched\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(repr(sorted(set(sys.modules) - snap['at']))))\n"
        "from spyglass.cli.launch import main\n"
        f"main(['run', '-q', '--backend', sys.argv[1], '--', 'sh', '-c', {agent!r}])\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("one\n")
    res = fresh_python(code, capture_backend, cwd=work)
    assert res.returncode == 0, res.stderr
    late = set(ast.literal_eval(out.read_text()))
    assert "difflib" in late  # the diff was made: the control that the spy saw the finish
    assert late <= AFTER_LAUNCH, sorted(late - AFTER_LAUNCH)
