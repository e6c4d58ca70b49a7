"""The cyclic garbage collector paused while ``spyglass run`` starts, and once the agent is done.

A run's start allocates many objects and frees few (modules, classes, the rule set,
the sinks): the collector's young-generation passes found next to nothing to free and
cost several ms of every start (about 70 of them).  The CLI pauses it for ``run``
(:func:`pause`) and the session resumes it once the agent is launched (:func:`resume`,
before the first event: a long run collects as usual; what the start made is frozen
out of the generations first), then pauses it again for the run's finish
(:func:`pause_finish`); the CLI's :func:`end` resumes it whatever happened (the process
ends right after, unless it is a caller's).  Only a pause this module made is resumed:
the Python API (``spyglass.run()``) never touches its host's collector.
"""

from __future__ import annotations

import gc

_paused = False
_cli = False


def pause() -> None:
    """Pause the collector for this process's start (the CLI's ``run``); nothing if it is off already."""
    global _paused, _cli
    _cli = True
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """The agent runs: the collector works again (if :func:`pause` paused it).  What the start made
    leaves the collector's generations first (``gc.freeze``, as the eBPF backend does at its first
    recording): it all lives for the run, and the first collection would otherwise walk it all."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def end() -> None:
    """The CLI is done (it may have run inside a caller's process): the collector works again if
    this module paused it, and later runs in this process leave it alone.  The start's frozen
    objects stay frozen (unfrozen, the collection at the interpreter's exit would walk them all)."""
    global _cli
    _cli = False
    resume()


def pause_finish() -> None:
    """The agent is done and the process only finishes the run: paused again (CLI runs only)."""
    global _paused
    if _cli and gc.isenabled():
        gc.disable()
        _paused = True
