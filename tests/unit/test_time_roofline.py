# The step-time roofline: hand-derived FLOPs and bytes, the fp16 path of GPUs without bf16, ranges, cost.
from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing import SizingError, estimate
from sizing.catalog import find_gpu, resolve_architecture
from sizing.config import parse_config
from sizing.memory.adapters import trainable
from sizing.memory.regime import resolve
from sizing.time.cost import parse_deadline, parse_prices, rank
from sizing.time.device import device
from sizing.time.op import Op, gemm
from sizing.time.ops import linear_ops, micro_batch_ops
from sizing.time.roofline import op_seconds, step_time, tile_efficiency
from sizing.time.step_ops import optimizer_bytes_per_param, traffic

TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 2048}
RUN = {"model_config": TINY, "method": "lora", "max_seq_length": 128, "per_device_train_batch_size": 2,
       "gpu": "A100-SXM-80GB", "bf16": True}


def _inputs(**over: object) -> tuple:
    cfg = parse_config({**RUN, **over})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return cfg, arch, resolve(cfg, arch, "cuda"), trainable(cfg, arch), find_gpu(str(cfg.gpu))


def test_gemm_counts_2mkn_flops_and_reads_both_operands_writes_the_output() -> None:
    op = gemm("x", "forward", 1, 4, 8, 16, 2, 2)
    assert op.flops == 2 * 4 * 8 * 16  # 1024
    assert op.bytes == 2 * (4 * 8 + 8 * 16 + 4 * 16)  # 448


def test_frozen_weights_get_no_weight_gradient_gemm() -> None:
    frozen = linear_ops("q", "backward", 1, 64, 256, 512, 2, 2, weight_grad=False)
    trained = linear_ops("q", "backward", 1, 64, 256, 512, 2, 2, weight_grad=True)
    assert [o.name for o in frozen] == ["q.dX"] and [o.name for o in trained] == ["q.dX", "q.dW"]
    assert trained[1].shape == (512, 64, 256)  # dW = dY^T X: out x tokens x in
    assert frozen[0].flops == trained[1].flops == 2 * 64 * 256 * 512


def test_adamw_bytes_per_param_by_implementation() -> None:
    # fused: read p, g, m, v and write p, m, v once (fp32: 4 * 7 = 28 B)
    assert optimizer_bytes_per_param("adamw_torch_fused", 4, 4)[0] == 28
    # foreach: 8 passes (lerp, mul, addcmul, sqrt, div, add, addcdiv, weight decay) = 4p + 2g + 14s = 80 B
    assert optimizer_bytes_per_param("adamw_torch", 4, 4) == (80, 8)
    # 8-bit: 1-byte states around bf16 params: 2*2 + 2 + 4*1
    assert optimizer_bytes_per_param("paged_adamw_8bit", 2, 2)[0] == 10


def test_tile_efficiency_is_wave_and_tile_quantization() -> None:
    assert tile_efficiency(128 * 108, 128, 108) == pytest.approx(1.0)  # one full wave of 128x128 tiles
    # 64x64 on one SM: a 128 tile is 1/4 useful, a 64 tile is full at 0.8 of the speed
    assert tile_efficiency(64, 64, 1) == pytest.approx(0.8)
    # 109 tiles on 108 SMs: two waves, the second almost empty
    assert tile_efficiency(128 * 109, 128, 108) == pytest.approx(max(109 / 216, 0.8 * 436 / 540))


def test_an_op_costs_the_slower_of_its_flops_and_bytes_never_under_the_launch_floor() -> None:
    cfg, _arch, reg, _tr, gpu = _inputs()
    dev = device(cfg, reg, gpu)
    assert dev is not None
    mem = Op("norm", "forward", 1, 0.0, 1e9, 1.0)
    assert op_seconds(mem, dev, 3e-6) == pytest.approx(1e9 / (dev.bandwidth * dev.bandwidth_efficiency))
    assert op_seconds(Op("tiny", "forward", 1, 0.0, 10.0, 2.0), dev, 3e-6) == pytest.approx(6e-6)
    big = gemm("big", "forward", 1, 128 * 108, 8192, 128 * 8, 2, 2)
    expect = big.flops / (dev.peak_flops * dev.gemm_efficiency * 1.0 * 8192 / (8192 + 64))
    assert op_seconds(big, dev, 3e-6) == pytest.approx(expect)


def test_forward_gemm_flops_are_two_per_weight_per_token() -> None:
    cfg, arch, reg, tr, _gpu = _inputs(method="full")
    tokens = 128 * 2
    fwd = sum(o.count * o.flops for o in micro_batch_ops(cfg, arch, reg, tr) if o.shape[0] and o.phase == "forward"
              and o.name != "lm_head")
    assert fwd == 2 * tokens * arch.layers * arch.linear_params_per_layer


