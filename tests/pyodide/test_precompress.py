"""sitebuild.precompress: the .br/.gz copies of the runtime decode to the files they stand for (brotli checked
with Node's zlib, the one that made them)."""

from __future__ import annotations

import gzip
import random
import shutil
import subprocess
from pathlib import Path

from sitebuild import precompress
from tests.needs import cannot_run


def test_copies_decode_to_the_plain_files(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        cannot_run("node missing")  # under CI=true: a failure
    rng = random.Random(7)
    target, cache = tmp_path / "pyodide", tmp_path / "cache"
    target.mkdir()
    files = {"pyodide.asm.wasm": b"\0asm" + bytes(rng.randrange(4) for _ in range(50_000)),
             "pyodide.asm.mjs": b"export default 1;\n" * 3000, "pyodide.mjs": b"export const v = 2;\n" * 100}
    for name, data in files.items():
        (target / name).write_bytes(data)
    heap = bytes(rng.randrange(3) for _ in range(40_000))
    (tmp_path / "heap.gz").write_bytes(gzip.compress(heap))
    (tmp_path / "wasm.gz").write_bytes(gzip.compress(files["pyodide.asm.wasm"]))
    names = precompress.write_copies(target, tmp_path / "heap.gz", tmp_path / "wasm.gz", cache, warn=print)
    assert sorted(names) == sorted([precompress.HEAP, *files])
    files[precompress.HEAP] = heap
    assert (target / precompress.HEAP).read_bytes() == heap
    for name, data in files.items():
        assert gzip.decompress((target / (name + ".gz")).read_bytes()) == data, name
        decoded = subprocess.run([node, "-e", "process.stdout.write(require('zlib').brotliDecompressSync("
                                  "require('fs').readFileSync(process.argv[1])))", str(target / (name + ".br"))],
                                 capture_output=True, check=True).stdout
        assert decoded == data, name
        assert (target / (name + ".br")).stat().st_size < len(data), name
    # the second build finds the copies in the cache: the same bytes, no new file
    before = sorted(cache.glob("*.br"))
    precompress.write_copies(target, tmp_path / "heap.gz", tmp_path / "wasm.gz", cache, warn=print)
    assert sorted(cache.glob("*.br")) == before
