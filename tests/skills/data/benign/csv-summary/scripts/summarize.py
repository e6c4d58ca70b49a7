"""Summarise a CSV file into out/summary.md."""
import csv
import sys
from pathlib import Path

src, out = Path(sys.argv[1]), Path(sys.argv[sys.argv.index("-o") + 1] if "-o" in sys.argv else "out")
out.mkdir(parents=True, exist_ok=True)
rows = list(csv.DictReader(src.open()))
totals = {k: sum(float(r[k]) for r in rows) for k in rows[0] if all(r[k].replace(".", "", 1).isdigit() for r in rows)}
lines = [f"# Summary of {src.name}", "", f"{len(rows)} rows", ""] + [f"- {k}: {v:g}" for k, v in totals.items()]
(out / "summary.md").write_text("\n".join(lines) + "\n")
