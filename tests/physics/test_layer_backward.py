"""One decoder layer's backward, measured op by op on CPU, against the engine's op-by-op model
(sizing/memory/backward.py). Tiny models from a config with random weights and a 64-token vocabulary.

Measured: the live tensor bytes (harness.LiveMem, after every dispatched op) from the moment the gradient
of a middle layer's output exists (a hook on that output) until the gradient of its input exists (a hook on
the input): the high-water mark above the bytes live at the start, plus the incoming gradient itself. That
includes the layer's weight gradients made before the peak and, under non-reentrant checkpointing, the
recomputed layer's saved tensors. Engine: detail["layer_backward_bytes"] (+ the layer's saved bytes and
per-layer constant when checkpointed, less what is the kept input itself, which the engine adds in step.py the
same way: with an fp32 residual stream the input norm's fp32 input is the checkpoint's kept tensor, 4 * h * N less,
measured here in the fp32 checkpointed cases).

The 2 % tolerance covers fp32 adapters under autocast (+1.8 % measured: the casts of lora_A's gradient are
not modelled op by op); every bf16/fp32 case without it agreed to the byte or within 0.02 % when written. OLMo 2's
eight cases (no pre-norms, norms on the sublayer outputs, q/k norms over the whole projections), when added: within
-0.01 % .. +0.07 %. Checkpointed LoRA can peak in the recomputation rather than in the backward (activations.py
mlp_recompute_extra): fp32 adapters under autocast by 3-17 % before that was walked, Phi-3's fused gate_up by 9.6 %;
within -0.16 % .. +0.01 % when added."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import harness  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from sizing import estimate  # noqa: E402

pytestmark = pytest.mark.physics
TOL = 0.02
LAYER = 2  # a middle layer of the 4: layer 0 of a PEFT model without checkpointing saves less

# Mistral: Llama's layer with a sliding window; the window is wider than the sequence here.
_MISTRAL = {**harness.MODEL_CONFIGS["llama"], "model_type": "mistral", "sliding_window": 4096}


@contextlib.contextmanager
def _measuring() -> Iterator[None]:
    """One thread (the live-bytes trace follows one op order) and no deprecation notices (they say nothing about
    memory, as in harness)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.set_num_threads(threads)


def _compare(label: str, measured: int, engine: int) -> None:
    print(f"{label}: measured {measured} B, engine {engine} B, {100 * (engine - measured) / measured:+.2f} %")
    assert engine == pytest.approx(measured, rel=TOL)


def _model_config(style: str) -> dict:
    base = _MISTRAL if style == "mistral" else harness.MODEL_CONFIGS[style]
    return {**base, "vocab_size": 64}


def _measure(style: str, method: str, attn: str, ckpt: bool, dtype: torch.dtype, reentrant: bool = False,
             autocast: bool = False) -> int:
    torch.manual_seed(0)
    m = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(**_model_config(style)), attn_implementation=attn).to(dtype)
    if ckpt:
        m.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": reentrant})
    if method.startswith("lora"):
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(r=harness.LORA_R, lora_alpha=harness.LORA_ALPHA, target_modules="all-linear")
        m = get_peft_model(m, lc, autocast_adapter_dtype=method == "lora_fp32")
        if ckpt:
            m.enable_input_require_grads()
    return harness.layer_backward_peak(m, LAYER, harness.make_inputs(64), autocast=dtype == torch.bfloat16 or autocast)


def _engine(style: str, method: str, attn: str, ckpt: bool, dtype: str, autocast: bool = False) -> int:
    cfg = {"model_config": _model_config(style), "method": "lora" if method.startswith("lora") else "full",
           "torch_dtype": dtype, "bf16": dtype == "bfloat16" or autocast, "max_seq_length": harness.S,
           "per_device_train_batch_size": harness.B, "packing": True, "gradient_checkpointing": ckpt,
           "attn_implementation": attn}
    if method.startswith("lora"):
        cfg.update({"r": harness.LORA_R, "lora_alpha": harness.LORA_ALPHA, "target_modules": "all-linear",
                    "adapter_dtype": "float32" if method == "lora_fp32" else dtype})
    return harness.engine_layer_backward(cfg)


