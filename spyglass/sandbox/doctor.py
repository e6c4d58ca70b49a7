"""Whether sandboxing works on this machine, and what to do when it does not.

``spyglass doctor`` and ``spyglass sandbox check`` print :func:`sandbox_checks`;
:func:`preflight` runs before every sandboxed run and raises
:class:`~spyglass.errors.SandboxError` with the reason and the remedy, so a
run that asked for confinement never goes ahead unconfined.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import msgspec

from spyglass.capture.base import BackendStatus
from spyglass.errors import SandboxError
from spyglass.sandbox import seccomp


class Check(msgspec.Struct):
    name: str
    ok: bool
    detail: str = ""
    problem: str = ""
    fix: str = ""
    required: bool = True  # a failed required check means no sandbox


INSTALL_FIX = "install bubblewrap: sudo apt-get install bubblewrap (Fedora: sudo dnf install bubblewrap)"
USERNS_SYSCTL_FIX = "allow user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1"
MAX_USERNS_FIX = "allow user namespaces: sudo sysctl -w user.max_user_namespaces=15000"
APPARMOR_FIX = (
    "let bwrap create user namespaces under AppArmor (Ubuntu 24.04+): load the profile that ships "
    "with apparmor, sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict, or lift the "
    "restriction: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
)
CONTAINER_FIX = (
    "inside a container, namespaces need the container's permission: run it with "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined (or --privileged), "
    "or run spyglass on the host"
)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def bwrap_version(bwrap: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def explain_failure(stderr: str) -> tuple[str, str]:
    """(problem, fix) for a bwrap error message."""
    s = stderr.strip()
    low = s.lower()
    if "rtm_newaddr" in low or "loopback: failed" in low:
        return (
            f"bwrap cannot set up the sandbox's network namespace ({s})",
            APPARMOR_FIX
            if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1"
            else CONTAINER_FIX,
        )
    if "uid map" in low or "setting up uid" in low or "no permissions to creat" in low:
        if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
            return (f"user namespaces are restricted by AppArmor ({s})", APPARMOR_FIX)
        if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
            return (f"unprivileged user namespaces are disabled ({s})", USERNS_SYSCTL_FIX)
        if _read("/proc/sys/user/max_user_namespaces") == "0":
            return (f"user namespaces are disabled ({s})", MAX_USERNS_FIX)
        return (f"bwrap may not create namespaces here ({s})", CONTAINER_FIX)
    if "operation not permitted" in low or "permission denied" in low:
        return (f"bwrap was refused by the kernel ({s})", CONTAINER_FIX)
    if "unknown option" in low or "unrecognized option" in low:
        return (
            f"this bwrap is too old ({s})",
            "install bubblewrap 0.4 or later (0.8 or later for --disable-userns)",
        )
    return (f"bwrap failed: {s or 'no message'}", CONTAINER_FIX)


def trial_argv(bwrap: str, *, unshare_user: bool, disable_userns: bool, seccomp_fd: int | None) -> list[str]:
    argv = [bwrap]
    if unshare_user:
        argv.append("--unshare-user")
        if disable_userns:
            argv.append("--disable-userns")
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent"]
    argv += [
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/run",
    ]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--", "true"]


def run_trial(bwrap: str, *, disable_userns: bool = True, timeout: float = 20.0) -> tuple[bool, str]:
    """Start a sandbox like a real run's (namespaces, caps, seccomp) running ``true``."""
    try:
        program = seccomp.build_filter()
    except seccomp.UnsupportedArch as exc:
        return False, str(exc)
    with tempfile.TemporaryFile() as f:
        f.write(program)
        f.flush()
        f.seek(0)
        fd = f.fileno()
        argv = trial_argv(bwrap, unshare_user=True, disable_userns=disable_userns, seccomp_fd=fd)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, pass_fds=(fd,))
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, str(exc)
    return proc.returncode == 0, proc.stderr.strip()


