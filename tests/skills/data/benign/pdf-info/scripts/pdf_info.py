import re
import sys

data = open(sys.argv[1], "rb").read()
pages = re.search(rb"/Count (\d+)", data)
fonts = sorted(set(re.findall(rb"/BaseFont /(\w+)", data)))
print("pages:", int(pages.group(1)) if pages else 0)
print("fonts:", ", ".join(f.decode() for f in fonts))
