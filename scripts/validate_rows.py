"""A published measurement row (validation/measurements.csv columns) read AS WRITTEN into a run configuration.

One generic mapping for every row, no per-row table: each CSV column is read by keywords of its free
text (documented per function below). What the text does not say is left to the framework's default
and listed in `assumptions`. A row the engine cannot model is refused with a stable code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from row_catalog import catalog_model, match_gpu
from row_columns import (
    UNSTATED,
    RowRefused,
    attention,
    checkpointing,
    dtype_of,
    first_int,
    first_number,
    framework,
    litgpt_accumulation,
    lower_col,
    optimizer,
    other_settings,
    parallel,
    peft_target_names,
    peft_version,
    per_device,
    precision,
    quantization,
    row_date,
    sequences,
    sharded_layers,
    swift_default_targets,
    target_modules,
    torchtune_fused,
    torchtune_version,
    trainer_default_optim,
    trl_version,
    yes_no,
)
from row_names import checkpoint_name, parse
from sizing import load_config
from sizing.arch import from_hf_config
from sizing.catalog import models
from sizing.errors import SizingError
from sizing.memory.adapters import resolve_targets

# Column readers (row_columns.py) and catalog matchers (row_catalog.py) re-exported: one import gives the whole mapping.
__all__ = ["RowCase", "RowRefused", "attention", "catalog_model", "checkpointing", "dtype_of", "framework",
           "match_gpu", "measured_gib", "method_fields", "metric", "optimizer", "other_settings", "parallel",
           "peft_version", "per_device", "precision", "quantization", "row_case", "row_date", "sequences",
           "sharded_layers", "target_modules", "torchtune_version", "trl_version", "usable", "yes_no"]

GiB = 2**30
TIERS = ("allocated", "reserved", "device", "unstated")
# PEFT tuners named in method_detail -> the contract's peft_type (sizing/memory/peft_methods.py); the
# others (peft/tuners/*) are refused. Order matters: "lora-fa" before LoRA, "prefix" before "prompt". Bone is MiSS's
# name before PEFT renamed it: the same bone_block [r, out] and the same block-sum forward (tuners/bone/layer.py
# @093b4311, tuners/miss/layer.py 0.21.2), and its "bat" init is MiSS's, refused below as MiSS's is.
_PEFT_TYPES = (("lora-fa", "lora_fa"), ("lorafa", "lora_fa"), ("adalora", "adalora"), ("ia3", "ia3"),
               ("loha", "loha"), ("lokr", "lokr"), ("boft", "boft"), ("oft", "oft"), ("vera", "vera"),
               ("prefix", "prefix_tuning"), ("prompt tuning", "prompt_tuning"), ("layernorm tuning", "ln_tuning"),
               ("ln tuning", "ln_tuning"), ("miss", "miss"), ("gralora", "gralora"), ("shira", "shira"),
               ("hra", "hra"), ("delora", "delora"), ("bone", "miss"), ("hira", "hira"), ("fourierft", "fourierft"),
               ("randlora", "randlora"), ("pvera", "pvera"), ("c3a", "c3a"), ("beft", "beft"), ("road", "road"),
               ("waveft", "waveft"), ("p-tuning", "p_tuning"), ("ptuning", "p_tuning"), ("vb-lora", "vblora"),
               ("vblora", "vblora"), ("unilora", "unilora"), ("deft", "deft"), ("lily", "lily"),
               ("peanut", "peanut"), ("tinylora", "tinylora"), ("glora", "glora"), ("psoft", "psoft"),
               ("trainable tokens", "trainable_tokens"), ("trainable_tokens", "trainable_tokens"),
               ("adamss", "adamss"), ("adaption prompt", "adaption_prompt"),
               ("adaption_prompt", "adaption_prompt"), ("adaptionprompt", "adaption_prompt"), ("frod", "frod"),
               ("osf", "osf"))
# The tuner's own integer size fields, read where the row states them ("gralora_k=4"); else the contract's defaults
_SIZE_FIELDS = {"gralora": ("gralora_k",), "fourierft": ("n_frequency",), "c3a": ("block_size",),
                "waveft": ("n_frequency",), "road": ("group_size",), "p_tuning": ("num_virtual_tokens",),
                "vblora": ("num_vectors",), "unilora": ("theta_d_length",), "peanut": ("depth",),
                "lily": ("stride_A", "num_B"), "adamss": ("num_subspaces", "subspace_rank"), "miss": ("mini_r",),
                "adaption_prompt": ("adapter_len", "adapter_layers")}
# A QLoRA row whose quantization column is left empty or names only the library: the 4-bit NF4 base QLoRA is
# (Dettmers et al. 2023, bitsandbytes' nf4); a column that names a format, or says there is none, is read as written.
QLORA_UNSTATED = re.compile(rf"\W*({UNSTATED}|bnb|bitsandbytes)?\W*")


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


def method_fields(row: Mapping[str, str]) -> dict[str, Any]:
    """method + method_detail + quantization -> method (full/lora/qlora/lora8), use_dora; other PEFT refused."""
    raw, detail = lower_col(row, "method"), lower_col(row, "method_detail")
    # The method column's keyword: qlora (QDoRA: DoRA on a 4-bit base) before lora; dora is LoRA with use_dora;
    # LoRA's initialisation and scaling variants (rsLoRA, PiSSA, OLoRA, LoftQ) and LoRA+ (its learning rates) train
    # the same tensors; "full" / "fft" full FT.
    method = next((m for m, pat in (("qlora", r"qlora|qdora"),
                                    ("lora", r"\b(lora|dora|rslora|pissa|olora|loftq)\b|lora\+|loraplus"),
                                    ("full", r"\bfull|\bfft\b")) if re.search(pat, raw)), raw)
    if re.search(r"\bq?dora\b", raw):
        detail += " dora"
    detail = f"{raw} {detail}"  # a PEFT method named in the method column itself ("IA3")
    peft_type = next((t for name, t in _PEFT_TYPES if re.search(rf"\b{re.escape(name)}\b", detail)), None)
    if peft_type and method != "full":
        method = "qlora" if method == "qlora" else "lora"  # the base's precision follows the quantization column
    if method not in ("full", "lora", "qlora"):
        raise RowRefused("row_method_not_modelled",
                         f"method '{row.get('method_detail') or method}' is not modelled (supported: full, LoRA, "
                         "DoRA, QLoRA, and on a LoRA base " + ", ".join(dict.fromkeys(t for _, t in _PEFT_TYPES)) + ")")
    if method == "qlora" and QLORA_UNSTATED.fullmatch(lower_col(row, "quantization")):
        # what the method column says of the base ("QLoRA 8-bit"), else what QLoRA names: LoRA on an NF4 base
        quant = quantization(raw if re.search(r"\b(nf4|fp4|int8|[48]-?bit)\b", raw) else "nf4",
                             row.get("base_weight_dtype", ""))
    else:
        quant = quantization(row.get("quantization", ""), row.get("base_weight_dtype", ""))
    quant = _prequantized_bnb(row, quant, method)
    ckpt = quant.pop("checkpoint_quant", None)
    if ckpt:
        rec = models().get(catalog_model(row.get("model", ""), row.get("params_nominal", ""))[0].lower())
        cq = from_hf_config(rec.config).checkpoint_quant if rec else None
        if cq is None or cq.method != ckpt:
            raise RowRefused("row_quantization_unsupported", f"a {ckpt.upper()} base needs a {ckpt.upper()} checkpoint "
                             "in the catalog (or its config.json); this model has none")
        if method == "full":
            raise RowRefused("row_inconsistent", "full fine-tuning of a GPTQ/AWQ checkpoint is not a training run")
        return {"method": "lora"}  # LoRA on the pre-quantized base (sizing.memory.weights)
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
    if peft_type:
        out["peft_type"] = peft_type
    text = " ".join(str(v) for v in row.values()).lower()
    for size in _SIZE_FIELDS.get(peft_type or "", ()):
        stated = re.search(rf"{size.lower()}\W*(\d+)", text)  # the text is lowercased (Lily's stride_A, num_B)
        if stated:
            out[size] = int(stated.group(1))
    variant = re.search(r"\b(bat|mini)\b", text) if peft_type == "miss" else None
    if variant:  # MissConfig.init_weights="bat" (r x r blocks) or "mini" (an r x mini_r block)
        out["miss_init"] = variant.group(1)
    kept = re.search(r"effective_rank\W*([0-9]*\.?[0-9]+)", text) if peft_type == "osf" else None
    if kept:  # OSFConfig.effective_rank: an int, or a fraction below 1 of each layer's smaller side
        out["effective_rank"] = float(kept.group(1))
    tying = re.search(r"weight_tying\W*([0-9.]+)", text) if peft_type == "tinylora" else None
    if tying:  # TinyLoraConfig.weight_tying (u keeps its default unless stated)
        out["weight_tying"] = float(tying.group(1).rstrip("."))
    indices = re.search(r"token_indices\W*\[([0-9,\s]+)\]", text) if peft_type == "trainable_tokens" else None
    if indices:  # TrainableTokensConfig.token_indices: how many rows train
        out["num_trainable_tokens"] = len(re.findall(r"\d+", indices.group(1)))
    if peft_type == "glora":  # GloraConfig.config_A_B, config_C, config_D_E where stated
        for key in ("config_A_B", "config_C", "config_D_E"):
            path = re.search(rf"{key.lower()}\W*(lora|vector|constant|none)\b", text)
            if path:
                out[key] = path.group(1)
    if peft_type == "deft" and re.search(r"\bpara\b\W*(true|yes)|\bpara\b(?!\W*(false|no))", text):
        out["deft_para"] = True  # DeftConfig.para (PaRa: subspace removal only)
    variant = re.search(r"\broad_([124])\b", text) if peft_type == "road" else None
    if variant:  # RoadConfig.variant
        out["road_variant"] = f"road_{variant.group(1)}"
    # IA3's feed-forward modules where the row names them ("feedforward_modules: up_proj, gate_proj, down_proj");
    # else PEFT's per-model mapping
    ff = re.search(r"feed[_ -]?forward(?:[_ ]modules)?\W+([a-z0-9_.]+(?:\s*(?:,|\band\b)\s*[a-z0-9_.]+)*)", text)
    if peft_type == "ia3" and ff:
        out["feedforward_modules"] = re.split(r"\s*(?:,|\band\b)\s*", ff.group(1))
    return out


def _prequantized_bnb(row: Mapping[str, str], quant: dict[str, Any], method: str) -> dict[str, Any]:
    """A "-bnb-4bit" / "-bnb-8bit" upload loads in that format whatever the row's quantization column says: the
    4-bit format the column names, else nf4 (what such uploads store); a column naming another format is refused."""
    bits = parse(checkpoint_name(row.get("model", ""))).bnb_bits
    if bits is None:
        return quant
    if method == "full":
        raise RowRefused("row_inconsistent", "full fine-tuning of a bitsandbytes-quantized checkpoint is not a "
                         "training run")
    stated = 4 if quant.get("load_in_4bit") else 8 if quant.get("load_in_8bit") else None
    if stated == bits:
        return quant
    if stated is not None or "checkpoint_quant" in quant:
        raise RowRefused("row_inconsistent", f"the model is a bitsandbytes {bits}-bit checkpoint but the quantization "
                         f"column says '{row.get('quantization')}'")
    return {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"} if bits == 4 else {"load_in_8bit": True}


def virtual_tokens(cfg: Mapping[str, Any], stated: int | None) -> int | None:
    """Prompt / prefix tuning rows rarely state num_virtual_tokens, but the trainable count they state is
    tokens x hidden (prompt) or tokens x layers x 2 x KV width (prefix): read it back when it divides exactly."""
    rec = models().get(str(cfg.get("model") or "").lower())
    if not stated or rec is None:
        return None
    arch = from_hf_config(rec.config)
    per = arch.hidden if cfg["peft_type"] == "prompt_tuning" else arch.layers * 2 * arch.kv_width
    return stated // per if stated % per == 0 else None


def osf_trained_rank(cfg: Mapping[str, Any], stated: int | None) -> int | None:
    """An OSF row that states its trainable count but no effective_rank: the rank t every adapted layer trains that
    gives it (U_low [out, t], S_low [t], V_low [t, in] per layer: PEFT's benchmark sets it with rank_pattern), when
    the count divides exactly; None otherwise (PEFT's default, half of each layer, is then estimated)."""
    rec = models().get(str(cfg.get("model") or "").lower())
    if not stated or rec is None:
        return None
    arch = from_hf_config(rec.config)
    try:
        targets, _ = resolve_targets(load_config({**cfg, "osf_trainable_rank": 1}), arch)
    except SizingError:
        return None
    per = arch.layers * sum((lin.in_features + lin.out_features + 1) * lin.count for lin in targets)
    return stated // per if per and stated % per == 0 else None


def metric(text: str) -> str:
    """Which statistic the source read: max_memory_allocated, active_bytes, max_memory_reserved, or
    nvidia-smi-style device memory; several named with "not stated" -> unstated."""
    t = text.lower()
    hits = {}
    for kind, pattern in (("active", r"\bactive"), ("allocated", r"alloc"), ("reserved", r"reserved"),
                          # NVML readers (pynvml, gpustat, nvitop; W&B's system metrics "gpu.N.memoryAllocated",
                          # docs.wandb.ai/ref/python/experiments/system-metrics) see the device's used memory
                          # nvtop reads NVML too; cudaMemGetInfo (torch.cuda.mem_get_info) the driver's free bytes
                          ("device", r"nvidia-smi|device memory|screenshot|nvml|gpustat|nvitop|nvtop|system metric"
                                     r"|gpu\.\d+\.memory|mem_get_info|memgetinfo")):
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
    gib = first_number(row.get("peak_memory_gib", ""))
    if gib is not None:
        return gib
    reported = re.sub(r"(?<=\d),(?=\d{3}\b)", "", row.get("peak_memory_reported", ""))  # "14,000 MiB"
    value = first_number(reported)
    if value is None:
        return None
    unit, basis = lower_col(row, "peak_memory_unit"), lower_col(row, "unit_basis")
    if not unit:  # the unit written with the value ("15.2 GiB", "14000 MiB")
        written = re.search(r"\d\s*(gib|gb|mib|mb|bytes)\b", reported.lower())
        unit = written.group(1) if written else ""
    if unit == "bytes":
        return value / GiB
    if unit == "gib" or re.search(r"binary|1024|2\*\*30|logged gib", basis):
        return value
    if unit in ("mb", "mib"):
        return value * (2**20 if unit == "mib" or "binary" in basis else 1e6) / GiB
    return value * 1e9 / GiB


def usable(row: Mapping[str, str]) -> bool:
    """Rows marked yes/caution are scored; oom rows are lower bounds; no rows are left out."""
    return lower_col(row, "usable_for_scoring") in ("yes", "caution")


def row_case(row: Mapping[str, str]) -> RowCase:
    """The run configuration of one CSV row, or RowRefused with a stable code."""
    rid, source = row.get("row_id", "?"), (row.get("source_id") or "?").split("_")[0]
    notes: list[str] = []
    model, model_note = catalog_model(row.get("model", ""), row.get("params_nominal", ""))
    if model_note:
        notes.append(model_note)
    cfg: dict[str, Any] = {"model": model, **method_fields(row)}
    if cfg["method"] == "qlora" and QLORA_UNSTATED.fullmatch(lower_col(row, "quantization")):
        notes.append("quantization not stated: QLoRA's NF4 4-bit base")
    fw, version = framework(row)
    cfg["framework"] = fw
    if fw == "custom" and cfg["method"] in ("qlora", "lora8"):
        # A hand-written loop calls prepare_model_for_kbit_training only where it says so (the contract's
        # default follows the transformers + PEFT examples, which do).
        said = re.search(r"prepare_model_for_kbit_training", " ".join(row.values()))
        cfg["prepare_model_for_kbit_training"] = bool(said)
    if version:
        cfg["framework_version"] = version
    peft = peft_version(row)
    if peft:  # what PEFT's layers keep and in which dtype changed with the release (frameworks.peft_release)
        cfg["peft_version"] = peft
    cfg.update(precision(row, fw))
    if fw == "trl" and version:
        notes.append(f"TRL {version}, as the row states it or by its date")
    if cfg.get("load_in_4bit") and cfg.get("torch_dtype") in ("bfloat16", "float16"):
        cfg["bnb_4bit_compute_dtype"] = cfg["torch_dtype"]  # compute in the dtype the rest of the model runs in
        notes.append("bnb_4bit_compute_dtype taken from the base dtype")
    if cfg["method"] != "full":
        for col, key in (("lora_rank", "r"), ("lora_alpha", "lora_alpha"), ("lora_dropout", "lora_dropout")):
            value = first_number(row.get(col, ""))
            if value is None and key == "lora_dropout" and yes_no(row.get(col, "")) is False:
                value = 0.0  # "none", "no": no dropout (PEFT's Identity, which saves nothing)
            if value is not None:
                cfg[key] = int(value) if key == "r" else value
        targets = target_modules(row.get("lora_target_modules", ""))
        swift = swift_default_targets(row, model)
        if swift is not None:
            cfg["target_modules"] = swift
            notes.append(f"ms-swift's default LoRA targets for this architecture: {', '.join(swift)}")
        elif targets is not None:
            cfg["target_modules"] = peft_target_names(targets, model, fw)
        dq = yes_no(row.get("double_quant", ""))
        if dq is not None and cfg.get("load_in_4bit"):
            cfg["bnb_4bit_use_double_quant"] = dq
    if cfg.get("peft_type") in ("prompt_tuning", "prefix_tuning"):
        tokens = virtual_tokens(cfg, first_int(row.get("trainable_params", "")))
        if tokens:
            cfg["num_virtual_tokens"] = tokens
            notes.append("num_virtual_tokens derived from the stated trainable_params")
    if cfg.get("peft_type") == "osf" and "effective_rank" not in cfg:
        trained = osf_trained_rank(cfg, first_int(row.get("trainable_params", "")))
        if trained:
            cfg["osf_trainable_rank"] = trained
            notes.append("osf_trainable_rank derived from the stated trainable_params (the same rank on every layer)")
    cfg.update(sequences(row))
    batch = per_device(row.get("micro_batch_size", ""))
    if batch is None:
        raise RowRefused("row_missing_field", "micro_batch_size is not stated")
    cfg["per_device_train_batch_size"] = batch
    accum = first_int(row.get("grad_accum_steps", ""))
    cfg.update(parallel(row))
    if accum:
        cfg["gradient_accumulation_steps"] = accum
    elif fw == "litgpt" and "global_batch_size" in lower_col(row, "grad_accum_steps"):
        # a row that names LitGPT's ratio without its numbers: global_batch_size from the config it names
        cfg["gradient_accumulation_steps"] = litgpt_accumulation(row, cfg["num_gpus"], batch)
        notes.append("gradient accumulation from the LitGPT config's global_batch_size")
    if fw == "torchtune" and cfg.get("parallelism") == "fsdp":
        cfg.update(sharded_layers(row, version))
    gc = checkpointing(row.get("gradient_checkpointing", ""), cfg["num_gpus"])
    other = lower_col(row, "other_memory_settings")
    named = re.search(r"(\b(?:no|without) )?(gradient|activation) checkpointing", other)
    if gc is None and named:
        gc = not named.group(1)  # said among the other settings
    if gc is None:
        notes.append("gradient_checkpointing not stated: the framework's default")
    else:
        cfg["gradient_checkpointing"] = gc
    opt = optimizer(row.get("optimizer", ""))
    if "optim" not in opt:
        # (a TRL row's version is TRL's own release, not the transformers one the default follows: its date then)
        opt = trainer_default_optim(row, fw, None if fw == "trl" else version)
        notes.append(f"optimizer not named: the framework's default ({opt.get('optim', 'the engine default')})")
    elif fw == "torchtune" and (fused := torchtune_fused(row, opt)):
        opt = {**opt, **fused}
        notes.append("torch AdamW in a torchtune config of its release: fused: True")
    cfg.update(opt)
    attn = attention(row.get("attention_impl", ""))
    if attn is None and re.search(r"flash|\bfa[- ]?[23]\b|\beager\b|\bsdpa\b", other):
        attn = attention(other)  # named among the other settings
    if attn:
        cfg["attn_implementation"] = attn
    cfg.update(other_settings(row.get("other_memory_settings", "")))
    gpu, gpu_note = match_gpu(row.get("gpu_model", ""))
    if gpu_note:
        notes.append(gpu_note)
    cfg["gpu"] = gpu
    kind = metric(row.get("metric_kind", ""))
    tier = "allocated" if kind == "active" else kind
    oom = lower_col(row, "usable_for_scoring") == "oom"
    if oom and gpu is None:
        raise RowRefused("row_missing_field", "out-of-memory row without a known GPU")
    value = None if oom else measured_gib(row)
    if value is None and not oom:
        raise RowRefused("row_missing_field", "no peak memory value")
    return RowCase(rid, source, cfg, tier, kind, value, gpu if oom else None, tuple(notes))
