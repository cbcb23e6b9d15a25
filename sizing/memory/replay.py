# The step's tensors replayed through the caching allocator: what the frees of each moment leave cached,
# so reserved memory follows from allocation order and block sizes instead of a ratio (allocator.py).
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, groupby

from .allocator import SMALL_SIZE, CachingAllocator, _Block, plan, round_size
from .fsdp_init import fsdp1_init
from .kept_run import run_keep
from .pool_state import copy_state
from .wall import CappedAllocator, OutOfMemory, Wall

STEPS = 3  # step 0 allocates the optimizer states lazily; steps 1 and 2 run in the layout it leaves


@dataclass(frozen=True)
class Replay:
    """Tensor sizes of one step, in bytes, in the order the step allocates them."""

    static: tuple[int, ...]  # weights, quantization state, adapters: allocated before training
    layers: int
    saved: tuple[int, ...]  # one decoder layer's saved tensors (forward order); checkpointed: what its recompute makes
    layer_constant: int  # per-layer saved bytes independent of tokens (autocast weight copies)
    checkpoint: int  # a checkpointed layer's kept input (0: no checkpointing)
    forward_transient: int  # per layer in the forward (dequantized weight), freed at once
    backward_transient: int  # per layer in the backward: the dequantized weight
    backward_events: tuple[int, ...]  # one layer's backward transients: size > 0 mallocs, ~i frees block i
    gathered_unit: int  # FSDP: one layer's unsharded parameters, gathered and freed per layer
    head_saved: tuple[int, ...]  # final norm / head input, then the loss's saved tensors
    loss_forward: int  # the loss's forward transients (fp32 upcast of the logits)
    loss_backward: tuple[int, ...]  # the loss backward's gradients (logits-sized)
    head_grads: tuple[int, ...]  # gradients produced by the head's backward
    layer_grads: tuple[int, ...]  # gradients one decoder layer's backward produces
    comm_buffer: int  # DDP buckets / reduce-scatter staging, live from backward to the step
    comm_static: bool  # DDP's Reducer allocates its buckets once, at construction
    states_per_grad: float  # optimizer state bytes per gradient byte
    temp_per_grad: float  # foreach step temporaries (one per parameter tensor) per gradient byte
    accumulating: bool  # gradients are kept across micro-batches (not freed by zero_grad)
    init_units: tuple[tuple[int, ...], ...] = ()  # FSDP wrap on the GPU before step 0: each unit's full tensors
    init_shards: tuple[int, ...] = ()  # each unit's shard (the static block the replay then allocates)
    init_offload: bool = False  # FSDP CPU offload: each shard leaves the GPU right after its unit's wrap
    one_state: bool = False  # Lion: one moment per parameter (Adam's states_per_grad >= 2 are two tensors)
    init_sync: bool = True  # the wrap broadcasts rank 0's weights (sync_module_states)
    h2d_copy: int = 0  # FSDP CPU offload: the largest shard copied in for an all-gather, on a stream of its own
    # The Trainer's evaluation pass after the last step, in the same pool: per layer its tensors made and dropped and
    # its k and v kept by the KV cache (0: none), then the head and the loss (empty: no evaluation)
    eval_layer: tuple[int, ...] = ()
    eval_cache: int = 0
    eval_head: tuple[int, ...] = ()
    eval_cached: int = 0  # autocast's cached copies of trainable fp32 weights: from the first layer to the loss
    # compute_metrics: the predictions and labels kept from the earlier batches, the last batch's, and the wholes their
    # concatenation makes (empty: none kept, or a chunk of one batch, kept as it is)
    eval_kept: tuple[int, ...] = ()
    eval_batch: tuple[int, ...] = ()
    eval_whole: tuple[int, ...] = ()


