"""The calculator page: its self-hosted Pyodide runtime, the `sizing` wheel, and its first-paint numbers.

* `install_runtime(site_dir)` (on_post_build, once): copies the five Pyodide files the browser fetches from
  node_modules/pyodide (npm pyodide, pinned in package.json) to site/assets/pyodide/, writes the
  `sizing` py3-none-any wheel next to them and site/assets/calculator/runtime.json (wheel name, version).
  Without node_modules the build still succeeds: it logs how to fix it, and runtime.json says
  `"installed": false`, so the page shows "calculator runtime not installed" instead of numbers that
  never update.
* `add_csp(site_dir)`: a Content-Security-Policy <meta> on the calculator pages: 'self', 'wasm-unsafe-eval'
  and the hashes of the theme's own inline scripts.
* Placeholders `[[sizing:calculator_form]]`, `[[sizing:calculator_results]]` (registered into
  sizing_blocks.HANDLERS on import): the form with the contract's field names and the default
  configuration's results, computed at build time by the same calc_bridge.py the Web Worker runs.
"""

from __future__ import annotations

import base64
import hashlib
import html
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT, Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import sizing_blocks  # noqa: E402
from sizing_labels import fmt_gib, fmt_int, fmt_num, label  # noqa: E402

from sizing.config import ATTENTION, DTYPES, FRAMEWORKS, METHODS, OPTIMIZERS, PARALLELISM  # noqa: E402
from sizing.memory.timeline import COMPONENTS  # noqa: E402

NODE_PYODIDE = ROOT / "node_modules" / "pyodide"
# What the browser fetches from the npm package (pyodide.asm.js no longer exists in 314.x).
RUNTIME_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
PYODIDE_DIR = "assets/pyodide"
CALC_DIR = "assets/calculator"
BRIDGE = ROOT / "docs" / CALC_DIR / "calc_bridge.py"
EXAMPLE = ROOT / "examples" / "qlora-llama31-8b.json"
NOT_INSTALLED = ("calculator runtime not installed: node_modules/pyodide is missing. Run `npm ci` in the "
                 "repository root and build again; the calculator page shows the build-time numbers only.")
CALC_PAGE = re.compile(r"(^|/)calculator/(request/)?index\.html$")

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
    wheel = b"Wheel-Version: 1.0\nGenerator: scripts/site/pyodide_build.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
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
import importlib.util, sys, zipfile
from importlib._bootstrap_external import _code_to_hash_pyc
src = zipfile.ZipFile(sys.path[[p.endswith('.zip') for p in sys.path].index(True)])
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


def stdlib_pyc(version: str, warn: Callable[[str], None] = print) -> Path | None:
    """The precompiled stdlib zip for this Pyodide version (cached), or None when Node cannot make it."""
    cached = STDLIB_CACHE / f"python_stdlib_pyc-{version}.zip"
    if cached.is_file():
        return cached
    node = shutil.which("node")
    if node is None:
        warn("node not found: the calculator uses the stock (.py) stdlib, about 2 s slower to load")
        return None
    STDLIB_CACHE.mkdir(parents=True, exist_ok=True)
    script = STDLIB_CACHE / "make_stdlib_pyc.mjs"
    script.write_text(STDLIB_PYC_JS, "utf-8")
    partial = cached.with_suffix(".part")
    proc = subprocess.run([node, str(script), str(partial)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    if proc.returncode != 0 or not partial.is_file():
        warn(f"precompiling the Pyodide stdlib failed (stock stdlib used): {proc.stderr[-500:]}")
        return None
    partial.replace(cached)
    return cached


def install_runtime(site_dir: Path, node_dir: Path = NODE_PYODIDE,
                    warn: Callable[[str], None] = print) -> dict[str, Any]:
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
        manifest = {"installed": True, "pyodide": version, "wheel": wheel_name, "files": list(RUNTIME_FILES)}
        pyc = stdlib_pyc(version, warn) if node_dir == NODE_PYODIDE else None
        if pyc is not None:
            shutil.copyfile(pyc, target / STDLIB_PYC)
            manifest["stdlib"] = STDLIB_PYC
    out = site_dir / CALC_DIR / "runtime.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    return manifest


# --- Content-Security-Policy of the calculator pages ----------------------------------------------------

INLINE_SCRIPT = re.compile(r"<script(?P<attrs>[^>]*)>(?P<body>.*?)</script>", re.S)
DATA_TYPES = ("application/json", "application/ld+json")


def csp(html_text: str) -> str:
    """The policy for one page: 'self' only, wasm compilation, and the hashes of its inline scripts."""
    hashes = []
    for match in INLINE_SCRIPT.finditer(html_text):
        attrs, body = match.group("attrs"), match.group("body")
        if "src=" in attrs or any(kind in attrs for kind in DATA_TYPES) or not body.strip():
            continue
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        hashes.append(f"'sha256-{digest}'")
    script = " ".join(["'self'", "'wasm-unsafe-eval'", *sorted(set(hashes))])
    return ("default-src 'self'; " f"script-src {script}; worker-src 'self'; connect-src 'self'; "
            "img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; object-src 'none'; "
            "base-uri 'self'; form-action 'self'")


def with_csp(html_text: str) -> str:
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp(html_text))}">'
    return re.sub(r"<head>", lambda _: "<head>\n  " + meta, html_text, count=1)


