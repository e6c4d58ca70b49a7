import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
total = sum(float(r["amount"]) for r in rows)
cols = list(rows[0]) if rows else []
open("summary.md", "w").write(f"# Summary\n\nrows: {len(rows)}\ncolumns: {', '.join(cols)}\ntotal: {total:g}\n")
print("wrote summary.md")
