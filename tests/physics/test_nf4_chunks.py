"""torchao's NF4 quantization as the engine replays it (sizing/memory/load.py), held to a trace of the real to_nf4.

tests/physics/data/nf4_trace.json was recorded by tests/physics/record_nf4_trace.py on the CPU (torch 2.13) from
the nf4tensor.py of the PyPI wheels torchao 0.1 (torchtune 0.1 pins it), 0.3.1 (torchtune 0.2 pins it), 0.5.0
(the stable release when torchtune 0.3.0 came out) and 0.14.1, through a TorchDispatchMode that logs every
storage an op creates and frees (tests/physics/harness.LiveMem). torchao is not a dependency of this project,
so the trace is the outside measurement and this test needs only the standard library and the engine.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from sizing import estimate
from sizing.frameworks import TORCHAO_01_NF4_BYTES, TORCHAO_NF4_BYTES
from sizing.memory.allocator import CachingAllocator
from sizing.memory.load import NF4_CHUNK, NF4_CHUNKED_HEAD, NF4_CHUNKED_TAIL, NF4_QUANTIZE, TORCHAO_CHUNK, _Run
from sizing.memory.pool_state import exact_state
from sizing.memory.weights import bytes_torchao_nf4

TRACE = json.loads((pathlib.Path(__file__).parent / "data" / "nf4_trace.json").read_text())
CHUNKED = [v for v in TRACE if TRACE[v]["chunk_size"]]


def _events(table, n, live=None):
    """(op, bytes) of a table replayed without the allocator, as the engine sizes its blocks."""
    live = {} if live is None else live
    out = []
    for op, key, per in table:
        if op == "m":
            live[key] = max(int(per * n), 1)
            out.append(["m", live[key]])
        else:
            out.append(["f", live.pop(key)])
    return out, live


def _chunked(n, chunk):
    """The engine's chunked to_nf4 as a flat (op, bytes) sequence."""
    out, live = _events(NF4_CHUNKED_HEAD, n)
    for start in range(0, n, chunk):
        out += _events(NF4_CHUNK, min(chunk, n - start))[0]
    return out + _events(NF4_CHUNKED_TAIL, n, live)[0]


def _peak(events):
    cur = top = 0
    for op, size in events:
        cur += size if op == "m" else -size
        top = max(top, cur)
    return top


def _real(events, keep_tiny=False):
    """The traced events less the 16-level lookup table (32 B, kept by the NF4 tensor) and the 2-byte mean."""
    return [e for e in events if keep_tiny or e[1] > 32]


def test_torchao_releases_recorded():
    """The fixture holds the releases torchtune installed: unchunked 0.1, chunked from 0.3.1 on, same chunk."""
    assert TRACE["0.1"]["chunk_size"] is None
    assert {TRACE[v]["chunk_size"] for v in CHUNKED} == {TORCHAO_CHUNK}
    assert set(CHUNKED) >= {"0.3.1", "0.5.0", "0.14.1"}


@pytest.mark.parametrize("version", CHUNKED)
@pytest.mark.parametrize("which", ["to_nf4", "to_nf4_small_chunk"])
def test_chunked_sequence_is_the_traced_one(version, which):
    """Every allocation and free of the real chunked to_nf4, in order and byte for byte, is the engine's;
    with torchao's own CHUNK_SIZE (one chunk at this shape) and patched to 4.5 chunks (the last one partial)."""
    e = TRACE[version]
    chunk = e["chunk_size"] if which == "to_nf4" else e["small_chunk"]
    assert _chunked(e["numel"], chunk) == _real(e[which])


def test_unchunked_sequence_is_torchao_0_1s():
    """torchao 0.1's to_nf4, the whole weight at once: every allocation and free, byte for byte; what stays is
    the NF4 weight (data, int8 scalers and the expanded factor torchao 0.1 keeps as a view)."""
    e = TRACE["0.1"]
    engine, live = _events(NF4_QUANTIZE, e["numel"])
    assert engine == _real(e["to_nf4"])
    kept = e["kept"]
    assert sorted(live.values()) == sorted([kept["quantized_data"], kept["quantized_scalers"],
                                            kept["quantization_factor"]])


def test_kept_bytes_per_release():
    """The NF4 weight's own bytes per element, as traced: torchao 0.1 keeps the expanded factor (N/32 bytes),
    torchao >= 0.3 a contiguous one (N/8192)."""
    for version, per in [("0.1", TORCHAO_01_NF4_BYTES), *((v, TORCHAO_NF4_BYTES) for v in CHUNKED)]:
        e = TRACE[version]
        k = e["kept"]
        traced = k["quantized_data"] + k["quantized_scalers"] + k["quantization_factor"]
        assert sum(bytes_torchao_nf4(e["numel"], version == "0.1")) == traced == int(per * e["numel"]), version


