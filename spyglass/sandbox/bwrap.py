"""The bubblewrap command line, built from a mount plan.

The plan (a list of :class:`Mount`) is the single description of the
sandbox's file system: :func:`build_argv` turns it into bwrap arguments, and
:class:`~spyglass.sandbox.pathmap.PathMap` reads it to map the paths in
events back to the host.  Later mounts cover earlier ones, as in the kernel.

The layout (:func:`plan_mounts`):

1. the host's root, read-only; a minimal ``/dev`` and a fresh ``/proc``;
2. ``/run``, ``/home`` and ``/root`` hidden (empty and read-only: sockets of
   other services such as ``docker.sock`` or an ssh-agent live there);
3. a private ``/tmp`` and ``/var/tmp`` (directories of the run on the host);
4. the decoy home mounted at the real ``$HOME`` path, the ``pass_home``
   entries bound read-only into it from the real home;
5. the relay script and the proxy socket under ``/run/spyglass``;
6. the workspace roots and ``sandbox.writable`` read-write,
   ``sandbox.readonly`` read-only, ``sandbox.hidden`` hidden (directories
   become empty, files unreadable), the run store hidden;
7. the hidden directories made read-only last, so that writes there fail
   (``EROFS``) instead of vanishing into a tmpfs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import msgspec

#: kinds of mount: how bwrap spells them and what they mean for path mapping
BIND = "bind"  # read-write bind of src at dest
RO_BIND = "ro-bind"  # read-only bind
DEV = "dev"  # minimal /dev
PROC = "proc"  # fresh /proc of the sandbox's pid namespace
HIDE_DIR = "hide-dir"  # an empty tmpfs, made read-only at the end
MASK_FILE = "mask-file"  # /dev/null bound over a file (opening it gives EACCES)

RELAY_DIR = "/run/spyglass"
RELAY_PATH = RELAY_DIR + "/relay.py"
SOCKET_PATH = RELAY_DIR + "/proxy.sock"


class Mount(msgspec.Struct, frozen=True):
    kind: str
    dest: str
    src: str | None = None
    optional: bool = False  # skip silently when src does not exist (bwrap's *-try)
    role: str = ""  # what it is for: "root", "home", "pass-home", "tmp", "workspace", "hidden" ...

    def argv(self) -> list[str]:
        try_ = "-try" if self.optional else ""
        if self.kind == BIND:
            return [f"--bind{try_}", self.src or self.dest, self.dest]
        if self.kind == RO_BIND:
            return [f"--ro-bind{try_}", self.src or self.dest, self.dest]
        if self.kind == DEV:
            return ["--dev", self.dest]
        if self.kind == PROC:
            return ["--proc", self.dest]
        if self.kind == HIDE_DIR:
            return ["--tmpfs", self.dest]
        if self.kind == MASK_FILE:
            return ["--ro-bind", "/dev/null", self.dest]
        raise ValueError(f"unknown mount kind {self.kind}")


class SandboxOptions(msgspec.Struct):
    """Everything :func:`build_argv` needs besides the mount plan."""

    cwd: str
    new_session: bool = True
    seccomp_fd: int | None = None
    info_fd: int | None = None
    unshare_user: bool = True
    share_net: bool = False  # tests of the sandbox itself only; never for agents
    #: the command is the PID namespace's init (no bwrap reaper): the kernel then drops every
    #: SIGKILL and SIGSTOP sent to it from inside, and ``kill(-1)`` inside never reaches it
    as_pid_1: bool = False
    extra_args: list[str] = msgspec.field(default_factory=list)


def _real(p: str) -> str:
    return os.path.realpath(os.path.expanduser(p))


def is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


_under = is_under


def expand_home(entry: str, home: str) -> str:
    """``~/x`` and ``x`` are relative to the real home; absolute paths stay."""
    if entry.startswith("~/"):
        return os.path.normpath(os.path.join(home, entry[2:]))
    if entry == "~":
        return home
    if not entry.startswith("/"):
        return os.path.normpath(os.path.join(home, entry))
    return os.path.normpath(entry)


def plan_mounts(
    *,
    workspace: Sequence[str],
    real_home: str,
    decoy_home: str,
    private_tmp: str,
    private_var_tmp: str | None = None,
    writable: Iterable[str] = (),
    readonly: Iterable[str] = (),
    hidden: Iterable[str] = (),
    pass_home: Iterable[str] = (),
    relay_script: str | None = None,
    proxy_socket: str | None = None,
    visible: Iterable[str] = (),
    hide_sockets: Iterable[str] = (),
    base: str | None = None,
    protected: Iterable[str] = (),
    pinned: Iterable[str] = (),
) -> list[Mount]:
    """The sandbox's mount plan.  ``visible`` lists host directories that must stay
    readable even under a hidden tree (the Python that runs the relay); relative
    paths in ``writable``/``readonly``/``hidden`` are relative to ``base``
    (default: the first workspace root), ``~/`` to the real home.  ``protected`` paths
    inside the workspace stay read-only (``.git/config``, ``.git/hooks`` ...); ``pinned``
    directories that are writable there are bound onto themselves, read-write, so that they are
    mount points (``mv .git .gitx`` fails with ``EBUSY`` and cannot carry the read-only binds away)."""
    home = os.path.normpath(real_home)
    root_dir = base or (workspace[0] if workspace else os.getcwd())

    def resolve(p: str) -> str:
        if p.startswith("~"):
            return _real(expand_home(p, home))
        return _real(p if os.path.isabs(p) else os.path.join(root_dir, p))

    m: list[Mount] = [
        Mount(RO_BIND, "/", "/", role="root"),
        Mount(DEV, "/dev", role="dev"),
        Mount(PROC, "/proc", role="proc"),
    ]
    hidden_dirs: list[str] = []
    for d in ("/run", "/home", "/root"):
        if os.path.isdir(d) and not os.path.islink(d) and d != home:
            m.append(Mount(HIDE_DIR, d, role="hidden-system"))
            hidden_dirs.append(d)
    m.append(Mount(BIND, "/tmp", private_tmp, role="tmp"))
    if private_var_tmp is not None and os.path.isdir("/var/tmp"):
        m.append(Mount(BIND, "/var/tmp", private_var_tmp, role="tmp"))
    m.append(Mount(BIND, home, decoy_home, role="home"))
    for entry in pass_home:
        p = expand_home(entry, home)
        if not _under(p, home) or p == home or not os.path.exists(p):
            continue  # pass_home is about entries of the home directory that exist
        m.append(Mount(RO_BIND, p, _real(p), optional=True, role="pass-home"))
    for v in visible:
        rv = _real(v)
        if any(_under(rv, h) for h in (home, *hidden_dirs, "/tmp", "/var/tmp")):
            m.append(Mount(RO_BIND, rv, rv, optional=True, role="runtime"))
    if relay_script is not None:
        m.append(Mount(RO_BIND, RELAY_PATH, relay_script, role="relay"))
    if proxy_socket is not None:
        m.append(Mount(RO_BIND, SOCKET_PATH, proxy_socket, role="relay"))
    for w in workspace:
        m.append(Mount(BIND, _real(w), _real(w), role="workspace"))
    for w in writable:
        p = resolve(w)
        m.append(Mount(BIND, p, p, optional=True, role="writable"))
    for d in pinned:
        p = _real(d)
        cover = next((x for x in reversed(m) if _under(p, x.dest)), None)
        if cover is not None and cover.kind == BIND and visible_in(m, p):
            m.append(Mount(BIND, p, p, optional=True, role="pinned"))
    for r in readonly:
        p = resolve(r)
        m.append(Mount(RO_BIND, p, p, optional=True, role="readonly"))
    for r in protected:
        p = _real(r)
        if visible_in(m, p):
            m.append(Mount(RO_BIND, p, p, optional=True, role="protected"))
    # parents first: a hidden tree inside another (the run's work dir inside a store kept in the
    # workspace) is then already out of sight, and no mount lands on a path a tmpfs just covered
    for p in sorted({resolve(h) for h in hidden}, key=lambda x: (x.count("/"), x)):
        if not visible_in(m, p):
            continue  # already out of sight (under a private /tmp or a hidden tree)
        if os.path.isdir(p):
            m.append(Mount(HIDE_DIR, p, role="hidden"))
        elif os.path.lexists(p):
            m.append(Mount(MASK_FILE, p, role="hidden"))
    for s in hide_sockets:
        covering = next((x for x in reversed(m) if _under(s, x.dest)), None)
        if covering is not None and covering.role == "root" and os.path.lexists(s):
            m.append(Mount(MASK_FILE, s, role="hidden-socket"))
    return m


def visible_in(mounts: Sequence[Mount], path: str) -> bool:
    """Whether the host's ``path`` shows through at the same place under ``mounts``."""
    for m in reversed(mounts):
        if _under(path, m.dest):
            return m.kind in (BIND, RO_BIND) and (m.src is None or m.src == m.dest)
    return False