def add_csp(site_dir: Path) -> list[Path]:
    """The calculator pages, finished: their slots filled (fill_slots), then the CSP <meta> added."""
    done = []
    for path in sorted(site_dir.rglob("index.html")):
        rel = path.relative_to(site_dir).as_posix()
        if CALC_PAGE.search(rel):
            text = path.read_text("utf-8")
            if 'http-equiv="Content-Security-Policy"' not in text:
                path.write_text(with_csp(fill_slots(text)), "utf-8")
            done.append(path)
    return done


# --- the bridge (the same Python the worker runs) --------------------------------------------------------


def bridge() -> ModuleType:
    if "calc_bridge" in sys.modules:
        return sys.modules["calc_bridge"]
    spec = importlib.util.spec_from_file_location("calc_bridge", BRIDGE)
    if spec is None or spec.loader is None:
        raise ImportError(BRIDGE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["calc_bridge"] = module
    spec.loader.exec_module(module)
    return module


# --- the form -----------------------------------------------------------------------------------------

# (name, kind, choices): kind is select, int, float, bool, text, json. Order = order on the page.
FieldSpec = tuple[str, str, tuple[str, ...]]
FIELDS: tuple[FieldSpec, ...] = (
    ("model", "select", ()), ("model_config", "json", ()), ("framework", "select", FRAMEWORKS),
    ("method", "select", METHODS), ("torch_dtype", "select", (*DTYPES, "auto")),
    ("bf16", "bool", ()), ("fp16", "bool", ()),
    ("bnb_4bit_quant_type", "select", ("nf4", "fp4")), ("bnb_4bit_use_double_quant", "bool", ()),
    ("bnb_4bit_compute_dtype", "select", DTYPES),
    ("r", "int", ()), ("lora_alpha", "float", ()), ("lora_dropout", "float", ()), ("target_modules", "text", ()),
    ("use_dora", "bool", ()),
    ("max_seq_length", "int", ()), ("per_device_train_batch_size", "int", ()),
    ("gradient_accumulation_steps", "int", ()), ("packing", "bool", ()), ("gradient_checkpointing", "bool", ()),
    ("attn_implementation", "select", ATTENTION), ("optim", "select", OPTIMIZERS),
    ("gpu", "select", ()), ("num_gpus", "int", ()), ("parallelism", "select", PARALLELISM),
    ("dataset_tokens", "int", ()), ("num_train_epochs", "float", ()), ("price_per_gpu_hour", "float", ()),
)
GROUPS = (("group_model", ("model", "model_config", "framework")),
          ("group_precision", ("method", "torch_dtype", "bf16", "fp16", "bnb_4bit_quant_type",
                               "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype")),
          ("group_lora", ("r", "lora_alpha", "lora_dropout", "target_modules", "use_dora")),
          ("group_batch", ("max_seq_length", "per_device_train_batch_size", "gradient_accumulation_steps",
                           "packing", "gradient_checkpointing", "attn_implementation", "optim")),
          ("group_gpu", ("gpu", "num_gpus", "parallelism")),
          ("group_time", ("dataset_tokens", "num_train_epochs", "price_per_gpu_hour")))


def default_config() -> dict[str, Any]:
    """What the form holds before anyone touches it, as the page's JavaScript would send it."""
    example = json.loads(EXAMPLE.read_text("utf-8"))
    config: dict[str, Any] = {}
    for name, kind, _ in FIELDS:
        value = example.get(name)
        if kind == "json":
            continue  # empty textarea: not sent
        if kind == "text" and isinstance(value, list):
            value = list(value)
        config[name] = value
    return config


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _field_html(name: str, kind: str, choices: tuple[str, ...], value: Any, lang: str,
                catalog: dict[str, Any]) -> str:
    e = html.escape
    label_text = e(T(lang, f"f_{name}"))
    err = f'<span class="calc-error" data-error-for="{name}" data-testid="error-{name}" role="alert"></span>'
    if kind == "bool":
        checked = " checked" if value else ""
        return (f'<div class="calc-field calc-bool"><label><input type="checkbox" name="{name}" id="calc-{name}"'
                f' data-kind="bool"{checked}> {label_text} <code>{name}</code></label>{err}</div>')
    head = f'<div class="calc-field"><label for="calc-{name}">{label_text} <code>{name}</code></label>'
    if kind == "select":
        options = choices
        names: dict[str, str] = {}
        if name == "model":
            options = tuple(m["id"] for m in catalog["models"])
        elif name == "gpu":
            options = tuple(g["id"] for g in catalog["gpus"])
            names = {g["id"]: g["name"] for g in catalog["gpus"]}
        opts = "".join(f'<option value="{e(o)}"{" selected" if o == value else ""}>{e(names.get(o, o))}</option>'
                       for o in options)
        return f'{head}<select name="{name}" id="calc-{name}" data-kind="select">{opts}</select>{err}</div>'
    if kind == "json":
        return (f'{head}<textarea name="{name}" id="calc-{name}" data-kind="json" rows="3" spellcheck="false" '
                f'placeholder="{e(T(lang, "paste_config"))}"></textarea>{err}</div>')
    if kind == "text":
        return (f'{head}<input type="text" name="{name}" id="calc-{name}" data-kind="list" '
                f'value="{e(_text(value))}">{err}</div>')
    step = "1" if kind == "int" else "any"
    return (f'{head}<input type="number" name="{name}" id="calc-{name}" data-kind="{kind}" step="{step}" '
            f'min="0" value="{e(_text(value))}">{err}</div>')


def _script_src(lang: str, name: str, depth: int = 1) -> str:
    depth += 0 if lang == "ru" else 1  # /calculator/ or /uz/calculator/
    return "../" * depth + f"{CALC_DIR}/{name}"


def form_html(lang: str) -> str:
    catalog = bridge().catalog()
    defaults = default_config()
    specs = {name: (kind, choices) for name, kind, choices in FIELDS}
    parts = ['<form id="calc-form" class="calc-form" autocomplete="off" novalidate>']
    for group, names in GROUPS:
        parts.append(f'<fieldset><legend>{html.escape(T(lang, group))}</legend>')
        parts += [_field_html(n, *specs[n], defaults.get(n), lang, catalog) for n in names]
        parts.append("</fieldset>")
    parts.append("</form>")
    i18n = {key: values.get(lang, values["en"]) for key, values in TEXT.items()}
    i18n.update({key: label(key, lang) for key in (*COMPONENTS, "forward", "backward", "optimizer", "gib", "allocated",
                                                 "reserved", "device", "phase", "component")})
    data = json.dumps({"lang": lang, "text": i18n, "defaults": defaults}, ensure_ascii=False)
    data = data.replace("</", "<\\/")
    return "\n".join([
        f'<div id="calc" class="calc" data-lang="{lang}">',
        f'<script type="application/json" id="calc-data">{data}</script>',
        *parts,
        '<div class="calc-actions">'
        f'<button type="button" class="md-button" id="calc-download">{html.escape(T(lang, "download"))}</button> '
        '<button type="button" class="md-button" id="calc-copy-snippet">'
        f'{html.escape(T(lang, "copy_snippet"))}</button> '
        f'<button type="button" class="md-button" id="calc-copy-trial">{html.escape(T(lang, "copy_trial"))}</button> '
        '<span id="calc-copied" class="calc-copied" role="status"></span></div>',
        '<p><a id="calc-request" data-testid="request-link" href="request/">'
        f'{html.escape(T(lang, "to_request"))}</a></p>',
        '<p class="calc-error calc-general" data-testid="error-general" id="calc-error-general" role="alert"></p>',
        f'<script type="module" src="{_script_src(lang, "calculator.js")}"></script>',
        "</div>",
    ])


# --- the results (first paint; calculator.js renders the same structure) --------------------------------

BAR_COLORS = {"weights": "#3f51b5", "quantization_state": "#7986cb", "adapters": "#009688", "gradients": "#4caf50",
              "optimizer_states": "#ff9800", "master_weights": "#795548", "activations": "#e91e63",
              "logits_and_loss": "#9c27b0", "workspace": "#607d8b"}


def _bar(components: dict[str, int], lang: str) -> str:
    total = sum(components.values()) or 1
    x, rects = 0.0, []
    for name in COMPONENTS:
        width = 1000 * components.get(name, 0) / total
        if width <= 0:
            continue
        title = html.escape(f"{label(name, lang)}: {fmt_gib(components[name], lang)} {label('gib', lang)}")
        rects.append(f'<rect x="{x:.2f}" y="0" width="{width:.2f}" height="40" fill="{BAR_COLORS[name]}">'
                     f"<title>{title}</title></rect>")
        x += width
    return (f'<svg class="calc-bar" data-testid="bar" viewBox="0 0 1000 40" preserveAspectRatio="none" '
            f'role="img" aria-label="{html.escape(T(lang, "components"))}">{"".join(rects)}</svg>')


def _hours(value: Any, lang: str) -> str:
    return "—" if value is None else fmt_num(float(value), lang, 1)


def results_html(result: dict[str, Any], lang: str) -> str:
    """The results block for one compute() answer (ok)."""
    e = html.escape
    est, table = result["estimate"], result["fit_table"]
    peak, comps, time = est["peak"], est["components"], est.get("time") or {}
    gib = label("gib", lang)
    out = ['<div id="calc-results" class="calc-results" data-testid="results" aria-live="polite">',
           '<div class="calc-peaks">']
    for key in ("allocated", "reserved", "device"):
        value = int(peak[f"{key}_bytes"])
        out.append(f'<div class="calc-peak"><span>{e(label(key, lang))}</span> '
                   f'<strong data-testid="peak-{key}" data-bytes="{value}">{fmt_gib(value, lang)} {gib}</strong></div>')
    out.append(f'<div class="calc-peak"><span>{e(label("phase", lang))}</span> '
               f'<strong data-testid="peak-phase" data-phase="{e(str(peak["phase"]))}">'
               f'{e(label(str(peak["phase"]), lang))}</strong></div></div>')
    out.append(_bar(comps, lang))
    out.append(f'<table class="calc-components" data-testid="components"><thead><tr><th>{e(label("component", lang))}'
               f"</th><th>{gib}</th></tr></thead><tbody>")
    for name in COMPONENTS:
        value = int(comps.get(name, 0))
        out.append(f'<tr data-testid="component-{name}" data-bytes="{value}"><td><span class="calc-swatch" '
                   f'data-color="{name}"></span>{e(label(name, lang))}</td><td>{fmt_gib(value, lang)}</td></tr>')
    out.append("</tbody></table>")
    cost = time.get("cost")
    out.append(f'<p class="calc-time" data-testid="time">{e(T(lang, "time_line"))} '
               f'<span data-testid="total-hours">{_hours(time.get("total_hours"), lang)}</span> {e(T(lang, "hours"))}; '
               f'{e(T(lang, "step"))} <span data-testid="step-seconds">{_hours(time.get("step_seconds"), lang)}</span> '
               f's; {e(T(lang, "tps"))} <span data-testid="tokens-per-second">'
               f'{fmt_int(round(time.get("tokens_per_second") or 0), lang)}</span>; {e(T(lang, "cost"))} '
               f'<span data-testid="cost">{"—" if cost is None else fmt_num(float(cost), lang, 2)}</span></p>')
    out.append('<ul class="calc-warnings" data-testid="warnings">'
               + "".join(f'<li data-code="{e(str(w.get("code")))}">{e(str(w.get("message")))}</li>'
                         for w in est.get("warnings") or []) + "</ul>")
    heads = [T(lang, k) for k in ("th_gpu", "th_fits", "th_headroom", "th_batch", "th_seq", "th_gpus", "th_hours",
                                  "th_cost")]
    out.append('<div class="calc-fit-wrap"><table class="calc-fit" data-testid="fit-table"><thead><tr>'
               + "".join(f"<th>{e(h)}</th>" for h in heads) + "</tr></thead><tbody>")
    for row in table:
        t = row.get("time") or {}
        out.append(f'<tr data-testid="fit-{e(str(row["gpu"]))}" data-fits="{str(bool(row["fits"])).lower()}" '
                   f'data-headroom="{int(row["headroom_bytes"])}"><td>{e(str(row["name"]))}</td>'
                   f'<td>{"✓" if row["fits"] else "✗"}</td><td>{fmt_gib(int(row["headroom_bytes"]), lang)}</td>'
                   f'<td>{int(row["max_micro_batch"])}</td><td>{fmt_int(int(row["max_seq_length"]), lang)}</td>'
                   f'<td>{int(row["fewest_gpus"] or 0) or "—"}</td><td>{_hours(t.get("total_hours"), lang)}</td>'
                   f'<td>{"—" if t.get("cost") is None else fmt_num(float(t["cost"]), lang, 2)}</td></tr>')
    out.append("</tbody></table></div></div>")
    return "".join(out)


_DEFAULT_RESULT: dict[str, Any] = {}


def default_result() -> dict[str, Any]:
    if not _DEFAULT_RESULT:  # one compute for the three languages
        _DEFAULT_RESULT.update(bridge().compute(default_config()))
    if not _DEFAULT_RESULT.get("ok"):
        raise ValueError(f"the calculator's default configuration fails: {_DEFAULT_RESULT.get('error')}")
    return _DEFAULT_RESULT


def results_block(lang: str) -> str:
    result = default_result()
    # The stylesheet and the status line come first: the numbers are the first thing painted.
    return "".join([
        '<div class="calc-top">',
        f'<link rel="stylesheet" href="{_script_src(lang, "calculator.css")}">',
        '<p id="calc-status" class="calc-status" data-testid="runtime-status" role="status">'
        f'{html.escape(T(lang, "status_static"))}</p>',
        results_html(result, lang),
        "</div>",
    ])


# --- the rental request page (calculator/request/; request.js assembles the text) ------------------------

REQUEST_FIELDS: tuple[tuple[str, str], ...] = (
    ("model_revision", "text"), ("gated", "bool"), ("examples", "int"), ("term", "text"), ("interruptible", "bool"),
    ("storage_gb", "int"), ("host_ram_gb", "int"), ("region", "text"), ("notes", "textarea"))


def request_html(lang: str) -> str:
    e = html.escape
    parts = ['<form id="req-form" class="calc-form" autocomplete="off" novalidate><fieldset>'
             f"<legend>{e(T(lang, 'r_legend'))}</legend>"]
    for name, kind in REQUEST_FIELDS:
        text = e(T(lang, f"r_{name}"))
        err = f'<span class="calc-error" data-error-for="{name}" data-testid="error-{name}" role="alert"></span>'
        if kind == "bool":
            parts.append(f'<div class="calc-field calc-bool"><label><input type="checkbox" name="{name}" '
                         f'id="req-{name}"> {text}</label>{err}</div>')
        elif kind == "textarea":
            parts.append(f'<div class="calc-field"><label for="req-{name}">{text}</label><textarea name="{name}" '
                         f'id="req-{name}" rows="3"></textarea>{err}</div>')
        else:
            kind_attr = 'type="number" min="0" step="1"' if kind == "int" else 'type="text"'
            parts.append(f'<div class="calc-field"><label for="req-{name}">{text}</label><input {kind_attr} '
                         f'name="{name}" id="req-{name}">{err}</div>')
    parts.append("</fieldset></form>")
    words = {key[3:]: T(lang, key) for key in TEXT if key.startswith("rq_")}
    words.update({key: T(lang, key) for key in ("not_installed", "bad_mime", "timeout", "copied")})
    kinds = {name: {"json": "json", "text": "list"}.get(kind, kind) for name, kind, _ in FIELDS}
    data = json.dumps({"lang": lang, "text": words, "defaults": default_config(), "kinds": kinds},
                      ensure_ascii=False).replace("</", "<\\/")
    return "\n".join([
        f'<div id="req" class="calc" data-lang="{lang}">',
        f'<link rel="stylesheet" href="{_script_src(lang, "calculator.css", 2)}">',
        f'<script type="application/json" id="req-data">{data}</script>',
        f'<p><a id="req-back" href="../">{e(T(lang, "r_back"))}</a></p>',
        '<p id="req-status" class="calc-status" role="status"></p>',
        *parts,
        '<pre id="req-text" class="calc-request" data-testid="request-text"></pre>',
        '<div class="calc-actions">'
        f'<button type="button" class="md-button" id="req-copy" data-needs-request>{e(T(lang, "r_copy"))}</button> '
        f'<button type="button" class="md-button" id="req-download" data-needs-request>{e(T(lang, "r_download"))}'
        '</button> <span id="req-copied" class="calc-copied" role="status"></span></div>',
        f'<script type="module" src="{_script_src(lang, "request.js", 2)}"></script>',
        "</div>",
    ])


# --- words --------------------------------------------------------------------------------------------


def T(lang: str, key: str) -> str:
    values = TEXT.get(key)
    if values is None:
        return key
    return values.get(lang, values["en"])


TEXT: dict[str, dict[str, str]] = {
    "group_model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "group_precision": {"ru": "Метод и точность", "uz": "Usul va aniqlik", "en": "Method and precision"},
    "group_lora": {"ru": "Адаптер LoRA", "uz": "LoRA adapteri", "en": "LoRA adapter"},
    "group_batch": {"ru": "Батч и шаг", "uz": "Batch va qadam", "en": "Batch and step"},
    "group_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "group_time": {"ru": "Время и стоимость", "uz": "Vaqt va narx", "en": "Time and cost"},
    "f_model": {"ru": "Модель из каталога", "uz": "Katalogdagi model", "en": "Catalog model"},
    "f_model_config": {"ru": "Или config.json модели", "uz": "Yoki modelning config.json fayli",
                       "en": "Or the model's config.json"},
    "paste_config": {"ru": "Вставьте содержимое config.json", "uz": "config.json mazmunini qo‘ying",
                     "en": "Paste the contents of config.json"},
    "f_framework": {"ru": "Фреймворк", "uz": "Freymvork", "en": "Framework"},
    "f_method": {"ru": "Метод", "uz": "Usul", "en": "Method"},
    "f_torch_dtype": {"ru": "Тип весов при загрузке", "uz": "Yuklashdagi vazn turi", "en": "Load dtype"},
    "f_bf16": {"ru": "Смешанная точность bf16", "uz": "bf16 aralash aniqlik", "en": "bf16 mixed precision"},
    "f_fp16": {"ru": "Смешанная точность fp16", "uz": "fp16 aralash aniqlik", "en": "fp16 mixed precision"},
    "f_bnb_4bit_quant_type": {"ru": "4-битный формат", "uz": "4-bit format", "en": "4-bit format"},
    "f_bnb_4bit_use_double_quant": {"ru": "Двойное квантование", "uz": "Ikki marta kvantlash",
                                    "en": "Double quantization"},
    "f_bnb_4bit_compute_dtype": {"ru": "Тип вычислений 4-битных слоёв", "uz": "4-bit qatlamlar hisoblash turi",
                                 "en": "4-bit compute dtype"},
    "f_r": {"ru": "Ранг", "uz": "Rang", "en": "Rank"},
    "f_lora_alpha": {"ru": "Альфа", "uz": "Alfa", "en": "Alpha"},
    "f_lora_dropout": {"ru": "Dropout", "uz": "Dropout", "en": "Dropout"},
    "f_target_modules": {"ru": "Целевые модули (all-linear или через запятую)",
                         "uz": "Maqsadli modullar (all-linear yoki vergul bilan)",
                         "en": "Target modules (all-linear or comma-separated)"},
    "f_use_dora": {"ru": "DoRA", "uz": "DoRA", "en": "DoRA"},
    "f_max_seq_length": {"ru": "Длина последовательности", "uz": "Ketma-ketlik uzunligi",
                         "en": "Sequence length"},
    "f_per_device_train_batch_size": {"ru": "Микробатч на GPU", "uz": "GPU uchun mikrobatch",
                                      "en": "Micro-batch per GPU"},
    "f_gradient_accumulation_steps": {"ru": "Накопление градиента", "uz": "Gradiyent yig‘ish",
                                      "en": "Gradient accumulation"},
    "f_packing": {"ru": "Упаковка последовательностей", "uz": "Ketma-ketliklarni zichlash", "en": "Packing"},
    "f_gradient_checkpointing": {"ru": "Контрольные точки градиента", "uz": "Gradiyent nazorat nuqtalari",
                                 "en": "Gradient checkpointing"},
    "f_attn_implementation": {"ru": "Внимание", "uz": "Attention", "en": "Attention"},
    "f_optim": {"ru": "Оптимизатор", "uz": "Optimizator", "en": "Optimizer"},
    "f_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "f_num_gpus": {"ru": "Число GPU", "uz": "GPU soni", "en": "Number of GPUs"},
    "f_parallelism": {"ru": "Параллелизм", "uz": "Parallellik", "en": "Parallelism"},
    "f_dataset_tokens": {"ru": "Токенов в датасете", "uz": "Datasetdagi tokenlar", "en": "Dataset tokens"},
    "f_num_train_epochs": {"ru": "Эпох", "uz": "Epoxalar", "en": "Epochs"},
    "f_price_per_gpu_hour": {"ru": "Цена GPU-часа", "uz": "GPU-soat narxi", "en": "Price per GPU-hour"},
    "status_static": {"ru": "Показан расчёт для настроек по умолчанию; калькулятор загружается…",
                      "uz": "Standart sozlamalar uchun hisob ko‘rsatilgan; kalkulyator yuklanmoqda…",
                      "en": "Showing the default configuration; the calculator is loading…"},
    "status_ready": {"ru": "Калькулятор готов: числа пересчитываются при изменении полей.",
                     "uz": "Kalkulyator tayyor: maydonlar o‘zgarganda raqamlar qayta hisoblanadi.",
                     "en": "The calculator is ready: numbers update as you edit the fields."},
    "status_busy": {"ru": "Пересчёт…", "uz": "Qayta hisoblanmoqda…", "en": "Recomputing…"},
    "status_failed": {"ru": "Калькулятор не загрузился: ", "uz": "Kalkulyator yuklanmadi: ",
                      "en": "The calculator failed to load: "},
    "not_installed": {"ru": "среда выполнения калькулятора не установлена (calculator runtime not installed)",
                      "uz": "kalkulyator muhiti o‘rnatilmagan (calculator runtime not installed)",
                      "en": "calculator runtime not installed"},
    "bad_mime": {"ru": "сервер отдаёт .wasm не как application/wasm", "uz": "server .wasm ni application/wasm "
                 "sifatida bermayapti", "en": "the server does not serve .wasm as application/wasm"},
    "timeout": {"ru": "Pyodide не ответил за 60 с", "uz": "Pyodide 60 s ichida javob bermadi",
                "en": "Pyodide did not answer within 60 s"},
    "no_worker": {"ru": "браузер не поддерживает модульные Web Worker", "uz": "brauzer modul Web Workerni "
                  "qo‘llamaydi", "en": "this browser has no module Web Workers"},
    "download": {"ru": "Скачать конфигурацию JSON", "uz": "Konfiguratsiyani JSON qilib yuklash",
                 "en": "Download the config JSON"},
    "copy_snippet": {"ru": "Копировать код Python", "uz": "Python kodini nusxalash", "en": "Copy the Python snippet"},
    "copy_trial": {"ru": "Копировать команду пробного запуска", "uz": "Sinov buyrug‘ini nusxalash",
                   "en": "Copy the trial command"},
    "copied": {"ru": "Скопировано", "uz": "Nusxalandi", "en": "Copied"},
    "components": {"ru": "Состав пика памяти", "uz": "Xotira cho‘qqisi tarkibi", "en": "What the peak is made of"},
    "time_line": {"ru": "Время обучения:", "uz": "O‘qitish vaqti:", "en": "Training time:"},
    "hours": {"ru": "ч", "uz": "soat", "en": "h"},
    "step": {"ru": "шаг оптимизатора", "uz": "optimizator qadami", "en": "optimizer step"},
    "tps": {"ru": "токенов/с", "uz": "token/s", "en": "tokens/s"},
    "cost": {"ru": "стоимость", "uz": "narx", "en": "cost"},
    "th_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "th_fits": {"ru": "Помещается", "uz": "Sig‘adi", "en": "Fits"},
    "th_headroom": {"ru": "Запас, ГиБ", "uz": "Zaxira, GiB", "en": "Headroom, GiB"},
    "th_batch": {"ru": "Макс. микробатч", "uz": "Maks. mikrobatch", "en": "Max micro-batch"},
    "th_seq": {"ru": "Макс. длина", "uz": "Maks. uzunlik", "en": "Max length"},
    "th_gpus": {"ru": "Мин. число GPU", "uz": "Min. GPU soni", "en": "Fewest GPUs"},
    "th_hours": {"ru": "Часы", "uz": "Soat", "en": "Hours"},
    "th_cost": {"ru": "Стоимость", "uz": "Narx", "en": "Cost"},
    # errors from sizing, by SizingError.code ({field} and the params are filled in by calculator.js)
    "e_wrong_type": {"ru": "Неверный тип значения поля {field}", "uz": "{field} maydoni qiymat turi noto‘g‘ri",
                     "en": "{field} has the wrong type"},
    "e_out_of_range": {"ru": "{field}: допустимо от {min} до {max}", "uz": "{field}: {min} dan {max} gacha bo‘lishi "
                       "kerak", "en": "{field} must be between {min} and {max}"},
    "e_invalid_value": {"ru": "{field}: недопустимое значение", "uz": "{field}: yaroqsiz qiymat",
                        "en": "{field}: not an allowed value"},
    "e_missing_field": {"ru": "Выберите модель или вставьте config.json", "uz": "Model tanlang yoki config.json "
                        "qo‘ying", "en": "Choose a model or paste a config.json"},
    "e_conflict": {"ru": "Несовместимые параметры ({field})", "uz": "Mos kelmaydigan parametrlar ({field})",
                   "en": "Conflicting settings ({field})"},
    "e_rank_too_large": {"ru": "Ранг больше ширины слоя", "uz": "Rang qatlam kengligidan katta",
                         "en": "The rank exceeds the layer width"},
    "e_seq_too_long": {"ru": "Последовательность длиннее, чем поддерживает модель", "uz": "Ketma-ketlik model "
                       "qo‘llaydigandan uzun", "en": "The sequence is longer than the model supports"},
    "e_unknown_field": {"ru": "Неизвестное поле {field}", "uz": "Noma’lum maydon {field}",
                        "en": "Unknown field {field}"},
    "e_unknown_gpu": {"ru": "GPU нет в каталоге", "uz": "GPU katalogda yo‘q", "en": "The GPU is not in the catalog"},
    "e_unknown_model": {"ru": "Модели нет в каталоге", "uz": "Model katalogda yo‘q",
                        "en": "The model is not in the catalog"},
    "e_unknown_target_module": {"ru": "В модели нет такого модуля", "uz": "Modelda bunday modul yo‘q",
                                "en": "The model has no such module"},
    "e_unsupported_architecture": {"ru": "Эта архитектура не поддерживается", "uz": "Bu arxitektura "
                                   "qo‘llab-quvvatlanmaydi", "en": "This architecture is not supported"},
    "e_model_config_invalid": {"ru": "config.json не описывает поддерживаемую модель", "uz": "config.json "
                               "qo‘llanadigan modelni tavsiflamaydi",
                               "en": "The config.json does not describe a supported model"},
    "e_bad_json": {"ru": "Это не JSON", "uz": "Bu JSON emas", "en": "This is not JSON"},
    "e_invalid_config": {"ru": "Конфигурация должна быть объектом JSON", "uz": "Konfiguratsiya JSON obyekti "
                         "bo‘lishi kerak", "en": "The configuration must be a JSON object"},
    "e_internal": {"ru": "Расчёт не удался", "uz": "Hisoblash muvaffaqiyatsiz", "en": "The computation failed"},
    "e_other": {"ru": "Ошибка", "uz": "Xato", "en": "Error"},
    "to_request": {"ru": "Составить запрос на аренду GPU с этой конфигурацией →",
                   "uz": "Ushbu konfiguratsiya bilan GPU ijarasi so‘rovini tuzish →",
                   "en": "Write a GPU rental request with this configuration →"},
    # the rental request page: r_* label the form, rq_* are the words request.js writes
    "r_legend": {"ru": "Что ещё нужно провайдеру", "uz": "Provayderga yana nima kerak",
                 "en": "What else the provider needs"},
    "r_model_revision": {"ru": "Ревизия модели (хеш коммита)", "uz": "Model reviziyasi (commit xeshi)",
                         "en": "Model revision (commit hash)"},
    "r_gated": {"ru": "Модель с ограниченным доступом (gated)", "uz": "Cheklangan kirishli model (gated)",
                "en": "The model is gated"},
    "r_examples": {"ru": "Число примеров", "uz": "Misollar soni", "en": "Number of examples"},
    "r_term": {"ru": "Срок аренды", "uz": "Ijara muddati", "en": "Rental term"},
    "r_interruptible": {"ru": "Допустимы прерывания (spot)", "uz": "Uzilishlar mumkin (spot)",
                        "en": "Interruptions are acceptable (spot)"},
    "r_storage_gb": {"ru": "Локальный диск, ГБ", "uz": "Mahalliy disk, GB", "en": "Local disk, GB"},
    "r_host_ram_gb": {"ru": "Оперативная память хоста, ГБ", "uz": "Xost operativ xotirasi, GB", "en": "Host RAM, GB"},
    "r_region": {"ru": "Регион", "uz": "Mintaqa", "en": "Region"},
    "r_notes": {"ru": "Примечания (без токенов и паролей)", "uz": "Izohlar (tokenlar va parollarsiz)",
                "en": "Notes (no tokens or passwords)"},
    "r_back": {"ru": "← Вернуться в калькулятор с этой конфигурацией", "uz": "← Ushbu konfiguratsiya bilan "
               "kalkulyatorga qaytish", "en": "← Back to the calculator with this configuration"},
    "r_copy": {"ru": "Копировать запрос", "uz": "So‘rovni nusxalash", "en": "Copy the request"},
    "r_download": {"ru": "Скачать запрос (.txt)", "uz": "So‘rovni yuklash (.txt)", "en": "Download the request (.txt)"},
    "rq_title": {"ru": "# Запрос на аренду GPU для дообучения", "uz": "# Qayta o‘qitish uchun GPU ijarasi so‘rovi",
                 "en": "# GPU rental request for fine-tuning"},
    "rq_s_model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "rq_s_method": {"ru": "Метод и настройки обучения", "uz": "Usul va o‘qitish sozlamalari",
                    "en": "Method and training settings"},
    "rq_s_data": {"ru": "Данные и срок", "uz": "Maʼlumotlar va muddat", "en": "Data and term"},
    "rq_s_gpu": {"ru": "GPU и хост", "uz": "GPU va xost", "en": "GPU and host"},
    "rq_s_estimate": {"ru": "Оценка (не измерение; sizing)", "uz": "Baho (o‘lchov emas; sizing)",
                      "en": "Estimate (not a measurement; sizing)"},
    "rq_s_notes": {"ru": "Примечания", "uz": "Izohlar", "en": "Notes"},
    "rq_model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "rq_custom_model": {"ru": "своя (config.json приложен)", "uz": "o‘zimizniki (config.json ilova qilingan)",
                        "en": "custom (config.json attached)"},
    "rq_revision": {"ru": "Ревизия", "uz": "Reviziya", "en": "Revision"},
    "rq_gated": {"ru": "Ограниченный доступ", "uz": "Cheklangan kirish", "en": "Gated"},
    "rq_yes": {"ru": "да", "uz": "ha", "en": "yes"},
    "rq_no": {"ru": "нет", "uz": "yo‘q", "en": "no"},
    "rq_tokens": {"ru": "Токенов в датасете", "uz": "Datasetdagi tokenlar", "en": "Dataset tokens"},
    "rq_examples": {"ru": "Примеров", "uz": "Misollar", "en": "Examples"},
    "rq_epochs": {"ru": "Эпох", "uz": "Epoxalar", "en": "Epochs"},
    "rq_term": {"ru": "Срок", "uz": "Muddat", "en": "Term"},
    "rq_interruptible": {"ru": "Прерывания допустимы", "uz": "Uzilishlar mumkin", "en": "Interruptible"},
    "rq_storage": {"ru": "Диск", "uz": "Disk", "en": "Disk"},
    "rq_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "rq_count": {"ru": "Число GPU", "uz": "GPU soni", "en": "GPU count"},
    "rq_host_ram": {"ru": "ОЗУ хоста", "uz": "Xost xotirasi", "en": "Host RAM"},
    "rq_region": {"ru": "Регион", "uz": "Mintaqa", "en": "Region"},
    "rq_peak_device": {"ru": "Пик по nvidia-smi", "uz": "nvidia-smi bo‘yicha cho‘qqi", "en": "Peak (nvidia-smi)"},
    "rq_peak_reserved": {"ru": "Пик reserved", "uz": "reserved cho‘qqisi", "en": "Peak reserved"},
    "rq_fits": {"ru": "Помещается", "uz": "Sig‘adi", "en": "Fits"},
    "rq_headroom": {"ru": "запас", "uz": "zaxira", "en": "headroom"},
    "rq_throughput": {"ru": "Пропускная способность", "uz": "O‘tkazuvchanlik", "en": "Throughput"},
    "rq_hours": {"ru": "Часов обучения", "uz": "O‘qitish soatlari", "en": "Training hours"},
    "rq_no_estimate": {"ru": "оценка не получена", "uz": "baho olinmadi", "en": "no estimate"},
    "rq_footer": {"ru": "Токены, ключи и пароли в запрос не входят: доступ настраиваю сам после получения машины.",
                  "uz": "Tokenlar, kalitlar va parollar so‘rovga kirmaydi: kirishni mashinani olgach o‘zim sozlayman.",
                  "en": "No tokens, keys or passwords are included: I set up access myself once the machine is mine."},
    "rq_secret": {"ru": "Похоже на секрет (токен, ключ или пароль): в запрос не включается. Удалите его.",
                  "uz": "Maxfiy maʼlumotga o‘xshaydi (token, kalit yoki parol): so‘rovga kiritilmaydi. Uni o‘chiring.",
                  "en": "This looks like a secret (token, key or password): it is refused. Remove it."},
    "rq_refused": {"ru": "Запрос не составлен: уберите секреты из полей:", "uz": "So‘rov tuzilmadi: maydonlardan "
                   "maxfiy maʼlumotlarni olib tashlang:", "en": "No request: remove the secrets from these fields:"},
    "rq_runtime_failed": {"ru": "Оценка недоступна: ", "uz": "Baho mavjud emas: ", "en": "No estimate: "},
}

