# The step's memory: configuration + architecture -> every component at every moment of one step.
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .errors import SizingError
from .frameworks import eval_builds_cache, rope_tables
from .grid import grid, virtual_tokens
from .memory.activations import LayerSaved
from .memory.adapters import Trainable, trainable
from .memory.allocator import round_up
from .memory.backward_trace import HeadNorm, SavedBySeq, Walk
from .memory.fsdp_init import fsdp_units
from .memory.load import TORCHAO_CHUNK, NF4Load, nf4_load
from .memory.loss import head, no_grad_head
from .memory.optimizer import LION, optimizer_state, zero_fp32_optimizer
from .memory.overhead import CUBLAS_WS_HOPPER, CUBLAS_WS_OLDER, overhead
from .memory.regime import HF_STACK, Regime, beyond_window, resolve
from .memory.replay import PREFIX, SPANS, Replay, replay
from .memory.timeline import Moment, Outside, StepInputs, moments, peak
from .memory.weights import nf4_linears, weights
from .parallel import Totals, shares
from .step_keys import (
    _BASE,
    _BASE_GETTER,
    _FIXED,
    _KEY_GETTER,
    _SAVED,
    _WALKS,
    CLEARS,
    _arch_token,
    _cfg_key,
    _gpu_key,
    with_fields,
)

__all__ = ["StepMemory", "clear_caches", "outside", "reserved_peak", "step_memory", "with_fields"]


@dataclass(frozen=True)
class StepMemory:
    """The resolved regime, the moments of steps 0 and 1, the peak among them and the detail counters."""

    regime: Regime
    moments: list[Moment]
    peak: Moment
    detail: dict[str, int]
    tensors: Replay  # the step's tensors at the replay's shape: the run's own, or a solver probe's grid shape
    replay_dynamic: int  # dynamic bytes at that shape
    load: NF4Load | None = None  # the framework builds and quantizes the model on the GPU before the step

    def cache_overhead(self, expandable: bool, needed: bool = False) -> int:
        """Bytes the caching allocator reserves above the allocated peak (needed: the least of them a full card
        must hold, cached whole segments released): the replayed overhead at the replay's shape (the run's own:
        exactly that; a probe's grid shape: in proportion to this shape's dynamic bytes)."""
        allocated, reserved, least = _replayed(self.tensors, expandable)
        over, dynamic = max((least if needed else reserved) - allocated, 0), max(self.peak.total - self.static_bytes, 0)
        if dynamic and dynamic == self.replay_dynamic:
            return over  # the replay ran at this shape
        return int(over / max(self.replay_dynamic, 1) * dynamic)

    @property
    def static_bytes(self) -> int:
        """Bytes allocated once and never freed during the step: they do not fragment the cache.
        FSDP's gathered units come and go with every layer, so they count as dynamic."""
        pk = self.peak
        kept = sum(pk.parts.get(k, 0) for k in ("weights", "quantization_state", "adapters", "optimizer_states"))
        return kept - self.detail["gathered_bytes"]


def outside(mem: StepMemory, expandable: bool) -> tuple[Outside, ...]:
    """The moments outside the step that the run's framework goes through (frameworks.Profile)."""
    return (nf4_load(mem.load, expandable),) if mem.load is not None else ()


@lru_cache(maxsize=512)
def _replayed(r: Replay, expandable: bool) -> tuple[int, int, int]:
    return replay(r, expandable)


