"""The calculator's standard library, trimmed to what it imports.

The precompiled stdlib zip holds 614 entries (4.5 MB); booting Pyodide and running the calculator
imports about 126 of them (1.3 MB). Every cold visit downloads the zip, so the page gets only those,
plus whole packages an unusual input could still reach (SAFETY). Which modules is measured, not listed
by hand: a Node script boots Pyodide on the full zip, installs the wheel, runs
sizing.web on the inputs of `exercise()` (answers, refusals, trial reports), and keeps every module that
came from the zip. The memory snapshot is then made on the trimmed zip, which is what the page loads.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Packages kept whole: text codecs (a config.json in another encoding), and the stdlib parts of the
# calculator's error paths that the exercise might not reach.
SAFETY = ("encodings/", "collections/", "json/", "re/", "importlib/")

TRIM_JS = r"""
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
const [stdlib, wheel, inputs, safety, out] = process.argv.slice(2);
const require = createRequire(path.resolve("package.json"));
const indexURL = path.dirname(require.resolve("pyodide/package.json")) + path.sep;
const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
const py = await loadPyodide({ indexURL, stdLibURL: stdlib, stdout: () => {}, stderr: () => {} });
const site = py.runPython("import site; site.getsitepackages()[0]");
py.unpackArchive(new Uint8Array(readFileSync(wheel)), "wheel", { extractDir: site });
py.globals.set("inputs", readFileSync(inputs, "utf8"));
py.globals.set("safety", readFileSync(safety, "utf8"));
py.runPython(`
import json, sys, zipfile
import sizing.web
work = json.loads(inputs)
for text in work['configs']:
    sizing.web.compute_json(text)
    sizing.web.compute_json(text, False)
for text in work['reports']:
    sizing.web.report_json(text)
zname = zipfile.__file__.split('.zip/')[0] + '.zip'  # the stdlib zip zipfile came from
used = {m.__spec__.origin[len(zname) + 1:] for m in list(sys.modules.values())
        if getattr(m, '__spec__', None) and (m.__spec__.origin or '').startswith(zname + '/')}
keep = tuple(json.loads(safety))
src = zipfile.ZipFile(zname)
with zipfile.ZipFile('/tmp/stdlib-trim.zip', 'w', zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        if info.filename in used or info.filename.startswith(keep):
            dst.writestr(info, src.read(info))
`);
writeFileSync(out, py.FS.readFile("/tmp/stdlib-trim.zip"));
"""
TRIMMED = "python_stdlib_calc.zip"
# What the page loads with the memory snapshot: the trimmed zip less the modules the heap holds imported.
LAZY = "python_stdlib_lazy.zip"


def exercise(defaults: dict[str, Any]) -> dict[str, list[str]]:
    """Inputs that walk sizing.web's paths: estimates of several kinds, refusals, trial reports."""
    tiny = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 2,
            "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 32000}
    configs: list[Any] = [
        defaults, {**defaults, "method": "full", "num_gpus": 4, "parallelism": "fsdp", "price_per_gpu_hour": 2},
        {**defaults, "model": None, "model_config": tiny, "method": "lora", "target_modules": ["q_proj"]},
        {**defaults, "r": "x"}, {**defaults, "model": "nope"}, {**defaults, "max_seq_length": 10**30}, [1]]
    step = {"step": 1, "completed": True, "seconds": 1.0, "tokens": 8, "micro_batches": 1, "loss": 1.0,
            "host_max_rss_bytes": None, "max_memory_allocated_bytes": 1, "max_memory_reserved_bytes": 2,
            "device_used_bytes": None, "device_source": None, "reason": "not measured"}
    report = {"schema_version": 1, "status": "ok", "message": "", "failure": None, "rank": 0, "world_size": 1,
              "config": defaults, "measurements": {"steps": [step, step], "peaks": None},
              "checks": {"reload_matches": None, "eval_loss_before": None, "eval_loss_after": None}}
    texts = [json.dumps(c) for c in configs] + ["{", '{"model": ' + "[" * 100]
    return {"configs": texts, "reports": [json.dumps(report), json.dumps({**report, "status": "x"}), "{", "[]"]}


def trimmed_stdlib(full: Path, wheel: bytes, defaults: dict[str, Any], cache: Path,
                   run_node: Callable[[str, str, list[str], Path, str, str], bool]) -> Path | None:
    """The trimmed zip (cached by its inputs), or None when Node cannot make it (the full zip is used)."""
    inputs = json.dumps(exercise(defaults))
    key = hashlib.sha256()
    for part in (full.read_bytes(), wheel, inputs.encode(), TRIM_JS.encode(),
                 json.dumps(SAFETY).encode()):
        key.update(hashlib.sha256(part).digest())
    out = cache / f"python_stdlib_calc-{key.hexdigest()[:16]}.zip"
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    wheel_file, inputs_file, safety_file = cache / "sizing-trim.whl", cache / "trim-inputs.json", cache / "safety.json"
    wheel_file.write_bytes(wheel)
    inputs_file.write_text(inputs, "utf-8")
    safety_file.write_text(json.dumps(SAFETY), "utf-8")
    if not run_node("trim_stdlib.mjs", TRIM_JS, [str(full), str(wheel_file), str(inputs_file), str(safety_file)], out,
                    "node not found: the calculator loads the whole precompiled stdlib",
                    "trimming the Pyodide stdlib failed (the whole precompiled stdlib is used)"):
        return None
    for old in cache.glob("python_stdlib_calc-*.zip"):
        if old != out:
            old.unlink()
    return out


def lazy_stdlib(trimmed: Path, imported: list[str], out: Path) -> int:
    """Write the trimmed zip less the entries in `imported` (modules a restored heap already holds) to `out`;
    return how many entries were kept. The worker restores the heap and then re-reads the zip's directory
    (zipimporter.invalidate_caches), since the heap's copy describes the trimmed zip."""
    skip = set(imported)
    kept = 0
    with zipfile.ZipFile(trimmed) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename in skip:
                continue
            entry = zipfile.ZipInfo(info.filename, date_time=(2020, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(entry, src.read(info))
            kept += 1
    return kept
