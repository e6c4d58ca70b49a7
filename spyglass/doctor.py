"""What works on this machine: every backend's and the sandbox's own checks."""

from __future__ import annotations

import importlib

from spyglass.capture.base import BackendStatus

#: modules with a ``status() -> BackendStatus`` or ``checks() -> list[BackendStatus]``
_PROVIDERS = ("spyglass.sandbox.doctor",)


def run_checks() -> list[BackendStatus]:
    from spyglass.capture import all_backends, select_backend

    out: list[BackendStatus] = [b.status() for b in all_backends()]
    _, reason = select_backend("auto", preload=False)
    out.append(BackendStatus("auto", True, detail=f"--backend auto (the default) {reason.removeprefix('auto: ')}"))
    for name in _PROVIDERS:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, "checks", None)
        if fn is not None:
            out.extend(fn())
    return out
