"""What the rules' run state remembers of each event, after the rules saw it.

The engine calls :func:`track` on the pipeline's thread with its own state; the
fast lane (:mod:`spyglass.rules.fastlane`) calls it on the capture's reader
thread with a state of its own, fed the same events in the same order.
"""

from __future__ import annotations

from spyglass.events import Event
from spyglass.rules.context import FieldContext, RunState

_STATE_TYPES = frozenset(
    {"file.create", "file.write", "file.mkdir", "file.link", "file.symlink", "file.truncate", "file.rename",
     "file.delete", "net.dns", "net.connect"}
)
_HISTORIES = frozenset({".bash_history", ".zsh_history", ".zhistory", ".histfile", "fish_history", ".python_history",
                        ".node_repl_history", ".psql_history", ".mysql_history", ".sqlite_history", ".lesshst"})
#: programs whose reads of their own credentials do not taint what they write (ssh writes known_hosts)
_OWNERS = frozenset({"ssh", "scp", "sftp", "ssh-add", "ssh-agent", "ssh-keygen", "gpg", "gpg2", "gpg-agent",
                     "git", "git-remote-http", "git-remote-https", "kubectl", "aws", "gcloud", "gh", "docker"})


def track(ev: Event, fx: FieldContext, state: RunState) -> None:
    """Update ``state`` with ``ev`` (``fx``: the same thread's field context)."""
    t = ev.type
    if t in _STATE_TYPES:
        state.update(ev)
    elif t == "process.exec" and ev.ok:
        state.note_exec(ev.pid)
    elif t == "process.exit":
        state.note_exit(ev.pid)
    elif t == "process.start":
        state.note_fork(ev.pid, ev.ppid)
    elif t == "file.read" and ev.ok:
        p = ev.path
        state.note_read(ev, bool(p) and taints(ev, p or "", fx))


def taints(ev: Event, path: str, fx: FieldContext) -> bool:
    """A read that makes what the reader writes next a secret: a secret as cred-secret-read
    sees one (not the workspace's .env, not a shell history), by neither the agent itself
    nor a program that owns the credential."""
    if not fx.is_secret(path):
        return False
    name = path.rsplit("/", 1)[-1]
    if name in _HISTORIES or (name.startswith(".env") and fx.in_ws(path)):
        return False
    fx.ev = ev
    return not (fx.launched_exe() or (fx.identity() or "") in _OWNERS)
