"""The run must not change its witness: store (by inode, under any name), policy, rule files, key.

Each attack is a real process under each real capture backend; each has a benign twin that stays silent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spyglass.events import Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.witness import Protected, WitnessGuard


def rule_ids(alerts: list[dict[str, Any]]) -> set[str]:
    return {str(a["rule_id"]) for a in alerts}


def witness(alerts: list[dict[str, object]]) -> list[dict[str, object]]:
    return [a for a in alerts if str(a["rule_id"]).startswith("witness-")]


def test_a_store_with_another_name_inside_the_workspace_is_protected(setup: Any) -> None:
    store = setup.ws / "evidence-box"  # not called .spyglass: the name does not matter
    assert setup.run("true", store=store).returncode == 0
    res = setup.run(f"echo forged >> {store}/index.sqlite; rm -rf {store}/runs/*", store=store)
    found = witness(setup.alerts(store=store))
    assert {a["level"] for a in found} == {"critical"}, res.stderr
    assert any("index.sqlite" in str(a["message"]) for a in found)
    assert "CRITICAL witness-tamper" in res.stderr


def test_renaming_the_store_aside_does_not_escape(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    res = setup.run(f'mv {store} {tmp_path}/aside && echo x > {tmp_path}/aside/runs/planted.txt; '
                    f'mv {tmp_path}/aside {store}', store=store)
    msgs = [str(a["message"]) for a in witness(setup.alerts(store=store))]
    assert any("renamed" in m for m in msgs), res.stderr
    # the write under the new name is recognised by the directory's device and inode
    assert any(f"{tmp_path}/aside/runs/planted.txt" in m for m in msgs), msgs


def test_files_made_with_o_excl_in_the_store_are_caught(setup: Any, tmp_path: Path) -> None:
    """``set -C`` makes the shell's ``>`` an exclusive create (``O_CREAT|O_EXCL``), whose inode the
    guard knows is new and does not look up: it is judged by its name and its directory."""
    store = tmp_path / "st"
    res = setup.run(f"set -C; echo x > {store}/runs/planted.txt; mv {store} {tmp_path}/aside && "
                    f"echo y > {tmp_path}/aside/runs/planted2.txt; mv {tmp_path}/aside {store}", store=store)
    msgs = [str(a["message"]) for a in witness(setup.alerts(store=store))]
    assert any(m.endswith(f"{store}/runs/planted.txt") for m in msgs), (msgs, res.stderr)
    assert any(m.endswith(f"{tmp_path}/aside/runs/planted2.txt") for m in msgs), msgs


def test_benign_twin_files_made_with_o_excl_in_the_workspace_stay_silent(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    res = setup.run("set -C; echo x > a.txt; mkdir d && echo y > d/b.txt; mv d/b.txt c.txt", store=store)
    assert res.returncode == 0, res.stderr
    assert witness(setup.alerts(store=store)) == []


def test_a_hard_link_to_a_store_file_does_not_escape(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    setup.run("true", store=store)
    res = setup.run(f"ln {store}/index.sqlite innocent && echo x >> innocent", store=store)
    msgs = [str(a["message"]) for a in witness(setup.alerts(store=store))]
    assert any("hard-linked" in m for m in msgs), res.stderr
    # the write through the new name: recorded as the store file it reached, under the name it used
    assert any("innocent" in m and "hard-linked" not in m for m in msgs), msgs


def test_the_policy_and_rule_files_in_use_are_protected(setup: Any, tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "mine.yaml").write_text(
        "id: my-rule\ntitle: mine\nlevel: low\ndetection:\n  x:\n    type: file.read\n"
        "    file.name: nothing-matches-this\n  condition: x\n")
    pol = setup.ws / "spyglass.yaml"
    pol.write_text(f"rules:\n  paths: [{rules}]\n")
    res = setup.run(f"printf 'gate: [workspace-changed]\\n' >> spyglass.yaml; echo '#' >> {rules}/mine.yaml",
                    "--policy", "spyglass.yaml")
    msgs = [str(a["message"]) for a in witness(setup.alerts())]
    assert any(m.startswith("the policy file in use") for m in msgs), res.stderr
    assert any(m.startswith("a rule file in use") for m in msgs), msgs


def test_reading_the_signing_key_is_high(setup: Any, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signing.key"
    assert setup.spyglass("keys", "generate", str(key)).returncode == 0
    res = setup.run(f"cat {key} > /dev/null", "--sign-key", str(key))
    found = witness(setup.alerts())
    assert [(a["rule_id"], a["level"]) for a in found] == [("witness-key-read", "high")], res.stderr


def test_benign_twin_workspace_work_and_look_alike_names_stay_silent(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    key = tmp_path / "keys" / "signing.key"
    setup.spyglass("keys", "generate", str(key))
    (setup.ws / "spyglass.yaml").write_text("mode: observe\n")
    script = ("mkdir -p .spyglass/runs st && echo a > .spyglass/runs/x && echo b > st/index.sqlite && "
              f"ls {store} > /dev/null && cat spyglass.yaml > copy.yaml && mv copy.yaml moved.yaml && "
              f"cat {key}.pub > /dev/null")
    res = setup.run(script, "--sign-key", str(key), store=store)
    assert res.returncode == 0, res.stderr
    assert witness(setup.alerts(store=store)) == []
    assert "evasion-evidence-tamper" not in rule_ids(setup.alerts(store=store))


def test_file_handle_access_to_the_store_is_caught(tmp_path: Path) -> None:
    """open_by_handle_at events (recorded by the strace backend with the resolved path) count like
    any other access; fed here as the backend emits them, since which backend emits them is not this
    module's concern."""
    store = tmp_path / "st"
    (store / "runs").mkdir(parents=True)
    guard = WitnessGuard(Protected.for_run(store), mode="enforce")
    stopped: list[str] = []
    ctx = RunContext(run_id="r", stop_agent=stopped.append)
    seen: list[object] = []

    class Catch:
        def alert(self, a: object) -> None:
            seen.append(a)

    pipe = Pipeline([guard, Catch()], ctx)
    pipe.start()
    pipe.feed(Event(type="file.read", pid=9, syscall="open_by_handle_at", path=f"{store}/runs/x/events.jsonl",
                    flags="O_RDWR"))
    pipe.feed(Event(type="file.read", pid=9, syscall="open_by_handle_at", path=f"{tmp_path}/other.txt",
                    flags="O_RDWR"))
    assert [getattr(a, "rule_id", None) for a in seen] == ["witness-tamper"]
    assert stopped == ["witness-tamper"]


