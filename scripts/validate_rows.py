"""A published measurement row (validation/measurements.csv columns) read AS WRITTEN into a run configuration.

One generic mapping for every row, no per-row table: each CSV column is read by keywords of its free
text (documented per function below). What the text does not say is left to the framework's default
and listed in `assumptions`. A row the engine cannot model is refused with a stable code.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sizing.catalog import gpus, models  # noqa: E402

GiB = 2**30
TIERS = ("allocated", "reserved", "device", "unstated")
# PEFT methods other than LoRA/DoRA (peft/tuners/*): the engine models LoRA adapters only.
_OTHER_PEFT = ("adalora", "ia3", "loha", "lokr", "boft", "oft", "vera", "prefix", "prompt tuning",
               "p-tuning", "layernorm tuning", "osf", "lora-fa", "lorafa", "fourierft", "hra", "bone")
# torchtune release tags and their dates (git tags of pytorch/torchtune): a row dated between two
# releases runs the code of the earlier one (main after it).
_TORCHTUNE_RELEASES = (((2024, 4, 15), "0.1"), ((2024, 7, 16), "0.2"), ((2024, 9, 17), "0.3"),
                       ((2024, 11, 13), "0.4"), ((2024, 12, 20), "0.5"), ((2025, 3, 18), "0.6"))
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}


class RowRefused(Exception):
    """A row that cannot be turned into a run: a stable code and one line of English."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RowCase:
    """A CSV row as a run configuration plus what it measured."""

    row_id: str
    source: str
    config: dict[str, Any]
    tier: str  # allocated | reserved | device | unstated (scored against reserved)
    metric: str  # the statistic as named: allocated | active | reserved | device | unstated
    measured_gib: float | None  # None for an out-of-memory row
    oom_gpu: str | None  # out-of-memory row: the card it did not fit
    assumptions: tuple[str, ...]


def _low(row: Mapping[str, str], col: str) -> str:
    return (row.get(col) or "").strip().lower()


def _first_number(text: str) -> float | None:
    m = re.search(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)
    return float(m.group()) if m else None


def _first_int(text: str) -> int | None:
    m = re.search(r"\d+", text)
    return int(m.group()) if m else None


def model_id(text: str) -> str:
    """The checkpoint id: the first word of the column ("org/name (comment)" -> "org/name")."""
    words = text.strip().split()
    return words[0] if words else ""


def dtype_of(text: str) -> str | None:
    """The first dtype named in a free-text column (bf16 / fp16 / fp32 and their long names)."""
    m = re.search(r"\b(bf16|bfloat16|fp16|float16|half|fp32|float32)\b", text.lower())
    if not m:
        return None
    word = m.group(1)
    return {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp32": "float32", "float32": "float32"}.get(word, "float16")


def quantization(text: str, base_text: str) -> dict[str, Any]:
    """Quantization fields: bitsandbytes / torchao NF4 or FP4 (4-bit), LLM.int8 (8-bit); others refused."""
    q = text.lower()
    if q in ("", "none", "no", "n/a"):
        return {}
    out: dict[str, Any] = {}
    if "nf4" in q or "fp4" in q or "4-bit" in q or "4bit" in q:
        out["load_in_4bit"] = True
        out["bnb_4bit_quant_type"] = "fp4" if "fp4" in q and "nf4" not in q else "nf4"
        if "torchao" in q:
            out["quantization_backend"] = "torchao"
        storage = re.search(r"quant_storage\s*=?\s*(bf16|bfloat16|fp16|float16|fp32|float32)", base_text.lower())
        if storage:
            out["bnb_4bit_quant_storage"] = dtype_of(storage.group(1))
        return out
    if "int8" in q or "8-bit" in q or "8bit" in q:
        return {"load_in_8bit": True}
    raise RowRefused("row_quantization_unsupported",
                     f"quantization '{text}' is not modelled (supported: bitsandbytes/torchao nf4/fp4, int8)")


def yes_no(text: str) -> bool | None:
    """yes/true/on -> True, no/false/off -> False, anything else -> None (not stated)."""
    t = text.lower()
    if re.search(r"\b(yes|true|on|enabled)\b", t):
        return True
    if re.search(r"\b(no|false|off|disabled|none)\b", t):
        return False
    return None


def target_modules(text: str) -> list[str] | str | None:
    """LoRA targets as named by the source; the engine maps family names (query, projection, mlp, head,
    output_proj, w1...) to the model's modules (sizing.arch.target_aliases). None: the default."""
    t = re.sub(r"\((?:no|without|except|if)\b[^)]*\)", " ", text, flags=re.I).strip()  # "(no o_proj)" removes
    if not t or "default" in t.lower():
        return None
    if "all-linear" in t.lower():
        return "all-linear"
    t = re.sub(r"(final )?output projection|\bhead\b", " lm_head ", t, flags=re.I)
    words = [w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t)]
    skip = {"all", "and", "plus", "the", "incl", "including", "layers", "lora", "modules", "only", "on"}
    names = [w for w in words if w not in skip]
    return list(dict.fromkeys(names)) or None


