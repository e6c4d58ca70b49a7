import re
import sys

path = sys.argv[1]
text = open(path).read()
heads = re.findall(r"^## (.+)$", text, re.M)
toc = "\n".join(f"- [{h}](#{h.lower().replace(' ', '-')})" for h in heads)
title, rest = text.split("\n", 1)
open(path, "w").write(f"{title}\n\n{toc}\n{rest}")
print(f"{len(heads)} headings")
