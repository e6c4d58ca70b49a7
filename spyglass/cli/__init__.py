"""Command-line interface: the only layer that wires every part together."""
