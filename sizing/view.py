# The calculator's results as a view model: formatted, translated blocks that a renderer only places.
"""One description of the results for every renderer: the page's JavaScript puts it into the DOM, the site
build renders it as the first paint's HTML and as the Markdown copy. Numbers are formatted and words
translated here; colours are CSS classes (`calc-c-<component>`), styled by calculator.css only.

A view is {"blocks": [...], "pending": [...]}. Each block has a `key` and a `kind`:
- "stats": `items` of {label, text, attrs};
- "text": `parts` of {text, attrs} (inline spans; attrs empty: plain text);
- "bar": `segments` of {x, width, class, title} on a 0..1000 axis, `label` for assistive technology;
- "table": `head` (texts), `rows` of {attrs, cells: [{text, header?, mark?}]}, `align` per column
  ("left", "center", "right"), optional `title`, `note` and `wrap` (class and attrs of a wrapping block);
- "list": `items` of {text, attrs}.
Every block may carry `class` and `attrs` (data-* attributes the tests and the stale logic read).
`pending` names the blocks this answer does not bring (the fit table, computed a moment later; the
"it does not fit" ladder with it, when the run does not fit its GPU).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# The order of the components in the bar and the table (sizing.memory.timeline.COMPONENTS).
from .memory.timeline import COMPONENTS
from .uncertainty import REASONS, reason_text

# The two cards people most often choose between; the page puts them side by side for the configuration.
COMPARED = ("H100-SXM-80GB", "H200-SXM-141GB")
FIT_HEADS = ("th_gpu", "th_fits", "th_headroom", "th_batch", "th_seq", "th_gpus", "th_hours", "th_cost")
FIT_ALIGN = ("left", "center", "right", "right", "right", "right", "right", "right")
TABLE_BLOCKS = ("compare", "fit")  # the blocks that need the fit table
LADDER_HEADS = ("ladder_lever", "ladder_change", "ladder_saves", "ladder_after", "th_fits", "ladder_time",
                "ladder_gpu_hours")
LADDER_ALIGN = ("left", "left", "right", "right", "center", "right", "right")
# Fields a rung sets that follow from another one it shows (QLoRA's load_in_4bit, its compute dtype).
LADDER_IMPLIED = ("load_in_4bit", "bnb_4bit_compute_dtype")

View = dict[str, Any]
Words = Mapping[str, str]  # key -> text in the page's language


def _group(digits: str, sep: str) -> str:
    out: list[str] = []
    while len(digits) > 3:
        out.insert(0, digits[-3:])
        digits = digits[:-3]
    out.insert(0, digits)
    return sep.join(out)


def fmt_num(value: float, lang: str, decimals: int) -> str:
    """Thousands and decimal separators of the language: 1 234,5 (ru, uz) or 1,234.5 (en)."""
    text = f"{abs(value):.{decimals}f}"
    whole, _, frac = text.partition(".")
    thousands, point = (",", ".") if lang == "en" else ("\u00a0", ",")
    out = _group(whole, thousands) + (point + frac if frac else "")
    return ("−" if value < 0 else "") + out


def fmt_int(value: int, lang: str) -> str:
    """An integer with the language's thousands separator."""
    return fmt_num(value, lang, 0)


def fmt_gib(value: int | float, lang: str) -> str:
    """Bytes as GiB with two decimals."""
    return fmt_num(value / 2**30, lang, 2)


def fill(template: str, params: Mapping[str, Any]) -> str:
    """`{name}` placeholders of a template filled in; unknown names stay as written."""
    return re.sub(r"\{(\w+)\}", lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), template)


def warning_text(warning: Mapping[str, Any], words: Words, lang: str) -> str:
    """A sizing warning in the page's language: its template by code, the parameters filled in (`bytes`
    as {gib}); the English message of the command line for a code the page has no words for."""
    params = dict(warning.get("params") or {})
    template = words.get(f"w_{warning.get('code')}")
    if template is None:
        return str(warning.get("message", ""))
    if isinstance(params.get("bytes"), int):
        params["gib"] = fmt_gib(params["bytes"], lang)
    return fill(template, params)


def _opt(value: Any, lang: str, decimals: int) -> str:
    return "—" if value is None else fmt_num(float(value), lang, decimals)


