"""Small self-contained SVG charts (no scripts, no external fonts): lines and a scatter."""

from __future__ import annotations

from html import escape
from itertools import pairwise

WIDTH, HEIGHT, PAD = 640, 360, 56
COLOURS = ("#3b6fb6", "#c4552d", "#3d8b4f", "#8a4fb5", "#b58a1f", "#4f8a8a", "#666666")


def _scale(lo: float, hi: float, a: float, b: float) -> tuple[float, float]:
    span = (hi - lo) or 1.0
    k = (b - a) / span
    return k, a - lo * k


def _ticks(hi: float, n: int = 5) -> list[float]:
    step = hi / n
    return [step * i for i in range(n + 1)]


def _frame(title: str, xlabel: str, ylabel: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(title)}" style="max-width:100%;height:auto;font-family:sans-serif;font-size:11px">',
            f"<title>{escape(title)}</title>",
            f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>',
            f'<text x="{WIDTH / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(xlabel)}</text>',
            f'<text x="14" y="{HEIGHT / 2}" transform="rotate(-90 14 {HEIGHT / 2})" text-anchor="middle">'
            f"{escape(ylabel)}</text>"]


# 11 px sans-serif: about 6.5 px per character (Arial/DejaVu average), ascent about 9 px
_CHAR_W, _ASCENT, _GAP = 6.5, 9.0, 4.0


def _y_range(lines: list[list[tuple[float, float]]], x0: float, x1: float) -> list[tuple[float, float]]:
    """For each polyline, the (lowest, highest) y it takes between x0 and x1 (none if it does not get there)."""
    out = []
    for pts in lines:
        ys = [y for x, y in pts if x0 <= x <= x1]
        for (xa, ya), (xb, yb) in pairwise(pts):
            for edge in (x0, x1):
                if xa < edge < xb:
                    ys.append(ya + (yb - ya) * (edge - xa) / (xb - xa))
        if ys:
            out.append((min(ys), max(ys)))
    return out


def _limit_label_place(ly: float, chars: int, lines: list[list[tuple[float, float]]],
                       legend: tuple[float, float, float, float]) -> tuple[float, float, str]:
    """(x, baseline y, text-anchor) for the capacity line's label: right, left or middle of the line, above
    or below it, the first place where no series line and not the legend crosses the text's box."""
    width = _CHAR_W * chars
    right, left = WIDTH - PAD / 2, PAD + 8
    spans = [(right - width, right, right, "end"), (left, left + width, left, "start"),
             ((left + right - width) / 2, (left + right + width) / 2, (left + right) / 2, "middle")]
    for x0, x1, x, anchor in spans:
        for top, base in ((ly - _GAP - _ASCENT, ly - _GAP), (ly + _GAP, ly + _GAP + _ASCENT)):
            clear = all(hi < top - 1 or lo > base + 3 for lo, hi in _y_range(lines, x0, x1))
            lx0, ly0, lx1, ly1 = legend
            if clear and not (x0 < lx1 and x1 > lx0 and top < ly1 and base > ly0):
                return x, base, anchor
    return right, ly - _GAP, "end"  # nowhere clear: where it always was


def line_chart(title: str, series: dict[str, list[tuple[int, float]]], limit: float, xlabel: str, ylabel: str,
               limit_label: str) -> str:
    """Reserved memory against context length (log2 x axis), one line per series, a capacity line."""
    import math

    xs = sorted({x for pts in series.values() for x, _ in pts})
    if not xs:
        return ""
    ymax = max([limit] + [y for pts in series.values() for _, y in pts]) * 1.1
    kx, bx = _scale(math.log2(xs[0]), math.log2(xs[-1]), PAD, WIDTH - PAD / 2)
    ky, by = _scale(0, ymax, HEIGHT - PAD, PAD / 2 + 10)
    out = _frame(title, xlabel, ylabel)
    for t in _ticks(ymax):
        y = ky * t + by
        out.append(f'<line x1="{PAD}" x2="{WIDTH - PAD / 2}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{PAD - 4}" y="{y + 4:.1f}" text-anchor="end">{t:.0f}</text>')
    for x in xs:
        px = kx * math.log2(x) + bx
        out.append(f'<text x="{px:.1f}" y="{HEIGHT - PAD + 16}" text-anchor="middle">{x}</text>')
    ly = ky * limit + by
    lines = [[(kx * math.log2(x) + bx, ky * y + by) for x, y in pts] for pts in series.values()]
    legend = (PAD, PAD / 2 + 10, PAD + 8 + 7 * max(len(n) for n in series), PAD / 2 + 28 + 14 * len(series))
    label = f"{limit_label} {limit:.1f}"
    lx, lyt, anchor = _limit_label_place(ly, len(label), lines, legend)
    out.append(f'<line x1="{PAD}" x2="{WIDTH - PAD / 2}" y1="{ly:.1f}" y2="{ly:.1f}" stroke="#b00" '
               f'stroke-dasharray="6 4"/><text x="{lx:.1f}" y="{lyt:.1f}" text-anchor="{anchor}" '
               f'fill="#b00">{escape(label)}</text>')
    for i, name in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in lines[i])
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{PAD + 8}" y="{PAD / 2 + 24 + 14 * i}" fill="{colour}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def scatter_chart(title: str, points: list[tuple[float, float, str]], xlabel: str, ylabel: str) -> str:
    """Estimated against measured, a diagonal for perfect agreement, one colour per source."""
    if not points:
        return ""
    top = max(max(x, y) for x, y, _ in points) * 1.05
    k, b = _scale(0, top, PAD, WIDTH - PAD / 2)
    ky, by = _scale(0, top, HEIGHT - PAD, PAD / 2 + 10)
    out = _frame(title, xlabel, ylabel)
    out.append(f'<line x1="{b:.1f}" y1="{by:.1f}" x2="{k * top + b:.1f}" y2="{ky * top + by:.1f}" stroke="#999" '
               'stroke-dasharray="4 4"/>')
    for t in _ticks(top):
        out.append(f'<text x="{PAD - 4}" y="{ky * t + by + 4:.1f}" text-anchor="end">{t:.0f}</text>')
        out.append(f'<text x="{k * t + b:.1f}" y="{HEIGHT - PAD + 16}" text-anchor="middle">{t:.0f}</text>')
    sources = sorted({s for _, _, s in points})
    for x, y, s in points:
        colour = COLOURS[sources.index(s) % len(COLOURS)]
        out.append(f'<circle cx="{k * x + b:.1f}" cy="{ky * y + by:.1f}" r="3.5" fill="{colour}" '
                   f'fill-opacity="0.75"><title>{escape(s)}: {x:.2f} / {y:.2f}</title></circle>')
    for i, s in enumerate(sources):
        out.append(f'<text x="{PAD + 8}" y="{PAD / 2 + 24 + 13 * i}" fill="{COLOURS[i % len(COLOURS)]}">'
                   f"{escape(s)}</text>")
    out.append("</svg>")
    return "\n".join(out)
