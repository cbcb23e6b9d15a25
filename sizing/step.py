# The step's memory: configuration + architecture -> every component at every moment of one step.
from __future__ import annotations

from dataclasses import dataclass, replace

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .memory.activations import layer_saved
from .memory.adapters import trainable
from .memory.loss import head
from .memory.optimizer import optimizer_state
from .memory.overhead import overhead
from .memory.regime import Regime, resolve
from .memory.timeline import Moment, StepInputs, moments, peak
from .memory.weights import weights
from .parallel import Totals, shares

# Backward through one decoder layer, as a multiple of its saved activations (memory-model.md §6,
# table E: 0.36-0.48 without checkpointing, 1.2-1.76 with it: the recomputed layer plus transients).
LAYER_BACKWARD = {False: (0.35, 0.45, 0.5), True: (1.2, 1.5, 1.8)}


@dataclass(frozen=True)
class StepMemory:
    """The resolved regime, the moments of steps 0 and 1, the peak among them and the detail counters."""

    regime: Regime
    moments: list[Moment]
    peak: Moment
    detail: dict[str, int]

    @property
    def static_bytes(self) -> int:
        """Bytes allocated once and never freed during the step: they do not fragment the cache.
        FSDP's gathered units come and go with every layer, so they count as dynamic."""
        pk = self.peak
        kept = sum(pk.parts.get(k, 0) for k in ("weights", "quantization_state", "adapters", "optimizer_states"))
        return kept - self.detail["gathered_bytes"]


def step_memory(cfg: RunConfig, arch: Architecture, gpu: Gpu | None, backend: str = "cuda",
                k_index: int = 1) -> StepMemory:
    """Memory of every moment of one optimizer step; k_index picks the low/mid/high layer-backward transient."""
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
    ov = overhead(reg, w.largest_linear_elems, n, hopper, arch.vocab * arch.hidden)
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
    ms = moments(inputs)
    return StepMemory(reg, ms, peak(ms), detail)
