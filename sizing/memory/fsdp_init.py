# The FSDP wrap before the first step: each unit's parameters moved to the GPU, broadcast, flattened and
# sharded there; the blocks it frees stay cached on the default stream for the whole run.
from __future__ import annotations

from typing import Any

from ..arch import Architecture
from ..config import RunConfig
from ..parallel import UNITS_IN_FLIGHT
from .allocator import SMALL_SIZE, CachingAllocator, _Block, round_size
from .regime import Regime
from .repeat import Mark, jump, mark, repeats
from .weights import Weights

MiB = 2**20
# torch.distributed.fsdp._init_utils: _sync_module_params_and_buffers broadcasts in buckets of
# PARAM_BROADCAST_BUCKET_SIZE = int(250 * 1024 * 1024) through dist._broadcast_coalesced (torch v2.2 _init_utils.py).
BROADCAST_BUCKET = 250 * MiB
# The longest cycle of decoder units looked for (memory/repeat.py), within the first PERIODS units of a run
# (perf: a wrap whose pool has not repeated by then is run unit by unit without looking further). Shards of 1-10 MiB
# share 20 MiB segments (allocator.LARGE_BUFFER): one of 2 MiB starts a segment every 10 units.
PERIODS = 12


def broadcast_coalesced(a: CachingAllocator, sizes: tuple[int, ...], limit: int = BROADCAST_BUCKET,
                        waiting: list[_Block] | None = None) -> tuple[int, ...]:
    """Replay dist._broadcast_coalesced of tensors of `sizes` bytes (one dtype) on `a`, as rank 0 runs it; returns
    the indices of the tensors broadcast alone (their bucket is a view of their own storage).

    torch/csrc/distributed/c10d/comm.cpp: compute_bucket_assignment_by_size adds each tensor to the open bucket
    and closes it once it holds >= the limit; each BroadcastWork flattens its bucket (flatten_dense_tensors: a
    view for a single tensor, torch.cat for more) and at most 2 are in flight, the oldest finished and dropped
    before the next starts (measured: tests/physics/test_fsdp_broadcast.py). waiting: over NCCL the flattened
    buckets' blocks go there instead of back to the pool (NCCL_STREAM below)."""
    flats, alone = _buckets(sizes, limit)
    in_flight: list[_Block | None] = []
    for flat in flats:
        if len(in_flight) >= 2:
            done = in_flight.pop(0)
            if done is not None:
                a.free(done) if waiting is None else waiting.append(done)
        in_flight.append(a.malloc(flat) if flat is not None else None)
    for done in in_flight:
        if done is not None:
            a.free(done) if waiting is None else waiting.append(done)
    return alone


# The bucket assignment by the tensors' sizes and the limit: the same for every decoder unit of a wrap and every
# wrap of a fit table's FSDP probes (perf: a 70B wrap broadcasts 81 units)
_BUCKETS: dict[tuple[tuple[int, ...], int], tuple[tuple[int | None, ...], tuple[int, ...]]] = {}


def _buckets(sizes: tuple[int, ...], limit: int) -> tuple[tuple[int | None, ...], tuple[int, ...]]:
    """compute_bucket_assignment_by_size's buckets of `sizes`: each bucket's flattened bytes (None: a tensor alone,
    broadcast as a view of its own storage), and the indices of those tensors."""
    got = _BUCKETS.get((sizes, limit))
    if got is None:
        buckets: list[list[int]] = [[]]
        for s in sizes:
            buckets[-1].append(s)
            if sum(buckets[-1]) >= limit:
                buckets.append([])
        flats: list[int | None] = []
        alone: list[int] = []
        first = 0
        for bucket in filter(None, buckets):
            if len(bucket) == 1:
                alone.append(first)
            flats.append(sum(bucket) if len(bucket) > 1 else None)
            first += len(bucket)
        if len(_BUCKETS) >= 256:
            _BUCKETS.clear()
        got = _BUCKETS[sizes, limit] = tuple(flats), tuple(alone)
    return got


# A broadcast's input is recorded on NCCL's stream (ProcessGroupNCCL.cpp collective(): recordStream(inputs[i],
# ncclStream) unless TORCH_NCCL_AVOID_RECORD_STREAMS, default false), so freeing it only queues an event
# (CUDACachingAllocator.cpp DeviceCachingAllocator::free: stream_uses -> insert_events) and the block returns to
# the pool at the first malloc whose process_events() finds the broadcast done. The CPU learns that at its next
# blocking copy: a parameter's move (param.to(device), Copy.cu copy_kernel_cuda: memcpy_and_sync) synchronises
# the default stream, which waits for the broadcast (BroadcastWork::finish: work_->wait()). So a unit's flat
# parameter and shard cannot reuse its own buckets, and the next unit gets them back from its second tensor on.


