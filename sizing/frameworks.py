# What a training framework's own model code changes in memory, relative to transformers + PEFT.
# Derived from LitGPT 0.3.0 / torchtune 0.1.0 and 0.4.0 source and checked byte-exact on CPU with
# tiny models (per-layer saved bytes); see the guide's sources for each item.
from __future__ import annotations

from dataclasses import dataclass, replace

from .config import RunConfig, release
from .shapes import Architecture

TORCHAO_NF4_BYTES = 0.5 + 1 / 64 + 2 / (64 * 256)  # packed + int8 scalers + bf16 factor per 256 scalers
# torchao 0.1 keeps its factor as a view of the expanded one, a bf16 per 64-element block (memory/load.py
# NF4_QUANTIZE); torchtune's QLoRA tutorial at v0.1.0 measures it: LoRALinear(512, 512, rank=8, quantize_base=True)
# on CUDA holds 177,152 bytes (docs/source/tutorials/qlora_finetune.rst l.76; tests/physics/test_nf4_chunks.py).
TORCHAO_01_NF4_BYTES = 0.5 + 1 / 64 + 2 / 64


@dataclass(frozen=True)
class Profile:
    name: str
    expand_kv: bool = False  # k and v repeated to nh heads before SDPA (GQA saved at nh heads)
    keeps_fused_qkv: bool = False  # SDPA's v is a view of the fused qkv output, which stays alive
    out_proj_copy: bool = False  # o_proj's input is a copy of the attention output, not the same storage
    fused_lora_qkv: bool = False  # one dropout and one lora_A for all adapted q/k/v (LitGPT LoRAQKVLinear)
    holds_4bit_inputs: bool = False  # bitsandbytes 0.42 MatMul4Bit keeps its input in ctx.tensors
    previous_graph_alive: bool = False  # `logits` keeps the last micro-batch's logits and graph to the next return
    quantize_lm_head: bool = False
    quantize_only_adapted: bool = False  # torchtune 0.1: only LoRA bases are NF4
    torchao_nf4: bool = False
    dequant_copies: int = 1  # bnb 0.42 dequantizes to fp16 then casts to bf16: two copies
    separate_lm_head: bool = False  # the checkpoint converter copies a tied embedding into its own lm_head
    keeps_outputs: bool = False  # the loop's `out` holds logits (and the KV cache) until the next forward returns
    nf4_load_on_device: bool = False  # single-device QLoRA builds and quantizes the model on the GPU (memory/load.py)
    fsdp_broadcast: bool = True  # the FSDP wrap broadcasts rank 0's weights (sync_module_states=True)
    empties_cache: bool = False  # empty_cache() between the model's setup and training (no init blocks cached)
    nf4_layers_cloned: bool = False  # torchtune <= 0.3: one layer built, deep-copied num_layers times
    nf4_copy_replaces: bool = False  # torchtune 0.1: NF4 copy_ keeps the new tensors (torchao >= 0.3 copies in place)
    nf4_chunked: bool = False  # torchao >= 0.2 quantizes in chunks of 1024**2 elements (memory/load.py)
    nf4_copy_on_host: bool = False  # torchao 0.2-0.4: copy_ quantizes a CPU source on the CPU (memory/load.py)
    nf4_factor_view: bool = False  # torchao 0.1: the NF4 weight keeps the expanded factor (TORCHAO_01_NF4_BYTES)
    peak_reset_after_load: bool = False  # the recipe resets the peak counters after the model's setup (below)
    fsdp_no_sync: bool = False  # accumulation micro-batches run under FSDP no_sync: unsharded gradients accumulate
    # Without chunked CE, torchtune's model returns output(h).float() (its bf16 result is freed at once) and
    # 0.1-0.2 recipes keep a sliced contiguous fp32 copy in `logits` through backward (loss "fp32_logits");
    # from 0.3 they reshape it (a view), take the loss and `del logits` before backward.
    drops_fp32_logits: bool = False
    # torchtune 0.1's LoRA builders never hand lora_dropout to a LoRALinear (below): nn.Dropout(p=0.0) returns its
    # input, so no mask and no dropped copy exist whatever the config says.
    ignores_lora_dropout: bool = False
    # FSDP2 (fully_shard): each all-gather's output is copied into the unit's parameters on the compute stream
    # (torch/distributed/_composable/fsdp/_fsdp_collectives.py foreach_all_gather_copy_out: split_with_sizes_copy
    # after waiting for the all-gather); FSDP1's flat parameter is gathered in place and viewed (no copy).
    fsdp2: bool = False
    # transformers 5 stores a MoE layer's experts as fused 3-D parameters (MixtralExperts gate_up_proj / down_proj,
    # run by grouped_mm) and the router as a bare weight; 4.x had an nn.ModuleList of nn.Linear experts and an
    # nn.Linear router (models/mixtral/modeling_mixtral.py v4.46.0 MixtralBlockSparseTop2MLP): memory/weights.py
    fused_experts: bool = False


