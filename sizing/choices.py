# The configuration's vocabulary: the values its choice fields accept and the combinations of values it refuses.
# Standard library only and no import from the rest of `sizing`: the trial recipe embeds it with contract.py.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

METHODS = ("full", "lora", "qlora", "lora8")
# The PEFT tuner trained on the (full-precision, 4-bit or 8-bit) base of a non-full method: peft 0.21.2
# tuners/<name>; lora_fa = LoRA with lora_A frozen (peft optimizers/lorafa.py); sizing/memory/peft_methods.py.
PEFT_TYPES = ("lora", "lora_fa", "adalora", "ia3", "vera", "loha", "lokr", "oft", "boft", "prompt_tuning",
              "prefix_tuning", "ln_tuning", "miss", "gralora", "shira", "hra", "delora", "hira",
              "fourierft", "randlora", "pvera", "c3a", "beft", "road", "waveft", "p_tuning",
              "vblora", "unilora", "deft", "lily", "peanut", "tinylora", "glora", "psoft",
              "trainable_tokens", "adamss", "adaption_prompt", "frod", "osf")
GLORA_AB, GLORA_C, GLORA_DE = ("lora", "vector", "constant", "none"), ("lora", "vector", "none"), ("vector", "constant",
                                                                                                  "none")
MISS_INITS = ("default", "bat", "mini")  # MissConfig.init_weights: True (or False: random), "bat", "mini"
ROAD_VARIANTS = ("road_1", "road_2", "road_4")  # RoadConfig.variant: 1, 2 or 4 x out_features parameters per layer
DTYPES = ("bfloat16", "float16", "float32")
# transformers/trl are the Hugging Face stack; custom = a plain PyTorch loop over a transformers model
# (no accelerate output conversion); litgpt/torchtune follow their own model code (sizing/frameworks.py).
FRAMEWORKS = ("transformers", "trl", "custom", "litgpt", "torchtune")
ATTENTION = ("sdpa", "flash_attention_2", "eager")
OPTIMIZERS = ("adamw_torch", "adamw_torch_fused", "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit",
              "paged_adamw_32bit", "adamw_bnb", "adafactor", "sgd", "lion_32bit", "lion_8bit", "paged_lion_32bit",
              "paged_lion_8bit")
# The choices the Trainer builds from bitsandbytes (its adamw_bnb_8bit, paged_* and lion_* OptimizerNames): one fused
# kernel per tensor (time/step_ops.py), and a trial needs bitsandbytes installed for them (recipes/trial/config.py).
BNB_OPTIMIZERS = ("adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "paged_adamw_32bit", "adamw_bnb", "lion_32bit",
                  "lion_8bit", "paged_lion_32bit", "paged_lion_8bit")
# fsdp_no_shard: FSDP ShardingStrategy.NO_SHARD (fsdp_qlora's "ddp"): replicated like DDP, no buckets;
# fsdp_shard_grad_op: SHARD_GRAD_OP (FSDP2 reshard_after_forward=False): units stay gathered from forward to backward.
PARALLELISM = ("none", "ddp", "fsdp", "zero2", "zero3", "fsdp_no_shard", "fsdp_shard_grad_op")
# hf: full logits upcast to fp32 (transformers); chunked_ce: LitGPT / torchtune chunked cross-entropy;
# fused_linear_ce: TRL >= 1.15 / Liger (no logits); fp32_logits: torchtune 0.1 (model returns fp32 logits).
LOSSES = ("hf", "chunked_ce", "fused_linear_ce", "fp32_logits")
# TrainingArguments.eval_strategy (IntervalStrategy): evaluation passes during training, or none
EVAL_STRATEGIES = ("no", "steps", "epoch")
# What the Trainer keeps of each evaluation batch's logits for compute_metrics: all of them, or what a
# preprocess_logits_for_metrics returning logits.argmax(-1) leaves (transformers' run_clm.py example)
PREDICTIONS = ("none", "argmax")
# Spellings of a dtype people paste from torch / TrainingArguments; normalised to the canonical name.
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "torch.bfloat16": "bfloat16",
                 "torch.float16": "float16", "torch.float32": "float32", "half": "float16", "float": "float32"}


