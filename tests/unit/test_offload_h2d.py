"""FSDP CPU offload copies each unit's shard to the GPU for its all-gather, on the pre-unshard stream (torch v2.2
fsdp/_flat_param.py pre_unshard / _all_gather_flat_param): the largest copy stays cached in that stream's pool.
Expected sizes are derived by hand from Llama-2-70B's config.json."""

from __future__ import annotations

from sizing import estimate
from sizing.catalog import find_gpu
from sizing.memory.replay import Replay, replay
from sizing.step import step_memory

MiB = 2**20
RUN = {"model": "meta-llama/Llama-2-70b-hf", "method": "qlora", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
       "bnb_4bit_quant_storage": "bfloat16", "bnb_4bit_compute_dtype": "bfloat16", "torch_dtype": "bfloat16",
       "framework": "custom", "prepare_model_for_kbit_training": False, "r": 64, "max_seq_length": 2048,
       "per_device_train_batch_size": 2, "num_gpus": 2, "parallelism": "fsdp", "cpu_offload": True,
       "gradient_checkpointing": True, "gpu": "RTX-3090-24GB"}


def _tensors(run: dict[str, object]) -> Replay:
    est = estimate(run)
    return step_memory(est.config, est.arch, find_gpu(str(run["gpu"]))).tensors


def test_the_roots_shard_is_the_largest_copy() -> None:
    # Root unit: embed_tokens and lm_head (32000 x 8192 bf16 each) and the final norm (8192 bf16), halved over two
    # ranks: 524,296,192 B. A decoder unit's 4-bit weights (855,638,016 elements, 2 per byte) and two norms halved,
    # twice (two all-gathers in flight): 427,851,776 B, less.
    root_shard = (2 * 32000 * 8192 * 2 + 8192 * 2) // 2
    assert _tensors(RUN).h2d_copy == root_shard


def test_no_copy_without_offload_or_sharding() -> None:
    assert _tensors({**RUN, "cpu_offload": False}).h2d_copy == 0
    assert _tensors({**RUN, "num_gpus": 1, "parallelism": "none", "cpu_offload": False}).h2d_copy == 0


def test_the_copy_adds_to_reserved_only() -> None:
    r = _tensors(RUN)
    plain = Replay(**{**r.__dict__, "h2d_copy": 0})
    with_copy, without = replay(r, False), replay(plain, False)
    assert with_copy[0] == without[0]  # freed before the layers compute: not at the allocated peak
    # one segment of the copy rounded to 2 MiB pages (a request above 10 MiB gets its own segment)
    assert with_copy[1] - without[1] == -(-r.h2d_copy // (2 * MiB)) * 2 * MiB
