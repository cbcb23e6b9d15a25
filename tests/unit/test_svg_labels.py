"""The capacity line's label on the GPU pages' charts (scripts/sitebuild/sizing_svg.py) does not sit on a
series line: checked by sampling every polyline segment against the label's box."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from sitebuild import sizing_svg

CTX = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]


def label_box(svg: str) -> tuple[float, float, float, float]:
    m = re.search(r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)" fill="#b00">([^<]*)</text>', svg)
    assert m, svg
    x, y, anchor, text = float(m[1]), float(m[2]), m[3], m[4]
    width = 6.5 * len(text)  # 11 px sans-serif, as the chart sets it
    x0 = {"start": x, "end": x - width, "middle": x - width / 2}[anchor]
    return x0, y - 9, x0 + width, y + 2


def crossings(svg: str, box: tuple[float, float, float, float]) -> int:
    x0, y0, x1, y1 = box
    hits = 0
    for points in re.findall(r'<polyline points="([^"]+)"', svg):
        pts = [tuple(map(float, p.split(","))) for p in points.split()]
        for (xa, ya), (xb, yb) in pairwise(pts):
            for i in range(201):
                px, py = xa + (xb - xa) * i / 200, ya + (yb - ya) * i / 200
                hits += x0 <= px <= x1 and y0 <= py <= y1
    return hits


@pytest.mark.parametrize(("lora", "qlora", "limit"), [
    # the H100 page: both lines cross the 78.7 GiB line near its right end
    ([16, 17, 19, 23, 31, 47, 80, 140], [10, 11, 13, 17, 27, 44, 83, 152], 78.7),
    # a small GPU: the lines start above the limit on the left
    ([17, 18, 20, 24, 32, 48, 81, 141], [11, 12, 14, 18, 28, 45, 84, 153], 14.6),
    # a large GPU: nothing reaches the limit
    ([16, 17, 19, 23, 31, 47, 80, 140], [10, 11, 13, 17, 27, 44, 83, 152], 178.0),
])
def test_the_limit_label_is_clear_of_the_lines(lora: list[float], qlora: list[float], limit: float) -> None:
    series = {"lora": list(zip(CTX, lora, strict=True)), "qlora": list(zip(CTX, qlora, strict=True))}
    svg = sizing_svg.line_chart("t", series, limit, "Context", "Reserved, GiB", "Available to CUDA")
    assert crossings(svg, label_box(svg)) == 0, label_box(svg)