# transformers.Trainer: compute_loss returns the loss and drops `outputs` before backward (trainer.py
# training_step: compute_loss -> del inputs -> accelerator.backward). TRL's SFTTrainer subclasses it.
# Under FSDP it accumulates micro-batches inside accelerator.no_sync (trainer.py _inner_training_loop, transformers
# >= 4.46; accelerate accelerator.py no_sync: FSDP1 module.no_sync(), FSDP2 set_requires_gradient_sync(False)), so
# every GPU holds the whole unsharded gradients until the window's last backward (torch FSDP no_sync docstring:
# "FSDP will accumulate the full model gradients (instead of gradient shards)").
HF = Profile("transformers", fsdp_no_sync=True, fused_experts=True)
# A plain loop `out = model(**batch); out.loss.backward(); optimizer.step()` (the PEFT MetaMathQA harness,
# method_comparison/MetaMathQA/run.py): `out` keeps out.logits through backward and the optimizer step,
# and until the next `out = model(...)` has returned; without use_cache=False it also keeps the DynamicCache
# transformers builds from config.use_cache (modeling_llama.py LlamaModel.forward, utils/generic.py
# merge_with_config_defaults turns it off only under gradient checkpointing).
CUSTOM = Profile("custom", keeps_outputs=True, fused_experts=True)
# LitGPT 2024 (config hub benchmarks): fused qkv, GQA expanded, out-proj input copied; QLoRA through
# Fabric's BitsandbytesPrecision with bitsandbytes 0.42 (every nn.Linear, lm_head too, becomes 4-bit).
# Under FSDP it builds the model on the meta device (finetune/lora.py at 5895df1 l.170:
# fabric.init_module(empty_init=(devices > 1))), so every rank materialises its units; nothing is broadcast; its
# accumulation micro-batches run in fabric.no_backward_sync (finetune/full.py l.228), FSDP's no_sync under
# FSDPStrategy (lightning fabric strategies/fsdp.py _FSDPBackwardSyncControl).
LITGPT = Profile("litgpt", expand_kv=True, keeps_fused_qkv=True, out_proj_copy=True, fused_lora_qkv=True,
                 holds_4bit_inputs=True, previous_graph_alive=True, quantize_lm_head=True, dequant_copies=2,
                 separate_lm_head=True, fsdp_broadcast=False, fsdp_no_sync=True)
