"""The eBPF capture backend: a CO-RE program follows the process tree from the kernel."""

from spyglass.capture.ebpf.session import EbpfBackend, EbpfSession

__all__ = ["EbpfBackend", "EbpfSession"]
