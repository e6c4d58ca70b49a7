"""The options of ``spyglass`` and ``spyglass run`` as data, derived from their click declarations.

:mod:`spyglass.cli.direct` parses ``spyglass run`` command lines without loading click; what it
knows of the options (names, kinds, choices, path checks, environment variables, defaults) is
:data:`spyglass.cli.runspec.SPEC`, which this module writes from the click commands themselves:
``python -m spyglass.cli.directspec`` after a change to the options of ``run`` or of the group
(tests/cli/test_direct.py fails until it is run).  Defaults are the values click gives a command
line naming no option, in an environment without the options' variables.
"""

from __future__ import annotations

import os
import pprint
import sys
from pathlib import Path
from typing import Any

import click

#: what the data module says of itself
HEADER = '''"""The options of ``spyglass`` and ``spyglass run`` for spyglass/cli/direct.py.

Written by ``python -m spyglass.cli.directspec`` from the click declarations (do not edit;
tests/cli/test_direct.py checks it is what they say now).
"""

from typing import Any

SPEC: dict[str, Any] = '''


def param_spec(p: click.Parameter) -> dict[str, Any]:
    """What the direct parser needs of one option: ``kind`` is ``flag``, ``string``, ``choice`` or
    ``path`` (with click's checks), else ``other`` (a command line giving it goes to click)."""
    out: dict[str, Any] = {"name": p.name, "opts": list(p.opts), "multiple": p.multiple,
                           "envvar": p.envvar if isinstance(p.envvar, str) else None}
    t = p.type
    plain = (isinstance(p, click.Option) and not p.secondary_opts and p.nargs == 1 and p.callback is None
             and not p.is_eager and not p.prompt and not getattr(p, "deprecated", False)
             and not (isinstance(p.envvar, (list, tuple))))
    if not plain:
        out["kind"] = "other"
    elif isinstance(p, click.Option) and p.is_flag and getattr(p, "is_bool_flag", False) and not p.count:
        out["kind"] = "flag"
    elif isinstance(p, click.Option) and (p.is_flag or p.count or getattr(p, "_flag_needs_value", False)):
        out["kind"] = "other"
    elif t is click.STRING:
        out["kind"] = "string"
    elif isinstance(t, click.Choice) and t.case_sensitive and all(isinstance(c, str) for c in t.choices):
        out.update(kind="choice", choices=list(t.choices))
    elif isinstance(t, click.Path) and t.type in (None, str, Path) and not t.resolve_path and not t.allow_dash:
        out.update(kind="path", exists=t.exists, file_okay=t.file_okay, dir_okay=t.dir_okay,
                   readable=t.readable, writable=t.writable, executable=t.executable,
                   as_path=t.type is Path)
    else:
        out["kind"] = "other"
    return out


def _defaults(cmd: click.Command, args: list[str]) -> dict[str, Any]:
    envvars = [p.envvar for p in cmd.params if isinstance(p.envvar, str)]
    saved = {v: os.environ.pop(v) for v in envvars if v in os.environ}
    try:
        ctx = cmd.make_context(cmd.name, list(args), resilient_parsing=False)
        return dict(ctx.params)
    finally:
        os.environ.update(saved)


def derive() -> dict[str, Any]:
    """The spec of the group's options and of ``run``'s, from their click declarations."""
    from spyglass.cli.cmd_run import run_cmd
    from spyglass.cli.main import cli

    run_params = [p for p in run_cmd.params if isinstance(p, click.Option)]
    arguments = [p for p in run_cmd.params if isinstance(p, click.Argument)]
    direct = (all(p.callback is None for p in run_cmd.params) and len(arguments) == 1
              and arguments[0].nargs == -1 and arguments[0].type is click.UNPROCESSED and arguments[0].required
              and run_params == run_cmd.params[:-1] and run_cmd.allow_interspersed_args
              and not run_cmd.ignore_unknown_options and not cli.context_settings.get("auto_envvar_prefix")
              and not run_cmd.context_settings)
    run_defaults = _defaults(run_cmd, ["--", "true"])
    run_defaults.pop(arguments[0].name or "")
    return {
        "direct": direct,
        "argument": arguments[0].name,
        "group": {"params": [param_spec(p) for p in cli.params if isinstance(p, click.Option)],
                  "defaults": _defaults(cli, ["run"])},
        "run": {"params": [param_spec(p) for p in run_params], "defaults": run_defaults},
        "complete_var": "_SPYGLASS_COMPLETE",
    }


def render() -> str:
    return HEADER + pprint.pformat(derive(), width=110, sort_dicts=True) + "\n"


def main() -> int:
    out = Path(__file__).with_name("runspec.py")
    out.write_text(render())
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
