"""Backend selection and `doctor`'s reasons, without loading anything (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyglass.capture import select_backend
from spyglass.capture.auto import AutoBackend
from spyglass.capture.base import LaunchSpec
from spyglass.capture.ebpf import probe
from spyglass.errors import CaptureError, UsageError


def test_named_backends_and_unknown_names() -> None:
    assert select_backend("strace")[0].name == "strace"
    backend, reason = select_backend("ebpf")
    assert backend.name == "ebpf" and reason == "requested: ebpf"
    with pytest.raises(UsageError, match="unknown capture backend"):
        select_backend("dtrace")


def test_auto_says_why_it_uses_strace_when_not_privileged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "privileged", lambda: False)
    backend, reason = select_backend("auto")
    assert backend.name == "strace"
    assert "not root" in reason
    status = probe.status()
    assert not status.available and "not root" in status.problem and "--backend strace" in status.fix


def test_missing_object_names_the_setup_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(probe, "privileged", lambda: True)
    monkeypatch.setenv("SPYGLASS_BPF_OBJECT", str(tmp_path / "none.o"))
    if not probe.BTF.exists():
        pytest.skip("this kernel has no BTF: the BTF check answers first")
    found = probe.static_problem()
    assert found is not None and "not built" in found[0] and "setup.sh" in found[1]
    with pytest.raises(CaptureError, match="not built"):
        select_backend("ebpf")[0].start(LaunchSpec(["true"], str(tmp_path)))


def test_no_btf_and_lockdown_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(probe, "privileged", lambda: True)
    monkeypatch.setattr(probe, "BTF", tmp_path / "vmlinux")
    found = probe.static_problem()
    assert found is not None and "no BTF" in found[0] and "CONFIG_DEBUG_INFO_BTF" in found[1]
    monkeypatch.setattr(probe, "BTF", tmp_path)  # exists
    monkeypatch.setattr(probe, "lockdown", lambda: "confidentiality")
    found = probe.static_problem()
    assert found is not None and "lockdown" in found[0]


def test_auto_falls_back_when_the_program_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(probe, "static_problem", lambda: None)
    auto = AutoBackend()
    assert auto.name == "ebpf"

    def refuse(spec: LaunchSpec) -> None:
        raise CaptureError("the eBPF program could not be loaded: Operation not permitted")

    monkeypatch.setattr(auto._ebpf, "start", refuse)
    started: list[LaunchSpec] = []
    from spyglass.capture.strace.backend import StraceBackend  # the fallback, made when needed

    monkeypatch.setattr(StraceBackend, "start", lambda self, spec: started.append(spec) or "strace-session")
    assert auto.start(LaunchSpec(["true"], str(tmp_path))) == "strace-session"
    assert auto.name == "strace" and "refused" in auto.reason and "Operation not permitted" in auto.reason


def test_doctor_lists_both_backends_and_the_auto_choice() -> None:
    from spyglass.doctor import run_checks

    names = [c.name for c in run_checks()]
    assert names[:3] == ["ebpf", "strace", "auto"]
