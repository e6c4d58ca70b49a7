import json
import sys

items = json.load(open(sys.argv[1]))
lines = [f"{i['name']}: {i['price']:.2f}" for i in items]
lines.append(f"total: {sum(i['price'] for i in items):.2f}")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print(f"wrote {sys.argv[2]}")
