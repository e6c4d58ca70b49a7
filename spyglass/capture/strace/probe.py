"""Whether strace's ``--seccomp-bpf`` works here, probed once and remembered."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def _probe_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "spyglass", "strace-seccomp.json")


def _probe_key(path: str) -> str | None:
    """What the answer depends on: this strace binary, this kernel, this boot."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return f"{real}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{os.uname().release}:{boot}"


def probe_seccomp(path: str) -> bool:
    """Whether ``strace --seccomp-bpf`` works here: probed once (an extra traced ``true``) per
    strace binary, kernel and boot, and remembered in the user's cache directory.  Whatever
    the file says, both answers record everything: with seccomp-bpf strace only stops at the
    traced calls, without it at every call (slower)."""
    key = _probe_key(path)
    cache = _probe_file()
    known: dict[str, object] = {}
    if key is not None:
        try:
            data = json.loads(cache.read_text())
            known = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            pass
        if isinstance(known.get(key), bool):
            return bool(known[key])
    try:
        proc = subprocess.run([path, "-f", "--seccomp-bpf", "-o", os.devnull, "true"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=10, check=False)
        ok = proc.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if key is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
            kept = {k: v for k, v in list(known.items())[-7:] if isinstance(v, bool)}  # a few binaries at most
            tmp.write_text(json.dumps({**kept, key: ok}))
            os.replace(tmp, cache)
        except OSError:
            pass
    return ok