def replay(r: Replay, expandable: bool, capacity: int | None = None) -> tuple[int, int, int]:
    """(peak allocated, peak reserved, peak needed) of STEPS steps of `r` through the caching allocator;
    needed: reserved less the cached whole segments the allocator frees and retries with on a full card.
    With a capacity: the same on a card of that many usable bytes (memory/wall.py), reserved as that card's
    max_memory_reserved; needed > capacity when the step runs out of memory there (the replay stops)."""
    if capacity is None:
        return _replay(r, lambda: CachingAllocator(expandable), _prefixed(r, expandable))
    wall = Wall(capacity)
    try:
        allocated = _replay(r, lambda: CappedAllocator(wall, expandable))[0]
    except OutOfMemory as oom:
        return 0, wall.peak_reserved, oom.needed
    return allocated, wall.peak_reserved, wall.peak_needed


# The default stream's pool after the prefix (the FSDP wrap, the static tensors), by what it replays: the same in
# every shape of one configuration, so each replay starts from a copy (pool_state.copy_state; perf).
PREFIX: dict[tuple[object, ...], CachingAllocator] = {}


def _prefix(r: Replay, a: CachingAllocator) -> CachingAllocator:
    waiting = []  # what the FSDP wrap leaves cached on the default stream (memory/fsdp_init.py)
    if r.init_units:
        waiting = fsdp1_init(a, r.init_units, r.init_shards, r.init_sync, r.init_offload)
    for size in r.static + ((r.comm_buffer,) if r.comm_static and r.comm_buffer else ()):
        a.malloc(size)
    for b in waiting:  # its last broadcast buffers: back in the pool at the step's first malloc
        a.free(b)
    return a


def _prefixed(r: Replay, expandable: bool) -> CachingAllocator:
    key = (expandable, r.static, r.comm_buffer if r.comm_static else 0, r.init_units, r.init_shards, r.init_sync,
           r.init_offload)
    got = PREFIX.get(key)
    if got is None:
        if len(PREFIX) >= 64:
            PREFIX.clear()
        got = PREFIX[key] = _prefix(r, CachingAllocator(expandable))
    return copy_state(got)


