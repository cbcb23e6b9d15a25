# Several GPUs, the solvers and the time model.
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing import estimate, load_config
from sizing.solve import _fits, _largest, fewest_gpus, fit_table, max_micro_batch, max_seq_length

RUN: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B", "method": "lora", "bf16": True, "r": 16,
                       "target_modules": "all-linear", "max_seq_length": 2048, "per_device_train_batch_size": 2,
                       "packing": True, "gradient_checkpointing": True, "gpu": "L40S-48GB"}


@settings(max_examples=25, deadline=None)
@given(mode=st.sampled_from(["fsdp", "zero3", "zero2"]), n=st.integers(2, 63),
       method=st.sampled_from(["full", "lora", "qlora"]), offload=st.booleans())
def test_more_gpus_never_raise_per_gpu_memory_under_sharding(mode: str, n: int, method: str, offload: bool) -> None:
    run = {**RUN, "method": method, "parallelism": mode, "cpu_offload": offload}
    fewer = estimate({**run, "num_gpus": n}).allocated_bytes
    more = estimate({**run, "num_gpus": n + 1}).allocated_bytes
    assert more <= fewer


def test_ddp_adds_a_bucket_copy_of_the_gradients() -> None:
    one = estimate({**RUN, "method": "full", "gpu": "H200-SXM-141GB"})
    two = estimate({**RUN, "method": "full", "gpu": "H200-SXM-141GB", "num_gpus": 2, "parallelism": "ddp"})
    opt_one = max(m.total for m in one.moments if m.phase == "optimizer")
    opt_two = max(m.total for m in two.moments if m.phase == "optimizer")
    assert opt_two - opt_one == one.detail["gradient_bytes"]
    assert two.device_bytes - one.device_bytes > one.detail["gradient_bytes"]  # plus NCCL buffers


@pytest.mark.parametrize("mode", ["zero2", "zero3"])
def test_zero_keeps_fp32_master_and_states_of_bf16_params(mode: str) -> None:
    # ZeRO's mixed-precision Adam: 12 bytes per parameter beyond the bf16 weights and gradients, the fp32 master copy
    # and fp32 momentum and variance (Rajbhandari et al. 2020, "ZeRO", section 3.1: K = 12), each rank holding 1/n
    run = {"model": "Qwen/Qwen2.5-0.5B", "method": "full", "torch_dtype": "bfloat16", "bf16": True,
           "max_seq_length": 512, "per_device_train_batch_size": 1, "optim": "adamw_torch", "gpu": "H100-SXM-80GB"}
    zero = estimate({**run, "num_gpus": 4, "parallelism": mode})
    params = zero.detail["trainable_params"]
    assert zero.detail["optimizer_state_bytes"] == 12 * params
    step = next(m for m in zero.moments if m.phase == "optimizer" and m.step == 1)
    assert step.parts["optimizer_states"] == 12 * params // 4
    # FSDP steps torch AdamW on the bf16 shards themselves: bf16 states, no master copy
    assert estimate({**run, "num_gpus": 4, "parallelism": "fsdp"}).detail["optimizer_state_bytes"] == 4 * params
    # fp32 parameters need no master copy
    fp32 = estimate({**run, "torch_dtype": "float32", "bf16": False, "num_gpus": 4, "parallelism": mode})
    assert fp32.detail["optimizer_state_bytes"] == 8 * params


@pytest.mark.parametrize("gpu", ["RTX-4090-24GB", "A100-SXM-80GB"])
def test_solver_answers_fit_and_one_more_does_not(gpu: str) -> None:
    cfg = load_config({**RUN, "gpu": gpu})
    b = max_micro_batch(cfg)
    assert b >= 1 and _fits(replace(cfg, per_device_train_batch_size=b))
    assert not _fits(replace(cfg, per_device_train_batch_size=b + 1))
    s = max_seq_length(cfg)
    assert _fits(replace(cfg, max_seq_length=s)) and not _fits(replace(cfg, max_seq_length=s + 1))


def test_fewest_gpus_fit_and_one_fewer_does_not() -> None:
    cfg = load_config({**RUN, "model": "meta-llama/Llama-3.1-70B", "method": "full", "gpu": "H100-SXM-80GB"})
    n, mode = fewest_gpus(cfg)
    assert mode == "fsdp" and n > 1
    assert _fits(replace(cfg, num_gpus=n, parallelism=mode))
    assert not _fits(replace(cfg, num_gpus=n - 1, parallelism=mode))


def test_frozen_base_skips_weight_gradients() -> None:
    # Without checkpointing a full step is ~6 FLOPs per matmul parameter per token, LoRA ~4 (no dW of
    # the base). Matmul parameters: Llama-3.1-8B's 8.03 B minus the embedding table (a lookup).
    base = {**RUN, "gradient_checkpointing": False, "max_seq_length": 128, "gpu": "H100-SXM-80GB"}
    full = estimate({**base, "method": "full"}).time
    lora = estimate({**base, "method": "lora"}).time
    assert full is not None and lora is not None
    params = 8.03e9 - 128256 * 4096
    assert full["flops_per_token"] / params == pytest.approx(6, rel=0.03)
    assert lora["flops_per_token"] / params == pytest.approx(4, rel=0.03)
    ckpt = estimate({**base, "method": "lora", "gradient_checkpointing": True}).time
    assert ckpt is not None and ckpt["flops_per_token"] / params == pytest.approx(6, rel=0.03)  # + recompute


