"""``spyglass.gcpause``: the collector paused for a CLI run's start, resumed for the agent's run."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from spyglass import gcpause


def test_only_a_pause_of_its_own_is_resumed() -> None:
    assert gc.isenabled()
    gcpause.resume()  # nothing paused: nothing to do
    assert gc.isenabled()
    gc.disable()
    try:
        gcpause.resume()  # the host's own choice stays
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_cli_run_collects_while_the_agent_runs(tmp_path: Path, fresh_python: Any) -> None:
    """A real run: the agent is recorded with the collector on (and what the start made frozen out
    of its generations), the start and the finish with it off."""
    out = tmp_path / "states.txt"
    code = (
        "import gc, sys\n"
        "from spyglass import phases\n"
        f"states = open({str(out)!r}, 'w')\n"
        "orig = phases.mark\n"
        "def mark(name):\n"
        "    states.write(f'{name} {gc.isenabled()} {gc.get_freeze_count() > 0}\\n'); states.flush()\n"
        "    orig(name)\n"
        "phases.mark = mark\n"
        "from spyglass.cli.main import main\n"
        "main(['run', '-q', '--backend', 'strace', '--', 'true'])\n"
    )
    res = fresh_python(code)
    assert res.returncode == 0, res.stderr
    states = dict(_split(line) for line in out.read_text().splitlines())
    assert states["cli"] == ["False", "False"] and states["sinks"][0] == "False"  # paused for the start
    # on while the agent ran, what the start made frozen out of its generations (strace does not freeze)
    assert states["child run"] == ["True", "True"]
    assert states["finish: store"][0] == "False"  # the finish only: off again


def _split(line: str) -> tuple[str, list[str]]:
    """``"backend select True False"`` -> ("backend select", ["True", "False"])."""
    words = line.split()
    return " ".join(words[:-2]), words[-2:]


def test_the_cli_run_in_a_callers_process_gives_the_collector_back(tmp_path: Path, fresh_python: Any) -> None:
    """``main()`` called in-process (a harness, a test): the collector is on again when it returns,
    also when the run failed before the agent started, and a later API run leaves it alone."""
    code = (
        "import gc\n"
        "from spyglass.cli.main import main\n"
        "for argv in (['run', '-q', '--backend', 'strace', '--', 'true'],\n"
        "             ['run', '-q', '--backend', 'strace', '--', 'no-such-command-here']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    print(gc.isenabled())\n"
        "import spyglass\n"
        f"spyglass.run(['true'], backend='strace', store={str(tmp_path / 'store')!r})\n"
        "print(gc.isenabled())\n"
    )
    res = fresh_python(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "True"]
