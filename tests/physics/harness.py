"""CPU measurement harness: the physical truth the `sizing` engine is held to.

Builds tiny decoder LMs from config dicts with random weights (nothing is downloaded and nothing
is cached on disk), applies one fine-tuning regime, runs ONE training step the way
`transformers.Trainer(bf16=True)` does it, and measures tensor bytes. Derived from
`shared/design/verify_saved_tensors.py` (same tracker, same saved-tensors recorder, same CUDA
autocast shim for peft's bitsandbytes LoRA layers); the physics is `shared/design/memory-model.md`.

The training step (memory-model.md sections 0 and 4.2):
  forward under torch.autocast(bf16) + accelerate's convert_to_fp32 on the outputs, loss from
  model(**batch, labels=...), backward, clip_grad_norm_(1.0), fused AdamW step, zero_grad.

What is measured (all in bytes unless said otherwise):
  param_bytes                  sum(p.numel()*p.element_size()) over model.parameters()
                               (adapters included, tied weights once, bnb quant state NOT included)
  quant_state_bytes            bitsandbytes absmax/code/... tensors (not parameters), reported apart
  trainable_params             count of elements of parameters with requires_grad
  gradient_bytes               sum of p.grad bytes right after backward
  optimizer_state_bytes        tensor states with numel > 1 after optimizer.step() (no scalar `step`)
  layer_saved_bytes_per_token  bytes saved for backward by one middle decoder layer (mean of layers
                               1..L-1, dedup by storage, parameters/buffers excluded, token-independent
                               constants such as autocast weight copies included) / N, N = B*S;
                               only measured without checkpointing (None with it)
  retained_activation_bytes    live tensor bytes after forward+loss once the model outputs are
                               dropped, minus the live bytes at step start

Checkpointing follows what the configured run really does: gradient_checkpointing=True is
transformers' non-reentrant default; method qlora with prepare_model_for_kbit_training=true calls
peft's function with its defaults, which switches on *reentrant* checkpointing by itself
(memory-model.md section 2), so that run is checkpointed even with gradient_checkpointing=False.

Run it alone to print the table:  .venv-physics/bin/python tests/physics/harness.py [--quick]
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import transformers  # noqa: E402

from sizing.memory.allocator import CachingAllocator, _Block  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

# ----------------------------------------------------------------------------------------------
# Tiny models: the HF config dicts (exactly what is handed to the engine as "model_config")

B, S = 2, 256
N = B * S
LORA_R, LORA_ALPHA = 16, 32

_COMMON = dict(
    vocab_size=8192,  # small: CPU bf16 matmuls are slow, and the loss terms (12*N*V) stay moderate
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=2,
    max_position_embeddings=4096,
)

# Gemma 2 / 3 at this size: explicit head_dim (nh*d = 512 != hidden), GeGLU, a 128-token window (below S)
_GEMMA_WINDOWED = dict(
    **_COMMON,
    head_dim=64,
    hidden_activation="gelu_pytorch_tanh",
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    attention_bias=False,
    query_pre_attn_scalar=64,
    sliding_window=128,
)

MODEL_CONFIGS: dict[str, dict] = {
    # Llama: RMSNorm (weight * x.to(bf16)), SwiGLU, untied head, no biases
    "llama": dict(
        model_type="llama",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
    ),
    # Qwen2: q/k/v projections carry a bias (always, not a config switch), untied head
    "qwen2": dict(
        model_type="qwen2",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        use_sliding_window=False,
    ),
    # Qwen3: q_norm / k_norm (RMSNorm over head_dim) on q and k, no biases, untied head
    "qwen3": dict(
        model_type="qwen3",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        use_sliding_window=False,
    ),
    # Gemma (v1): tied embeddings, explicit head_dim (nh*d = 512 != hidden), GeGLU (gelu tanh),
    # (1 + w) RMSNorm computed in fp32, embeddings scaled by sqrt(hidden)
    "gemma": dict(
        model_type="gemma",
        **_COMMON,
        head_dim=64,
        hidden_act="gelu_pytorch_tanh",
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        attention_bias=False,
    ),
    # Gemma 2: Gemma's (1 + w) norms and GeGLU, plus norms on the sublayer outputs, soft-capped attention scores and
    # logits (tanh), sliding-window attention on every other layer (window below S, so its mask is real); transformers
    # has no SDPA path for capped scores (Gemma2PreTrainedModel._supports_sdpa = False): the default is eager
    "gemma2": dict(model_type="gemma2", **_GEMMA_WINDOWED, attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
    # Gemma 3 with a sliding window (128) below S: every layer here is a windowed one (5 of each 6), so SDPA gets a
    # mask and k/v repeated to every head (memory/regime.py beyond_window)
    "gemma3_window": dict(model_type="gemma3_text", **_GEMMA_WINDOWED),
    # Transformers 5 MoE: fused 3-D experts run by grouped_mm (F.grouped_mm on the CPU with torch >= 2.10, as on
    # CUDA from sm80: transformers integrations/moe.py _can_use_grouped_mm), the router a bare weight
    "mixtral": dict(
        model_type="mixtral",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        num_local_experts=4,
        num_experts_per_tok=2,
    ),
    # Qwen3-MoE: Qwen3's attention (q_norm / k_norm) and experts of their own width, top-k weights renormalised
    "qwen3_moe": dict(
        model_type="qwen3_moe",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=344,
        norm_topk_prob=True,
    ),
    # gpt-oss: biased q/k/v/o, a sink logit per head (eager attention only: transformers refuses sdpa for it),
    # biased experts with a clamped SwiGLU under grouped_mm, a biased router, sliding-window layers in between
    "gpt_oss": dict(
        model_type="gpt_oss",
        **{**_COMMON, "intermediate_size": 344},
        head_dim=32,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attention_bias=True,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=128,
    ),
    # OLMo 2: no pre-norms (the projections read the residual stream), RMSNorms on the attention and MLP outputs,
    # q_norm / k_norm over the whole q and k projections, (weight * x).to(dtype) norms, untied head, no biases
    "olmo2": dict(
        model_type="olmo2",
        **_COMMON,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
    ),
    # GLM-4: an RMSNorm before and after each sublayer, q/k/v biased (o not), fused gate_up, RoPE on half of head_dim
    # with interleaved cos/sin (GLM's apply_rotary_pos_emb)
    "glm4": dict(
        model_type="glm4",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attention_bias=True,
        partial_rotary_factor=0.5,
        pad_token_id=0,
    ),
    # EXAONE 4: OLMo 2's layer with Llama's RMSNorm and per-head q/k norms; no RoPE on its full layer (the fourth)
    "exaone4": dict(
        model_type="exaone4",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    ),
    # Phi-3: one qkv_proj, one gate_up_proj whose output halves are the gate and up, untied head
    "phi3": dict(
        model_type="phi3",
        **_COMMON,
        head_dim=32,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        pad_token_id=0,
    ),
}

# Llama with eager attention: its float mask [B, 1, S, S] is a checkpointed layer's input (masking_utils.eager_mask)
MODEL_CONFIGS["llama_eager"] = MODEL_CONFIGS["llama"]
# OLMo 3: OLMo 2's layer with sliding-window attention on three layers in four (Olmo3Config.layer_types), its default
# window (4096) above S: every layer attends as OLMo 2's does
MODEL_CONFIGS["olmo3"] = {**MODEL_CONFIGS["olmo2"], "model_type": "olmo3"}
# OLMo 3 with a 128-token window below S on every layer: SDPA gets the window's mask and k/v repeated to every head, as
# Gemma 3's windowed layers (memory/regime.py beyond_window)
MODEL_CONFIGS["olmo3_window"] = {**MODEL_CONFIGS["olmo3"], "sliding_window": 128,
                                 "layer_types": ["sliding_attention"] * _COMMON["num_hidden_layers"]}

STYLES = ("llama", "qwen2", "qwen3", "gemma")
# Models built with another attention than "sdpa": None is transformers' default, which the engine's "sdpa" default
# must resolve the same way (Gemma 2: eager); a name is handed to both
ATTENTION: dict[str, str | None] = {"gemma2": None, "llama_eager": "eager", "gpt_oss": None}
MOE_STYLES = ("mixtral", "qwen3_moe", "gpt_oss")  # the activation tests' MoE cases (harness.moe_cases)

# regime -> (engine method, adapter dtype, memory-model.md regime letter)
REGIMES = {
    "full": ("full", None, "A"),  # bf16 weights, everything trainable (autocast is a no-op)
    "lora_fp32": ("lora", "float32", "C"),  # bf16 base, PEFT default fp32 adapters (autocast_adapter_dtype)
    "lora_bf16": ("lora", "bfloat16", "D"),  # bf16 base, bf16 adapters (autocast_adapter_dtype=False)
    # NF4 + double quant, compute bf16, PEFT default fp32 adapters.
    "qlora": ("qlora", "float32", "D"),  # no prepare_model_for_kbit_training (bf16 non-quantized params)
    "qlora_prep": ("qlora", "float32", "E"),  # with prepare_model_for_kbit_training (fp32 non-quantized)
    # TRL before 0.26 (SFTTrainer's own preparation): prepare_model_for_kbit_training with the run's checkpointing
    # (reentrant), fp32 adapters, then peft_module_casting_to_bf16 (norms fp32, embeddings and LM head back to bf16)
    "qlora_trl": ("qlora", "float32", "E"),
    # a float16 checkpoint loaded with dtype="auto" and trained under bf16 autocast (half_mix_cases)
    "full_fp16w": ("full", None, "A"),
    "lora_fp16w": ("lora", "float32", "C"),
}


def weight_dtype(regime: str) -> str:
    """The dtype the (non-quantized) base is loaded in: float16 for the *_fp16w regimes, else bfloat16."""
    return "float16" if regime.endswith("_fp16w") else "bfloat16"


def hf_config(style: str):
    d = dict(MODEL_CONFIGS[style])
    model_type = d.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **d)


def _bnb_available() -> tuple[bool, str]:
    try:
        import bitsandbytes  # noqa: F401
        import bitsandbytes.functional as F

        w = torch.randn(64, 64, dtype=torch.bfloat16)
        q, st = F.quantize_4bit(w, quant_type="nf4", compress_statistics=True)
        F.dequantize_4bit(q, st)
        return True, ""
    except Exception as e:  # pragma: no cover - depends on the install
        return False, f"bitsandbytes 4-bit does not work on this CPU: {type(e).__name__}: {e}"


def cases(quick: bool = False):
    """(style, regime, lora_dropout, gradient_checkpointing) tuples the physics tests cover."""
    out = []
    for style in STYLES:
        for gcm in (False, True):
            out.append((style, "full", 0.0, gcm))
            for rg in ("lora_fp32", "lora_bf16"):
                for dp in (0.0, 0.05):
                    out.append((style, rg, dp, gcm))
    if _bnb_available()[0]:
        for rg in ("qlora", "qlora_prep"):
            for dp in (0.0, 0.05):
                for gcm in (False, True):
                    out.append(("llama", rg, dp, gcm))
        out += [("llama", "qlora_trl", 0.05, gcm) for gcm in (False, True)]
    if quick:
        out = [c for c in out if c[2] == 0.0]
    return out


def moe_cases():
    """The MoE models' cases: bf16 full fine-tuning and LoRA (fp32 and bf16 adapters) on all-linear, which reaches
    the fused experts and the router, with and without checkpointing (PEFT refuses lora_dropout on the experts)."""
    return [(style, rg, 0.0, gcm) for style in MOE_STYLES if style != "gpt_oss"
            for rg in ("full", "lora_fp32", "lora_bf16") for gcm in (False, True)]


def gpt_oss_cases():
    """gpt-oss's cases: all-linear reaches only its attention projections (PEFT maps no v4 names onto its experts), so
    LoRA takes dropout and bitsandbytes quantizes q/k/v/o alone: bf16 full fine-tuning, LoRA (fp32 and bf16 adapters)
    without and with dropout and, where bitsandbytes runs, QLoRA with and without prepare_model_for_kbit_training,
    with and without checkpointing."""
    regimes = ("lora_fp32", "lora_bf16") + (("qlora", "qlora_prep") if _bnb_available()[0] else ())
    return [("gpt_oss", "full", 0.0, gcm) for gcm in (False, True)] + [
        ("gpt_oss", rg, dp, gcm) for rg in regimes for dp in (0.0, 0.05) for gcm in (False, True)]


def olmo2_cases():
    """OLMo 2's cases: bf16 full fine-tuning, LoRA (fp32 and bf16 adapters) and, where bitsandbytes runs, QLoRA
    (with and without prepare_model_for_kbit_training), without and with dropout, on all-linear, with and without
    checkpointing."""
    regimes = ("lora_fp32", "lora_bf16") + (("qlora", "qlora_prep") if _bnb_available()[0] else ())
    return [("olmo2", "full", 0.0, gcm) for gcm in (False, True)] + [
        ("olmo2", rg, dp, gcm) for rg in regimes for dp in (0.0, 0.05) for gcm in (False, True)]


def family_cases(style: str):
    """A further family's cases: bf16 full fine-tuning, LoRA (fp32 adapters with dropout, bf16 adapters) and, where
    bitsandbytes runs, QLoRA with prepare_model_for_kbit_training, on all-linear, with and without checkpointing."""
    regimes = (("full", 0.0), ("lora_fp32", 0.05), ("lora_bf16", 0.0)) + (
        (("qlora_prep", 0.0),) if _bnb_available()[0] else ())
    return [(style, rg, dp, gcm) for rg, dp in regimes for gcm in (False, True)]


def olmo3_cases():
    """OLMo 3's cases: family_cases within its window; past a window on every layer, full fine-tuning and bf16 LoRA,
    with and without checkpointing."""
    return family_cases("olmo3") + [
        ("olmo3_window", rg, 0.0, gcm) for rg in ("full", "lora_bf16") for gcm in (False, True)]


def window_cases():
    """A sequence past the sliding window under SDPA (Gemma 3, all four layers windowed): full fine-tuning and LoRA
    (bf16 and fp32 adapters, dropout), with and without checkpointing."""
    return [("gemma3_window", rg, dp, gcm) for rg, dp in (("full", 0.0), ("lora_bf16", 0.0), ("lora_fp32", 0.05))
            for gcm in (False, True)]


def eager_cases():
    """Eager attention's cases: Gemma 2 (soft-capped scores, capped logits, sublayer-output norms, two masks) in bf16
    full fine-tuning and LoRA (fp32 and bf16 adapters), without and with dropout, on all-linear, with and without
    checkpointing; Llama with eager attention (one mask) in full fine-tuning and bf16 LoRA."""
    gemma2 = [("gemma2", "full", 0.0, gcm) for gcm in (False, True)] + [
        ("gemma2", rg, dp, gcm) for rg in ("lora_fp32", "lora_bf16") for dp in (0.0, 0.05) for gcm in (False, True)]
    return gemma2 + [("llama_eager", rg, 0.0, gcm) for rg in ("full", "lora_bf16") for gcm in (False, True)]


def half_mix_cases():
    """A float16 base under bf16 autocast (Llama): full fine-tuning and LoRA with PEFT's fp32 adapters, with and
    without checkpointing: autocast casts every weight, and the residual stream promotes to fp32."""
    return [("llama", rg, 0.0, gcm) for rg in ("full_fp16w", "lora_fp16w") for gcm in (False, True)]


def engine_config(style: str, regime: str, dropout: float = 0.0, gc_on: bool = False) -> dict:
    """The `sizing.load_config` input that describes the measured run."""
    method, adapter_dtype, _ = REGIMES[regime]
    cfg = {
        "model_config": dict(MODEL_CONFIGS[style]),
        "method": method,
        "torch_dtype": weight_dtype(regime),
        "bf16": True,
        "max_seq_length": S,
        "per_device_train_batch_size": B,
        "packing": True,
        "gradient_checkpointing": gc_on,
        "attn_implementation": ATTENTION.get(style) or "sdpa",
        "optim": "adamw_torch_fused",
        "framework": "transformers",
    }
    if method in ("lora", "qlora"):
        cfg.update(
            {
                "r": LORA_R,
                "lora_alpha": LORA_ALPHA,
                "lora_dropout": dropout,
                "target_modules": "all-linear",
                "adapter_dtype": adapter_dtype,
            }
        )
    if method == "qlora":
        cfg.update(
            {
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
                "bnb_4bit_compute_dtype": "bfloat16",
                "prepare_model_for_kbit_training": regime in ("qlora_prep", "qlora_trl"),
            }
        )
    if regime == "qlora_trl":  # the release whose SFTTrainer prepares the model itself (frameworks.sft_prepares)
        cfg.update({"framework": "trl", "framework_version": "0.25.0"})
    return cfg


# ----------------------------------------------------------------------------------------------
# CUDA autocast shim: peft's bnb LoRA layers call torch.is_autocast_enabled() without a device,
# which reports only CUDA autocast; on CPU that would take the non-CUDA code path (an extra input
# cast). Inside a measurement the no-argument call also reports CPU autocast, as on a GPU.


@contextlib.contextmanager
def cuda_autocast_shim():
    orig = torch.is_autocast_enabled

    def _is_autocast_enabled(*args, **kwargs):
        if not args and not kwargs:
            return orig("cpu") or orig("cuda")
        return orig(*args, **kwargs)

    torch.is_autocast_enabled = _is_autocast_enabled
    try:
        yield
    finally:
        torch.is_autocast_enabled = orig


# ----------------------------------------------------------------------------------------------
# The same tracker as source text, for the probes the multi-process tests (gloo ranks) run as scripts: `Live`
# maps each storage its dispatched ops made and still alive to (bytes, weakref) in `live` and lists
# ("m", bytes, op) / ("f", bytes, "") in `events`. An output sharing an input's storage (a view, a detach) is
# not an allocation unless views=True.
LIVE_TRACKER = """
import weakref
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