def _peaks(est: Mapping[str, Any], w: Words, lang: str) -> View:
    peak = est["peak"]
    items = [{"label": w.get(key, key), "text": f"{fmt_gib(int(peak[f'{key}_bytes']), lang)} {w.get('gib', 'GiB')}",
              "attrs": {"data-testid": f"peak-{key}", "data-bytes": int(peak[f"{key}_bytes"])}}
             for key in ("allocated", "reserved", "device")]
    phase = str(peak["phase"])
    items.append({"label": w.get("phase", "phase"), "text": w.get(phase, phase),
                  "attrs": {"data-testid": "peak-phase", "data-phase": phase}})
    return {"key": "peaks", "kind": "stats", "class": "calc-peaks", "attrs": {}, "items": items}


def _uncertainty(est: Mapping[str, Any], w: Words, lang: str) -> View:
    unc = est["uncertainty"]
    low, high, conf = int(unc["reserved_low_bytes"]), int(unc["reserved_high_bytes"]), str(unc["confidence"])
    text = (f"{w.get('range', 'range')}: {fmt_gib(low, lang)}–{fmt_gib(high, lang)} {w.get('gib', 'GiB')}; "
            f"{w.get('confidence', 'confidence')}: {w.get('conf_' + conf, conf)}")
    # why the label is not higher, in the page's language (sizing/uncertainty.py REASONS)
    why = [reason_text(str(r["code"]), lang, r.get("params", {}).get("error"))
           for r in unc.get("reasons", []) if r.get("code") in REASONS]
    text += "".join(f"; {x}" for x in why)
    ample = est.get("detail", {}).get("ample_reserved_bytes")
    if isinstance(ample, int) and ample != int(est["peak"]["reserved_bytes"]):  # reserved stopped at the card's wall
        text += f"; {w.get('ample', 'a larger card reserves')} {fmt_gib(ample, lang)} {w.get('gib', 'GiB')}"
    return {"key": "uncertainty", "kind": "text", "class": "calc-uncertainty",
            "attrs": {"data-testid": "uncertainty", "data-confidence": conf, "data-low": low, "data-high": high},
            "parts": [{"text": text, "attrs": {}}]}


def _bar(components: Mapping[str, int], w: Words, lang: str) -> View:
    total = sum(components.values()) or 1
    x, segments = 0.0, []
    for name in COMPONENTS:
        width = 1000 * components.get(name, 0) / total
        if width <= 0:
            continue
        title = f"{w.get(name, name)}: {fmt_gib(components[name], lang)} {w.get('gib', 'GiB')}"
        segments.append({"x": round(x, 2), "width": round(width, 2), "class": f"calc-c-{name}", "title": title})
        x += width
    return {"key": "bar", "kind": "bar", "class": "calc-bar", "attrs": {"data-testid": "bar"},
            "label": w.get("components", "components"), "segments": segments}


def _components(components: Mapping[str, int], w: Words, lang: str) -> View:
    rows = [{"attrs": {"data-testid": f"component-{name}", "data-bytes": int(components.get(name, 0))},
             "cells": [{"text": w.get(name, name), "mark": f"calc-swatch calc-c-{name}"},
                       {"text": fmt_gib(int(components.get(name, 0)), lang)}]} for name in COMPONENTS]
    return {"key": "components", "kind": "table", "class": "calc-components", "attrs": {"data-testid": "components"},
            "head": [w.get("component", "component"), w.get("gib", "GiB")], "align": ["left", "right"], "rows": rows}


def _time(est: Mapping[str, Any], w: Words, lang: str) -> View:
    time = est.get("time") or {}

    def span(testid: str, text: str) -> dict[str, Any]:
        return {"text": text, "attrs": {"data-testid": testid}}

    def plain(text: str) -> dict[str, Any]:
        return {"text": text, "attrs": {}}

    def rng(key: str, digits: int) -> str:
        """" (low–high)" of a time figure from the estimate's range (sizing/throughput.py), or "" without one."""
        pair = (time.get("range") or {}).get(key)
        return "" if not pair else f" ({fmt_num(float(pair[0]), lang, digits)}–{fmt_num(float(pair[1]), lang, digits)})"

    parts = [plain(f"{w.get('time_line', '')} "), span("total-hours", _opt(time.get("total_hours"), lang, 1)),
             span("total-hours-range", rng("total_hours", 1)), plain(f" {w.get('hours', 'h')}")]
    if time.get("evaluation_hours") is not None:  # inside total_hours: the Trainer's evaluation passes
        parts += [plain(f", {w.get('eval_hours', 'evaluation')} "),
                  span("evaluation-hours", _opt(time.get("evaluation_hours"), lang, 2)),
                  plain(f" {w.get('hours', 'h')}")]
    parts += [plain(f"; {w.get('step', 'step')} "),
              span("step-seconds", _opt(time.get("step_seconds"), lang, 1)), plain(f" s; {w.get('tps', 'tokens/s')} "),
              span("tokens-per-second", fmt_int(round(time.get("tokens_per_second") or 0), lang)),
              plain(f"; {w.get('cost', 'cost')} "), span("cost", _opt(time.get("cost"), lang, 2)),
              span("cost-range", rng("cost", 2))]
    return {"key": "time", "kind": "text", "class": "calc-time", "attrs": {"data-testid": "time"}, "parts": parts}


