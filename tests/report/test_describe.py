from __future__ import annotations

from spyglass.report.describe import command_text, shorten


def test_sandbox_launchers_are_named_not_spelled_out() -> None:
    argv = [
        "/usr/bin/bwrap",
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--",
        "/usr/bin/python3",
        "-I",
        "-S",
        "/run/spyglass/relay.py",
        "/run/spyglass/proxy.sock",
        "3128",
        "--",
        "python3",
        "agent.py",
    ]
    assert command_text(argv) == "[sandbox: bwrap] [sandbox: proxy relay] python3 agent.py"
    assert command_text(["cat", "a b"]) == "cat 'a b'"


def test_shorten_cuts_at_a_word() -> None:
    assert shorten("alpha beta gamma delta", 14) == "alpha beta …"
    assert shorten("short", 14) == "short"
