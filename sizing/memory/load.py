# Moments before the first step: the model built and quantized on the GPU (torchtune + torchao NF4),
# replayed through the caching allocator; what a load leaves cached is reserved for the whole run.
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..arch import Architecture
from .allocator import CachingAllocator, _Block
from .timeline import Moment, Outside
from .weights import Weights

# torchao NF4Tensor.from_tensor (torchao v0.1 dtypes/nf4tensor.py l.220-300 and l.378-450; the same code in
# torchao/quantization/quantize_/workflows/nf4/nf4_tensor.py at ao main, 2026-08): the tensors one
# to_nf4(w) allocates and frees, in order, as multiples of w's element count N (w is bf16: 2N bytes).
# Measured with torchao 0.1 on CPU through a TorchDispatchMode (peak 68.08 N bytes with the input) and
# re-measured by tests/physics/test_load_moment.py. ("m", key, bytes per element) allocates, ("f", key) frees;
# keys "data" and "scalers" stay: they are the NF4 weight.
NF4_QUANTIZE: tuple[tuple[str, str, float], ...] = (
    # double_quantize_scalers: get_block_absmax (abs, max values / indices), the int8 scalers
    ("m", "abs", 2.0), ("m", "absmax", 1 / 32), ("m", "idx", 1 / 8), ("f", "abs", 0), ("f", "idx", 0),
    ("m", "sub", 1 / 32), ("m", "mul", 1 / 32), ("f", "sub", 0), ("f", "mul", 0),
    ("m", "scalers", 1 / 64 + 2 / (64 * 256)),
    # convert_to_norm_float_weight: absmax again, blocks / scales, (value - nf4).abs() over 16 levels,
    # min(dim=-1), the packing shifts
    ("m", "abs", 2.0), ("m", "absmax2", 1 / 32), ("m", "idx", 1 / 8), ("f", "abs", 0), ("f", "idx", 0),
    ("m", "scaled", 2.0), ("m", "diff", 32.0), ("m", "absdiff", 32.0), ("f", "diff", 0),
    ("m", "values", 2.0), ("m", "indices", 8.0), ("f", "values", 0), ("f", "absdiff", 0),
    ("m", "shift", 4.0), ("m", "packed", 4.0), ("f", "shift", 0), ("m", "data", 0.5),
    ("f", "absmax", 0), ("f", "absmax2", 0), ("f", "scaled", 0), ("f", "indices", 0), ("f", "packed", 0),
)

# NF4Tensor.get_original_weight (torchao v0.1 dtypes/nf4tensor.py l.409-436), the first half of torchtune's NF4
# clone (utils/_register_nf4_dispatch_ops.py v0.1.0 l.11-19: to_nf4(get_original_weight())); "weight" stays:
# the bf16 weight to_nf4 then quantizes. Traced the same way (tests/physics/test_load_moment.py).
NF4_DEQUANT: tuple[tuple[str, str, float], ...] = (
    ("m", "hi", 0.5), ("m", "hi64", 4.0), ("f", "hi", 0), ("m", "lo", 0.5), ("m", "lo64", 4.0), ("f", "lo", 0),
    ("m", "first", 1.0), ("m", "second", 1.0), ("m", "sc", 1 / 32), ("m", "sc2", 1 / 32), ("f", "sc", 0),
    ("m", "rep", 1.0), ("m", "s1", 1.0), ("f", "rep", 0), ("m", "rep", 1.0), ("m", "s2", 1.0), ("f", "rep", 0),
    ("m", "weight", 2.0), ("f", "hi64", 0), ("f", "lo64", 0), ("f", "first", 0), ("f", "second", 0),
    ("f", "sc2", 0), ("f", "s1", 0), ("f", "s2", 0),
)


@dataclass
class _Run:
    a: CachingAllocator

    def play(self, table: tuple[tuple[str, str, float], ...], n: int) -> dict[str, _Block]:
        """Allocate and free as `table` says for an n-element weight; returns the blocks left live."""
        live: dict[str, _Block] = {}
        for op, key, per in table:
            if op == "m":
                live[key] = self.a.malloc(max(int(per * n), 1))
            else:
                self.a.free(live.pop(key))
        return live

    def quantize(self, n: int) -> list[_Block]:
        """One to_nf4 of an n-element bf16 weight already on the GPU; returns the NF4 weight's blocks."""
        return list(self.play(NF4_QUANTIZE, n).values())

    def clone(self, n: int) -> list[_Block]:
        """torchtune's NF4 clone (deepcopy of a layer): dequantize, then quantize the bf16 weight."""
        weight = self.play(NF4_DEQUANT, n)["weight"]
        out = self.quantize(n)
        self.a.free(weight)
        return out