def test_hours_and_cost_follow_tokens_and_price() -> None:
    est = estimate({**RUN, "dataset_tokens": 10_000_000, "num_train_epochs": 2, "price_per_gpu_hour": 1.5,
                    "num_gpus": 2, "parallelism": "ddp"})
    t = est.time
    assert t is not None
    assert t["total_hours"] == pytest.approx(2e7 / t["tokens_per_second"] / 3600)
    assert t["cost"] == pytest.approx(t["total_hours"] * 2 * 1.5)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.integers(0, 5 * 2**21), min_size=1, max_size=300), start=st.integers(0, 2**30),
       limit=st.integers(0, 2**31), round_to=st.sampled_from([1, 2**21]))
def test_largest_agrees_with_a_scan_on_any_staircase(steps: list[int], start: int, limit: int,
                                                      round_to: int) -> None:
    # Any non-decreasing value, rounded like the caching allocator's blocks: the interpolating search
    # must find exactly what a scan finds.
    values = [start]
    for s in steps:
        values.append(values[-1] + s)
    values = [-(-v // round_to) * round_to for v in values]

    def value(n: int) -> int:
        return values[n - 1]

    high = len(values)
    want = max((n for n in range(1, high + 1) if value(n) <= limit), default=0)
    assert _largest(value, limit, high) == want


def test_fit_table_rows_are_the_largest_that_fit() -> None:
    """The own GPU's row is the largest that fits by the estimate's verdict; every other row's values fit by that
    verdict too, and fall short of the largest (a full confirmation, Sizer.confirm) by no more than the replay
    grid's rounding (grid.py: 4 steps per doubling, so under 25 %)."""
    cfg = load_config({**RUN, "attn_implementation": "eager", "gradient_checkpointing": False})
    table = fit_table(cfg)
    own = [row for row in table if row["gpu"] == cfg.gpu]
    assert len(own) == 1
    for row in own + table[::4]:
        run = replace(cfg, gpu=row["gpu"])
        b, s = row["max_micro_batch"], row["max_seq_length"]
        assert b == 0 or _fits(replace(run, per_device_train_batch_size=b))
        assert s == 0 or _fits(replace(run, max_seq_length=s))
        if row is own[0]:
            assert not _fits(replace(run, per_device_train_batch_size=b + 1))
            assert s == 131072 or not _fits(replace(run, max_seq_length=s + 1))
        else:
            best_b, best_s = max_micro_batch(run), max_seq_length(run)
            assert b <= best_b and best_b - b <= best_b // 4
            assert s <= best_s and best_s - s <= best_s // 4


def test_zero3_parameter_offload_copies_the_partition_in_for_each_gather() -> None:
    # DeepSpeed all_gather_coalesced (runtime/zero/partition_parameters.py, v0.8.0 l.838-850 and 2025): the gathered
    # buffer is allocated, then `param.ds_tensor.to(device)` (the rank's partition, on the host under offload) is
    # copied in for the all-gather; both are alive until it completes. FSDP's offload copies on a stream of its own.
    # Qwen2.5-0.5B's config.json: vocab_size 151936, hidden_size 896, intermediate_size 4864, 2 KV heads of 64, tied
    # embeddings (the head's weight is the embedding), q/k/v biases.
    run = {"model": "Qwen/Qwen2.5-0.5B", "method": "full", "torch_dtype": "float32", "bf16": False,
           "max_seq_length": 256, "per_device_train_batch_size": 1, "optim": "adamw_torch", "gpu": "H100-SXM-80GB",
           "num_gpus": 2, "cpu_offload": True}
    zero, fsdp = (estimate({**run, "parallelism": mode}) for mode in ("zero3", "fsdp"))

    def weights(est: Any, what: str) -> int:
        return next(m.parts["weights"] for m in est.moments if m.step == 1 and m.what.startswith(what))

    head = 151936 * 896 * 4
    assert weights(zero, "gradient of the logits") - weights(fsdp, "gradient of the logits") == -(-head // 2)
    h, kv, mlp = 896, 128, 4864
    layer = 4 * (2 * h * h + 2 * h * kv + h + 2 * kv + 3 * h * mlp + 2 * h)
    assert weights(zero, "last decoder layer") - weights(fsdp, "last decoder layer") == -(-layer // 2)
    # without offload the partition is on the GPU already: nothing is copied
    plain = {**run, "cpu_offload": False}
    assert weights(estimate({**plain, "parallelism": "zero3"}), "gradient of the logits") == \
        weights(estimate({**plain, "parallelism": "fsdp"}), "gradient of the logits")