def _replay(r: Replay, pool: Callable[[], CachingAllocator],
            start: CachingAllocator | None = None) -> tuple[int, int, int]:
    """The replay, from `start` (the prefix already replayed) or from a new pool."""
    a = _prefix(r, pool()) if start is None else start
    # The overhead is the cache above the step's own allocated peak: the FSDP wrap's transients (unit, flat
    # parameter and shard at once) come before the step and may pass it (fsdp_qlora train.py l.809 and the
    # Trainer reset the peak after the wrap; reserved only grows, so what the wrap cached still counts).
    a.peak_allocated = a.allocated
    # Blocks belong to the stream that allocated them and are re-used only by it (CUDACachingAllocator.cpp,
    # "Allocations are associated with a stream"): FSDP gathers units on its unshard stream and stages
    # reduce-scatters on its post-backward stream, so those come from pools of their own.
    ag, rs = (pool(), pool()) if r.gathered_unit else (a, a)
    units = _Units(ag, r.gathered_unit, skip=not isinstance(ag, CappedAllocator))
    # Under CPU offload each unit's shard is copied to the GPU on FSDP's pre-unshard stream and freed once the
    # all-gather has read it (fsdp_init.fsdp_units): a block that stays cached in that stream's pool, never
    # alive at the step's allocated peak, so it adds to reserved only.
    h2d = pool() if r.h2d_copy else None
    if h2d is not None:
        h2d.free(h2d.malloc(r.h2d_copy))
    grads: list[_Block] = []
    states_done = False
    # Every request size rounded and classed once (allocator.plan), not at each of the layers' thousands of calls
    saved, head_saved, loss_backward = plan(r.saved), plan(r.head_saved), plan(r.loss_backward)
    kept_saved = plan(r.saved + ((r.layer_constant,) if r.layer_constant else ()))
    forward_transient, loss_forward = plan((r.forward_transient,)), plan((r.loss_forward,))
    checkpoint = plan((r.checkpoint,))
    events = [(e > 0, plan((e,))[0] if e > 0 else ~e) for e in r.backward_events]
    layer_runs = _layer_runs(r, kept_saved, events)
    event_run = _event_run(events)
    grad_blocks = [round_size(n) for n in r.layer_grads]
    # a layer's gradients when all are small (_layer_runs' run that makes them): blocks only counted, in no segment
    # and never changed, so one list of them serves every layer (perf)
    small_grads, small_bytes = [_Block(size, False, True) for size in grad_blocks], sum(grad_blocks)
    keep_run = _keep_run(r, kept_saved, event_run) if a.dry and True not in layer_runs else None
    temps: tuple[int, ...] | None = None
    pools = (a,) if ag is a else (a, ag, rs)
    seen: tuple[object, ...] | None = None  # the previous step's counters and layouts, at its start
    for step in range(STEPS):
        if step:
            # A step that starts from the state the previous one started from (the same counters, the blocks
            # alike up to which is which: CachingAllocator.layout) repeats it operation by operation, and so does
            # every later step: their peaks are those already reached (perf; test_replay_skip holds it to the
            # full replay).
            counters = tuple(p.counters() for p in pools)
            if step < STEPS - 1 or (seen is not None and seen[0] == counters):
                # gradients: pool a's blocks (a small one lies in no segment: layout never reads it)
                roles = {b: i for i, b in enumerate(grads) if not b.small}
                now = (counters, tuple(p.layout(roles if p is a else {}) for p in pools))
                if now == seen:
                    break
                seen = now
        kept: list[list[_Block]] = []
        for _layer in range(r.layers):
            unit = units.malloc()
            if r.forward_transient:
                a.run_free(forward_transient)
            if r.checkpoint:
                ck = a.run(checkpoint)
                a.run_free(saved)  # computed, then dropped by the checkpoint
                kept.append(ck)
            else:
                kept.append(a.run(kept_saved))
            units.free(unit)
        head = a.run(head_saved)
        if r.loss_forward:
            a.run_free(loss_forward)
        loss_grads = a.run(loss_backward)
        a.free_all(head + loss_grads)
        new_grads = not grads
        if new_grads:
            grads += a.malloc_all(r.head_grads)
        comm = rs.malloc(r.comm_buffer) if r.comm_buffer and not r.comm_static else None
        for blocks in reversed(kept):
            unit = units.malloc()
            layer_run = layer_runs.get(new_grads)
            if layer_run is not None:  # the same operations, the layer's transients as one run (_layer_runs)
                a.run_free(layer_run, small_bytes if new_grads else 0)
                if new_grads:
                    grads += small_grads
                a.free_all(blocks)
                units.free(unit)
                continue
            if new_grads and keep_run is not None:  # the layer's large gradients kept, the rest one run (kept_run)
                got = run_keep(a, *keep_run)
                if got is not None:
                    large = iter(got)
                    grads += [next(large) if size > SMALL_SIZE else _Block(size, False, True) for size in grad_blocks]
                    a.free_all(blocks)
                    units.free(unit)
                    continue
            # the recompute makes autocast's weight casts again, saved by the matmuls (ckpt_forward.json)
            recomputed = a.run(kept_saved) if r.checkpoint else []
            tmp = a.malloc(r.backward_transient) if r.backward_transient else None
            if new_grads:
                grads += a.malloc_all(r.layer_grads)
            if event_run is not None:
                a.run_free(event_run)
            else:
                ops: list[_Block] = []
                for grow, e in events:  # memory/backward.py: gradients op by op
                    if grow:
                        ops.append(a._large(e) if e > 0 else a._small(-e))
                    else:
                        a.free(ops[e])
            if tmp is not None:
                a.free(tmp)
            a.free_all(recomputed + blocks)
            units.free(unit)
        if not states_done:
            # torch optimizers create their states lazily in the first step()
            # (kept to the end: run() of their plan, no block per small state)
            if r.states_per_grad:  # Adam (>= 2): exp_avg and exp_avg_sq, each its own tensor
                states = _scaled(grads, r.states_per_grad, r.states_per_grad >= 2 and not r.one_state)
                # never freed: as one run, adjacent states one block (kept_run.run_keep's forever)
                if not a.dry or run_keep(a, states, (True,) * len(states), forever=True) is None:
                    a.run(states)
            states_done = True
        if r.temp_per_grad:  # torch._foreach_sqrt(exp_avg_sqs): one result per tensor, freed after the step
            if temps is None or not r.accumulating:  # accumulated gradients are the same blocks every step
                temps = _scaled(grads, r.temp_per_grad, False)
            a.run_free(temps)
        if comm is not None:
            rs.free(comm)
        if not r.accumulating:
            a.free_all(grads)  # zero_grad(set_to_none=True)
            grads = []
    if r.eval_head:
        _evaluate(r, a, units, grads)
    # Each pool's peaks: the allocated peak of their sum is at most the sum (the engine's own allocated
    # figure is what is reported); reserved only grows, so the reserved peaks add.
    extra = (h2d.peak_reserved, h2d.peak_needed) if h2d is not None else (0, 0)
    return (sum(p.peak_allocated for p in pools), sum(p.peak_reserved for p in pools) + extra[0],
            sum(p.peak_needed for p in pools) + extra[1])


