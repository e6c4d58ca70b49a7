"""``--backend auto``: eBPF where it can run, strace elsewhere, and the reason either way."""

from __future__ import annotations

from spyglass.capture.base import BackendStatus, CaptureBackend, CaptureSession, LaunchSpec
from spyglass.errors import CaptureError


class AutoBackend:
    """Chooses at construction (cheap checks, nothing loaded); falls back to strace if the
    eBPF program is then refused at start.  ``name`` and ``reason`` say what was used and why."""

    def __init__(self, *, preload: bool = True) -> None:
        from spyglass.capture.ebpf import EbpfBackend
        from spyglass.capture.ebpf.probe import static_problem

        self._ebpf = EbpfBackend()
        found = static_problem()
        if found is None:
            self._chosen: CaptureBackend = self._ebpf
            if preload:
                self._ebpf.preload()
            self.reason = "auto: eBPF (privileged, kernel BTF, program built)"
        else:
            self._chosen = self._strace()
            self.reason = f"auto: strace, because eBPF is unavailable: {found[0]}"
        self.name = self._chosen.name

    @staticmethod
    def _strace() -> CaptureBackend:
        """The fallback, imported only when it is used (the strace parser is not small)."""
        from spyglass.capture.strace.backend import StraceBackend

        return StraceBackend()

    def status(self) -> BackendStatus:
        return self._chosen.status()

    def start(self, spec: LaunchSpec) -> CaptureSession:
        if self._chosen is self._ebpf:
            try:
                return self._ebpf.start(spec)
            except CaptureError as exc:
                self._chosen = self._strace()
                self.name = self._chosen.name
                self.reason = f"auto: strace, because the eBPF program was refused: {exc}"
        return self._chosen.start(spec)
