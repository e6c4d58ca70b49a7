"""Parser throughput: ``python tests/capture/strace/bench_parser.py [TRACE_FILE]``.

Without a file it records an openat-heavy trace first (Python imports and
``cat`` over a few thousand files, under the backend's own strace command
line), then parses it several times and prints the best lines/s.  Not a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from spyglass.capture.strace.backend import strace_command
from spyglass.capture.strace.parser import StraceParser

IMPORTS = "import asyncio, email.mime.text, http.client, json, xml.dom.minidom, unittest, decimal"
READ_ALL = (
    "import os\n"
    "for root, _, names in os.walk('/usr/share'):\n"
    "    for n in names[:50]:\n"
    "        try: open(os.path.join(root, n), 'rb').close()\n"
    "        except OSError: pass\n"
)


def record(out: Path) -> None:
    """Six Python start-ups with imports, then one that opens ~50 files per directory of /usr/share."""
    py = sys.executable
    script = f"for i in 1 2 3 4 5 6; do {py} -c '{IMPORTS}'; done; {py} -c \"$READ_ALL\""
    env = {**os.environ, "READ_ALL": READ_ALL}
    subprocess.run(strace_command(str(out), ["sh", "-c", script]), check=False, env=env)


def bench(path: Path) -> None:
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    best, events, unparsed = 0.0, 0, 0
    for _ in range(9):
        parser = StraceParser(cwd=os.getcwd())
        start = time.perf_counter()
        events = sum(len(parser.feed(line)) for line in lines) + len(parser.finish())
        best = max(best, len(lines) / (time.perf_counter() - start))
        unparsed = parser.unparsed
    print(f"{len(lines)} lines, {events} events, {unparsed} unparsed, best {best:,.0f} lines/s")


def main() -> None:
    if len(sys.argv) > 1:
        bench(Path(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.strace"
        record(path)
        bench(path)


if __name__ == "__main__":
    main()
