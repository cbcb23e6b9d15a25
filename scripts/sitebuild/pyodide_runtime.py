"""The calculator's runtime: the self-hosted Pyodide files, the `sizing` wheel, a precompiled standard
library trimmed to what the calculator imports (stdlib_trim.py), a memory snapshot with the calculator
already imported, shipped without its zero pages (heap_pack.py) and with .br/.gz copies (precompress.py).
The calculator pages' Content-Security-Policy is csp.py (re-exported here); the pages are calculator_pages.py."""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sitebuild import heap_pack, precompress, stdlib_trim
from sitebuild.csp import csp as csp  # re-exported: calculator_pages
from sitebuild.csp import with_csp as with_csp

ROOT = Path(__file__).resolve().parents[2]
NODE_PYODIDE = ROOT / "node_modules" / "pyodide"
# What the browser fetches from the npm package (pyodide.asm.js no longer exists in 314.x).
RUNTIME_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
PYODIDE_DIR = "assets/pyodide"
CALC_DIR = "assets/calculator"
NOT_INSTALLED = ("calculator runtime not installed: node_modules/pyodide is missing. Run `npm ci` in the "
                 "repository root and build again; the calculator page shows the build-time numbers only.")


# --- the runtime ---------------------------------------------------------------------------------------


def package_version() -> str:
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    found = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if not found:
        raise ValueError("pyproject.toml has no version")
    return found.group(1)


