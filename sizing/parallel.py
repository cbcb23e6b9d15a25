# Several GPUs: what each GPU holds under DDP, FSDP full-shard / ZeRO-3 and ZeRO-2, with optional CPU
# offload (PyTorch FSDP and DeepSpeed ZeRO docs; memory-model.md covers the single-GPU step).
from __future__ import annotations

from dataclasses import dataclass

from .config import RunConfig
from .frameworks import profile

# NCCL buffers seen by nvidia-smi, not by PyTorch: NVIDIA aiconfigurator misc.nccl_mem uses 342 MB
# for 2 GPUs and 392 MB for 4-8 (gpus.md §2.1).
NCCL_BYTES = {2: 342_000_000, 4: 392_000_000}
# FSDP keeps the unit being computed and prefetches the next one (forward and backward prefetch).
UNITS_IN_FLIGHT = 2
# DeepSpeed ZeRO's gradient bucket: reduce_bucket_size defaults to 5e8 elements (runtime/zero/config.py,
# `reduce_bucket_size = Field(pp_int(5e8))`, v0.7.7 to v0.16) and contiguous_gradients to True. Stage 3 allocates
# one bucket of that many elements, in the first trainable parameter's dtype, when its optimizer is built and keeps
# it for the run (stage3.py `__ipg_bucket_flat_buffer`, deleted only by destroy()); stages 1-2 allocate it at every
# backward and drop it at the end of it (stage_1_and_2.py backward() `buf_0`; a second one only with overlap_comm,
# which defaults to off below stage 3). Accelerate's DeepSpeed plugin (no JSON file) leaves the key unset, so the
# default holds; a JSON config with "auto" under the HF Trainer gets hidden_size**2 instead.
ZERO_REDUCE_BUCKET = 500_000_000


@dataclass(frozen=True)
class OwnUnits:
    """The input embedding and the LM head as FSDP units of their own (torchtune custom_sharded_layers): each is
    gathered only around its forward and backward, and its gradient reduce-scattered right after its backward."""

    head: int  # the head's unsharded parameters while it is gathered (end of forward, start of backward)
    embed: int  # the embedding's, gathered again for its backward at the end of backward
    layer: int  # one decoder layer's unit: the static `gathered` counts two of them in flight
    head_grads: int  # the head's trainable gradient, unsharded, before its reduce-scatter
    embed_grads: int
    share: float  # of those gradients resident on this GPU after the reduce-scatter: 1/n, 0 under CPU offload
    world: int  # the reduce-scatter's output is 1/world of its input (on the GPU, offloaded only after it)


@dataclass(frozen=True)
class Shares:
    weights: int  # base parameters resident on one GPU, gathered units included
    quant_state: int
    adapters: int
    gradients: int  # resident after backward, per GPU
    optimizer: int
    comm_buffers: int  # allocated by PyTorch: DDP buckets, ZeRO reduce buckets, FSDP reduce-scatter staging
    nccl_bytes: int  # outside PyTorch's allocator (device memory only)
    host_bytes: int  # CPU RAM for offloaded parameters and optimizer states
    gathered: int = 0  # unsharded units inside `weights`: allocated and freed layer by layer
    optimizer_fraction: float = 1.0  # the share of the optimizer's step temporaries on this GPU
    root_gradients: int = 0  # FSDP: the root unit's trainable gradients, unsharded, before its reduce-scatter
    grads_before_root: int = 0  # the sharded gradients resident on this GPU when the root's are reduced
    comm_static: bool = False  # comm_buffers are allocated once, before the first step (DDP, ZeRO-3)
    root_held: int = 0  # the root unit's unsharded parameters inside `gathered` (held through the step)
    own: OwnUnits | None = None  # FSDP: the embedding and the head wrapped as units of their own
    carried: int = -1  # gradients resident through accumulation micro-batches (-1: `gradients`)
    kept_gathered: int = 0  # SHARD_GRAD_OP: units gathered in forward beyond `gathered`, kept until their backward
    # ZeRO-3 with parameters offloaded: the partition copied to the GPU for an all-gather, alive beside the gathered
    # buffer until the gather completes (DeepSpeed all_gather_coalesced: `_dist_allgather_fn(param.ds_tensor.to(
    # device), param_buffer, ...)`, runtime/zero/partition_parameters.py v0.8.0 l.838-850, unchanged in 2025):
    # the LM head's, fetched by its backward hook once the logits' gradient exists, and a decoder layer's
    head_gather_copy: int = 0
    layer_gather_copy: int = 0