def test_torchtune_tutorial_qlora_linear_bytes():
    """torchtune v0.1.0 docs/source/tutorials/qlora_finetune.rst l.74-76 (torchao 0.1), published:
    `LoRALinear(512, 512, rank=8, alpha=0.1, quantize_base=True)` under torch.set_default_device("cuda") leaves
    torch.cuda.memory_allocated() at 177,152 bytes: the NF4 weight, two fp32 adapters (8 x 512), and the NF4
    tensor's 16-level table (32 B) and scaler mean (2 B), each a 512-byte block of the caching allocator."""
    n = 512 * 512
    nf4 = sum(bytes_torchao_nf4(n, factor_view=True))
    adapters = 2 * 8 * 512 * 4
    assert nf4 + adapters + 2 * 512 == 177_152


@pytest.mark.parametrize("version", CHUNKED)
def test_chunking_bounds_the_transient(version):
    """The measured transient of the chunked to_nf4 over its input at 4.5 chunks: 3 N + 64 bytes per chunk
    element plus the scalers (hand derivation: bf16 scaled copy 2 N, uint8 codes N, (chunk, 16) bf16 diff twice),
    against 64 N + for torchao 0.1."""
    e = TRACE[version]
    n, c = e["numel"], e["small_chunk"]
    assert _peak(_real(e["to_nf4_small_chunk"], True)) == pytest.approx(3 * n + 64 * c, rel=0.02)
    assert _peak(_real(TRACE["0.1"]["to_nf4"], True)) > 64 * n


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("shape", [(4096, 14336), (1024, 4096), (4096, 4096 + 64), (8192, 28672)])
def test_chunk_shortcut_equals_replaying_every_chunk(shape, expandable):
    """_Run.chunks stops replaying once a chunk leaves the allocator as it found it: the allocator's state
    after it equals a brute-force replay of every chunk (the oracle), with other blocks live around it."""
    n = shape[0] * shape[1]
    states = []
    for brute in (False, True):
        a = CachingAllocator(expandable)
        run = _Run(a, TORCHAO_CHUNK)
        held = [a.malloc(2 * n), a.malloc(3 << 20)]
        a.free(held.pop())  # a cached hole the first chunk can reuse
        live = run.play(NF4_CHUNKED_HEAD, n)
        if brute:
            for start in range(0, n, TORCHAO_CHUNK):
                run.play(NF4_CHUNK, min(TORCHAO_CHUNK, n - start))
        else:
            run.chunks(n)
        run.play(NF4_CHUNKED_TAIL, n, live)
        states.append(exact_state(a))
    assert states[0] == states[1]


def test_torchtune_0_2_quantizes_only_lora_bases():
    """torchtune 0.2's builders keep nn.Linear (bf16) where no LoRA is applied (v0.2.0
    models/llama3/_component_builders.py l.320-345); FrozenNF4Linear came with commit 898670f0, first in v0.3.0.
    With LoRA on q and v only, a Llama-3.1-8B layer's other five linears stay bf16 in 0.2, NF4 in 0.3."""
    from sizing.catalog import resolve_architecture
    from sizing.config import parse_config
    from sizing.frameworks import profile, rope_tables

    base = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "framework": "torchtune",
            "quantization_backend": "torchao", "target_modules": ["q_proj", "v_proj"], "r": 8, "lora_alpha": 16}
    assert profile(parse_config({**base, "framework_version": "0.2"})).quantize_only_adapted
    assert not profile(parse_config({**base, "framework_version": "0.3"})).quantize_only_adapted
    arch, _ = resolve_architecture("meta-llama/Llama-3.1-8B", None)
    est2 = estimate({**base, "framework_version": "0.2"})
    est3 = estimate({**base, "framework_version": "0.3"})
    # k (1024 x 4096), o (4096 x 4096), gate / up / down (14336 x 4096): bf16 (2 B) instead of NF4, per layer
    shapes = [1024 * 4096, 4096 * 4096] + [14336 * 4096] * 3
    per_layer = sum(2 * n - sum(bytes_torchao_nf4(n)) for n in shapes)
    grown = est2.components["weights"] + est2.components["quantization_state"] - (
        est3.components["weights"] + est3.components["quantization_state"])
    # the RoPE tables differ too: 0.2 clones one per layer, 0.3.x's Llama 3.1 builder shares one
    # (frameworks.rope_tables, tests/physics/test_torchtune_rope.py)
    tables = [t * c for t, c in (rope_tables(parse_config({**base, "framework_version": v}), arch)
                                 for v in ("0.2", "0.3"))]
    assert grown - (tables[0] - tables[1]) == per_layer * arch.layers
