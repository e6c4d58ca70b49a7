"""The strace capture backend: runs a command under strace and streams its events.

The command runs as ``strace -DD -f -q -yy -ttt -s 4096 --decode-pids=pidns
-I2 [--seccomp-bpf] -e trace=<TRACE_SET> -o <fifo> -- *wrapper *argv`` (see :mod:`.command`) with
the spec's cwd and environment; its stdin, stdout and stderr are the
caller's, untouched.  ``-DD`` makes strace the command's grandchild in a
process group of its own: the command stays our direct child (its exit
status is exact even if strace dies), a Ctrl-C at the terminal reaches the
command but not strace, and interrupting strace never kills the command
(strace kills its *own* child when interrupted).  strace writes to a FIFO in
a private temporary directory (removed as soon as strace has opened it); a
reader thread parses lines as they arrive and queues the events (bounded:
:mod:`..handover`), which :meth:`StraceSession.events` yields
(:mod:`.session`: one traced run, its end and what happens to what is left).

``--seccomp-bpf`` (on by default; ``options={"seccomp": False}`` turns it off)
stops only the traced system calls, which makes tracing several times
cheaper, but it has two costs:

* it sets NoNewPrivs, so setuid programs (sudo, su, ping on some systems)
  do not gain privileges inside the traced tree;
* its filter stays in every traced process after strace detaches, and the
  traced calls of a detached process then fail with ENOSYS.  A run that
  leaves daemons behind should turn seccomp off (the result carries a note
  when this happened).
"""

from __future__ import annotations

import os
import subprocess

from spyglass.capture.base import BackendStatus, LaunchSpec
from spyglass.capture.strace.command import strace_command as strace_command
from spyglass.capture.strace.probe import probe_seccomp
from spyglass.capture.strace.session import StraceSession
from spyglass.capture.which import which
from spyglass.errors import MissingToolError

__all__ = ["StraceBackend", "StraceSession", "strace_command"]

_FIX_INSTALL = "sudo apt-get install strace"
_FIX_PTRACE = (
    "allow ptrace: set kernel.yama.ptrace_scope to 1 or lower, or in a container add "
    "--cap-add SYS_PTRACE --security-opt seccomp=unconfined"
)


def _run(cmd: list[str], timeout: float = 10.0) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    text = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()
    return proc.returncode, text


class StraceBackend:
    """Capture with strace (portable; needs ptrace, no root)."""

    name = "strace"

    def __init__(self, strace: str | None = None) -> None:
        self._strace = strace
        self._seccomp_ok: bool | None = None

    def _path(self) -> str | None:
        return self._strace or which("strace")

    def status(self) -> BackendStatus:
        path = self._path()
        if path is None:
            return BackendStatus(self.name, False, problem="strace is not installed", fix=_FIX_INSTALL)
        rc, text = _run([path, "-V"])
        version = text.splitlines()[0] if rc == 0 and text else "strace (version unknown)"
        rc, text = _run([path, "-f", "-o", os.devnull, "true"])
        if rc != 0:
            why = text.splitlines()[-1] if text else f"exit status {rc}"
            return BackendStatus(
                self.name, False, detail=version, problem=f"strace cannot trace: {why}", fix=_FIX_PTRACE
            )
        seccomp = self._probe_seccomp(path)
        mode = "ptrace ok, seccomp-bpf " + ("ok" if seccomp else "unavailable (slower)")
        return BackendStatus(self.name, True, detail=f"{version}; {mode}")

    def _probe_seccomp(self, path: str) -> bool:
        if self._seccomp_ok is None:
            self._seccomp_ok = probe_seccomp(path)
        return self._seccomp_ok

    def start(self, spec: LaunchSpec) -> StraceSession:
        path = self._path()
        if path is None:
            raise MissingToolError("strace", "strace")
        wanted = spec.options.get("seccomp") is not False
        seccomp = wanted and self._probe_seccomp(path)
        session = StraceSession(spec, path, seccomp=seccomp)
        if wanted and not seccomp:
            session.result().notes.append("--seccomp-bpf is unavailable here: traced without it (slower)")
        return session
