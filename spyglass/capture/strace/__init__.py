"""The strace capture backend: a pure line parser and a thin process runner around it."""

from spyglass.capture.strace.backend import StraceBackend, StraceSession
from spyglass.capture.strace.parser import StraceParser

__all__ = ["StraceBackend", "StraceParser", "StraceSession"]
