"""Text from a run shown on a terminal: control characters made visible.

File names, command lines, messages and host names come from the agent.
Printed raw, an escape sequence in one of them could clear the screen, move
the cursor, or a newline or carriage return could print a forged line
("spyglass: no alerts") in the middle of a summary.  Every terminal output
of spyglass passes each field (or each line it built from fields) through
:func:`visible`: C0 and C1 controls, DEL, and the Unicode bidirectional
overrides become escapes such as ``\\n``, ``\\x1b`` and ``\\u202e``.  JSON
output is not touched (it escapes by itself).
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}
_BIDI = [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]


def _table() -> dict[int, str]:
    table: dict[int, str] = {}
    for cp in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]:
        table[cp] = _NAMED.get(chr(cp), f"\\x{cp:02x}")
    for cp in _BIDI:
        table[cp] = f"\\u{cp:04x}"
    return table


_TABLE = _table()


def visible(text: str) -> str:
    """``text`` with every control character written as an escape (one line, inert on a terminal)."""
    return text.translate(_TABLE)


_TABLE_TABS = {k: v for k, v in _TABLE.items() if k != 0x09}


def visible_lines(text: str, *, keep_tabs: bool = False) -> str:
    """A block of lines for the terminal: each line as :func:`visible`, the line breaks kept
    (``keep_tabs``: tabs too, for diffs of file contents)."""
    table = _TABLE_TABS if keep_tabs else _TABLE
    return "\n".join(line.translate(table) for line in text.split("\n"))
