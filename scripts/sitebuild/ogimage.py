# The OpenGraph / Article image: a 1200x630 PNG drawn at build time, no image library needed.
"""Stacked bars in the site's colours, like the memory breakdown of a training step (weights,
adapters, optimizer states, activations) against a GPU's capacity line. No text, so one image
serves every language."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

WIDTH, HEIGHT = 1200, 630
Rgb = tuple[int, int, int]
Rect = tuple[int, int, int, int, Rgb]  # x0, y0, x1, y1 (exclusive), colour

BACKGROUND: Rgb = (0x26, 0x32, 0x38)
SEGMENTS: tuple[Rgb, ...] = ((0x4d, 0xb6, 0xac), (0xff, 0xb7, 0x4d), (0x79, 0x86, 0xcb), (0xe5, 0x73, 0x73))
LIMIT: Rgb = (0xec, 0xef, 0xf1)
# Widths (pixels) of the four components in each bar; the white line is the GPU's memory.
BARS: tuple[tuple[int, int, int, int], ...] = (
    (520, 60, 120, 180),
    (260, 60, 120, 140),
    (180, 60, 40, 90),
    (520, 60, 120, 330),
)


def png(width: int, height: int, background: Rgb, rects: Sequence[Rect]) -> bytes:
    """An RGB PNG of `rects` painted in order over `background`."""
    rows: list[bytes] = []
    for y in range(height):
        row = bytearray(bytes(background) * width)
        for x0, y0, x1, y1, colour in rects:
            if y0 <= y < y1:
                row[3 * x0:3 * x1] = bytes(colour) * (x1 - x0)
        rows.append(b"\x00" + bytes(row))  # filter type 0 per scanline

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
            + chunk(b"IEND", b""))


def layout() -> list[Rect]:
    """The rectangles of the picture."""
    rects: list[Rect] = []
    left, top, bar_height, gap = 120, 110, 70, 40
    for i, widths in enumerate(BARS):
        x = left
        y = top + i * (bar_height + gap)
        for width, colour in zip(widths, SEGMENTS, strict=True):
            rects.append((x, y, x + width, y + bar_height, colour))
            x += width
    limit_x = left + 900
    rects.append((limit_x, top - 40, limit_x + 6, top + len(BARS) * (bar_height + gap) - gap + 40, LIMIT))
    return rects


def image() -> bytes:
    """The site's 1200x630 PNG."""
    return png(WIDTH, HEIGHT, BACKGROUND, layout())
