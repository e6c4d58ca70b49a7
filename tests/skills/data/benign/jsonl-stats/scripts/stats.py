import collections
import json
import sys

per_region: collections.Counter[str] = collections.Counter()
n = 0
with open(sys.argv[1]) as f:
    for line in f:
        rec = json.loads(line)
        per_region[rec["region"]] += int(rec["units"])
        n += 1
print(f"{n} records")
for region, units in sorted(per_region.items()):
    print(f"{region}: {units}")