def _warnings(est: Mapping[str, Any], w: Words, lang: str) -> View:
    items = [{"text": warning_text(x, w, lang), "attrs": {"data-code": str(x.get("code"))}}
             for x in est.get("warnings") or []]
    return {"key": "warnings", "kind": "list", "class": "calc-warnings", "attrs": {"data-testid": "warnings"},
            "items": items}


def _compare(table: Sequence[Mapping[str, Any]], w: Words, lang: str) -> View:
    by_id = {row["gpu"]: row for row in table}
    rows = [by_id[gpu] for gpu in COMPARED if gpu in by_id]

    def time(r: Mapping[str, Any], key: str) -> Any:
        return (r.get("time") or {}).get(key)

    lines: list[tuple[str, list[str]]] = [
        ("capacity", [f"{fmt_gib(int(r['usable_bytes']), lang)} {w.get('gib', 'GiB')}" for r in rows]),
        ("th_fits", [_fits_mark(r, w) for r in rows]),
        ("th_headroom", [fmt_gib(int(r["headroom_bytes"]), lang) for r in rows]),
        ("th_batch", [_searched(r, "max_micro_batch", lang) for r in rows]),
        ("th_seq", [_searched(r, "max_seq_length", lang) for r in rows]),
        ("th_gpus", [str(int(r["fewest_gpus"] or 0) or "—") for r in rows]),
        ("tokens_per_second", [fmt_int(round(time(r, "tokens_per_second") or 0), lang) for r in rows]),
        ("th_hours", [_opt(time(r, "total_hours"), lang, 1) for r in rows]),
        ("th_cost", [_opt(time(r, "cost"), lang, 2) for r in rows]),
    ]
    body = [{"attrs": {"data-row": key}, "cells": [{"text": w.get(key, key), "header": True},
                                                   *({"text": v} for v in values)]} for key, values in lines]
    return {"key": "compare", "kind": "table", "class": "", "attrs": {},
            "wrap": {"class": "calc-compare", "attrs": {"data-testid": "compare"}},
            "title": w.get("compare_title", ""), "note": w.get("compare_note", ""),
            "head": ["", *(str(r["name"]) for r in rows)], "align": ["left", *("right" for _ in rows)], "rows": body}


def _searched(row: Mapping[str, Any], key: str, lang: str) -> str:
    """A fit-table row's largest micro-batch or longest sequence; "…" while its search is still to come (a table
    without searches: solve.fit_table(searches=False))."""
    if key not in row:
        return "…"
    return fmt_int(int(row[key]), lang) if key == "max_seq_length" else str(int(row[key]))


def _fits_mark(row: Mapping[str, Any], w: Words) -> str:
    """✓ / ✗, and why a card is refused whatever the memory (no bf16: its headroom alone would say it fits)."""
    if row.get("refusal") == "gpu_no_bf16":
        return w.get("fit_no_bf16", "✗ no bf16")
    return "✓" if row["fits"] else "✗"


def _fit(table: Sequence[Mapping[str, Any]], w: Words, lang: str) -> View:
    rows = []
    for row in table:
        t = row.get("time") or {}
        cells = [str(row["name"]), _fits_mark(row, w), fmt_gib(int(row["headroom_bytes"]), lang),
                 _searched(row, "max_micro_batch", lang), _searched(row, "max_seq_length", lang),
                 str(int(row["fewest_gpus"] or 0) or "—"), _opt(t.get("total_hours"), lang, 1),
                 _opt(t.get("cost"), lang, 2)]
        rows.append({"attrs": {"data-testid": f"fit-{row['gpu']}", "data-fits": str(bool(row["fits"])).lower(),
                               "data-headroom": int(row["headroom_bytes"])},
                     "cells": [{"text": text} for text in cells]})
    return {"key": "fit", "kind": "table", "class": "calc-fit", "attrs": {"data-testid": "fit-table"},
            "wrap": {"class": "calc-fit-wrap", "attrs": {}}, "note": w.get("fit_note", ""),
            "head": [w.get(h, h) for h in FIT_HEADS],
            "align": list(FIT_ALIGN), "rows": rows}