def pyodide_version(node_dir: Path = NODE_PYODIDE) -> str | None:
    meta = node_dir / "package.json"
    return str(json.loads(meta.read_text("utf-8"))["version"]) if meta.is_file() else None


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(root: Path = ROOT) -> tuple[str, bytes]:
    """The `sizing` py3-none-any wheel, byte-for-byte reproducible (sorted entries, fixed timestamps).

    Written directly (a wheel is a zip with a dist-info) rather than with `pip wheel --no-deps .`: the
    same files, no build isolation download, no build/ or egg-info left behind, well under a second.
    """
    version = package_version()
    dist = f"sizing-{version}.dist-info"
    files: list[tuple[str, bytes]] = []
    package = root / "sizing"
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and "__pycache__" not in rel and (path.suffix == ".py" or
                                                             (path.suffix == ".json" and "/data/" in rel)):
            files.append((rel, path.read_bytes()))
    metadata = f"Metadata-Version: 2.1\nName: sizing\nVersion: {version}\nRequires-Python: >=3.11\n".encode()
    wheel = b"Wheel-Version: 1.0\nGenerator: sitebuild\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files += [(f"{dist}/METADATA", metadata), (f"{dist}/WHEEL", wheel), (f"{dist}/top_level.txt", b"sizing\n")]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files) + f"{dist}/RECORD,,\n"
    files.append((f"{dist}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return f"sizing-{version}-py3-none-any.whl", buf.getvalue()


# Runs inside Pyodide under Node: the stock stdlib zip (.py sources) recompiled to sourceless unchecked-hash
# .pyc with Pyodide's own CPython 3.14, so the browser does not compile ~125 stdlib modules at every load
# (cold load about 4 s -> about 2 s, design/pyodide-load.md section 4).
STDLIB_PYC_JS = r"""
import { writeFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
const [out] = process.argv.slice(2);
const require = createRequire(path.resolve("package.json"));
const indexURL = path.dirname(require.resolve("pyodide/package.json")) + path.sep;
const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
const py = await loadPyodide({ indexURL, stdout: () => {} });
py.runPython(`
import importlib.util, zipfile
from importlib._bootstrap_external import _code_to_hash_pyc
src = zipfile.ZipFile(zipfile.__file__.split('.zip/')[0] + '.zip')  # the stdlib zip zipfile came from
with zipfile.ZipFile('/tmp/stdlib-pyc.zip', 'w', zipfile.ZIP_DEFLATED) as out:
    for info in sorted(src.infolist(), key=lambda i: i.filename):
        data, name = src.read(info), info.filename
        if name.endswith('.py'):
            try:
                code = compile(data, src.filename + '/' + name, 'exec', dont_inherit=True)
            except SyntaxError:
                pass
            else:
                data, name = _code_to_hash_pyc(code, importlib.util.source_hash(data), False), name + 'c'
        zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_DEFLATED
        out.writestr(zi, data)
`);
writeFileSync(out, py.FS.readFile("/tmp/stdlib-pyc.zip"));
"""
STDLIB_PYC = "python_stdlib_pyc.zip"
STDLIB_CACHE = ROOT / "build" / "pyodide-stdlib"  # survives `npm ci`; /build/ is git-ignored


def _run_node(name: str, script: str, args: list[str], out: Path, missing: str, failed: str,
              warn: Callable[[str], None]) -> bool:
    """Run a build script under Node that writes `out` (through `out.part`, so a cut run leaves no
    half file); warn and return False when Node is absent or the script fails."""
    node = shutil.which("node")
    if node is None:
        warn(missing)
        return False
    STDLIB_CACHE.mkdir(parents=True, exist_ok=True)
    path = STDLIB_CACHE / name
    path.write_text(script, "utf-8")
    partial = out.with_suffix(".part")
    proc = subprocess.run([node, str(path), *args, str(partial)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    if proc.returncode != 0 or not partial.is_file():
        warn(f"{failed}: {proc.stderr[-500:]}")
        return False
    partial.replace(out)
    return True


def gzip_size(path: Path) -> int:
    """The uncompressed size a gzip file records (ISIZE, modulo 2**32: our files are far smaller)."""
    with path.open("rb") as fh:
        fh.seek(-4, 2)
        return int.from_bytes(fh.read(4), "little")


def _gzip_to(data: bytes, out: Path) -> None:
    """Write `data` gzip-compressed (reproducibly: no mtime) to `out`, atomically."""
    partial = out.with_suffix(".gzpart")
    partial.write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
    partial.replace(out)


def stdlib_pyc(version: str, warn: Callable[[str], None] = print) -> Path | None:
    """The precompiled stdlib zip for this Pyodide version (cached), or None when Node cannot make it."""
    cached = STDLIB_CACHE / f"python_stdlib_pyc-{version}.zip"
    if cached.is_file():
        return cached
    made = _run_node("make_stdlib_pyc.mjs", STDLIB_PYC_JS, [], cached,
                     "node not found: the calculator uses the stock (.py) stdlib, about 2 s slower to load",
                     "precompiling the Pyodide stdlib failed (stock stdlib used)", warn)
    return cached if made else None


# Runs under Node: boots Pyodide on the precompiled stdlib, installs the wheel, imports sizing.web (so
# `sizing` and everything it needs is in the heap) and writes the wasm memory snapshot that
# the worker restores with `_loadSnapshot` (cold load about 0.6 s faster, design/pyodide-load.md).
# The heap holds zipimport's view of the stdlib zip: the page must load it with the byte-identical zip.
SNAPSHOT_JS = r"""
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
const [stdlib, wheel, defaults, modules, out] = process.argv.slice(2);
const require = createRequire(path.resolve("package.json"));
const indexURL = path.dirname(require.resolve("pyodide/package.json")) + path.sep;
const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
const py = await loadPyodide({ indexURL, stdLibURL: stdlib, _makeSnapshot: true, stdout: () => {}, stderr: () => {} });
const site = py.runPython("import site; site.getsitepackages()[0]");
py.unpackArchive(new Uint8Array(readFileSync(wheel)), "wheel", { extractDir: site });
py.runPython("import sizing.web");
// The default configuration's answers in the heap, with and without the fit table, in each page's words
// (sizing.web.remember): the page's first answer is there when the runtime is.
py.globals.set("ahead", readFileSync(defaults, "utf8"));
py.runPython(`import json as _json
for _words in _json.loads(ahead)["words"] or [None]:
    for _table in (False, True):
        sizing.web.remember(_json.dumps(_json.loads(ahead)["config"]), _table, _words)
del ahead, _json, _words, _table`);
// The stdlib modules now in the heap: the page's zip leaves them out (stdlib_trim.lazy_stdlib).
writeFileSync(modules, py.runPython(`import json, sys, zipfile
zname = zipfile.__file__.split('.zip/')[0] + '.zip'
json.dumps(sorted(m.__spec__.origin[len(zname) + 1:] for m in list(sys.modules.values())
                  if getattr(m, '__spec__', None) and (m.__spec__.origin or '').startswith(zname + '/')))`));
py.runPython("del json, sys, zipfile");
writeFileSync(out, py.makeMemorySnapshot());
"""
# Served without its zero pages (heap_pack.py: 31 -> 13 MB) and gzip-compressed (about 5 MB; the worker
# inflates it with DecompressionStream as it arrives), under a name no server takes for Content-Encoding.
SNAPSHOT = "calc_heap-gzip.bin"
WASM_GZIP = "pyodide.asm-gzip.bin"


def in_heap(snapshot: Path) -> Path:
    """The JSON list of stdlib zip entries a snapshot holds imported (written with it)."""
    return snapshot.with_name(snapshot.name.replace(".bin.gz", ".modules.json"))


def memory_snapshot(version: str, stdlib: Path, wheel: bytes, defaults: str,
                    warn: Callable[[str], None] = print, words: list[str] | None = None) -> Path | None:
    """The memory snapshot for this Pyodide, stdlib zip, wheel (sizing.web in it), default configuration (JSON text)
    and pages' words (JSON texts; cached by their hash), or None."""
    defaults = json.dumps({"config": json.loads(defaults), "words": words or []})
    key = hashlib.sha256()
    for part in (version.encode(), SNAPSHOT_JS.encode(), stdlib.read_bytes(), wheel, defaults.encode()):
        key.update(hashlib.sha256(part).digest())
    cached = STDLIB_CACHE / f"calc_heap-{version}-{key.hexdigest()[:16]}.bin.gz"
    if cached.is_file() and in_heap(cached).is_file():
        return cached
    STDLIB_CACHE.mkdir(parents=True, exist_ok=True)
    wheel_file = STDLIB_CACHE / "sizing-snapshot.whl"
    wheel_file.write_bytes(wheel)
    defaults_file = STDLIB_CACHE / "snapshot-defaults.json"
    defaults_file.write_text(defaults, "utf-8")
    raw = cached.with_suffix(".raw")
    if not _run_node("make_snapshot.mjs", SNAPSHOT_JS, [str(stdlib), str(wheel_file), str(defaults_file),
                                                        str(in_heap(cached))],
                     raw, "node not found: the calculator boots without a memory snapshot, about 0.6 s slower",
                     "making the Pyodide memory snapshot failed (booting without it)", warn):
        return None
    for old in [*STDLIB_CACHE.glob("calc_heap-*.bin.gz"), *STDLIB_CACHE.glob("calc_snapshot-*")]:
        old.unlink()  # earlier inputs' snapshots
    for old in STDLIB_CACHE.glob("calc_heap-*.modules.json"):
        if old != in_heap(cached):
            old.unlink()
    _gzip_to(heap_pack.pack(raw.read_bytes()), cached)
    raw.unlink()
    return cached


def _file_id(path: Path) -> str:
    """A file's content id (16 hex digits of its SHA-256): the worker keeps a copy under it, so another build's
    bytes are never taken for this one's."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def install_runtime(site_dir: Path, node_dir: Path = NODE_PYODIDE,
                    warn: Callable[[str], None] = print, defaults: dict[str, Any] | None = None,
                    words: list[str] | None = None) -> dict[str, Any]:
    """Copy Pyodide and the wheel into the built site; return what runtime.json says."""
    target = site_dir / PYODIDE_DIR
    version = pyodide_version(node_dir)
    missing = [name for name in RUNTIME_FILES if not (node_dir / name).is_file()]
    if version is None or missing:
        warn(NOT_INSTALLED)
        manifest: dict[str, Any] = {"installed": False, "message": NOT_INSTALLED}
    else:
        target.mkdir(parents=True, exist_ok=True)
        for name in RUNTIME_FILES:
            shutil.copyfile(node_dir / name, target / name)
        wheel_name, wheel = build_wheel()
        (target / wheel_name).write_bytes(wheel)
        manifest = {"installed": True, "pyodide": version, "wheel": wheel_name, "files": list(RUNTIME_FILES),
                    "wasm_id": _file_id(node_dir / "pyodide.asm.wasm")}  # names the worker's Cache API copy
        # the lock's header: the worker passes it as lockFileContents (no lock fetch; no packages used)
        with contextlib.suppress(ValueError, KeyError, TypeError):
            manifest["lock_info"] = json.loads((node_dir / "pyodide-lock.json").read_text("utf-8"))["info"]
        # The wasm again, gzip-compressed (9.6 -> 3.5 MB) under a name no server decodes: the worker inflates
        # it while compiling, and a browser's in-memory cache (a private window) keeps it, unlike 9.6 MB.
        wasm_gz = STDLIB_CACHE / f"pyodide.asm-{version}.wasm.gz"
        heap_gz: Path | None = None
        if node_dir == NODE_PYODIDE:
            if not wasm_gz.is_file():
                STDLIB_CACHE.mkdir(parents=True, exist_ok=True)
                _gzip_to((node_dir / "pyodide.asm.wasm").read_bytes(), wasm_gz)
            shutil.copyfile(wasm_gz, target / WASM_GZIP)
            manifest["wasm_gzip"] = WASM_GZIP
        pyc = stdlib_pyc(version, warn) if node_dir == NODE_PYODIDE else None
        if pyc is not None:
            # what the calculator imports (4.5 -> about 1.5 MB per cold visit); the whole zip if trimming fails
            trimmed = stdlib_trim.trimmed_stdlib(
                pyc, wheel, defaults or {}, STDLIB_CACHE,
                lambda name, script, args, out, missing, failed: _run_node(name, script, args, out, missing,
                                                                         failed, warn))
            stdlib, stdlib_name = (trimmed, stdlib_trim.TRIMMED) if trimmed else (pyc, STDLIB_PYC)
            shutil.copyfile(stdlib, target / stdlib_name)
            manifest["stdlib"] = stdlib_name
            snapshot = memory_snapshot(version, stdlib, wheel, json.dumps(defaults or {}), warn, words)
            if snapshot is not None:
                heap_gz = snapshot
                shutil.copyfile(snapshot, target / SNAPSHOT)
                manifest["snapshot"] = SNAPSHOT
                manifest["snapshot_packed_bytes"] = gzip_size(snapshot)
                manifest["snapshot_id"] = _file_id(snapshot)  # the worker's Cache API copy is named by it
                # restored, only what the heap lacks is read from the zip: the rest is left out (1.7 -> 0.4 MB)
                imported = json.loads(in_heap(snapshot).read_text("utf-8"))
                stdlib_trim.lazy_stdlib(stdlib, imported, target / stdlib_trim.LAZY)
                manifest["snapshot_stdlib"] = stdlib_trim.LAZY
                manifest["snapshot_plain"] = precompress.HEAP  # the packed heap, for a server that encodes it
        if node_dir == NODE_PYODIDE:  # .br/.gz copies for a server that sends Content-Encoding
            precompress.write_copies(target, heap_gz, wasm_gz, STDLIB_CACHE, warn)
    out = site_dir / CALC_DIR / "runtime.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    return manifest
