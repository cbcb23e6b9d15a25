"""Moments outside the step (memory/timeline.Outside): which framework goes through them, and how they set
the run's peak. The byte counts themselves are held to CPU traces in tests/physics/test_load_moment.py and
test_fsdp_init.py; these tests check the wiring with hand-derived bounds."""

from __future__ import annotations

from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.estimate import estimate
from sizing.memory.allocator import CachingAllocator
from sizing.memory.fsdp_init import fsdp1_init
from sizing.step import outside, step_memory

MiB = 2**20
QLORA_7B = {"model": "meta-llama/Llama-2-7b-hf", "method": "qlora", "r": 8, "lora_alpha": 16,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            "max_seq_length": 256, "per_device_train_batch_size": 1, "gpu": "RTX-4090-24GB"}


def _outside(cfg_dict: dict[str, object]):
    cfg = parse_config(cfg_dict)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return outside(step_memory(cfg, arch, None), False)


def test_torchtune_single_device_qlora_has_a_load_moment_that_sets_the_peak():
    (load,) = _outside({**QLORA_7B, "framework": "torchtune", "framework_version": "0.1"})
    assert load.moment.phase == "load"
    # to_nf4 of the largest linear (11008 x 4096) holds at least two [N, 16] bf16 tensors: 64 N bytes
    n = 11008 * 4096
    static = sum(load.moment.parts[k] for k in ("weights", "quantization_state", "adapters"))
    assert load.moment.total - static >= 64 * n
    assert load.reserved >= load.moment.total
    est = estimate(parse_config({**QLORA_7B, "framework": "torchtune", "framework_version": "0.1"}))
    # a short sequence: the step is below the load, so the load is the named peak and sets reserved
    assert est.peak_moment.phase == "load"
    assert est.reserved_bytes >= load.reserved
    assert est.to_dict()["peak"]["moment"].startswith("model load")


def test_no_load_moment_where_the_framework_does_not_quantize_on_the_gpu():
    assert _outside({**QLORA_7B, "framework": "transformers"}) == ()  # bitsandbytes quantizes in from_pretrained
    assert _outside({**QLORA_7B, "framework": "torchtune", "method": "lora"}) == ()
    # the distributed recipes shard a meta-device model and empty the cache before training
    assert _outside({**QLORA_7B, "framework": "torchtune", "num_gpus": 2, "parallelism": "fsdp"}) == ()


def test_fsdp_wrap_caches_one_unit_and_keeps_only_shards():
    """Three 100 MiB units over 2 ranks: after the wrap the shards are freed for the replay to re-allocate,
    and what stays reserved is one unit's tensors, its flat copy and the shards' segments (hand-derived)."""
    a = CachingAllocator(False)
    units = ((40 * MiB, 60 * MiB),) * 3
    fsdp1_init(a, units, (50 * MiB,) * 3, sync=False)
    assert a.allocated == 0
    # unit 1: 40 + 60 + 100 (flat) + 50 (shard) reserved; units 2 and 3 reuse the tensors' and the flat's
    # blocks and add a 50 MiB shard segment each
    assert a.reserved == (40 + 60 + 100 + 3 * 50) * MiB


def test_fsdp_wrap_with_cpu_offload_caches_one_unit_only():
    """CPU offload moves each shard to the host right after its unit: every unit reuses the first one's blocks."""
    a = CachingAllocator(False)
    fsdp1_init(a, ((40 * MiB, 60 * MiB),) * 3, (50 * MiB,) * 3, sync=False, offload=True)
    assert a.allocated == 0
    assert a.reserved == (40 + 60 + 100 + 50) * MiB