# Why each of these tuners fails on a 4/8-bit base. RoAd's bitsandbytes layers cast x, not the result, back
# (tuners/road/bnb.py): float32 outputs, which break attention without autocast. PEANuT builds its update from
# W.T.to(fp32), TinyLoRA makes its vector in the weight's dtype, PSOFT factorizes the weight at init ("PSOFT init
# requires float32/float16/bfloat16"), GLoRA's exact type check takes a plain nn.Linear only.
KBIT_REFUSED = {
    "road": "returns float32 outputs from its bitsandbytes layers",
    "peanut": "builds its update from the base weight, which is stored packed",
    "tinylora": "makes its vectors in the base weight's dtype, which is packed as integers",
    "psoft": "factorizes the base weight at init, which is stored as integers",
    "glora": "adapts plain nn.Linear layers only, not bitsandbytes' layers",
    "adamss": "makes its factors in the base weight's dtype, which is packed as integers",
    "frod": "makes its parameters in the base weight's dtype, which is packed as integers",
    "osf": "takes the SVD of the base weight at init, which is stored as integers",
}


@dataclass(frozen=True)
class Conflict:
    """A refused combination: when every `when` field holds one of its values, `field` may not be `value`."""

    when: tuple[tuple[str, tuple[Any, ...]], ...]
    field: str
    value: Any
    message: str  # str.format template over the configuration's values


CONFLICTS: tuple[Conflict, ...] = (
    Conflict((("bf16", (True,)),), "fp16", True, "bf16 and fp16 cannot both be true"),
    Conflict((("method", ("qlora",)),), "load_in_8bit", True,
             "method qlora loads the base in 4 bits; load_in_8bit must be false"),
    Conflict((("method", ("qlora",)),), "load_in_4bit", False, "method qlora needs load_in_4bit"),
    Conflict((("method", ("lora8",)),), "load_in_4bit", True,
             "method lora8 loads the base in 8 bits; load_in_4bit must be false"),
    Conflict((("method", ("full", "lora")),), "load_in_4bit", True,
             "load_in_4bit needs method qlora or lora8, not {method}"),
    Conflict((("method", ("full", "lora")),), "load_in_8bit", True,
             "load_in_8bit needs method qlora or lora8, not {method}"),
    Conflict((("method", ("full",)),), "use_dora", True, "use_dora applies to LoRA methods, not full fine-tuning"),
    *(Conflict((("method", ("full",)),), "peft_type", t, "peft_type applies to PEFT methods, not full fine-tuning")
      for t in PEFT_TYPES[1:]),
    *(Conflict((("framework", ("litgpt", "torchtune")),), "peft_type", t,
               "{framework} trains its own LoRA, not PEFT's {peft_type}") for t in PEFT_TYPES[1:]),
    *(Conflict((("peft_type", (t,)),), "use_dora", True, "use_dora is a LoRA option, not one of peft_type {peft_type}")
      for t in PEFT_TYPES[1:]),
    # Tuners PEFT 0.21 cannot put on a 4/8-bit bitsandbytes base (each tried on CPU, bitsandbytes 0.50.2): refused
    *(Conflict((("method", ("qlora", "lora8")),), "peft_type", t, f"peft_type {t} {why} on a {{method}} base "
               "(PEFT 0.21); use method lora") for t, why in KBIT_REFUSED.items()),
    # torchtune's custom_sharded_layers wraps the embedding and the head as FSDP units of a FULL_SHARD model
    # (parallel.py models it there only): elsewhere it would be ignored, so it is refused.
    Conflict((("parallelism", tuple(p for p in PARALLELISM if p != "fsdp")),), "fsdp_shard_embeddings", True,
             "fsdp_shard_embeddings applies to parallelism fsdp (full sharding), not {parallelism}"),
    # The evaluation pass modelled is the Trainer's (transformers, trl): the other loops evaluate their own way
    *(Conflict((("framework", ("custom", "litgpt", "torchtune")),), "eval_strategy", v,
               "eval_strategy is a setting of the transformers and trl trainers; the evaluation of {framework} "
               "is not modelled") for v in EVAL_STRATEGIES[1:]),
    # compute_metrics acts in the evaluation pass, which eval_strategy "no" leaves out of the run
    Conflict((("eval_strategy", ("no",)),), "compute_metrics", True,
             "compute_metrics is used by the evaluation pass: set eval_strategy to steps or epoch"),
)
