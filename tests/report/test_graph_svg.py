from __future__ import annotations

import re

from spyglass.report.graph_svg import GraphInput, Leaf, middle_cut, render_graph_svg


def test_middle_cut_keeps_both_ends() -> None:
    assert middle_cut("short", 10) == "short"
    cut = middle_cut("/very/long/path/to/some/file.txt", 15)
    assert len(cut) == 15 and cut.startswith("/very") and cut.endswith("file.txt") and "…" in cut


def test_graph_caps_leaves_keeps_alerts_and_escapes() -> None:
    files = [Leaf("file", f"/w/f{i}.txt", {"read": i + 1}) for i in range(100)]
    files.append(Leaf("file", "<HOME>/.ssh/id_rsa", {"read": 1}, alert=True))
    g = GraphInput(
        title="run abc",
        subtitle="demo",
        leaves={
            "file": files,
            "command": [Leaf("command", "python3 agent.py", {"exec": 1})],
            "host": [Leaf("host", "evil.example:443", {"proxy-deny": 2}, denied=True)],
        },
        per_side=20,
    )
    svg = render_graph_svg(g)
    assert svg.count('class="leaf') == 22  # 20 files + 1 command + 1 host
    assert "files 20 of 101" in svg
    assert "&lt;HOME&gt;/.ssh/id_rsa" in svg and 'class="leaf alert"' in svg
    assert "<HOME>" not in svg
    # labels on one side never share a line
    ys = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="start"', svg)]
    assert len(ys) == len(set(ys))


def test_empty_graph_says_so() -> None:
    svg = render_graph_svg(GraphInput(title="run x", subtitle="", leaves={}))
    assert "touched no command, file or host" in svg