def _evaluate(r: Replay, a: CachingAllocator, units: _Units, grads: list[_Block]) -> None:
    """The Trainer's evaluation pass after the last optimizer step, on the pool the steps left: zero_grad has freed the
    gradients (accumulated ones too), each layer's tensors come and go but for the k and v a KV cache keeps, then
    the loss over the evaluation batch's logits; the cache goes with the outputs."""
    a.free_all(grads)
    layer, head = plan(r.eval_layer), plan(r.eval_head)
    kept = a.malloc_all(r.eval_kept)  # the earlier batches' predictions and labels (compute_metrics)
    cache: list[_Block] = [a.malloc(r.eval_cached)] if r.eval_cached else []
    for _layer in range(r.layers):
        unit = units.malloc()
        if r.eval_cache:
            cache += a.run(plan((r.eval_cache, r.eval_cache)))
        a.run_free(layer)
        units.free(unit)
    a.run_free(head)
    a.free_all(cache)
    batch = a.malloc_all(r.eval_batch)
    if r.eval_whole:  # the predictions', then the labels' concatenation: the new whole, then the old and the batch's go
        wholes = []
        for old, new, size in zip(kept, batch, r.eval_whole, strict=True):
            wholes.append(a.malloc(size))
            a.free_all([old, new])
        kept, batch = wholes, []
    a.free_all(kept + batch)  # to the CPU (to_cpu_and_numpy)


class _Units:
    """FSDP's unshard-stream pool (its own: blocks belong to their stream) holds one gathered unit at a time, always
    of one size: after the first malloc/free pair its state and peaks repeat exactly, so later pairs are skipped
    (perf: two per layer and step). A capped pool keeps every pair: an OOM retry in another stream's pool can
    release the cached unit (memory/wall.py), and the next gather then meets the wall again."""

    __slots__ = ("done", "pool", "size", "skip")

    def __init__(self, pool: CachingAllocator, size: int, skip: bool) -> None:
        self.pool, self.size, self.skip, self.done = pool, size, skip, False

    def malloc(self) -> _Block | None:
        if not self.size or (self.skip and self.done):
            return None
        return self.pool.malloc(self.size)

    def free(self, b: _Block | None) -> None:
        if b is not None:
            self.pool.free(b)
            self.done = True


# _scaled's plans by the gradients' block sizes: the same in every replay of a configuration whose gradients are
# small (LoRA's: not rounded to a segment), so a fit table plans them once (perf: hundreds of tensors per plan)
_SCALED: dict[tuple[tuple[int, ...], float, bool], tuple[int, ...]] = {}


def _scaled(grads: list[_Block], per_grad: float, adam: bool) -> tuple[int, ...]:
    """plan() of a tensor of per_grad times each gradient's bytes (adam: two of half that, exp_avg and exp_avg_sq)."""
    key = tuple([g.size for g in grads]), per_grad, adam
    got = _SCALED.get(key)
    if got is None:
        if len(_SCALED) >= 64:
            _SCALED.clear()
        # plan() of the whole list is its tensors' one-request plans with each run of small ones summed: each
        # distinct gradient size planned once (a fit table's gradients come in a few sizes, layer after layer)
        one = {size: plan((int(size * per_grad / 2),) * 2 if adam else (int(size * per_grad),)) for size in set(key[0])}
        out: list[int] = []
        for small, run in groupby(chain.from_iterable(map(one.__getitem__, key[0])), (0).__gt__):
            if small:
                out.append(sum(run))
            else:
                out += run
        got = _SCALED[key] = tuple(out)
    return got