def _release(a: CachingAllocator, waiting: list[_Block]) -> None:
    """The blocks waiting for NCCL's stream back to the pool (a blocking copy has synchronised the stream)."""
    for b in waiting:
        a.free(b)
    waiting.clear()


def fsdp1_init(a: CachingAllocator, units: tuple[tuple[int, ...], ...], shards: tuple[int, ...], sync: bool,
               offload: bool = False) -> list[_Block]:
    """Replay FullyShardedDataParallel(module on CPU, device_id=cuda) on `a`, unit by unit in post order; returns the
    blocks still waiting for NCCL's stream at its end (the caller frees them at the step's first malloc).

    torch v2.2 fsdp/_init_utils.py _init_param_handle_from_module: _move_module_to_device moves the unit's
    own parameters (not those of nested units, _wrap_utils._auto_wrap wraps children first) to the GPU,
    one tensor each; sync_module_states broadcasts them; FlatParamHandle.flatten_tensors_into_flat_param
    concatenates them into one flat parameter; FlatParamHandle.shard() keeps `chunk.clone()` padded to 1/world
    and frees the flat parameter; the original tensors go when _init_param_handle_from_params returns.
    `shards`: each unit's shard as the replay holds it. They are freed at the end: the replay allocates the
    resident shards itself, in the same slots (same sizes, best fit). offload (CPUOffload(offload_params=True)):
    _init_param_handle_from_params moves each shard to the CPU right after its unit (handle.flat_param_to), a
    blocking copy. sync: the broadcast's buffers (and a tensor broadcast alone) wait for NCCL's stream."""
    if len(units) != len(shards):
        raise ValueError("one shard per unit")
    kept: list[_Block] = []
    waiting: list[_Block] = []
    # The decoder units repeat once the pool within their reach does, every unit or every few (small shards fill
    # a segment several at a time): memory/repeat.py. On the plain allocator only (a capped one's wall sees the
    # absolute reserved bytes), each shard kept to the end, in the large pool (the small pool's growth depends on
    # its absolute bytes, which a kept small shard raises unit after unit: never a repeat).
    plain = type(a) is CachingAllocator and not a.expandable and not offload
    marks: list[Mark] = []  # at the start of each unit of the current run of equal units
    i = 0
    while i < len(units):
        unit = units[i], shards[i]
        if not (i and (units[i - 1], shards[i - 1]) == unit):
            marks = []
        looking = marks or (i + 1 < len(units) and (units[i + 1], shards[i + 1]) == unit)
        if plain and round_size(unit[1]) > SMALL_SIZE and looking and len(marks) < PERIODS:
            now = mark(a, _least(*unit, sync), waiting, len(kept))
            left = next((j for j in range(i, len(units)) if (units[j], shards[j]) != unit), len(units)) - i
            period = next((p for p in range(1, min(len(marks), PERIODS) + 1) if repeats(marks[-p], now)), 0)
            if period and left >= period:
                window = [m.peaks for m in marks[-period:]]
                peaks = tuple(max(x) for x in zip(*window, strict=True))
                if jump(a, marks[-period], now, peaks, left // period, kept):
                    i += left // period * period
                    marks = []
                    continue
            held = a.peak_allocated, a.peak_reserved, a.peak_needed  # the unit's own peaks, from none
            a.peak_allocated = a.peak_reserved = a.peak_needed = -1
            _unit(a, *unit, sync, offload, kept, waiting)
            now.peaks = a.peak_allocated, a.peak_reserved, a.peak_needed
            a.peak_allocated, a.peak_reserved, a.peak_needed = (max(x, y) for x, y in zip(held, now.peaks, strict=True))
            marks.append(now)
        else:
            _unit(a, *unit, sync, offload, kept, waiting)
        i += 1
    a.free_all(kept)
    return waiting


def _unit(a: CachingAllocator, sizes: tuple[int, ...], shard: int, sync: bool, offload: bool, kept: list[_Block],
          waiting: list[_Block]) -> None:
    """One unit of fsdp1_init: its tensors moved and broadcast, flattened, its shard kept (appended to kept)."""
    params = []
    moved = tuple(filter(None, sizes))
    for s in moved:
        params.append(a.malloc(s))
        if waiting:  # its copy to the GPU synchronised the stream: the next malloc finds them free
            _release(a, waiting)
    alone = broadcast_coalesced(a, moved, waiting=waiting) if sync else ()
    total = sum(sizes)
    flat = a.malloc(total)
    kept.append(a.malloc(shard))
    a.free(flat)  # shard(): orig_storage._resize_(0)
    # the caller's managed_params list keeps them until the handle is built
    a.free_all([b for i, b in enumerate(params) if i not in alone])
    waiting += [params[i] for i in alone]
    if offload:
        a.free(kept.pop())
        _release(a, waiting)  # flat_param_to(cpu): a blocking copy


def _least(sizes: tuple[int, ...], shard: int, sync: bool) -> int:
    """A unit's smallest request of the large pool (its block size; above every size when it has none)."""
    flats = _buckets(tuple(filter(None, sizes)), BROADCAST_BUCKET)[0] if sync else ()
    large = [n for n in (*sizes, *(f for f in flats if f is not None), sum(sizes), shard)
             if round_size(n) > SMALL_SIZE]
    return min(map(round_size, large), default=1 << 62)


def fsdp_units(cfg: RunConfig, arch: Architecture, reg: Regime, w: Weights, root: int,
               layer_shard: int) -> dict[str, Any]:
    """FSDP's units as its wrap moves them to the GPU (post order: decoder layers, then the root), each as its
    tensors' full sizes, and their shards; none where the framework empties the cache before training or
    nothing is sharded (Replay.init_units). Under CPU offload also the step's host-to-device copy of a shard
    (Replay.h2d_copy)."""
    fsdp = cfg.parallelism in ("fsdp", "fsdp_shard_grad_op") and cfg.num_gpus >= 2
    elems = [lin.in_features * lin.out_features for lin in arch.linears for _ in range(lin.count)]
    per = [w.linear_bytes_per_layer * e // max(sum(elems), 1) for e in elems]
    layer = (*per, arch.norm_params_per_layer * reg.norm_weight)
    out: dict[str, Any] = {}
    if fsdp and cfg.cpu_offload:
        # torch v2.2 fsdp/_flat_param.py: pre_unshard() copies the CPU shard to the GPU (flat_param_to(device,
        # non_blocking=True)) on the pre-unshard stream, and _all_gather_flat_param hands it to the unshard stream
        # ("In case of offloading, `flat_param.data` (i.e. sharded param) is created on the pre-unshard stream"); it
        # is freed when the gathered parameter replaces it. The root's copy comes alone at the forward's start,
        # the decoder units' at most UNITS_IN_FLIGHT at once (limit_all_gathers). FSDP2 copies each sharded
        # parameter the same way (torch 2.13 fsdp/_fully_shard/_fsdp_param.py all_gather_inputs: .to(device,
        # non_blocking=True) under CPUOffloadPolicy). (NO_SHARD computes on its copy itself, already the gathered
        # units of parallel.shares.)
        n = cfg.num_gpus
        own = (arch.embedding_params * reg.embed, arch.lm_head_params * reg.lm_head_weight)
        held: tuple[int, ...] = (root - sum(own), *own) if cfg.fsdp_shard_embeddings else (root,)
        out["h2d_copy"] = max(*(-(-u // n) for u in held), UNITS_IN_FLIGHT * -(-sum(layer) // n))
    if not fsdp or reg.profile.empties_cache:
        return out
    embed, head = arch.embedding_params * reg.embed, arch.lm_head_params * reg.lm_head_weight
    # The root's own tensors in the order sync_module_states broadcasts them: managed_params, module.parameters()
    # less the nested units' (torch v2.2.1 fsdp/_init_utils.py l.581-585, _get_orig_params l.1133): embeddings,
    # final norm, LM head; a layer's: its linears, then its norms.
    units = (layer,) * arch.layers + ((embed, root - embed - head, head),)
    # CPU offload keeps no resident shard: the wrap still makes it on the GPU, then moves it to the host
    shard = layer_shard or -(-sum(layer) // cfg.num_gpus)
    return {**out, "init_units": units, "init_shards": (shard,) * arch.layers + (-(-root // cfg.num_gpus),),
            "init_offload": cfg.cpu_offload, "init_sync": reg.profile.fsdp_broadcast}
