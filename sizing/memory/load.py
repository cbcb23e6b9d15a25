# Moments before the first step: the model built and quantized on the GPU (torchtune + torchao NF4),
# replayed through the caching allocator; what a load leaves cached is reserved for the whole run.
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..arch import Architecture
from .allocator import CachingAllocator, _Block
from .pool_state import exact_state
from .timeline import Moment, Outside
from .weights import Weights

# double_quantize_scalers (torchao v0.1 dtypes/nf4tensor.py l.292-350, v0.3.0 l.547-605), the same in every
# release up to its return: absmax of each 64-element block (abs, max values / int64 indices), the scalers less
# their mean, their absmax per 256, 256 / (2 * absmax) over the expanded scaler blocks (2 * x, reciprocal, * 256),
# round / clamp, the int8 scalers. As multiples of the weight's element count N (the weight is bf16: 2N bytes);
# ("m", key, bytes per element) allocates, ("f", key) frees. Held byte for byte to a trace of the real to_nf4 of
# each release (tests/physics/data/nf4_trace.json, tests/physics/test_nf4_chunks.py).
_SCALERS: tuple[tuple[str, str, float], ...] = (
    ("m", "abs", 2.0), ("m", "absmax", 1 / 32), ("m", "idx", 1 / 8), ("f", "abs", 0), ("f", "idx", 0),
    ("m", "centred", 1 / 32), ("f", "absmax", 0), ("m", "abs", 1 / 32), ("m", "smax", 1 / 8192),
    ("m", "sidx", 1 / 2048), ("f", "abs", 0), ("f", "sidx", 0), ("m", "twice", 1 / 32), ("m", "recip", 1 / 32),
    ("m", "factor", 1 / 32), ("f", "twice", 0), ("f", "recip", 0), ("m", "mul", 1 / 32), ("m", "round", 1 / 32),
    ("f", "mul", 0), ("m", "clamp", 1 / 32), ("f", "round", 0), ("m", "scalers", 1 / 64),
)
# torchao 0.1 (torchtune 0.1 pins torchao==0.1): quantization_factor[:, 0] is returned as a view, so the whole
# expanded factor (N/32 bytes) stays with the NF4 weight (commit 9dbc5542 "[NF4][FSDP] return contiguous
# quantization_factor (#298)", 2024-05-31, first in v0.3.0); then convert_to_norm_float_weight (l.378-450) on the
# whole weight at once: absmax again, blocks / scales, (value - nf4).abs() over 16 levels in bf16, min(dim=-1), the
# int64 packing shifts. Keys "data", "scalers" and "factor" stay: they are the NF4 weight.
NF4_QUANTIZE: tuple[tuple[str, str, float], ...] = (
    *_SCALERS, ("f", "clamp", 0), ("f", "smax", 0), ("f", "centred", 0),
    ("m", "abs", 2.0), ("m", "absmax2", 1 / 32), ("m", "idx", 1 / 8), ("f", "abs", 0), ("f", "idx", 0),
    ("m", "scaled", 2.0), ("m", "diff", 32.0), ("m", "absdiff", 32.0), ("f", "diff", 0),
    ("m", "values", 2.0), ("m", "indices", 8.0), ("f", "values", 0), ("f", "absdiff", 0),
    ("m", "shift", 4.0), ("m", "packed", 4.0), ("f", "shift", 0), ("m", "data", 0.5),
    ("f", "absmax2", 0), ("f", "scaled", 0), ("f", "indices", 0), ("f", "packed", 0),
)

