"""Free-text columns of a published measurement row (validation/measurements.csv) read by keywords.

Each function reads one column (or a few that belong together) and returns run-configuration fields;
scripts/validate_rows.py puts them together into one run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sizing.arch import from_hf_config, target_aliases
from sizing.catalog import models

# torchtune release tags and their dates (git tags of pytorch/torchtune): a row dated between two
# releases runs the code of the earlier one (main after it).
_TORCHTUNE_RELEASES = (((2024, 4, 15), "0.1"), ((2024, 7, 16), "0.2"), ((2024, 9, 17), "0.3"),
                       ((2024, 11, 13), "0.4"), ((2024, 12, 20), "0.5"), ((2025, 3, 18), "0.6"))
# transformers releases around the changes the engine models (frameworks.HF_ROPE_CACHES), dated by the build time
# of each PyPI wheel (transformers/__init__.py in transformers-X-py3-none-any.whl).
_TRANSFORMERS_RELEASES = (((2024, 1, 29), "4.37.2"), ((2024, 2, 21), "4.38.0"), ((2024, 3, 20), "4.39.0"),
                          ((2024, 4, 2), "4.39.3"), ((2024, 4, 18), "4.40.0"), ((2024, 5, 17), "4.41.0"),
                          ((2024, 6, 27), "4.42.0"), ((2024, 7, 23), "4.43.0"), ((2024, 9, 25), "4.45.0"),
                          ((2024, 10, 24), "4.46.0"))
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}


class RowRefused(Exception):
    """A row that cannot be turned into a run: a stable code and one line of English."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def lower_col(row: Mapping[str, str], col: str) -> str:
    return (row.get(col) or "").strip().lower()


# A column that says nothing: the words tables use for a value they do not state (fullmatch with \W* around)
UNSTATED = r"not stated|unstated|unknown|n/?a"


def first_number(text: str) -> float | None:
    m = re.search(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)
    return float(m.group()) if m else None


def joined_thousands(text: str) -> str:
    """The text with thousands separators removed from its numbers ("4,096", "4 096", "4_096" -> "4096")."""
    return re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", text)


def first_int(text: str) -> int | None:
    """The first whole number: thousands separators joined ("4,096"), a k suffix as x1024 ("4k" context)."""
    m = re.search(r"(\d+)\s*([kK]\b)?", joined_thousands(text))
    if not m:
        return None
    return int(m.group(1)) * (1024 if m.group(2) else 1)


def per_device(text: str) -> int | None:
    """A per-GPU count where a text gives both ("global 32 (8 per GPU)"), else the first number."""
    m = re.search(r"(\d+)\s*(?:per[- ]?(?:gpu|device)|/\s*gpu)|per[- ]?(?:gpu|device)[^\d]{0,12}(\d+)", text, re.I) or \
        re.search(r"micro[-_ ]?(?:batch)?[-_ ]?(?:size)?\s*[=:]?\s*()(\d+)", text, re.I)
    if m:
        return int(m.group(1) or m.group(2))
    # a number the text calls effective, global or total is not the micro-batch when another one is written
    rest = re.sub(r"\b(?:effective|global|total)(?:\s+batch)?(?:\s+size)?\s*[=:]?\s*\d+", " ", text, flags=re.I)
    return first_int(rest) or first_int(text)