def method_fields(row: Mapping[str, str]) -> dict[str, Any]:
    """method + method_detail + quantization -> method (full/lora/qlora/lora8), use_dora; other PEFT refused."""
    method, detail = _low(row, "method"), _low(row, "method_detail")
    other = next((name for name in _OTHER_PEFT if re.search(rf"\b{re.escape(name)}\b", detail)), None)
    if other or method not in ("full", "lora", "qlora"):
        raise RowRefused("row_method_not_modelled",
                         f"method '{row.get('method_detail') or method}' is not modelled (supported: full, LoRA, "
                         "DoRA, QLoRA)")
    quant = quantization(row.get("quantization", ""), row.get("base_weight_dtype", ""))
    out: dict[str, Any] = dict(quant)
    if method == "full":
        if quant:
            raise RowRefused("row_inconsistent", "full fine-tuning of a quantized base is not a training run")
        out["method"] = "full"
        return out
    out["method"] = "qlora" if quant.get("load_in_4bit") else "lora8" if quant.get("load_in_8bit") else "lora"
    if method == "qlora" and out["method"] == "lora":
        raise RowRefused("row_inconsistent", "method qlora but the quantization column names no 4-bit format")
    if re.search(r"\bdora\b|use_dora", detail):
        out["use_dora"] = True
    return out


def framework(row: Mapping[str, str]) -> tuple[str, str | None]:
    """framework (+version): LitGPT, torchtune, TRL; a hand-written loop (train.py, accelerate loop,
    example scripts) is `custom`; the Trainer is `transformers`."""
    f, v = _low(row, "framework"), _low(row, "framework_version")
    if "litgpt" in f:
        return "litgpt", None
    if "torchtune" in f:
        return "torchtune", torchtune_version(v)
    if "trl" in f or "sfttrainer" in f:
        return "trl", None
    if re.search(r"custom|loop|train\.py|example script|accelerate|fsdp_qlora", f):
        return "custom", None
    return "transformers", None


