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
