# One estimate: configuration -> memory of every component at every moment of the step -> the peak.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .arch import Architecture
from .catalog import Gpu, find_gpu, resolve_architecture
from .config import RunConfig, config_to_dict, parse_config
from .errors import SizingError
from .memory.activations import layer_saved
from .memory.adapters import trainable
from .memory.loss import head
from .memory.optimizer import optimizer_state
from .memory.overhead import CUDA_CONTEXT, fragmentation, overhead
from .memory.regime import Regime, resolve
from .memory.timeline import COMPONENTS, Moment, StepInputs, moments, peak
from .memory.weights import weights
from .parallel import Totals, shares
from .throughput import time_estimate
from .warnings import collect_warnings, does_not_fit

ALLOC_ROUND = 2 * 2**20  # the caching allocator rounds large blocks to 2 MiB
# Backward through one decoder layer, as a multiple of its saved activations (memory-model.md §6,
# table E: 0.36-0.48 without checkpointing, 1.2-1.76 with it: the recomputed layer plus transients).
LAYER_BACKWARD = {False: (0.35, 0.45, 0.5), True: (1.2, 1.5, 1.8)}
# How sure we are, by how well the regime is covered by byte-exact checks (relative half-width).
CONFIDENCE_MARGIN = {"high": 0.03, "medium": 0.08, "low": 0.15}


@dataclass
class Estimate:
    config: RunConfig
    model_name: str
    arch: Architecture
    regime: Regime
    moments: list[Moment]
    peak_moment: Moment
    allocated_bytes: int
    reserved_bytes: int
    device_bytes: int
    range_bytes: dict[str, tuple[int, int]]
    confidence: str
    detail: dict[str, int]
    fits: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    time: dict[str, Any] | None = None

    @property
    def components(self) -> dict[str, int]:
        return {name: self.peak_moment.parts.get(name, 0) for name in COMPONENTS}

    def to_dict(self) -> dict[str, Any]:
        lo_hi = {f"{k}_low_bytes": v[0] for k, v in self.range_bytes.items()}
        lo_hi.update({f"{k}_high_bytes": v[1] for k, v in self.range_bytes.items()})
        return {
            "model": self.model_name,
            "peak": {"allocated_bytes": self.allocated_bytes, "reserved_bytes": self.reserved_bytes,
                     "device_bytes": self.device_bytes, "phase": self.peak_moment.phase,
                     "moment": self.peak_moment.what, "step": self.peak_moment.step},
            "components": self.components,
            "uncertainty": {"confidence": self.confidence, **lo_hi},
            "fits": self.fits,
            "time": self.time,
            "warnings": self.warnings,
            "detail": self.detail,
            "config": config_to_dict(self.config),
        }


def _confidence(cfg: RunConfig, arch: Architecture) -> str:
    if arch.experts or cfg.torch_compile:
        return "low"
    llama_like = arch.norm != "layer" and arch.linears[0].name == "q_proj"
    if cfg.framework in ("transformers", "trl", "custom") and llama_like and cfg.quantization_backend == "bitsandbytes":
        return "high"
    return "medium"


