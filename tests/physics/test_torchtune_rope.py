"""torchtune's RoPE cos/sin tables (frameworks.rope_tables), measured on the CPU on a torchtune-shaped decoder.

torchtune is not installed here, so its code is reproduced, with its sources:
- RotaryPositionalEmbeddings (torchtune v0.1.0 torchtune/modules/position_embeddings.py, _rope_init and
  build_rope_cache): theta and a [max_seq_len, dim // 2, 2] cache, non-persistent fp32 buffers, built at init;
  Qwen2 / Phi-3 build [max_seq_len, 2 * dim] (torchtune v0.4.0 models/qwen2/_positional_embeddings.py l.51-65);
- TransformerDecoder(layer, num_layers) -> _get_clones: `nn.ModuleList([copy.deepcopy(layer) ...])` (v0.1.0
  modules/transformer.py), the llama2 builders' path: one layer built around one RoPE, deep-copied;
- the Llama 3.1 builder from v0.3.1 (pytorch/torchtune#1554): one RoPE, `for _ in range(num_layers)` builds
  each layer around that same module.
The model is built under torchtune's `set_default_dtype(bfloat16)` as its recipes do; the bytes that count are
the unique storages of the model's buffers (what stays on the GPU for the whole run).
"""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

import torch
from torch import nn

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.frameworks import rope_tables
from sizing.step import step_memory

H, HEADS, LAYERS, VOCAB, MAX_POS = 256, 4, 3, 512, 2048
HEAD_DIM = H // HEADS


