"""Brotli and gzip copies (`X.br`, `X.gz`) of the calculator runtime's large files, for a server that sends them
with Content-Encoding (scripts/static_server.py; nginx brotli_static/gzip_static, Caddy `precompressed`).

The worker asks the server (a HEAD request) whether it sends the wasm and the memory snapshot encoded; if so
it fetches the plain names (`pyodide.asm.wasm`, the packed heap `calc_heap.bin`) and the browser decodes
them off the worker's thread (wasm then compiles as it streams, from a response the browser can cache).
Otherwise it fetches the `-gzip.bin` copies and inflates them itself (pyodide_runtime.py).
Brotli comes from Node's zlib (the standard library has none): cached, keyed by the input's hash.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

# Brotli quality per file: 11 for what changes only with Pyodide (once per version, about 30 s for the
# wasm); 9 for the heap, rebuilt after every engine change (15.7 MB: about 8 s and 4.6 MB at 9, against
# 95 s and 4.0 MB at 11, measured on this project's 2-core machine).
QUALITY_STABLE = 11
QUALITY_HEAP = 9
HEAP = "calc_heap.bin"

BROTLI_JS = r"""
import { readFileSync, writeFileSync, renameSync } from "node:fs";
import zlib from "node:zlib";
const jobs = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const [src, dst, quality] of jobs) {
  const data = readFileSync(src);
  writeFileSync(dst + ".part", zlib.brotliCompressSync(data, { params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: quality, [zlib.constants.BROTLI_PARAM_LGWIN]: 24,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length } }));
  renameSync(dst + ".part", dst);
}
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def brotli(jobs: list[tuple[Path, int]], cache: Path, warn: Callable[[str], None]) -> dict[Path, Path]:
    """Brotli copies of each (file, quality), made by Node once per content; {file: its copy} for those made."""
    cache.mkdir(parents=True, exist_ok=True)
    wanted = {src: cache / f"{src.name}-{_digest(src)}-q{q}.br" for src, q in jobs}
    todo = [[str(src), str(wanted[src]), q] for src, q in jobs if not wanted[src].is_file()]
    node = shutil.which("node")
    if todo and node is None:
        warn("node not found: no brotli copies of the calculator runtime (gzip only)")
    elif todo and node is not None:
        (cache / "brotli.mjs").write_text(BROTLI_JS, "utf-8")
        (cache / "brotli-jobs.json").write_text(json.dumps(todo), "utf-8")
        proc = subprocess.run([node, str(cache / "brotli.mjs"), str(cache / "brotli-jobs.json")], capture_output=True,
                              text=True, timeout=600, check=False)
        if proc.returncode != 0:
            warn(f"brotli compression failed (gzip only): {proc.stderr[-500:]}")
    made = {src: out for src, out in wanted.items() if out.is_file()}
    for old in cache.glob("*.br"):  # an earlier heap's copy (each engine change makes a new one)
        if old.name.startswith(HEAP) and old not in made.values():
            old.unlink()
    return made


def write_copies(target: Path, heap_gz: Path | None, wasm_gz: Path | None, cache: Path,
                 warn: Callable[[str], None] = print) -> list[str]:
    """Next to the runtime files in `target`: the packed heap as `calc_heap.bin` (from its gzip file), and
    `.br`/`.gz` copies of it, the wasm and Pyodide's two modules. Returns the plain names that have copies."""
    jobs: list[tuple[Path, int]] = []
    gz: dict[Path, Path | None] = {}
    if heap_gz is not None:
        (target / HEAP).write_bytes(gzip.decompress(heap_gz.read_bytes()))
        jobs.append((target / HEAP, QUALITY_HEAP))
        gz[target / HEAP] = heap_gz
    for name in ("pyodide.asm.wasm", "pyodide.asm.mjs", "pyodide.mjs"):
        if (target / name).is_file():
            jobs.append((target / name, QUALITY_STABLE))
            gz[target / name] = wasm_gz if name == "pyodide.asm.wasm" else None
    copies = brotli(jobs, cache, warn)
    for src, _ in jobs:
        if src in copies:
            shutil.copyfile(copies[src], src.with_name(src.name + ".br"))
        made = gz[src]
        if made is not None:
            shutil.copyfile(made, src.with_name(src.name + ".gz"))
        else:
            src.with_name(src.name + ".gz").write_bytes(gzip.compress(src.read_bytes(), compresslevel=9, mtime=0))
    return [src.name for src, _ in jobs]
