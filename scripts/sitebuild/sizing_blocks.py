"""Build-time numbers for the pages: `[[sizing:...]]` placeholders replaced by what `sizing` computes.

Inline: lora_params, lora_bytes, estimate FIELD, gpu_memory. Blocks (alone on a line): breakdown,
compare, gpu_specs, gpu_fit_table, gpu_context_chart, gpu_index, compare_gpus, accuracy_tables,
accuracy_chart. Arguments are `key=value`; values are JSON when they parse, strings otherwise.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import validate  # scripts/validate.py: the accuracy benchmark whose scores the accuracy pages show
from sitebuild import accuracy_sources, cost_block, gpu_facts, gpu_verdict
from sitebuild.ladder_block import fits_word, ladder_block
from sitebuild.quick_answer import quick_answer
from sitebuild.sizing_labels import LABELS, fmt_bytes, fmt_gib, fmt_int, fmt_num, interconnect, label
from sitebuild.sizing_svg import line_chart, scatter_chart
from sizing import SizingError, estimate
from sizing.arch import ATTN_IN, Linear
from sizing.catalog import find_gpu, gpus
from sizing.contract import parse_value
from sizing.estimate import usable_bytes
from sizing.memory.adapters import lora_params
from sizing.memory.timeline import COMPONENTS

# Arguments may hold JSON lists: target_modules=["q_proj","v_proj"]
PLACEHOLDER = re.compile(r"\[\[sizing:(\w+)((?:[ \t]+(?:[^\[\]\s]|\[[^\]\s]*\])+)*)[ \t]*\]\]")
GiB = 2**30
# Reference runs of the GPU pages: widely fine-tuned models, LoRA in bf16 and QLoRA in NF4, all-linear
# r = 16, checkpointing on, packed sequences: the setup most rental questions are about.
REFERENCE_MODELS = ("meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-14B", "Qwen/Qwen3-32B",
                    "meta-llama/Llama-3.3-70B-Instruct")
REFERENCE_METHODS: dict[str, dict[str, Any]] = {
    "lora": {"method": "lora", "torch_dtype": "bfloat16"},
    "qlora": {"method": "qlora", "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
              "bnb_4bit_compute_dtype": "bfloat16"},
}
REFERENCE_BASE: dict[str, Any] = {"bf16": True, "r": 16, "lora_alpha": 32, "target_modules": "all-linear",
                                  "per_device_train_batch_size": 1, "gradient_checkpointing": True, "packing": True,
                                  "optim": "adamw_torch_fused"}
CONTEXTS = (2048, 8192, 32768)
CHART_CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


@functools.lru_cache(maxsize=4096)
def _cached(key: str) -> Any:
    return estimate(json.loads(key))


def _estimate_of(config: dict[str, Any]) -> Any:
    """estimate() for a configuration, computed once per build: the same runs recur across the three
    languages and across tables."""
    return _cached(json.dumps(config, sort_keys=True))


def parse_args(text: str) -> tuple[list[str], dict[str, Any]]:
    words: list[str] = []
    kwargs: dict[str, Any] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep:
            words.append(token)
            continue
        kwargs[key] = parse_value(key, value)  # the CLI's --set parser: by the field's type in the contract
    return words, kwargs


def _lora(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return fmt_int(lora_params(Linear("x", int(kw["in"]), int(kw["out"]), ATTN_IN), int(kw["r"]), False), lang)


def _lora_bytes(_: list[str], kw: dict[str, Any], lang: str) -> str:
    size = {"bfloat16": 2, "float16": 2, "float32": 4}[kw.get("dtype", "bfloat16")]
    n = lora_params(Linear("x", int(kw["in"]), int(kw["out"]), ATTN_IN), int(kw["r"]), False)
    return fmt_bytes(n * size, lang)


def _estimate(words: list[str], kw: dict[str, Any], lang: str) -> str:
    field = words[0]
    est = _estimate_of(kw)
    if field in ("tokens_per_second", "step_seconds"):
        if est.time is None:
            raise SizingError("no_time", f"no throughput figures for {kw.get('gpu')}")
        return fmt_num(est.time[field], lang, 0 if field == "tokens_per_second" else 2)
    value = getattr(est, f"{field}_bytes") if field in ("allocated", "reserved", "device") else est.components[field]
    return fmt_gib(value, lang)


def _gpu_memory(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return fmt_gib(find_gpu(str(kw["gpu"])).memory_bytes, lang)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _breakdown(_: list[str], kw: dict[str, Any], lang: str) -> str:
    est = _estimate_of(kw)
    rows = [[label(c, lang), fmt_gib(est.components[c], lang)] for c in COMPONENTS]
    rows += [[f"**{label(k, lang)}**", f"**{fmt_gib(getattr(est, k + '_bytes'), lang)}**"]
             for k in ("allocated", "reserved", "device")]
    rows.append([label("phase", lang), label(est.peak_moment.phase, lang)])
    return _table([label("component", lang), label("gib", lang)], rows)


def _compare(_: list[str], kw: dict[str, Any], lang: str) -> str:
    field, _sep, values = str(kw.pop("vary")).partition(":")
    rows: list[list[str]] = []
    for raw in values.split(","):
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        est = _estimate_of({**kw, field: value})
        fit = est.fits[0] if est.fits else None
        tps = fmt_num(est.time["tokens_per_second"], lang, 0) if est.time else "—"
        rows.append([f"`{raw}`", fmt_gib(est.allocated_bytes, lang), fmt_gib(est.reserved_bytes, lang),
                     label(est.peak_moment.phase, lang), label("yes" if fit and fit["fits"] else "no", lang), tps])
    header = [f"`{field}`", label("allocated", lang), label("reserved", lang), label("phase", lang),
              label("fits", lang), label("tokens_per_second", lang)]
    # The configuration the column varies from, stated under every table (defaults fill what is not named).
    base = ", ".join(f"`{k}={v if isinstance(v, str) else json.dumps(v)}`" for k, v in kw.items())
    return _table(header, rows) + f"\n\n*{label('base_config', lang)}:* {base}"


def _gpu_specs(_: list[str], kw: dict[str, Any], lang: str) -> str:
    gpu = find_gpu(str(kw["gpu"]))
    rec = gpu.record
    yes_no = {True: label("yes", lang), False: label("no", lang), None: "?", "partial": label("partial", lang)}
    rows = [
        [label("reported_name", lang), f"`{rec.get('reported_name', gpu.name)}`"],
        [label("architecture", lang), f"{rec.get('architecture', '')} · sm {gpu.compute_capability}"],
        [label("memory_smi", lang), fmt_gib(gpu.memory_bytes, lang) + " " + label("gib_unit", lang)],
        [label("memory_cuda", lang), fmt_gib(gpu.usable_bytes, lang) + " " + label("gib_unit", lang)],
        [label("capacity", lang), fmt_gib(usable_bytes(gpu), lang) + " " + label("gib_unit", lang)],
        [label("bandwidth", lang), fmt_num(gpu.memory_bandwidth_GBps or 0, lang, 0) + " " + label("gbps_unit", lang)],
        [label("bf16_tflops", lang), fmt_num(gpu.bf16_dense_tflops, lang, 1) if gpu.bf16_dense_tflops else "—"],
        [label("interconnect", lang), interconnect(str(rec.get("interconnect", "—")), lang)],
    ]
    for key in ("bf16", "flash_attention_2", "bitsandbytes"):
        rows.append([label(key, lang), yes_no.get(gpu.supports.get(key), "?")])
    return _table([label("spec", lang), label("value", lang)], rows)


def _reference_run(model: str, method: str, seq: int, gpu_id: str) -> dict[str, Any]:
    return {**REFERENCE_BASE, **REFERENCE_METHODS[method], "model": model, "max_seq_length": seq, "gpu": gpu_id}


def _gpu_fit_table(_: list[str], kw: dict[str, Any], lang: str) -> str:
    gpu_id = str(kw["gpu"])
    no_bf16 = find_gpu(gpu_id).supports.get("bf16") is not True  # the reference runs are bf16: they cannot run
    rows = []
    for model in REFERENCE_MODELS:
        for method in REFERENCE_METHODS:
            cells = [f"`{model}`", method.upper().replace("QLORA", "QLoRA").replace("LORA", "LoRA")]
            for seq in CONTEXTS:
                if no_bf16:
                    cells.append("✗ bf16")
                    continue
                try:
                    fit = _estimate_of(_reference_run(model, method, seq, gpu_id)).fits[0]
                except SizingError:
                    cells.append("—")
                    continue
                if fit["fits"]:
                    cells.append(f"✓ {fmt_gib(fit['headroom_bytes'], lang)} · ×{fit['max_micro_batch']}")
                else:
                    cells.append(f"✗ {fmt_gib(-fit['headroom_bytes'], lang)}")
            rows.append(cells)
    header = [label("model", lang), label("method", lang)] + [f"{label('context', lang)} {fmt_int(s, lang)}"
                                                             for s in CONTEXTS]
    return _table(header, rows) + "\n\n" + label("fit_legend", lang)


def _gpu_context_chart(_: list[str], kw: dict[str, Any], lang: str) -> str:
    gpu = find_gpu(str(kw["gpu"]))
    model = str(kw.get("model", REFERENCE_MODELS[0]))
    series = {}
    for method in REFERENCE_METHODS:
        points = []
        for seq in CHART_CONTEXTS:
            try:
                points.append((seq, _estimate_of(_reference_run(model, method, seq, gpu.id)).reserved_bytes / GiB))
            except SizingError:
                break
        series[method] = points
    title = f"{model} · {gpu.name}"
    return line_chart(title, series, usable_bytes(gpu) / GiB, label("context", lang), label("reserved_gib", lang),
                      label("capacity", lang))


def _gpu_index(_: list[str], kw: dict[str, Any], lang: str) -> str:
    pages = set(str(kw.get("pages", "")).split(","))
    rows = []
    for gpu in gpus().values():
        name = f"[{gpu.name}]({gpu.id.lower()}.md)" if gpu.id in pages else gpu.name
        rows.append([name, fmt_gib(gpu.usable_bytes, lang), fmt_num(gpu.memory_bandwidth_GBps or 0, lang, 0),
                     fmt_num(gpu.bf16_dense_tflops, lang, 1) if gpu.bf16_dense_tflops else "—",
                     gpu.compute_capability])
    header = [label("gpu", lang), label("memory_cuda", lang) + " (GiB)", label("bandwidth", lang) + " (GB/s)",
              label("bf16_tflops", lang), "sm"]
    return _table(header, rows)


def _compare_gpus(_: list[str], kw: dict[str, Any], lang: str) -> str:
    ids = str(kw["gpus"]).split(",")
    rows = []
    for model in REFERENCE_MODELS:
        for method in REFERENCE_METHODS:
            for seq in CONTEXTS:
                cells = [f"`{model}`", method, fmt_int(seq, lang)]
                for gpu_id in ids:
                    try:
                        est = _estimate_of(_reference_run(model, method, seq, gpu_id))
                    except SizingError:
                        cells.append("—")
                        continue
                    fit = est.fits[0]
                    tps = fmt_num(est.time["tokens_per_second"], lang, 0) if est.time else "—"
                    cells.append(f"✓ ×{fit['max_micro_batch']} · {tps}" if fit["fits"]
                                  else f"✗ {fmt_gib(-fit['headroom_bytes'], lang)}")
                rows.append(cells)
    header = [label("model", lang), label("method", lang), label("context", lang)] + [find_gpu(i).name for i in ids]
    return _table(header, rows) + "\n\n" + label("compare_legend", lang)


@functools.cache
def _validation() -> tuple[Any, list[Any]]:
    cases, rows = validate.load_cases()
    scored, _ = validate.score(cases, rows)
    return validate, scored


def _accuracy_tables(_: list[str], kw: dict[str, Any], lang: str) -> str:
    validate, scored = _validation()
    parts = []
    for title, key, gpus_filter in (("by_source", "source", 1), ("by_method", "method", 1),
                                    ("by_metric", "metric", 1), ("multi_gpu", "source", 2)):
        items = [s for s in scored if (s.gpus == 1) == (gpus_filter == 1)]
        rows = []
        for name, group in validate.group(items, key).items():
            n, med, p90, worst = validate.stats(s.error_pct for s in group)
            rows.append([name, fmt_int(n, lang), fmt_num(med, lang, 1), fmt_num(p90, lang, 1), fmt_num(worst, lang, 1)])
        n, med, p90, worst = validate.stats(s.error_pct for s in items)
        rows.append([f"**{label('all', lang)}**", fmt_int(n, lang), fmt_num(med, lang, 1), fmt_num(p90, lang, 1),
                     fmt_num(worst, lang, 1)])
        header = [label(key, lang), "n", label("median_err", lang), label("p90_err", lang), label("worst_err", lang)]
        parts.append(f"**{label(title, lang)}**\n\n" + _table(header, rows))
    return "\n\n".join(parts)


def _accuracy_counts(words: list[str], kw: dict[str, Any], lang: str) -> str:
    validate, scored = _validation()
    cases, _ = validate.load_cases()
    which = words[0] if words else "scored"
    counts = {"scored": len(scored), "single": sum(1 for s in scored if s.gpus == 1),
              "multi": sum(1 for s in scored if s.gpus > 1), "total": len(cases)}
    counts["unmodelled"] = counts["total"] - counts["scored"]
    return fmt_int(counts[which], lang)


def _accuracy_chart(_: list[str], kw: dict[str, Any], lang: str) -> str:
    _, scored = _validation()
    points = [(s.measured_gib, s.estimated_gib, s.source) for s in scored if s.measured_gib is not None]
    return scatter_chart(label("accuracy_chart", lang), points, label("measured_gib", lang),
                         label("estimated_gib", lang))


# A placeholder's handler: (positional words, key=value arguments, page language) -> Markdown.
Handler = Callable[[list[str], dict[str, Any], str], str]

HANDLERS: dict[str, Handler] = {
    "lora_params": _lora, "lora_bytes": _lora_bytes, "estimate": _estimate, "gpu_memory": _gpu_memory,
    "breakdown": _breakdown, "compare": _compare, "gpu_specs": _gpu_specs, "gpu_fit_table": _gpu_fit_table,
    "gpu_context_chart": _gpu_context_chart, "gpu_index": _gpu_index, "compare_gpus": _compare_gpus,
    "accuracy_tables": _accuracy_tables, "accuracy_chart": _accuracy_chart, "accuracy_counts": _accuracy_counts,
    "quick_answer": quick_answer, "ladder": ladder_block, "fits": fits_word, **gpu_facts.HANDLERS,
    **accuracy_sources.HANDLERS, **cost_block.HANDLERS, **gpu_verdict.HANDLERS,
}


class PlaceholderError(ValueError):
    """A placeholder the build cannot compute: the build must stop, not publish a wrong page."""


def render(markdown: str, lang: str, handlers: Mapping[str, Handler] = HANDLERS) -> str:
    """Replace every `[[sizing:...]]` placeholder with its computed Markdown for language `lang`."""

    def one(match: re.Match[str]) -> str:
        name, args = match.group(1), match.group(2)
        handler = handlers.get(name)
        if handler is None:
            raise PlaceholderError(f"unknown placeholder [[sizing:{name}]]")
        words, kwargs = parse_args(args)
        try:
            return handler(words, kwargs, lang)
        except (SizingError, KeyError, IndexError, ValueError) as exc:
            raise PlaceholderError(f"[[sizing:{name}{args}]]: {exc}") from exc

    return PLACEHOLDER.sub(one, markdown)


__all__ = ["HANDLERS", "LABELS", "Handler", "PlaceholderError", "render"]