def sandbox_checks(bwrap: str | None = None) -> list[Check]:
    checks: list[Check] = []
    path = bwrap or shutil.which("bwrap")
    if path is None or not os.access(path, os.X_OK):
        checks.append(Check("bubblewrap", False, problem="bwrap is not installed", fix=INSTALL_FIX))
        return checks
    version = bwrap_version(path)
    vtext = ".".join(map(str, version)) if version else "unknown version"
    checks.append(Check("bubblewrap", True, detail=f"{path} {vtext}"))
    root = os.geteuid() == 0

    clone = _read("/proc/sys/kernel/unprivileged_userns_clone")
    max_ns = _read("/proc/sys/user/max_user_namespaces")
    if max_ns == "0":
        checks.append(
            Check(
                "user namespaces",
                False,
                detail="user.max_user_namespaces = 0",
                problem="user namespaces are disabled",
                fix=MAX_USERNS_FIX,
            )
        )
    elif clone == "0" and not root:
        checks.append(
            Check(
                "user namespaces",
                False,
                detail="kernel.unprivileged_userns_clone = 0",
                problem="unprivileged user namespaces are disabled",
                fix=USERNS_SYSCTL_FIX,
            )
        )
    else:
        detail = f"max_user_namespaces = {max_ns}" if max_ns is not None else "no limit file"
        if clone is not None:
            detail += f", unprivileged_userns_clone = {clone}"
        checks.append(Check("user namespaces", True, detail=detail))

    aa = _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    if aa == "1" and not root:
        checks.append(
            Check(
                "AppArmor",
                True,
                detail="unprivileged user namespaces restricted "
                "(Ubuntu 24.04 style); bwrap needs its AppArmor profile",
                required=False,
            )
        )
    else:
        checks.append(
            Check(
                "AppArmor",
                True,
                detail="no user-namespace restriction" if aa != "1" else "restricted, but running as root",
                required=False,
            )
        )

    seccomp_ok = _read("/proc/self/status")
    has_seccomp = bool(seccomp_ok and "Seccomp:" in seccomp_ok)
    checks.append(
        Check(
            "seccomp",
            has_seccomp,
            detail="kernel seccomp filters available" if has_seccomp else "",
            problem="" if has_seccomp else "the kernel has no seccomp support (io_uring cannot be blocked)",
            fix="" if has_seccomp else "use a kernel built with CONFIG_SECCOMP_FILTER",
        )
    )

    disable_userns = version is None or version >= (0, 8)
    ok, err = run_trial(path, disable_userns=disable_userns)
    if ok:
        checks.append(
            Check(
                "network namespace",
                True,
                detail="bwrap --unshare-net --unshare-pid --cap-drop ALL --seccomp works",
            )
        )
    else:
        problem, fix = explain_failure(err)
        checks.append(Check("network namespace", False, problem=problem, fix=fix))
    return checks


def preflight(bwrap: str | None = None) -> str:
    """Raise SandboxError unless a sandbox can be built here; return the bwrap path."""
    path = bwrap or shutil.which("bwrap")
    if path is None or not os.access(path, os.X_OK):
        raise SandboxError("sandbox requested but bubblewrap (bwrap) is not installed", hint=INSTALL_FIX)
    version = bwrap_version(path)
    ok, err = run_trial(path, disable_userns=version is None or version >= (0, 8))
    if not ok:
        problem, fix = explain_failure(err)
        raise SandboxError(f"sandbox requested but it cannot be built here: {problem}", hint=fix)
    return path


def checks() -> list[BackendStatus]:
    """The sandbox checks as ``spyglass doctor`` lists them (one status per check)."""
    out: list[BackendStatus] = []
    for c in sandbox_checks():
        out.append(
            BackendStatus(
                name=f"sandbox: {c.name}",
                available=c.ok or not c.required,
                detail=c.detail,
                problem=c.problem,
                fix=c.fix,
            )
        )
    return out
