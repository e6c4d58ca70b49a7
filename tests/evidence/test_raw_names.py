"""File names that are not UTF-8 in the workspace evidence: the manifests write them as text
(``\\xHH``) with their exact bytes beside (``raw_bytes``), and the diff reads a changed file by its
bytes.  The text alone is ambiguous: a file can be named ``n\\xff.txt`` literally, and it must never
lend its content to the file whose bytes that text stands for, nor take that file's.  Real
``spyglass run``s under each capture backend, then ``spyglass changes`` and ``spyglass verify``."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from evidence_helpers import Cli as BaseCli
from evidence_helpers import settled

from spyglass.evidence.hashmemo import RACY_MARGIN_NS

#: the file whose name is not UTF-8 (byte 0xff), and the one named like its text form
RAW = b"n\xff.txt"
TWIN = b"n\\xff.txt"
#: the shell's way to the raw name (octal: dash's printf has no \x)
EDIT_RAW = "printf 'raw new\\n' > \"$(printf 'n\\377.txt')\"\n"
EDIT_TWIN = "printf 'twin new\\n' > 'n\\xff.txt'\n"


class Cli(BaseCli):
    def play(self, script: str) -> None:
        """``spyglass run`` of ``script``, which must succeed, then ``spyglass verify``, which must pass."""
        res = self.run(script)
        assert res.returncode == 0, res.stderr
        ver = self("verify", "--store", str(self.store))
        assert ver.returncode == 0, ver.stdout + ver.stderr

    def changes(self) -> list[dict[str, Any]]:
        res = self("changes", "--store", str(self.store), "--format", "json")
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        return [*data["added"], *data["removed"], *data["modified"]]

    def write(self, name: bytes, text: str) -> None:
        with open(os.path.join(os.fsencode(self.ws), name), "w") as f:
            f.write(text)


@pytest.fixture
def cli(tmp_path: Path, capture_backend: str) -> Cli:
    return Cli(tmp_path, capture_backend)


def _name(change: dict[str, Any]) -> bytes:
    """The exact name of a changed file, from its after-entry."""
    entry = change["after"]
    raw = (entry.get("raw_bytes") or {}).get("path")
    return base64.b64decode(raw) if raw is not None else entry["path"].encode("utf-8")


def _by_name(cli: Cli) -> dict[bytes, dict[str, Any]]:
    return {os.path.basename(_name(c)): c for c in cli.changes()}


def test_a_file_named_in_bytes_that_are_not_utf8_gets_its_diff(cli: Cli) -> None:
    cli.write(RAW, "raw old\n")
    cli.play(EDIT_RAW)
    (change,) = cli.changes()
    assert change["status"] == "modified" and change["path"] == "n\\xff.txt"
    assert "-raw old\n+raw new\n" in change.get("diff", ""), change
    assert _name(change) == os.path.join(os.fsencode(cli.ws.resolve()), RAW)


def test_a_file_named_like_the_text_of_another_lends_it_no_content(cli: Cli) -> None:
    """Only the raw-named file is edited: the twin (named as its text reads) is no new side of its diff."""
    cli.write(RAW, "raw old\n")
    cli.write(TWIN, "twin old\n")
    cli.play(EDIT_RAW)
    (change,) = cli.changes()
    diff = change.get("diff", "")
    assert "-raw old\n+raw new\n" in diff, change
    assert "twin" not in diff
    assert _name(change) == os.path.join(os.fsencode(cli.ws.resolve()), RAW)


def test_benign_twin_a_file_named_like_an_escape_gets_its_own_diff(cli: Cli) -> None:
    """Both edited: each file's diff is its own (the twin's name is plain text, with no raw bytes)."""
    cli.write(RAW, "raw old\n")
    cli.write(TWIN, "twin old\n")
    cli.play(EDIT_RAW + EDIT_TWIN)
    changes = _by_name(cli)
    assert sorted(changes) == sorted([RAW, TWIN]), changes
    assert "-raw old\n+raw new\n" in changes[RAW].get("diff", ""), changes
    assert "twin" not in changes[RAW].get("diff", "")
    assert "-twin old\n+twin new\n" in changes[TWIN].get("diff", ""), changes
    assert "raw" not in changes[TWIN].get("diff", "")
    assert "raw_bytes" not in changes[TWIN]["after"]


def test_a_twin_takes_no_hash_of_the_other_from_the_previous_run(cli: Cli) -> None:
    """The previous run's sealed hashes are keyed by the text name, which both files bear: each file
    takes only a hash kept for its own stat, so neither diff's old side is the other's content."""
    cli.write(RAW, "raw old\n")
    cli.write(TWIN, "twin old\n")
    settled([cli.ws / os.fsdecode(RAW), cli.ws / os.fsdecode(TWIN)], RACY_MARGIN_NS)
    cli.play("true")  # seals both files' hashes and contents for the next run
    cli.play(EDIT_RAW + EDIT_TWIN)
    changes = _by_name(cli)
    assert sorted(changes) == sorted([RAW, TWIN]), changes
    assert "-raw old\n+raw new\n" in changes[RAW].get("diff", ""), changes
    assert "-twin old\n+twin new\n" in changes[TWIN].get("diff", ""), changes