def torchtune_version(text: str) -> str | None:
    """A stated 0.x version, or the release a stated date runs (the last tag on or before it)."""
    m = re.search(r"\bv?(0\.\d+(?:\.\d+)?)\b", text)
    if m:
        return m.group(1)
    date: tuple[int, int, int] | None = None
    d = re.search(r"(20\d\d)-(\d\d)(?:-(\d\d))?", text)
    if d:
        date = (int(d.group(1)), int(d.group(2)), int(d.group(3) or 1))
    else:
        months = re.findall(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*[- ]", text)
        year = re.search(r"\b(20\d\d)\b", text)
        if months and year:
            date = (int(year.group(1)), max(_MONTHS[m] for m in months), 28)
    if date is None:
        return None
    release = "0.0"  # before the first tag
    for when, name in _TORCHTUNE_RELEASES:
        if date >= when:
            release = name
    return release


def optimizer(text: str) -> dict[str, Any]:
    """optim from the optimizer column: paged/8-bit bitsandbytes, SGD, Adafactor, fused or plain AdamW;
    optimizer_in_bwd and CPU offload when the column says so."""
    t = text.lower()
    out: dict[str, Any] = {}
    paged, eight = "paged" in t, bool(re.search(r"8[- ]?bit", t))
    if paged:
        out["optim"] = "paged_adamw_8bit" if eight else "paged_adamw_32bit"
    elif eight and "non-8bit" not in t:
        out["optim"] = "adamw_8bit"
    elif "sgd" in t:
        out["optim"] = "sgd"
    elif "adafactor" in t:
        out["optim"] = "adafactor"
    elif "adamw" in t and "default" not in t:
        out["optim"] = "adamw_torch_fused" if re.search(r"(?<!non-)\bfused\b", t) else "adamw_torch"
    if re.search(r"optimizer_in_bwd\s*(=\s*)?true|fused into backward", t):
        out["optimizer_in_backward"] = True
    elif re.search(r"optimizer_in_bwd\s*(=\s*)?false", t):
        out["optimizer_in_backward"] = False
    if re.search(r"(?<!no )cpu offload", t):
        out["cpu_offload"] = True
    return out


def precision(row: Mapping[str, str], fw: str) -> dict[str, Any]:
    """torch_dtype from base_weight_dtype; bf16/fp16 autocast from mixed_precision ("bf16-true", "pure",
    "none", "no autocast" mean no autocast; a bare "bf16" or "--bf16 True" means autocast)."""
    out: dict[str, Any] = {}
    dtype = dtype_of(row.get("base_weight_dtype", "")) or dtype_of(row.get("mixed_precision", ""))
    if dtype:
        out["torch_dtype"] = dtype
    mp = _low(row, "mixed_precision")
    if re.search(r"--bf16\s+true|bf16\s*=\s*true", mp):
        out["bf16"] = True
    elif re.search(r"--fp16\s+true|fp16\s*=\s*true", mp):
        out["fp16"] = True
    elif re.search(r"bf16-true|pure|\bnone\b|no autocast|'no'|\bno\b", mp):
        out["bf16"] = False
    elif "bf16" in mp:
        out["bf16"] = True
    elif "fp16" in mp:
        out["fp16"] = True
    return out


def sequences(row: Mapping[str, str]) -> dict[str, Any]:
    """max_seq_length from seq_len; packing when seq_len_mode says packed / fixed / every sample exactly /
    padded to max_length (all rows of one length), not when it says unpacked or padded to longest."""
    seq = _first_int(row.get("seq_len", ""))
    if seq is None:
        raise RowRefused("row_missing_field", "seq_len is not stated")
    mode = _low(row, "seq_len_mode")
    fixed = bool(re.search(r"(?<!un)pack(ed|ing)\b|\bfixed\b|exactly|forced|pad\w*(/\w+)? to max_length", mode))
    if re.search(r"unpacked|not packed|packing\s*=\s*false", mode):
        fixed = False
    return {"max_seq_length": seq, "packing": fixed}


def parallel(row: Mapping[str, str]) -> dict[str, Any]:
    """num_gpus (a config's "devices: N" over a table's count) and the sharding strategy."""
    n_text = _low(row, "num_gpus")
    dev = re.search(r"devices\s*:?\s*(\d+)", n_text)
    n = int(dev.group(1)) if dev else (_first_int(n_text) or 1)
    s = _low(row, "sharding")
    out: dict[str, Any] = {"num_gpus": n}
    if n == 1 and not re.search(r"offload", s):
        return out
    if re.search(r"no_shard|'ddp'|\bddp\b", s):
        out["parallelism"] = "ddp"
    elif re.search(r"zero[- ]?(stage[- ]?)?3", s):
        out["parallelism"] = "zero3"
    elif re.search(r"zero[- ]?(stage[- ]?)?2", s):
        out["parallelism"] = "zero2"
    elif "fsdp" in s:
        out["parallelism"] = "fsdp"
    elif n > 1:
        out["parallelism"] = "ddp"
    if re.search(r"offload", s) and not re.search(r"no (cpu )?offload", s):
        out["cpu_offload"] = True
    return out


def checkpointing(text: str, num_gpus: int) -> bool | None:
    """yes / no; "... if devices>1" follows the GPU count; unstated -> the framework's default."""
    t = text.lower()
    if re.search(r"if devices\s*>\s*1", t):
        return num_gpus > 1
    return yes_no(t)


def other_settings(text: str) -> dict[str, Any]:
    """torch.compile, chunked / fused cross-entropy, activation offloading, expandable segments."""
    t = text.lower()
    out: dict[str, Any] = {}
    if re.search(r"compile", t) and not re.search(r"compile\s*=\s*false|no (torch\.)?compile", t):
        out["torch_compile"] = True
    if re.search(r"chunked", t):
        out["loss_implementation"] = "chunked_ce"
    elif re.search(r"liger|fused linear|fused_linear", t):
        out["loss_implementation"] = "fused_linear_ce"
    if re.search(r"activation offload", t):
        out["activation_offloading"] = True
    if "expandable_segments" in t and "false" not in t:
        out["expandable_segments"] = True
    if re.search(r"(?<!no )cpu offload", t):
        out["cpu_offload"] = True
    return out


def attention(text: str) -> str | None:
    """flash -> flash_attention_2, eager -> eager, SDPA / flex / default -> sdpa."""
    t = text.lower()
    if "flash" in t:
        return "flash_attention_2"
    if "eager" in t:
        return "eager"
    return "sdpa" if t else None


def _gpu_family(gpu_id: str) -> tuple[tuple[str, ...], str, int]:
    """A catalog id's distinguishing words, form factor and memory: A100-SXM-80GB -> (A100,), SXM, 80."""
    parts = gpu_id.upper().split("-")
    mem = int(parts[-1][:-2]) if parts[-1].endswith("GB") else 0
    form = next((p for p in parts if p in ("SXM", "PCIE", "NVL")), "")
    words = tuple(p for p in parts[:-1] if p not in ("SXM", "PCIE", "NVL", "RTX"))
    return words, form, mem


def match_gpu(text: str) -> tuple[str | None, str | None]:
    """The catalog GPU a gpu_model text names (its model words and, if stated, memory); with the memory or
    form factor unstated, the largest SXM variant, said in the returned assumption."""
    tokens = set(re.findall(r"[A-Z0-9]+", text.upper()))
    stated = re.search(r"(\d+)\s*GB", text.upper())
    found = []
    for gid in gpus():
        words, form, mem = _gpu_family(gpus()[gid].id)
        if words and all(w in tokens for w in words):
            found.append((len(words), gpus()[gid].id, form, mem))
    if not found:
        return None, None
    best_len = max(f[0] for f in found)
    cands = [f for f in found if f[0] == best_len]
    if stated:
        cands = [f for f in cands if f[3] == int(stated.group(1))] or cands
    if "PCIE" in tokens:
        cands = [f for f in cands if f[2] == "PCIE"] or cands
    if len(cands) == 1:
        return cands[0][1], None
    pick = max(cands, key=lambda f: (f[3], f[2] == "SXM"))
    return pick[1], f"gpu '{text}' taken as {pick[1]} (largest/SXM variant)"


def metric(text: str) -> str:
    """Which statistic the source read: max_memory_allocated, active_bytes, max_memory_reserved, or
    nvidia-smi-style device memory; several named with "not stated" -> unstated."""
    t = text.lower()
    hits = {}
    for kind, pattern in (("active", r"\bactive"), ("allocated", r"alloc"), ("reserved", r"reserved"),
                          ("device", r"nvidia-smi|device memory|screenshot")):
        m = re.search(pattern, t)
        if m:
            hits[kind] = m.start()
    if not hits or (len(hits) >= 3 and re.search(r"not (stated|named)", t)):
        return "unstated"
    if "device" in hits:
        return "device"
    return min(hits, key=lambda k: hits[k])


def measured_gib(row: Mapping[str, str]) -> float | None:
    """peak_memory_gib, or peak_memory_reported in its unit ("GB" read as 1e9 bytes unless binary is stated)."""
    gib = _first_number(row.get("peak_memory_gib", ""))
    if gib is not None:
        return gib
    value = _first_number(row.get("peak_memory_reported", ""))
    if value is None:
        return None
    unit, basis = _low(row, "peak_memory_unit"), _low(row, "unit_basis")
    if unit == "bytes":
        return value / GiB
    if unit == "gib" or re.search(r"binary|1024|2\*\*30|logged gib", basis):
        return value
    if unit in ("mb", "mib"):
        return value * (2**20 if unit == "mib" or "binary" in basis else 1e6) / GiB
    return value * 1e9 / GiB


def usable(row: Mapping[str, str]) -> bool:
    """Rows marked yes/caution are scored; oom rows are lower bounds; no rows are left out."""
    return _low(row, "usable_for_scoring") in ("yes", "caution")


def row_case(row: Mapping[str, str]) -> RowCase:
    """The run configuration of one CSV row, or RowRefused with a stable code."""
    rid, source = row.get("row_id", "?"), (row.get("source_id") or "?").split("_")[0]
    notes: list[str] = []
    model = model_id(row.get("model", ""))
    if model.lower() not in models():
        raise RowRefused("row_unknown_model", f"model '{model}' is not in the catalog")
    cfg: dict[str, Any] = {"model": model, **method_fields(row)}
    fw, version = framework(row)
    cfg["framework"] = fw
    if fw == "custom" and cfg["method"] in ("qlora", "lora8"):
        # A hand-written loop calls prepare_model_for_kbit_training only where it says so (the contract's
        # default follows the transformers + PEFT examples, which do).
        said = re.search(r"prepare_model_for_kbit_training", " ".join(row.values()))
        cfg["prepare_model_for_kbit_training"] = bool(said)
    if version:
        cfg["framework_version"] = version
    cfg.update(precision(row, fw))
    if cfg.get("load_in_4bit") and cfg.get("torch_dtype") in ("bfloat16", "float16"):
        cfg["bnb_4bit_compute_dtype"] = cfg["torch_dtype"]  # compute in the dtype the rest of the model runs in
        notes.append("bnb_4bit_compute_dtype taken from the base dtype")
    if cfg["method"] != "full":
        for col, key in (("lora_rank", "r"), ("lora_alpha", "lora_alpha"), ("lora_dropout", "lora_dropout")):
            value = _first_number(row.get(col, ""))
            if value is not None:
                cfg[key] = int(value) if key == "r" else value
        targets = target_modules(row.get("lora_target_modules", ""))
        if targets is not None:
            cfg["target_modules"] = targets
        dq = yes_no(row.get("double_quant", ""))
        if dq is not None and cfg.get("load_in_4bit"):
            cfg["bnb_4bit_use_double_quant"] = dq
    cfg.update(sequences(row))
    batch = _first_int(row.get("micro_batch_size", ""))
    if batch is None:
        raise RowRefused("row_missing_field", "micro_batch_size is not stated")
    cfg["per_device_train_batch_size"] = batch
    accum = _first_int(row.get("grad_accum_steps", ""))
    if accum:
        cfg["gradient_accumulation_steps"] = accum
    cfg.update(parallel(row))
    gc = checkpointing(row.get("gradient_checkpointing", ""), cfg["num_gpus"])
    if gc is None:
        notes.append("gradient_checkpointing not stated: the framework's default")
    else:
        cfg["gradient_checkpointing"] = gc
    opt = optimizer(row.get("optimizer", ""))
    if "optim" not in opt:
        notes.append("optimizer not named: the framework's default")
    cfg.update(opt)
    attn = attention(row.get("attention_impl", ""))
    if attn:
        cfg["attn_implementation"] = attn
    cfg.update(other_settings(row.get("other_memory_settings", "")))
    gpu, gpu_note = match_gpu(row.get("gpu_model", ""))
    if gpu_note:
        notes.append(gpu_note)
    cfg["gpu"] = gpu
    kind = metric(row.get("metric_kind", ""))
    tier = "allocated" if kind == "active" else kind
    oom = _low(row, "usable_for_scoring") == "oom"
    if oom and gpu is None:
        raise RowRefused("row_missing_field", "out-of-memory row without a known GPU")
    value = None if oom else measured_gib(row)
    if value is None and not oom:
        raise RowRefused("row_missing_field", "no peak memory value")
    return RowCase(rid, source, cfg, tier, kind, value, gpu if oom else None, tuple(notes))
