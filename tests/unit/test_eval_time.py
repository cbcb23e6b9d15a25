"""The Trainer's evaluation passes in the run's hours (throughput.evaluation_hours): how many passes the Trainer makes
(transformers 5.24 trainer_callback.py DefaultFlowCallback: every eval_steps optimizer steps and after the last one,
or after each epoch), each the forward of eval_samples sequences per_device_eval_batch_size per GPU at a time."""

from __future__ import annotations

import math

import pytest

from sizing import estimate, load_config
from sizing.catalog import find_gpu, resolve_architecture
from sizing.memory.adapters import trainable
from sizing.memory.regime import resolve
from sizing.time.roofline import forward_seconds, step_time

RUN = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "max_seq_length": 2048, "per_device_train_batch_size": 2,
       "gradient_accumulation_steps": 4, "gpu": "H100-SXM-80GB", "dataset_tokens": 20_000_000, "num_train_epochs": 2,
       "eval_strategy": "steps", "per_device_eval_batch_size": 8, "eval_samples": 300}


def _forward(**fields: object) -> float:
    cfg = load_config({**RUN, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    reg = resolve(cfg, arch, "cuda")
    got = forward_seconds(cfg, arch, reg, trainable(cfg, arch), find_gpu(cfg.gpu))
    assert got is not None
    return got


@pytest.mark.parametrize(("fields", "passes"), [
    ({"eval_steps": 100}, math.ceil(math.ceil(20_000_000 * 2 / (2048 * 2 * 4)) / 100)),  # 2442 steps: 25 passes
    ({}, math.ceil(math.ceil(20_000_000 * 2 / (2048 * 2 * 4)) / 500)),  # eval_steps unset: logging_steps, 500
    # SFTConfig's logging_steps is 10 from TRL 0.19.0 (PR #3514), 500 before
    ({"framework": "trl"}, math.ceil(math.ceil(20_000_000 * 2 / (2048 * 2 * 4)) / 10)),
    ({"framework": "trl", "framework_version": "0.18.2"}, math.ceil(math.ceil(20_000_000 * 2 / (2048 * 2 * 4)) / 500)),
    ({"eval_strategy": "epoch"}, 2),
    ({"eval_strategy": "epoch", "num_train_epochs": 1.5}, 2),  # the last, partial epoch ends with one too
    ({"eval_steps": 100, "num_gpus": 2, "parallelism": "ddp"}, math.ceil(math.ceil(20_000_000 * 2 / (2048 * 2 * 4 * 2))
                                                                        / 100)),
])
def test_passes_times_batches_times_one_forward(fields: dict[str, object], passes: int) -> None:
    t = estimate({**RUN, **fields}).time
    assert t is not None
    gpus = int(fields.get("num_gpus", 1))  # type: ignore[call-overload]
    batches = math.ceil(300 / (8 * gpus))
    assert t["evaluation_hours"] == pytest.approx(passes * batches * _forward(**fields) / 3600)
    plain = estimate({**RUN, **fields, "eval_strategy": "no"}).time
    assert plain is not None and plain["evaluation_hours"] is None
    assert t["total_hours"] == pytest.approx(plain["total_hours"] + t["evaluation_hours"])


def test_no_set_size_no_evaluation_hours() -> None:
    t = estimate({**RUN, "eval_samples": None}).time
    assert t is not None and t["evaluation_hours"] is None


def test_a_forward_is_about_a_third_of_a_training_micro_batch() -> None:
    """Without checkpointing a full fine-tuning micro-batch does a forward (2N FLOPs per token) and a backward that
    costs twice as much (4N: Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1): the forward
    at the training batch is a third of it, give or take attention and the memory-bound kernels."""
    fields = {"method": "full", "gradient_checkpointing": False, "per_device_eval_batch_size": 2,
              "torch_dtype": "bfloat16", "bf16": True}
    cfg = load_config({**RUN, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    reg = resolve(cfg, arch, "cuda")
    st = step_time(cfg, arch, reg, trainable(cfg, arch), find_gpu(cfg.gpu))
    assert st is not None
    assert 0.25 < _forward(**fields) / st.micro_batch_seconds < 0.42


def test_a_sharded_forward_waits_for_its_all_gathers() -> None:
    """FSDP (and ZeRO-3) all-gather each unit's weights before its forward, in evaluation as in training. Two RTX
    4090s on the stock driver stage NCCL through host memory: about a quarter of PCIe 4.0 x16's 31.5 GB/s (2x RTX 3090
    with P2P off measured 0.27 of it each way: noonghunna/club-3090 docs/PCIE_P2P.md; 2x RTX 2080 Ti all_gather busbw
    3.79 GB/s on Gen 3, 0.24 of 15.8: the AutoDL interconnection test; both cited in sizing/time/device.py). A 70B NF4
    base holds at least half a byte per parameter, half of it on the other GPU; gathering that takes longer than one
    batch's forward of 512 tokens, and DDP, which holds the weights whole, waits for none of it."""
    base = {"model": "meta-llama/Llama-3.1-70B", "gpu": "RTX-4090-24GB", "num_gpus": 2, "max_seq_length": 512,
            "per_device_eval_batch_size": 1}
    gathered = 70.5e9 * 0.5 / 2
    slowest = gathered / (31.5e9 * 0.27)  # the fastest staged rate above: the least the gathers take
    fsdp, ddp = _forward(**base, parallelism="fsdp"), _forward(**base, parallelism="ddp")
    assert fsdp >= slowest > ddp
    assert _forward(**base, parallelism="zero3") == pytest.approx(fsdp)


def test_a_set_smaller_than_the_batch_is_evaluated_as_one_batch_of_it() -> None:
    """eval_samples 3 with per_device_eval_batch_size 8: the DataLoader's one batch holds 3 sequences, and the pass's
    hours are that batch's forward."""
    t = estimate({**RUN, "eval_samples": 3}).time
    three = estimate({**RUN, "eval_samples": 3, "per_device_eval_batch_size": 3}).time
    assert t is not None and three is not None
    assert t["evaluation_hours"] == pytest.approx(three["evaluation_hours"])
