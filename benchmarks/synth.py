"""Synthetic events for the benchmarks, numbered and timed like those of a real run."""

from __future__ import annotations

import random

from spyglass.events import Event


class EventStamper:
    """Makes events with ``seq`` 1, 2, ... and a ``ts`` that moves on by a random gap each time."""

    def __init__(self, rng: random.Random, ts: int, gap: tuple[int, int]) -> None:
        self.rng, self.ts, self.gap = rng, ts, gap
        self.seq = 0  # of the last event made

    def __call__(self, **fields: object) -> Event:
        self.seq += 1
        self.ts += self.rng.randrange(*self.gap)
        return Event(seq=self.seq, ts=self.ts, **fields)  # type: ignore[arg-type]
