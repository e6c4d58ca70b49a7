"""A burst agent and an announcement witness, shared by the fast-lane tests of eBPF runs
(tests/capture/ebpf/test_ebpf_lookout.py) and sandboxed runs (tests/sandbox/test_sandbox_lane.py)."""

from __future__ import annotations

from typing import Any

#: argv: N OUT KEY AT; one child creates N files in OUT without pause; another reads KEY
#: (``~`` expanded) once file number AT exists
AGENT = r"""
import os, sys
n, out, key, at = int(sys.argv[1]), sys.argv[2], os.path.expanduser(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
burster = os.fork()
if burster == 0:
    for i in range(n):
        open(os.path.join(out, f"f{i}"), "w").close()
    os._exit(0)
half = os.path.join(out, f"f{at}")
while not os.path.exists(half):
    os.sched_yield()
reader = os.fork()
if reader == 0:
    with open(key) as f:
        f.read()
    os._exit(0)
os.waitpid(reader, 0)
os.waitpid(burster, 0)
"""


def shell_command(n: int, out: str, key: str, at: int) -> str:
    """The agent as a shell script (a here-document), for runs that take one."""
    return f"python3 - {n} {out} {key} {at} <<'PY'\n{AGENT}PY\n"


class Witness:
    """A sink noting, at each announced alert, how far the pipeline and the fast lane were."""

    name = "witness"

    def __init__(self, engine: Any = None) -> None:
        self.engine = engine  # the rule engine (found among the pipeline's sinks when None)
        self.announced: list[dict[str, Any]] = []
        self.pipeline: Any = None

    def start(self, ctx: Any) -> None:
        self.pipeline = ctx.pipeline
        if self.engine is None:
            self.engine = next(s for s in ctx.pipeline.sinks if getattr(s, "lane", None) is not None)

    def announce(self, alert: Any) -> None:
        lane = self.engine.lane
        self.announced.append({"rule": alert.rule_id, "seq": self.pipeline.seq, "message": alert.message,
                               "peek_hits": lane.peek_hits, "lane_seen": lane.seen, "pid": alert.pid})
