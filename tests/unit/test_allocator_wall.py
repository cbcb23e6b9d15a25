# The caching allocator at the card's wall (sizing/memory/wall.py): allocation sequences whose outcome is derived
# by hand from CUDACachingAllocator.cpp malloc() (torch 2.13: alloc_block, then release_cached_blocks and one
# retry, then OutOfMemoryError; release_available_cached_blocks is a no-op without max_split_size), and random
# traces held to the plain simulator of tests/unit/_wall_ref.py.
from __future__ import annotations

import json
import random

import pytest

from sizing import estimate
from sizing.card import on_card
from sizing.catalog import find_gpu, resolve_architecture
from sizing.cli import format_estimate
from sizing.config import parse_config
from sizing.estimate import Estimate
from sizing.memory.allocator import CachingAllocator, usable_bytes
from sizing.memory.replay import replay
from sizing.memory.wall import CappedAllocator, OutOfMemory, Wall
from sizing.solve import Sizer
from sizing.step import step_memory

from . import _wall_ref as ref

MiB = 2**20


def _card(capacity: int, pools: int = 1) -> tuple[Wall, list[CappedAllocator]]:
    wall = Wall(capacity)
    return wall, [CappedAllocator(wall) for _ in range(pools)]


def test_a_cached_whole_segment_is_released_and_the_request_retried() -> None:
    # 100 MiB card. malloc(60 MiB): cudaMalloc(60 MiB) (>= kMinLargeAlloc, a multiple of 2 MiB), reserved 60.
    # free: the segment is cached whole. malloc(70 MiB): no cached block holds it; cudaMalloc(70) would make
    # 130 > 100 and fails; release_cached_blocks frees the 60 (no prev/next) -> reserved 0; the retry makes 70.
    # max_memory_reserved is 70 (an ample card: 130); what the card had to hold at the worst moment: 70.
    wall, (a,) = _card(100 * MiB)
    a.free(a.malloc(60 * MiB))
    a.malloc(70 * MiB)
    assert (a.reserved, wall.peak_reserved, wall.peak_needed) == (70 * MiB, 70 * MiB, 70 * MiB)
    ample = CachingAllocator()
    ample.free(ample.malloc(60 * MiB))
    ample.malloc(70 * MiB)
    assert ample.peak_reserved == 130 * MiB


