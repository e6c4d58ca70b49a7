"""Sizes and ages as people write them in policies and on the command line."""

from __future__ import annotations

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}
_AGES = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_size(text: str | int) -> int:
    """``"500M"``, ``"2 GiB"``, ``1048576`` -> bytes."""
    if isinstance(text, int):
        return text
    s = text.strip().lower().replace(" ", "")
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):]
    if not num or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 500M, 2G, 1048576)")
    return int(float(num) * _UNITS[unit])


def parse_age(text: str | int) -> int:
    """``"30d"``, ``"12h"``, ``"2w"``, ``3600`` -> seconds."""
    if isinstance(text, int):
        return text
    s = text.strip().lower()
    if s.isdigit():
        return int(s)
    if len(s) < 2 or s[-1] not in _AGES or not s[:-1].replace(".", "", 1).isdigit():
        raise ValueError(f"not an age: {text!r} (examples: 30d, 12h, 2w)")
    return int(float(s[:-1]) * _AGES[s[-1]])