@dataclass(frozen=True)
class Totals:
    base: int  # base parameter bytes of the whole model
    quant_state: int
    adapters: int
    gradients: int
    optimizer: int
    layer_unit: int  # one decoder layer's parameters (an FSDP wrapping unit), adapters included
    root_unit: int  # embeddings, final norm and LM head: FSDP's root unit
    layer_grads: int  # one layer's trainable gradients
    root_grads: int = 0  # the trainable gradients outside the decoder layers (embeddings, head, final norm)
    grad_elem: int = 2  # bytes per element of the trainable parameters (and so of their gradients)
    # torchao's NF4Tensor carries its scalers inside the parameter, so FSDP2 shards them with the data; bitsandbytes
    # keeps absmax & co in a QuantState on the module (Linear4bit.quant_state, put back on the gathered weight by
    # fix_4bit_weight_quant_state_from_module "for fsdp"), not a parameter or buffer: every GPU holds all of it.
    quant_state_sharded: bool = False
    embed_unit: int = 0  # the input embedding's parameter bytes (inside root_unit)
    head_unit: int = 0  # the LM head's (0 when tied to the embedding)
    embed_grads: int = 0  # their trainable gradient bytes (inside root_grads)
    head_grads: int = 0
    # module buffers inside `adapters` (PEFT tuners' frozen factors and indices: PSOFT's, OSF's, FRoD's U): FSDP and
    # ZeRO-3 shard parameters only, so every GPU holds them whole (measured: tests/physics/test_fsdp_buffers.py)
    buffers: int = 0

    @property
    def sharded(self) -> int:
        """The parameter bytes FSDP and ZeRO-3 divide among the GPUs: base and adapters, not the module buffers."""
        return self.base + self.adapters - self.buffers


def nccl_bytes(num_gpus: int) -> int:
    if num_gpus <= 1:
        return 0
    return NCCL_BYTES[2] if num_gpus == 2 else NCCL_BYTES[4]


