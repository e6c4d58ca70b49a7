import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
print(sum(float(r["amount"]) for r in rows))  # no such column in most files: the run fails
