"""The behaviour graph of a run as inline SVG: the run in the middle, what it touched around it.

A star graph (the profile of the run): commands and hosts on the left,
files on the right, each leaf joined to the run by one edge whose width grows
with the number of accesses.  Leaves are spaced evenly in height along an
ellipse so that their labels, written outward, never overlap.  Leaves an
alert points at are drawn in red.  Pure: takes leaves, returns markup.
"""

from __future__ import annotations

import math
from html import escape
from typing import Final

import msgspec

KIND_COLOURS: Final = {"command": "#3566c8", "file": "#2b8a55", "host": "#c7741c"}
ALERT_COLOUR: Final = "#c62828"
DENY_COLOUR: Final = "#8e24aa"
ROW: Final = 24
CHAR_W: Final = 6.4  # average width of a character at the label font size


class Leaf(msgspec.Struct):
    kind: str  # command | file | host
    name: str
    ops: dict[str, int] = msgspec.field(default_factory=dict)
    alert: bool = False
    denied: bool = False

    @property
    def count(self) -> int:
        return sum(self.ops.values())

    @property
    def ops_text(self) -> str:
        return ", ".join(f"{op} ×{n}" for op, n in sorted(self.ops.items(), key=lambda kv: -kv[1]))


class GraphInput(msgspec.Struct):
    title: str
    subtitle: str
    leaves: dict[str, list[Leaf]]  # kind -> every leaf of that kind
    per_side: int = 22


def middle_cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters by replacing its middle with "…"."""
    if len(text) <= limit:
        return text
    if limit < 5:
        return text[:limit]
    head = (limit - 1) * 2 // 5  # the end of a path (the file name) says more than its start
    tail = limit - 1 - head
    return text[:head] + "…" + text[-tail:]


def _pick(leaves: list[Leaf], n: int) -> list[Leaf]:
    """The ``n`` leaves to draw: those with alerts first, then the busiest."""
    ranked = sorted(leaves, key=lambda lf: (not lf.alert, not lf.denied, -lf.count, lf.name))
    return ranked[:n]


def _sides(g: GraphInput) -> tuple[list[Leaf], list[Leaf], dict[str, int]]:
    cmds = g.leaves.get("command", [])
    hosts = g.leaves.get("host", [])
    files = g.leaves.get("file", [])
    n_hosts = min(len(hosts), max(g.per_side // 3, g.per_side - len(cmds)))
    left = _pick(hosts, n_hosts) + _pick(cmds, g.per_side - n_hosts)
    left.sort(key=lambda lf: (lf.kind != "command", lf.name))
    right = sorted(_pick(files, g.per_side), key=lambda lf: lf.name)
    shown = {
        "command": sum(1 for lf in left if lf.kind == "command"),
        "host": sum(1 for lf in left if lf.kind == "host"),
        "file": len(right),
    }
    return left, right, shown


def render_graph_svg(g: GraphInput, width: int = 1120) -> str:
    left, right, shown = _sides(g)
    rows = max(len(left), len(right), 6)
    height = rows * ROW + 110
    cx, cy = width / 2, height / 2 + 14
    rx, ry = width * 0.21, (rows * ROW) / 2
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="behaviour graph">'
    ]
    legend_x = 12
    for kind, label in (("command", "commands"), ("file", "files"), ("host", "hosts")):
        total = len(g.leaves.get(kind, []))
        text = f"{label} {shown[kind]}" + (f" of {total}" if total > shown[kind] else "")
        out.append(f'<circle cx="{legend_x + 6}" cy="16" r="5" fill="{KIND_COLOURS[kind]}"/>')
        out.append(f'<text x="{legend_x + 16}" y="20" class="legend">{escape(text)}</text>')
        legend_x += 16 + int(len(text) * CHAR_W) + 24
    out.append(f'<circle cx="{legend_x + 6}" cy="16" r="5" fill="{ALERT_COLOUR}"/>')
    out.append(f'<text x="{legend_x + 16}" y="20" class="legend">alert</text>')
    legend_x += 70
    out.append(f'<circle cx="{legend_x + 6}" cy="16" r="5" fill="{DENY_COLOUR}"/>')
    out.append(f'<text x="{legend_x + 16}" y="20" class="legend">denied by the proxy</text>')
    edges: list[str] = []
    nodes: list[str] = []
    for side, items in ((-1, left), (1, right)):
        n = len(items)
        for i, lf in enumerate(items):
            frac = 0.0 if n == 1 else (i / (n - 1)) * 2 - 1  # -1 .. 1
            dy = frac * ry * 0.94 if n > 1 else 0.0
            x = cx + side * rx * math.sqrt(max(0.0, 1 - (dy / (ry + ROW)) ** 2))
            y = cy + dy
            colour = ALERT_COLOUR if lf.alert else (DENY_COLOUR if lf.denied else KIND_COLOURS[lf.kind])
            sw = min(1.0 + math.log2(1 + lf.count) * 0.7, 7.0)
            tip = f"{lf.kind}: {lf.name}\n{lf.ops_text}"
            edges.append(
                f'<line x1="{cx:.1f}" y1="{cy:.1f}" x2="{x:.1f}" y2="{y:.1f}" stroke="{colour}" '
                f'stroke-width="{sw:.2f}" stroke-opacity="0.45"><title>{escape(tip)}</title></line>'
            )
            room = (width - x - 16) if side > 0 else (x - 16)
            label = ("⚠ " if lf.alert else "") + middle_cut(lf.name, max(8, int(room / CHAR_W)))
            anchor = "start" if side > 0 else "end"
            tx = x + 9 * side
            cls = "leaf alert" if lf.alert else "leaf"
            nodes.append(
                f'<g class="{cls}" data-kind="{lf.kind}"><title>{escape(tip)}</title>'
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>'
                f'<text x="{tx:.1f}" y="{y + 4:.1f}" text-anchor="{anchor}">{escape(label)}</text></g>'
            )
    out.extend(edges)
    out.extend(nodes)
    out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="44" class="hub"/>')
    out.append(
        f'<text x="{cx:.1f}" y="{cy - 2:.1f}" text-anchor="middle" class="hub-title">'
        f"{escape(middle_cut(g.title, 14))}</text>"
    )
    if g.subtitle:
        out.append(
            f'<text x="{cx:.1f}" y="{cy + 14:.1f}" text-anchor="middle" class="hub-sub">'
            f"{escape(middle_cut(g.subtitle, 16))}</text>"
        )
    if not left and not right:
        out.append(
            f'<text x="{cx:.1f}" y="{cy + 70:.1f}" text-anchor="middle" class="legend">'
            "the run touched no command, file or host</text>"
        )
    out.append("</svg>")
    return "".join(out)