class RotaryPositionalEmbeddings(nn.Module):  # torchtune v0.1.0, __init__/_rope_init/build_rope_cache verbatim
    def __init__(self, dim: int, max_seq_len: int = 4096, base: int = 10_000) -> None:
        super().__init__()
        self.dim = dim
        self.base = base
        self.max_seq_len = max_seq_len
        self._rope_init()

    def _rope_init(self) -> None:
        theta = 1.0 / (self.base ** (torch.arange(0, self.dim, 2)[: (self.dim // 2)].float() / self.dim))
        self.register_buffer("theta", theta, persistent=False)
        self.build_rope_cache(self.max_seq_len)

    def build_rope_cache(self, max_seq_len: int = 4096) -> None:
        seq_idx = torch.arange(max_seq_len, dtype=self.theta.dtype, device=self.theta.device)
        idx_theta = torch.einsum("i, j -> ij", seq_idx, self.theta).float()
        cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
        self.register_buffer("cache", cache, persistent=False)


class Qwen2RotaryPositionalEmbeddings(RotaryPositionalEmbeddings):  # torchtune v0.4.0 build_rope_cache
    def build_rope_cache(self, max_seq_len: int = 4096) -> None:
        seq_idx = torch.arange(max_seq_len, dtype=self.theta.dtype, device=self.theta.device)
        idx_theta = torch.einsum("i, j -> ij", seq_idx, self.theta).float()
        freqs = torch.cat([idx_theta, idx_theta], dim=-1)  # [max_seq_len, dim]
        cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1)  # [max_seq_len, dim * 2]
        self.register_buffer("cache", cache, persistent=False)


class Layer(nn.Module):  # the parts of TransformerDecoderLayer that hold tensors (the RoPE is the attention's)
    def __init__(self, rope: nn.Module) -> None:
        super().__init__()
        self.q_proj, self.k_proj = nn.Linear(H, H, bias=False), nn.Linear(H, H, bias=False)
        self.v_proj, self.output_proj = nn.Linear(H, H, bias=False), nn.Linear(H, H, bias=False)
        self.pos_embeddings = rope


def _decoder(cloned: bool, rope_cls: type[RotaryPositionalEmbeddings] = RotaryPositionalEmbeddings) -> nn.Module:
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # training.set_default_dtype(self._dtype) around instantiation
    try:
        rope = rope_cls(dim=HEAD_DIM, max_seq_len=MAX_POS)
        if cloned:  # _get_clones(layer, num_layers)
            layers = nn.ModuleList([copy.deepcopy(Layer(rope)) for _ in range(LAYERS)])
        else:  # llama3_1 >= v0.3.1: every layer around the one RoPE
            layers = nn.ModuleList([Layer(rope) for _ in range(LAYERS)])
        return nn.ModuleDict({"tok_embeddings": nn.Embedding(VOCAB, H), "layers": layers,
                              "output": nn.Linear(H, VOCAB, bias=False)})
    finally:
        torch.set_default_dtype(default)


def _buffer_bytes(model: nn.Module) -> int:
    seen: dict[int, int] = {}
    for _, buf in model.named_buffers(remove_duplicate=False):
        seen[buf.untyped_storage().data_ptr()] = buf.untyped_storage().nbytes()
    return sum(seen.values())


def _cfg(version: str, rope_scaling: bool = False, model_type: str = "llama") -> tuple[object, object]:
    conf = {"model_type": model_type, "vocab_size": VOCAB, "hidden_size": H, "intermediate_size": 2 * H,
            "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
            "max_position_embeddings": MAX_POS, "tie_word_embeddings": False}
    if rope_scaling:
        conf["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}
    cfg = load_config({"model_config": conf, "method": "lora", "framework": "torchtune", "framework_version": version,
                       "torch_dtype": "bfloat16", "max_seq_length": 64, "per_device_train_batch_size": 1,
                       "packing": True, "gradient_checkpointing": True})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return cfg, arch


def _theta_bytes() -> int:
    return 4 * (HEAD_DIM // 2)  # the fp32 `theta` buffer next to each cache (the engine leaves it out: < 1 KiB)


def test_cloned_layers_hold_one_rope_table_each():
    model = _decoder(cloned=True)
    measured = _buffer_bytes(model) - LAYERS * _theta_bytes()
    assert measured == LAYERS * MAX_POS * HEAD_DIM * 4  # fp32 although the model is built under bf16
    cfg, arch = _cfg("0.1")
    table, count = rope_tables(cfg, arch)  # type: ignore[arg-type]
    assert table * count == measured and count == LAYERS
    # the engine's weights at every moment carry them: torchtune minus the same run's parameters
    mem = step_memory(cfg, arch, None, backend="cpu")  # type: ignore[arg-type]
    params = mem.detail["param_bytes"]
    assert {m.parts["weights"] + m.parts["adapters"] for m in mem.moments if m.step == 1} == {params + measured}


def test_llama31_builder_shares_one_table_from_031():
    model = _decoder(cloned=False)
    measured = _buffer_bytes(model) - _theta_bytes()
    assert measured == MAX_POS * HEAD_DIM * 4
    for version, count in (("0.3.1", 1), ("0.4", 1), ("0.3.0", LAYERS), ("0.2.1", LAYERS)):
        cfg, arch = _cfg(version, rope_scaling=True)
        table, n = rope_tables(cfg, arch)  # type: ignore[arg-type]
        assert (table, n) == (measured, count), version
    cfg, arch = _cfg("0.4")  # Llama 2 / Llama 3 builders still clone in 0.4 (no rope_scaling)
    assert rope_tables(cfg, arch)[1] == LAYERS  # type: ignore[arg-type]


def test_qwen2_table_is_twice_as_wide():
    model = _decoder(cloned=True, rope_cls=Qwen2RotaryPositionalEmbeddings)
    measured = _buffer_bytes(model) - LAYERS * _theta_bytes()
    cfg, arch = _cfg("0.4", model_type="qwen2")
    table, count = rope_tables(cfg, arch)  # type: ignore[arg-type]
    assert table * count == measured == LAYERS * MAX_POS * HEAD_DIM * 2 * 4


def test_other_frameworks_hold_no_table():
    cfg, arch = _cfg("0.1")
    other = load_config({"model_config": cfg.model_config, "method": "lora", "framework": "transformers",  # type: ignore[attr-defined]
                         "max_seq_length": 64, "per_device_train_batch_size": 1})
    assert rope_tables(other, arch) == (0, 0)  # type: ignore[arg-type]
