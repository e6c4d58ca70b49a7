"""A symlink to a directory inside the store is a way into the store.

Only the store's top directory is known by device and inode; a run that made a symlink
to ``<store>/cache`` (where the sealed rule, policy and compiled-code entries lie) or to an
older run's evidence directory, and wrote through it, changed the store with no alert.
Each attack is a real process under each real capture backend, with a benign twin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def witness(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in alerts if str(a["rule_id"]).startswith("witness-")]


def test_a_cache_entry_written_through_a_symlink_to_the_cache_is_tamper(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0  # the first run writes the cache and its key
    assert (store / "cache" / "rules.key").is_file()
    res = setup.run(f"ln -s {store}/cache c && printf forged > c/code-forged.bin", store=store)
    assert (store / "cache" / "code-forged.bin").is_file(), res.stderr
    found = [a for a in witness(setup.alerts(store=store)) if a["rule_id"] == "witness-tamper"]
    assert found and {a["level"] for a in found} == {"critical"}, res.stderr
    assert any("code-forged.bin" in str(a["message"]) for a in found), found


def test_an_older_runs_evidence_rewritten_through_a_symlink_is_tamper(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0
    (older,) = [p for p in (store / "runs").iterdir() if p.is_dir()]
    res = setup.run(f"ln -s {older}/evidence ev && printf x > ev/planted.json", store=store)
    msgs = [str(a["message"]) for a in witness(setup.alerts(store=store))]
    assert any("planted.json" in m for m in msgs), res.stderr


def test_benign_twin_writing_through_a_symlink_to_a_workspace_directory_is_silent(
    setup: Any, tmp_path: Path
) -> None:
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0
    (setup.ws / "cache").mkdir()  # named like the store's cache directory, in the workspace
    res = setup.run("ln -s cache c && printf ok > c/code-forged.bin && cat c/code-forged.bin", store=store)
    assert res.returncode == 0, res.stderr
    assert witness(setup.alerts(store=store)) == []


def test_dot_dot_after_a_symlink_into_the_store_is_the_store(setup: Any, tmp_path: Path) -> None:
    """``l/..`` is the parent of ``l``'s target (the kernel's reading), not ``l``'s directory:
    folded by name, a file planted, a directory made and the index chmod-ed through it named the
    workspace (it did under eBPF)."""
    store = tmp_path / "st"
    assert setup.run("true", store=store).returncode == 0
    res = setup.run(f"ln -s {store}/runs l && echo x > l/../planted && mkdir l/../made && "
                    "chmod 600 l/../index.sqlite", store=store)
    assert (store / "planted").is_file() and (store / "made").is_dir(), res.stderr
    msgs = [str(a["message"]) for a in witness(setup.alerts(store=store))]
    for what in ("planted", "made", "index.sqlite"):
        assert any(f"{store}/{what}" in m for m in msgs), (what, msgs)


def test_benign_twin_dot_dot_after_a_symlink_within_the_workspace_is_silent(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    res = setup.run("mkdir -p a/b && ln -s a/b l && echo x > l/../planted && mkdir l/../made && "
                    "chmod 600 l/../planted", store=store)
    assert (setup.ws / "a" / "planted").is_file(), res.stderr
    assert witness(setup.alerts(store=store)) == [], res.stderr