def test_the_retrys_segment_splits_into_the_pool_the_release_left() -> None:
    # 20 MiB card, a whole 12 MiB segment cached. malloc(12.5 MiB): cudaMalloc(14 MiB) would make 26 > 20, so the
    # 12 is released and the retry makes 14, split (1.5 MiB > 1 MiB remains) into the block and a free tail. Freeing
    # the block merges the tail back: one whole cached 14 MiB segment.
    _, (a,) = _card(20 * MiB)
    a.free(a.malloc(12 * MiB))
    b = a.malloc(12 * MiB + MiB // 2)
    assert (a.reserved, a.cached_whole, b.next is not None and b.next.free) == (14 * MiB, 0, True)
    a.free(b)
    assert (a.reserved, a.cached_whole, [size for size, _ in a._keys]) == (14 * MiB, 14 * MiB, [14 * MiB])


def test_a_live_segment_is_never_released_so_the_retry_fails() -> None:
    # 60 MiB live, then 50 MiB: 110 > 100, nothing cached to free, the retry fails with 110 needed.
    wall, (a,) = _card(100 * MiB)
    a.malloc(60 * MiB)
    with pytest.raises(OutOfMemory) as oom:
        a.malloc(50 * MiB)
    assert oom.value.needed == 110 * MiB and wall.peak_reserved == 60 * MiB


def test_a_split_segment_with_a_free_tail_stays_reserved() -> None:
    # malloc(60), free, malloc(30): best fit takes the 60 MiB block and splits it (30 MiB > 1 MiB remains), so
    # the segment is 30 live + 30 free. malloc(50): the 30 MiB tail does not hold it; cudaMalloc(50) would make
    # 110 > 100; release_blocks skips the tail (it has a prev) -> OOM needing 110. A 110 MiB card runs it.
    wall, (a,) = _card(100 * MiB)
    a.free(a.malloc(60 * MiB))
    a.malloc(30 * MiB)
    with pytest.raises(OutOfMemory) as oom:
        a.malloc(50 * MiB)
    assert oom.value.needed == 110 * MiB
    wall, (b,) = _card(110 * MiB)
    b.free(b.malloc(60 * MiB))
    b.malloc(30 * MiB)
    b.malloc(50 * MiB)
    assert wall.peak_reserved == 110 * MiB


def test_the_small_pool_gives_back_its_empty_segments_at_the_wall() -> None:
    # Three 1 MiB tensors (<= kSmallSize: the small pool): x and y fill one 2 MiB segment (kSmallBuffer), z a
    # second; reserved 4. y and z are freed: the second segment is empty (one free block, no neighbours), the
    # first is split (x live). 12 MiB on a 14 MiB card: cudaMalloc(12 MiB) would make 16 > 14;
    # release_blocks(small_blocks) frees the empty small segment -> 2, and the retry makes 2 + 12 = 14.
    wall, (a,) = _card(14 * MiB)
    x, y, z = (a.malloc(MiB) for _ in range(3))
    assert a.reserved == 4 * MiB
    a.free(y)
    a.free(z)
    a.malloc(12 * MiB)
    assert (a.reserved, wall.peak_reserved) == (14 * MiB, 14 * MiB)
    # a 1 MiB tensor takes y's place next to x; the next needs a new small segment: 14 + 2 > 14, nothing cached
    # whole (x's segment is full, the 12 MiB is live) -> OOM
    a.malloc(MiB)
    with pytest.raises(OutOfMemory):
        a.malloc(MiB)
    del x


def test_one_wall_for_every_stream_pool() -> None:
    # Blocks are per stream, the device's memory is not: a request on one stream that meets the wall frees the
    # cached whole segments of every stream (release_cached_blocks walks the device's pools).
    wall, (a, b) = _card(100 * MiB, pools=2)
    b.free(b.malloc(40 * MiB))  # cached on stream b
    a.malloc(50 * MiB)  # 90 <= 100
    a.malloc(30 * MiB)  # 120 > 100: b's 40 goes, 80
    assert (a.reserved, b.reserved, wall.peak_reserved) == (80 * MiB, 0, 90 * MiB)


def _trace(seed: int) -> tuple[int, list[tuple[str, int]]]:
    rng = random.Random(seed)
    ops: list[tuple[str, int]] = []
    live = 0
    for _ in range(400):
        if live and rng.random() < 0.45:
            ops.append(("free", rng.randrange(live)))
            live -= 1
        else:
            ops.append(("malloc", rng.choice([rng.randint(1, 4096), rng.randint(MiB - 2048, MiB + 2048),
                                              rng.randint(1, 12 * MiB), rng.randint(1, 120) * MiB])))
            live += 1
    return rng.randint(60, 1200) * MiB + rng.randrange(MiB), ops


@pytest.mark.parametrize("seed", range(40))
def test_random_traces_give_the_plain_simulators_wall(seed: int) -> None:
    capacity, ops = _trace(seed)
    wall, (fast,) = _card(capacity)
    slow = ref.RefAllocator(capacity)
    live: list[tuple[object, object]] = []
    for op, arg in ops:
        if op == "free":
            f, s = live.pop(arg)
            fast.free(f)  # type: ignore[arg-type]
            slow.free(s)
            continue
        try:
            s_block = slow.malloc(arg)
        except ref.RefOOM as want:
            with pytest.raises(OutOfMemory) as got:
                fast.malloc(arg)
            assert got.value.needed == want.needed
            return
        live.append((fast.malloc(arg), s_block))
        assert (fast.reserved, wall.peak_reserved, wall.peak_needed) == (
            slow.reserved(), slow.peak_reserved, slow.peak_needed)


def _r143() -> dict[str, object]:
    # Answer.AI fsdp_qlora, Mistral-7B on two RTX 4090 (validation row R143, as written): an ample card reserves
    # ~27 GiB, more than the card's ~23 GiB
    return {"model": "mistralai/Mistral-7B-v0.2", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_quant_storage": "bfloat16", "method": "qlora", "framework": "custom",
            "prepare_model_for_kbit_training": False, "torch_dtype": "bfloat16", "bf16": False,
            "bnb_4bit_compute_dtype": "bfloat16", "r": 64, "lora_alpha": 16.0, "lora_dropout": 0.1,
            "target_modules": ["k_proj", "q_proj", "v_proj", "up_proj", "down_proj", "gate_proj"],
            "bnb_4bit_use_double_quant": True, "max_seq_length": 2048, "packing": True,
            "per_device_train_batch_size": 12, "gradient_accumulation_steps": 1, "num_gpus": 2,
            "parallelism": "fsdp", "cpu_offload": True, "gradient_checkpointing": True, "optim": "adamw_torch",
            "attn_implementation": "sdpa", "gpu": "RTX-4090-24GB"}


def test_a_card_at_least_as_large_as_the_ample_peak_replays_the_same() -> None:
    # Below the wall no cudaMalloc fails, so the capped replay is the ample one (what lets on_card skip it).
    cfg = parse_config({**_r143(), "num_gpus": 1, "parallelism": "none", "cpu_offload": False,
                        "per_device_train_batch_size": 2})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, find_gpu("RTX-4090-24GB"))
    ample = replay(mem.tensors, False)
    assert replay(mem.tensors, False, ample[1]) == ample