BY_HANDLE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("data", ctypes.c_ubyte * 128)]
h, mount_id = Handle(128, 0), ctypes.c_int()
assert libc.name_to_handle_at(-100, sys.argv[1].encode(), ctypes.byref(h), ctypes.byref(mount_id), 0) == 0
fd = libc.syscall(304, -100, ctypes.byref(h), os.O_RDWR | os.O_APPEND)  # open_by_handle_at
assert fd >= 0, ctypes.get_errno()
os.write(fd, b"forged")
"""


def test_writing_the_store_through_a_file_handle_is_caught(setup: Any, tmp_path: Path) -> None:
    """A real open_by_handle_at on the store's index (root may: CAP_DAC_READ_SEARCH): the open is
    recorded on the file it reaches, under both backends, and is witness-tamper."""
    store = tmp_path / "st"
    setup.run("true", store=store)
    (setup.ws / "h.py").write_text(BY_HANDLE)
    res = setup.run(f"{setup.python} h.py {store}/index.sqlite", store=store)
    found = witness(setup.alerts(store=store))
    assert any(a["level"] == "critical" and "index.sqlite" in str(a["message"]) for a in found), res.stderr


def test_benign_twin_a_workspace_file_through_a_file_handle_is_no_tamper(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "st"
    (setup.ws / "h.py").write_text(BY_HANDLE)
    (setup.ws / "notes.txt").write_text("mine\n")
    res = setup.run(f"{setup.python} h.py notes.txt", store=store)
    assert res.returncode == 0, res.stderr
    assert witness(setup.alerts(store=store)) == []


def test_enforce_mode_stops_the_agent_that_rewrites_its_policy(setup: Any) -> None:
    import shutil

    import pytest

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (apt-get install bubblewrap)")
    (setup.ws / "spyglass.yaml").write_text("mode: enforce\n")
    res = setup.run("echo 'gate: [workspace-changed]' >> spyglass.yaml; sleep 30; echo survived > s.txt",
                    "--policy", "spyglass.yaml")
    assert res.returncode == 7, res.stderr
    assert "rule witness-tamper stopped the agent" in res.stderr
    assert not (setup.ws / "s.txt").exists()
    check = setup.spyglass("check", "--store", str(setup.store))
    assert "same as recorded live" in check.stderr, check.stderr


@pytest.mark.backends("auto")  # not about capture
def test_keys_generate_warns_when_the_agents_user_can_read_the_key(setup: Any, tmp_path: Path) -> None:
    res = setup.spyglass("keys", "generate", str(tmp_path / "mine.key"))
    assert res.returncode == 0 and "warning:" in res.stderr and "readable by you" in res.stderr
    # benign twin: agents run as another user, who cannot read a 0600 key it does not own
    res = setup.spyglass("keys", "generate", "--agent-user", "nobody", str(tmp_path / "other.key"))
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr


def test_benign_twin_a_sandboxed_agent_writing_its_home_and_tmp_stays_silent(setup: Any) -> None:
    """The sandbox's decoy home and /tmp live in the store's work area; writing them is the agent's right."""
    import shutil

    import pytest

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (apt-get install bubblewrap)")
    (setup.ws / "spyglass.yaml").write_text("mode: enforce\n")
    res = setup.run("echo hi > $HOME/x.txt; mkdir -p $HOME/.cache/a; echo 1 > /tmp/t.txt; cat $HOME/x.txt",
                    "--policy", "spyglass.yaml")
    assert res.returncode == 0, res.stderr
    assert witness(setup.alerts()) == []


