"""Helpers for the strace backend tests: parse recorded fixtures, pick events out of a list."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.strace.parser import StraceParser
from spyglass.events.schema import Event

DATA = Path(__file__).resolve().parent / "data"

Parse = Callable[..., tuple[list[Event], StraceParser]]
Pick = Callable[..., list[Event]]


def parse_lines(lines: Iterable[str], **kwargs: Any) -> tuple[list[Event], StraceParser]:
    kwargs.setdefault("cwd", "/tmp/sgfx")
    parser = StraceParser(**kwargs)
    events: list[Event] = []
    for line in lines:
        events.extend(parser.feed(line))
    events.extend(parser.finish())
    return events, parser


def read_fixture(name: str) -> list[str]:
    with (DATA / f"{name}.strace").open(encoding="utf-8", errors="surrogateescape") as f:
        return f.read().splitlines()


def pick_events(events: Iterable[Event], **attrs: Any) -> list[Event]:
    """Events whose attributes equal ``attrs`` (a callable value is used as a predicate)."""
    out = []
    for ev in events:
        for key, want in attrs.items():
            got = getattr(ev, key)
            if callable(want):
                if not want(got):
                    break
            elif got != want:
                break
        else:
            out.append(ev)
    return out


@pytest.fixture
def parse() -> Parse:
    """``parse("files")`` -> (events, parser) for ``data/files.strace``; ``parse(lines=[...])`` for text."""

    def _parse(name: str | None = None, *, lines: Iterable[str] | None = None, **kwargs: Any) -> Any:
        src = read_fixture(name) if name is not None else list(lines or [])
        return parse_lines(src, **kwargs)

    return _parse


@pytest.fixture
def fixture_lines() -> Callable[[str], list[str]]:
    """``fixture_lines("procs")`` -> the raw lines of ``data/procs.strace``."""
    return read_fixture


@pytest.fixture
def pick() -> Pick:
    return pick_events


@pytest.fixture
def one() -> Callable[..., Event]:
    def _one(events: Iterable[Event], **attrs: Any) -> Event:
        found = pick_events(events, **attrs)
        assert len(found) == 1, f"expected one event matching {attrs}, found {len(found)}: {found}"
        return found[0]

    return _one