def test_the_named_card_reports_its_own_reserved_and_keeps_the_ample_value() -> None:
    run = _r143()
    on = estimate(run)
    ample = estimate({k: v for k, v in run.items() if k != "gpu"})
    usable = usable_bytes(find_gpu("RTX-4090-24GB"))
    assert ample.reserved_bytes > usable  # the ample card's value is over the card ...
    assert on.fits[0]["fits"] and on.reserved_bytes <= usable  # ... the step still runs there, below its wall
    assert on.detail["ample_reserved_bytes"] == Sizer(parse_config(run)).reserved(find_gpu("RTX-4090-24GB"))
    assert on.range_bytes["reserved"][1] <= usable
    assert f"an ample card reserves {ample_gib(on)} GiB" in format_estimate(on)
    assert on.device_bytes - on.reserved_bytes == ample.device_bytes - ample.reserved_bytes
    cfg = parse_config(run)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, find_gpu(cfg.gpu))
    assert on_card(mem, False, usable)[0] == on.reserved_bytes
    # a card it does not fit prints the ample value and the verdict
    small = estimate({**run, "per_device_train_batch_size": 24})
    assert not small.fits[0]["fits"]
    assert small.reserved_bytes == small.detail["ample_reserved_bytes"]
    json.dumps(on.to_dict())


@pytest.mark.parametrize("seed", range(8))
def test_a_capped_run_is_the_run_at_every_capacity_between_its_peak_and_its_capacity(seed: int) -> None:
    # replay.capped reuses a run at capacity c whose reserved peaked at p for every capacity in [p, c]: checked
    # against fresh replays on random traces through the plain simulator (the argument is about the algorithm,
    # not the engine's records): each malloc over c is over the smaller capacity too, each one under it was <= p.
    capacity, ops = _trace(1000 + seed)

    def run(cap: int) -> tuple[int, int, int | None]:
        sim = ref.RefAllocator(cap)
        live: list[object] = []
        for op, arg in ops:
            if op == "free":
                sim.free(live.pop(arg))
                continue
            try:
                live.append(sim.malloc(arg))
            except ref.RefOOM as oom:
                return sim.peak_reserved, sim.peak_needed, oom.needed
        return sim.peak_reserved, sim.peak_needed, None

    first = run(capacity)
    rng = random.Random(seed)
    for cap in {first[0], capacity, *(rng.randint(first[0], capacity) for _ in range(6))}:
        assert run(cap) == first


def test_a_card_above_the_ample_peak_shows_the_ample_reserved() -> None:
    run = {**_r143(), "per_device_train_batch_size": 2}
    on = estimate(run)
    assert on.fits[0]["fits"] and on.reserved_bytes == on.detail["ample_reserved_bytes"]
    assert "ample card" not in format_estimate(on)


def ample_gib(est: Estimate) -> str:
    return f"{est.detail['ample_reserved_bytes'] / 2**30:.2f}"


def test_the_page_names_the_larger_cards_reserved_in_its_language() -> None:
    from sizing import web
    from sizing.view import results_view

    answer = web.compute(_r143())
    for lang in ("ru", "uz", "en"):
        words = {"ample": f"<{lang}>", "gib": "GiB"}
        block = next(b for b in results_view(answer, words, lang)["blocks"] if b["key"] == "uncertainty")
        assert f"<{lang}> " in block["parts"][0]["text"]
    answer = web.compute({**_r143(), "per_device_train_batch_size": 2})  # below the wall: no such note
    block = next(b for b in results_view(answer, {"ample": "<x>"}, "en")["blocks"] if b["key"] == "uncertainty")
    assert "<x>" not in block["parts"][0]["text"]


def test_on_every_catalog_card_the_shown_reserved_is_between_allocated_and_the_card() -> None:
    from sizing.catalog import gpus

    seen = 0
    for run in (_r143(), {**_r143(), "per_device_train_batch_size": 8}, {**_r143(), "max_seq_length": 4096}):
        for gpu in gpus().values():
            est = estimate({**run, "gpu": gpu.id, "bf16": False})
            if est.reserved_bytes == est.detail["ample_reserved_bytes"]:
                continue
            seen += 1  # reserved stopped at the wall: only for a run that fits, and never past the card
            assert est.fits[0]["fits"]
            assert est.allocated_bytes <= est.reserved_bytes <= usable_bytes(gpu)
            assert est.range_bytes["reserved"][0] <= est.range_bytes["reserved"][1] <= usable_bytes(gpu)
    assert seen


def test_the_span_cache_answers_as_a_fresh_capped_replay() -> None:
    from sizing.memory import replay as rp

    cfg = parse_config(_r143())
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    r = step_memory(cfg, arch, find_gpu(cfg.gpu)).tensors
    ample = replay(r, False)
    rp.SPANS.clear()
    rng = random.Random(7)
    caps = [rng.randint(ample[0], ample[1]) for _ in range(5)] + [ample[1] - 2 * MiB]
    for cap in caps + caps[::-1]:
        assert rp.capped(r, False, cap) == replay(r, False, cap)
    assert sum(len(s) for s in rp.SPANS.values()) <= len(caps)