def test_gpus_without_bf16_train_on_their_fp16_path_and_fp32_says_fp32() -> None:
    for gpu in ("T4-16GB", "V100-16GB"):
        t = estimate({**RUN, "gpu": gpu, "torch_dtype": "bfloat16", "bf16": None}).time
        assert t is not None and t["matmul_dtype"] == "fp16"
        assert t["peak_tflops"] == find_gpu(gpu).fp16_dense_tflops
    t = estimate({**RUN, "bf16": False, "torch_dtype": "float32"}).time
    assert t is not None and t["matmul_dtype"] == "fp32" and t["peak_tflops"] == 19.5


def test_recompute_and_accumulation_lengthen_the_step() -> None:
    base = step_time(*_inputs(gradient_checkpointing=False))
    ckpt = step_time(*_inputs(gradient_checkpointing=True))
    accum = step_time(*_inputs(gradient_checkpointing=False, gradient_accumulation_steps=4))
    assert base and ckpt and accum
    assert ckpt.seconds > base.seconds
    assert accum.micro_batch_seconds == pytest.approx(base.micro_batch_seconds)
    assert accum.seconds > 3.9 * base.micro_batch_seconds


def test_ddp_all_reduce_moves_two_n_minus_one_over_n_of_the_gradients() -> None:
    cfg, arch, reg, tr, _gpu = _inputs(num_gpus=4, parallelism="ddp")
    assert traffic(cfg, arch, reg, tr).link_bytes == pytest.approx(2 * 3 / 4 * tr.params * reg.adapter)


@settings(max_examples=25, deadline=None)
@given(seq=st.sampled_from([64, 256, 1024]), batch=st.integers(1, 8), accum=st.integers(1, 4),
       gpu=st.sampled_from(["A100-SXM-80GB", "T4-16GB", "RTX-4090-24GB", "H100-SXM-80GB"]),
       method=st.sampled_from(["lora", "full"]), price=st.floats(0.1, 10.0))
def test_every_range_holds_its_value(seq: int, batch: int, accum: int, gpu: str, method: str, price: float) -> None:
    t = estimate({**RUN, "max_seq_length": seq, "per_device_train_batch_size": batch, "gpu": gpu,
                  "gradient_accumulation_steps": accum, "method": method, "dataset_tokens": 10**7,
                  "price_per_gpu_hour": price, "bf16": gpu != "T4-16GB", "fp16": gpu == "T4-16GB"}).time
    assert t is not None
    for key in ("step_seconds", "tokens_per_second", "total_hours", "cost", "cost_per_million_tokens"):
        low, high = t["range"][key]
        assert low <= t[key] <= high, key
    # the throughput range is the step range seen from the other side
    tokens = seq * batch * accum
    assert t["range"]["tokens_per_second"][0] == pytest.approx(tokens / t["range"]["step_seconds"][1])
    assert t["cost"] == pytest.approx(t["total_hours"] * price)
    assert t["cost_per_million_tokens"] == pytest.approx(t["cost"] / (10**7 * 3 / 1e6))


def test_deadline_and_price_parsing() -> None:
    assert parse_deadline("24h") == 24 and parse_deadline("90m") == 1.5 and parse_deadline("2d") == 48
    assert parse_deadline("6") == 6
    assert parse_prices(["A100-SXM-80GB=1.5"]) == {"A100-SXM-80GB": 1.5}
    with pytest.raises(SizingError):
        parse_deadline("soon")
    with pytest.raises(SizingError):
        parse_prices(["A100=cheap"])


def _row(gpu: str, hours: float, n: int = 1) -> dict:
    tps = 1e6 / hours / 3600
    return {"gpu": gpu, "fewest_gpus": n, "time": {"total_hours": hours, "tokens_per_second": tps,
                                                   "step_seconds": 1.0, "range": {"step_seconds": [0.8, 1.2]}}}


def test_cheapest_gpu_that_finishes_in_time() -> None:
    rows = [_row("fast", 2.0), _row("slow", 30.0), _row("pair", 5.0, n=2), _row("unpriced", 1.0)]
    prices = {"fast": 4.0, "slow": 0.1, "pair": 0.5}
    ranked = rank(rows, "cost", prices, None, deadline_hours=24)
    # slow misses the deadline; pair costs 5 h x 2 GPUs x 0.5 = 5.0, fast 2 h x 4.0 = 8.0; no price goes last
    assert [r["gpu"] for r in ranked] == ["pair", "fast", "unpriced"]
    assert ranked[0]["time"]["cost"] == pytest.approx(5.0)
    assert ranked[0]["time"]["range"]["cost"] == pytest.approx([4.0, 6.0])
    assert [r["gpu"] for r in rank(rows, "hours")] == ["unpriced", "fast", "pair", "slow"]


def test_a_user_utilization_overrides_the_gemm_efficiency_only() -> None:
    low = step_time(*_inputs(utilization=0.2))
    high = step_time(*_inputs(utilization=0.8))
    assert low and high and low.breakdown["gemm"] > high.breakdown["gemm"]
    assert low.breakdown["memory"] == high.breakdown["memory"]
    assert math.isfinite(low.seconds)


def test_no_time_without_the_gpu_figures() -> None:
    cfg, arch, reg, tr, gpu = _inputs()
    bare = replace(gpu, memory_bandwidth_GBps=None)
    assert step_time(cfg, arch, reg, tr, bare) is None
