# The calculator links the site itself contains, computed at build time: their first answer, shown at once.
"""A visitor who follows one of the site's own calculator links (GPU pages, guides, the catalog's models at the
form's defaults) sees that configuration's estimate at once instead of waiting for the runtime: the build
computes it with the same `sizing.web.compute_json` the page's worker runs, in each language's words, keyed
by the canonical form of the link (the query the page writes back into its address once the form holds the
link: `form_query`). calculator.js finds the key among `data.prerendered` (FNV-1a hashes in the page),
fetches `assets/calculator/pre/<lang>/<hash>.json` (asked for from the top of <head> when the address is
the link as written), shows it marked as precomputed, and the worker confirms.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import math
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from sitebuild.calculator_pages import FIELDS, GROUPS, default_config, page_words
from sitebuild.pyodide_runtime import CALC_DIR, STDLIB_CACHE
from sizing import web

PRE_DIR = "pre"  # under CALC_DIR
CACHE = STDLIB_CACHE.parent / "prerender"
# An href to the calculator page with a query (not the request page's).
LINK = re.compile(r'href="([^"]*?(?<![\w-])calculator/\?[^"#]*)')
# What <input type="number"> keeps (HTML's "valid floating-point number"); anything else becomes "".
HTML_FLOAT = re.compile(r"-?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?")
# URLSearchParams' serializer (application/x-www-form-urlencoded) leaves these bytes as they are.
_SAFE = frozenset(b"*-._0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

_KIND = {name: {"json": "json", "text": "list"}.get(kind, kind) for name, kind, _ in FIELDS}
ORDER = tuple(name for _, names in GROUPS for name in names)  # the form's fields in page order
_METHODS = next(choices for name, _, choices in FIELDS if name == "method")  # the method select's options


def key_hash(key: str) -> str:
    """FNV-1a (32 bits) over the key's UTF-16 code units, as calculator.js computes it: 8 hex digits."""
    value = 0x811C9DC5
    data = key.encode("utf-16-le")
    for i in range(0, len(data), 2):
        value = ((value ^ (data[i] | data[i + 1] << 8)) * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"


def _urlencode(text: str) -> str:
    return "".join(chr(b) if b in _SAFE else "+" if b == 0x20 else f"%{b:02X}" for b in text.encode("utf-8"))


def _shown(value: Any, kind: str) -> str:
    """A default value as the built form's control holds it (calculator_pages._field_html)."""
    if kind == "tristate":
        return "" if value is None else "true" if value else "false"
    if kind == "bool":
        return "true" if value else "false"
    if value is None:
        return ""
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def form_state(params: Mapping[str, str]) -> dict[str, str] | None:
    """Each field's value once the page has applied this query to its form (calculator.js applyQuery), or
    None for a query whose configuration the build does not compute (a pasted config.json)."""
    defaults = default_config()
    state = {}
    for name in ORDER:
        kind = _KIND[name]
        value = _shown(defaults.get(name), kind)
        if name in params:
            value = params[name]
            if kind == "bool":
                value = "true" if value in ("true", "1") else "false"
            elif kind in ("int", "float"):
                value = value.strip() if HTML_FLOAT.fullmatch(value.strip()) else ""
        if kind == "json" and value.strip():
            return None
        state[name] = value
    adapt(state, params)
    return state


@functools.lru_cache(maxsize=1)
def _limits() -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in web.catalog()["models"]}


def _float(text: str) -> float:
    """JavaScript's Number(text) for what a form field holds ("" is 0; anything else unparsed NaN)."""
    try:
        return float(text.strip() or "0")
    except ValueError:
        return math.nan


def adapt(state: dict[str, str], params: Mapping[str, str]) -> None:
    """What calc_adapt.js does to the form once a link is applied: the model's limits (sizing.web.model_limits)
    for the length and method the link does not give."""
    limits = _limits().get(state.get("model", ""))
    if not limits:
        return
    top = limits.get("max_seq_length")
    if top and "max_seq_length" not in params and _float(state["max_seq_length"]) > top:
        state["max_seq_length"] = str(int(top))
    fixed = limits.get("method")
    if fixed and "method" not in params and state["method"] != fixed and fixed in _METHODS:
        state["method"] = fixed


def form_query(state: Mapping[str, str]) -> str:
    """The query calculator.js writes for this form (toQuery): every field in page order, a config.json only
    when pasted; the key of the prerendered answer."""
    parts = []
    for name in ORDER:
        kind, value = _KIND[name], state[name]
        if kind != "bool" and kind != "select" and kind != "tristate":
            value = value.strip()
        if kind == "json" and not value:
            continue
        parts.append(f"{_urlencode(name)}={_urlencode(value)}")
    return "&".join(parts)


