# Warnings: things the user should know about a run, each with a stable code for translation.
from __future__ import annotations

from typing import Any

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .memory.regime import Regime


def _w(code: str, message: str, **params: Any) -> dict[str, Any]:
    return {"code": code, "message": message, "params": params}


def collect_warnings(cfg: RunConfig, arch: Architecture, reg: Regime, gpu: Gpu | None,
                     detail: dict[str, int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if reg.quant == "4bit" and cfg.bnb_4bit_compute_dtype == "float32" and reg.autocast:
        out.append(_w("bnb_compute_fp32", "bnb_4bit_compute_dtype is float32 (the BitsAndBytesConfig default): "
                      "4-bit layers dequantize to fp32; set it to bfloat16"))
    if cfg.quantized and cfg.prepare_model_for_kbit_training and not cfg.gradient_checkpointing:
        out.append(_w("kbit_prep_checkpointing", "prepare_model_for_kbit_training switches gradient checkpointing "
                      "on (reentrant); the estimate includes it"))
    if cfg.quantized and cfg.prepare_model_for_kbit_training:
        out.append(_w("kbit_prep_fp32", "prepare_model_for_kbit_training up-casts embeddings, norms and lm_head "
                      "to fp32 and makes the residual stream fp32"))
    if detail["paged_optimizer_bytes"]:
        out.append(_w("paged_optimizer", "paged optimizer states live in CUDA managed memory: PyTorch's counters "
                      "do not see them and they move to host RAM under pressure",
                      bytes=detail["paged_optimizer_bytes"]))
    if not cfg.packing:
        out.append(_w("padded_upper_bound", "without packing, batches are padded to their longest sample: the "
                      "estimate is for a batch whose longest sample reaches max_seq_length"))
    if arch.experts:
        out.append(_w("moe_approximate", "mixture-of-experts activations are approximate; LoRA all-linear does "
                      "not reach fused expert weights in transformers 5"))
    if cfg.num_gpus > 1 and cfg.parallelism in ("fsdp", "zero3"):
        out.append(_w("sharding_approximate", "sharded runs: per-GPU weights include two gathered layers and "
                      "FSDP's unsharded root unit (embeddings, LM head) [approximate]", num_gpus=cfg.num_gpus))
    if cfg.torch_compile:
        out.append(_w("compile_approximate", "torch.compile fuses kernels and changes what is saved: approximate"))
    if gpu is not None:
        if cfg.bf16 and gpu.supports.get("bf16") is False:
            out.append(_w("gpu_no_bf16", f"{gpu.name} has no bf16 support: use fp16 with loss scaling", gpu=gpu.id))
        if reg.attention == "flash_attention_2" and gpu.supports.get("flash_attention_2") is False:
            out.append(_w("gpu_no_flash_attention_2", f"{gpu.name} does not support FlashAttention-2", gpu=gpu.id))
        if cfg.quantized and gpu.supports.get("bitsandbytes") is False:
            out.append(_w("gpu_no_bitsandbytes", f"bitsandbytes does not support {gpu.name}", gpu=gpu.id))
    return out
