"""``spyglass.logs``: loggers that load :mod:`logging` at their first record, formatted as the CLI asks."""

from __future__ import annotations

import subprocess
import sys

_PRELUDE = (
    "import sys\n"
    "from spyglass import logs\n"
    "log = logs.get_logger('spyglass.test')\n"
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, timeout=60,
                          check=True)


def test_a_record_below_the_level_loads_nothing_and_one_above_is_formatted() -> None:
    res = _run(
        "logs.configure(level=logs.WARNING, format='spyglass: %(levelname)s: %(message)s')\n"
        "log.debug('not shown %d', 1)\n"
        "log.info('not shown either')\n"
        "print('logging' in sys.modules)\n"
        "log.warning('shown %s', 'here')\n"
        "print('logging' in sys.modules)\n"
    )
    assert res.stdout.split() == ["False", "True"]
    assert res.stderr == "spyglass: WARNING: shown here\n"


def test_a_verbose_level_shows_debug_records() -> None:
    res = _run(
        "logs.configure(level=logs.DEBUG, format='spyglass: %(levelname)s: %(message)s')\n"
        "log.debug('seen %d', 2)\n"
    )
    assert res.stderr == "spyglass: DEBUG: seen 2\n"


def test_configure_applies_at_once_when_logging_is_loaded_and_load_applies_it_otherwise() -> None:
    res = _run(
        "import logging\n"
        "logs.configure(level=logs.INFO, format='now: %(message)s')\n"
        "logging.getLogger('other').info('a library record')\n"
    )
    assert res.stderr == "now: a library record\n"
    res = _run(
        "logs.configure(level=logs.INFO, format='later: %(message)s')\n"
        "logging = logs.load()\n"
        "logging.getLogger('other').info('a library record')\n"
    )
    assert res.stderr == "later: a library record\n"


def test_exceptions_keep_their_traceback() -> None:
    res = _run(
        "logs.configure(level=logs.WARNING, format='spyglass: %(levelname)s: %(message)s')\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    log.exception('failed')\n"
    )
    assert res.stderr.startswith("spyglass: ERROR: failed\nTraceback")
    assert "ZeroDivisionError" in res.stderr