def dtype_of(text: str) -> str | None:
    """The first dtype named in a free-text column (bf16 / fp16 / fp32 and their long names); after a
    "then" ("loaded fp32 ... then DeepSpeed bf16") the dtype the weights end up in."""
    t = text.lower()
    t = t.rsplit(" then ", 1)[-1] if re.search(r" then .*\b(bf16|bfloat16|fp16|float16|fp32|float32)\b", t) else t
    m = re.search(r"\b(bf16|bfloat16|fp16|float16|half|fp32|float32)\b", t)
    if not m:
        return None
    word = m.group(1)
    return {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp32": "float32", "float32": "float32"}.get(word, "float16")


def quantization(text: str, base_text: str) -> dict[str, Any]:
    """Quantization fields: bitsandbytes / torchao NF4 or FP4 (4-bit), LLM.int8 (8-bit); others refused."""
    q = text.lower().strip()
    if re.fullmatch(rf"\W*(none|no|{UNSTATED})?\W*", q):
        return {}
    if re.fullmatch(r"(none|no( quantization)?|not quantized|unquantized)?\W*\(?\s*(fp16|bf16|fp32|float16|bfloat16|"
                    r"float32|half)?\s*\)?\W*", q):
        return {}  # "None (bf16)", "fp16", "no quantization": the base in a floating dtype
    if q == "qlora":
        q = "nf4"  # what QLoRA names (Dettmers et al. 2023)
    ckpt = re.search(r"\b(gptq|awq)\b", q)
    if ckpt:
        return {"checkpoint_quant": ckpt.group(1)}  # a pre-quantized base: its quantization_config says how
    other = re.search(r"\b(hqq|aqlm|eetq|exl2|gguf|quanto|fp8|mxfp4|nvfp4|bitnet|spqr|vptq|higgs)\b", q)
    if other:
        raise RowRefused("row_quantization_unsupported",
                         f"quantization '{text}' ({other.group(1)}) is not modelled (supported: bitsandbytes / torchao "
                         "nf4, fp4, int8; GPTQ and AWQ checkpoints)")
    out: dict[str, Any] = {}
    if "nf4" in q or "fp4" in q or re.search(r"4[- ]?bit", q):
        out["load_in_4bit"] = True
        out["bnb_4bit_quant_type"] = "fp4" if "fp4" in q and "nf4" not in q else "nf4"
        if "torchao" in q:
            out["quantization_backend"] = "torchao"
        if re.search(r"double[- ]quant|nested", q):
            out["bnb_4bit_use_double_quant"] = True
        storage = re.search(r"quant_storage\s*=?\s*(bf16|bfloat16|fp16|float16|fp32|float32)", base_text.lower())
        if storage:
            out["bnb_4bit_quant_storage"] = dtype_of(storage.group(1))
        return out
    if "int8" in q or re.search(r"8[- ]?bit", q):
        return {"load_in_8bit": True}
    raise RowRefused("row_quantization_unsupported",
                     f"quantization '{text}' is not modelled (supported: bitsandbytes / torchao nf4, fp4, int8; GPTQ "
                     "and AWQ checkpoints)")


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
    if re.search(r"all[- ]linear", t, flags=re.I) or re.fullmatch(r"all(\s+(modules|layers|linear layers))?", t, re.I):
        return "all-linear"
    t = re.sub(r"(final )?output projection|\bhead\b", " lm_head ", t, flags=re.I)
    words = [w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t)]
    skip = {"all", "and", "plus", "the", "incl", "including", "layers", "lora", "modules", "only", "on", "too", "also"}
    # the LoRA paper's W_q, W_v written as "q, v": the roles, which the engine maps to each model's modules
    short = {"q": "query", "k": "key", "v": "value", "o": "projection"}
    names = [short.get(w, w) for w in words if w not in skip]
    return list(dict.fromkeys(names)) or None


# Words for a group of projections: the attention's (self_attn, attn, qkv, qkvo) and the feed-forward's
GROUP_WORDS = {"attention": ("query", "key", "value", "projection"), "attn": ("query", "key", "value", "projection"),
               "self_attn": ("query", "key", "value", "projection"), "qkvo": ("query", "key", "value", "projection"),
               "qkv": ("query", "key", "value"), "ffn": ("mlp",), "feed_forward": ("mlp",)}


def peft_target_names(targets: list[str] | str | None, model: str, fw: str) -> list[str] | str | None:
    """A table's role words (query, value, attention, qkv, mlp...) as the module names PEFT matches on the catalog
    model (sizing.arch.target_aliases); names the model has stay, as does LitGPT's and torchtune's own naming, which
    the engine reads by role itself. PEFT matches module-name suffixes, so "q, v" of a Hugging Face run can only
    have been q_proj and v_proj (or the fused projection holding them)."""
    if not isinstance(targets, list) or fw in ("litgpt", "torchtune"):
        return targets
    arch = from_hf_config(models()[model.lower()].config)
    names = [m for n in targets for w in GROUP_WORDS.get(n, (n,)) for m in (target_aliases(arch, w) or (w,))]
    return list(dict.fromkeys(names))


# ms-swift's "--lora_target_modules DEFAULT": the model's registered default, its LoRATM (swift/llm/utils/model.py
# at cfcb67265, the commit of its benchmark, 2023-12-14): the fused or separate q/k/v projections, by architecture.
_SWIFT_QKV = ["q_proj", "k_proj", "v_proj"]
SWIFT_DEFAULT_TARGETS = {"qwen": ["c_attn"], "chatglm": ["query_key_value"], "baichuan": ["W_pack"],
                         "bloom": ["query_key_value"], "llama": _SWIFT_QKV, "mistral": _SWIFT_QKV,
                         "internlm": _SWIFT_QKV,
                         "mixtral": ["q_proj", "k_proj", "v_proj", "o_proj", "gate", "w1", "w2", "w3"]}


