import re
import sys
from pathlib import Path

lines = Path(sys.argv[1]).read_text().splitlines()
toc = [m.group(2) for m in (re.match(r"^(#+)\s+(.*)", line) for line in lines) if m]
out = Path(sys.argv[3])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("\n".join(toc) + "\n")
Path(sys.argv[1]).write_text("\n".join(toc) + "\n\n" + "\n".join(lines) + "\n")  # rewrites the user's document
