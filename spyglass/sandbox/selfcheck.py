"""``sandbox check``'s end-to-end test of the default layout.

A program installed under ``$HOME`` (a ``#!`` script in its own ``bin``
directory) is run in a sandbox laid out exactly as ``spyglass run --sandbox``
lays it out, with a run store inside the workspace (which must be hidden, not
remounted).  It must start, run, and not see the store.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from spyglass.errors import SandboxError
from spyglass.sandbox import launch
from spyglass.sandbox.build import prepare
from spyglass.sandbox.doctor import Check

_OK = "spyglass-layout-ok"
_SCRIPT = f'#!/bin/sh\nif [ -e .spyglass/index.sqlite ]; then echo store-visible; exit 3; fi\necho {_OK}\n'


def layout_check(bwrap: str | None = None) -> Check:
    name = "default layout"
    home = os.path.expanduser("~")
    tool = ws = None
    try:
        tool = Path(tempfile.mkdtemp(prefix=".spyglass-check-", dir=home if os.path.isdir(home) else None))
        prog = tool / "bin" / "agent"
        prog.parent.mkdir()
        prog.write_text(_SCRIPT)
        prog.chmod(0o755)
        ws = Path(tempfile.mkdtemp(prefix="spyglass-check-ws-"))
        store = ws / ".spyglass"
        (store / "sandbox").mkdir(parents=True)
        (store / "index.sqlite").write_text("")
        work = store / "sandbox" / "run-check"
        with prepare(work, [str(ws)], cwd=str(ws), store_root=str(store), real_home=home, bwrap=bwrap) as sb:
            argv = [str(prog)]
            launch.expose_program(sb, argv, os.environ, str(ws))
            env = sb.env_for(None)
            launch.check_start(sb, argv, env, str(ws))
            proc = subprocess.run(
                [*sb.wrapper_for(str(ws)), *argv],
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                check=False,
            )
    except SandboxError as exc:
        return Check(name, False, problem=exc.message, fix=exc.hint or "")
    except (OSError, subprocess.SubprocessError) as exc:
        return Check(name, False, problem=f"could not run the layout check: {exc}")
    finally:
        for d in (tool, ws):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
    if proc.returncode == 0 and _OK in proc.stdout:
        return Check(name, True, detail="a program under $HOME ran; a store inside the workspace was hidden")
    why = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}").splitlines()[-1]
    return Check(
        name,
        False,
        problem=f"a program under $HOME could not run in the default layout: {why}",
        fix=launch.explain(why)[1],
    )