# torchao >= 0.2 quantizes in chunks: commit 6081796b "perform in chunks (#196)", 2024-05-01, "Note: Quantize in
# Chunks" (dtypes/nf4tensor.py v0.3.0 l.25-33, CHUNK_SIZE = 1024**2 elements; the same at v0.5.0 l.34 and in
# quantization/quantize_/workflows/nf4/nf4_tensor.py at ao main 36027d82, 2026-08). convert_to_norm_float_weight
# (v0.3.0 l.633-666) preallocates the uint8 codes of the whole weight and runs quantize_tensor_nearest on one
# chunk at a time; the codes are uint8 already, so the packing shifts are uint8 too. torchao >= 0.3 keeps a
# contiguous factor (N/8192 bytes, v0.3.0 l.602) and drops the expanded one. Keys "data", "scalers", "factor_kept"
# stay.
NF4_CHUNKED_HEAD: tuple[tuple[str, str, float], ...] = (
    *_SCALERS, ("m", "factor_kept", 1 / 8192), ("f", "clamp", 0), ("f", "smax", 0), ("f", "factor", 0),
    ("f", "centred", 0),
    # convert_to_norm_float_weight: absmax again, blocks / scales, the preallocated uint8 codes
    ("m", "abs", 2.0), ("m", "absmax2", 1 / 32), ("m", "idx", 1 / 8), ("f", "abs", 0), ("f", "idx", 0),
    ("m", "scaled", 2.0), ("m", "codes", 1.0),
)
# One chunk of C elements, per element of the chunk: (value - nf4) and .abs() over 16 levels in the input dtype,
# min(dim=-1) values and int64 indices, .to(torch.uint8), copied into the codes' slice.
NF4_CHUNK: tuple[tuple[str, str, float], ...] = (
    ("m", "diff", 32.0), ("m", "absdiff", 32.0), ("f", "diff", 0), ("m", "values", 2.0), ("m", "indices", 8.0),
    ("f", "values", 0), ("f", "absdiff", 0), ("m", "u8", 1.0), ("f", "indices", 0), ("f", "u8", 0),
)
# codes[::2] << 4 | codes[1::2] (uint8), then what the function drops on return
NF4_CHUNKED_TAIL: tuple[tuple[str, str, float], ...] = (
    ("m", "shift", 0.5), ("m", "data", 0.5), ("f", "shift", 0), ("f", "absmax2", 0), ("f", "codes", 0),
    ("f", "scaled", 0),
)
TORCHAO_CHUNK = 1024**2  # CHUNK_SIZE, torchao >= 0.2 (above)

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
    chunk: int = 0  # torchao's CHUNK_SIZE; 0: torchao 0.1, the whole weight at once

    def play(self, table: tuple[tuple[str, str, float], ...], n: int,
             live: dict[str, _Block] | None = None) -> dict[str, _Block]:
        """Allocate and free as `table` says for an n-element weight; returns the blocks left live."""
        live = {} if live is None else live
        for op, key, per in table:
            if op == "m":
                live[key] = self.a.malloc(max(int(per * n), 1))
            else:
                self.a.free(live.pop(key))
        return live

    def chunks(self, n: int) -> None:
        """quantize_tensor_nearest over n elements, chunk by chunk. A chunk frees all it allocates, so once two
        full chunks in a row leave the allocator as they found it, the other full chunks replay the same."""
        full, rest = divmod(n, self.chunk)
        done = 0
        while done < full:
            before = exact_state(self.a)
            self.play(NF4_CHUNK, self.chunk)
            done += 1
            if exact_state(self.a) == before:
                break
        if rest:
            self.play(NF4_CHUNK, rest)

    def quantize(self, n: int) -> list[_Block]:
        """One to_nf4 of an n-element bf16 weight already on the GPU; returns the NF4 weight's blocks."""
        if not self.chunk:
            return list(self.play(NF4_QUANTIZE, n).values())
        live = self.play(NF4_CHUNKED_HEAD, n)
        self.chunks(n)
        return list(self.play(NF4_CHUNKED_TAIL, n, live).values())

    def clone(self, n: int) -> list[_Block]:
        """copy.deepcopy of an NF4 weight (torchtune <= 0.3 clones a layer): NF4's clone dequantizes and quantizes
        the bf16 weight; then Tensor.__deepcopy__ sets the clone's __dict__ to a deep copy of the source's
        (torch/_tensor.py, `new_tensor.__dict__ = deepcopy(self.__dict__, memo)` for a subclass whose data_ptr is 0),
        so the source's inner tensors are copied and the clone's own are dropped (tests/physics/test_nf4_chunks.py)."""
        weight = self.play(NF4_DEQUANT, n)["weight"]
        out = self.quantize(n)
        self.a.free(weight)
        copies = [self.a.malloc(b.size) for b in sorted(out, key=lambda b: b.size)]  # the dict's order
        self.a.free_all(out)
        return copies