CASES = [
    ("llama", "full", "sdpa", False, "bfloat16"),
    ("llama", "full", "sdpa", True, "bfloat16"),
    ("llama", "lora", "sdpa", False, "bfloat16"),
    ("llama", "lora", "sdpa", True, "bfloat16"),
    ("llama", "full", "eager", False, "bfloat16"),
    ("llama", "lora", "eager", True, "bfloat16"),
    ("llama", "full", "sdpa", False, "float32"),
    ("llama", "lora", "eager", False, "float32"),
    ("llama", "lora_fp32", "sdpa", False, "bfloat16"),
    ("mistral", "lora", "sdpa", True, "bfloat16"),
    ("qwen2", "lora", "sdpa", True, "bfloat16"),
    ("qwen3", "lora", "eager", False, "bfloat16"),
    ("gemma", "full", "sdpa", False, "bfloat16"),
    ("gemma", "lora", "eager", True, "bfloat16"),
    ("llama", "full", "sdpa", True, "float32"),
    ("llama", "lora", "eager", True, "float32"),
    ("gemma", "full", "sdpa", True, "float32"),
    # OLMo 2: no pre-norms, norms on the sublayer outputs, q_norm / k_norm over the whole projections
    ("olmo2", "full", "sdpa", False, "bfloat16"),
    ("olmo2", "full", "sdpa", True, "bfloat16"),
    ("olmo2", "lora", "sdpa", False, "bfloat16"),
    ("olmo2", "lora", "sdpa", True, "bfloat16"),
    ("olmo2", "lora", "eager", False, "bfloat16"),
    ("olmo2", "lora_fp32", "sdpa", False, "bfloat16"),
    ("olmo2", "full", "sdpa", True, "float32"),
    ("olmo2", "lora", "eager", True, "float32"),
    # Gemma 2: soft-capped scores (tanh), sublayer-output norms, a sliding window below S on every other layer; eager
    # is its only attention without flash kernels (Gemma2PreTrainedModel._supports_sdpa = False)
    ("gemma2", "full", "eager", False, "bfloat16"),
    ("gemma2", "full", "eager", True, "bfloat16"),
    ("gemma2", "lora", "eager", False, "bfloat16"),
    ("gemma2", "lora", "eager", True, "bfloat16"),
    ("gemma2", "lora_fp32", "eager", False, "bfloat16"),
    ("gemma2", "full", "eager", True, "float32"),
    # OLMo 3: OLMo 2's layer; eager builds its causal and sliding-window masks; past a window on every layer, SDPA
    # with the window mask, k and v repeated to every head
    ("olmo3", "lora", "sdpa", True, "bfloat16"),
    ("olmo3", "lora", "eager", False, "bfloat16"),
    ("olmo3_window", "lora", "sdpa", False, "bfloat16"),
    ("olmo3_window", "full", "sdpa", True, "bfloat16"),
    # GLM-4: norms before and after each sublayer, biased q/k/v, fused gate_up, partial RoPE concatenated back
    ("glm4", "full", "sdpa", False, "bfloat16"),
    ("glm4", "lora", "sdpa", True, "bfloat16"),
    ("glm4", "lora_fp32", "sdpa", False, "bfloat16"),
    # eager: the fused gate_up_proj's backward (its gradient the two halves' concatenated) is the peak's last step
    ("glm4", "lora", "eager", False, "bfloat16"),
    ("glm4", "full", "eager", False, "bfloat16"),
    # Phi-3: fused qkv_proj and gate_up_proj (under eager the engine was +39 % / +52 % high before the fused MLP's
    # backward was walked as one output split in two)
    ("phi3", "full", "eager", False, "bfloat16"),
    ("phi3", "lora", "eager", False, "bfloat16"),
    ("phi3", "full", "sdpa", False, "bfloat16"),
    # checkpointed LoRA: the window's peak is the recomputation's, at the fused gate_up_proj's LoRA (the base output,
    # lora_B's output and its scaled copy, three [N, 2I] tensors, and the residual stream, before act(gate) and the
    # product are saved); -9.6 % before o_proj's input was its own copy and the recomputation's adds were walked
    ("phi3", "lora", "sdpa", True, "bfloat16"),
    # PEFT's default fp32 adapters under bf16 autocast, checkpointed: the recomputation's peak is at down_proj's LoRA,
    # where PEFT's fp32 cast of the product, the product and the MLP's input (saved only as casts) and the base output
    # are alive (-17 % for Llama before it was walked)
    ("llama", "lora_fp32", "sdpa", True, "bfloat16"),
    ("gemma", "lora_fp32", "sdpa", True, "bfloat16"),
    ("olmo2", "lora_fp32", "sdpa", True, "bfloat16"),
    ("glm4", "lora_fp32", "sdpa", True, "bfloat16"),
    ("phi3", "lora_fp32", "sdpa", True, "bfloat16"),
    ("gemma2", "lora_fp32", "eager", True, "bfloat16"),
    ("qwen3", "lora_fp32", "sdpa", True, "bfloat16"),
    ("exaone4", "lora_fp32", "sdpa", True, "bfloat16"),
    ("gemma3_window", "lora_fp32", "sdpa", True, "bfloat16"),
    # EXAONE 4: OLMo 2's layer with per-head q/k norms; no RoPE on its full layer
    ("exaone4", "full", "sdpa", False, "bfloat16"),
    ("exaone4", "lora", "sdpa", True, "bfloat16"),
    ("exaone4", "lora", "eager", False, "bfloat16"),
    # Gemma 3 past its sliding window (128 < S): SDPA with the window mask, k and v repeated to every head
    ("gemma3_window", "lora", "sdpa", False, "bfloat16"),
    ("gemma3_window", "full", "sdpa", True, "bfloat16"),
    ("gemma3_window", "lora_fp32", "sdpa", False, "bfloat16"),
]


