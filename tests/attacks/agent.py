"""A scripted, fully compliant coding agent: it does what the skill or README says.

``python agent.py SKILL.md`` runs every fenced ```sh block of the file, in
order, with /bin/sh in the current directory (each block bounded by a
timeout), the way an agent that trusts the instructions it reads would.
It prints one line per step to stderr; nothing else.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)
STEP_TIMEOUT = 60


def main() -> int:
    text = Path(sys.argv[1]).read_text(encoding="utf-8")
    for n, block in enumerate(BLOCK.findall(text), 1):
        try:
            proc = subprocess.run(["/bin/sh", "-c", block], timeout=STEP_TIMEOUT, check=False)
            print(f"agent: step {n} exit {proc.returncode}", file=sys.stderr)
        except subprocess.TimeoutExpired:
            print(f"agent: step {n} timed out", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
