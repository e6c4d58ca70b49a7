"""Representative rules fire under the eBPF backend too, on real processes (needs root and BTF).

The whole live pack also passes with ``SPYGLASS_TEST_BACKEND=ebpf``; this file keeps a
few groups in every run so a regression of the eBPF events shows up in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("needs_ebpf")  # root and a loadable program

STRICT = "network:\n  builtin_allow: false\n  allow: ['127.0.0.2']\nhoneytokens: ['~/.config/decoy/token.txt']\n"


def _fired(r: object, *rule_ids: str) -> None:
    ids = r.ids()  # type: ignore[attr-defined]
    missing = [rid for rid in rule_ids if rid not in ids]
    assert not missing, f"did not fire under ebpf: {missing}; fired: {sorted(ids)}"


def test_credentials_and_scope(live: object, fake_home: Path) -> None:
    r = live(  # type: ignore[operator]
        '''
cat "$HOME/.ssh/id_rsa" > /dev/null
mkdir -p "$HOME/.config/decoy" && echo t > "$HOME/.config/decoy/token.txt"
cat "$HOME/.config/decoy/token.txt" > /dev/null
echo hi > "$HOME/notes.txt"
echo x > "$WS/open.txt"; chmod 777 "$WS/open.txt"
''',
        policy_text=STRICT, home=fake_home, backend="ebpf",
    )  # fmt: skip
    _fired(r, "cred-secret-read", "cred-honeytoken-access", "scope-write-outside-workspace",
           "scope-world-writable-chmod")  # fmt: skip
    a = next(x for x in r.fired("cred-secret-read") if x.argv and x.argv[0] == "cat")
    assert a.cwd == str(r.workspace) and a.exe and a.exe.endswith("/cat")


def test_network_and_evasion(live: object) -> None:
    r = live(  # type: ignore[operator]
        '''
$PY - <<'PYEOF'
import ctypes, os, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('169.254.169.254', 80)); s.close()
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)
if fd >= 0:
    os.close(fd)
libc.syscall(321, 0, None, 0)
PYEOF
kill -CONT $MONPID
$PY -c "
import os
fd = os.memfd_create('payload')
os.write(fd, open('/bin/true', 'rb').read())
os.execv('/proc/self/fd/%d' % fd, ['payload'])
"
''',
        policy_text=STRICT, extra_env={"MONPID": str(os.getpid())}, backend="ebpf",
    )  # fmt: skip
    _fired(r, "net-cloud-metadata", "evasion-io-uring", "sys-bpf", "evasion-kill-monitor",
           "evasion-memfd-create", "evasion-memfd-exec")  # fmt: skip
