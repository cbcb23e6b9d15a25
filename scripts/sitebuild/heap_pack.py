"""The calculator's memory snapshot without its all-zero pages.

Pyodide's snapshot is the whole wasm heap (about 31 MB), of which about 60 % is zero pages. Inflating
it with the browser's DecompressionStream costs about 0.2 s on a 2-core machine, in proportion to the
bytes it writes; leaving the zero pages out halves what is inflated, and the worker (worker.js,
`unpackHeap`) puts them back by allocating the heap zeroed and copying the runs of non-zero pages.

Layout, little-endian: b"CHP1", u32 heap length, u32 page size, u32 number of runs, then per run
(u32 first page, u32 page count), then the runs' bytes in order (the last page may be short).
"""

from __future__ import annotations

import struct

MAGIC = b"CHP1"
PAGE = 4096


def pack(heap: bytes, page: int = PAGE) -> bytes:
    runs: list[tuple[int, int]] = []
    zero = bytes(page)
    for index in range(-(-len(heap) // page)):
        chunk = heap[index * page:(index + 1) * page]
        if chunk == zero[:len(chunk)]:
            continue
        if runs and runs[-1][0] + runs[-1][1] == index:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((index, 1))
    head = MAGIC + struct.pack("<III", len(heap), page, len(runs))
    table = b"".join(struct.pack("<II", first, count) for first, count in runs)
    body = b"".join(heap[first * page:(first + count) * page] for first, count in runs)
    return head + table + body


def unpack(packed: bytes) -> bytes:
    """The heap again (what worker.js does, for the tests)."""
    if packed[:4] != MAGIC:
        raise ValueError("not a packed heap")
    length, page, count = struct.unpack_from("<III", packed, 4)
    heap = bytearray(length)
    at = 16 + 8 * count
    for i in range(count):
        first, pages = struct.unpack_from("<II", packed, 16 + 8 * i)
        size = min(pages * page, length - first * page)
        heap[first * page:first * page + size] = packed[at:at + size]
        at += size
    if at != len(packed):
        raise ValueError("packed heap has trailing bytes")
    return bytes(heap)