def head_and_embedding(a: CachingAllocator, arch: Architecture) -> None:
    """The builders make tok_embeddings, then the output projection, after the decoder layers: after the one layer
    TransformerDecoder then clones (models/llama2/_component_builders.py lora_llama2 v0.1.0 l.225-240, v0.4.0
    l.248-270), after the loop that builds every layer (models/llama3_1/_component_builders.py lora_llama3_1 v0.4.0
    l.209-257, v0.6.1 l.210-258). They are carved out of what the layers' quantization left cached."""
    a.malloc(arch.embedding_params * 2)
    if not arch.tied_embeddings:  # llama3_2's TiedLinear holds no weight of its own
        a.malloc(arch.lm_head_params * 2)


def torchao_nf4_load(arch: Architecture, w: Weights, quantized: tuple[int, ...], bf16_linears: tuple[int, ...],
                     adapters: int, expandable: bool, replaces: bool = True, cloned: bool = False,
                     chunk: int = 0, copy_on_host: bool = False) -> Outside:
    """torchtune's single-device recipe builds the model on the GPU and loads the bf16 checkpoint into it.

    recipes/lora_finetune_single_device.py (v0.1.0 l.254, v0.6.1 l.410) instantiates the model under
    `with set_default_dtype(bf16), self._device:`: each quantized LoRALinear makes an nn.Linear on the GPU and
    keeps to_nf4(linear.weight) (modules/peft/lora.py v0.1.0 l.94); then model.load_state_dict copies the
    CPU state dict in (training/checkpointing/_utils.py safe_torch_load: map_location="cpu", v0.2.0 l.109,
    v0.6.1 l.253): NF4's copy_ is to_nf4(src.to(device)) (utils/_register_nf4_dispatch_ops.py v0.1.0
    l.22-40), a new NF4 weight per linear before the old one is dropped (replaces); torchao >= 0.5's own copy_
    (dtypes/nf4tensor.py v0.5.0 l.359-383; commit 0ed30902 "Move non-NF4 tensor to device prior to quantization
    on copy (#737)", 2024-08-22) quantizes the source the same way, copies it in place and drops the new one.
    torchao 0.2-0.4's copy_ (v0.3.0 l.327-351) quantizes the CPU source on the CPU and copies the NF4 tensors
    into the GPU ones in place (copy_on_host: nothing on the GPU); torchtune 0.2 pins torchao 0.3.1 and leaves
    copy_ to it (modules/low_precision/_register_nf4_dispatch_ops.py v0.2.0: only for torchao < 0.2).
    chunk: torchao's CHUNK_SIZE (0: torchao 0.1 quantizes the whole weight at once).
    cloned: torchtune <= 0.3 builds one layer and deep-copies it (modules/transformer.py _get_clones,
    v0.1.0 l.81-93, v0.3.0 l.264), each NF4 copy a dequantize + to_nf4. `quantized`: element counts of one
    layer's NF4 linears; `bf16_linears`: bytes of the others."""
    a = CachingAllocator(expandable)
    run = _Run(a, chunk)
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
        head_and_embedding(a, arch)
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
    if not cloned:
        head_and_embedding(a, arch)
    a.free_all(proto)
    for i, blocks in enumerate(nf4):  # load_state_dict: copy_ into each NF4 weight
        if copy_on_host:
            break
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
    chunk: int = 0  # torchao's CHUNK_SIZE, 0 for torchao 0.1 (frameworks.Profile.nf4_chunked)
    copy_on_host: bool = False  # frameworks.Profile.nf4_copy_on_host


@lru_cache(maxsize=64)
def nf4_load(spec: NF4Load, expandable: bool) -> Outside:
    """The load moment of `spec`, replayed once per configuration (it does not depend on the batch's shape)."""
    return torchao_nf4_load(spec.arch, spec.weights, spec.quantized, spec.kept, spec.weights.adapter_param_bytes,
                            expandable, spec.replaces, spec.cloned, spec.chunk, spec.copy_on_host)
