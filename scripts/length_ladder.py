"""What batches of varying length add to max_memory_reserved, by the engine's own allocator replay: the step replayed
at one shape (what the estimate does) against the same pool replayed over a ladder of lengths up to it, as an
unpacked dataset padded to each batch's longest sample feeds it. Prints figures next to ms-swift's published
benchmark (bs 1, variable-length data, max_memory_reserved); asserts nothing. A research aid: the estimate does not
model varying lengths yet (the length distribution is not in the configuration).

    PYTHONPATH=. python3 scripts/length_ladder.py [--steps 8]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from sizing.catalog import find_gpu, resolve_architecture
from sizing.config import parse_config
from sizing.estimate import estimate
from sizing.memory.allocator import CachingAllocator
from sizing.memory.replay import _prefix, _replay
from sizing.step import step_memory, with_fields

GiB = 2**30
# modelscope/ms-swift docs/source/LLM/Benchmark.md at cdb169b78 ("Model Type & Max Length", LoRA, A100, bs 1,
# gradient checkpointing and flash attention on, swift's default LoRA targets; GPU Memory (GiB) is
# torch.cuda.max_memory_reserved, swift/trainers/mixin.py get_max_cuda_memory); cls-fudan-news-zh, samples over
# max_length dropped: lengths vary from batch to batch.
SWIFT = [("Qwen/Qwen-1_8B-Chat", ["c_attn"], 512, 6.99), ("Qwen/Qwen-1_8B-Chat", ["c_attn"], 2048, 16.35),
         ("Qwen/Qwen-7B-Chat", ["c_attn"], 512, 18.01), ("Qwen/Qwen-7B-Chat", ["c_attn"], 2048, 27.74),
         ("Qwen/Qwen-7B-Chat", ["c_attn"], 4096, 35.31), ("Qwen/Qwen-14B-Chat", ["c_attn"], 2048, 40.14),
         ("THUDM/chatglm3-6b", ["query_key_value"], 2048, 17.20), ("01-ai/Yi-6B-Chat", ["q_proj", "k_proj", "v_proj"],
                                                                   2048, 16.95),
         ("baichuan-inc/Baichuan2-7B-Chat", ["W_pack"], 2048, 19.18)]


def ladder_reserved(run: dict[str, Any], steps: int) -> float:
    """Peak reserved GiB of one pool replayed at lengths L/steps, 2L/steps, ..., L in turn (states made once)."""
    cfg = parse_config(run)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    gpu = find_gpu(cfg.gpu) if cfg.gpu else None
    pool: CachingAllocator | None = None
    for k in range(1, steps + 1):
        r = step_memory(with_fields(cfg, max_seq_length=cfg.max_seq_length * k // steps), arch, gpu, "cuda").tensors
        if pool is None:
            pool = _prefix(r, CachingAllocator(False))
        else:
            r = replace(r, states_per_grad=0)  # the optimizer's states exist from the first length on
        _replay(r, lambda: CachingAllocator(False), pool)
    assert pool is not None
    return pool.peak_reserved / GiB


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8, help="lengths in the ladder")
    args = ap.parse_args()
    print(f"{'model':32s} {'max_length':>10s} {'measured':>9s} {'one shape':>10s} {'ladder':>8s}   (GiB reserved)")
    for model, targets, length, measured in SWIFT:
        run = {"model": model, "method": "lora", "torch_dtype": "bfloat16", "bf16": True, "r": 8,
               "target_modules": targets, "max_seq_length": length, "per_device_train_batch_size": 1,
               "gradient_checkpointing": True, "attn_implementation": "flash_attention_2", "optim": "adamw_torch",
               "gpu": "A100-SXM-80GB"}
        one = estimate(run).reserved_bytes / GiB
        print(f"{model:32s} {length:10d} {measured:9.2f} {one:10.2f} {ladder_reserved(run, args.steps):8.2f}")


if __name__ == "__main__":
    main()
