"""The HTML report's events-over-time histogram, as inline SVG."""

from __future__ import annotations

from spyglass.report.collect import Histogram
from spyglass.report.describe import CATEGORIES


def histogram_svg(h: Histogram, width: int = 1080, height: int = 90) -> str:
    """The events-over-time bar chart of the HTML report, stacked by category."""
    if not h.series:
        return ""
    nbins = len(next(iter(h.series.values())))
    totals = [sum(s[i] for s in h.series.values()) for i in range(nbins)]
    peak = max(totals) or 1
    bw = width / nbins
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" viewBox="0 0 {width} {height + 16}" '
        f'width="{width}" height="{height + 16}" role="img" aria-label="events over time">'
    ]
    for i in range(nbins):
        y = float(height)
        for cat in CATEGORIES:
            n = h.series.get(cat, [0] * nbins)[i]
            if not n:
                continue
            bh = n / peak * (height - 4)
            y -= bh
            parts.append(
                f'<rect class="c-{cat}" x="{i * bw:.1f}" y="{y:.1f}" width="{max(bw - 1, 1):.1f}" '
                f'height="{bh:.1f}"><title>{n} {cat} events</title></rect>'
            )
    span_s = nbins * h.bin_ns / 1e9
    parts.append(f'<text x="0" y="{height + 13}" class="axis">0 s</text>')
    parts.append(f'<text x="{width}" y="{height + 13}" text-anchor="end" class="axis">{span_s:.1f} s</text>')
    per = f"{h.bin_ns / 1e6:.0f} ms" if h.bin_ns < 1_000_000_000 else f"{h.bin_ns / 1e9:.1f} s"
    parts.append(
        f'<text x="{width / 2}" y="{height + 13}" text-anchor="middle" class="axis">'
        f"peak {peak:,} events per {per}</text></svg>"
    )
    return "".join(parts)
