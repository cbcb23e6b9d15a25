"""The plain MLP's activation in the engine's saved-for-backward count against autograd: tiny GPT-2 and Phi built
from a config (random weights, no hub), transformers' gelu_new (a Python formula) against gelu_pytorch_tanh (one
fused kernel); the models differ only there, so the measured difference is what the formula's intermediates keep."""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from sizing import estimate
from tests.needs import cannot_run

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    cannot_run("these tests build tiny models with torch and transformers (requirements-physics.txt)")

import torch
import transformers
from torch.overrides import TorchFunctionMode

B, S = 2, 16
_GPT = {"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 64, "vocab_size": 128,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
_PHI = {"model_type": "phi", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 3,
        "num_attention_heads": 4, "vocab_size": 128, "max_position_embeddings": 64, "resid_pdrop": 0.0,
        "embd_pdrop": 0.0, "attention_dropout": 0.0}
_KEY = {"gpt2": "activation_function", "phi": "hidden_act"}


def _config(base: dict[str, Any], act: str) -> dict[str, Any]:
    return {**base, _KEY[base["model_type"]]: act}


def _saved_middle_layer(cfg: dict[str, Any], autocast: bool) -> float:
    """Bytes autograd saves in layer 1 (by storage, parameters excluded) per token, bf16 weights, train mode."""
    d = dict(cfg)
    hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny vocab vs GPT-2's bos/eos ids: says nothing about memory
        m = transformers.AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa").to(torch.bfloat16).train()
    layers = m.transformer.h if hasattr(m, "transformer") else m.model.layers
    skip = {p.untyped_storage().data_ptr() for p in m.parameters()}
    where: list[object] = ["embed"]
    seen: dict[int, tuple[int, object]] = {}
    keep: list[torch.Tensor] = []  # storages stay alive, so a pointer is never reused within the forward
    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda _m, _a, i=i: where.__setitem__(0, i))
        layer.register_forward_hook(lambda _m, _a, _o: where.__setitem__(0, "head"))

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip and ptr not in seen:
            seen[ptr] = (t.untyped_storage().nbytes(), where[0])
            keep.append(t)
        return t

    ids = torch.randint(0, 128, (B, S))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        m(input_ids=ids, labels=ids)
    return sum(n for n, lab in seen.values() if lab == 1) / (B * S)


def _engine(cfg: dict[str, Any], autocast: bool, backend: str = "cpu", **run: Any) -> float:
    est = estimate({"model_config": cfg, "method": "full", "max_seq_length": S, "per_device_train_batch_size": B,
                    "torch_dtype": "bfloat16", "bf16": autocast, "attn_implementation": "sdpa", **run},
                   backend=backend)
    return float(est.detail["layer_saved_bytes_per_token"] + est.detail["layer_constant_bytes"] / (B * S))


@pytest.mark.parametrize("autocast", [False, True], ids=["bf16", "bf16_cpu_autocast"])
@pytest.mark.parametrize("base", [_GPT, _PHI], ids=["gpt2", "phi"])
def test_gelu_new_intermediates_per_layer(base: dict[str, Any], autocast: bool) -> None:
    """gelu_new keeps its input, tanh(.), 0.5 * x and 1 + tanh(.): 3 tensors of the FFN width more than the fused
    kernel, all bf16 on the CPU (CPU autocast's fp32 list has no pow)."""
    new, fused = _config(base, "gelu_new"), _config(base, "gelu_pytorch_tanh")
    measured = _saved_middle_layer(new, autocast) - _saved_middle_layer(fused, autocast)
    inter = base.get("intermediate_size", 4 * base.get("n_embd", 0))
    assert measured == 3 * 2 * inter  # the hand count, so a silent change in transformers shows here first
    assert _engine(new, autocast) - _engine(fused, autocast) == measured


