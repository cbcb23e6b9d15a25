"""The forward's DynamicCache and the fused qkv output (memory/regime.py kv_copied, families.py cache_copies_kv).

Without checkpointing, transformers builds a DynamicCache from config.use_cache, and from 4.56.0 its first update
copies k and v (frameworks.HF_CACHE_COPIES). Where v is a view of a fused qkv output (Phi-3, GPT-NeoX, CodeGen), SDPA
then saves the copy and the fused output is not kept: one decoder layer saves 2 (q + kv) bytes a token fewer in bf16
with the cache than without it. Measured here on tiny models (random weights, one middle layer's saved tensors,
deduplicated by storage), with use_cache=True against use_cache=False. The families whose k and v come otherwise
(separate projections: Llama; their own split or cache: Falcon, GPT-2, GPT-BigCode, MPT, BLOOM) save the same either
way, and the engine's family table must say which is which."""

from __future__ import annotations

import warnings

import pytest

for _mod in ("torch", "transformers"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import torch  # noqa: E402
import transformers  # noqa: E402

from sizing.arch import from_hf_config  # noqa: E402

pytestmark = pytest.mark.physics
B, S = 2, 64
_C = {"vocab_size": 64, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 256}
CONFIGS = {
    "phi3": {"model_type": "phi3", **_C, "num_key_value_heads": 2, "pad_token_id": 0},
    "gpt_neox": {"model_type": "gpt_neox", **_C},
    "codegen": {"model_type": "codegen", "vocab_size": 64, "n_embd": 128, "n_layer": 2, "n_head": 4, "rotary_dim": 16},
    "llama": {"model_type": "llama", **_C, "num_key_value_heads": 2},
    "falcon": {"model_type": "falcon", "vocab_size": 64, "hidden_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "new_decoder_architecture": True, "num_kv_heads": 2},
    "gpt2": {"model_type": "gpt2", "vocab_size": 64, "n_embd": 128, "n_layer": 2, "n_head": 4},
    "gpt_bigcode": {"model_type": "gpt_bigcode", "vocab_size": 64, "n_embd": 128, "n_layer": 2, "n_head": 4},
    "mpt": {"model_type": "mpt", "vocab_size": 64, "d_model": 128, "n_layers": 2, "n_heads": 4},
    "bloom": {"model_type": "bloom", "vocab_size": 64, "hidden_size": 128, "n_layer": 2, "n_head": 4},
}
EAGER_ONLY = ("mpt", "bloom")  # their own attention code only (transformers refuses "sdpa" for them)


def _layer_saved(m: torch.nn.Module, use_cache: bool) -> int:
    """Bytes the second decoder layer saves for backward (storages, parameters and buffers excluded)."""
    layer = next(mod for name, mod in m.named_modules()
                 if name.rsplit(".", 2)[-2:-1] in (["layers"], ["h"], ["blocks"]) and name.endswith(".1"))
    skip = {p.untyped_storage().data_ptr() for p in m.parameters()} | {
        b.untyped_storage().data_ptr() for b in m.buffers()}
    inside = [False]
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if inside[0]:
            st = t.untyped_storage()
            if st.data_ptr() not in skip:
                seen[st.data_ptr()] = st.nbytes()
        return t

    handles = [layer.register_forward_pre_hook(lambda *_: inside.__setitem__(0, True)),
               layer.register_forward_hook(lambda *_: inside.__setitem__(0, False))]
    ids = torch.randint(0, 64, (B, S), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        m(input_ids=ids, use_cache=use_cache)
    for h in handles:
        h.remove()
    return sum(seen.values())


@pytest.mark.parametrize("style", list(CONFIGS))
def test_the_cache_frees_the_fused_qkv_output_where_the_family_table_says(style: str) -> None:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**CONFIGS[style])
        attention = {} if style in EAGER_ONLY else {"attn_implementation": "sdpa"}
        m = transformers.AutoModelForCausalLM.from_config(config, **attention).to(torch.bfloat16)
        m.train()
        saved = {uc: _layer_saved(m, uc) for uc in (True, False)}
    arch = from_hf_config(config.to_dict())
    expected = 2 * (arch.q_width + arch.kv_width) * B * S if arch.cache_copies_kv else 0
    print(f"{style}: saved with the cache {saved[True]} B, without {saved[False]} B; engine's family: "
          f"cache_copies_kv={arch.cache_copies_kv}")
    assert saved[False] - saved[True] == expected
