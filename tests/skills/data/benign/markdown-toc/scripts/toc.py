import re
import sys
from pathlib import Path

lines = Path(sys.argv[1]).read_text().splitlines()
toc = []
for line in lines:
    m = re.match(r"^(#+)\s+(.*)", line)
    if m:
        toc.append("  " * (len(m.group(1)) - 1) + f"- {m.group(2)}")
out = Path(sys.argv[3])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("\n".join(toc) + "\n")