def shares(cfg: RunConfig, t: Totals) -> Shares:
    n = cfg.num_gpus
    mode = "ddp" if cfg.parallelism == "none" and n > 1 else cfg.parallelism
    if mode == "none" or (n == 1 and mode == "ddp"):
        return Shares(t.base, t.quant_state, t.adapters, t.gradients, t.optimizer, 0, 0, 0)
    nccl = nccl_bytes(n)
    if mode == "ddp":
        # DDP copies every gradient into flat all-reduce buckets (gradient_as_bucket_view=False).
        host = t.optimizer if cfg.cpu_offload else 0
        return Shares(t.base, t.quant_state, t.adapters, t.gradients, 0 if cfg.cpu_offload else t.optimizer,
                      t.gradients, nccl, host, comm_static=True)
    if mode == "fsdp_no_shard":
        # FSDP NO_SHARD (torch v2.2 fsdp/_runtime_utils.py _reduce_grad_no_shard): every unit's flat parameter stays
        # whole and its flat gradient is all-reduced in place, so there are no DDP buckets; the flat gradient is
        # concatenated from the views' pieces at the end of each unit's backward (one unit staged, then the root's
        # pieces and flat copy, as under FULL_SHARD: tests/physics/test_fsdp_root_grad.py).
        if cfg.cpu_offload:  # CPUOffload(offload_params=True): each unit is copied in for its compute, as sharded
            gathered = UNITS_IN_FLIGHT * t.layer_unit + t.root_unit
            return Shares(gathered + t.buffers, t.quant_state, 0, t.layer_grads, 0, t.layer_grads, nccl,
                          t.sharded + t.optimizer + t.gradients, gathered, 0.0, t.root_grads, 0,
                          False, t.root_unit)
        return Shares(t.base, t.quant_state, t.adapters, t.gradients, t.optimizer, t.layer_grads, nccl, 0,
                      root_gradients=t.root_grads, grads_before_root=t.gradients - t.root_grads)
    if mode == "zero2":
        opt = 0 if cfg.cpu_offload else t.optimizer // n
        # ZeRO-2 reduces into partitioned gradient buffers through one reduce bucket, alive during backward.
        return Shares(t.base, t.quant_state, t.adapters, t.gradients // n, opt, ZERO_REDUCE_BUCKET * t.grad_elem, nccl,
                      t.optimizer if cfg.cpu_offload else 0, optimizer_fraction=1 / n)
    # FSDP FULL_SHARD / ZeRO-3: parameters, gradients and states sharded; gathered units in flight;
    # FSDP keeps the root unit (embeddings, LM head) unsharded through forward and backward.
    sgo = mode == "fsdp_shard_grad_op"
    mode = "fsdp" if sgo else mode
    own = None
    root_unit, root_grads = t.root_unit, t.root_grads
    if mode == "fsdp" and cfg.fsdp_shard_embeddings:
        # torchtune training.shard_model (v0.3.0 _distributed.py l.618): fully_shard() on the modules named in
        # custom_sharded_layers, then on the whole model, whose root keeps only what is left (the final norm).
        root_unit -= t.embed_unit + t.head_unit
        root_grads -= t.embed_grads + t.head_grads
        own = OwnUnits(t.head_unit, t.embed_unit, t.layer_unit, t.head_grads, t.embed_grads,
                       0.0 if cfg.cpu_offload else 1 / n, n)
    gathered = UNITS_IN_FLIGHT * t.layer_unit + root_unit
    share = (t.sharded - root_unit) // n
    qs = t.quant_state // n if t.quant_state_sharded else t.quant_state
    # FSDP's root unit is one flat parameter (FSDP2: one reduce-scatter buffer) whose gradient is reduced once,
    # after the embedding's backward; ZeRO-3 reduces each parameter's gradient as it is produced.
    root = root_grads if mode == "fsdp" else 0
    # FSDP stages one unit's gradients for its reduce-scatter; ZeRO-3 copies them into its resident bucket.
    comm, static = (t.layer_grads, False) if mode == "fsdp" else (ZERO_REDUCE_BUCKET * t.grad_elem, True)
    # FSDP no_sync (the Trainer's and LitGPT's accumulation): unsharded gradients until the window's last backward,
    # on the GPU even under CPU offload ("they will only be offloaded right after the eventual sync": torch
    # FullyShardedDataParallel.no_sync docstring, v2.2-v2.13)
    no_sync = mode == "fsdp" and cfg.gradient_accumulation_steps > 1 and profile(cfg).fsdp_no_sync
    carried = t.gradients if no_sync else -1
    # SHARD_GRAD_OP does not reshard a unit after its forward (torch v2.2 _runtime_utils.py _post_forward_reshard:
    # free only for FULL_SHARD / HYBRID_SHARD); its backward frees it (_should_free_in_backward): at the end of
    # forward every decoder unit is gathered (measured: tests/physics/test_fsdp_shard_grad_op.py)
    kept = max(t.sharded - root_unit - UNITS_IN_FLIGHT * t.layer_unit, 0) if sgo else 0
    if cfg.cpu_offload:
        # (without offload the partition is on the GPU already: `.to(device)` copies nothing)
        copies = (-(-(t.head_unit or t.embed_unit) // n), -(-t.layer_unit // n)) if mode == "zero3" else (0, 0)
        return Shares(gathered + t.buffers, qs, 0, t.layer_grads, 0, comm, nccl,
                      share + t.optimizer // n + t.gradients // n, gathered, 0.0, root, 0, static, root_unit, own,
                      carried, kept, *copies)
    return Shares(share + gathered + t.buffers, qs, 0, t.gradients // n, t.optimizer // n, comm, nccl, 0, gathered,
                  1 / n, root, (t.gradients - root) // n, static, root_unit, own, carried, kept)