def step_memory(cfg: RunConfig, arch: Architecture, gpu: Gpu | None, backend: str = "cuda",
                grid_shape: bool = False) -> StepMemory:
    """Memory of every moment of one optimizer step, its allocator replayed at the run's own shape; grid_shape
    (the solvers' probes): at the shape rounded up to the replay grid (grid.grid), whose replay every probe of one
    grid cell shares, its overhead scaled to this shape's dynamic bytes."""
    if virtual_tokens(cfg):
        # PeftModelForCausalLM.forward (prompt learning) concatenates the virtual-token embeddings before the
        # input's and pads labels/attention mask to match: every layer and the logits see seq + n tokens.
        cfg = with_fields(cfg, max_seq_length=cfg.max_seq_length + virtual_tokens(cfg))
    mem = _stepped(cfg, arch, gpu, backend)
    shape = grid(cfg.max_seq_length), grid(cfg.per_device_train_batch_size)
    if not grid_shape or shape == (cfg.max_seq_length, cfg.per_device_train_batch_size):
        return mem
    at = _stepped(with_fields(cfg, max_seq_length=shape[0], per_device_train_batch_size=shape[1]), arch, gpu, backend)
    return with_fields(mem, tensors=at.tensors, replay_dynamic=at.replay_dynamic)


# Steps by everything _step reads (extra is not among them): the solvers' probes of one grid step share the grid
# shape's replay tensors instead of re-running _step (perf: half of a fit table's _step calls), and a search's
# probe and the exact replay of the same value share its step (a tenth more). At most about two fit tables' steps.
_STEPS: dict[tuple[Any, ...], StepMemory] = {}


def _stepped(cfg: RunConfig, arch: Architecture, gpu: Gpu | None, backend: str) -> StepMemory:
    hopper = _gpu_key(gpu) is True
    key = (_cfg_key(cfg, _KEY_GETTER), _arch_token(arch), hopper, backend)
    got = _STEPS.get(key)
    if got is None:
        if len(_STEPS) >= 1024:
            _STEPS.clear()
        if hopper:
            # The card enters the step only as the cuBLAS workspace, allocated once and alive in every moment
            # (timeline.moments), in no replayed tensor: Hopper's step is the older cards' with every moment that
            # much larger (perf: half of a fit table's _step calls; test_step_cache holds it to a cold _step).
            older = _stepped(cfg, arch, None, backend)
            got = _with_workspace(older, CUBLAS_WS_HOPPER - CUBLAS_WS_OLDER)
        else:
            got = _step(cfg, arch, gpu, backend)
        _STEPS[key] = got
    return got


def _with_workspace(mem: StepMemory, extra: int) -> StepMemory:
    """mem with `extra` bytes more workspace in every moment (the same moment peaks: all grow alike)."""
    ms = [with_fields(m, parts={**m.parts, "workspace": m.parts["workspace"] + extra}) for m in mem.moments]
    pk = ms[mem.moments.index(mem.peak)]
    return with_fields(mem, moments=ms, peak=pk, replay_dynamic=mem.replay_dynamic + extra)


CLEARS += [_STEPS.clear, _replayed.cache_clear, SPANS.clear, PREFIX.clear]


def clear_caches() -> None:
    """Forget every cached shape-free part, grid replay record and replay (a cold engine)."""
    for clear in CLEARS:
        clear()