def test_the_sandbox_hides_the_signing_key_in_use_wherever_it_is(setup: Any) -> None:
    import shutil

    import pytest

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (apt-get install bubblewrap)")
    key = setup.ws / "keys" / "signing.key"  # careless: inside the workspace the sandbox binds
    assert setup.spyglass("keys", "generate", str(key)).returncode == 0
    (setup.ws / "keys" / "readme.txt").write_text("hello\n")
    res = setup.run(f"cat {key} > stolen.txt; cat {setup.ws}/keys/readme.txt > copied.txt",
                    "--sandbox", "--sign-key", str(key))
    assert (setup.ws / "stolen.txt").read_text() == "", res.stderr
    assert (setup.ws / "copied.txt").read_text() == "hello\n"  # benign twin: the rest stays visible


def test_a_failed_attempt_on_a_store_owned_by_another_user_is_still_critical(setup: Any, tmp_path: Path) -> None:
    """The recommended deployment: the store belongs to the witness's user; the agent runs as another
    (here `nobody`, dropped to with setpriv inside the run) and its writes fail with EACCES."""
    import os
    import shutil

    import pytest

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux)")
    store = tmp_path / "st"
    setup.run("true", store=store)
    os.chmod(tmp_path, 0o755)
    os.chmod(store, 0o700)
    res = setup.run(f"setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c 'echo x > {store}/index.sqlite'",
                    "--no-seccomp", store=store)
    msgs = [str(a["message"]) for a in witness(setup.alerts(store=store))]
    assert any("attempted; failed: EACCES" in m for m in msgs), (msgs, res.stderr)


def _guard_feed(store: Path) -> tuple[Any, list[str]]:
    guard = WitnessGuard(Protected.for_run(store), mode="observe")
    seen: list[str] = []

    class Catch:
        def alert(self, a: object) -> None:
            seen.append(f"{getattr(a, 'rule_id', '')} {getattr(a, 'message', '')}")

    pipe = Pipeline([guard, Catch()], RunContext(run_id="r"))
    pipe.start()
    return pipe.feed, seen


def test_directories_made_keep_the_verdicts_and_a_renamed_or_linked_store_is_still_caught(tmp_path: Path) -> None:
    """Made directories do not make the guard look every directory up again (an untar makes
    thousands); what can change a verdict (a rename, a delete, a symlink) still does.  Real files;
    the events as a backend emits them when it could not resolve the path (the writer was gone)."""
    store, ws = tmp_path / "st", tmp_path / "ws"
    (store / "runs").mkdir(parents=True)
    ws.mkdir()
    feed, seen = _guard_feed(store)
    feed(Event(type="file.create", pid=9, path=f"{ws}/later/f", ok=False, errno="ENOENT"))  # judged before it exists
    (ws / "later").mkdir()
    feed(Event(type="file.mkdir", pid=9, path=f"{ws}/later"))
    feed(Event(type="file.create", pid=9, path=f"{ws}/later/f"))
    assert seen == []
    (ws / "alias").symlink_to(store)  # the store under a name of the workspace
    feed(Event(type="file.symlink", pid=9, path=f"{ws}/alias", target=str(store)))
    feed(Event(type="file.write", pid=9, path=f"{ws}/alias/runs/a"))
    for i in range(3):
        (ws / f"d{i}").mkdir()
        feed(Event(type="file.mkdir", pid=9, path=f"{ws}/d{i}"))
        feed(Event(type="file.write", pid=9, path=f"{ws}/alias/runs/b{i}"))
    assert [m.split()[0] for m in seen] == ["witness-tamper"] * 4, seen
    assert all("alias/runs/" in m for m in seen)
    seen.clear()
    (ws / "later").rename(ws / "later2")  # a rename: looked up again, nothing protected there
    feed(Event(type="file.rename", pid=9, path=f"{ws}/later", target=f"{ws}/later2"))
    feed(Event(type="file.create", pid=9, path=f"{ws}/later2/g"))
    assert seen == []
    store.rename(ws / "later")  # the store moved where a verdict said "nothing protected" (another
    feed(Event(type="file.rename", pid=10, path=str(store), target=f"{ws}/later"))  # process: per-process cap)
    feed(Event(type="file.create", pid=10, path=f"{ws}/later/runs/planted"))
    assert len(seen) == 2 and all(m.startswith("witness-tamper") for m in seen), seen
    assert "planted" in seen[1]
