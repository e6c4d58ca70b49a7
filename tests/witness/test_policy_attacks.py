"""The agent must not control the policy: a workspace spyglass.yaml is not read implicitly, the policy
a run used is recorded with it and judges it later, and changing it during the run is critical."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

EVIL = "rules:\n  disable: [cred-secret-read]\ngate: [workspace-changed]\n"

pytestmark = pytest.mark.backends("auto")  # the policy and the store, not capture: once


def _key(setup: Any) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")


def test_a_policy_planted_in_the_workspace_disables_nothing(setup: Any) -> None:
    _key(setup)
    plant = setup.run(f"printf '{EVIL}' > spyglass.yaml")  # run 1: the agent plants a policy
    assert plant.returncode == 0 and (setup.ws / "spyglass.yaml").read_text() == EVIL
    res = setup.run("cat $HOME/.ssh/id_rsa > /dev/null; echo x > changed.txt")  # run 2, same directory
    assert "spyglass: ignored" in res.stderr and "spyglass.yaml" in res.stderr
    assert "HIGH cred-secret-read" in res.stderr
    gate = setup.spyglass("gate", "--store", str(setup.store), "--format", "json")
    outcomes = json.loads(gate.stdout)["outcomes"]
    assert gate.returncode == 1
    assert "workspace-changed" not in [o["name"] for o in outcomes]
    check = setup.spyglass("check", "--store", str(setup.store), "--format", "json")
    assert [a["rule_id"] for a in json.loads(check.stdout)["alerts"]] == ["cred-secret-read"]


def test_a_run_is_judged_by_the_policy_it_recorded(setup: Any) -> None:
    """The user named the workspace policy; the agent rewrites it during the run: critical, and gate
    afterwards still applies the text the run started with."""
    _key(setup)
    pol = setup.ws / "spyglass.yaml"
    pol.write_text("gate: [no-alerts-at-or-above=high]\n")
    res = setup.run(f"cat $HOME/.ssh/id_rsa > /dev/null; printf '{EVIL}' > spyglass.yaml",
                    "--policy", "spyglass.yaml")
    assert "CRITICAL witness-tamper" in res.stderr and "the policy file in use" in res.stderr
    assert pol.read_text() == EVIL
    gate = setup.spyglass("gate", "--store", str(setup.store), "--format", "json")
    assert gate.returncode == 1
    assert [o["name"] for o in json.loads(gate.stdout)["outcomes"]] == ["no-alerts-at-or-above=high"]
    data = json.loads(setup.spyglass("show", "--store", str(setup.store), "--format", "json").stdout)
    assert data["policy"]["text"] == "gate: [no-alerts-at-or-above=high]\n"
    assert data["policy"]["source"] == str(pol) and data["policy"]["origin"] == "--policy"
    shown = setup.spyglass("show", "--store", str(setup.store)).stdout
    assert f"policy    {pol} (--policy)" in shown


def test_benign_twin_the_users_own_policy_is_used_and_shown(setup: Any) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "spyglass" / "policy.yaml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("gate: [workspace-changed]\n")
    res = setup.run("echo x > changed.txt")
    assert res.returncode == 0 and "ignored" not in res.stderr and "witness" not in res.stderr
    gate = setup.spyglass("gate", "--store", str(setup.store), "--format", "json")
    assert gate.returncode == 0, gate.stdout
    data = json.loads(setup.spyglass("show", "--store", str(setup.store), "--format", "json").stdout)
    assert data["policy"]["origin"] == "user config" and data["policy"]["source"] == str(user)
