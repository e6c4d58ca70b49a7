"""A run must not plant the next run's policy: any write to a place of the precedence chain (the user
config directory's spyglass/, $SPYGLASS_POLICY, /etc/spyglass/) or to spyglass's own rule pack and
source is a critical witness-tamper; `run` names the policy file it picked up.  Real processes, the
real CLI and the default capture backend."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import spyglass

EVIL = "rules:\\n  disable: [cred-secret-read]\\ngate: [workspace-changed]\\n"
PLANT = f'mkdir -p "$XDG_CONFIG_HOME/spyglass"; printf "{EVIL}" > "$XDG_CONFIG_HOME/spyglass/policy.yaml"'


def _tamper(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CRITICAL witness-tamper" in line]


def test_planting_a_user_policy_is_critical_and_the_next_run_names_it(setup: Any) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "spyglass" / "policy.yaml"
    assert not user.exists()
    res = setup.run(PLANT)
    assert user.exists()  # observe mode: recorded, not prevented
    lines = _tamper(res.stderr)
    assert lines and "a policy location" in lines[0], res.stderr
    assert res.returncode != 0 or "witness-tamper" in res.stderr
    # run 2 picks the planted policy up, and says so on one line
    res = setup.run("echo x > changed.txt")
    assert f"spyglass: policy {user} (user config), last modified " in res.stderr, res.stderr


def test_a_write_to_the_rule_pack_is_critical(setup: Any, tmp_path: Path) -> None:
    pack = Path(spyglass.__file__).resolve().parent / "rules" / "pack" / "credentials.yaml"
    before = pack.read_bytes()
    res = setup.run(f": >> {pack}")  # opens it for appending and writes nothing
    assert pack.read_bytes() == before
    lines = _tamper(res.stderr)
    assert lines and "spyglass's rule pack" in lines[0], res.stderr


def test_a_write_to_spyglass_source_is_critical(setup: Any) -> None:
    init = Path(spyglass.__file__).resolve()
    res = setup.run(f"touch {init}")
    lines = _tamper(res.stderr)
    assert lines and "spyglass's own source" in lines[0], res.stderr


def test_enforce_mode_stops_an_agent_that_plants_a_user_policy(setup: Any) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (apt-get install bubblewrap)")
    (setup.ws / "spyglass.yaml").write_text("mode: enforce\n")
    # the sandbox hides the real config directory (its /tmp and home are its own); a careless deployment
    # with the config directory inside the workspace puts it in reach, and the guard must stop the writer
    setup.env["XDG_CONFIG_HOME"] = str(setup.ws / "cfg")
    res = setup.run(PLANT + "; sleep 30; echo survived > s.txt", "--policy", "spyglass.yaml")
    assert res.returncode == 7, res.stderr
    assert "rule witness-tamper stopped the agent" in res.stderr
    assert not (setup.ws / "s.txt").exists()


def test_benign_twin_reading_the_policy_and_writing_other_config_stays_silent(setup: Any) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "spyglass" / "policy.yaml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("gate: [workspace-changed]\n")
    pack = Path(spyglass.__file__).resolve().parent / "rules" / "pack"
    res = setup.run(f'cat "{user}" >/dev/null; ls {pack} >/dev/null; cat {pack}/credentials.yaml >/dev/null; '
                    'mkdir -p "$XDG_CONFIG_HOME/other"; echo 1 > "$XDG_CONFIG_HOME/other/cfg"; echo x > out.txt')
    assert res.returncode == 0, res.stderr
    assert "witness" not in res.stderr, res.stderr
    assert f"spyglass: policy {user} (user config)" in res.stderr


def test_benign_twin_the_built_in_policy_prints_no_policy_line(setup: Any) -> None:
    res = setup.run("echo x > out.txt")
    assert res.returncode == 0 and "spyglass: policy " not in res.stderr, res.stderr


def test_mv_onto_the_policy_in_use_is_one_critical_alert(setup: Any, tmp_path: Path) -> None:
    """mv tries renameat2(RENAME_NOREPLACE) first (EEXIST), then renames: one change, one alert."""
    pol = tmp_path / "pol.yaml"
    pol.write_text("mode: observe\n")
    setup.env["SPYGLASS_POLICY"] = str(pol)
    res = setup.run(f'printf "gate: [workspace-changed]\\n" > {tmp_path}/p.new; mv {tmp_path}/p.new {pol}')
    lines = _tamper(res.stderr)
    assert len(lines) == 1 and "renamed" in lines[0] and "attempted" not in lines[0], res.stderr


def test_benign_twin_mv_over_a_workspace_file_raises_nothing(setup: Any) -> None:
    (setup.ws / "old.txt").write_text("1\n")
    res = setup.run("echo 2 > new.txt; mv new.txt old.txt")
    assert res.returncode == 0 and "witness" not in res.stderr, res.stderr


def test_a_protected_tree_knows_every_file_and_directory_below_it(tmp_path: Path) -> None:
    """The walk of a protected tree (spyglass's own source, at every start) records what a
    recursive glob finds: files, directories, what symlinks name, not fifos or dangling links."""
    import os

    from spyglass.witness.guard import Protected, file_id

    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.py").write_text("x")
    (root / "top.txt").write_text("y")
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "hidden.txt").write_text("z")
    (root / "link-dir").symlink_to(outside)  # named, not descended into
    (root / "link-file").symlink_to(root / "top.txt")
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(root / "fifo")
    prot = Protected()
    prot.add_place(root, "a tree", tree=True)
    want = {file_id(f) for f in root.rglob("*") if f.is_file() or f.is_dir()}
    assert want <= set(prot.ids)
    assert file_id(outside) in prot.ids and file_id(outside / "deep" / "hidden.txt") not in prot.ids
    assert all(prot.ids[f] == "a tree" for f in want)


def test_a_policy_moved_in_through_a_symlink_removed_at_once_is_critical(setup: Any) -> None:
    """The user's policy replaced by a rename through a symlink to its directory, the symlink
    removed at once: the event names a path that no longer leads there when it is read; the end
    of the run finds the policy file not as it was at the start."""
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "spyglass" / "policy.yaml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("mode: observe\n")
    script = (f'ln -s "{user.parent}" lnk && printf "{EVIL}" > new.yaml && mv new.yaml lnk/policy.yaml '
              "&& rm lnk")
    res = setup.run(script)
    assert "disable" in user.read_text()  # the attack did replace it
    lines = _tamper(res.stderr)
    # judged live while the link still led there, or found at the end: the file is both the policy
    # in use and a file of a policy location, and either name may come first
    assert any("a policy location" in ln or "the policy file in use" in ln for ln in lines), res.stderr


def test_an_installed_spyglass_is_guarded_even_in_a_workspace_that_holds_it(tmp_path: Path, monkeypatch: Any) -> None:
    """A checkout of spyglass that is the agent's workspace is in its reach on purpose; an installed
    copy (site-packages under ``~/.local``, a venv, pipx) stays guarded when the workspace holds it
    (an agent run from ``~``)."""
    from types import SimpleNamespace

    from spyglass.session.sinks import _policy_places
    from spyglass.witness.guard import OWN_SOURCE

    home = tmp_path / "home"
    installed = home / ".local" / "lib" / "python3.11" / "site-packages" / "spyglass"
    checkout = home / "src" / "spyglass" / "spyglass"
    for pkg in (installed, checkout):
        (pkg / "rules" / "pack").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
    plan = SimpleNamespace(cwd=str(home), workspace=[str(home)])
    monkeypatch.setattr(spyglass, "__file__", str(installed / "__init__.py"))
    assert (installed, OWN_SOURCE, True) in _policy_places(plan)  # type: ignore[arg-type]
    monkeypatch.setattr(spyglass, "__file__", str(checkout / "__init__.py"))
    assert not any(what == OWN_SOURCE for _, what, _ in _policy_places(plan))  # type: ignore[arg-type]
