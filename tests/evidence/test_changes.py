"""Unified diffs of added and removed files: written directly, as difflib writes them."""

from __future__ import annotations

import difflib
import random

import pytest

from spyglass.evidence.changes import only_newlines, unified_diff

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


def _by_splitlines(text: str) -> bool:
    """The definition: the lines str.splitlines makes are the lines "\\n" alone makes."""
    return text.splitlines() == text.split("\n")[: -1 if text.endswith("\n") else None] or text == ""


def test_only_newlines_agrees_with_splitlines_on_every_break_and_on_random_text() -> None:
    breaks = [chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) == 2]
    assert sorted(breaks) == sorted("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # every one there is
    rng = random.Random(19)
    alphabet = [*breaks, "a", "é", "\u2027", "\u202a", "\x1f", "\t", " ", "\U0001f600"]
    samples = ["", "plain\n", "no break", *(f"x{b}y\n" for b in breaks)]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30))) for _ in range(3000)]
    for text in samples:
        assert only_newlines(text) == _by_splitlines(text), repr(text)
