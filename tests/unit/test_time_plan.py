# The roofline's cached op list and inlined loop: step_time equals the op-by-op loop over op_seconds (the code it
# replaced, kept below as the oracle), and micro_batch_ops reads no configuration field its cache key lacks.
from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

from sizing.catalog import find_gpu, gpus, resolve_architecture
from sizing.config import RunConfig, parse_config
from sizing.memory.adapters import trainable
from sizing.memory.regime import resolve
from sizing.time.device import device, model_data
from sizing.time.elementwise import attention_kernel
from sizing.time.op import Op
from sizing.time.ops import micro_batch_ops
from sizing.time.roofline import OPS_FIELDS, Inventory, inventory, op_seconds, step_time

TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 8192,
        "tie_word_embeddings": False, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B", "mistralai/Mixtral-8x7B-v0.1", "google/gemma-2-9b"]


def _kind(op: Op) -> str:
    return "gemm" if op.shape[0] else "attention" if op.attention else "memory"


def _oracle(cfg: RunConfig, reg: Any, gpu: Any, inv: Inventory, eff: float | None, scale: float) -> tuple[Any, ...]:
    """step_time's micro-batch loop before the plan (roofline.py at 46baed3): op_seconds per op, in op order."""
    dev = device(cfg, reg, gpu)
    assert dev is not None
    if eff is not None:
        dev = replace(dev, gemm_efficiency=eff)
    data = model_data()
    launch = data["launch_seconds_compiled" if reg.compiled else "launch_seconds"] * scale
    view = 0.0 if reg.compiled else data["view_seconds"] * scale
    floor = data.get("kernel_floor_seconds", 3e-6)
    parts: dict[str, float] = {"gemm": 0.0, "attention": 0.0, "memory": 0.0}
    host = flops = 0.0
    for op in inv.ops:
        parts[_kind(op)] += op.count * op_seconds(op, dev, floor)
        host += op.count * (op.kernels * launch + op.views * view)
        flops += op.count * op.flops
    return parts, host, flops


def _configs(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        method = rng.choice(["lora", "qlora", "full", "lora8"])
        cfg: dict[str, Any] = {
            "method": method, "max_seq_length": rng.choice([1, 100, 512, 2048, 8192]),
            "per_device_train_batch_size": rng.choice([1, 3, 8]), "gradient_checkpointing": rng.random() < 0.5,
            "attn_implementation": rng.choice(["sdpa", "eager", "flash_attention_2"]),
            "gradient_accumulation_steps": rng.choice([1, 4]), "lora_dropout": rng.choice([0.0, 0.1]),
            "framework": rng.choice(["transformers", "torchtune", "litgpt"]), "gpu": "H100-SXM-80GB",
            "optim": rng.choice(["adamw_torch", "paged_adamw_8bit"]),
        }
        if rng.random() < 0.3:
            cfg["model_config"] = TINY
        else:
            cfg["model"] = rng.choice(MODELS)
        if method != "full":
            cfg["r"] = rng.choice([8, 64])
        out.append(cfg)
    return out


def test_step_time_equals_the_op_by_op_loop_on_every_card() -> None:
    cards = list(gpus().values())
    checked = 0
    for raw in _configs(12, 5):
        cfg = parse_config(raw)
        arch, _ = resolve_architecture(cfg.model, cfg.model_config)
        for gpu in cards:
            run = replace(cfg, gpu=gpu.id)
            reg, tr = resolve(run, arch, "cuda"), trainable(run, arch)
            inv = inventory(run, arch, reg, tr, gpu)
            assert inv.ops == tuple(micro_batch_ops(run, arch, reg, tr, attention_kernel(reg, gpu.sm[0])))
            for eff, scale in ((None, 1.0), (0.3, 0.5), (0.9, 2.0)):
                st = step_time(run, arch, reg, tr, gpu, eff, scale, inv)
                if st is None:
                    continue
                parts, host, flops = _oracle(run, reg, gpu, inv, eff, scale)
                accum = run.gradient_accumulation_steps
                assert {k: st.breakdown[k] for k in parts} == {k: v * accum for k, v in parts.items()}  # bit-equal
                gpu_micro = math.fsum(parts.values())
                assert st.micro_batch_seconds == max(gpu_micro, host)
                assert st.flops_per_token == flops / (run.max_seq_length * run.per_device_train_batch_size)
                checked += 1
    assert checked > 500


class _Reads:
    """A RunConfig stand-in that records every field read."""

    def __init__(self, cfg: RunConfig) -> None:
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._cfg, name)


def test_micro_batch_ops_reads_only_the_cache_key_fields() -> None:
    seen: set[str] = set()
    for raw in [*_configs(40, 9), {**_configs(1, 1)[0], "method": "qlora", "r": 16, "use_dora": True}]:
        cfg = parse_config(raw)
        arch, _ = resolve_architecture(cfg.model, cfg.model_config)
        reg, tr = resolve(cfg, arch, "cuda"), trainable(cfg, arch)
        probe = _Reads(cfg)
        ops = micro_batch_ops(probe, arch, reg, tr, attention_kernel(reg, 9))  # type: ignore[arg-type]
        assert ops == micro_batch_ops(cfg, arch, reg, tr, attention_kernel(reg, 9))
        seen |= probe.read
    assert seen <= set(OPS_FIELDS), seen - set(OPS_FIELDS)
    assert {"max_seq_length", "per_device_train_batch_size"} <= seen  # the stand-in did record reads


def test_a_cached_op_list_is_never_another_architectures() -> None:
    cfg = parse_config({"model_config": TINY, "method": "lora", "r": 8, "gpu": "A100-SXM-80GB"})
    gpu = find_gpu("A100-SXM-80GB")
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    wider = replace(arch, hidden=arch.hidden * 2)
    reg, tr = resolve(cfg, arch, "cuda"), trainable(cfg, arch)
    first = inventory(cfg, arch, reg, tr, gpu).ops
    assert inventory(cfg, wider, reg, tr, gpu).ops == tuple(micro_batch_ops(cfg, wider, reg, tr, "flash")) != first
