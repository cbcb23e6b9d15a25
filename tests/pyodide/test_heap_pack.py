"""The memory snapshot without its zero pages (scripts/sitebuild/heap_pack.py; worker.js unpacks it)."""

from __future__ import annotations

import random

import pytest

from sitebuild import heap_pack


def heap(pages: list[int], page: int = heap_pack.PAGE, tail: int = 0) -> bytes:
    rng = random.Random(len(pages))
    out = bytearray()
    for fill in pages:
        out += bytes(page) if fill == 0 else bytes(rng.randrange(1, 256) for _ in range(page))
    return bytes(out) + bytes(rng.randrange(1, 256) for _ in range(tail))


@pytest.mark.parametrize("pages", [[0, 0, 0], [1, 1, 1], [0, 1, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 1]])
@pytest.mark.parametrize("tail", [0, 100])
def test_round_trip_and_zero_pages_left_out(pages: list[int], tail: int) -> None:
    data = heap(pages, tail=tail)
    packed = heap_pack.pack(data)
    assert heap_pack.unpack(packed) == data
    runs = sum(1 for i, p in enumerate(pages) if p and (i == 0 or not pages[i - 1])) + (1 if tail and not pages[-1]
                                                                                          else 0)
    assert len(packed) == 16 + 8 * runs + sum(pages) * heap_pack.PAGE + tail


def test_a_zero_tail_page_is_left_out_too() -> None:
    data = bytes(heap_pack.PAGE) + b"\x01" + bytes(heap_pack.PAGE + 10)
    assert heap_pack.unpack(heap_pack.pack(data)) == data


def test_damaged_input_is_refused() -> None:
    packed = heap_pack.pack(heap([1, 0, 1]))
    with pytest.raises(ValueError):
        heap_pack.unpack(b"XXXX" + packed[4:])
    with pytest.raises(ValueError):
        heap_pack.unpack(packed + b"\x00")
