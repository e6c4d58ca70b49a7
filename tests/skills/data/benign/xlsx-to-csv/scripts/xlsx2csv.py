import csv
import sys
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

NS = {"s": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
with zipfile.ZipFile(sys.argv[1]) as z:
    sheet = ET.fromstring(z.read("xl/worksheets/sheet1.xml"))
rows = []
for row in sheet.iterfind(".//s:row", NS):
    cells = []
    for c in row.iterfind("s:c", NS):
        t = c.find(".//s:t", NS)
        v = c.find("s:v", NS)
        cells.append(t.text if t is not None else (v.text if v is not None else ""))
    rows.append(cells)
out = Path(sys.argv[3])
out.parent.mkdir(parents=True, exist_ok=True)
with out.open("w", newline="") as f:
    csv.writer(f).writerows(rows)