class Live(TorchDispatchMode):
    def __init__(self, views=False):
        super().__init__(); self.live = {}; self.events = []; self.views = views
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        held = set() if self.views else {
            id(t.untyped_storage()) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            st = t.untyped_storage()
            k, n = id(st), st.nbytes()
            if n == 0 or k in self.live or k in held:
                continue
            def _gone(_r, k=k, n=n):
                if self.live.pop(k, None) is not None:
                    self.events.append(("f", n, ""))
            self.live[k] = (n, weakref.ref(st, _gone))
            self.events.append(("m", n, str(func.overloadpacket.__name__)))
        return out
"""

# The launcher of the two-rank probes, appended to a probe script that defines
# `main(rank, world, out, init, *args)`: the ranks meet through a file store next to the output (init is its
# file:// URL), the output path and each further command-line argument (JSON, see run_probe) handed to every
# rank. A file, not a TCP port: a port the parent picks and frees can be taken by another probe's gloo
# listener before rank 0 binds it, and two probes running side by side then abort each other (SIGABRT,
# "terminate called without an active exception", seen once in CI).
SPAWN_MAIN = """
if __name__ == "__main__":
    import json, sys
    import torch.multiprocessing
    _init = "file://" + sys.argv[1] + ".store"
    torch.multiprocessing.spawn(main, args=(2, sys.argv[1], _init, *(json.loads(a) for a in sys.argv[2:])), nprocs=2)
"""


def run_probe(tmp_path, script: str, *args, timeout: int = 300):
    """Run a probe script in a fresh interpreter as `script OUT ARG...` (each ARG as JSON), fail with its stderr
    when it fails, and return the JSON it wrote to OUT."""
    __tracebackhide__ = True
    path, out = tmp_path / "probe.py", tmp_path / "out.json"
    path.write_text(script)
    argv = [sys.executable, str(path), str(out), *(json.dumps(a) for a in args)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


def totals(**measured: int):
    """sizing.parallel.Totals for a probe's model: the byte counts it measured, every other one 0."""
    from sizing.parallel import Totals

    zero = dict(base=0, quant_state=0, adapters=0, gradients=0, optimizer=0, layer_unit=0, root_unit=0, layer_grads=0)
    return Totals(**{**zero, **measured})


# ----------------------------------------------------------------------------------------------
# Test speed: bf16 matrix products computed in fp32


class Fp32Matmul(TorchDispatchMode):
    """bf16 mm/addmm/bmm computed in fp32 and rounded back to a new contiguous bf16 tensor, as the kernel returns.
    On a CPU without bf16 matrix instructions (AVX2 only, as CI's) PyTorch's bf16 kernel runs at 0.4-2 GFLOP/s, 10-90x
    slower than fp32 (a [512, 8192] x [8192, 256] product: 2.8 s against 0.03 s), and a tiny model's backward spent
    about 95 % of a measurement there. What autograd saves, the tensors' shapes and dtypes, and so every byte a
    measurement records, are decided above this level: only the values' last bits can differ. So it runs only where
    values decide no shape: a backward that recomputes no MoE routing (harness.MOE_STYLES under checkpointing)."""

    OPS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if (func in self.OPS and not kwargs
                and all(isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 and a.device.type == "cpu"
                        for a in args)):
            return func(*(a.float() for a in args)).to(torch.bfloat16)
        return func(*args, **(kwargs or {}))


# ----------------------------------------------------------------------------------------------
# Live-tensor tracker (like torch.distributed._tools.mem_tracker.MemTracker)


class LiveMem(TorchDispatchMode):
    """Bytes of live tensor storages created by dispatched ops (weakrefs on storages), and their sequence:
    events holds ("m", bytes) when a storage is first seen and ("f", bytes) when it is freed."""

    def __init__(self):
        super().__init__()
        self.live = {}
        self.cur = 0
        self.peak = 0
        self.events = []

    def add(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        try:
            st = t.untyped_storage()
        except Exception:
            return
        k = id(st)
        if k in self.live:
            return
        n = st.nbytes()

        def _cb(_ref, k=k, n=n):
            if self.live.pop(k, None) is not None:
                self.cur -= n
                self.events.append(("f", n))

        self.live[k] = (n, weakref.ref(st, _cb))
        self.cur += n
        self.events.append(("m", n))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            self.add(t)
        if self.cur > self.peak:
            self.peak = self.cur
        return out


class _OpTrace(LiveMem):
    """LiveMem that remembers the live bytes after every op once switched on."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False
        self.after: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.on:
            self.after.append(self.cur)
        return out


def layer_backward_peak(m, index: int, inputs: dict, autocast: bool) -> int:
    """One training step of model m (in train mode) on `inputs`; the live tensor bytes from the moment the gradient
    of decoder layer `index`'s output exists until its input's gradient does: the high-water mark above the bytes
    live at the start, plus the incoming gradient itself (tests/physics/test_layer_backward.py says what that
    includes)."""
    m.train()
    layer = [mod for mod in m.modules() if type(mod).__name__.endswith("DecoderLayer")][index]
    tr = _OpTrace()
    marks: dict[str, int] = {}
    first = [True]

    def start(g: torch.Tensor) -> None:  # the gradient of the layer's output exists: its backward begins
        marks.setdefault("start", len(tr.after))
        marks.setdefault("base", tr.cur)
        marks.setdefault("grad_in", g.untyped_storage().nbytes())

    def end(_g: torch.Tensor) -> None:  # the gradient of its input exists: its backward is over
        marks.setdefault("end", len(tr.after))

    def hooks(_mod, args, kwargs, out):
        if not first[0]:
            return  # the recompute under checkpointing runs the forward again
        first[0] = False
        (out[0] if isinstance(out, tuple) else out).register_hook(start)
        kwargs.get("hidden_states", args[0] if args else None).register_hook(end)

    layer.register_forward_hook(hooks, with_kwargs=True)
    for t in list(m.parameters()) + list(m.buffers()) + list(inputs.values()):
        tr.add(t)
    gc.collect()
    with Fp32Matmul(), tr:  # the tracker innermost: it sees each product's result, not its fp32 copies
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = m(**inputs)
        loss = out.loss
        del out
        gc.collect()
        tr.on = True
        loss.backward()
    return max(tr.after[marks["start"]:marks["end"]]) - marks["base"] + marks["grad_in"]


def engine_layer_backward(cfg: dict) -> int:
    """The engine's figure for layer_backward_peak on the CPU: detail["layer_backward_bytes"], plus, when
    checkpointed, the layer's recomputed saved bytes and per-layer constant less the kept input itself (which
    step.py adds the same way: with an fp32 residual stream the input norm's fp32 input is the checkpoint's kept
    tensor)."""
    from sizing import estimate, load_config
    from sizing.catalog import resolve_architecture
    from sizing.memory.activations import layer_saved
    from sizing.memory.adapters import trainable
    from sizing.memory.regime import resolve

    d = estimate(cfg, backend="cpu").detail
    if not cfg.get("gradient_checkpointing"):
        return d["layer_backward_bytes"]
    run = load_config(cfg)
    arch, _ = resolve_architecture(run.model, run.model_config)
    kept = layer_saved(arch, resolve(run, arch, "cpu"), trainable(run, arch), run.r, run.max_seq_length)
    recomputed = (d["layer_saved_bytes_per_token"] - kept.input_per_token) * d["tokens"] + d["layer_constant_bytes"]
    return d["layer_backward_bytes"] + recomputed


# ----------------------------------------------------------------------------------------------
# Saved-for-backward recorder, attributed to the decoder layer whose forward saved the tensor


class SavedRecorder:
    def __init__(self, model, layers):
        self.skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.skip |= {b.untyped_storage().data_ptr() for b in model.buffers()}
        self.label = "pre"
        self.entries = {}  # id(storage) -> [nbytes, label, weakref]
        self.handles = []
        for i, layer in enumerate(layers):
            self.handles.append(layer.register_forward_pre_hook(lambda m, a, i=i: self._set(f"L{i}")))
            self.handles.append(layer.register_forward_hook(lambda m, a, o: self._set("head")))

    def _set(self, lab):
        self.label = lab

    def pack(self, t):
        if t.layout == torch.sparse_coo:  # no storage of its own: its indices and values are what it holds
            self.pack(t._indices())
            self.pack(t._values())
            return t
        try:
            st = t.untyped_storage()
        except Exception:
            return t
        if st.data_ptr() in self.skip:
            return t
        k = id(st)
        if k not in self.entries:
            ent = [st.nbytes(), self.label, None]

            def _cb(_r, k=k):
                self.entries.pop(k, None)

            ent[2] = weakref.ref(st, _cb)
            self.entries[k] = ent
        return t

    def by_label(self):
        out = {}
        for n, lab, _ in self.entries.values():
            out[lab] = out.get(lab, 0) + n
        return out

    def remove(self):
        for h in self.handles:
            h.remove()


# ----------------------------------------------------------------------------------------------
# Model building


def _quantized_llama(style: str, prep: bool, gc_mode: str | None):
    """NF4 + double-quant base loaded the way transformers does it (from_pretrained with a
    BitsAndBytesConfig); the bf16 checkpoint lives in a temporary directory deleted at once."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    torch.manual_seed(0)
    q = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    with tempfile.TemporaryDirectory(prefix="sizing_physics_") as d:
        transformers.AutoModelForCausalLM.from_config(hf_config(style)).to(torch.bfloat16).save_pretrained(d)
        m = AutoModelForCausalLM.from_pretrained(
            d, quantization_config=q, device_map="cpu", dtype=torch.bfloat16,
            attn_implementation=ATTENTION.get(style, "sdpa")
        )
    if prep:
        from peft import prepare_model_for_kbit_training

        # Called with its defaults it switches on *reentrant* checkpointing (kwargs {} -> torch's
        # use_reentrant=True); Trainer(gradient_checkpointing=True) later re-enables it non-reentrant.
        # gc_mode None (GC really off) is only used to look inside the layers with saved_tensors_hooks.
        # (TRL before 0.26 passes its gradient_checkpointing and kwargs {}: the same call.)
        m = prepare_model_for_kbit_training(m, use_gradient_checkpointing=gc_mode is not None)
    return m


def sft_casting_to_bf16(model) -> None:
    """TRL v0.24.0 models/utils.py peft_module_casting_to_bf16 (l.503-510), which SFTTrainer ran on a bf16 4-bit
    model after get_peft_model through v0.25: norms to fp32, fp32 embeddings and LM head to bf16."""
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.LayerNorm) or "norm" in name:
            module.to(torch.float32)
        elif any(x in name for x in ["lm_head", "embed_tokens", "wte", "wpe"]) and hasattr(module, "weight") \
                and module.weight.dtype == torch.float32:
            module.to(torch.bfloat16)


