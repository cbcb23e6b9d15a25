# Warnings: things the user should know about a run, each with a stable code and parameters, so the
# page can say it in the reader's language (the message here is the English text of the command line).
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .frameworks import moe_measured
from .memory.adapters import resolve_targets
from .memory.regime import Regime
from .memory.timeline import EVAL_CONCAT, EVAL_HELD
from .memory.weights import grouped_experts
from .step import eval_batch, eval_kept_sequences


def _w(code: str, message: str, **params: Any) -> dict[str, Any]:
    return {"code": code, "message": message, "params": params}


# The logits and the loss are worth a warning once they are this share of the peak: then a chunked or
# fused cross-entropy, not a smaller adapter or optimizer, is what lowers memory.
LOGITS_SHARE = 0.25


def collect_warnings(cfg: RunConfig, arch: Architecture, reg: Regime, gpu: Gpu | None,
                     detail: dict[str, int], parts: Mapping[str, int], phase: str = "",
                     what: str = "") -> list[dict[str, Any]]:
    """`parts`: the components at the peak; `phase` and `what`: the peak moment's (timeline.Moment)."""
    out: list[dict[str, Any]] = []
    # the kept predictions set an evaluation peak at their own moments, or at the last batch's loss when they are
    # most of what it holds
    held = parts.get("logits_and_loss", 0)
    kept = phase == "eval" and (what in (EVAL_CONCAT, EVAL_HELD) or 2 * detail.get("eval_kept_bytes", 0) > held)
    if kept:
        out.append(_kept_warning(cfg, held))
    elif phase == "eval":
        batch, seq = eval_batch(cfg), cfg.max_seq_length
        out.append(_w("eval_peak", f"the evaluation pass sets the peak: {batch} sequences of {seq} tokens per GPU "
                      "(per_device_eval_batch_size), without gradients but with their logits and loss at once; a "
                      "smaller evaluation batch lowers it", batch=batch, seq=seq))
    total = sum(parts.values())
    logits = parts.get("logits_and_loss", 0)
    if total and logits >= LOGITS_SHARE * total and not kept:
        percent = round(100 * logits / total)
        out.append(_w("logits_dominate", f"the logits and the loss are {percent}% of the peak: a chunked or fused "
                      "cross-entropy (loss_implementation) or fewer tokens per micro-batch lowers it",
                      percent=percent))
    if reg.quant == "4bit" and cfg.bnb_4bit_compute_dtype == "float32" and reg.autocast:
        out.append(_w("bnb_compute_fp32", "bnb_4bit_compute_dtype is float32 (the BitsAndBytesConfig default): "
                      "4-bit layers dequantize to fp32; set it to bfloat16"))
    if cfg.quantized and cfg.prepare_model_for_kbit_training and not cfg.gradient_checkpointing:
        out.append(_w("kbit_prep_checkpointing", "prepare_model_for_kbit_training switches gradient checkpointing "
                      "on (reentrant); the estimate includes it"))
    if cfg.quantized and cfg.prepare_model_for_kbit_training:
        out.append(_w("kbit_prep_fp32", "prepare_model_for_kbit_training up-casts embeddings, norms and lm_head "
                      "to fp32 and makes the residual stream fp32"))
    if reg.half_mismatch:
        cast = "bfloat16" if cfg.bf16 else "float16"
        out.append(_w("half_mismatch", f"the weights load in {reg.load_dtype} but autocast computes in {cast}: it "
                      "saves a cast copy of every weight it multiplies and the residual stream becomes fp32 (both in "
                      f"the estimate); loading in {cast} (torch_dtype) avoids both", load=reg.load_dtype, cast=cast))
    if detail["paged_optimizer_bytes"]:
        out.append(_w("paged_optimizer", "paged optimizer states live in CUDA managed memory: PyTorch's counters "
                      "do not see them and they move to host RAM under pressure",
                      bytes=detail["paged_optimizer_bytes"]))
    if not cfg.packing:
        # The replay is of one shape: the longest batch first, as the trial recipe orders them and the Trainer's
        # group_by_length=True does (trainer_pt_utils.get_length_grouped_indices puts the longest element first).
        # Longer batches after shorter ones leave the shorter ones' blocks cached: scripts/length_ladder.py replays
        # that and meets ms-swift's published benchmark (Qwen-7B-Chat at 2048: 19.8 GiB one shape, 25.3 rising
        # lengths, 27.7 measured).
        out.append(_w("padded_upper_bound", "without packing, batches are padded to their longest sample: the "
                      "estimate is for the longest batch, reaching max_seq_length, coming first (as the trial recipe "
                      "and the Trainer's group_by_length=True order them); longer batches after shorter ones leave "
                      "the shorter ones' freed blocks cached and reserved memory grows past the estimate, most with "
                      "a large vocabulary"))
    if arch.experts and cfg.is_peft and cfg.peft_type == "lora" and (cfg.lora_dropout or cfg.use_dora) \
            and any(grouped_experts(lin, reg) for lin in resolve_targets(cfg, arch)[0]):
        # peft 0.21 tuners/lora/layer.py ParamWrapper.__init__: "does not work with lora_dropout != 0" (and DoRA)
        out.insert(0, _w("moe_experts_dropout", "PEFT cannot adapt transformers 5's fused experts with "
                         "lora_dropout > 0 or DoRA: get_peft_model raises ValueError; set lora_dropout to 0 or leave "
                         "the experts out of target_modules"))
    if arch.experts and reg.profile.fused_experts and arch.experts_targetable:
        out.append(_w("moe_fused_experts", "transformers 5's fused experts are not quantized by bitsandbytes (load "
                      "dtype, fp32 after prepare_model_for_kbit_training) and PEFT's all-linear adapts them"))
    elif arch.experts and reg.profile.fused_experts:
        out.append(_w("moe_experts_not_adapted", "gpt-oss's experts and router are not nn.Linear modules: PEFT's "
                      "target_modules (all-linear too) adapt only its attention projections (LoRA on the experts "
                      "through target_parameters is not modelled), and bitsandbytes does not quantize them (load "
                      "dtype, fp32 after prepare_model_for_kbit_training)"))
    if arch.experts and not moe_measured(cfg, gpu.sm if gpu is not None else None):
        out.append(_w("moe_approximate", "mixture-of-experts activations are approximate: this framework's experts "
                      "(or transformers' fallback on a card before sm80) are not measured op by op"))
    if cfg.num_gpus > 1 and cfg.parallelism in ("fsdp", "zero3", "fsdp_shard_grad_op"):
        out.append(_w("sharding_approximate", "sharded runs: per-GPU weights include two gathered layers and "
                      "FSDP's unsharded root unit (embeddings, LM head) [approximate]", num_gpus=cfg.num_gpus))
    if arch.attn_logit_softcap and cfg.attn_implementation == "sdpa":
        # memory/regime.py resolve: no framework runs soft-capped scores through SDPA
        out.append(_w("softcap_eager", "this model soft-caps its attention scores, which SDPA cannot do: "
                      "transformers, LitGPT and torchtune run eager attention (batch x heads x seq x seq scores per "
                      "layer, estimated); flash_attention_2 caps inside its kernel"))
    if cfg.torch_compile:
        out.append(_w("compile_approximate", "torch.compile fuses kernels and changes what is saved: approximate"))
    if gpu is not None:
        if cfg.bf16 and gpu.supports.get("bf16") is False:
            out.insert(0, _w("gpu_no_bf16", f"{gpu.name} has no bf16 hardware: PyTorch up to 2.2 refuses a bf16 run "
                             "there (torch.autocast, TrainingArguments), later releases emulate bf16, slowly; set fp16 "
                             "with the weights loaded in float16 (LoRA and QLoRA: the same memory, with loss scaling; "
                             "full fine-tuning under fp16 needs fp32 weights, since GradScaler refuses fp16 gradients)",
                             gpu=gpu.id, gpu_name=gpu.name))
        if reg.attention == "flash_attention_2" and gpu.supports.get("flash_attention_2") is False:
            out.append(_w("gpu_no_flash_attention_2", f"{gpu.name} does not support FlashAttention-2", gpu=gpu.id,
                          gpu_name=gpu.name))
        if cfg.quantized and gpu.supports.get("bitsandbytes") is False:
            out.append(_w("gpu_no_bitsandbytes", f"bitsandbytes does not support {gpu.name}", gpu=gpu.id,
                          gpu_name=gpu.name))
    return out


