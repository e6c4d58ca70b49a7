import sys
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
with zipfile.ZipFile(sys.argv[1]) as z:
    root = ET.fromstring(z.read("word/document.xml"))
paras = ["".join(t.text or "" for t in p.iter(W + "t")) for p in root.iter(W + "p")]
out = Path(sys.argv[3])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("\n".join(paras) + "\n")