def _step(cfg: RunConfig, arch: Architecture, gpu: Gpu | None, backend: str) -> StepMemory:
    # the base leaves the shape out, but for whether the sequence reaches a sliding window (Regime.windowed)
    key = (_cfg_key(cfg, _BASE_GETTER), _arch_token(arch), backend, beyond_window(cfg, arch))
    base = _BASE.get(key)
    if base is None:
        reg = resolve(cfg, arch, backend)
        if reg.profile.separate_lm_head and arch.tied_embeddings:
            arch = replace(arch, tied_embeddings=False)  # LitGPT 2024 holds the head as its own weight
        tr = trainable(cfg, arch)
        # idle: the vision tower's, never trained; buffers: tuners' frozen factors (PSOFT's, TinyLoRA's), in the
        # adapters' dtype, their int64 indices and those in the base weight's dtype (FRoD's U): whole on every GPU
        # (parallel.Totals.buffers)
        ex = tr.extras
        buffers = (ex.buffers * reg.adapter + ex.index_bytes + ex.weight_buffers * reg.weight) * arch.layers \
            if cfg.is_peft else 0
        w = weights(cfg, arch, reg, tr.params + tr.idle if cfg.is_peft else 0,
                    frozenset(lin.name for lin in tr.targets), buffers)
        grad_elem = reg.weight if reg.full else reg.adapter  # AccumulateGrad keeps the param's dtype
        opt = optimizer_state(cfg.optim, tr.tensors, grad_elem)
        if cfg.parallelism in ("zero2", "zero3") and grad_elem < 4:
            opt = zero_fp32_optimizer(cfg.optim, tr.tensors, tr.params)
        load = None  # the model-load moment does not depend on the batch's shape either
        if reg.profile.nf4_load_on_device and reg.quant == "4bit" and not reg.full and cfg.num_gpus == 1:
            load = NF4Load(arch, w, *nf4_linears(arch, reg, frozenset(lin.name for lin in tr.targets)),
                           reg.profile.nf4_copy_replaces, reg.profile.nf4_layers_cloned,
                           TORCHAO_CHUNK if reg.profile.nf4_chunked else 0, reg.profile.nf4_copy_on_host)
        if len(_BASE) >= 1024:
            _BASE.clear()
            _SAVED.clear()
            _FIXED.clear()
            _WALKS.clear()
        # The layer backward by shape (traced once several shapes ask), what a layer saves by sequence length and
        # the final norm's backward: functions of these four only, shared by every configuration that has them
        # (a fit table's fewest-GPUs probes differ in the GPU count: one walk each otherwise; perf)
        traced = _WALKS.get(walks := (_arch_token(arch), reg, tr, cfg.r))
        if traced is None:
            traced = _WALKS[walks] = (Walk(arch, reg, tr, cfg.r), SavedBySeq(arch, reg, tr, cfg.r),
                                      HeadNorm(arch, reg, tr, cfg.r))
        walk, saved, norm = traced
        # params: summed once
        base = _BASE[key] = reg, arch, tr, tr.params, w, grad_elem, opt, load, walk, saved, norm, buffers
    reg, arch, tr, params, w, grad_elem, opt, load, walk, saved, norm, buffers = base
    grads = params * grad_elem
    seq, batch = cfg.max_seq_length, cfg.per_device_train_batch_size
    n = seq * batch
    ls = _SAVED.get((key, seq))
    if ls is None:
        if len(_SAVED) >= 8192:  # a fit table probes a few hundred lengths: the page's memory stays bounded
            _SAVED.clear()
        ls = _SAVED[key, seq] = saved.at(seq)
    layer_tokens = ls.per_token * n
    if reg.checkpointing:
        body = arch.layers * ls.checkpoint_per_token * n
    else:
        body = arch.layers * (layer_tokens + ls.constant) + ls.layer0_delta_per_token * n + ls.layer0_delta_constant
    if cfg.activation_offloading and reg.checkpointing:
        body = 0  # torchtune OffloadActivations: checkpoint inputs go to pinned host memory
    shared = _shared(cfg, arch, reg, batch, seq)
    hd = head(arch, reg, tr, cfg.r, n, seq, grad_elem, norm.at(seq, n))
    # One layer's backward op by op: its high-water mark above what it saved; under checkpointing the
    # recomputed layer's saved tensors come first (non-reentrant recompute on the first unpack), but for the kept
    # input itself (an fp32 residual stream's first norm saves it uncast: LayerSaved.input_per_token), unless
    # offloading made the kept input a host copy, brought back as a new tensor.
    lb = walk.at(seq, n)
    # Reentrant checkpointing recomputes the layer under enable_grad and backpropagates from its recomputed
    # output, which lives through that inner backward (measured: test_layer_backward.py).
    reentrant_output = n * arch.hidden * reg.resid if reg.checkpointing and reg.reentrant else 0
    if reg.checkpointing and ls.recompute_extra_per_token > 0:
        # the recomputation's own high-water mark (gpt-oss), above the layer output's gradient, before that output
        recompute = n * arch.hidden * reg.resid + ls.recompute_extra_per_token * n - reentrant_output
        lb = replace(lb, peak=max(lb.peak, recompute))
    kept_input = ls.input_per_token if reg.checkpointing and not cfg.activation_offloading else 0
    layer_backward = lb.peak + ((ls.per_token - kept_input) * n + ls.constant if reg.checkpointing else 0)
    layer_backward += reentrant_output
    # The only property of the GPU the memory model reads (_stepped derives Hopper's step from an older card's).
    hopper = _gpu_key(gpu) is True
    ov = overhead(reg, w.largest_linear_elems, n, hopper, arch.vocab * arch.hidden)
    # LitGPT keeps `logits` (and through it the last micro-batch's graph, with the inputs bitsandbytes
    # 0.42 holds) until the next forward returns: through the head's forward and that return where the head says
    # what it holds then (a 4-bit head dequantizes its weight there, not at the loss), else at the forward's end.
    previous_graph = arch.layers * ls.held_per_token * n if reg.profile.previous_graph_alive else 0
    # Tied embeddings trained in full: autograd's input buffer sums the head's and the embedding's dense
    # V x H gradients out of place, so two more V x H tensors than the final gradient are alive for a moment
    # (the two inputs and their sum; measured with real and fake tensors, tests/physics/test_fullscale_oracle.py).
    tied_grad = 2 * arch.vocab * arch.hidden * grad_elem if reg.full and arch.tied_embeddings else 0
    layer_adapter = (params * reg.adapter // arch.layers) if cfg.is_peft else 0
    kept_logits = kept_cache = 0
    if reg.profile.keeps_outputs:  # frameworks.CUSTOM: `out` outlives the step
        kept_logits = 0 if reg.loss == "fused_linear_ce" else n * arch.vocab * _returned_logit(reg)
        kept_cache = 0 if reg.checkpointing or not arch.use_cache else 2 * arch.layers * _kv(arch, reg, n)
    ev = _evaluation(cfg, arch, reg, tr, ls, seq)
    totals = Totals(
        base=w.base_param_bytes, quant_state=w.quant_state_bytes, adapters=w.adapter_param_bytes, gradients=grads,
        optimizer=opt.resident_bytes,
        layer_unit=w.linear_bytes_per_layer + arch.norm_params_per_layer * reg.norm_weight + layer_adapter,
        root_unit=arch.embedding_params * reg.embed + arch.lm_head_params * reg.lm_head_weight
        + arch.hidden * reg.norm_weight,
        layer_grads=(grads // arch.layers),
        root_grads=sum(rows * cols * count for rows, cols, count in tr.tensors if count < arch.layers) * grad_elem,
        grad_elem=grad_elem, quant_state_sharded=reg.profile.torchao_nf4,
        embed_unit=arch.embedding_params * reg.embed, head_unit=arch.lm_head_params * reg.lm_head_weight,
        embed_grads=arch.embedding_params * grad_elem if reg.full else 0,
        head_grads=arch.lm_head_params * grad_elem if reg.full else 0, buffers=buffers)
    sh = shares(cfg, totals)
    # RoPE buffers (torchtune's, older transformers'): whole on every GPU (FSDP shards params)
    rope_table, rope_count = rope_tables(cfg, arch, reg.weight)
    rope = rope_table * rope_count
    inputs = StepInputs(
        weights=sh.weights + rope, quant_state=sh.quant_state, adapters=sh.adapters,
        gradients=sh.gradients, optimizer=sh.optimizer, comm_buffers=sh.comm_buffers,
        head_gradients=int(hd.head_grad_bytes * (sh.own.share if sh.own else 1)),
        optimizer_temp=int(opt.step_temporary_bytes * sh.optimizer_fraction), body=body, shared=shared,
        head_body=hd.body_side,
        loss_saved=hd.loss_saved, loss_forward_extra=hd.forward_extra, loss_backward_extra=hd.backward_extra,
        layer_backward=layer_backward,
        forward_transient=(ls.cached_weight_copies if reg.checkpointing else 0)
        + (0 if hd.returned else ov.dequant_forward + previous_graph),
        tied_gradient=tied_grad,
        backward_transient=ov.dequant_backward, workspace=ov.cublas_workspace,
        accumulating=cfg.gradient_accumulation_steps > 1, grads_freed_in_backward=cfg.optimizer_in_backward,
        kept_logits=kept_logits, kept_cache=kept_cache,
        # torchtune 0.1-0.2: `logits = logits[..., :-1, :].contiguous()` lives until the next forward returns
        held_logits=4 * n * arch.vocab if reg.loss == "fp32_logits" else hd.held,
        head_logits=hd.output, head_transient=ov.dequant_forward if hd.returned else 0, returned_logits=hd.returned,
        previous_logits=hd.held if reg.profile.previous_graph_alive else 0,
        previous_graph=previous_graph if hd.returned else 0,
        first_layer=layer_backward + (ls.checkpoint_per_token * n if reg.checkpointing
                                      else layer_tokens + ls.constant + ls.layer0_delta_per_token * n
                                      + ls.layer0_delta_constant),
        # this GPU's share of the embedding's and of one layer's gradients (sharded runs hold a part)
        embed_gradient=int(arch.embedding_params * grad_elem * sh.gradients / max(grads, 1)) if reg.full else 0,
        layer_gradients=sh.gradients // arch.layers,
        cache_shared=not reg.masked and reg.attention != "eager",  # else SDPA/eager saved repeat_kv copies
        root_gradients=sh.root_gradients, grads_before_root=sh.grads_before_root, comm_static=sh.comm_static,
        own_units=sh.own, carried_grads=sh.carried, kept_gathered=sh.kept_gathered,
        head_gather_copy=sh.head_gather_copy, layer_gather_copy=sh.layer_gather_copy,
        eval_layer=sum(ev.layer), eval_shared=ev.shared + ev.cached, eval_loss=sum(ev.head),
        eval_cache=2 * arch.layers * ev.kv,
        eval_kept=sum(ev.prior), eval_logits=ev.logits, eval_concat=ev.concat, eval_concatenates=ev.whole[0] > 0)
    detail = {
        "param_bytes": w.param_bytes, "quant_state_bytes": w.quant_state_bytes,
        "trainable_params": params + _untrained(arch, tr, reg.full),
        "gradient_bytes": grads, "optimizer_state_bytes": opt.resident_bytes + opt.paged_bytes,
        "paged_optimizer_bytes": opt.paged_bytes, "layer_saved_bytes_per_token": ls.per_token,
        "layer_constant_bytes": ls.constant, "layer_backward_bytes": lb.peak + reentrant_output,
        "retained_activation_bytes": body + shared + hd.body_side + hd.loss_saved, "tokens": n,
        "nccl_bytes": sh.nccl_bytes, "host_offload_bytes": sh.host_bytes, "gathered_bytes": sh.gathered,
        "eval_kept_bytes": sum(ev.prior),  # compute_metrics: the earlier evaluation batches' predictions and labels
    }
    ms = moments(inputs)
    root = sh.root_held if sh.gathered else 0
    per_layer_static = (sh.weights - sh.gathered) // arch.layers
    fixed = _FIXED.get(key)  # the shape-free tensor lists (_BASE's key: shares read the same fields)
    if fixed is None:
        static: list[int] = []
        linears = [lin.params * lin.count for lin in arch.linears]
        # one tensor per projection (FSDP: one flat shard per unit), the same for every layer
        static += ([per_layer_static * p // sum(linears) for p in linears] if not sh.gathered
                   else [per_layer_static]) * arch.layers
        if not sh.gathered:
            static.append(max(sh.weights - sum(static), 0))  # embeddings, norms, LM head
        static += [rope_table] * rope_count
        static += [sh.quant_state, sh.adapters] if cfg.is_peft else [sh.quant_state]
        # Gradient tensors as backward produces them: per decoder layer, then the rest (embeddings, head, norms).
        share = sh.gradients / max(grads, 1)  # sharded gradients: this GPU's part of each
        layer_grads = tuple(int(rows * cols * grad_elem * share) for rows, cols, count in tr.tensors
                            if count >= arch.layers for _ in range(count // arch.layers))
        rest = [int(rows * cols * grad_elem * share) * count for rows, cols, count in tr.tensors
                if count < arch.layers]
        fixed = _FIXED[key] = tuple(filter(None, static)), layer_grads, tuple(x for x in rest if x)
    static_tensors, layer_grads, head_grads = fixed
    rp = Replay(
        static=static_tensors, layers=arch.layers,
        saved=tuple(x * n for x in (ls.recomputed(kept_input) if reg.checkpointing else ls.pieces)),
        layer_constant=ls.constant, checkpoint=ls.checkpoint_per_token * n if reg.checkpointing else 0,
        forward_transient=ov.dequant_forward,
        backward_transient=ov.dequant_backward, backward_events=lb.events,
        gathered_unit=(sh.gathered - root) // 2 if sh.gathered else 0,
        head_saved=(hd.body_side, hd.loss_saved), loss_forward=hd.forward_extra,
        loss_backward=(hd.backward_extra // 2, hd.backward_extra - hd.backward_extra // 2),
        head_grads=head_grads, layer_grads=layer_grads, comm_buffer=sh.comm_buffers,
        comm_static=sh.comm_static,
        states_per_grad=sh.optimizer / max(sh.gradients, 1), temp_per_grad=inputs.optimizer_temp / max(sh.gradients, 1),
        accumulating=inputs.accumulating, one_state=cfg.optim in LION,
        eval_layer=ev.layer, eval_cache=ev.kv, eval_head=ev.head, eval_cached=ev.cached,
        eval_kept=ev.kept, eval_batch=tuple(x for x in ev.batch if x),
        eval_whole=tuple(x for x in ev.whole if x),
        **fsdp_units(cfg, arch, reg, w, totals.root_unit, per_layer_static))
    pk = peak(ms)
    mem = StepMemory(reg, ms, pk, detail, rp, 0, load)
    return with_fields(mem, replay_dynamic=max(pk.total - mem.static_bytes, 0))


def reserved_peak(mem: StepMemory, expandable: bool, needed: bool = False) -> int:
    """max_memory_reserved on an ample card: the allocated peak plus what the replayed cache holds above it,
    in 2 MiB pages; needed=True: what the card must have (the fit verdict)."""
    step = round_up(mem.peak.total + mem.cache_overhead(expandable, needed))
    # Reserved memory only grows: a moment before the step (a model load) that reserved more sets the peak.
    return max([step] + [round_up(o.needed if needed else o.reserved) for o in outside(mem, expandable)])


@dataclass(frozen=True)
class _Eval:
    """The Trainer's evaluation pass at the evaluation batch (timeline._evaluation): one layer's tensors, the RoPE
    tables and masks, the head's and the loss's, and one k (or v) of a layer the KV cache keeps (bytes; 0: no cache;
    empty: no evaluation)."""

    layer: tuple[int, ...] = ()
    shared: int = 0
    head: tuple[int, ...] = ()
    kv: int = 0
    cached: int = 0  # autocast's cached copies of trainable fp32 weights, every layer's by the loss
    # compute_metrics (_kept): the predictions and labels kept from the earlier batches, the last batch's, all of them
    # after its concatenation (each a (predictions, labels) pair, gathered from every GPU); and the logits TRL's
    # extra forward makes for them when its loss makes none
    prior: tuple[int, int] = (0, 0)
    batch: tuple[int, int] = (0, 0)
    whole: tuple[int, int] = (0, 0)
    logits: int = 0
    # the earlier batches' predictions and labels as the loop holds them: the two wholes (concatenated), or each
    # batch's pair (eval_do_concat_batches false: a list)
    kept: tuple[int, ...] = ()

    @property
    def concat(self) -> int:
        """What the loop holds once the last batch's predictions are added: the old whole, the batch's and the new
        whole its concatenation makes, with the labels' (concatenated after them: the predictions' is the larger); the
        earlier batches' and the batch's where nothing is concatenated (a list, or a chunk of one batch)."""
        return sum(self.prior) + sum(self.batch) + self.whole[0]


def _evaluation(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, ls: LayerSaved, seq: int) -> _Eval:
    """What the evaluation pass holds (eval_strategy other than "no"): sequences of max_seq_length (packed or
    padded to the longest, as in training), per_device_eval_batch_size of them. Without gradients a layer frees
    its tensors as it goes: what training saves of one layer, with its input, bounds what it holds at once."""
    if cfg.eval_strategy == "no":
        return _Eval()
    batch = eval_batch(cfg)
    n = batch * seq
    hd = no_grad_head(arch, reg, tr, cfg.r, n, seq)
    kv = _kv(arch, reg, n) if eval_builds_cache(cfg, arch.use_cache) else 0
    # a layer's own cached weight copies are among `cached` below (the whole forward's)
    layer = (n * arch.hidden * reg.resid, *(x * n for x in ls.pieces),
             max(ls.constant - ls.cached_weight_copies // arch.layers, 0))
    # autocast caches its casts of trainable fp32 weights (fp32 adapters) through the whole forward, gradients or not
    return _kept(cfg, arch, reg, seq, _Eval(tuple(x for x in layer if x), _shared(cfg, arch, reg, batch, seq),
                                            tuple(x for x in (hd.body_side, hd.loss_saved, hd.forward_extra) if x),
                                            kv, cached=ls.cached_weight_copies))


def eval_batch(cfg: RunConfig) -> int:
    """Sequences of an evaluation batch on each GPU: per_device_eval_batch_size, or the whole set split over the GPUs
    where eval_samples gives one that is smaller (the DataLoader's one batch is the set)."""
    if cfg.eval_samples:
        return min(cfg.per_device_eval_batch_size, -(-cfg.eval_samples // cfg.num_gpus))
    return cfg.per_device_eval_batch_size


def eval_batches(cfg: RunConfig) -> int:
    """Batches of one evaluation pass: eval_samples over per_device_eval_batch_size on every GPU (at least one)."""
    return max(math.ceil((cfg.eval_samples or 0) / (cfg.per_device_eval_batch_size * cfg.num_gpus)), 1)


def eval_kept_sequences(cfg: RunConfig) -> tuple[int, int, int]:
    """compute_metrics: the sequences of one evaluation batch gathered from every GPU, the batches held on the GPU
    before they move to the CPU (eval_accumulation_steps, else all; batch_eval_metrics: one, the loop keeps none),
    and the sequences held after the last of them."""
    per_step = cfg.per_device_eval_batch_size * cfg.num_gpus  # every GPU gathers every GPU's batch
    if cfg.batch_eval_metrics:
        return per_step, 1, min(per_step, cfg.eval_samples or per_step)
    batches = eval_batches(cfg)
    chunk = min(batches, cfg.eval_accumulation_steps or batches)
    return per_step, chunk, min(chunk * per_step, cfg.eval_samples or 0)


def _kept(cfg: RunConfig, arch: Architecture, reg: Regime, seq: int, ev: _Eval) -> _Eval:
    """`ev` with what compute_metrics makes the evaluation loop keep on the GPU (transformers 5.24 trainer.py
    evaluation_loop): each batch's logits (accelerate's prepared model returns them in fp32 under mixed precision,
    convert_outputs_to_fp32) or, with preprocess_logits_for_metrics, its argmax (int64 token ids), and its labels
    (int64), gathered from every GPU (gather_for_metrics) and concatenated onto those of the earlier batches
    (EvalLoopContainer.add: nested_concat makes a new whole while the old one and the batch are alive) until
    eval_accumulation_steps batches have passed (to_cpu_and_numpy: to the CPU) or the set ends (measured on the CPU:
    tests/physics/test_eval_predictions.py). With batch_eval_metrics compute_metrics takes each batch's as it comes
    and the loop keeps none; with eval_do_concat_batches false it appends each batch's to a list, no concatenation."""
    if not cfg.compute_metrics:
        return ev
    if cfg.eval_samples is None and not cfg.batch_eval_metrics:
        raise SizingError("eval_samples_required", "compute_metrics keeps the predictions of the whole evaluation "
                          "set: give its number of sequences in eval_samples", field="eval_samples")
    per_step, chunk, kept = eval_kept_sequences(cfg)
    logit = 4 if reg.autocast else _returned_logit(reg)  # accelerate's fp32 copy under mixed precision
    per_token = 8 if cfg.preprocess_logits_for_metrics == "argmax" else arch.vocab * logit
    last = min(per_step, kept)

    def pair(sequences: int) -> tuple[int, int]:
        return sequences * seq * per_token, sequences * seq * 8

    # TRL's fused LM head makes no logits: with compute_metrics its compute_loss runs the model again for them
    # (sft_trainer.py v1.16.0 compute_loss, return_outputs=True): the projection and accelerate's fp32 copy
    logits = 0
    if reg.loss == "fused_linear_ce":
        logits = eval_batch(cfg) * seq * arch.vocab * (_returned_logit(reg) + (4 if reg.autocast else 0))
    concat = chunk > 1 and cfg.eval_do_concat_batches
    earlier = [min(per_step, kept - last - i) for i in range(0, kept - last, per_step)]
    tensors = pair(kept - last) if concat else tuple(x for n in earlier for x in pair(n))
    return replace(ev, prior=pair(kept - last), batch=pair(last), whole=pair(kept) if concat else (0, 0),
                   logits=logits, kept=tuple(x for x in tensors if x))


def _returned_logit(reg: Regime) -> int:
    """Bytes per logit of the logits the model's forward returns: the head's output dtype, or the fp32 upcast
    transformers < 4.46 returned (frameworks.hf_logits)."""
    if reg.loss == "hf" and reg.hf_logits == "upcast":
        return 4
    return reg.compute if reg.autocast else reg.lm_head_weight


def _shared(cfg: RunConfig, arch: Architecture, reg: Regime, batch: int, seq: int) -> int:
    """What every layer of a forward reads and none frees: the RoPE cos/sin tables and the attention masks."""
    rope_width = arch.head_dim // 2 if arch.rope_half else arch.head_dim
    return arch.rope_kinds * 2 * seq * rope_width * reg.resid + _masks(cfg, arch, reg, batch, seq)


def _kv(arch: Architecture, reg: Regime, tokens: int) -> int:
    """One layer's k (or v) as a DynamicCache keeps it: `tokens` positions of the key/value width."""
    return tokens * arch.kv_width * reg.compute


def _masks(cfg: RunConfig, arch: Architecture, reg: Regime, batch: int, seq: int) -> int:
    """The attention masks retained through backward. Eager attention adds its float mask ([B, 1, S, S] in the
    embeddings' dtype, masking_utils.eager_mask, one per kind the model builds) and saves nothing of it, so only a
    checkpointed layer keeps it (its input); SDPA with a padding mask saves the boolean mask (measured:
    tests/physics/test_activations.py, Gemma 2's two masks under checkpointing)."""
    if reg.attention == "eager" and cfg.framework in HF_STACK:
        return arch.mask_kinds * batch * seq * seq * reg.resid if reg.checkpointing else 0
    if reg.windowed:  # the boolean window mask: only a checkpointed layer's input keeps it (measured, as above)
        return batch * seq * seq if reg.checkpointing else 0
    return batch * seq * seq if reg.padded else 0


def _untrained(arch: Architecture, tr: Trainable, full: bool) -> int:
    """Parameters with requires_grad that a text-only step never reaches (a vision tower's, or its adapters): they
    count as trainable, as PEFT and the trial recipe count them, but get no gradient or optimizer state."""
    if arch.tower is None:
        return 0
    return arch.tower.params if full else tr.idle