def torchao_nf4_load(arch: Architecture, w: Weights, quantized: tuple[int, ...], bf16_linears: tuple[int, ...],
                     adapters: int, expandable: bool, replaces: bool = True, cloned: bool = False) -> Outside:
    """torchtune's single-device recipe builds the model on the GPU and loads the bf16 checkpoint into it.

    recipes/lora_finetune_single_device.py (v0.1.0 l.254, v0.6.1 l.410) instantiates the model under
    `with set_default_dtype(bf16), self._device:`: each quantized LoRALinear makes an nn.Linear on the GPU and
    keeps to_nf4(linear.weight) (modules/peft/lora.py v0.1.0 l.94); then model.load_state_dict copies the
    CPU state dict in: NF4's copy_ is to_nf4(src.to(device)) (utils/_register_nf4_dispatch_ops.py v0.1.0
    l.22-40), a new NF4 weight per linear before the old one is dropped (replaces); torchao >= 0.3's own copy_
    (dtypes/nf4tensor.py v0.5.0 l.359-376) quantizes the source the same way, copies it in place and drops
    the new one. cloned: torchtune <= 0.3 builds one layer and deep-copies it (modules/transformer.py _get_clones,
    v0.1.0 l.81-93, v0.3.0 l.264), each NF4 copy a dequantize + to_nf4. `quantized`: element counts of one
    layer's NF4 linears; `bf16_linears`: bytes of the others."""
    a = CachingAllocator(expandable)
    run = _Run(a)
    embed = arch.embedding_params * 2
    a.malloc(embed)
    per_layer_adapter = adapters // max(arch.layers, 1)
    nf4: list[list[_Block]] = []
    small = [b for b in (*bf16_linears, per_layer_adapter, arch.norm_params_per_layer * 2) if b]
    proto: list[_Block] = []
    if cloned:  # the prototype layer, alive until every copy is made
        for n in quantized:
            src = a.malloc(2 * n)
            proto += run.quantize(n)
            a.free(src)
        proto += [a.malloc(b) for b in small]
    for _ in range(arch.layers):  # instantiation on the device
        for n in quantized:
            if cloned:
                nf4.append(run.clone(n))
                continue
            src = a.malloc(2 * n)  # nn.Linear(in, out) on the device, bf16
            nf4.append(run.quantize(n))
            a.free(src)
        for b in small:
            a.malloc(b)
    a.free_all(proto)
    if not arch.tied_embeddings:
        a.malloc(arch.lm_head_params * 2)
    for i, blocks in enumerate(nf4):  # load_state_dict: copy_ into each NF4 weight
        n = quantized[i % len(quantized)]
        src = a.malloc(2 * n)
        new = run.quantize(n)
        if replaces:
            a.free_all(blocks)
            nf4[i] = new
        else:
            a.free_all(new)
        a.free(src)
    static = w.base_param_bytes + w.quant_state_bytes + w.adapter_param_bytes
    parts = {"weights": w.base_param_bytes, "quantization_state": w.quant_state_bytes,
             "adapters": w.adapter_param_bytes, "workspace": max(a.peak_allocated - static, 0)}
    moment = Moment("load", "model load: bf16 weights quantized to NF4 on the GPU (torchao to_nf4)", 0, parts)
    return Outside(moment, a.peak_reserved, a.peak_needed)


@dataclass(frozen=True)
class NF4Load:
    """What torchao_nf4_load replays: torchtune's single-device model build with torchao NF4 bases."""

    arch: Architecture
    weights: Weights
    quantized: tuple[int, ...]
    kept: tuple[int, ...]
    replaces: bool  # frameworks.Profile.nf4_copy_replaces
    cloned: bool  # frameworks.Profile.nf4_layers_cloned


@lru_cache(maxsize=64)
def nf4_load(spec: NF4Load, expandable: bool) -> Outside:
    """The load moment of `spec`, replayed once per configuration (it does not depend on the batch's shape)."""
    return torchao_nf4_load(spec.arch, spec.weights, spec.quantized, spec.kept, spec.weights.adapter_param_bytes,
                            expandable, spec.replaces, spec.cloned)