def _memory(cfg: RunConfig, arch: Architecture, gpu: Gpu | None, backend: str,
            k_index: int) -> tuple[Regime, list[Moment], dict[str, int]]:
    reg = resolve(cfg, arch, backend)
    if reg.profile.separate_lm_head and arch.tied_embeddings:
        arch = replace(arch, tied_embeddings=False)  # LitGPT 2024 holds the head as its own weight
    tr = trainable(cfg, arch)
    w = weights(cfg, arch, reg, tr.params if cfg.is_peft else 0, frozenset(lin.name for lin in tr.targets))
    grad_elem = reg.weight if reg.full else reg.adapter  # AccumulateGrad keeps the param's dtype
    grads = tr.params * grad_elem
    opt = optimizer_state(cfg.optim, tr.tensors, grad_elem)
    seq, batch = cfg.max_seq_length, cfg.per_device_train_batch_size
    n = seq * batch
    ls = layer_saved(arch, reg, tr, cfg.r, seq)
    layer_tokens = ls.per_token * n
    if reg.checkpointing:
        body = arch.layers * ls.checkpoint_per_token * n
    else:
        body = arch.layers * (layer_tokens + ls.constant) + ls.layer0_delta_per_token * n + ls.layer0_delta_constant
    if cfg.activation_offloading and reg.checkpointing:
        body = 0  # torchtune OffloadActivations: checkpoint inputs go to pinned host memory
    shared = 2 * seq * arch.head_dim * reg.resid + (batch * seq * seq if reg.padded else 0)
    hd = head(arch, reg, tr, cfg.r, n, seq, grad_elem)
    k = LAYER_BACKWARD[reg.checkpointing][k_index]
    layer_backward = int(k * layer_tokens) + (ls.constant if reg.checkpointing else 0)
    # The only property of the GPU the memory model reads: solve.Sizer caches estimates on it.
    hopper = gpu is not None and gpu.sm >= (9, 0)
    ov = overhead(cfg, reg, w.largest_linear_elems, n, hopper, arch.vocab * arch.hidden)
    # LitGPT keeps `logits` (and through it the last micro-batch's graph, with the inputs bitsandbytes
    # 0.42 holds) until the next forward returns.
    previous_graph = arch.layers * ls.held_per_token * n if reg.profile.previous_graph_alive else 0
    # Tied embeddings trained in full: the embedding's dense gradient meets the head's at the end.
    tied_grad = arch.vocab * arch.hidden * grad_elem if reg.full and arch.tied_embeddings else 0
    layer_adapter = (tr.params * reg.adapter // arch.layers) if cfg.is_peft else 0
    totals = Totals(
        base=w.base_param_bytes, quant_state=w.quant_state_bytes, adapters=w.adapter_param_bytes, gradients=grads,
        optimizer=opt.resident_bytes,
        layer_unit=w.linear_bytes_per_layer + arch.norm_params_per_layer * reg.norm_weight + layer_adapter,
        root_unit=arch.embedding_params * reg.embed + arch.lm_head_params * reg.lm_head_weight
        + arch.hidden * reg.norm_weight,
        layer_grads=(grads // arch.layers))
    sh = shares(cfg, totals)
    inputs = StepInputs(
        weights=sh.weights, quant_state=sh.quant_state, adapters=sh.adapters,
        gradients=sh.gradients, head_gradients=hd.head_grad_bytes, optimizer=sh.optimizer, comm_buffers=sh.comm_buffers,
        optimizer_temp=int(opt.step_temporary_bytes * sh.optimizer_fraction), body=body, shared=shared,
        head_body=hd.body_side,
        loss_saved=hd.loss_saved, loss_forward_extra=hd.forward_extra, loss_backward_extra=hd.backward_extra,
        layer_backward=layer_backward,
        forward_transient=(ls.cached_weight_copies if reg.checkpointing else 0) + ov.dequant_forward + previous_graph,
        tied_gradient=tied_grad,
        backward_transient=ov.dequant_backward, workspace=ov.cublas_workspace,
        accumulating=cfg.gradient_accumulation_steps > 1, grads_freed_in_backward=cfg.optimizer_in_backward)
    detail = {
        "param_bytes": w.param_bytes, "quant_state_bytes": w.quant_state_bytes, "trainable_params": tr.params,
        "gradient_bytes": grads, "optimizer_state_bytes": opt.resident_bytes + opt.paged_bytes,
        "paged_optimizer_bytes": opt.paged_bytes, "layer_saved_bytes_per_token": ls.per_token,
        "layer_constant_bytes": ls.constant,
        "retained_activation_bytes": body + shared + hd.body_side + hd.loss_saved, "tokens": n,
        "nccl_bytes": sh.nccl_bytes, "host_offload_bytes": sh.host_bytes, "gathered_bytes": sh.gathered,
    }
    return reg, moments(inputs), detail


def static_bytes(pk: Moment, detail: dict[str, int]) -> int:
    """Bytes allocated once and never freed during the step: they do not fragment the cache.
    FSDP's gathered units come and go with every layer, so they count as dynamic."""
    kept = sum(pk.parts.get(k, 0) for k in ("weights", "quantization_state", "adapters", "optimizer_states"))
    return kept - detail["gathered_bytes"]


def reserved_bytes(allocated: int, static: int, frag: float) -> int:
    """max_memory_reserved for an allocated peak: the dynamic part fragments the cache, and large
    blocks are rounded to 2 MiB. One rule for the estimate, its range and the solvers."""
    n = allocated + int(frag * max(allocated - static, 0))
    return -(-n // ALLOC_ROUND) * ALLOC_ROUND


def estimate(config: RunConfig | Mapping[str, Any], backend: str = "cuda") -> Estimate:
    """Peak GPU memory of one training step for `config` (a RunConfig or a contract mapping).

    backend "cpu" models CPU kernels (dropout masks in the input dtype), for the physics tests.
    """
    cfg = config if isinstance(config, RunConfig) else parse_config(config)
    arch, name = resolve_architecture(cfg.model, cfg.model_config)
    if arch.max_positions and cfg.max_seq_length > arch.max_positions:
        raise SizingError("seq_too_long", f"max_seq_length {cfg.max_seq_length} exceeds the model's "
                          f"max_position_embeddings {arch.max_positions}; raise it in model_config (with rope scaling) "
                          "if you really extend the context", field="max_seq_length",
                          value=cfg.max_seq_length, max=arch.max_positions)
    gpu = find_gpu(cfg.gpu) if cfg.gpu else None
    reg, ms, detail = _memory(cfg, arch, gpu, backend, 1)
    pk = peak(ms)
    lows = peak(_memory(cfg, arch, gpu, backend, 0)[1]).total
    highs = peak(_memory(cfg, arch, gpu, backend, 2)[1]).total
    confidence = _confidence(cfg, arch)
    margin = CONFIDENCE_MARGIN[confidence]
    allocated = pk.total
    static = static_bytes(pk, detail)
    frag = fragmentation(cfg.expandable_segments)
    paged = detail["paged_optimizer_bytes"]

    reserved = reserved_bytes(allocated, static, frag[1])
    outside = paged + detail["nccl_bytes"]  # device memory PyTorch's counters do not see
    device = reserved + CUDA_CONTEXT[1] + outside
    alloc_lo, alloc_hi = int(lows * (1 - margin)), int(highs * (1 + margin))
    res_lo, res_hi = reserved_bytes(alloc_lo, static, frag[0]), reserved_bytes(alloc_hi, static, frag[2])
    ranges = {"allocated": (alloc_lo, alloc_hi), "reserved": (res_lo, res_hi),
              "device": (res_lo + CUDA_CONTEXT[0] + outside, res_hi + CUDA_CONTEXT[2] + outside)}
    est = Estimate(config=cfg, model_name=name, arch=arch, regime=reg, moments=ms, peak_moment=pk,
                   allocated_bytes=allocated, reserved_bytes=reserved, device_bytes=device, range_bytes=ranges,
                   confidence=confidence, detail=detail)
    est.warnings = collect_warnings(cfg, arch, reg, gpu, detail, pk.parts)
    if gpu is not None:
        est.fits = [fit_entry(est, gpu)]
        if not est.fits[0]["fits"]:
            est.warnings.insert(0, does_not_fit(gpu, -est.fits[0]["headroom_bytes"]))
        est.time = time_estimate(cfg, arch, reg, trainable(cfg, arch), gpu)
    return est


def usable_bytes(gpu: Gpu) -> int:
    """What the run's reserved memory may reach: CUDA's total minus the process's CUDA context."""
    return gpu.usable_bytes - CUDA_CONTEXT[1]


def fit_entry(est: Estimate, gpu: Gpu) -> dict[str, Any]:
    from .solve import Sizer, fit_row

    return fit_row(Sizer(est.config), gpu)