def build_argv(mounts: Sequence[Mount], opts: SandboxOptions, bwrap: str = "bwrap") -> list[str]:
    """``bwrap ... --`` (the command to run follows)."""
    argv = [bwrap]
    if opts.unshare_user:
        argv += ["--unshare-user", "--disable-userns"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if opts.as_pid_1:
        argv.append("--as-pid-1")
    if not opts.share_net:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--cap-drop", "ALL"]
    if opts.new_session:
        argv.append("--new-session")
    for mount in mounts:
        argv += mount.argv()
    for mount in mounts:  # hidden trees last: read-only, after everything mounted inside them
        if mount.kind == HIDE_DIR:
            argv += ["--remount-ro", mount.dest]
    if opts.seccomp_fd is not None:
        argv += ["--seccomp", str(opts.seccomp_fd)]
    if opts.info_fd is not None:
        argv += ["--info-fd", str(opts.info_fd)]
    argv += ["--chdir", opts.cwd, *opts.extra_args, "--"]
    return argv


def host_unix_sockets(proc_net_unix: str = "/proc/net/unix") -> list[str]:
    """Paths of unix sockets bound on this host (a read-only bind does not stop
    connect() to them, so the sandbox hides the ones it can see)."""
    out: list[str] = []
    try:
        with open(proc_net_unix) as f:
            next(f, None)
            for line in f:
                parts = line.split()
                if len(parts) >= 8 and parts[7].startswith("/") and parts[7] not in out:
                    out.append(parts[7])
    except OSError:
        pass
    return out


def fd_wrapper(argv: Sequence[str], files: Sequence[tuple[int, str, str]]) -> list[str]:
    """Prefix ``argv`` with a tiny shell that opens ``files`` as (fd, mode "<" or ">", path)
    and execs it: bwrap reads its seccomp program and writes its info from
    inherited descriptors, and a capture backend need not know how to pass them."""
    opens = " ".join(f'{fd}{mode}"${i + 1}"' for i, (fd, mode, _p) in enumerate(files))
    script = f'exec {opens}; shift {len(files)}; exec "$@"'
    return ["/bin/sh", "-c", script, "spyglass-sandbox", *[p for _fd, _m, p in files], *argv]
