# The op inventory against PyTorch itself on CPU: the GEMM FLOPs of one HF Llama (+ PEFT) training step
# (FlopCounterMode) and the aten ops it dispatches per decoder layer (TorchDispatchMode), host side.
from __future__ import annotations

import collections
import warnings

import pytest
import torch
from peft import LoraConfig, get_peft_model
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode
from transformers import LlamaConfig, LlamaForCausalLM

from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.memory.adapters import trainable
from sizing.memory.regime import resolve
from sizing.time.elementwise import attention_kernel
from sizing.time.op import Op
from sizing.time.ops import micro_batch_ops

TINY = {"model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 512,
        "tie_word_embeddings": False}
VIEWS = {"view", "_unsafe_view", "t", "transpose", "expand", "unsqueeze", "squeeze", "slice", "select", "detach",
         "alias", "permute", "as_strided", "_reshape_alias", "split", "unbind", "split_with_sizes", "lift_fresh"}


def _measured(layers: int, method: str) -> collections.Counter[str]:
    with warnings.catch_warnings():  # transformers / peft deprecation notices are not what is measured here
        warnings.simplefilter("ignore")
        return _count(layers, method)


def _model(layers: int, method: str, dropout: float = 0.05, checkpointing: bool = True,
           attn: str = "sdpa") -> torch.nn.Module:
    torch.manual_seed(0)
    model: torch.nn.Module = LlamaForCausalLM(LlamaConfig(num_hidden_layers=layers, attn_implementation=attn, **{
        k: v for k, v in TINY.items() if k != "model_type"}))
    if method == "lora":
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=dropout,  # type: ignore[arg-type]
                                                 target_modules="all-linear"))
        model.enable_input_require_grads()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def _count(layers: int, method: str) -> collections.Counter[str]:
    model = _model(layers, method)
    x = torch.randint(0, 320, (2, 16))
    counts: collections.Counter[str] = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            counts[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        model(input_ids=x, labels=x, attention_mask=torch.ones_like(x)).loss.backward()
    return counts


def _per_layer_measured(method: str) -> tuple[float, float]:
    """(compute ops as CUDA launches them, view-like ops) per layer: the difference of a 2- and a 1-layer model."""
    one, two = _measured(1, method), _measured(2, method)
    diff = {k: float(two[k] - one[k]) for k in set(one) | set(two)}
    views = sum(v for k, v in diff.items() if k in VIEWS)
    # CPU dropout is empty_like + bernoulli_ + div_ + mul; CUDA runs one native_dropout kernel
    compute = sum(v for k, v in diff.items() if k not in VIEWS) - 3 * diff.get("bernoulli_", 0.0)
    return compute, views


def _inventory(layers: int, method: str, dropout: float = 0.05, checkpointing: bool = True,
               attn: str = "sdpa") -> list[Op]:
    cfg = parse_config({"model_config": {**TINY, "num_hidden_layers": layers}, "method": method, "r": 16,
                        "lora_dropout": dropout, "target_modules": "all-linear", "torch_dtype": "float32",
                        "max_seq_length": 16, "per_device_train_batch_size": 2, "attn_implementation": attn,
                        "gradient_checkpointing": checkpointing, "gpu": "H100-SXM-80GB"})
    arch, _ = resolve_architecture(None, cfg.model_config)
    reg = resolve(cfg, arch, "cuda")
    return micro_batch_ops(cfg, arch, reg, trainable(cfg, arch), attention_kernel(reg, 9))


def _per_layer_inventory(method: str) -> tuple[float, float]:
    out = []
    for layers in (1, 2):
        ops = _inventory(layers, method)
        out.append((sum(o.count * o.kernels for o in ops), sum(o.count * o.views for o in ops)))
    return out[1][0] - out[0][0], out[1][1] - out[0][1]


@pytest.mark.parametrize("method", ["lora", "full"])
def test_host_ops_per_layer_match_a_dispatch_count(method: str) -> None:
    compute, views = _per_layer_measured(method)
    kernels, inventory_views = _per_layer_inventory(method)
    print(f"{method}: measured {compute:.0f} compute + {views:.0f} view ops per layer; "
          f"inventory {kernels:.0f} kernels + {inventory_views:.0f} views")
    assert inventory_views == pytest.approx(views, rel=0.15)
    assert kernels == pytest.approx(compute, rel=0.25)
    assert kernels + inventory_views == pytest.approx(compute + views, rel=0.12)


@pytest.mark.parametrize(("method", "checkpointing", "attn"), [
    ("lora", True, "sdpa"), ("lora", False, "sdpa"), ("full", True, "sdpa"), ("full", False, "sdpa"),
    ("lora", True, "eager")])
def test_gemm_flops_equal_pytorchs_flop_count(method: str, checkpointing: bool, attn: str) -> None:
    # every mm of forward, backward and (non-reentrant) recompute, LoRA's included; eager attention's bmm too
    # (the CPU SDPA kernel has no FLOP formula, so sdpa attention is left out of both sides)
    x = torch.randint(0, 320, (2, 16))
    counter = FlopCounterMode(display=False)
    with warnings.catch_warnings():  # transformers / peft deprecation notices are not what is measured here
        warnings.simplefilter("ignore")
        model = _model(2, method, dropout=0.0, checkpointing=checkpointing, attn=attn)
        with counter:
            model(input_ids=x, labels=x).loss.backward()
    counts = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    measured = sum(v for k, v in counts.items() if "attention" not in k)
    mine = sum(o.count * o.flops for o in _inventory(2, method, 0.0, checkpointing, attn) if o.shape[0])
    assert mine == measured
