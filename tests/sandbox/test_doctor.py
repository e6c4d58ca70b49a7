"""Honest failure: say whether sandboxing works here, and refuse to run unconfined."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import needs_bwrap

from spyglass.errors import EXIT_CANNOT_RUN, SandboxError
from spyglass.sandbox import doctor


def fake_bwrap(tmp_path: Path, stderr: str) -> str:
    """A bwrap that fails the way a restricted machine's does."""
    p = tmp_path / "bwrap"
    p.write_text(
        f"#!/bin/sh\ncase \"$1\" in --version) echo 'bubblewrap 0.9.0';; "
        f"*) echo '{stderr}' >&2; exit 1;; esac\n"
    )
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


@needs_bwrap
def test_checks_pass_here_and_doctor_lists_them(spy: Any) -> None:
    checks = doctor.sandbox_checks()
    assert [c.name for c in checks] == [
        "bubblewrap",
        "user namespaces",
        "AppArmor",
        "seccomp",
        "network namespace",
    ]
    assert all(c.ok for c in checks)
    res = spy("sandbox", "check", "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout)["sandbox"] is True
    assert all(s.name.startswith("sandbox: ") for s in doctor.checks())


def test_no_bwrap_means_no_sandbox_with_the_install_fix(
    spy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    res = spy("sandbox", "check")
    assert res.exit_code == EXIT_CANNOT_RUN
    assert "bwrap is not installed" in res.stdout and "apt-get install bubblewrap" in res.stdout
    with pytest.raises(SandboxError) as err:
        doctor.preflight()
    assert err.value.exit_code == EXIT_CANNOT_RUN and "apt-get install bubblewrap" in str(err.value)


def test_apparmor_restriction_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysctl = {"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"}
    monkeypatch.setattr(doctor, "_read", lambda p: sysctl.get(p))
    bwrap = fake_bwrap(tmp_path, "bwrap: setting up uid map: Permission denied")
    with pytest.raises(SandboxError) as err:
        doctor.preflight(bwrap)
    assert "AppArmor" in str(err.value) and "apparmor_restrict_unprivileged_userns=0" in str(err.value)
    check = doctor.sandbox_checks(bwrap)[-1]
    assert (check.name, check.ok) == ("network namespace", False) and "AppArmor" in check.fix


@pytest.mark.parametrize(
    ("stderr", "sysctl", "expect"),
    [
        ("bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted", {}, "container"),
        (
            "bwrap: No permissions to creating new namespace",
            {"/proc/sys/kernel/unprivileged_userns_clone": "0"},
            "unprivileged_userns_clone=1",
        ),
        (
            "bwrap: setting up uid map: Permission denied",
            {"/proc/sys/user/max_user_namespaces": "0"},
            "max_user_namespaces",
        ),
        ("bwrap: Unknown option --disable-userns", {}, "0.8 or later"),
    ],
)
def test_failure_messages_map_to_remedies(
    monkeypatch: pytest.MonkeyPatch, stderr: str, sysctl: dict[str, str], expect: str
) -> None:
    monkeypatch.setattr(doctor, "_read", lambda p: sysctl.get(p))
    problem, fix = doctor.explain_failure(stderr)
    assert stderr in problem and expect in fix


def test_prepare_refuses_instead_of_running_unconfined(tmp_path: Path) -> None:
    from spyglass.sandbox import prepare

    ws = tmp_path / "ws"
    ws.mkdir()
    bwrap = fake_bwrap(tmp_path, "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted")
    with pytest.raises(SandboxError, match="cannot be built here"):
        prepare(tmp_path / "work", [str(ws)], bwrap=bwrap)
    assert not (tmp_path / "work").exists()  # nothing was set up


def test_checks_do_not_need_root_to_explain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(doctor, "_read", lambda p: {"/proc/sys/kernel/unprivileged_userns_clone": "0"}.get(p))
    bwrap = fake_bwrap(tmp_path, "bwrap: No permissions to creating new namespace")
    by_name = {c.name: c for c in doctor.sandbox_checks(bwrap)}
    assert (
        not by_name["user namespaces"].ok and "unprivileged_userns_clone=1" in by_name["user namespaces"].fix
    )


@needs_bwrap
def test_from_policy_takes_the_policy_values(tmp_path: Path) -> None:
    from spyglass.policy.loader import parse_policy
    from spyglass.sandbox import from_policy

    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    text = (
        "mode: enforce\nsandbox:\n  hidden: [ws/secrets]\n  pass_home: ['~/.codex']\n"
        "network:\n  allow: [pypi.org]\n  deny: ['*.evil.test']\n"
    )
    policy = parse_policy(text, str(tmp_path / "spyglass.yaml"), base_dir=str(tmp_path))
    with from_policy(
        policy, tmp_path / "work", [str(ws)], cwd=str(ws), real_home=str(tmp_path / "home")
    ) as sb:
        info = sb.describe()
        assert info["settings"]["mode"] == "enforce"
        assert "pypi.org" in info["proxy"]["allow"] and "*.evil.test" in info["proxy"]["deny"]
        assert any(m["dest"] == str(ws / "secrets") and m["role"] == "hidden" for m in info["mounts"])
        assert sb.proxy is not None and sb.proxy.policy.decide("pypi.org", 443).allow
        assert not sb.proxy.policy.decide("127.0.0.1", 5432).allow  # built-in loopback entries: sandbox-local
