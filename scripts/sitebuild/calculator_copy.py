# The calculator pages' Markdown copies: their slots as Markdown (the results, what the request holds).
"""The page Markdown of the calculator and the request page holds slots (`<div data-calc-slot=...>`) that
fill_slots turns into the form, the results and the request form of the HTML page. A reader of the
Markdown copy (llms.txt, llms-full.txt) gets Markdown instead: the default configuration's results as
tables, one line in place of the form, and what the request holds for the default configuration."""

from __future__ import annotations

import re
from typing import Any

from sitebuild.calculator_pages import REQUEST_FIELDS, default_config, default_result
from sitebuild.calculator_slots import SLOT
from sitebuild.calculator_text import T
from sizing.view import fmt_num

GiB = 2**30


def _line(label: str, value: Any) -> str | None:
    return None if value is None or value == "" else f"- {label}: {value}"


def request_markdown(lang: str) -> str:
    """What the request page assembles for the default configuration, as Markdown, then the fields the
    visitor adds (their labels)."""
    c, est = default_config(), default_result()["estimate"]

    def t(key: str) -> str:  # the request's own words
        return T(lang, "rq_" + key)

    targets = ", ".join(c["target_modules"]) if isinstance(c["target_modules"], list) else c["target_modules"]
    fit = (est.get("fits") or [{}])[0]
    time = est.get("time") or {}
    lines = [
        f"**{t('title').lstrip('# ')}**", "", f"### {t('s_model')}", _line(t("model"), c["model"]), "",
        f"### {t('s_method')}", _line("method", c["method"]), _line("framework", c["framework"]),
        _line("torch_dtype", c["torch_dtype"]), _line("bf16 / fp16", f"{c['bf16']} / {c['fp16']}"),
        _line("bnb_4bit", f"{c['bnb_4bit_quant_type']}, double_quant={c['bnb_4bit_use_double_quant']}, "
                          f"compute={c['bnb_4bit_compute_dtype']}") if c["method"] == "qlora" else None,
        _line("LoRA", f"r={c['r']}, lora_alpha={c['lora_alpha']}, lora_dropout={c['lora_dropout']}, "
                      f"target_modules={targets}, use_dora={c['use_dora']}") if c["method"] != "full" else None,
        *(_line(k, c[k]) for k in ("max_seq_length", "packing", "per_device_train_batch_size",
                                   "gradient_accumulation_steps", "gradient_checkpointing", "attn_implementation",
                                   "optim")),
        "", f"### {t('s_data')}", _line(t("tokens"), c["dataset_tokens"]), _line(t("epochs"), c["num_train_epochs"]),
        "", f"### {t('s_gpu')}", _line(t("gpu"), c["gpu"]), _line(t("count"), c["num_gpus"]),
        _line("parallelism", c["parallelism"]),
        "", f"### {t('s_estimate')}",
        _line(t("peak_device"), f"{fmt_num(est['peak']['device_bytes'] / GiB, lang, 1)} GiB"),
        _line(t("peak_reserved"), f"{fmt_num(est['peak']['reserved_bytes'] / GiB, lang, 1)} GiB"),
        _line(t("fits"), f"{t('yes') if fit['fits'] else t('no')} ({fit['gpu']}, {t('headroom')} "
                         f"{fmt_num(fit['headroom_bytes'] / GiB, lang, 1)} GiB)") if fit else None,
        _line(t("throughput"), f"{fmt_num(time['tokens_per_second'], lang, 0)} tokens/s") if time else None,
        _line(t("hours"), fmt_num(time["total_hours"], lang, 1)) if time else None,
        "", f"### {T(lang, 'r_legend')}", *(f"- {T(lang, 'r_' + name)}" for name, _ in REQUEST_FIELDS),
        "", t("footer"),
    ]
    return "\n".join(line for line in lines if line is not None)


def copy_markdown(markdown: str) -> str:
    """A page's Markdown with its calculator slots as Markdown, for the page's Markdown copy."""

    def one(match: re.Match[str]) -> str:
        kind, lang, inner = match.group(1), match.group(2), match.group(3)
        if kind == "results":
            return inner.strip()
        if kind == "request":
            return request_markdown(lang)
        return f"*{T(lang, 'copy_form')}*"

    return SLOT.sub(one, markdown)