def checkpointing_mode(regime: str, gc_on: bool) -> str | None:
    """Checkpointing that the configured run really has: TrainingArguments(gradient_checkpointing=True)
    -> non-reentrant; prepare_model_for_kbit_training with its defaults (what method=qlora with
    prepare_model_for_kbit_training=true means) -> reentrant even when the Trainer does not ask."""
    if gc_on:
        return "non_reentrant"
    if regime == "qlora_trl":  # TRL's preparation checkpoints as the run asks, and turns the Trainer's off
        return "reentrant" if gc_on else None
    return "reentrant" if regime == "qlora_prep" else None


def build(style: str, regime: str, dropout: float = 0.0, gc_mode: str | None = None):
    """Return (model, decoder layers)."""
    method, adapter_dtype, _ = REGIMES[regime]
    if method == "qlora":
        m = _quantized_llama(style, regime in ("qlora_prep", "qlora_trl"), gc_mode)
    else:
        torch.manual_seed(0)
        attn = ATTENTION.get(style, "sdpa")
        m = transformers.AutoModelForCausalLM.from_config(hf_config(style), attn_implementation=attn)
        m = m.to(getattr(torch, weight_dtype(regime)))  # a checkpoint in that dtype loaded with dtype="auto"
    if gc_mode == "non_reentrant":
        # TrainingArguments(gradient_checkpointing=True): transformers 5 default kwargs; this also calls
        # enable_input_require_grads() (the embedding output requires grad)
        m.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    if method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=dropout, target_modules="all-linear")
        m = get_peft_model(m, lc, autocast_adapter_dtype=(adapter_dtype == "float32"))
        if regime == "qlora_trl":
            sft_casting_to_bf16(m)
        if gc_mode is not None:
            m.enable_input_require_grads()  # what Trainer/TRL do for PEFT + checkpointing
    m.train()
    base = m.get_base_model() if hasattr(m, "get_base_model") else m
    return m, base.model.layers


