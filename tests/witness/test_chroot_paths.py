"""A root agent chroots to its home and plants a shell rc file under the name it has there.

After ``chroot(HOME)`` the process names ``~/.bashrc`` ``/.bashrc``: the eBPF program reads that
name (and its directory walks stop at the process's root), the strace backend resolves a name
it has no descriptor's path for (a rename's) the same way.  Both backends note the root a process
of the run chrooted to (inherited at a fork) and record its paths below it, so the write and the
rename are a change of ``~/.bashrc`` itself (``persist-shell-rc``); the chroot is
``sys-namespace-change``.  The benign twin chroots to a directory of its own and writes the
``/etc/profile.d/`` there: no shell rc file of the host changed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

PROG = Path(__file__).resolve().parent / "progs" / "chroot_write.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")


def _chroot_write(setup: Any, root: Path, new: str, final: str) -> tuple[set[str], list[dict[str, Any]]]:
    res = setup.run(f"{setup.python} {PROG} {root} {new} {final}")
    assert res.returncode == 0, res.stderr
    assert (root / final.lstrip("/")).read_text() == "echo hello\n"  # the attack wrote there
    out = setup.spyglass("events", "latest", "--store", str(setup.store), "--format", "json").stdout
    events = [e for e in map(json.loads, out.splitlines()) if e.get("syscall") in ("openat", "rename", "chroot")
              and str(e.get("file.raw_path", e.get("file.path"))).startswith(("/.", "/etc/profile.d", str(root)))]
    return {str(a["rule_id"]) for a in setup.alerts()}, events


def test_a_shell_rc_file_written_from_a_chroot_of_home_is_the_homes(setup: Any) -> None:
    home = Path(setup.env["HOME"])
    rules, events = _chroot_write(setup, home, "/.bashrc.new", "/.bashrc")
    assert {"sys-namespace-change", "persist-shell-rc"} <= rules, (rules, events)
    renames = [(e["file.path"], e["file.target"]) for e in events if e["syscall"] == "rename"]
    assert renames == [(f"{home}/.bashrc.new", f"{home}/.bashrc")], events
    (chroot,) = [e for e in events if e["syscall"] == "chroot"]
    assert chroot["file.path"] == str(home) and chroot["detail"] == f"chroot {home}"


def test_benign_twin_a_chroot_of_its_own_writes_its_own_etc(setup: Any, tmp_path: Path) -> None:
    jail = tmp_path / "jail"
    (jail / "etc" / "profile.d").mkdir(parents=True)
    rules, events = _chroot_write(setup, jail, "/etc/profile.d/x.new", "/etc/profile.d/x.sh")
    assert "persist-shell-rc" not in rules, (rules, events)
    renames = [(e["file.path"], e["file.target"]) for e in events if e["syscall"] == "rename"]
    assert renames == [(f"{jail}/etc/profile.d/x.new", f"{jail}/etc/profile.d/x.sh")], events