class _CudaAutocastPow(TorchFunctionMode):
    """CUDA autocast's policy for pow (AT_FORALL_FP32, aten/src/ATen/autocast_mode.h): inputs cast to fp32 first.
    The other ops of the formula (tanh, mul, add) are on no autocast list: they follow type promotion."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.pow and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.bfloat16:
            args = (args[0].float(), *args[1:])
        return func(*args, **(kwargs or {}))


def _act_saved(name: str) -> int:
    x = torch.randn(4, 256, dtype=torch.bfloat16, requires_grad=True) * 1.0  # a non-leaf, as fc1's output
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _CudaAutocastPow():
        transformers.activations.ACT2FN[name](x)
    return sum(seen.values()) // x.numel()


@pytest.mark.parametrize("base", [_GPT, _PHI], ids=["gpt2", "phi"])
def test_gelu_new_under_cuda_autocast(base: dict[str, Any]) -> None:
    """Under CUDA autocast pow saves an fp32 copy of its input, and tanh(.) and 1 + tanh(.) are fp32: 4 + 4 + 4 + 2
    bytes per FFN element against the fused kernel's 2 (gelu is on no autocast list)."""
    per_elt = _act_saved("gelu_new") - _act_saved("gelu_pytorch_tanh")
    assert per_elt == 12
    inter = base.get("intermediate_size", 4 * base.get("n_embd", 0))
    new, fused = _config(base, "gelu_new"), _config(base, "gelu_pytorch_tanh")
    assert _engine(new, True, "cuda") - _engine(fused, True, "cuda") == per_elt * inter
    # pure bf16 weights without autocast: no cast anywhere, 3 bf16 intermediates
    assert _engine(new, False, "cuda") - _engine(fused, False, "cuda") == 3 * 2 * inter


def test_own_model_code_runs_the_fused_gelu() -> None:
    """LitGPT's GPT-2/phi-2 MLP calls F.gelu(approximate="tanh") (litgpt/model.py GptNeoxMLP): one saved input."""
    new, fused = _config(_PHI, "gelu_new"), _config(_PHI, "gelu_pytorch_tanh")
    assert _engine(new, True, framework="litgpt") == _engine(fused, True, framework="litgpt")


def _backward_peak(name: str, cuda_autocast: bool) -> float:
    """Peak bytes above the saved state while the activation's backward runs, in units of its bf16 input."""
    import contextlib
    import gc
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "physics"))
    import harness  # the physics harness's live-bytes tracker (a TorchDispatchMode)

    x0 = torch.randn(8, 256, dtype=torch.bfloat16, requires_grad=True)
    tracker = harness.LiveMem()
    tracker.add(x0)
    with tracker:
        x = x0 * 1.0  # a non-leaf, as fc1's output
        with _CudaAutocastPow() if cuda_autocast else contextlib.nullcontext():
            y = transformers.activations.ACT2FN[name](x)
        z = (y.to(torch.bfloat16) * 3.0).sum()  # fc2's cast to bf16 and a consumer: the gradient arrives fresh
        del x, y
        gc.collect()
        before = tracker.cur
        tracker.peak = before
        z.backward()
        del z
    return float(round((tracker.peak - before) / x0.nbytes, 2))


@pytest.mark.parametrize("name", sorted(__import__("sizing.families", fromlist=["x"]).ACT_BACKWARD_EXTRA))
def test_activation_backward_transients_measured(name: str) -> None:
    """families.ACT_BACKWARD_EXTRA: a Python formula's backward peak beyond the fused kernel's (its output gradient
    and its input gradient, what the engine's walk allocates for any activation)."""
    from sizing.families import ACT_BACKWARD_EXTRA

    plain, cuda = ACT_BACKWARD_EXTRA[name]
    fused = _backward_peak("gelu_pytorch_tanh", False)
    assert fused == _backward_peak("gelu_pytorch_tanh", True) == 2.0
    assert (_backward_peak(name, False) - fused, _backward_peak(name, True) - fused) == (plain, cuda)



@pytest.mark.parametrize("base", [_GPT, _PHI], ids=["gpt2", "phi"])
def test_checkpointing_keeps_none_of_the_intermediates(base: dict[str, Any]) -> None:
    """Non-reentrant checkpointing keeps each layer's input only: what stays after the forward does not depend on
    the activation (measured), nor in the engine (the recomputed layer saves them again, one layer at a time)."""
    import gc
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "physics"))
    import harness

    def retained(act: str) -> int:
        d = _config(base, act)
        hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = transformers.AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa").to(torch.bfloat16)
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            m.train()
            ids = torch.randint(0, 128, (B, S))
            tracker = harness.LiveMem()
            for t in [*m.parameters(), *m.buffers(), ids]:
                tracker.add(t)
            base_bytes = tracker.cur
            with tracker:
                loss = m(input_ids=ids, labels=ids).loss
                gc.collect()
            kept = int(tracker.cur - base_bytes)  # while the loss (and so the graph) is alive
            del loss
        return kept

    assert retained("gelu_new") == retained("gelu_pytorch_tanh")

    def engine(act: str) -> int:
        est = estimate({"model_config": _config(base, act), "method": "full", "max_seq_length": S,
                        "per_device_train_batch_size": B, "torch_dtype": "bfloat16", "gradient_checkpointing": True},
                       backend="cpu")
        return int(est.detail["retained_activation_bytes"])

    assert engine("gelu_new") == engine("gelu_pytorch_tanh")