# torchtune single-device recipes instantiate the model on the GPU and quantize each base linear there with
# torchao's to_nf4, at init and again in load_state_dict (recipes/lora_finetune_single_device.py v0.1.0 l.254,
# v0.6.1 l.410: `with set_default_dtype(self._dtype), self._device:`); sizing/memory/load.py replays it.
# Its distributed recipes call training.cleanup_before_training() (gc, empty_cache, reset peaks) after the setup
# (recipes/lora_finetune_distributed.py v0.1.0 l.509, v0.6.1 l.752). Its single-device recipes log the memory
# right after the model's setup through get_memory_stats(device, reset_stats=True), which reads the peaks and then
# calls torch.cuda.reset_peak_memory_stats (utils/memory.py v0.1.0 l.163-196 memory_stats_log; training/memory.py
# v0.6.1 get_memory_stats; recipes/lora_finetune_single_device.py v0.1.0 l.299, v0.4.0 l.479, v0.6.1 l.491), and
# again at each logged step: the allocated and active peaks a run logs restart from what is allocated after the
# load, the reserved peak from what is reserved then (the cache the load left, no empty_cache on one device).
# torchao as each torchtune release installs it: 0.1.x pins torchao==0.1, 0.2.x torchao==0.3.1 (pyproject.toml at
# v0.1.0 / v0.2.0); from 0.3 it is unpinned ("pip install torch torchvision torchao", README v0.4.0 l.112), so the
# torchao stable at the release: 0.5.0 (2024-09-09) for torchtune 0.3.0 (2024-09-17), later ones after it.
# Loss without chunking (nn.CrossEntropyLoss): recipes/full_finetune_single_device.py v0.3.0 l.503-518, v0.4.0
# l.626-641 (`logits = self._model(...)`, reshape, `loss = self._loss_fn(logits, labels)`, `del logits`);
# modules/transformer.py v0.4.0 l.652 `output = self.output(h).float()`. Measured: test_torchtune_loss.py.
# Its distributed recipes shard with FSDP2 from 0.3 (training.shard_model -> fully_shard: full FT since afd23fd0
# "Full finetune FSDP2 recipe (#1287)", LoRA since 6deeda92 "LoRA FSDP2 recipe migration (#1517)", both first in
# v0.3.0); 0.1-0.2 wrap the model in FSDP1 (recipes/*_distributed.py v0.2.1 `model = FSDP(`).
TORCHTUNE = Profile("torchtune", expand_kv=True, torchao_nf4=True, nf4_load_on_device=True, empties_cache=True,
                    nf4_chunked=True, peak_reset_after_load=True, drops_fp32_logits=True, fsdp2=True)


# peft v0.12.0 (tag 2024-07-24) is the first release whose get_peft_model casts 16-bit adapters to fp32
# (autocast_adapter_dtype=True, commit ae1ae20b7 "Autocast adapter weights if fp16/bf16", PR #1706)
PEFT_AUTOCAST = (0, 12)
# from_pretrained without a dtype loads float32 up to transformers 4.x and the checkpoint's dtype ("auto") from 5.0
# (PR #42805 "Default auto", merged 2025-12-11, superseding #34919)
HF_DTYPE_AUTO = (5,)


def version(cfg: RunConfig) -> tuple[int, ...]:
    """framework_version as a tuple; an absent version means the current release."""
    return release(cfg.framework_version)


def peft_release(cfg: RunConfig) -> tuple[int, ...]:
    """peft_version as a tuple; an absent version means the current release."""
    return release(cfg.peft_version)


def profile(cfg: RunConfig) -> Profile:
    """The framework's named profile (its version where it matters)."""
    if cfg.framework == "litgpt":
        return LITGPT
    if cfg.framework == "torchtune":
        if version(cfg) < (0, 2):  # 0.1: only the bases of LoRA layers were NF4
            # utils/_register_nf4_dispatch_ops.py v0.1.0 l.22-40: copy_ swaps in the attributes of to_nf4(src)
            # models/llama2/_component_builders.py v0.1.0: lora_llama2 calls lora_llama2_mlp without lora_dropout
            # (l.215-221) and lora_llama2_self_attention builds its LoRALinear without dropout (l.320-327), so
            # LoRALinear keeps dropout=0.0 (modules/peft/lora.py); llama3 and mistral alike at v0.1.1; fixed by
            # commit 9f31a882 "fix: lora dropout applied to all models (#995)", 2024-05-17, first in v0.2.0
            return Profile("torchtune", expand_kv=True, torchao_nf4=True, quantize_only_adapted=True,
                           nf4_load_on_device=True, nf4_copy_replaces=True, nf4_layers_cloned=True,
                           empties_cache=True, peak_reset_after_load=True, nf4_factor_view=True,
                           ignores_lora_dropout=True)
        if version(cfg) < (0, 3):  # 0.2: torchao 0.3.1's copy_ quantizes the CPU checkpoint on the CPU
            # and still only LoRA bases are NF4: FrozenNF4Linear for the others came with commit 898670f0
            # "NF4 quantization of linear layers without LoRA applied (#1119)", 2024-07-29, first in v0.3.0
            # (v0.2.0 models/llama3/_component_builders.py l.320-345: nn.Linear unless the module has LoRA)
            # 0.2 has 0.1's loss path (v0.2.1 recipes l.448-458: slice, contiguous, transpose; no chunked CE)
            return replace(TORCHTUNE, nf4_layers_cloned=True, nf4_copy_on_host=True, quantize_only_adapted=True,
                           drops_fp32_logits=False, fsdp2=False)
        if version(cfg) < (0, 4):  # modules/transformer.py v0.3.0 l.335: layers = _get_clones(layers, num_layers)
            return replace(TORCHTUNE, nf4_layers_cloned=True)
        return TORCHTUNE
    base = CUSTOM if cfg.framework == "custom" else HF
    if cfg.framework in HF_STACKS and version(cfg) < (5,):
        base = replace(base, fused_experts=False)
    if cfg.framework in HF_STACKS and version(cfg) < BNB_FREES_4BIT_INPUT:
        return replace(base, holds_4bit_inputs=True)
    return base


