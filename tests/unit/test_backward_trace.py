# The traced layer backward (memory/backward_trace.py) against the op-by-op walk it replaces (the oracle:
# memory/backward.py's layer_backward, run concretely): equal peak and replay events at random shapes of
# random configurations, and the symbols refuse every operation the linear form cannot represent.
from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.errors import SizingError
from sizing.memory.activations import layer_saved
from sizing.memory.adapters import trainable
from sizing.memory.backward import head_norm_backward, layer_backward
from sizing.memory.backward_trace import HeadNorm, Inexact, SavedBySeq, Sym, Walk, layer_trace
from sizing.memory.regime import resolve

from .conftest import TINY_LLAMA

# OLMo 2's layer: no pre-norms, norms on the sublayer outputs, q/k norms over the whole projections
TINY_OLMO2: dict[str, Any] = {**TINY_LLAMA, "model_type": "olmo2"}
MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-0.5B", "google/gemma-2-9b", "microsoft/phi-3-mini-4k-instruct",
          "mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen3-8B", "openai/gpt-oss-20b"]


def _raw(rng: random.Random) -> dict[str, Any]:
    method = rng.choice(["lora", "qlora", "full", "lora8"])
    cfg: dict[str, Any] = {
        "method": method, "framework": rng.choice(["transformers", "trl", "custom", "torchtune", "litgpt"]),
        "packing": rng.random() < 0.5, "gradient_checkpointing": rng.random() < 0.5,
        "attn_implementation": rng.choice(["sdpa", "eager", "flash_attention_2"]),
        "bf16": rng.random() < 0.8, "torch_dtype": rng.choice(["bfloat16", "float32"]),
    }
    if rng.random() < 0.3:
        cfg["model_config"] = dict(TINY_LLAMA if rng.random() < 0.5 else TINY_OLMO2)
    else:
        cfg["model"] = rng.choice(MODELS)
    if method != "full":
        cfg.update(r=rng.choice([4, 8, 64]), target_modules=rng.choice(["all-linear", ["q_proj", "v_proj"]]),
                   lora_dropout=rng.choice([0.0, 0.05]))
        if rng.random() < 0.3:
            cfg["peft_type"] = rng.choice(["lora_fa", "ia3", "adalora", "loha"])
    return cfg


def _shapes(rng: random.Random) -> list[tuple[int, int]]:
    fixed = [(1, 1), (7, 3), (127, 1), (128, 2), (129, 5), (2048, 8), (4096, 1), (33333, 2)]
    return fixed + [(rng.randint(1, 70000), rng.randint(1, 64)) for _ in range(12)]


def _resolved(rng: random.Random, tries: int = 25) -> Iterator[tuple[Any, Any, Any, Any]]:
    """Random configurations the engine accepts, resolved: (cfg, arch, regime, trainable)."""
    for _ in range(tries):
        try:
            cfg = parse_config(_raw(rng))
            arch, _ = resolve_architecture(cfg.model, cfg.model_config)
            yield cfg, arch, resolve(cfg, arch, "cuda"), trainable(cfg, arch)
        except SizingError:
            continue


@pytest.mark.parametrize("seed", range(4))
def test_trace_equals_the_walk_at_random_shapes(seed: int) -> None:
    rng = random.Random(seed)
    traced = 0
    for cfg, arch, reg, tr in _resolved(rng):
        trace = layer_trace(arch, reg, tr, cfg.r)
        walk = Walk(arch, reg, tr, cfg.r)
        if trace is None:
            continue
        traced += 1
        for seq, batch in _shapes(rng):
            want = layer_backward(arch, reg, tr, cfg.r, seq, seq * batch)
            assert trace.at(seq, seq * batch) == want, (cfg, seq, batch)
            assert walk.at(seq, seq * batch) == want, (cfg, seq, batch)
    assert traced >= 15  # the trace is what the engine uses, not a rare path


