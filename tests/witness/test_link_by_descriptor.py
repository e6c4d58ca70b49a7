"""A root agent gives a secret a new name in its workspace by descriptor, never naming it twice.

``linkat(fd, "", AT_FDCWD, "ws/copy", AT_EMPTY_PATH)`` links the file the descriptor names; the
descriptor is an ``O_PATH`` one, so nothing was read and the link is the only trace of the secret.
Both backends record the file the descriptor names as the link's target (the eBPF program walks
the descriptor when the path is empty; it used to record the working directory), so the link is
``cred-secret-moved`` on the secret.  The benign twin links a plain file the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

PROG = Path(__file__).resolve().parent / "progs" / "link_fd.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH")


def _link(setup: Any, source: Path) -> tuple[list[dict[str, Any]], set[str]]:
    res = setup.run(f"{setup.python} {PROG} {source} {setup.ws / 'copy'}")
    assert res.returncode == 0, res.stderr
    assert (setup.ws / "copy").stat().st_ino == source.stat().st_ino  # the attack made the link
    out = setup.spyglass("events", "latest", "--store", str(setup.store), "--format", "json").stdout
    links = [e for e in map(json.loads, out.splitlines()) if e.get("syscall") == "linkat"]  # JSON lines
    return links, {str(a["rule_id"]) for a in setup.alerts()}


def test_a_secret_linked_by_descriptor_into_the_workspace_is_a_moved_secret(setup: Any) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    secret = ssh / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    links, rules = _link(setup, secret)
    assert [(e["file.path"], e["file.target"]) for e in links] == [(str(setup.ws / "copy"), str(secret))], links
    assert "cred-secret-moved" in rules, rules


def test_benign_twin_a_plain_file_linked_by_descriptor_is_no_secret(setup: Any, tmp_path: Path) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_text("hello\n")
    links, rules = _link(setup, plain)
    assert [(e["file.path"], e["file.target"]) for e in links] == [(str(setup.ws / "copy"), str(plain))], links
    assert not rules & {"cred-secret-moved", "cred-secret-read"}, rules