def _quant_state_tensors(m):
    # de-duplicated: peft's LoRA wrapper exposes its base layer's `weight` (same quant_state), so a
    # plain walk over modules would count every quant state twice
    out, seen = [], set()
    for mod in m.modules():
        qs = getattr(getattr(mod, "weight", None), "quant_state", None)
        if qs is None or id(qs) in seen:
            continue
        seen.add(id(qs))
        out += [qs.absmax, qs.code]
        if qs.nested:
            out += [qs.offset, qs.state2.absmax, qs.state2.code]
    return [t for t in out if isinstance(t, torch.Tensor)]


def make_inputs(vocab: int):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (B, S), generator=g)
    return dict(input_ids=ids, attention_mask=torch.ones(B, S, dtype=torch.long), labels=ids.clone())


def _nbytes(t):
    return t.numel() * t.element_size()


# ----------------------------------------------------------------------------------------------
# One measured training step


@contextlib.contextmanager
def one_thread():
    """One intra-op thread: these tiny matmuls gain little from two, and with two OpenMP threads a busy machine
    (another process on one of the 2 cores) makes a run 5x slower (spin-waiting)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def tracking(tensors) -> tuple[LiveMem, int]:
    """A LiveMem that already holds `tensors` (the model, its inputs), and its bytes then: what a measurement's peak
    is taken above."""
    tracker = LiveMem()
    for t in tensors:
        tracker.add(t)
    gc.collect()
    return tracker, tracker.cur


@functools.cache
def measure(style: str, regime: str, dropout: float = 0.0, gc_on: bool = False) -> dict:
    """Measure one Trainer-like step of the configured run; cached in memory for the session.

    When the run is checkpointed although gradient_checkpointing is off (prepare_model_for_kbit_training
    switches on reentrant checkpointing), layer_saved_bytes_per_token comes from a second run of the
    same model with checkpointing really off (the engine reports it "without checkpointing")."""
    mode = checkpointing_mode(regime, gc_on)
    with one_thread():
        return _measure_case(style, regime, dropout, gc_on, mode)


def _measure_case(style: str, regime: str, dropout: float, gc_on: bool, mode: str | None) -> dict:
    res = _measure(style, regime, dropout, mode)
    res["gc"] = gc_on
    if not gc_on and mode is not None:
        # the layer as its checkpointed recomputation runs it: transformers gives checkpointed layers no cache
        # (modeling_layers.py GradientCheckpointingLayer), so a DynamicCache copies no k and v there
        raw = _measure(style, regime, dropout, None, use_cache=False)
        res["layer_saved_bytes_per_token"] = raw["layer_saved_bytes_per_token"]
        res["saved_by_layer"] = raw["saved_by_layer"]
        res["retained_activation_bytes_really_no_checkpointing"] = raw["retained_activation_bytes"]
        res["seconds"] += raw["seconds"]
    return res


def _measure(style: str, regime: str, dropout: float, gc_mode: str | None, use_cache: bool | None = None) -> dict:
    from accelerate.utils import convert_to_fp32

    t0 = time.perf_counter()
    # the project's pytest config turns warnings into errors; the deprecation/user warnings of
    # transformers/peft/bitsandbytes/torch.utils.checkpoint say nothing about memory
    with warnings.catch_warnings(), cuda_autocast_shim():
        warnings.simplefilter("ignore")
        m, layers = build(style, regime, dropout, gc_mode)
        params = list(m.parameters())  # de-duplicated: tied weights appear once
        trainable = [p for p in params if p.requires_grad]
        res = dict(
            style=style,
            regime=regime,
            dropout=dropout,
            checkpointing=gc_mode,
            N=N,
            param_bytes=sum(_nbytes(p) for p in params),
            quant_state_bytes=sum(_nbytes(t) for t in _quant_state_tensors(m)),
            trainable_params=sum(p.numel() for p in trainable),
        )
        by_dtype = {}
        for p in params:
            k = f"{type(p).__name__}:{str(p.dtype).replace('torch.', '')}"
            by_dtype[k] = by_dtype.get(k, 0) + _nbytes(p)
        res["params_by_dtype"] = by_dtype

        opt = torch.optim.AdamW(trainable, lr=1e-4, fused=True)  # optim="adamw_torch_fused"
        inputs = make_inputs(MODEL_CONFIGS[style]["vocab_size"])
        tracker = LiveMem()
        for t in params + list(m.buffers()) + list(inputs.values()) + _quant_state_tensors(m):
            tracker.add(t)
        rec = None if gc_mode else SavedRecorder(m, layers)
        gc.collect()
        base = tracker.cur
        hooks = torch.autograd.graph.saved_tensors_hooks(rec.pack, lambda t: t) if rec else contextlib.nullcontext()
        with tracker:
            with hooks, torch.autocast("cpu", dtype=torch.bfloat16):  # accelerate mixed_precision="bf16"
                out = m(**inputs, **({} if use_cache is None else {"use_cache": use_cache}))
                out = convert_to_fp32(out)  # accelerate ConvertOutputsToFp32
            loss = out.loss
            del out
            gc.collect()
        res["retained_activation_bytes"] = tracker.cur - base
        res["forward_peak_bytes"] = tracker.peak - base
        if rec is not None:
            sv = rec.by_label()
            L = len(layers)
            per_layer = [sv.get(f"L{i}", 0) for i in range(L)]
            middle = per_layer[1:]
            res["saved_by_layer"] = per_layer
            res["saved_head_bytes"] = sv.get("head", 0)
            res["layer_saved_bytes_per_token"] = sum(middle) / len(middle) / N
            rec.remove()
        else:
            res["layer_saved_bytes_per_token"] = None

        # an MoE's checkpointed backward routes the recomputed tokens again: there values decide shapes
        with Fp32Matmul() if style not in MOE_STYLES or gc_mode is None else contextlib.nullcontext():
            loss.backward()
        del loss
        res["gradient_bytes"] = sum(_nbytes(p.grad) for p in trainable if p.grad is not None)
        res["grad_dtypes"] = sorted({str(p.grad.dtype) for p in trainable if p.grad is not None})
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        res["optimizer_state_bytes"] = sum(
            _nbytes(v)
            for st in opt.state.values()
            for v in st.values()
            if isinstance(v, torch.Tensor) and v.numel() > 1
        )
        opt.zero_grad(set_to_none=True)
    del m, opt, params, trainable, layers
    gc.collect()
    res["seconds"] = time.perf_counter() - t0
    return res


# ----------------------------------------------------------------------------------------------


def _row(r):
    mib = 2**20
    ls = r["layer_saved_bytes_per_token"]
    return (
        f"| {r['style']} | {r['regime']} | {r['dropout']} | {r['checkpointing'] or 'off'} | {r['param_bytes']} | "
        f"{r['trainable_params']} | {r['gradient_bytes']} | {r['optimizer_state_bytes']} | "
        f"{'-' if ls is None else f'{ls:.1f}'} | {r['retained_activation_bytes']} "
        f"({r['retained_activation_bytes'] / mib:.3f} MiB) | {r['seconds']:.1f} |"
    )


def main():
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="lora_dropout 0 only")
    ap.add_argument("--style", action="append")
    args = ap.parse_args()
    import accelerate
    import peft

    print(
        f"torch {torch.__version__}  transformers {transformers.__version__}  peft {peft.__version__}  "
        f"accelerate {accelerate.__version__}  (1 intra-op thread per measurement)"
    )
    ok, why = _bnb_available()
    print("bitsandbytes 4-bit on CPU:", "yes" if ok else why)
    print(f"B={B} S={S} N={N}  LoRA r={LORA_R} alpha={LORA_ALPHA} all-linear\n")
    print(
        "| style | regime | drop | ckpt | param B | trainable | grad B | optim B | layer saved B/tok | retained B | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for c in cases(args.quick):
        if args.style and c[0] not in args.style:
            continue
        r = measure(*c)
        print(_row(r), flush=True)
        if r["layer_saved_bytes_per_token"] is not None and len(set(r["saved_by_layer"][1:])) != 1:
            print("   layers differ:", r["saved_by_layer"])
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()


# ----------------------------------------------------------------------------------------------
# Helpers for the tests


def case_id(case) -> str:
    style, regime, dropout, gc_on = case
    ck = "ckpt" if gc_on else ("nockpt(prepare:reentrant)" if checkpointing_mode(regime, gc_on) else "nockpt")
    return f"{style}-{regime}-drop{dropout:g}-{ck}"


def static_cases():
    """One case per (style, regime): weights, grads and optimizer states do not depend on
    lora_dropout or checkpointing."""
    seen, out = set(), []
    for c in cases():
        if (c[0], c[1]) not in seen and c[2] == 0.0 and not c[3]:
            seen.add((c[0], c[1]))
            out.append(c)
    return out


def compare(quantity: str, case, measured, estimated, rel_tol: float, holds: str = "") -> None:
    """Assert |estimated - measured| <= rel_tol * measured (rel_tol 0: exact), with a message that
    says what was compared."""
    __tracebackhide__ = True
    if estimated is None:
        raise AssertionError(f"{case_id(case)}: engine detail has no {quantity!r} (measured {measured})")
    diff = estimated - measured
    rel = diff / measured if measured else float("inf")
    ok = diff == 0 if rel_tol == 0 else abs(rel) <= rel_tol
    if not ok:
        raise AssertionError(
            f"{case_id(case)}: {quantity} measured {measured:,.1f}, engine {estimated:,.1f} "
            f"({diff:+,.1f}, {100 * rel:+.2f} %, allowed {100 * rel_tol:g} %)"
            + (f"\n  tensors: {holds}" if holds else "")
        )


class Recording(CachingAllocator):
    """The engine's allocator, recording each request and release in bytes (probes compare it to a trace)."""

    def __init__(self) -> None:
        super().__init__(False)
        self.events: list[tuple[str, int]] = []
        self.sizes: dict[int, int] = {}

    def malloc(self, nbytes: int) -> _Block:
        b = super().malloc(nbytes)
        self.sizes[id(b)] = nbytes
        self.events.append(("m", nbytes))
        return b

    def free(self, b: _Block) -> None:
        self.events.append(("f", self.sizes[id(b)]))
        super().free(b)

    def free_all(self, blocks) -> None:
        for b in blocks:
            self.free(b)