# grouped_mm runs the fused experts from sm80 (transformers integrations/moe.py _can_use_grouped_mm: F.grouped_mm,
# torch >= 2.10); older cards take transformers' own fallback, whose backward allocates every expert weight's
# gradient even when the experts are frozen (_grouped_mm_fallback_bwd: zeros_like(weight)), not modelled.
GROUPED_MM_SM = (8, 0)


def moe_measured(cfg: RunConfig, sm: tuple[int, int] | None) -> bool:
    """Whether an MoE run is the one tests/physics measured op by op: Transformers 5's fused experts under
    grouped_mm (forward saved tensors within 1.3 %, a layer's backward within 5 %, weights to the byte), on a card
    of compute capability `sm` (None: unstated, a current one)."""
    return profile(cfg).fused_experts and (sm is None or sm >= GROUPED_MM_SM)


def compiles_plain_loss(cfg: RunConfig) -> bool:
    """Whether torch.compile reaches a loss that is not chunked (nn.CrossEntropyLoss). torchtune's compile_loss
    compiles CEWithChunkedOutputLoss in place (loss.compute_cross_entropy = torch.compile(...)) but any other loss
    as `loss = torch.compile(loss)`, a new module it returns (training/_compile.py v0.4.0 l.64-86); only
    lora_finetune_single_device keeps it (`self._loss_fn = training.compile_loss(self._loss_fn)`, v0.4.0 l.291).
    full_finetune_single_device (v0.4.0 l.288), full_finetune_distributed (l.299) and lora_finetune_distributed
    (l.302) call `training.compile_loss(self._loss_fn)` and drop the result: their nn.CrossEntropyLoss runs
    eagerly (the same lines at every tag v0.3.0-v0.6.1). Measured: test_torchtune_loss.py."""
    if cfg.framework != "torchtune":
        return cfg.torch_compile
    return cfg.torch_compile and cfg.is_peft and cfg.num_gpus == 1 and cfg.parallelism == "none"


# torchtune's RoPE keeps its cos/sin table as a non-persistent fp32 buffer built at init for the builder's
# max_seq_len (the checkpoint's max_position_embeddings in every builder checked): [max_seq_len, head_dim // 2, 2]
# (modules/position_embeddings.py v0.1.0 build_rope_cache; llama3_1/_position_embeddings.py v0.3.1), Qwen2 and
# Phi-3 [max_seq_len, 2 * head_dim] (models/qwen2/_positional_embeddings.py, phi3/... v0.4.0 l.63). The builders
# hand TransformerDecoder one layer that it deep-copies num_layers times (modules/transformer.py _get_clones), so
# every layer holds its own table; the Llama 3.1 builder shares one RoPE from v0.3.1 (pytorch/torchtune#1554,
# "saves 2GiB for llama 3_1"), Llama 3.2's was shared from its first release. Measured: test_torchtune_rope.py.
# fp32 values per position per head_dim, for the families whose builders were read (v0.1.0-v0.5.0); others: none
ROPE_TABLE_FLOATS = {"llama": 1, "mistral": 1, "gemma": 1, "qwen2": 2, "phi3": 2}