@pytest.mark.parametrize("seed", range(3))
def test_saved_by_seq_equals_the_forward_walk(seed: int) -> None:
    """SavedBySeq (the forward walk on the sequence symbol) against layer_saved at every length asked."""
    rng = random.Random(100 + seed)
    traced = 0
    for cfg, arch, reg, tr in _resolved(rng):
        saved = SavedBySeq(arch, reg, tr, cfg.r)
        for seq, _batch in _shapes(rng):
            assert saved.at(seq) == layer_saved(arch, reg, tr, cfg.r, seq), (cfg, seq)
        traced += saved.sym is not None
    assert traced >= 15


@pytest.mark.parametrize("seed", range(3))
def test_head_norm_equals_its_walk(seed: int) -> None:
    """HeadNorm (the final norm's backward traced on the shape's symbols) against head_norm_backward walked op by
    op at every shape asked, tokens not a multiple of seq and empty shapes included."""
    rng = random.Random(200 + seed)
    traced = 0
    for cfg, arch, reg, tr in _resolved(rng):
        norm = HeadNorm(arch, reg, tr, cfg.r)
        for seq, batch in [*_shapes(rng), (100, 2.5), (300, 1 / 300), (1, 0)]:
            n = int(seq * batch)
            assert norm.at(seq, n) == head_norm_backward(arch, reg, tr, cfg.r, seq, n), (cfg, seq, n)
        traced += norm.trace is not None
    assert traced >= 15


def test_tokens_not_a_multiple_of_seq_and_empty_shapes() -> None:
    cfg = parse_config({"model_config": dict(TINY_LLAMA), "method": "qlora", "attn_implementation": "sdpa"})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    reg, tr = resolve(cfg, arch, "cuda"), trainable(cfg, arch)
    trace = layer_trace(arch, reg, tr, cfg.r)
    assert trace is not None
    for seq, n in [(100, 250), (300, 1), (1, 0), (129, 1000)]:
        assert trace.at(seq, n) == layer_backward(arch, reg, tr, cfg.r, seq, n), (seq, n)


def test_symbols_refuse_what_is_not_linear() -> None:
    n, s = Sym((0, 1, 0, 0, 0)), Sym((0, 0, 0, 0, 1))
    assert (3 * n + 2 - n).c == (2, 2, 0, 0, 0) and (-(4 * n) // 2).c == (0, -2, 0, 0, 0)
    assert (n * 1 == n) and (n * 2 != n) and not (n - n) and bool(n) and (n - n + 5 == 5)
    for op in (lambda: n * s, lambda: n // 2, lambda: n < 3, lambda: n > s, lambda: max(n, 2), lambda: n % 2,
               lambda: n / 2, lambda: int(n), lambda: float(n), lambda: 2 ** n, lambda: abs(n)):
        with pytest.raises(Inexact):
            op()


def test_a_trace_that_does_not_reproduce_the_walks_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walk and SavedBySeq check the symbolic result against the two shapes walked before using it."""
    from sizing.memory import backward_trace

    cfg = parse_config({"model_config": dict(TINY_LLAMA), "method": "qlora", "attn_implementation": "eager"})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    reg, tr = resolve(cfg, arch, "cuda"), trainable(cfg, arch)
    wrong = backward_trace.LayerTrace([], (arch, reg, tr, cfg.r))  # peak 0 at every shape
    monkeypatch.setattr(backward_trace, "layer_trace", lambda *args: wrong)
    walk = Walk(arch, reg, tr, cfg.r)
    for seq, n in [(128, 256), (512, 512), (1000, 3000), (64, 64)]:
        assert walk.at(seq, n) == layer_backward(arch, reg, tr, cfg.r, seq, n)
    assert walk.trace is None
    monkeypatch.setattr(backward_trace, "layer_saved", lambda *args: layer_saved(*args[:4], 7)
                        if isinstance(args[4], Sym) else layer_saved(*args))  # a symbol read as seq 7
    saved = SavedBySeq(arch, reg, tr, cfg.r)
    for seq in (128, 512, 1000, 64):
        assert saved.at(seq) == layer_saved(arch, reg, tr, cfg.r, seq)
    assert saved.sym is None
