"""Making the launched program runnable inside, and proving the sandbox starts before the agent does.

:func:`expose_program` binds the program's install tree read-only where the
sandbox would hide it (``$HOME`` is a decoy, ``/tmp`` is private);
:func:`check_start` starts the very sandbox the agent will get, with a shell
that only looks the program up, and turns bwrap's failure into a
:class:`~spyglass.errors.SandboxError` (exit 5) that says what went wrong and
what to do, before anything is recorded as the agent's run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from spyglass.errors import SandboxError
from spyglass.sandbox import bwrap as bw
from spyglass.sandbox import doctor, layout
from spyglass.sandbox.denials import DenialDeriver
from spyglass.sandbox.pathmap import PathMap

if TYPE_CHECKING:
    from spyglass.sandbox.prepared import PreparedSandbox

_LAYOUT_FIX = (
    "a path of the sandbox's layout is missing or overlaps another: check sandbox.writable, "
    "sandbox.readonly and sandbox.hidden in the policy, and run `spyglass sandbox check`"
)
_NOT_FOUND = 127


def expose_program(sb: PreparedSandbox, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> list[str]:
    """Bind the program's install tree read-only where the sandbox hides it, and at the name it was
    reached by when that goes through a symlinked directory; the paths bound (inside)."""
    added: list[str] = []
    at = next((i for i, m in enumerate(sb.mounts) if m.role in ("relay", "workspace")), len(sb.mounts))
    for path in layout.program_roots(list(argv), env, cwd, sb.real_home):
        if not os.path.exists(path) or bw.visible_in(sb.mounts, path):
            continue
        sb.mounts.insert(at, bw.Mount(bw.RO_BIND, path, path, optional=True, role="program"))
        at += 1
        added.append(path)
    for src, dest in layout.program_aliases(list(argv), env, cwd, sb.real_home):
        if bw.visible_in(sb.mounts, dest):
            continue  # the host's link shows through (and what it names, or the tree bound above)
        sb.mounts.insert(at, bw.Mount(bw.RO_BIND, dest, src, optional=True, role="program"))
        at += 1
        added.append(dest)
    if added:
        sb.program_tree.extend(added)
        sb.pathmap = PathMap(sb.mounts)
        sb.denials = DenialDeriver(sb.pathmap)
        sb.settings["program_tree"] = added
    return added


def check_start(sb: PreparedSandbox, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
    """Start the sandbox as the agent will get it and look the program up inside; raise
    SandboxError with bwrap's message explained and the remedy when that fails."""
    if not argv or layout.which(argv[0], env, cwd) is None:
        return  # not on the host either: the run itself reports "command not found"
    opts = bw.SandboxOptions(cwd=os.path.realpath(cwd), new_session=True, unshare_user=True)
    cmd = [
        *bw.build_argv(sb.mounts, opts, sb.bwrap_path),
        "/bin/sh",
        "-c",
        'command -v -- "$1" >/dev/null 2>&1 || exit 127',
        "spyglass-check",
        argv[0],
    ]
    try:
        proc = subprocess.run(
            cmd, env=dict(env), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"the sandbox could not be started: {exc}") from None
    if proc.returncode == 0:
        return
    message = proc.stderr.strip()
    if proc.returncode == _NOT_FOUND and not message:
        tree = sb.settings.get("program_tree") or []
        where = f" (bound read-only: {', '.join(tree)})" if tree else ""
        raise SandboxError(
            f"the agent's program {argv[0]!r} cannot be found inside the sandbox{where}",
            hint="give its full path, or add the directory it is installed in to sandbox.readonly in the policy",
        )
    raise SandboxError(f"the sandbox cannot start the agent: {explain(message)[0]}", hint=explain(message)[1])


def explain(message: str) -> tuple[str, str]:
    """(problem, fix) for a bwrap message from a real layout (mount errors first)."""
    low = message.lower()
    if "mount" in low or "realpath" in low or "can't create" in low or "can't find" in low:
        return (f"bwrap could not lay out the sandbox's file system ({message})", _LAYOUT_FIX)
    return doctor.explain_failure(message)
