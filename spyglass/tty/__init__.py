"""The terminal session on record: the agent's terminal output and the operator's input.

``run --record-tty`` puts the agent on a pseudo-terminal that spyglass owns.
spyglass relays the operator's keystrokes to it and its output back to the
operator's terminal, and writes both, with timestamps, as an asciicast v2 file
(``evidence/terminal.cast``) that the run's final checkpoint covers.  Secrets
are masked in the recording (never on the live terminal).
"""

from spyglass.tty.cast import CastEvent, CastWriter, read_cast
from spyglass.tty.redact import Redactor
from spyglass.tty.relay import PtyRelay, TerminalRecorder
from spyglass.tty.view import TermLine, cast_path, lines, plain

__all__ = [
    "CastEvent", "CastWriter", "PtyRelay", "Redactor", "TermLine", "TerminalRecorder", "cast_path", "lines",
    "plain", "read_cast",
]
