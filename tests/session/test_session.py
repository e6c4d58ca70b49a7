"""The recording session: the CLI and the Python API run the same session;
sinks that fail are never silent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import spyglass
from spyglass.errors import SpyglassError
from spyglass.events import Event
from spyglass.pipeline import RunContext
from spyglass.store import Store, open_run

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n")
    return home


def _summary(store: Path) -> dict[str, object]:
    reader = open_run("latest", Store(store))
    run_dir = reader.dir
    meta = reader.meta
    return {
        "alerts": sorted({a.rule_id for a in reader.alerts()}),
        "evidence": sorted(p.name for p in (run_dir / "evidence").iterdir()),
        "exit_code": meta.exit_code,
        "status": meta.status,
        "mode": meta.mode,
        "home": meta.extra.get("home"),
        "workspace_changes": meta.extra.get("workspace_changes"),
        "tracer_known": len(meta.extra.get("monitor_pids", [])) >= 2,  # spyglass, the tracer (+ helpers)
    }


@needs_strace
def test_the_cli_and_the_api_record_the_same_run(
    tmp_path: Path, spy, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    home = _home(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(ws)
    script = "cat ~/.ssh/id_rsa > /dev/null; echo done > out.txt"

    res = spy("run", "-q", "--", "sh", "-c", script)
    assert res.exit_code == 0, res.output
    cli_store = tmp_path / "store"  # the spy fixture's SPYGLASS_STORE
    via_cli = _summary(cli_store)

    (ws / "out.txt").unlink()
    api_store = tmp_path / "api-store"
    outcome = spyglass.run(["sh", "-c", script], store=api_store, cwd=str(ws))
    via_api = _summary(api_store)

    assert "cred-secret-read" in via_cli["alerts"]  # type: ignore[operator]
    assert via_api == via_cli
    assert via_api["tracer_known"] is True
    assert {"manifest-before.json", "manifest-after.json", "changes.json", "changes.patch"} <= set(via_api["evidence"])  # type: ignore[arg-type]
    assert outcome.exit_code == 0 and outcome.verdict_code == 0 and not outcome.partial


class _BrokenAtStart:
    name = "broken-at-start"

    def start(self, ctx: RunContext) -> None:
        raise ValueError("bad glob '[]]x'")


class _BrokenOnEvents:
    name = "broken-on-events"

    def event(self, ev: Event) -> None:
        raise RuntimeError("boom")


@needs_strace
def test_a_sink_that_cannot_start_stops_the_run_before_the_agent_starts(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(SpyglassError) as err:
        spyglass.run(["touch", str(marker)], store=tmp_path / "s", cwd=str(tmp_path), sinks=[_BrokenAtStart()])
    assert str(err.value) == "broken-at-start could not start: bad glob '[]]x'"
    assert err.value.exit_code == 2
    assert not marker.exists()


@needs_strace
@pytest.mark.sink_errors
def test_a_sink_failing_during_the_run_marks_the_evidence_partial(tmp_path: Path, spy) -> None:  # type: ignore[no-untyped-def]
    outcome = spyglass.run(["true"], store=tmp_path / "store", cwd=str(tmp_path), sinks=[_BrokenOnEvents()])
    assert outcome.partial and outcome.sink_errors["broken-on-events"] > 0
    meta = open_run(outcome.meta.id, Store(tmp_path / "store")).meta
    assert meta.extra["evidence"]["partial"] is True
    res = spy("show", outcome.meta.id)
    assert "partial" in res.output and "broken-on-events" in res.output
    res = spy("show", outcome.meta.id, "--format", "json")
    assert json.loads(res.stdout)["run"]["extra"]["evidence"]["partial"] is True


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@needs_strace
@needs_bwrap
def test_a_sandboxed_run_records_the_tracer_among_the_monitor_pids(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outcome = spyglass.run(
        ["sh", "-c", "cat ~/.ssh/id_rsa > /dev/null 2>&1; true"],
        store=tmp_path / "store",
        cwd=str(ws),
        env={"PATH": "/usr/bin:/bin", "HOME": str(_home(tmp_path))},
        sandbox=True,
    )
    meta = outcome.meta
    assert meta.sandbox and meta.mode == "contain"
    pids = meta.extra["monitor_pids"]
    assert len(pids) == 2 and all(isinstance(p, int) for p in pids)


@needs_strace
def test_a_bad_path_pattern_stops_spyglass_run_with_its_place(tmp_path: Path, spy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spyglass.yaml").write_text("evidence:\n  manifest_exclude:\n    - \"[]]x\"\n")
    marker = tmp_path / "ran"
    res = spy("run", "-q", "--policy", "spyglass.yaml", "--", "touch", str(marker))
    assert res.exit_code == 2
    assert res.stderr.startswith("spyglass: error: spyglass.yaml:3:7: evidence.manifest_exclude[0]: bad path pattern")
    assert len(res.stderr.strip().splitlines()) == 1 and not marker.exists()


@needs_strace
def test_a_feature_sink_that_cannot_start_stops_spyglass_run_in_one_line(tmp_path: Path, spy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from spyglass.errors import MissingToolError
    from spyglass.session import sinks

    class NeedsATool:
        name = "needs-a-tool"

        def start(self, ctx: RunContext) -> None:
            raise MissingToolError("frobnicate", "frob-utils")

    monkeypatch.setattr(sinks, "FEATURE_SINKS", [lambda plan: [NeedsATool()]])
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    res = spy("run", "-q", "--", "touch", str(marker))
    assert res.exit_code == 5
    assert res.stderr.strip() == (
        "spyglass: error: needs-a-tool could not start: frobnicate is not installed "
        "(install it: sudo apt-get install frob-utils)"
    )
    assert not marker.exists()


def test_the_api_refuses_an_unknown_mode(tmp_path: Path) -> None:
    """`spyglass.run(mode="Enforce")` must not run unconfined and unenforced."""
    import spyglass
    from spyglass.errors import UsageError

    with pytest.raises(UsageError, match="unknown mode 'Enforce'"):
        spyglass.run(["true"], mode="Enforce", store=tmp_path / "s", cwd=str(tmp_path))
