"""scripts/sitebuild/ogimage.py: the PNG written for OpenGraph and the Article image."""

from __future__ import annotations

import struct
import zlib

from sitebuild.ogimage import BACKGROUND, HEIGHT, WIDTH, image, layout, png


def decode(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


def test_small_png_pixels() -> None:
    width, height, raw = decode(png(3, 2, (1, 2, 3), [(1, 1, 3, 2, (9, 9, 9))]))
    assert (width, height) == (3, 2)
    assert raw == b"\x00" + bytes([1, 2, 3] * 3) + b"\x00" + bytes([1, 2, 3, 9, 9, 9, 9, 9, 9])


def test_site_image_is_1200x630_and_small() -> None:
    data = image()
    width, height, raw = decode(data)
    assert (width, height) == (WIDTH, HEIGHT) == (1200, 630)
    assert raw[1:4] == bytes(BACKGROUND)
    assert len(data) < 50_000
    assert all(0 <= x0 < x1 <= WIDTH and 0 <= y0 < y1 <= HEIGHT for x0, y0, x1, y1, _ in layout())
