"""``parse_mode`` is memoised (spyglass/rules/fields.py): the memo gives what the parse gives."""

from __future__ import annotations

from spyglass.rules.fields import parse_mode

MODES = [None, "", "0644", "0755", "04755", "0o755", "S_ISUID|0755", "S_ISGID|S_ISVTX|0700", " S_ISUID | 0755 ",
         "0777", "02000", "644", "07", "0x1ff", "S_IRWXU", "S_ISUID", "0644|0111", "1777", "0008", "00644"]


def test_the_memo_gives_what_the_parse_gives() -> None:
    parse = parse_mode.__wrapped__  # the function itself, unmemoised
    for _ in range(3):  # the first look fills the memo, the others read it
        for mode in MODES:
            assert parse_mode(mode) == parse(mode), mode
    assert parse_mode("04755") == 0o4755 and parse_mode("S_ISGID|0700") == 0o2700 and parse_mode("x") is None