def _number(raw: str) -> int | float:
    value = float(raw)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value  # JSON.stringify writes 16, not 16.0


def form_config(state: Mapping[str, str]) -> dict[str, Any]:
    """The configuration the page sends its worker for this form (calculator.js readForm)."""
    config: dict[str, Any] = {}
    for name in ORDER:
        kind, value = _KIND[name], state[name]
        raw = value.strip()
        if kind == "bool":
            config[name] = value == "true"
        elif kind == "select":
            config[name] = value
        elif kind == "tristate":
            config[name] = None if raw == "" else raw == "true"
        elif kind == "list":
            config[name] = (None if raw == "" else raw if raw == "all-linear"
                            else [s.strip() for s in raw.split(",") if s.strip()])
        elif kind in ("int", "float"):
            config[name] = None if raw == "" else _number(raw)
    return config


def site_queries(site_dir: Path, catalog: bool = True) -> list[tuple[dict[str, str], tuple[str, ...]]]:
    """Every calculator link in the built pages, then each catalog model at the form's defaults: its parameters
    and its query as a link may write it."""
    found: list[tuple[dict[str, str], tuple[str, ...]]] = []
    for page in sorted(site_dir.rglob("*.html")):
        for href in LINK.findall(page.read_text("utf-8")):
            query = html.unescape(href).split("?", 1)[1]
            params: dict[str, str] = {}
            for name, value in parse_qsl(query, keep_blank_values=True):
                params.setdefault(name, value)  # URLSearchParams.get: the first one
            # as written, and as URLSearchParams (or a chat client) writes the same parameters again
            encoded = "&".join(f"{_urlencode(k)}={_urlencode(v)}" for k, v in parse_qsl(query, keep_blank_values=True))
            found.append((params, (query,) if encoded == query else (query, encoded)))
    for model in web.catalog()["models"] if catalog else []:
        found.append(({"model": model["id"]}, (f"model={model['id']}", f"model={_urlencode(model['id'])}")))
    return found


def site_links(site_dir: Path, catalog: bool = True) -> list[dict[str, str]]:
    """The parameters of every calculator link in the built pages, then of each catalog model at the defaults."""
    return [params for params, _ in site_queries(site_dir, catalog)]


def _answers(keys: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """key -> {lang: the worker's first answer (estimate, no fit table) in that language's page words}."""
    out: dict[str, dict[str, str]] = {}
    for key, config in keys.items():
        text = json.dumps(config)
        out[key] = {json.loads(w)["lang"]: web.compute_json(text, False, w) for w in page_words()}
    return out


def _digest(keys: Iterable[str]) -> str:
    """What the answers depend on: the engine's source, the page's words and the keys."""
    h = hashlib.sha256()
    root = Path(web.__file__).resolve().parent
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json"):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    for item in (*page_words(), *sorted(keys)):
        h.update(item.encode("utf-8") + b"\0")
    return h.hexdigest()[:20]


# What a browser keeps as it is in a query (location.search): a raw query with anything else is left to calculator.js.
RAW = re.compile(r"[\w.~!$&'()*+,;=:@/?%-]*")


def write(site_dir: Path, cache: Path = CACHE, catalog: bool = True) -> dict[str, str]:
    """Compute the site's links into site/assets/calculator/pre/<lang>/<hash>.json (cached by what they depend
    on). Returns {hash of a link's query as written: hash of its key}, so that the page can ask for the answer
    from the top of <head> (calculator_slots.boot_script), before its form is even parsed."""
    keys: dict[str, dict[str, Any]] = {}
    raw: dict[str, str] = {}
    default = form_query(form_state({}) or {})
    for params, written in site_queries(site_dir, catalog):
        state = form_state(params)
        if state is not None and (key := form_query(state)) != default:
            keys[key] = form_config(state)
            for text in written:
                if RAW.fullmatch(text):
                    raw[key_hash(text)] = key_hash(key)
    stored = cache / _digest(keys)
    if not stored.is_dir():
        tmp = stored.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for key, answers in _answers(keys).items():
            for lang, answer in answers.items():
                path = tmp / lang / f"{key_hash(key)}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                same = json.loads(path.read_text("utf-8")) if path.is_file() else {}
                path.write_text(json.dumps({**same, key: answer}), "utf-8")  # a hash shared by two keys: both
        tmp.mkdir(parents=True, exist_ok=True)
        if cache.is_dir():
            for old in cache.iterdir():
                if old != tmp:
                    shutil.rmtree(old, ignore_errors=True)  # one build's answers kept, not every build's
        tmp.rename(stored)
    target = site_dir / CALC_DIR / PRE_DIR
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(stored, target)
    for key in keys:
        raw.setdefault(key_hash(key), key_hash(key))  # the page's own address after an edit
    return dict(sorted(raw.items()))