# transformers' own RoPE modules kept cos and sin caches as non-persistent buffers, one pair per attention layer,
# each [max_position_embeddings, head_dim] in the default dtype at the model's construction (from_pretrained's
# torch_dtype): LlamaRotaryEmbedding._set_cos_sin_cache (v4.37.2 models/llama/modeling_llama.py l.134-146) and
# its "For BC" _cos_cached/_sin_cached (v4.39.0 and v4.40.0 l.111-113); v4.38.0 registers none (l.101, only
# inv_freq) and v4.41.0 dropped them. Mistral keeps cos_cached/sin_cached through v4.41.0 (modeling_mistral.py
# l.114-115 in v4.37.2, v4.38.0, v4.39.3, v4.40.0, v4.41.0); v4.42.0 registers only inv_freq. FSDP and ZeRO-3
# shard parameters, not buffers: every GPU holds them whole. The releases that hold them, per model_type:
# [first, end) transformers versions.
HF_ROPE_CACHES = {"llama": (((0,), (4, 38)), ((4, 39), (4, 41))), "mistral": (((0,), (4, 42)),)}
# The stacks whose framework_version is the transformers release (a hand-written loop runs its models too).
HF_STACKS = ("transformers", "custom")
# A forward with use_cache (config.use_cache, true by default; transformers turns it off under gradient checkpointing)
# builds a DynamicCache, and each attention's cache.update returns what it stores. From 4.56.0 the first update
# concatenates k and v onto an empty tensor, a copy (cache_utils.py v4.56.0 DynamicLayer.update l.114-117:
# lazy_initialization, then torch.cat); up to 4.55.4 it stored and returned the tensors themselves (l.99
# `self.keys = key_states`). Measured on the CPU (transformers 5.24, tests/physics/test_kv_cache_copy.py): with the
# cache, Phi-3, GPT-NeoX and CodeGen layers save (q + kv) fewer values a token, their fused qkv output no longer
# kept through v's view (Phi-3 to the byte per layer: tests/physics/test_activations.py).
HF_CACHE_COPIES = (4, 56)
# The Trainer's evaluation forward runs with config.use_cache, which builds a DynamicCache of every layer's k and v
# (eval mode: no checkpointing to turn it off) until it is turned off: transformers 5.0 sets config.use_cache from
# TrainingArguments.use_cache, false by default (trainer.py "Finalize", PR #41585, "[Trainer] [Breaking change]
# use_cache default to False"), and TRL 0.22 passes use_cache=False in every SFTTrainer.compute_loss (commit
# b08bc7f33, PR #3891, first in v0.22.0).
TRAINER_NO_CACHE = (5,)
SFT_NO_CACHE = (0, 22)


# eval_steps falls back to logging_steps (training_args.py, 5.24: "Fall back to logging_steps if eval_steps is unset"),
# 500 in TrainingArguments; SFTConfig's is 10 from TRL 0.19.0 ("New defaults: logging_steps=10", PR #3514, commit
# b0eff324a, `git tag --contains`).
SFT_LOGGING_10 = (0, 19)
SFT_SHARDED_NO_AUTOCAST = (0, 9, 3)  # #1654 (commit e4ed7a3a5), first in v0.9.3
# The module names peft_module_casting_to_bf16 casts back ("embed_tokens", "wte", "wpe"; "lm_head"), by model_type:
# the families whose embedding or head is named otherwise keep them fp32
SFT_CAST_EMBED_KEPT = ("bloom", "falcon", "gpt_neox")
SFT_CAST_HEAD_KEPT = ("gpt_neox",)


def logging_steps(cfg: RunConfig) -> int:
    """The trainer's default logging_steps, which an unset eval_steps takes."""
    return 10 if cfg.framework == "trl" and version(cfg) >= SFT_LOGGING_10 else 500


def eval_builds_cache(cfg: RunConfig, use_cache: bool) -> bool:
    """Whether the Trainer's evaluation forward builds a KV cache (config.json's use_cache: `use_cache`)."""
    if cfg.framework == "trl":
        return use_cache and version(cfg) < SFT_NO_CACHE
    return use_cache and cfg.framework == "transformers" and version(cfg) < TRAINER_NO_CACHE
