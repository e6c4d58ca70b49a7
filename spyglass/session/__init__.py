"""The recording session: the core that ``spyglass run``, ``spyglass demo`` and
``spyglass.run()`` share (see docs/design.md, "Session").

* :mod:`~spyglass.session.options` — :class:`RunOptions`, what a caller asks for;
* :mod:`~spyglass.session.core` — :func:`run_session`: policy, backend, sandbox, sinks, outcome;
* :mod:`~spyglass.session.sinks` — the one list of sinks a run gets (features add theirs here);
* :mod:`~spyglass.session.record` — :func:`record`: one command under capture into the store.
"""

from __future__ import annotations

from spyglass.session.core import check_level, plan_run, run_session
from spyglass.session.options import RunOptions
from spyglass.session.record import RunOutcome, RunRequest, record

__all__ = ["RunOptions", "RunOutcome", "RunRequest", "check_level", "plan_run", "record", "run_session"]