# --- placeholders -> slots -> HTML ------------------------------------------------------------------------
# The Markdown (and so the page's Markdown copy, llms-full.txt and the search index) gets a slot: empty
# for the forms, the default results as Markdown tables for the results. fill_slots() puts the real HTML
# into the built pages (add_csp, on_post_build), where nothing rewrites it any more.

SLOT = re.compile(r'<div data-calc-slot="(\w+)" data-lang="([\w-]+)"[^>]*>(.*?)</div>', re.S)


def results_markdown(result: dict[str, Any], lang: str) -> str:
    est, gib = result["estimate"], label("gib", lang)
    peak, time = est["peak"], est.get("time") or {}
    lines = [" · ".join([*(f"**{label(k, lang)}**: {fmt_gib(int(peak[f'{k}_bytes']), lang)} {gib}"
                           for k in ("allocated", "reserved", "device")),
                         f"**{label('phase', lang)}**: {label(str(peak['phase']), lang)}"]), "",
             f"| {label('component', lang)} | {gib} |", "|---|---:|"]
    lines += [f"| {label(n, lang)} | {fmt_gib(int(est['components'].get(n, 0)), lang)} |" for n in COMPONENTS]
    lines += ["", f"{T(lang, 'time_line')} {_hours(time.get('total_hours'), lang)} {T(lang, 'hours')}", ""]
    heads = [T(lang, k) for k in ("th_gpu", "th_fits", "th_headroom", "th_batch", "th_seq", "th_gpus", "th_hours")]
    lines += ["| " + " | ".join(heads) + " |", "|---|:-:|---:|---:|---:|---:|---:|"]
    for row in result["fit_table"]:
        t = row.get("time") or {}
        lines.append(f"| {row['name']} | {'✓' if row['fits'] else '✗'} | {fmt_gib(int(row['headroom_bytes']), lang)} "
                     f"| {int(row['max_micro_batch'])} | {fmt_int(int(row['max_seq_length']), lang)} "
                     f"| {int(row['fewest_gpus'] or 0) or '—'} | {_hours(t.get('total_hours'), lang)} |")
    return "\n".join(lines)


def _form_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return f'<div data-calc-slot="form" data-lang="{lang}"></div>'


def _request_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return f'<div data-calc-slot="request" data-lang="{lang}"></div>'


def _results_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return (f'<div data-calc-slot="results" data-lang="{lang}" markdown>\n\n'
            f"{results_markdown(default_result(), lang)}\n\n</div>")


SLOT_HTML: dict[str, Callable[[str], str]] = {"form": form_html, "results": results_block, "request": request_html}


def fill_slots(page: str) -> str:
    """Replace the calculator slots of a built page with their HTML."""
    return SLOT.sub(lambda m: SLOT_HTML[m.group(1)](m.group(2)), page)


sizing_blocks.HANDLERS.setdefault("calculator_form", _form_slot)
sizing_blocks.HANDLERS.setdefault("calculator_results", _results_slot)
sizing_blocks.HANDLERS.setdefault("calculator_request", _request_slot)