def swift_defaults(row: Mapping[str, str]) -> bool:
    """Whether the row is ms-swift's and leaves its LoRA targets to swift (DEFAULT, or nothing stated)."""
    stated = lower_col(row, "lora_target_modules")
    return bool(re.search(r"\b(ms-)?swift\b", lower_col(row, "framework"))) and \
        (not stated or bool(re.match(r"\W*default\b", stated)))


def swift_default_targets(row: Mapping[str, str], model: str) -> list[str] | None:
    """LoRA targets of an ms-swift row that leaves them to swift: its default for the catalog model's architecture
    (read only for such a row); None otherwise, or when swift registers no default for the architecture."""
    if not swift_defaults(row):
        return None
    return SWIFT_DEFAULT_TARGETS.get(from_hf_config(models()[model.lower()].config).model_type)


def framework(row: Mapping[str, str]) -> tuple[str, str | None]:
    """framework (+version): LitGPT, torchtune, TRL; a hand-written loop (train.py, accelerate loop,
    example scripts) is `custom`; the Trainer is `transformers`."""
    f, v = lower_col(row, "framework"), lower_col(row, "framework_version")
    # lit-llama: LitGPT's predecessor, its own model code (fp32 complex RoPE, full-logits loss), not LitGPT's
    own = re.search(r"unsloth|megatron|nemo\b|colossal|torchtitan|mlx|jax|maxtext|levanter|paxml|lit[-_ ]?llama", f)
    if own:
        raise RowRefused("row_framework_unsupported", f"framework '{row.get('framework')}' runs its own kernels and "
                         "memory savings, which are not modelled (supported: transformers / TRL / a PyTorch loop, "
                         "LitGPT, torchtune)")
    if re.search(r"lit[-_ ]?gpt", f):  # LitGPT's repository was Lightning-AI/lit-gpt until 2024
        return "litgpt", None
    if "torchtune" in f:
        return "torchtune", torchtune_version(v)
    if "trl" in f or "sfttrainer" in f:
        return "trl", trl_version(f"{f} {v}")
    # the release may be written in either column ("transformers 4.41.2" as the framework)
    if re.search(r"custom|loop|train\.py|example script|accelerate|fsdp_qlora", f):
        return "custom", transformers_version(v) or transformers_version(f)
    return "transformers", transformers_version(v) or transformers_version(f)


def transformers_version(text: str) -> str | None:
    """The transformers release a Hugging Face stack runs (frameworks.HF_STACKS): as stated ("transformers 4.37.2"),
    else the last release of _TRANSFORMERS_RELEASES on or before a stated date; None (the current one) otherwise."""
    return _release_of(text, "transformers", _TRANSFORMERS_RELEASES)


def _release_of(text: str, package: str, releases: tuple[tuple[tuple[int, int, int], str], ...],
                suffix: str = "") -> str | None:
    """The release of `package` the text states ("trl 0.9.6", "peft v0.19.2.dev0" with a dev `suffix` pattern), else
    the last of `releases` (date, name) on or before a date it states; None (the current one) otherwise."""
    m = re.search(rf"\b{package}\s*v?(\d+\.\d+(?:\.\d+)?{suffix})", text)
    if m:
        return m.group(1)
    date = row_date(text)
    if date is None or date < releases[0][0]:
        return None
    return [name for when, name in releases if date >= when][-1]