@pytest.mark.parametrize(("style", "method", "attn", "ckpt", "dtype"), CASES,
                         ids=["-".join(str(x) for x in getattr(c, "values", c)) for c in CASES])
def test_layer_backward_high_water_mark(style: str, method: str, attn: str, ckpt: bool, dtype: str) -> None:
    with _measuring():
        measured = _measure(style, method, attn, ckpt, getattr(torch, dtype))
    _compare(f"{style} {method} {attn} ckpt={ckpt} {dtype}", measured, _engine(style, method, attn, ckpt, dtype))


# fp32 weights under bf16 autocast (a checkpoint loaded without a dtype before transformers 5 made dtype="auto" the
# default, trained with bf16=True): measured 2026-12-06, the engine's layer backward is +15.4 % (full) and -10.5 %
# (LoRA) without checkpointing, +3.5 % / -2.3 % with it. For full fine-tuning the op trace shows what the walk leaves
# out: each matmul saved autocast's bf16 copy of its weight, freed when its node is done (the walk never releases it),
# and the gradient entering a bf16 branch of the fp32 residual stream is cast to bf16 first. The LoRA gap is not
# traced yet. Strict xfails, so that their fix shows.
FP32_AUTOCAST_GAP = pytest.mark.xfail(strict=True, reason="fp32 weights under bf16 autocast: the layer backward's "
                                      "weight copies and gradient casts are not walked")


@pytest.mark.parametrize("method", [pytest.param(m, marks=FP32_AUTOCAST_GAP) for m in ("full", "lora")])
def test_fp32_weights_under_bf16_autocast(method: str) -> None:
    with _measuring():
        measured = _measure("llama", method, "sdpa", False, torch.float32, autocast=True)
    _compare(f"llama {method} fp32 weights under bf16 autocast", measured,
             _engine("llama", method, "sdpa", False, "float32", autocast=True))


# QLoRA (NF4 base through bitsandbytes, loaded as transformers loads it), checkpointed by the Trainer: +0.43 % when
# added. After prepare_model_for_kbit_training (fp32 norms and embeddings, so fp32 activations) the window was 5.7 %
# above the engine's: its peak is in down_proj's backward, where bitsandbytes' bf16 input gradient and the LoRA
# path's are each cast back to the fp32 input's dtype and summed in fp32 (backward.py linears: back); then +0.26 %.
QLORA_CASES = [("qlora", True), ("qlora_prep", True)]


@pytest.mark.parametrize(("regime", "ckpt"), QLORA_CASES if harness._bnb_available()[0] else [])
def test_qlora_layer_backward(regime: str, ckpt: bool) -> None:
    with _measuring(), harness.cuda_autocast_shim():
        m, _ = harness.build("llama", regime, 0.0, harness.checkpointing_mode(regime, ckpt))
        inputs = harness.make_inputs(harness.MODEL_CONFIGS["llama"]["vocab_size"])
        measured = harness.layer_backward_peak(m, LAYER, inputs, autocast=True)
    _compare(f"llama {regime} ckpt={ckpt}", measured,
             harness.engine_layer_backward(harness.engine_config("llama", regime, 0.0, ckpt)))


@pytest.mark.parametrize("method", ["full", "lora"])
def test_reentrant_checkpointing_keeps_the_recomputed_output(method: str) -> None:
    """Reentrant checkpointing (what prepare_model_for_kbit_training switches on by itself) holds one more
    hidden state through a layer's backward than non-reentrant: the recomputed output it backpropagates
    from. Measured on the bf16 Llama; the engine adds N·h·b(resid) for exactly that regime."""
    with _measuring():
        extra = (_measure("llama", method, "sdpa", True, torch.bfloat16, reentrant=True)
                 - _measure("llama", method, "sdpa", True, torch.bfloat16))
    hidden = harness.N * harness.MODEL_CONFIGS["llama"]["hidden_size"]
    print(f"{method}: reentrant - non-reentrant = {extra} B = {extra / hidden:.3f} x N*h")
    assert extra == 2 * hidden  # one bf16 hidden state
    qlora = {"model_config": _model_config("llama"), "method": "qlora", "load_in_4bit": True,
             "prepare_model_for_kbit_training": True, "bf16": True, "max_seq_length": harness.S,
             "per_device_train_batch_size": harness.B, "packing": True, "r": harness.LORA_R}
    own = estimate({**qlora, "gradient_checkpointing": False}).detail  # reentrant, fp32 residual (§2)
    trainer = estimate({**qlora, "gradient_checkpointing": True}).detail  # the Trainer's non-reentrant wins
    assert own["layer_backward_bytes"] - trainer["layer_backward_bytes"] == 4 * hidden