def own_gpu_fits(est: Mapping[str, Any]) -> bool:
    """Whether the estimate fits the GPU its configuration names (True when it names none)."""
    gpu = (est.get("config") or {}).get("gpu")
    return all(bool(f["fits"]) for f in est.get("fits") or [] if f.get("gpu") == gpu)


def _ladder_factor(value: Any, w: Words, lang: str) -> str:
    if value is None:
        return "—"
    if abs(float(value) - 1.0) < 0.0005:  # the time model sees no difference at two decimals
        return w.get("ladder_same", "=")
    return "×" + fmt_num(float(value), lang, 2)


def _ladder(lad: Mapping[str, Any], w: Words, lang: str) -> View:
    """sizing.ladder's rungs as a table: each lever on top of the rows above, the GiB it saves, the peak
    after it, whether it then fits, and its time and GPU-hours per token against the row before."""
    start = (f"{w.get('ladder_start', 'start')} ({lad['gpu']}, {w.get('ladder_usable', 'usable')} "
             f"{fmt_gib(int(lad['usable_bytes']), lang)} {w.get('gib', 'GiB')})")
    rows = [{"attrs": {"data-testid": "ladder-start", "data-fits": str(bool(lad["fits"])).lower(),
                       "data-reserved": int(lad["reserved_bytes"])},
             "cells": [{"text": start, "header": True}, {"text": "—"}, {"text": "—"},
                       {"text": fmt_gib(int(lad["reserved_bytes"]), lang)}, {"text": "✓" if lad["fits"] else "✗"},
                       {"text": "—"}, {"text": "—"}]}]
    for rung in lad["rungs"]:
        change = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                           for k, v in rung["change"].items() if k not in LADDER_IMPLIED)
        cells = [w.get(f"ladder_{rung['lever']}", rung["lever"]), change, fmt_gib(int(rung["saved_bytes"]), lang),
                 fmt_gib(int(rung["reserved_bytes"]), lang), "✓" if rung["fits"] else "✗",
                 _ladder_factor(rung["time_factor"], w, lang), _ladder_factor(rung["gpu_hours_factor"], w, lang)]
        rows.append({"attrs": {"data-testid": f"ladder-{rung['lever']}", "data-fits": str(bool(rung["fits"])).lower(),
                               "data-saved": int(rung["saved_bytes"]), "data-reserved": int(rung["reserved_bytes"])},
                     "cells": [{"text": text} for text in cells]})
    fits_somewhere = any(r["fits"] for r in lad["rungs"])
    note = w.get("ladder_note", "") + ("" if fits_somewhere else " " + w.get("ladder_never", ""))
    return {"key": "ladder", "kind": "table", "class": "calc-ladder", "attrs": {"data-testid": "ladder"},
            "wrap": {"class": "calc-ladder-wrap", "attrs": {}}, "title": w.get("ladder_title", ""),
            "note": note.strip(), "head": [w.get(h, h) for h in LADDER_HEADS], "align": list(LADDER_ALIGN),
            "rows": rows}


def results_view(result: Mapping[str, Any], words: Words, lang: str) -> View:
    """The view of one ok compute() answer: peaks, range, bar, components, time, warnings, then the
    H100/H200 comparison and the fit table (pending when the answer has no fit table yet), and when the run
    does not fit its GPU the ladder of what to change (computed with the fit table, pending with it)."""
    est, table, lad = result["estimate"], result.get("fit_table"), result.get("ladder")
    comps = est["components"]
    blocks = [_peaks(est, words, lang), _uncertainty(est, words, lang), _bar(comps, words, lang),
              _components(comps, words, lang), _time(est, words, lang), _warnings(est, words, lang)]
    if table is not None:
        blocks += [_compare(table, words, lang), _fit(table, words, lang)]
    if lad is not None and not lad["fits"]:
        blocks.append(_ladder(lad, words, lang))
    pending = [] if table is not None else list(TABLE_BLOCKS)
    searched = table is not None and all("max_micro_batch" in row for row in table)
    if not searched and not own_gpu_fits(est):  # the ladder comes with the table's searches
        pending.append("ladder")
    return {"blocks": blocks, "pending": pending}
