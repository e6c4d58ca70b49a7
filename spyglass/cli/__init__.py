"""Command-line interface: the only layer that wires every part together."""

from spyglass import phases as _phases  # first: its import time ends the "interpreter" phase

__all__: list[str] = []
del _phases
