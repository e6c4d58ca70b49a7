"""Writes through ``/proc/self/fd/N/...``: the writer's descriptor, not spyglass's.

The witness guard judges an event in spyglass's own process, where ``/proc/self`` is spyglass:
a benign write through the agent's descriptor N on its workspace was judged against
spyglass's descriptor N, which may be the store's, and raised a critical ``witness-tamper``
(seen with Claude Code under eBPF, which records the path as given).  The guard now reads
``/proc/self`` as the writer's ``/proc/PID``.  Real processes under each capture backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# the agent writes through each of its descriptors 3..40 opened on its workspace (one of them is
# spyglass's store descriptor number in spyglass's process, whichever it is)
BENIGN = """
for n in $(seq 3 40); do
  eval "exec $n<." 2>/dev/null || continue
  echo x > /proc/self/fd/$n/out$n
  eval "exec $n<&-"
done
"""


def _witness(setup: Any, store: Path | None = None) -> list[str]:
    return [str(a["message"]) for a in setup.alerts(store=store) if str(a["rule_id"]).startswith("witness-")]


def test_benign_twin_writes_through_the_agent_s_own_descriptors_are_silent(setup: Any, tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"  # bash: dash takes one-digit descriptors only
    script.write_text(BENIGN)
    res = setup.run(f"bash {script}")
    assert res.returncode == 0, res.stderr
    assert (setup.ws / "out3").exists() and (setup.ws / "out40").exists(), res.stderr
    assert _witness(setup) == [], res.stderr


def test_a_write_into_the_store_through_the_agent_s_descriptor_is_tamper(setup: Any, tmp_path: Path) -> None:
    """The attack twin: a descriptor on the store, written through by its ``/proc/self`` name.
    The writer stays until the alert is recorded (it polls the run's alerts, 60 s at most), so
    that its descriptor is there when the guard looks."""
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0  # the store exists before the run
    script = (f"exec 9<{store}/runs && echo x > /proc/self/fd/9/planted && "
              f"for i in $(seq 600); do cat {store}/runs/*/alerts.jsonl 2>/dev/null | grep -q planted && break; "
              "sleep 0.1; done")
    res = setup.run(script, store=store)
    assert (store / "runs" / "planted").exists(), res.stderr
    assert any("planted" in m for m in _witness(setup, store=store)), res.stderr


def test_a_chmod_of_the_store_through_its_own_proc_root_is_tamper(setup: Any, tmp_path: Path) -> None:
    """``/proc/self/root/...`` of a process that exits at once (``chmod``): gone when the guard
    looks, its root is read as ``/`` (as the strace backend reads it), not left unjudged."""
    store = tmp_path / "st"
    setup.run("true", store=store)
    res = setup.run(f"chmod 600 /proc/self/root{store}/index.sqlite", store=store)
    msgs = _witness(setup, store)
    assert any("chmod-ed" in m and "index.sqlite" in m for m in msgs), res.stderr


def test_benign_twin_a_chmod_in_the_workspace_through_proc_root_is_silent(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    res = setup.run(f"touch f && chmod 600 /proc/self/root{setup.ws}/f", store=store)
    assert _witness(setup, store) == [], res.stderr
