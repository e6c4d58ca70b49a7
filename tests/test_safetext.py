"""Control characters from a run are shown, never obeyed by the terminal."""

from __future__ import annotations

from spyglass.safetext import visible


def test_controls_become_visible_escapes() -> None:
    forged = "a\x1b[2J\x1b[H\nspyglass: no alerts\r\x07\x00\x7f\x9b\u202e\t"
    out = visible(forged)
    assert out == "a\\x1b[2J\\x1b[H\\nspyglass: no alerts\\r\\x07\\x00\\x7f\\x9b\\u202e\\t"
    assert all(ch.isprintable() for ch in out)


def test_ordinary_text_is_unchanged() -> None:
    text = "plain name – ünïcode 日本 ✓ $HOME/x.txt"
    assert visible(text) == text


def test_alert_lines_use_it() -> None:
    from spyglass.events import Alert
    from spyglass.rules.printer import format_alert_line

    a = Alert(rule_id="r", title="t", level="high", message="read /x\nspyglass: all clear", pid=1,
              argv=["cat", "\x1b[2J"])
    line = format_alert_line(a)
    assert "\n" not in line and "\x1b" not in line and "\\nspyglass: all clear" in line
