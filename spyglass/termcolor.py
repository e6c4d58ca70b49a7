"""Whether to colour a stream: ``--color auto|always|never``, then ``NO_COLOR``, then is it a terminal.

The one place the decision is made (https://no-color.org): ``--color
always``/``never`` (or ``SPYGLASS_COLOR``) win; under ``auto`` a non-empty
``NO_COLOR`` turns colour off, ``TERM=dumb`` too, and otherwise a stream is
coloured when it is a terminal.  Imports nothing of spyglass.
"""

from __future__ import annotations

import os
from typing import IO, Any

CHOICES = ("auto", "always", "never")
_mode: str | None = None


def set_mode(mode: str | None) -> None:
    """Set the process-wide choice (the CLI's ``--color``); None goes back to the environment."""
    if mode is not None and mode not in CHOICES:
        raise ValueError(f"color mode must be one of {', '.join(CHOICES)}")
    global _mode
    _mode = mode


def mode() -> str:
    m = _mode or os.environ.get("SPYGLASS_COLOR", "auto").lower()
    return m if m in CHOICES else "auto"


def use_color(stream: IO[str] | Any = None, explicit: bool | None = None) -> bool:
    """Colour for STREAM?  EXPLICIT False (the caller writes a file, not a screen) always wins;
    EXPLICIT True is honoured unless ``--color never`` or ``NO_COLOR`` say otherwise."""
    if explicit is False:
        return False
    m = mode()
    if m == "always":
        return True
    if m == "never" or os.environ.get("NO_COLOR", ""):
        return False
    if explicit is not None:
        return explicit
    if os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())