def does_not_fit(gpu: Gpu, shortfall: int) -> dict[str, Any]:
    return _w("does_not_fit", f"does not fit {gpu.name}: {shortfall / 2**30:.2f} GiB short; the fit table (`fit`) "
              "lists larger cards, the fewest GPUs, the largest micro-batch and the longest sequence that fit",
              gpu=gpu.id, gpu_name=gpu.name, bytes=shortfall)


def load_above_logged_peak(load: int, logged: int) -> dict[str, Any]:
    """torchtune's model load allocates more than the step, but its log resets the peaks after the load."""
    return _w("load_above_logged_peak", f"the model load (NF4 quantization on the GPU) allocates {load / 2**30:.2f} "
              f"GiB, more than the training step's {logged / 2**30:.2f} GiB; torchtune resets the peak counters after "
              "the model's setup, so its logged peak_memory_alloc does not show it, but the card must hold it (the fit "
              "verdict counts it)", bytes=load, logged_bytes=logged)


def _kept_warning(cfg: RunConfig, held: int) -> dict[str, Any]:
    """The evaluation's predictions for compute_metrics set the peak (`held`: the moment's logits and predictions):
    concatenated (the kept ones twice for a moment), kept as a list, or one batch's (batch_eval_metrics, or a chunk
    of one batch), each with its remedies."""
    _, chunk, sequences = eval_kept_sequences(cfg)
    seq, gib = cfg.max_seq_length, f"{held / 2**30:.2f} GiB"
    if chunk > 1 and cfg.eval_do_concat_batches:
        return _w("eval_predictions", f"the evaluation's predictions for compute_metrics set the peak: it keeps "
                  f"the predictions and labels of {sequences} sequences of {seq} tokens on the GPU (until "
                  "eval_accumulation_steps batches or the whole set have passed), and adding each batch's to them "
                  f"holds them twice: {gib}; a preprocess_logits_for_metrics that keeps the argmax, a smaller "
                  "eval_accumulation_steps or batch_eval_metrics lowers it",
                  sequences=sequences, seq=seq, bytes=held)
    if chunk > 1:
        return _w("eval_predictions_list", f"the evaluation's predictions for compute_metrics set the peak: it keeps "
                  f"the predictions and labels of {sequences} sequences of {seq} tokens on the GPU, batch by batch "
                  f"(until eval_accumulation_steps batches or the whole set have passed): {gib}; a "
                  "preprocess_logits_for_metrics that keeps the argmax, a smaller eval_accumulation_steps or "
                  "batch_eval_metrics lowers it", sequences=sequences, seq=seq, bytes=held)
    return _w("eval_predictions_batch", f"one evaluation batch's predictions and labels for compute_metrics set the "
              f"peak: {sequences} sequences of {seq} tokens gathered from every GPU, {gib}; a "
              "preprocess_logits_for_metrics that keeps the argmax or a smaller per_device_eval_batch_size lowers it",
              sequences=sequences, seq=seq, bytes=held)