def _event_run(events: list[tuple[bool, int]]) -> tuple[int, ...] | None:
    """A layer's backward events as one run_free's requests, when they are its operations: every malloc, then
    the frees of each block in the order allocated (the small ones' bytes subtracted at once, which moves no peak);
    None: the op-by-op loop. run_free's dry path then answers without blocks (perf)."""
    grows = tuple(e for grow, e in events if grow)
    if all(grow for grow, _ in events[:len(grows)]) and [e for _, e in events[len(grows):]] == list(range(len(grows))):
        return grows
    return None


def _keep_run(r: Replay, saved: tuple[int, ...],
              event_run: tuple[int, ...] | None) -> tuple[tuple[int, ...], tuple[bool, ...]] | None:
    """The first backward of a layer whose gradients are not all small (no run of _layer_runs), as kept_run.run_keep's
    requests and which of them stay (the gradients): the recomputed saved tensors (`saved`: with the layer's
    constants), the dequantized weight, the gradients, then the events as one run (None: they are not one)."""
    if event_run is None:
        return None
    body = (saved if r.checkpoint else ()) + (plan((r.backward_transient,)) if r.backward_transient else ())
    grads = plan(r.layer_grads)
    return body + grads + event_run, (False,) * len(body) + (True,) * len(grads) + (False,) * len(event_run)


def _layer_runs(r: Replay, saved: tuple[int, ...],
                events: list[tuple[bool, int]]) -> dict[bool, tuple[int, ...]]:
    """One layer's backward as one run_free (by whether it makes the layer's gradients), when everything it
    allocates but its gradients is freed by its end and nothing is freed before its last malloc: the recomputed
    saved tensors (`saved`: with the layer's constants), the dequantized weight, the gradients (all small: their
    bytes are kept; large ones need blocks, so only a layer that makes none, as accumulated gradients' later
    steps, is a run then) and the events, which allocate, then free each block. Freeing them in another order
    leaves the same pool (its free blocks are the maximal free ranges), and no peak moves at a free. A case
    missing: the op-by-op loop."""
    grows = [e for grow, e in events if grow]
    grads = plan(r.layer_grads)
    if any(grow for grow, _ in events[len(grows):]) or sorted(e for grow, e in events if not grow) != \
            list(range(len(grows))):
        return {}
    body = (saved if r.checkpoint else ()) + (plan((r.backward_transient,)) if r.backward_transient else ())
    if any(x > 0 for x in grads):
        return {False: body + tuple(grows)}
    return {False: body + tuple(grows), True: body + grads + tuple(grows)}


# Capped replays already run, per step record: (low, capacity, result). A run at capacity c whose reserved peaked
# at p is the run at every capacity in [p, c]: each cudaMalloc that passed c passes the smaller one too, and every
# one that fit came to at most p, so the same mallocs fail, release the same segments and retry the same way
# (for a run out of memory: up to the same failing retry). A page recomputing one estimate replays it once.
SPANS: dict[tuple[Replay, bool], list[tuple[int, int, tuple[int, int, int]]]] = {}


def capped(r: Replay, expandable: bool, capacity: int) -> tuple[int, int, int]:
    """replay(r, expandable, capacity), each span of capacities replayed once."""
    spans = SPANS.get((r, expandable))
    if spans is None:
        if len(SPANS) >= 512:
            SPANS.clear()
        spans = SPANS[r, expandable] = []
    for low, high, got in spans:
        if low <= capacity <= high:
            return got
    got = replay(r, expandable, capacity)
    spans.append((min(got[1], capacity), capacity, got))
    return got
