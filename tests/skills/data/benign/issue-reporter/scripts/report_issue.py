import json
import sys
import urllib.request
from pathlib import Path

text = Path(sys.argv[1]).read_text()
title = text.splitlines()[0].lstrip("# ")
req = urllib.request.Request("http://tracker.example.test/api/issues", method="POST",
                             data=json.dumps({"title": title, "body": text}).encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=20) as resp:
    print("filed:", json.load(resp)["ok"])
