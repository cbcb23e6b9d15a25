"""The calculator's results as the build renders them: the first paint of the page (HTML; calculator.js
renders the same structure for every later answer) and the Markdown of the page's copy."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from sitebuild.calculator_text import T
from sitebuild.sizing_labels import fmt_gib, fmt_int, fmt_num, label
from sizing.memory.timeline import COMPONENTS

BAR_COLORS = {"weights": "#3f51b5", "quantization_state": "#7986cb", "adapters": "#009688", "gradients": "#4caf50",
              "optimizer_states": "#ff9800", "master_weights": "#795548", "activations": "#e91e63",
              "logits_and_loss": "#9c27b0", "workspace": "#607d8b"}
# The two cards people most often choose between; the page puts them side by side for the configuration.
COMPARED = ("H100-SXM-80GB", "H200-SXM-141GB")
FIT_HEADS = ("th_gpu", "th_fits", "th_headroom", "th_batch", "th_seq", "th_gpus", "th_hours", "th_cost")


def warning_text(warning: Mapping[str, Any], lang: str) -> str:
    """A sizing warning in the page's language: its template by code, the parameters filled in (`bytes`
    as {gib}); the English message of the command line for a code the page does not know."""
    params = dict(warning.get("params") or {})
    template = T(lang, f"w_{warning.get('code')}")
    if template.startswith("w_"):
        return str(warning.get("message", ""))
    if isinstance(params.get("bytes"), int):
        params["gib"] = fmt_gib(params["bytes"], lang)
    return re.sub(r"\{(\w+)\}", lambda m: str(params.get(m.group(1), m.group(0))), template)


def _bar(components: Mapping[str, int], lang: str) -> str:
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


def _cost(value: Any, lang: str) -> str:
    return "—" if value is None else fmt_num(float(value), lang, 2)


def _uncertainty(est: Mapping[str, Any], lang: str) -> str:
    unc = est["uncertainty"]
    low, high = int(unc["reserved_low_bytes"]), int(unc["reserved_high_bytes"])
    conf = str(unc["confidence"])
    return (f'<p class="calc-uncertainty" data-testid="uncertainty" data-confidence="{html.escape(conf)}" '
            f'data-low="{low}" data-high="{high}">{html.escape(T(lang, "range"))}: {fmt_gib(low, lang)}–'
            f'{fmt_gib(high, lang)} {label("gib", lang)}; {html.escape(T(lang, "confidence"))}: '
            f'{html.escape(T(lang, "conf_" + conf))}</p>')


def compare_rows(table: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    by_id = {row["gpu"]: row for row in table}
    return [by_id[gpu] for gpu in COMPARED if gpu in by_id]


def compare_html(table: list[Mapping[str, Any]], lang: str) -> str:
    """H100 and H200 side by side: what each allows for this configuration."""
    e = html.escape
    rows = compare_rows(table)
    lines: list[tuple[str, list[str]]] = [
        ("capacity", [fmt_gib(int(r["usable_bytes"]), lang) + " " + label("gib", lang) for r in rows]),
        ("th_fits", ["✓" if r["fits"] else "✗" for r in rows]),
        ("th_headroom", [fmt_gib(int(r["headroom_bytes"]), lang) for r in rows]),
        ("th_batch", [str(int(r["max_micro_batch"])) for r in rows]),
        ("th_seq", [fmt_int(int(r["max_seq_length"]), lang) for r in rows]),
        ("th_gpus", [str(int(r["fewest_gpus"] or 0) or "—") for r in rows]),
        ("tokens_per_second", [fmt_int(round((r.get("time") or {}).get("tokens_per_second") or 0), lang)
                               for r in rows]),
        ("th_hours", [_hours((r.get("time") or {}).get("total_hours"), lang) for r in rows]),
        ("th_cost", [_cost((r.get("time") or {}).get("cost"), lang) for r in rows]),
    ]
    head = "".join(f"<th>{e(str(r['name']))}</th>" for r in rows)
    body = "".join(f'<tr data-row="{key}"><th scope="row">{e(T(lang, key))}</th>'
                   + "".join(f"<td>{e(v)}</td>" for v in values) + "</tr>" for key, values in lines)
    return (f'<div class="calc-compare" data-testid="compare"><h3>{e(T(lang, "compare_title"))}</h3>'
            f'<table><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'
            f'<p class="calc-note">{e(T(lang, "compare_note"))}</p></div>')


def results_html(result: Mapping[str, Any], lang: str) -> str:
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
    out.append(_uncertainty(est, lang))
    out.append(_bar(comps, lang))
    out.append(f'<table class="calc-components" data-testid="components"><thead><tr><th>{e(label("component", lang))}'
               f"</th><th>{gib}</th></tr></thead><tbody>")
    for name in COMPONENTS:
        value = int(comps.get(name, 0))
        out.append(f'<tr data-testid="component-{name}" data-bytes="{value}"><td><span class="calc-swatch" '
                   f'data-color="{name}"></span>{e(label(name, lang))}</td><td>{fmt_gib(value, lang)}</td></tr>')
    out.append("</tbody></table>")
    out.append(f'<p class="calc-time" data-testid="time">{e(T(lang, "time_line"))} '
               f'<span data-testid="total-hours">{_hours(time.get("total_hours"), lang)}</span> {e(T(lang, "hours"))}; '
               f'{e(T(lang, "step"))} <span data-testid="step-seconds">{_hours(time.get("step_seconds"), lang)}</span> '
               f's; {e(T(lang, "tps"))} <span data-testid="tokens-per-second">'
               f'{fmt_int(round(time.get("tokens_per_second") or 0), lang)}</span>; {e(T(lang, "cost"))} '
               f'<span data-testid="cost">{_cost(time.get("cost"), lang)}</span></p>')
    out.append('<ul class="calc-warnings" data-testid="warnings">'
               + "".join(f'<li data-code="{e(str(w.get("code")))}">{e(warning_text(w, lang))}</li>'
                         for w in est.get("warnings") or []) + "</ul>")
    out.append(compare_html(table, lang))
    out.append('<div class="calc-fit-wrap"><table class="calc-fit" data-testid="fit-table"><thead><tr>'
               + "".join(f"<th>{e(T(lang, h))}</th>" for h in FIT_HEADS) + "</tr></thead><tbody>")
    for row in table:
        t = row.get("time") or {}
        out.append(f'<tr data-testid="fit-{e(str(row["gpu"]))}" data-fits="{str(bool(row["fits"])).lower()}" '
                   f'data-headroom="{int(row["headroom_bytes"])}"><td>{e(str(row["name"]))}</td>'
                   f'<td>{"✓" if row["fits"] else "✗"}</td><td>{fmt_gib(int(row["headroom_bytes"]), lang)}</td>'
                   f'<td>{int(row["max_micro_batch"])}</td><td>{fmt_int(int(row["max_seq_length"]), lang)}</td>'
                   f'<td>{int(row["fewest_gpus"] or 0) or "—"}</td><td>{_hours(t.get("total_hours"), lang)}</td>'
                   f'<td>{_cost(t.get("cost"), lang)}</td></tr>')
    out.append("</tbody></table></div></div>")
    return "".join(out)


def results_markdown(result: Mapping[str, Any], lang: str) -> str:
    """The default configuration's results in the page's Markdown copy (and so llms-full.txt, search)."""
    est, gib = result["estimate"], label("gib", lang)
    peak, time = est["peak"], est.get("time") or {}
    unc = est["uncertainty"]
    lines = [" · ".join([*(f"**{label(k, lang)}**: {fmt_gib(int(peak[f'{k}_bytes']), lang)} {gib}"
                           for k in ("allocated", "reserved", "device")),
                         f"**{label('phase', lang)}**: {label(str(peak['phase']), lang)}"]), "",
             f"{T(lang, 'range')}: {fmt_gib(int(unc['reserved_low_bytes']), lang)}–"
             f"{fmt_gib(int(unc['reserved_high_bytes']), lang)} {gib}; {T(lang, 'confidence')}: "
             f"{T(lang, 'conf_' + str(unc['confidence']))}", "",
             f"| {label('component', lang)} | {gib} |", "|---|---:|"]
    lines += [f"| {label(n, lang)} | {fmt_gib(int(est['components'].get(n, 0)), lang)} |" for n in COMPONENTS]
    lines += ["", f"{T(lang, 'time_line')} {_hours(time.get('total_hours'), lang)} {T(lang, 'hours')}", ""]
    lines += [f"- {warning_text(w, lang)}" for w in est.get("warnings") or []]
    heads = [T(lang, k) for k in FIT_HEADS[:-1]]
    lines += ["", "| " + " | ".join(heads) + " |", "|---|:-:|---:|---:|---:|---:|---:|"]
    for row in result["fit_table"]:
        t = row.get("time") or {}
        lines.append(f"| {row['name']} | {'✓' if row['fits'] else '✗'} | {fmt_gib(int(row['headroom_bytes']), lang)} "
                     f"| {int(row['max_micro_batch'])} | {fmt_int(int(row['max_seq_length']), lang)} "
                     f"| {int(row['fewest_gpus'] or 0) or '—'} | {_hours(t.get('total_hours'), lang)} |")
    return "\n".join(lines)
