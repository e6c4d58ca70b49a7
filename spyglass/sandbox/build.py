"""Building a sandbox: ``prepare()`` lays out everything that must exist before the
agent starts (decoy home, mount plan, proxy, relay) and returns the
:class:`~spyglass.sandbox.prepared.PreparedSandbox`; ``from_policy()`` takes the
values of a policy.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spyglass.errors import SandboxError
from spyglass.pipeline import default_home
from spyglass.sandbox import bwrap as bw
from spyglass.sandbox import doctor, layout, seccomp
from spyglass.sandbox.decoy import build_decoy_home, canary_patterns
from spyglass.sandbox.egress import EgressPolicy
from spyglass.sandbox.guards import ContainmentGuard
from spyglass.sandbox.prepared import (
    DEFAULT_RELAY_PORT,
    PreparedSandbox,
    broker_mounts,
    copy_pass_home,
)
from spyglass.sandbox.proxy import EgressProxy, Resolver, Veto
from spyglass.sandbox.session import EventBus


def prepare(
    work_dir: str | Path,
    workspace: Sequence[str],
    *,
    cwd: str | None = None,
    writable: Sequence[str] = (),
    readonly: Sequence[str] = (),
    hidden: Sequence[str] = (),
    pass_home: Sequence[str] = (),
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    real_home: str | None = None,
    store_root: str | None = None,
    mode: str = "contain",
    resolver: Resolver | None = None,
    relay_port: int = DEFAULT_RELAY_PORT,
    block_canary: bool = True,
    allow_host_loopback: bool = False,
    own_services: Sequence[str] = (),
    guards: bool = True,
    veto: Veto | None = None,
    bwrap: str | None = None,
    check: bool = True,
    broker: Any = None,
    upstream_ca: str | None = None,
    env_pass: Sequence[str] = (),
    ask_timeout: float | None = None,
) -> PreparedSandbox:
    """Build everything a sandboxed run needs; raise SandboxError (with the remedy)
    when a sandbox cannot be built here.

    ``work_dir``: a directory of the run on the host (decoy home, private /tmp,
    seccomp program); ``workspace``: the writable roots; the policy values
    (``sandbox.*``, ``network.allow``/``deny``) are passed as they are.
    """
    bwrap_path = doctor.preflight(bwrap) if check else (bwrap or shutil.which("bwrap"))
    if bwrap_path is None:
        raise SandboxError(
            "sandbox requested but bubblewrap (bwrap) is not installed", hint=doctor.INSTALL_FIX
        )
    if not workspace:
        raise SandboxError("sandbox requested without a workspace", hint="give at least one writable root")
    for w in workspace:
        if not os.path.isdir(w):
            raise SandboxError(
                f"workspace {w} is not a directory", hint="create it or fix the policy's workspace"
            )
    home = os.path.normpath(real_home or default_home())
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tmp_dir, var_tmp = work / "tmp", work / "var-tmp"
    for d in (tmp_dir, var_tmp):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o1777)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "dev"
    decoy = build_decoy_home(work / "home", user=user, host=socket.gethostname())
    copied, bound = copy_pass_home(pass_home, home, decoy.path)
    relay_src = Path(__file__).with_name("relay.py")
    relay_copy = work / "relay.py"
    shutil.copyfile(relay_src, relay_copy)
    try:
        seccomp_path = seccomp.write_filter(str(work))
    except seccomp.UnsupportedArch as exc:
        raise SandboxError(f"sandbox requested but {exc}", hint="run on x86_64 or aarch64") from None
    info_path = str(work / "bwrap-info.json")
    Path(info_path).write_text("")
    socket_dir = tempfile.mkdtemp(prefix="spyglass-proxy-")
    sock = os.path.join(socket_dir, "proxy.sock")

    hide = [*hidden, str(work), *layout.system_secrets(), *(broker.source_files if broker else [])]
    if store_root:
        hide.append(str(Path(store_root).resolve()))
    mounts = bw.plan_mounts(
        workspace=list(workspace),
        real_home=home,
        decoy_home=str(decoy.path),
        private_tmp=str(tmp_dir),
        private_var_tmp=str(var_tmp),
        writable=writable,
        readonly=readonly,
        hidden=hide,
        pass_home=bound,
        relay_script=str(relay_copy),
        proxy_socket=sock,
        visible=[sys.base_prefix],
        hide_sockets=[s for s in bw.host_unix_sockets() if s != sock],
        base=os.path.realpath(cwd or workspace[0]),
        protected=layout.protected_paths(workspace),
        pinned=layout.pinned_paths(workspace),
    )
    try:
        policy = EgressPolicy(allow, deny, allow_host_loopback=allow_host_loopback, own_services=own_services)
    except Exception:
        shutil.rmtree(socket_dir, ignore_errors=True)
        raise
    bus = EventBus()
    interceptor = None
    if broker:  # brokered secrets: their hosts go through the TLS interceptor, its CA is trusted inside
        from spyglass.sandbox.intercept import Interceptor

        try:
            interceptor = Interceptor(broker, work / "intercept", upstream_ca=upstream_ca).start()
        except Exception:
            shutil.rmtree(socket_dir, ignore_errors=True)
            raise
        mounts += broker_mounts(*interceptor.trust_files(work))
    proxy = EgressProxy(
        sock,
        policy,
        canary_patterns=[*canary_patterns(decoy.canary), *(broker.placeholders if broker else [])],
        sink=bus.put,
        resolver=resolver,
        block_canary=block_canary,
        veto=veto,
        interceptor=interceptor,
        ask=_ask(work, ask_timeout, bus.put),
    )
    try:
        proxy.start()
    except Exception as exc:
        if interceptor is not None:
            interceptor.close()
        shutil.rmtree(socket_dir, ignore_errors=True)
        raise SandboxError(f"the egress proxy could not start: {exc}") from exc
    sinks: list[object] = [ContainmentGuard(enforce=(mode == "enforce"))] if guards else []
    if broker:
        from spyglass.sandbox.broker import BrokerGuard

        sinks.append(BrokerGuard(broker, enforce=(mode == "enforce")))
    settings: dict[str, Any] = {
        "mode": mode,
        "allow": list(allow),
        "deny": list(deny),
        "block_canary": block_canary,
        "allow_host_loopback": allow_host_loopback,
        "writable": list(writable),
        "readonly": list(readonly),
        "hidden": list(hidden),
        "pass_home": list(pass_home),
        "pass_home_copied": copied,
        "broker": [s.name for s in broker.secrets] if broker else [],
        "env_pass": list(env_pass),
    }
    prepared = PreparedSandbox(
        work_dir=work,
        bwrap_path=bwrap_path,
        mounts=mounts,
        decoy=decoy,
        real_home=home,
        relay_port=relay_port,
        relay_python=os.path.realpath(sys.executable),
        seccomp_path=seccomp_path,
        info_path=info_path,
        socket_dir=socket_dir,
        proxy=proxy,
        bus=bus,
        cwd=os.path.realpath(cwd or workspace[0]),
        sinks=sinks,
        settings=settings,
    )
    prepared.broker, prepared.interceptor = broker, interceptor
    with contextlib.suppress(Exception):
        (work / "sandbox.json").write_text(json.dumps(prepared.describe(), indent=2) + "\n")
    return prepared


def _ask(work: Path, timeout: float | None, sink: Any) -> Any:
    """Egress ask mode (spyglass/sandbox/ask.py) when ``run --ask-egress SECONDS`` asks for it."""
    if not timeout:
        return None
    from spyglass.sandbox.ask import EgressAsk

    return EgressAsk(work / "asks", timeout, sink=sink)


def from_policy(
    policy: Any,
    work_dir: str | Path,
    workspace: Sequence[str],
    *,
    cwd: str,
    store_root: str | None = None,
    mode: str | None = None,
    real_home: str | None = None,
    **options: Any,
) -> PreparedSandbox:
    """:func:`prepare` with the values of a :class:`spyglass.policy.Policy`
    (``sandbox.*``, ``network.allow``/``deny`` with the built-in allow list,
    ``mode``); relative policy paths are relative to the policy file's directory."""
    home = real_home or default_home()

    def paths(values: Sequence[str]) -> list[str]:
        return [v if v.startswith("~") else policy.resolve_path(v, home) for v in values]

    sb = policy.sandbox
    return prepare(
        work_dir,
        workspace,
        cwd=cwd,
        writable=paths(sb.writable),
        readonly=paths(sb.readonly),
        hidden=paths(sb.hidden),
        pass_home=list(sb.pass_home),
        env_pass=[*getattr(sb, "env_pass", ()), *options.pop("env_pass", ())],
        allow=list(policy.network.effective_allow),
        deny=list(policy.network.deny),
        real_home=home,
        store_root=store_root,
        mode=mode or policy.mode,
        **options,
    )
