"""The calculator pages' HTML: the form, the first-paint results and the request page (the slots that place
them in the built pages are calculator_slots.py; the runtime is pyodide_runtime.py, heap_pack.py and
stdlib_trim.py; the results view calculator_results.py; the words calculator_text.py).

* `install_runtime(site_dir)` (on_post_build, once): pyodide_runtime.install_runtime with the form's
  default configuration, so the memory snapshot already holds its answer.
* `form_html`, `results_block`, `request_html`: the form with the contract's field names, the default
  configuration's results computed at build time by the same sizing.web the Web Worker runs, the request
  form; `params_slot` the table of URL parameters.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from sitebuild.calculator_results import results_html, results_markdown
from sitebuild.calculator_text import TEXT, T, words
from sitebuild.pyodide_runtime import (  # re-exported: hooks and tests use them from here
    CALC_DIR,
    NODE_PYODIDE,
    NOT_INSTALLED,
    PYODIDE_DIR,
    RUNTIME_FILES,
    build_wheel,
    csp,
    package_version,
    pyodide_version,
    stdlib_pyc,
    with_csp,
)
from sitebuild.pyodide_runtime import install_runtime as _install_runtime
from sizing import contract, web

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE = ROOT / "examples" / "qlora-llama31-8b.json"


# --- the bridge (the same Python the worker runs) --------------------------------------------------------


def bridge() -> ModuleType:
    """sizing.web, the module the page's worker imports from the wheel (kept for the callers of bridge())."""
    return web


# --- the form -----------------------------------------------------------------------------------------

# (name, kind, choices): kind is select, int, float, bool, tristate, text, json. Order = order on the page. All
# derived from the contract table (sizing/contract.py): a field is on the form when the table gives it a form
# kind. A "tristate" field (bf16, gradient_checkpointing) is a select of the framework's default (null), on, off;
# "choice" is the page's select.
FieldSpec = tuple[str, str, tuple[str, ...]]
_PAGE_KIND = {"choice": "select"}
FIELDS: tuple[FieldSpec, ...] = tuple((f.name, _PAGE_KIND.get(f.form, f.form), f.choices)
                                      for f in contract.FIELDS if f.form is not None)
