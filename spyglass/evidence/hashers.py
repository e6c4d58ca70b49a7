"""Threads that hash the large files of a manifest walk while the walk goes on.

Made of :mod:`threading` alone, which every run has loaded before its agent starts: the
after-walk runs once the agent has ended, and a module first imported then (``concurrent.futures``,
``queue``) could be loaded from byte-code the agent forged in the standard library's
``__pycache__`` during the run (docs/threat-model.md).  Reading a file and SHA-256 release the
interpreter's lock, so the threads and the walk overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Hashers(Generic[T]):
    """``workers`` threads running ``fn`` on the arguments handed over, in hand-over order, each
    result kept at its hand-over's index; :meth:`results` waits for every one and ends the threads."""

    def __init__(self, workers: int, fn: Callable[..., T]) -> None:
        self._fn = fn
        self._jobs: list[tuple[object, ...]] = []
        self._results: list[T | BaseException | None] = []
        self._next = 0
        self._closed = False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._work, name=f"spyglass-hash-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, *args: object) -> int:
        with self._cond:
            self._jobs.append(args)
            self._results.append(None)
            self._cond.notify()
            return len(self._jobs) - 1

    def _work(self) -> None:
        while True:
            with self._cond:
                while self._next >= len(self._jobs) and not self._closed:
                    self._cond.wait()
                if self._next >= len(self._jobs):
                    return  # closed, and nothing left
                i = self._next
                self._next += 1
                args = self._jobs[i]
            try:
                got: T | BaseException = self._fn(*args)
            except BaseException as exc:  # handed to :meth:`results`' caller, never lost
                got = exc
            self._results[i] = got

    def results(self) -> list[T]:
        """Every result, once all are in; the threads have ended.  A call that raised raises here."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        out: list[T] = []
        for got in self._results:
            if isinstance(got, BaseException):
                raise got
            assert got is not None
            out.append(got)
        return out
