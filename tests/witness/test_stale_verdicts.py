"""A name the guard judged clean, then turned into a way to the store without a rename, delete, link
or symlink of it: a bind mount of a store file over it, a symlink to the writer's ``/proc/PID/cwd``
whose target a ``chdir`` changes, and a directory descriptor named ``/dev/fd/N``.  The guard's
verdicts are remembered per name (spyglass.witness.protected), so each of these would be judged by
what the name reached before.

Each attack is a real ``spyglass run`` under each backend, with a benign twin that stays silent.
The agent waits until spyglass has judged the clean use of the name before it turns it: events are
judged in order, one at a time, after the writer wrote them, so once an event of a later marker is
in the run's ``events.jsonl`` the earlier ones have been judged."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

URING = f"{sys.executable} {Path(__file__).resolve().parent / 'progs' / 'uring_rename.py'}"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the attacks mount and chdir as root")

def test_a_store_file_bind_mounted_over_a_name_judged_clean_is_caught(setup: Any) -> None:
    res = setup.play("""
echo a > f; chmod 644 f
judged 1
mount --bind "$STORE/index.sqlite" f
chmod 600 f; echo forged >> f
judged 2
umount f
""")
    msgs = setup.tamper()
    assert any("chmod-ed" in m and f"{setup.ws}/f" in m for m in msgs), (msgs, res.stderr)


def test_benign_twin_a_workspace_file_bind_mounted_over_another_stays_silent(setup: Any) -> None:
    res = setup.play("""
echo a > f; chmod 644 f; echo b > g
judged 1
mount --bind g f
chmod 600 f; echo more >> f
judged 2
umount f
""")
    assert setup.tamper() == [], res.stderr


def test_a_symlink_to_the_writers_cwd_is_judged_where_the_cwd_is_now(setup: Any) -> None:
    res = setup.play("""
W=$PWD; mkdir safe; ln -s /proc/$$/cwd c; cd safe
echo a > "$W/c/index.sqlite"; chmod 644 "$W/c/index.sqlite"
judged 1
cd "$STORE"; chmod 600 "$W/c/index.sqlite"
judged 2
""")
    msgs = setup.tamper()
    assert any("chmod-ed" in m for m in msgs), (msgs, res.stderr)


def test_benign_twin_a_symlink_to_the_cwd_moved_within_the_workspace_stays_silent(setup: Any) -> None:
    res = setup.play("""
W=$PWD; mkdir safe other; ln -s /proc/$$/cwd c; cd safe
echo a > "$W/c/index.sqlite"; chmod 644 "$W/c/index.sqlite"
judged 1
cd "$W/other"; echo b > index.sqlite; chmod 600 "$W/c/index.sqlite"
judged 2
""")
    assert setup.tamper() == [], res.stderr


def test_a_file_planted_in_the_store_through_dev_fd_is_caught(setup: Any) -> None:
    """``/dev/fd/N`` is the writer's descriptor N (``/proc/self/fd``), not spyglass's."""
    res = setup.play("""
exec 5<"$STORE/runs"
echo x > /dev/fd/5/planted
judged 1
""")
    assert (setup.store / "runs" / "planted").exists()
    msgs = setup.tamper()
    assert any(m.endswith("/dev/fd/5/planted") or "runs/planted" in m for m in msgs), (msgs, res.stderr)


def test_benign_twin_a_file_made_through_dev_fd_in_the_workspace_stays_silent(setup: Any) -> None:
    res = setup.play("""
mkdir out; exec 5<out
echo x > /dev/fd/5/made; echo y > /dev/stdout
judged 1
""")
    assert (setup.ws / "out" / "made").exists()
    assert setup.tamper() == [], res.stderr


def test_a_secret_bind_mounted_over_a_name_read_before_is_a_secret_read(setup: Any) -> None:
    """The strace backend knows a protected file opened under another name by a ``stat`` of the name,
    remembered per name (spyglass.capture.ident): a mount forgets it too."""
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    res = setup.play(f"""
echo a > f; cat f
judged 1
mount --bind {ssh}/id_rsa f
cat f
judged 2
umount f
""")
    assert "PRIVATE KEY" in res.stdout
    reads = [str(a["message"]) for a in setup.alerts() if a["rule_id"] == "cred-secret-read"]
    assert any(m.endswith(f"read secret {ssh / 'id_rsa'}") for m in reads), (reads, res.stderr)


def test_a_store_file_renamed_by_io_uring_over_a_name_judged_clean_is_caught(setup: Any) -> None:
    """IORING_OP_RENAMEAT makes no rename event (eBPF records the operation once per process, strace
    not at all): once the run used io_uring, every name is judged afresh."""
    res = setup.play(f"""
echo a > f; chmod 644 f
judged 1
{URING} "$STORE/index.sqlite" f || exit 3
chmod 600 f
judged 2
{URING} f "$STORE/index.sqlite"
""")
    msgs = setup.tamper()
    assert any("chmod-ed" in m and f"{setup.ws}/f" in m for m in msgs), (msgs, res.stderr)


def test_benign_twin_a_workspace_file_renamed_by_io_uring_stays_silent(setup: Any) -> None:
    res = setup.play(f"""
echo a > f; chmod 644 f; echo b > g
judged 1
{URING} g f || exit 3
chmod 600 f
judged 2
""")
    assert setup.tamper() == [], res.stderr
