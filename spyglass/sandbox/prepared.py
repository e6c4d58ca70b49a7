"""Preparing a sandboxed run: decoy home, mount plan, proxy, wrapper, environment.

:func:`spyglass.sandbox.build.prepare` does everything that must exist before
the agent starts and returns a :class:`PreparedSandbox`; the caller wraps its capture backend with
``prepared.backend(backend)``, records the run, and calls ``close()``.
See docs/sandbox.md for the wiring in ``spyglass run``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spyglass.capture.base import CaptureBackend
from spyglass.pipeline import SandboxView
from spyglass.sandbox import bwrap as bw
from spyglass.sandbox import layout
from spyglass.sandbox.decoy import DecoyHome
from spyglass.sandbox.denials import DenialDeriver
from spyglass.sandbox.pathmap import PathMap
from spyglass.sandbox.proxy import EgressProxy
from spyglass.sandbox.session import EventBus, MachineryFilter, SandboxedBackend

DEFAULT_RELAY_PORT = 3128
#: pass_home entries up to this size are copied into the decoy home (writable, the
#: original untouched); larger ones are bind-mounted read-only
COPY_MAX_BYTES = 64 * 1024 * 1024
COPY_MAX_FILES = 5000
_DROP_ENV = (
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
)
_NO_PROXY = "localhost,127.0.0.1,::1"


SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BROKER_CA = "/run/spyglass/ca.pem"
#: with brokered secrets, common clients trust the system bundle plus the run's CA (inside the sandbox only)
BROKER_CA_ENV = {
    "SSL_CERT_FILE": SYSTEM_CA_BUNDLE,
    "REQUESTS_CA_BUNDLE": SYSTEM_CA_BUNDLE,
    "CURL_CA_BUNDLE": SYSTEM_CA_BUNDLE,
    "GIT_SSL_CAINFO": SYSTEM_CA_BUNDLE,
    "NODE_EXTRA_CA_CERTS": BROKER_CA,
}


def broker_mounts(bundle: Path, ca: Path) -> list[bw.Mount]:
    """The system bundle with the run's CA added, over the system bundle's path; the CA alone beside the relay."""
    return [
        bw.Mount(bw.RO_BIND, SYSTEM_CA_BUNDLE, str(bundle), role="ca"),
        bw.Mount(bw.RO_BIND, BROKER_CA, str(ca), role="ca"),
    ]


def proxy_env(url: str) -> dict[str, str]:
    """The variables that point common clients at the relay."""
    env: dict[str, str] = {}
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        env[name] = env[name.upper()] = url
    env["no_proxy"] = env["NO_PROXY"] = _NO_PROXY
    env.update(
        {
            "npm_config_proxy": url,
            "npm_config_https_proxy": url,
            "npm_config_noproxy": _NO_PROXY,
            "YARN_HTTP_PROXY": url,
            "YARN_HTTPS_PROXY": url,
            "PIP_PROXY": url,
            "CARGO_HTTP_PROXY": url,
            "GLOBAL_AGENT_HTTP_PROXY": url,
            "GLOBAL_AGENT_NO_PROXY": _NO_PROXY,
            "NODE_USE_ENV_PROXY": "1",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.proxy",
            "GIT_CONFIG_VALUE_0": url,
        }
    )
    return env


def _small_enough(path: str) -> bool:
    if not os.path.isdir(path) or os.path.islink(path):
        return True
    total = files = 0
    for root, dirs, names in os.walk(path):
        files += len(names) + len(dirs)
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
        if files > COPY_MAX_FILES or total > COPY_MAX_BYTES:
            return False
    return True


def copy_pass_home(entries: Sequence[str], real_home: str, decoy_home: Path) -> tuple[list[str], list[str]]:
    """Copy the small ``pass_home`` entries into the decoy home: (copied rel paths, entries left to bind)."""
    copied: list[str] = []
    bind: list[str] = []
    for entry in entries:
        p = bw.expand_home(entry, real_home)
        if not bw.is_under(p, real_home) or p == real_home or not os.path.lexists(p):
            continue
        rel = os.path.relpath(p, real_home)
        if not _small_enough(p):
            bind.append(entry)
            continue
        dest = decoy_home / rel
        try:
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            dest.parent.mkdir(parents=True, exist_ok=True)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.copytree(p, dest, symlinks=True)
            else:
                shutil.copy2(p, dest, follow_symlinks=False)
            copied.append(rel)
        except OSError:
            bind.append(entry)
    return copied, bind


def _legacy_tiocsti() -> bool:
    try:
        with open("/proc/sys/dev/tty/legacy_tiocsti") as f:
            return f.read().strip() != "0"
    except OSError:
        return True  # older kernels: TIOCSTI always works


class PreparedSandbox:
    """A sandbox ready to launch; see :func:`prepare`."""

    def __init__(
        self,
        *,
        work_dir: Path,
        bwrap_path: str,
        mounts: list[bw.Mount],
        decoy: DecoyHome,
        real_home: str,
        relay_port: int,
        relay_python: str,
        seccomp_path: str,
        info_path: str,
        socket_dir: str,
        proxy: EgressProxy | None,
        bus: EventBus,
        cwd: str,
        sinks: list[object],
        settings: dict[str, Any],
    ) -> None:
        self.work_dir = work_dir
        self.bwrap_path = bwrap_path
        self.mounts = mounts
        self.decoy = decoy
        self.real_home = real_home
        self.relay_port = relay_port
        self.relay_python = relay_python
        self.seccomp_path = seccomp_path
        self.info_path = info_path
        self.socket_dir = socket_dir
        self.proxy = proxy
        self.bus = bus
        self.cwd = cwd
        self.sinks = sinks
        self.settings = settings
        self.pathmap = PathMap(mounts)
        self.denials = DenialDeriver(self.pathmap)
        self.machinery = MachineryFilter(bwrap_path, relay_python, bw.RELAY_PATH)
        self.killed_at: int | None = None
        #: pids of spyglass's helpers a signal from the run may name (see describe())
        self.helper_pids: list[int] = [1]
        self.env_pass: tuple[str, ...] = tuple(settings.get("env_pass") or ())
        self.env_held_back: list[str] = []
        self._closed = False
        #: install trees of the launched program bound read-only at launch (the same list object is
        #: in describe(), so the run's metadata shows them although they are found after it is made)
        self.program_tree: list[str] = []
        self.broker: Any = None  # spyglass.sandbox.broker.Broker, with secrets.broker
        self.interceptor: Any = None

    # ------------------------------------------------------------ launch
    @property
    def canary(self) -> str:
        return self.decoy.canary

    @property
    def wrapper(self) -> list[str]:
        """The argv prefix that goes between the tracer and the agent's command."""
        return self.wrapper_for(self.cwd)

    def wrapper_for(self, cwd: str) -> list[str]:
        opts = bw.SandboxOptions(
            cwd=os.path.realpath(cwd),
            new_session=_legacy_tiocsti(),
            seccomp_fd=3,
            info_fd=4,
            unshare_user=True,
            as_pid_1=True,  # the relay is pid 1: out of reach of `kill -9 -1` and `kill -STOP 1` inside
        )
        argv = bw.build_argv(self.mounts, opts, self.bwrap_path)
        argv += [self.relay_python, "-I", "-S", bw.RELAY_PATH, bw.SOCKET_PATH, str(self.relay_port), "--"]
        return bw.fd_wrapper(argv, [(3, "<", self.seccomp_path), (4, ">", self.info_path)])

    @property
    def env(self) -> dict[str, str]:
        return self.env_for(None)

    def env_for(self, base: Mapping[str, str] | None) -> dict[str, str]:
        """The agent's environment: ``base`` (default: ours) filtered to the allowlist and
        ``sandbox.env.pass`` (:mod:`.layout`), HOME, TMPDIR, PATH fixed for the sandbox, agent
        sockets dropped and the proxy variables set."""
        env, self.env_held_back = layout.filter_env(os.environ if base is None else base, self.env_pass)
        for name in _DROP_ENV:
            env.pop(name, None)
        env["HOME"] = self.real_home
        env["TMPDIR"] = "/tmp"
        if "PATH" in env:
            env["PATH"] = (
                ":".join(p for p in env["PATH"].split(":") if p and self._visible(p)) or "/usr/bin:/bin"
            )
        env.update(proxy_env(f"http://127.0.0.1:{self.relay_port}"))
        if self.broker:
            env.update(self.broker.agent_env())
            env.update(BROKER_CA_ENV)
        return env

    def _visible(self, path: str) -> bool:
        m = self.pathmap.covering(path)
        if m is None:
            return False
        if m.kind in (bw.HIDE_DIR, bw.MASK_FILE):
            return False
        return os.path.exists(self.pathmap.to_host(path))

    def backend(self, inner: CaptureBackend) -> SandboxedBackend:
        """``inner`` launching through this sandbox (hand it to ``session.record``)."""
        return SandboxedBackend(inner, self)

    # ------------------------------------------------------------ control
    def ns_init_pid(self) -> int | None:
        """Host pid of the sandbox's PID-namespace init (bwrap writes it once started)."""
        try:
            with open(self.info_path) as f:
                info = json.loads(f.read() or "{}")
        except (OSError, ValueError):
            return None
        pid = info.get("child-pid")
        return pid if isinstance(pid, int) and pid > 1 else None

    def resume(self) -> bool:
        """SIGCONT to the namespace's init (the relay): a SIGSTOP from inside is dropped by the
        kernel, except while the relay is traced (strace), where it stops it until resumed."""
        pid = self.ns_init_pid()
        if pid is None:
            return False
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid"):
                return False
            os.kill(pid, signal.SIGCONT)
        except OSError:
            return False
        return True

    def kill(self) -> bool:
        """SIGKILL the namespace's init: the kernel kills every process inside at once.
        False if the sandbox has not started (or is already gone)."""
        pid = self.ns_init_pid()
        if pid is None:
            return False
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid"):
                return False  # not a namespace init (pid reused): do not shoot
        except OSError:
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        if self.killed_at is None:
            self.killed_at = time.time_ns()
        return True

    def describe(self) -> dict[str, Any]:
        """What goes into ``RunMeta.extra["sandbox"]`` (rules read honeytokens and canary here)."""
        home_view = self.real_home
        return {
            "honeytokens": self.decoy.honeytoken_paths(),
            "honeytokens_view": self.decoy.honeytoken_paths(home_view),
            "honeytoken_kinds": {
                str(self.decoy.path / h.rel): {"kind": h.kind, "read_by": list(h.read_by)}
                for h in self.decoy.honeytokens
            },
            "canary": self.decoy.canary,
            "program_tree": self.program_tree,
            "home": {"view": home_view, "host": str(self.decoy.path)},
            "tmp": {m.dest: m.src for m in self.mounts if m.role == "tmp"},
            "scratch": [str(self.decoy.path), *[m.src for m in self.mounts if m.role == "tmp" and m.src]],
            "work_dir": str(self.work_dir),
            "relay": {"exe": self.relay_python, "script": bw.RELAY_PATH, "port": self.relay_port},
            # spyglass's helpers as the run's processes name them: the relay is the PID namespace's
            # init, pid 1 inside (eBPF records pids as the caller wrote them), and its host pid
            # joins once it runs (strace translates pids); the same list object, kept current
            "helper_pids": self.helper_pids,
            "proxy": {
                "allow": self.settings.get("allow", []),
                "deny": self.settings.get("deny", []),
                "block_canary": self.settings.get("block_canary", True),
            },
            "mounts": [
                {
                    "kind": m.kind,
                    "dest": m.dest,
                    **({"src": m.src} if m.src and m.src != m.dest else {}),
                    "role": m.role,
                }
                for m in self.mounts
            ],
            "settings": {k: v for k, v in self.settings.items() if k not in ("allow", "deny")},
        }

    def run_extra(self) -> dict[str, Any]:
        """What the session puts into ``RunRequest.extra``: the sandbox's facts under
        ``"sandbox"``, and the honeytoken paths where the rule engine looks for them."""
        info = self.describe()
        return {"sandbox": info, "honeytokens": [*info["honeytokens"], *info["honeytokens_view"]]}

    def view(self) -> SandboxView:
        """The typed view the run context hands to every sink."""
        info = self.describe()
        return SandboxView(
            home_view=self.real_home,
            home_host=str(self.decoy.path),
            honeytokens=[*info["honeytokens"], *info["honeytokens_view"]],
            canary=self.decoy.canary,
            facts=info,
        )

    def summary(self) -> str:
        parts: list[str] = []
        if self.proxy is not None:
            c = self.proxy.counts
            parts.append(f"proxy {c['allowed'] + c['denied']} requests ({c['denied']} denied)")
        if self.denials.counts:
            parts.append("denials " + ", ".join(f"{k} {v}" for k, v in sorted(self.denials.counts.items())))
        if self.machinery.dropped:
            parts.append(f"{self.machinery.dropped} events of the sandbox's own setup omitted")
        if self.bus.late:
            parts.append(f"{len(self.bus.late)} proxy events after the end of capture")
        return "sandbox: " + "; ".join(parts) if parts else ""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.proxy is not None:
            self.proxy.close()
        if self.interceptor is not None:
            self.interceptor.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        # copies of the user's own entries (agent auth, config) do not outlive the run
        for rel in self.settings.get("pass_home_copied", []):
            p = self.decoy.path / rel
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()

    def __enter__(self) -> PreparedSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
