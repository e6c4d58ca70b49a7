"""Unified diffs of added and removed files: written directly, as difflib writes them."""

from __future__ import annotations

import difflib

import pytest

from spyglass.evidence.changes import unified_diff

CONTENTS = [b"", b"one\n", b"one", b"a\nb\nc\n", b"a\nb\nno newline", b"x\r\ny\r\n", b"page\x0cbreak\n",
            b"dup\ndup\ndup\n", "\u00e9t\u00e9\u2028line\n".encode(), b"\n\n\n",
            b"".join(b"l%d\n" % i for i in range(500))]


def _reference(rel: str, old: bytes | None, new: bytes | None) -> str:
    """difflib's unified diff, with the markers unified_diff adds for a missing final newline."""
    a = (old or b"").decode("utf-8").splitlines(keepends=True)
    b = (new or b"").decode("utf-8").splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{rel}",
                                     "/dev/null" if new is None else f"b/{rel}", n=3):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


@pytest.mark.parametrize("data", CONTENTS)
def test_added_removed_and_emptied_files_diff_as_difflib_does(data: bytes) -> None:
    for old, new in ((None, data), (data, None), (b"", data), (data, b"")):
        assert unified_diff("d/f.txt", old, new) == _reference("d/f.txt", old, new), (old, new)