# bitsandbytes' MatMul4Bit kept its input in ctx.tensors = (A, B) whenever A or B needed a gradient
# (autograd/_functions.py 0.42.0 l.523, 0.43.0 l.523, 0.43.1 l.516) until commit 9e753741 "fix QLoRA mem bug:
# delete useless buffered activation (#1270)", 2024-07-16, first in 0.43.2 (tag 2024-07-23): ctx.tensors = (None, B).
# A transformers release runs with the bitsandbytes current when it came out (as torchtune's torchao above):
# every release before 4.43.0 (2024-07-23) predates 0.43.2, so its QLoRA layers keep their 4-bit matmuls' inputs.
BNB_FREES_4BIT_INPUT = (4, 43)


# The causal-LM loss of older transformers releases (memory/loss.py). In the releases below, per model_type, the
# model's forward upcast its logits unconditionally and returned the fp32 tensor (`logits = logits.float()` right
# after lm_head: modeling_llama.py v4.31.0 l.825 (none in v4.28.1), v4.38.2 l.1196, v4.45.2 l.1214; mistral from its
# first release, v4.34.0 l.1059; qwen2 v4.38.2 l.1187; gemma l.1088; gemma2 v4.45.2 l.1073; phi3 v4.45.2 l.1285;
# mixtral v4.45.2 l.1309). From the end release self.loss_function (ForCausalLMLoss) upcasts a local copy and the
# output keeps the projection's dtype (modeling_llama.py v4.46.0 l.1210-1214). Mistral kept its own loss, upcasting
# `logits` in place of the output's, through v4.47.1 (modeling_mistral.py v4.46.0 l.1085, v4.47.1 l.1090;
# loss_function from v4.48.0 l.852); Starcoder2 through v4.46. [first, end) transformers versions.
HF_UPCAST = {"llama": ((4, 31), (4, 46)), "qwen2": ((0,), (4, 46)), "gemma": ((0,), (4, 46)),
             "gemma2": ((0,), (4, 46)), "phi3": ((0,), (4, 46)), "mixtral": ((0,), (4, 46)),
             "qwen2_moe": ((0,), (4, 46)), "phi": ((0,), (4, 46)), "starcoder2": ((0,), (4, 47)),
             "mistral": ((0,), (4, 48))}
# Both losses shifted the fp32 logits, `logits[..., :-1, :].contiguous()` (a B(S-1) x V copy), until ForCausalLMLoss
# padded the labels instead (loss/loss_utils.py v4.48.0 l.36-43; v4.49.0 l.36-46).
HF_SHIFTED_UNTIL = (4, 49)


def hf_logits(cfg: RunConfig, model_type: str) -> str:
    """The transformers loss path of a Hugging Face stack's release: "upcast" (the forward returns fp32 logits and
    the loss shifts them), "shifted" (ForCausalLMLoss upcasts and shifts a copy), "current" (it pads the labels).
    Releases and model types whose forward was not read (Llama before 4.31 kept bf16 logits) take the current path."""
    if cfg.framework not in HF_STACKS or model_type not in HF_UPCAST:
        return "current"
    v = version(cfg)
    first, end = HF_UPCAST[model_type]
    if first <= v < end:
        return "upcast"
    return "shifted" if end <= v < HF_SHIFTED_UNTIL else "current"


def rope_tables(cfg: RunConfig, arch: Architecture, load_bytes: int = 4) -> tuple[int, int]:
    """RoPE cos/sin buffers on the GPU: (bytes of one table, tables); (0, 0) elsewhere or without RoPE.
    torchtune's (fp32, below) or the per-layer caches of a transformers release that has them (HF_ROPE_CACHES),
    in the dtype the model was built in (`load_bytes`)."""
    if cfg.framework in HF_STACKS and arch.max_positions:
        v = version(cfg)
        if any(lo <= v < hi for lo, hi in HF_ROPE_CACHES.get(arch.model_type, ())):
            return 2 * arch.max_positions * arch.head_dim * load_bytes, arch.layers
        return 0, 0
    floats = ROPE_TABLE_FLOATS.get(arch.model_type, 0)
    if cfg.framework != "torchtune" or not arch.max_positions or not floats:
        return 0, 0
    table = 4 * arch.max_positions * arch.head_dim * floats
    # "0.3" is the 0.3 series: the fix landed on main 2024-09-12 and every 0.3 release after 0.3.0 has it
    shared = arch.rope_type == "llama3" and version(cfg) >= (0, 3) and version(cfg) != (0, 3, 0)
    return table, 1 if shared else arch.layers