def row_date(text: str) -> tuple[int, int, int] | None:
    """The date a free-text column states: an ISO date ("2024-04-16"), else the latest month named with a year
    ("Feb-Mar 2024" -> the 28th of March)."""
    d = re.search(r"(20\d\d)-(\d\d)(?:-(\d\d))?", text)
    if d:
        return int(d.group(1)), int(d.group(2)), int(d.group(3) or 1)
    months = re.findall(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*[- ]", text.lower())
    year = re.search(r"\b(20\d\d)\b", text)
    if months and year:
        return int(year.group(1)), max(_MONTHS[m] for m in months), 28
    return None


# TRL's minor releases, dated by the commit of each tag (huggingface/trl): a run of TRL runs the release current on the
# date its row states when it names none. The engine follows the release (sizing/config.py: its loss before v1.7.0,
# SFTConfig's defaults, SFTTrainer's own preparation of a quantized base before v0.26.0).
_TRL_RELEASES = (((2023, 8, 30), "0.7.0"), ((2024, 3, 19), "0.8.0"), ((2024, 6, 5), "0.9.3"),
                 ((2024, 8, 29), "0.10.1"), ((2024, 9, 19), "0.11.0"), ((2024, 11, 1), "0.12.0"),
                 ((2024, 12, 15), "0.13.0"), ((2025, 1, 29), "0.14.0"), ((2025, 2, 13), "0.15.0"),
                 ((2025, 3, 22), "0.16.0"), ((2025, 4, 24), "0.17.0"), ((2025, 5, 27), "0.18.0"),
                 ((2025, 6, 20), "0.19.0"), ((2025, 7, 28), "0.20.0"), ((2025, 8, 5), "0.21.0"),
                 ((2025, 8, 29), "0.22.0"), ((2025, 9, 9), "0.23.0"), ((2025, 10, 15), "0.24.0"),
                 ((2025, 11, 5), "0.25.0"), ((2025, 12, 9), "0.26.0"), ((2026, 1, 15), "0.27.0"),
                 ((2026, 2, 10), "0.28.0"), ((2026, 2, 25), "0.29.0"), ((2026, 3, 30), "1.0.0"),
                 ((2026, 4, 11), "1.1.0"), ((2026, 4, 16), "1.2.0"), ((2026, 4, 26), "1.3.0"),
                 ((2026, 5, 8), "1.4.0"), ((2026, 5, 25), "1.5.0"), ((2026, 6, 11), "1.6.0"),
                 ((2026, 6, 25), "1.7.0"), ((2026, 7, 9), "1.8.0"), ((2026, 7, 21), "1.9.0"))


def trl_version(text: str) -> str | None:
    """The TRL release a run states ("trl 0.9.6"), else the last of _TRL_RELEASES on or before a date it states; None
    (the current one) otherwise."""
    return _release_of(text, "trl", _TRL_RELEASES)


# PEFT's minor releases, dated by the commit of each tag (huggingface/peft): a run names its release, else it ran
# the one current on the date its row states. The engine follows it (sizing/memory/regime.py adapter_dtype: before
# v0.12.0 new LoRA weights keep the base weight's floating dtype; frameworks.peft_release's other gates).
_PEFT_RELEASES = (((2023, 2, 10), "0.1.0"), ((2023, 3, 9), "0.2.0"), ((2023, 5, 4), "0.3.0"),
                  ((2023, 7, 17), "0.4.0"), ((2023, 8, 22), "0.5.0"), ((2023, 11, 2), "0.6.0"),
                  ((2023, 12, 6), "0.7.0"), ((2024, 1, 30), "0.8.0"), ((2024, 2, 28), "0.9.0"),
                  ((2024, 3, 21), "0.10.0"), ((2024, 5, 16), "0.11.0"), ((2024, 7, 24), "0.12.0"),
                  ((2024, 9, 25), "0.13.0"), ((2024, 12, 6), "0.14.0"), ((2025, 3, 19), "0.15.0"),
                  ((2025, 7, 3), "0.16.0"), ((2025, 8, 1), "0.17.0"), ((2025, 11, 13), "0.18.0"),
                  ((2026, 4, 14), "0.19.0"), ((2026, 7, 28), "0.20.0"))


def peft_version(row: Mapping[str, str]) -> str | None:
    """The PEFT release a row states ("peft 0.10.0", "peft v0.19.2.dev0"), else the last of _PEFT_RELEASES on or
    before the date it states; None (the current one) otherwise."""
    return _release_of(lower_col(row, "framework_version"), "peft", _PEFT_RELEASES, r"(?:\.?dev\d+)?")


def torchtune_version(text: str) -> str | None:
    """A stated 0.x version, or the release a stated date runs (the last tag on or before it)."""
    m = re.search(r"\bv?(0\.\d+(?:\.\d+)?)\b", text)
    if m:
        return m.group(1)
    date = row_date(text)
    if date is None:
        return None
    release = "0.0"  # before the first tag
    for when, name in _TORCHTUNE_RELEASES:
        if date >= when:
            release = name
    return release


# torchtune's recipe configs pass `fused: True` to every torch.optim.AdamW from "add fused = true to adam, except
# pagedAdam" (#1575, cca50f02e, 2024-09-14; in v0.3.1, not v0.3.0): 105 of the 107 AdamW configs at v0.4's README
# commit 1814feb17; none at 0217d44c2 (2024-05). Its README's full fine-tunes then peak with no foreach temporary.
_TORCHTUNE_FUSED = ((2024, 9, 14), (0, 3, 1))


def torchtune_fused(row: Mapping[str, str], opt: Mapping[str, Any]) -> dict[str, Any]:
    """adamw_torch_fused for a torchtune row naming torch's AdamW from the release whose configs fuse it (unless the
    row says fused=False); {} otherwise."""
    text = lower_col(row, "framework_version")
    if opt.get("optim") != "adamw_torch" or re.search(r"fused\s*[=:]?\s*false", lower_col(row, "optimizer")):
        return {}
    stated = re.search(r"\bv?0\.(\d+)(?:\.(\d+))?\b", text)
    date = row_date(text)
    if stated:
        late = (0, int(stated.group(1)), int(stated.group(2) or 0)) >= _TORCHTUNE_FUSED[1]
    else:
        late = date is not None and date >= _TORCHTUNE_FUSED[0]
    return {"optim": "adamw_torch_fused"} if late else {}


def optimizer(text: str) -> dict[str, Any]:
    """optim from the optimizer column: paged/8-bit bitsandbytes, SGD, Adafactor, fused or plain AdamW;
    optimizer_in_bwd and CPU offload when the column says so."""
    t = text.lower()
    out: dict[str, Any] = {}
    # The class is named in the main clause; asides in parentheses qualify it ("8-bit AdamW (config default
    # PagedAdamW8bit)" is the 8-bit AdamW) except for the fused flag, which sources write as an aside.
    main = re.sub(r"\([^)]*\)", " ", t)
    paged, eight = "paged" in main, bool(re.search(r"8[- ]?bit", main))
    unsupported = RowRefused("row_optimizer_unsupported", f"optimizer '{text}' is not modelled (supported: AdamW "
                             "fused/plain, bitsandbytes 8-bit / paged AdamW and Lion, Adafactor, SGD)")
    # Another family first: its 8-bit or paged variant ("galore_adamw_8bit", "paged_ademamix_8bit") keeps other
    # states than AdamW's (RMSprop one moment, AdEMAMix three, GaLore projected ones). Lion is bitsandbytes' (the
    # Trainer's lion_32bit / lion_8bit and paged variants; torch has none): one moment, 8- or 32-bit.
    if "lion" in main:
        out["optim"] = f"{'paged_' if paged else ''}lion_{'8' if eight else '32'}bit"
        return out
    if re.search(r"galore|schedule[- ]?free|apollo|adam[- ]?mini|\blomo|ademamix|rmsprop|adagrad|\blamb\b|\blars\b|"
                 r"sophia|\bmuon|prodigy|\bcame\b|dadapt|shampoo|\bsoap\b|\badan\b|novograd|\bradam|\bnadam|adamax",
                 main):
        raise unsupported
    if paged:
        out["optim"] = "paged_adamw_8bit" if eight else "paged_adamw_32bit"
    elif eight and "non-8bit" not in main:
        out["optim"] = "adamw_8bit"
    elif "sgd" in main:
        if re.search(r"nesterov|momentum\s*[=:]?\s*(0?\.\d*[1-9]|[1-9])", t):
            # torch.optim.SGD keeps a momentum_buffer per parameter once momentum != 0: not the engine's sgd
            raise RowRefused("row_optimizer_unsupported", f"optimizer '{text}' is not modelled (SGD is sized "
                             "without momentum, which keeps no state)")
        out["optim"] = "sgd"
    elif "adafactor" in main:
        out["optim"] = "adafactor"
    elif "lorafa" in main:  # peft optimizers/lorafa.py LoraFAOptimizer: AdamW's exp_avg/exp_avg_sq per param, a loop
        out["optim"] = "adamw_torch"
    elif re.search(r"(\b|fused)adam(w|\b)", main) and "default" not in main:  # torch Adam keeps AdamW's two moments
        # DeepSpeed's and Apex's FusedAdam: exp_avg / exp_avg_sq = zeros_like(p), stepped in place by one
        # multi_tensor_adam kernel (deepspeed/ops/adam/fused_adam.py), no temporary: torch's fused AdamW in memory
        fused = re.search(r"(?<!non-)(?<!non )fused(?!\s*=\s*false)", t) and not re.search(r"fused\s*=\s*false", t)
        out["optim"] = "adamw_torch_fused" if fused else "adamw_torch"
    elif main.strip() and not re.search(r"default|undocumented|not (stated|documented)|unknown|^\W*$", main):
        raise unsupported
    if re.search(r"optimizer_in_bwd\s*(=\s*)?true|fused into backward", t):
        out["optimizer_in_backward"] = True
    elif re.search(r"optimizer_in_bwd\s*(=\s*)?false", t):
        out["optimizer_in_backward"] = False
    if re.search(r"(?<!no )cpu offload", t):
        out["cpu_offload"] = True
    return out


# TrainingArguments' default optim: "adamw_hf" (transformers' own AdamW, a loop over parameters) until
# "Change default from adamw_hf to adamw_torch" (PR #25109, merged 2023-07-26, first in v4.32.0), torch's AdamW,
# which steps with foreach (one temporary the size of exp_avg_sq: memory/optimizer.py), until "Defaults to
# adamw_torch_fused for Pytorch>=2.8" (PR #37358, 2025-07): torch 2.8 was released on 2025-08-06, after v4.55.0.
_TORCH_ADAMW_DEFAULT = ((2023, 7, 26), (4, 32))
_FUSED_DEFAULT = ((2025, 8, 6), (4, 56))


def trainer_default_optim(row: Mapping[str, str], fw: str, version: str | None) -> dict[str, Any]:
    """optim for a Trainer / TRL row that names no optimizer: the default of the transformers release it ran
    (stated, else the row's date); {} when neither is known (the engine's default, today's fused AdamW). Before
    v4.32 the per-parameter loop's temporaries are one tensor at a time: sized as the fused step (none)."""
    if fw not in ("transformers", "trl"):
        return {}
    stated = re.match(r"(\d+)\.(\d+)", version or "")
    date = row_date(lower_col(row, "framework_version"))
    if stated:
        release = (int(stated.group(1)), int(stated.group(2)))
        old, fused = release < _TORCH_ADAMW_DEFAULT[1], release >= _FUSED_DEFAULT[1]
    elif date is not None:
        old, fused = date < _TORCH_ADAMW_DEFAULT[0], date >= _FUSED_DEFAULT[0]
    else:
        return {}
    return {} if old or fused else {"optim": "adamw_torch"}


def precision(row: Mapping[str, str], fw: str) -> dict[str, Any]:
    """torch_dtype from base_weight_dtype; bf16/fp16 autocast from mixed_precision ("bf16-true", "pure",
    "none", "no autocast" mean no autocast; a bare "bf16" or "--bf16 True" means autocast)."""
    out: dict[str, Any] = {}
    dtype = dtype_of(row.get("base_weight_dtype", "")) or dtype_of(row.get("mixed_precision", ""))
    if dtype:
        out["torch_dtype"] = dtype
    mp = lower_col(row, "mixed_precision")
    if re.search(r"\bfp8\b|float8|transformer[- _]engine|\bmxfp\d|\bnvfp4\b", mp):
        # FP8 matmuls keep scaled fp8 copies and amax histories that no bf16/fp16 path has
        raise RowRefused("row_precision_unsupported", f"mixed precision '{row.get('mixed_precision')}' is not "
                         "modelled (supported: fp32, bf16 or fp16 weights, with or without bf16/fp16 autocast)")
    if re.search(r"--bf16\s+true|bf16\s*=\s*true", mp):
        out["bf16"] = True
    elif re.search(r"--fp16\s+true|fp16\s*=\s*true", mp):
        out["fp16"] = True
    elif re.search(r"bf16-true|pure|\bnone\b|no autocast|'no'|\bno\b", mp):
        out["bf16"] = False
    elif re.search(r"bf16|bfloat16", mp):  # "bfloat16 AMP", torch.autocast(dtype=torch.bfloat16)
        out["bf16"] = True
    elif re.search(r"fp16|float16|\bhalf\b", mp):
        out["fp16"] = True
    return out


def sequences(row: Mapping[str, str]) -> dict[str, Any]:
    """max_seq_length from seq_len; packing when seq_len_mode says packed / fixed / every sample exactly /
    padded to max_length (all rows of one length), not when it says unpacked or padded to longest."""
    text = joined_thousands(row.get("seq_len", ""))
    # "512-2048", "avg 1500, max 2048": the longest sets the peak
    span = re.search(r"\d+\s*[kK]?\s*(?:-|–|to)\s*(\d+\s*[kK]?\b)", text) or \
        re.search(r"\bmax(?:imum)?\b\W*(\d+\s*[kK]?\b)", text, re.I)
    seq = first_int(span.group(1) if span else text)
    if seq is None:
        raise RowRefused("row_missing_field", "seq_len is not stated")
    mode = f"{lower_col(row, 'seq_len_mode')} {text.lower()}"  # "8192 (packed)" in the length's own column
    fixed = bool(re.search(r"(?<!un)pack(ed|ing)\b|\bfixed\b|exactly|forced|pad\w*(/\w+)?\W+(to\W+)?(the\W+)?"
                           r"max(imum)?[_ ]?length", mode))
    if re.search(r"unpacked|not packed|packing\s*=\s*false", mode):
        fixed = False
    return {"max_seq_length": seq, "packing": fixed}


# A GPU count written with the card: before it ("8x A100", "2 x RTX 4090"; not an instance name's "g5.2xlarge"), or
# after a model number, a memory size or a parenthesis ("T4 x2", "Kaggle T4x2", "A100 80GB x 8"; not "x86", nor the
# "X 980" of "GTX 980", whose X follows a letter, nor the memory size of "2x 40 GB").
COUNT_BEFORE = r"(?<![\w.])(\d+)(?=\s*[x×]\s*(?:[a-z]|\d+\s*gb))"
COUNT_AFTER = r"(?:(?<=\d)|(?<=\))|(?<=gb)|(?<=gib)|(?<=sxm)|(?<=pcie))\s*[x×]\s*(\d{1,3})(?![\w.]|\s*gi?b)"


def card_count(gpu_text: str) -> str:
    """The GPU count a gpu_model text writes with the card ("" when it writes none); gpu_text in lower case."""
    found = re.search(COUNT_BEFORE, gpu_text) or re.search(COUNT_AFTER, gpu_text)
    return found.group(1) if found else ""


def parallel(row: Mapping[str, str]) -> dict[str, Any]:
    """num_gpus (a config's "devices: N" over a table's count) and the sharding strategy."""
    n_text = lower_col(row, "num_gpus")
    if not re.search(r"\d", n_text):  # the count written with the card
        n_text = card_count(lower_col(row, "gpu_model"))
    dev = re.search(r"devices\s*:?\s*(\d+)", n_text)
    # nodes times GPUs per node: "2 nodes x 8 GPUs", "2 nodes, 8 GPUs each", "2x8"
    nodes = re.search(r"(\d+)\s*nodes?\W+(?:x\W*|×\W*)?(\d+)\s*(?:gpus?|devices?)", n_text) or \
        re.fullmatch(r"\s*(\d+)\s*[x×]\s*(\d+)\s*", n_text)
    n = int(dev.group(1)) if dev else int(nodes.group(1)) * int(nodes.group(2)) if nodes else (first_int(n_text) or 1)
    s = lower_col(row, "sharding")
    out: dict[str, Any] = {"num_gpus": n}
    if n == 1 and not re.search(r"offload", s):
        return out
    if re.search(r"device_map|pipeline|tensor[- _]?parallel|\btp\s*=|model[- ]parallel|megatron|zero[- ]?(stage[- ]?)?1"
                 r"\b|\bzero\+\+|\bcontext[- ]parallel", s):
        # layers split across the cards, tensors split inside layers, or only the optimizer's states sharded: each
        # GPU holds another share than any of the engine's strategies gives it
        raise RowRefused("row_parallelism_unsupported", f"sharding '{row.get('sharding')}' is not modelled "
                         "(supported: DDP, FSDP full / shard-grad-op / no-shard / hybrid within a node, ZeRO-2, "
                         "ZeRO-3, with CPU offload)")
    if re.search(r"no_shard|fsdp.*'ddp'", s):  # fsdp_qlora's "ddp" is FSDP ShardingStrategy.NO_SHARD
        out["parallelism"] = "fsdp_no_shard"
    elif re.search(r"'ddp'|\bddp\b", s):
        out["parallelism"] = "ddp"
    elif re.search(r"zero[- ]?(stage[- ]?)?3", s):
        out["parallelism"] = "zero3"
    elif re.search(r"shard_grad_op", s):
        out["parallelism"] = "fsdp_shard_grad_op"
    elif re.search(r"zero[- ]?(stage[- ]?)?2", s):
        out["parallelism"] = "zero2"
    elif "fsdp" in s or "hybrid" in s:  # HYBRID_SHARD shards within a node as FULL_SHARD does (one node: the same)
        out["parallelism"] = "fsdp"
    elif n > 1:
        out["parallelism"] = "ddp"
    if re.search(r"offload", s) and not re.search(r"no (cpu )?offload", s):
        out["cpu_offload"] = True
    return out


# torchtune recipe configs that set custom_sharded_layers: ['tok_embeddings', 'output'] (git grep of
# pytorch/torchtune recipes/configs at each tag v0.3.0-v0.6.1), with the first release that does.
_TORCHTUNE_SHARDED = {"llama3/8b_full": "0.3", "llama3/70b_full": "0.3", "llama3_1/8b_full": "0.3",
                      "llama3_1/70b_full": "0.3", "llama3/8b_qat_full": "0.5", "llama3_3/70b_full": "0.5",
                      "llama3_3/70b_full_multinode": "0.6"}


def sharded_layers(row: Mapping[str, str], version: str | None) -> dict[str, Any]:
    """torchtune's embedding and head as FSDP units of their own: the row says custom_sharded_layers, or names a
    recipe config that sets it at the row's release."""
    text = " ".join(row.values()).lower()
    if re.search(r"custom_sharded_layers\W+\[?'?(tok_embeddings|output)", text):
        return {"fsdp_shard_embeddings": True}
    for name in re.findall(r"configs/([\w/.]+?)\.yaml", text):
        first = _TORCHTUNE_SHARDED.get(name)
        if first and (version is None or _release(version) >= _release(first)):
            return {"fsdp_shard_embeddings": True}
    return {}


def _release(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


# LitGPT config_hub/finetune/*.yaml train.global_batch_size at 00af8b0d9 (the README the rows cite; 5895df1 holds the
# same values for the configs it has); any other config runs the finetune scripts' default TrainArgs(16).
_LITGPT_GLOBAL_BATCH = {
    **dict.fromkeys(("falcon-7b/lora", "falcon-7b/qlora", "llama-2-7b/lora", "llama-2-7b/qlora", "llama-3-8b/lora",
                     "llama-3-8b/qlora", "llama-3.1-8b/lora", "llama-3.1-8b/qlora", "llama-3.2-1b/lora",
                     "llama-3.2-1b/qlora", "llama-3.2-3b/lora", "llama-3.2-3b/qlora", "mistral-7b-v0.2/lora",
                     "mistral-7b-v0.2/qlora", "mistral-7b/lora", "mistral-7b/qlora", "phi-2/full", "phi-2/lora",
                     "phi-2/qlora", "phi-3/full", "phi-3/lora", "phi-3/qlora", "stablelm-base-alpha-3b/full",
                     "stablelm-base-alpha-3b/lora", "stablelm-base-alpha-3b/qlora", "tiny-llama/lora",
                     "tiny-llama/qlora"), 8),
    **dict.fromkeys(("gemma-2b/lora", "gemma-2b/qlora", "gemma-7b/lora", "gemma-7b/qlora", "gemma2-2b/lora",
                     "gemma2-2b/qlora", "gemma2-9b/lora", "gemma2-9b/qlora"), 6),
    **dict.fromkeys(("llama-2-7b/full", "llama-3-8b/full", "llama-3.1-8b/full", "llama-3.2-1b/full",
                     "llama-3.2-3b/full"), 64),
    "gemma-2b/full": 16, "tiny-llama/full": 32,
}
LITGPT_DEFAULT_GLOBAL_BATCH = 16  # litgpt finetune/{full,lora,adapter}.py TrainArgs(global_batch_size=16) at 5895df1


def litgpt_accumulation(row: Mapping[str, str], devices: int, micro: int) -> int:
    """LitGPT's global_batch_size // devices // micro_batch_size (args.py TrainArgs.gradient_accumulation_iters),
    global_batch_size from the config_hub file the row names."""
    found = re.findall(r"config_hub/finetune/([\w.-]+/\w+)\.yaml", " ".join(row.values()).lower())
    glob = next((_LITGPT_GLOBAL_BATCH[n] for n in found if n in _LITGPT_GLOBAL_BATCH), LITGPT_DEFAULT_GLOBAL_BATCH)
    return max(glob // devices // micro, 1)


def checkpointing(text: str, num_gpus: int) -> bool | None:
    """yes / no; "... if devices>1" follows the GPU count; unstated -> the framework's default."""
    t = text.lower()
    if re.search(r"if devices\s*>\s*1", t):
        return num_gpus > 1
    # use_reentrant is a setting of checkpointing itself: its value says nothing about whether it is on
    setting = re.search(r"use_reentrant", t)
    t = re.sub(r"use_reentrant\W*\w*", " ", t)
    if re.search(r"\bwithout\b", t):
        return False
    said = yes_no(t)
    if said is not None:
        return said
    if re.fullmatch(r"\W*(1|✓|✔)\W*", t) or setting or re.search(r"(activation|gradient) checkpointing|recompute", t):
        return True
    if re.fullmatch(r"\W*(0|✗|✘)\W*", t):
        return False
    return None


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
    if "flash" in t or re.search(r"\bfa[- ]?[23]\b", t):  # FlashAttention 3 saves what 2 does: no S x S scores
        return "flash_attention_2"
    if "eager" in t:
        return "eager"
    if re.fullmatch(rf"\W*({UNSTATED}|default)?\W*", t):
        return None  # the framework's own default
    return "sdpa"
