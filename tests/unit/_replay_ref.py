# The step replay as it was before the step-skip (sizing/memory/replay.py at 5090dd2, all STEPS steps always
# replayed), over the reference allocator: the oracle test_replay_skip holds the replay to.
from __future__ import annotations

from sizing.memory.fsdp_init import fsdp1_init
from sizing.memory.replay import Replay

from ._allocator_ref import CachingAllocator, _Block

STEPS = 3  # step 0 allocates the optimizer states lazily; steps 1 and 2 run in the layout it leaves


def replay(r: Replay, expandable: bool) -> tuple[int, int, int]:
    """(peak allocated, peak reserved, peak needed) of STEPS steps of `r` through the caching allocator;
    needed: reserved less the cached whole segments the allocator frees and retries with on a full card."""
    a = CachingAllocator(expandable)
    # Blocks belong to the stream that allocated them and are re-used only by it (CUDACachingAllocator.cpp,
    # "Allocations are associated with a stream"): FSDP gathers units on its unshard stream and stages
    # reduce-scatters on its post-backward stream, so those come from pools of their own.
    ag, rs = (CachingAllocator(expandable), CachingAllocator(expandable)) if r.gathered_unit else (a, a)
    h2d = CachingAllocator(expandable) if r.h2d_copy else None  # CPU offload's pre-unshard copy (replay.py)
    if h2d is not None:
        h2d.free(h2d.malloc(r.h2d_copy))
    waiting = []
    if r.init_units:  # the FSDP wrap before step 0 (sizing/memory/fsdp_init.py), on the reference allocator
        waiting = fsdp1_init(a, r.init_units, r.init_shards, r.init_sync, r.init_offload)  # type: ignore[arg-type]
    for size in r.static + ((r.comm_buffer,) if r.comm_static and r.comm_buffer else ()):
        a.malloc(size)
    for b in waiting:  # the wrap's last broadcast buffers, freed once NCCL's stream is done (replay._prefix)
        a.free(b)  # type: ignore[arg-type]
    a.peak_allocated = a.allocated  # the step's own allocated peak (replay.py: the wrap comes before the step)
    grads: list[_Block] = []
    states_done = False
    for _ in range(STEPS):
        kept: list[list[_Block]] = []
        for _layer in range(r.layers):
            unit = ag.malloc(r.gathered_unit) if r.gathered_unit else None
            if r.forward_transient:
                a.free(a.malloc(r.forward_transient))
            if r.checkpoint:
                ck = a.malloc(r.checkpoint)
                a.free_all(a.malloc_all(r.saved))  # computed, then dropped by the checkpoint
                kept.append([ck])
            else:
                kept.append(a.malloc_all(r.saved + ((r.layer_constant,) if r.layer_constant else ())))
            if unit is not None:
                ag.free(unit)
        head = a.malloc_all(r.head_saved)
        if r.loss_forward:
            a.free(a.malloc(r.loss_forward))
        loss_grads = a.malloc_all(r.loss_backward)
        a.free_all(head + loss_grads)
        new_grads = not grads
        if new_grads:
            grads += a.malloc_all(r.head_grads)
        comm = rs.malloc(r.comm_buffer) if r.comm_buffer and not r.comm_static else None
        for blocks in reversed(kept):
            unit = ag.malloc(r.gathered_unit) if r.gathered_unit else None
            recomputed = a.malloc_all(r.saved + ((r.layer_constant,) if r.layer_constant else ())) \
                if r.checkpoint else []  # with autocast's casts
            tmp = a.malloc(r.backward_transient) if r.backward_transient else None
            if new_grads:
                grads += a.malloc_all(r.layer_grads)
            ops = []
            for e in r.backward_events:  # one layer's backward transients: malloc a size, ~i frees block i
                if e > 0:
                    ops.append(a.malloc(e))
                else:
                    a.free(ops[~e])
            if tmp is not None:
                a.free(tmp)
            a.free_all(recomputed + blocks)
            if unit is not None:
                ag.free(unit)
        if not states_done:
            # torch optimizers create their states lazily in the first step()
            if r.states_per_grad >= 2:  # Adam: exp_avg and exp_avg_sq, each its own tensor
                a.malloc_all(int(g.size * r.states_per_grad / 2) for g in grads for _ in (0, 1))
            elif r.states_per_grad:
                a.malloc_all(int(g.size * r.states_per_grad) for g in grads)
            states_done = True
        if r.temp_per_grad:  # torch._foreach_sqrt(exp_avg_sqs): one result per tensor, freed after the step
            a.free_all(a.malloc_all(int(g.size * r.temp_per_grad) for g in grads))
        if comm is not None:
            rs.free(comm)
        if not r.accumulating:
            a.free_all(grads)  # zero_grad(set_to_none=True)
            grads = []
    pools = (a,) if ag is a else (a, ag, rs)
    # Each pool's peaks: the allocated peak of their sum is at most the sum (the engine's own allocated
    # figure is what is reported); reserved only grows, so the reserved peaks add.
    extra = (h2d.peak_reserved, h2d.peak_needed) if h2d is not None else (0, 0)
    return (sum(p.peak_allocated for p in pools), sum(p.peak_reserved for p in pools) + extra[0],
            sum(p.peak_needed for p in pools) + extra[1])
