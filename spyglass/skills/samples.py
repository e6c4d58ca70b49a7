# ruff: noqa: E501  (long patterns and XML literals read better whole)
"""Realistic sample inputs of the kinds a skill names, made without extra dependencies.

Deterministic content (a small sales table in every format), so repeats see the
same bytes.  Office files are minimal valid OOXML packages written with
:mod:`zipfile`; the PDF is a one-page document with a text stream.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

ROWS: Final = [
    ("2026-01-05", "north", "widget", 12, 3.5),
    ("2026-01-06", "south", "gadget", 7, 12.0),
    ("2026-01-06", "north", "gizmo", 3, 25.25),
    ("2026-01-07", "east", "widget", 20, 3.5),
    ("2026-01-08", "west", "gadget", 5, 12.0),
    ("2026-01-09", "south", "widget", 9, 3.5),
]
HEADER: Final = ("date", "region", "product", "units", "price")


def _records() -> list[dict[str, object]]:
    return [dict(zip(HEADER, r, strict=True)) for r in ROWS]


def _delimited(sep: str) -> bytes:
    lines = [sep.join(HEADER)] + [sep.join(str(v) for v in r) for r in ROWS]
    return ("\n".join(lines) + "\n").encode()


def _markdown() -> bytes:
    body = [
        "# Weekly sales notes",
        "",
        "Sales rose in the north; the gadget line is steady.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    body += ["| " + " | ".join(str(v) for v in r) + " |" for r in ROWS]
    return ("\n".join(body) + "\n").encode()


def _text() -> bytes:
    return (
        b"Meeting notes, 5 January 2026\n\nThe team reviewed the sales figures for the first week.\n"
        b"Action items: update the forecast, send the summary to the regional leads.\n"
    )


def _yaml() -> bytes:
    return (
        "sales:\n"
        + "".join(
            f"  - {{date: '{r[0]}', region: {r[1]}, product: {r[2]}, units: {r[3]}, price: {r[4]}}}\n" for r in ROWS
        )
    ).encode()


def _xml() -> bytes:
    rows = "".join(
        f'<sale date="{r[0]}" region="{r[1]}" product="{r[2]}" units="{r[3]}" price="{r[4]}"/>' for r in ROWS
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sales>{rows}</sales>\n'.encode()


def _html() -> bytes:
    cells = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in r) + "</tr>" for r in ROWS)
    return (
        f"<!doctype html><html><head><title>Sales</title></head><body><table>{cells}</table></body></html>\n".encode()
    )


def _zip(parts: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(zipfile.ZipInfo(name, (2026, 1, 5, 0, 0, 0)), text)
    return buf.getvalue()


_CT = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>{}</Types>'
_RELS = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{}</Relationships>'
_R = '<Relationship Id="{}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/{}" Target="{}"/>'


def _docx() -> bytes:
    paras = "".join(f"<w:p><w:r><w:t>{' '.join(str(v) for v in r)}</w:t></w:r></w:p>" for r in ROWS)
    doc = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="http://schemas.openxmlformats.org/'
        f'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Weekly sales</w:t></w:r></w:p>{paras}</w:body></w:document>'
    )
    return _zip(
        {
            "[Content_Types].xml": _CT.format(
                '<Override PartName="/word/document.xml" ContentType="application/vnd.'
                'openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            ),
            "_rels/.rels": _RELS.format(_R.format("rId1", "officeDocument", "word/document.xml")),
            "word/document.xml": doc,
        }
    )


def _xlsx() -> bytes:
    def row(i: int, values: tuple[object, ...]) -> str:
        cells = "".join(
            f'<c t="inlineStr"><is><t>{v}</t></is></c>' if isinstance(v, str) else f"<c><v>{v}</v></c>" for v in values
        )
        return f'<row r="{i}">{cells}</row>'

    rows = row(1, HEADER) + "".join(row(i + 2, r) for i, r in enumerate(ROWS))
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rns = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    return _zip(
        {
            "[Content_Types].xml": _CT.format(
                '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
                'spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/'
                'vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
            ),
            "_rels/.rels": _RELS.format(_R.format("rId1", "officeDocument", "xl/workbook.xml")),
            "xl/workbook.xml": f'<?xml version="1.0" encoding="UTF-8"?>\n<workbook {ns} {rns}><sheets><sheet name="Sales" '
            'sheetId="1" r:id="rId1"/></sheets></workbook>',
            "xl/_rels/workbook.xml.rels": _RELS.format(_R.format("rId1", "worksheet", "worksheets/sheet1.xml")),
            "xl/worksheets/sheet1.xml": f'<?xml version="1.0" encoding="UTF-8"?>\n<worksheet {ns}><sheetData>{rows}'
            "</sheetData></worksheet>",
        }
    )


def _pdf() -> bytes:
    text = "BT /F1 12 Tf 72 720 Td (Weekly sales: north 12 widgets, south 7 gadgets) Tj ET"
    objs = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(text)} >>\nstream\n{text}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{o}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


MAKERS: Final[dict[str, Callable[[], bytes]]] = {
    "csv": lambda: _delimited(","),
    "tsv": lambda: _delimited("\t"),
    "json": lambda: json.dumps({"sales": _records()}, indent=2).encode() + b"\n",
    "jsonl": lambda: b"".join(json.dumps(r).encode() + b"\n" for r in _records()),
    "txt": _text,
    "md": _markdown,
    "yaml": _yaml,
    "yml": _yaml,
    "xml": _xml,
    "html": _html,
    "docx": _docx,
    "xlsx": _xlsx,
    "pdf": _pdf,
}


def sample_bytes(kind: str) -> bytes | None:
    maker = MAKERS.get(kind.lower())
    return maker() if maker is not None else None


def write_sample(path: Path, kind: str | None = None) -> bool:
    """Write a sample of ``kind`` (default: the path's extension); False when the kind is unknown."""
    kind = kind or (path.suffix[1:] if path.suffix else "txt")
    data = sample_bytes(kind)
    if data is None:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True