# The usual LoRA targets of Llama-style models (PEFT's names), offered under the target_modules field.
TARGET_PRESETS = ("all-linear", "q_proj,v_proj", "q_proj,k_proj,v_proj,o_proj",
                  "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (group, tuple(f.name for f in contract.FIELDS if f.group == group)) for group in contract.GROUPS)


def default_config() -> dict[str, Any]:
    """What the form holds before anyone touches it, as the page's JavaScript would send it."""
    example = json.loads(EXAMPLE.read_text("utf-8"))
    config: dict[str, Any] = {}
    for name, kind, _ in FIELDS:
        # a field the example leaves out holds the contract's default, as the form's control shows it
        value = example.get(name, contract.BY_NAME[name].default)
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


def _limit_attrs(model: dict[str, Any]) -> str:
    """The option's data-max-seq / data-method attributes: what the model fixes, when it fixes anything."""
    out = f' data-max-seq="{int(model["max_seq_length"])}"' if model.get("max_seq_length") else ""
    return out + (f' data-method="{html.escape(str(model["method"]))}"' if model.get("method") else "")


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
    if kind == "tristate":  # null = the framework's default (the contract's rule), true, false
        state = "" if value is None else "true" if value else "false"
        opts = "".join(f'<option value="{v}"{" selected" if v == state else ""}>{e(T(lang, word))}</option>'
                       for v, word in (("", "tri_default"), ("true", "tri_on"), ("false", "tri_off")))
        return f'{head}<select name="{name}" id="calc-{name}" data-kind="tristate">{opts}</select>{err}</div>'
    if kind == "select":
        options = choices
        names: dict[str, str] = {}
        if name == "model":
            options = tuple(m["id"] for m in catalog["models"])
        elif name == "gpu":
            options = tuple(g["id"] for g in catalog["gpus"])
            names = {g["id"]: g["name"] for g in catalog["gpus"]}
        elif name == "method":
            names = {m: T(lang, f"method_{m}") for m in options}
        # a catalog model's limits (sizing.web.model_limits) go with its option: the form adapts to them (calc_adapt.js)
        limits = {m["id"]: _limit_attrs(m) for m in catalog["models"]} if name == "model" else {}
        opts = "".join(f'<option value="{e(o)}"{limits.get(o, "")}{" selected" if o == value else ""}>'
                       f'{e(names.get(o, o))}</option>' for o in options)
        # the catalog search only filters the options: it is not a field of the configuration
        search = (f'<input type="search" id="calc-model-search" data-testid="model-search" autocomplete="off" '
                  f'placeholder="{e(T(lang, "search_model"))}" aria-label="{e(T(lang, "search_model"))}">'
                  if name == "model" else "")
        return f'{head}{search}<select name="{name}" id="calc-{name}" data-kind="select">{opts}</select>{err}</div>'
    if kind == "json":
        return (f'{head}<textarea name="{name}" id="calc-{name}" data-kind="json" rows="3" spellcheck="false" '
                f'placeholder="{e(T(lang, "paste_config"))}"></textarea>'
                f'<label class="calc-upload">{e(T(lang, "upload_config"))} <input type="file" '
                'id="calc-model-config-file" data-testid="model-config-file" accept=".json,application/json">'
                f"</label>{err}</div>")
    if kind == "text":
        presets = "".join(f'<option value="{e(p)}"></option>' for p in TARGET_PRESETS)
        return (f'{head}<input type="text" name="{name}" id="calc-{name}" data-kind="list" list="calc-{name}-presets" '
                f'value="{e(_text(value))}"><datalist id="calc-{name}-presets">{presets}</datalist>{err}</div>')
    step = "1" if kind == "int" else "any"
    return (f'{head}<input type="number" name="{name}" id="calc-{name}" data-kind="{kind}" step="{step}" '
            f'min="0" value="{e(_text(value))}">{err}</div>')


def install_runtime(site_dir: Path, node_dir: Path = NODE_PYODIDE,
                    warn: Callable[[str], None] = print) -> dict[str, Any]:
    """pyodide_runtime.install_runtime, with the form's default configuration computed into the snapshot
    (its answers in each language's words, as the page asks for them: sizing.web.remember)."""
    return _install_runtime(site_dir, node_dir, warn, defaults=default_config(), words=page_words())


def page_words() -> list[str]:
    """The words each language's calculator page sends with its requests (JSON texts, as the worker gets them)."""
    return [json.dumps({"lang": lang, "text": words(lang)}) for lang in ("ru", "uz", "en")]


def _script_src(lang: str, name: str, depth: int = 1) -> str:
    depth += 0 if lang == "ru" else 1  # /calculator/ or /uz/calculator/
    return "../" * depth + f"{CALC_DIR}/{name}"


def form_html(lang: str, prerendered: Sequence[str] = ()) -> str:
    """The form; `prerendered` the hashes of the links whose first answer the build computed (prerender.py)."""
    catalog = bridge().catalog()
    defaults = default_config()
    specs = {name: (kind, choices) for name, kind, choices in FIELDS}
    parts = ['<form id="calc-form" class="calc-form" autocomplete="off" novalidate>']
    for group, names in GROUPS:
        parts.append(f'<fieldset><legend>{html.escape(T(lang, group))}</legend>')
        parts += [_field_html(n, *specs[n], defaults.get(n), lang, catalog) for n in names]
        parts.append("</fieldset>")
    parts.append("</form>")
    # the page's words: the calculator's own and the labels of the computed tables (components, phases, units)
    data = json.dumps({"lang": lang, "text": words(lang), "defaults": defaults, "prerendered": list(prerendered)},
                      ensure_ascii=False)
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
        '<div class="calc-actions"><label for="calc-report-file">'
        f'{html.escape(T(lang, "report_import"))}</label> <input type="file" id="calc-report-file" '
        'accept=".json,application/json" data-testid="report-file"></div>',
        '<div id="calc-report-slot"></div>',
        '<p><a id="calc-request" data-testid="request-link" href="request/">'
        f'{html.escape(T(lang, "to_request"))}</a></p>',
        '<p class="calc-error calc-general" data-testid="error-general" id="calc-error-general" role="alert"></p>',
        f'<noscript><p class="calc-status">{html.escape(T(lang, "noscript"))}</p></noscript>',
        # deferred (not async): it runs before DOMContentLoaded, so the page's state is set by then (its modules are
        # preloaded from <head>: calculator_slots.preloads)
        f'<script type="module" src="{_script_src(lang, "calculator.js")}"></script>',
        "</div>",
    ])


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
        f'<progress id="calc-progress" class="calc-progress" max="100" value="0" '
        f'aria-label="{html.escape(T(lang, "status_static"))}"></progress>',
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
    words.update({key: T(lang, key) for key in ("not_installed", "bad_mime", "timeout", "stalled", "error", "http",
                                                "copied")})
    words.update({key: T(lang, key) for key in TEXT if key.startswith("e_")})  # sizing's refusals
    words.update({f"f_{name}": T(lang, f"f_{name}") for name, _, _ in FIELDS})  # a refused field's label
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


# --- the table of URL parameters ([[sizing:calculator_params]], placed by calculator_slots.HANDLERS) -------


def params_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """The URL parameters of the calculator (the contract's names), what each is and its default: a link
    can be written by hand, and a parameter left out takes the default."""
    defaults = default_config()
    head = [T(lang, k) for k in ("p_param", "p_field", "p_default", "p_doc")]
    rows = []
    for name in (spec[0] for spec in FIELDS):
        value = _text(defaults.get(name))
        meaning = contract.doc(name, lang).replace("|", "\\|")  # the contract table's line for this field
        rows.append(f"| `{name}` | {T(lang, f'f_{name}')} | {f'`{value}`' if value else '—'} | {meaning} |")
    return "\n".join(["| " + " | ".join(head) + " |", "|---|---|---|---|", *rows])


__all__ = [
    "CALC_DIR", "EXAMPLE", "NODE_PYODIDE", "NOT_INSTALLED", "PYODIDE_DIR", "RUNTIME_FILES", "TEXT", "T",
    "bridge", "build_wheel", "csp", "default_config", "default_result", "form_html", "install_runtime",
    "package_version", "params_slot", "pyodide_version", "request_html", "results_block", "results_markdown",
    "stdlib_pyc", "with_csp",
]
