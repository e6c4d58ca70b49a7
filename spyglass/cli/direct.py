"""``spyglass run`` without click, for the command lines click would take as they are.

Loading click is a part of every run's start that does nothing for the run.  A command line
``spyglass run [OPTION...] -- CMD [ARG...]`` whose every option is a flag, a string, a choice
given one of its choices, or a path that passes click's checks, is parsed here with what
:data:`spyglass.cli.runspec.SPEC` says of the options (derived from the click declarations,
spyglass/cli/directspec.py) and run by :func:`spyglass.cli.runner.run`, the function the click
command calls, with the same arguments click would give it (tests/cli/test_direct.py compares
both parsers).  Anything else (an option before ``run``, ``--help``, an unknown or repeated
option, a value click would refuse or that only click converts, no ``--``, shell completion)
goes to click, so its help and its errors are click's as always.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spyglass.cli.runspec import SPEC

#: the options the run's own code checks with click (``--model-var``: ``cmd_agents.parse_vars``)
CLICK_CHECKED = frozenset({"model_vars"})


class _Refused(Exception):
    """Not a command line for this parser: click takes it."""


def _convert(p: Mapping[str, Any], value: str) -> Any:
    kind = p["kind"]
    if kind == "string":
        return value
    if kind == "choice":
        if value not in p["choices"]:
            raise _Refused
        return value
    if kind == "path":
        if not value:
            raise _Refused
        try:
            st = os.stat(value)
        except OSError:
            if p["exists"]:
                raise _Refused from None
            return Path(value) if p["as_path"] else value
        if ((not p["file_okay"] and stat.S_ISREG(st.st_mode)) or (not p["dir_okay"] and stat.S_ISDIR(st.st_mode))
                or (p["readable"] and not os.access(value, os.R_OK))
                or (p["writable"] and not os.access(value, os.W_OK))
                or (p["executable"] and not os.access(value, os.X_OK))):
            raise _Refused
        return Path(value) if p["as_path"] else value
    raise _Refused


def parse(args: list[str], environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the group's arguments, ``run``'s arguments) as click would give them to the callbacks, or
    None: a command line that click parses (see the module's doc)."""
    if not SPEC["direct"] or args[:1] != ["run"] or SPEC["complete_var"] in environ:
        return None
    try:
        return _group(environ), _run(args[1:], environ)
    except _Refused:
        return None


def _from_env(params: list[dict[str, Any]], given: dict[str, Any], environ: Mapping[str, str]) -> None:
    for p in params:
        if p["name"] in given or not p["envvar"]:
            continue
        value = environ.get(p["envvar"])
        if value is None:
            continue
        if not value or p["multiple"]:  # an empty variable counts as unset in click; lists split there
            raise _Refused
        given[p["name"]] = _convert(p, value)


def _group(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _from_env(SPEC["group"]["params"], out, environ)
    return {**SPEC["group"]["defaults"], **out}


def _run(args: list[str], environ: Mapping[str, str]) -> dict[str, Any]:
    params: list[dict[str, Any]] = SPEC["run"]["params"]
    by_opt = {opt: p for p in params for opt in p["opts"]}
    given: dict[str, Any] = {}
    i = 0
    while True:
        if i >= len(args):
            raise _Refused  # no "--"
        word = args[i]
        if word == "--":
            command = tuple(args[i + 1 :])
            break
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        p = by_opt.get(name)
        if p is None or p["name"] in CLICK_CHECKED or p["kind"] == "other":
            raise _Refused
        if p["kind"] == "flag":
            if eq or p["name"] in given:
                raise _Refused
            given[p["name"]] = True
        else:
            if not eq:
                i += 1
                if i >= len(args):
                    raise _Refused
                inline = args[i]
            if inline.startswith("-"):
                raise _Refused  # click takes it as the value; left to click all the same
            value = _convert(p, inline)
            if p["multiple"]:
                given[p["name"]] = (*given.get(p["name"], ()), value)
            elif p["name"] in given:
                raise _Refused
            else:
                given[p["name"]] = value
        i += 1
    if not command:
        raise _Refused
    _from_env(params, given, environ)
    return {**SPEC["run"]["defaults"], **given, SPEC["argument"]: command}


def invoke(group: dict[str, Any], params: dict[str, Any]) -> None:
    """Run ``spyglass run`` with arguments from :func:`parse`, ending as the click command does: its
    exit code; a spyglass error or a path that cannot be used as one line (SpyglassGroup.invoke);
    a keyboard interrupt before the run's own handlers as click's ``Aborted!``."""
    from spyglass import phases
    from spyglass.cli.launch import configure_output
    from spyglass.cli.plain import echo_err
    from spyglass.cli.runner import run
    from spyglass.errors import PathError, SpyglassError

    configure_output(group["verbose"], group["color"])
    phases.mark("cli")
    try:
        run(**params)
    except SpyglassError as exc:
        echo_err(f"spyglass: error: {exc}")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except OSError as exc:
        if exc.filename is None:
            raise
        err = PathError.from_os_error(exc)
        echo_err(f"spyglass: error: {err}")
        sys.exit(err.exit_code)
    except (EOFError, KeyboardInterrupt):
        echo_err("")
        echo_err("Aborted!")
        sys.exit(1)
    sys.exit(0)
