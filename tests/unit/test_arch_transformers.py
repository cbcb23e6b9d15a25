"""The architecture reader against transformers itself, for the config keys and families the catalog added:
tiny models built from a config (meta device, random weights, no hub), their parameter counts and Linear names."""

from __future__ import annotations

import importlib.util

import pytest

from sizing import SizingError, estimate
from sizing.arch import from_hf_config
from tests.needs import cannot_run

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    cannot_run("these tests build tiny models with torch and transformers (requirements-physics.txt)")

import torch
import transformers


def _model(cfg: dict[str, object]) -> torch.nn.Module:
    d = dict(cfg)
    hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(hf)


def _params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # a tied head is one parameter


def _linear_names(model: torch.nn.Module) -> set[str]:
    conv1d = getattr(transformers.pytorch_utils, "Conv1D", ())
    return {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, conv1d))}


def test_bloom_width_under_its_old_key_n_embed() -> None:
    # bigscience/bloom-* config.json files name the width n_embed (BloomConfig pops it into hidden_size).
    cfg = {"model_type": "bloom", "n_embed": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512}
    assert from_hf_config(cfg).total_params == _params(_model(cfg)) == from_hf_config(
        {**{k: v for k, v in cfg.items() if k != "n_embed"}, "hidden_size": 64}).total_params


def test_opt_with_a_projected_embedding_is_refused() -> None:
    # facebook/opt-350m: word_embed_proj_dim 512 under 1024-wide layers adds project_in / project_out and a
    # narrower embedding; modelled as a plain OPT it would be silently wrong, so it is refused by name.
    cfg = {"model_type": "opt", "hidden_size": 64, "word_embed_proj_dim": 32, "ffn_dim": 256, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 512, "max_position_embeddings": 128}
    model = _model(cfg)
    assert {"project_in", "project_out"} <= {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    with pytest.raises(SizingError) as err:
        estimate({"model_config": cfg, "method": "lora", "max_seq_length": 64, "per_device_train_batch_size": 1})
    assert (err.value.code, err.value.field) == ("unsupported_architecture", "model_config.word_embed_proj_dim")


_LLAMA_LIKE = {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 128}
_GPT = {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 512}
# One tiny config per family this branch added, in the config keys each family's own config.json uses.
NEW_FAMILIES: dict[str, dict[str, object]] = {
    "gpt2": {"model_type": "gpt2", **_GPT},
    "gpt2_inner": {"model_type": "gpt2", **_GPT, "n_inner": 96},
    "gptj": {"model_type": "gptj", **_GPT, "rotary_dim": 8},
    "codegen": {"model_type": "codegen", **_GPT, "rotary_dim": 8},
    "mpt": {"model_type": "mpt", "d_model": 64, "n_layers": 2, "n_heads": 4, "max_seq_len": 128, "vocab_size": 512},
    "starcoder2": {"model_type": "starcoder2", **_LLAMA_LIKE},
    "starcoder2_nobias": {"model_type": "starcoder2", **_LLAMA_LIKE, "use_bias": False},
    "stablelm": {"model_type": "stablelm", **_LLAMA_LIKE},
    "stablelm_qkv_bias": {"model_type": "stablelm", **_LLAMA_LIKE, "use_qkv_bias": True},
    "stablelm_parallel": {"model_type": "stablelm", **_LLAMA_LIKE, "use_parallel_residual": True},
    "granite": {"model_type": "granite", **_LLAMA_LIKE},
    # falcon-rw (ALiBi, sequential block with two LayerNorms, biases) and Falcon2-11B (new architecture, one norm)
    "falcon_rw": {"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "vocab_size": 512, "alibi": True, "parallel_attn": False, "bias": True, "multi_query": False,
                  "new_decoder_architecture": False},
    "falcon2": {"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_kv_heads": 2, "vocab_size": 512, "new_decoder_architecture": True, "num_ln_in_parallel_attn": 1},
    "smollm3": {"model_type": "smollm3", **_LLAMA_LIKE, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
}


@pytest.mark.parametrize("name", sorted(NEW_FAMILIES))
def test_new_family_parameters_and_linear_names_match_transformers(name: str) -> None:
    cfg = NEW_FAMILIES[name]
    model = _model(cfg)
    arch = from_hf_config(cfg)
    assert arch.total_params == _params(model)
    assert set(arch.linear_names()) == _linear_names(model) - {"lm_head"}


@pytest.mark.parametrize(("name", "peft_default"), [("gpt2", ["c_attn"]), ("gptj", ["q_proj", "v_proj"]),
                                                    ("mpt", ["Wqkv"]), ("stablelm", ["q_proj", "v_proj"]),
                                                    ("codegen", ["qkv_proj"])])
def test_default_targets_are_peft_defaults(name: str, peft_default: list[str]) -> None:
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_DEFAULTS

    cfg = NEW_FAMILIES[name]
    assert PEFT_DEFAULTS[str(cfg["model_type"])] == peft_default
    assert list(from_hf_config(cfg).default_lora_targets) == peft_default


@pytest.mark.parametrize("name", ["starcoder2", "granite", "smollm3"])
def test_families_without_a_peft_default_have_none(name: str) -> None:
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_DEFAULTS

    assert name not in PEFT_DEFAULTS and from_hf_config(NEW_FAMILIES[name]).default_lora_targets == ()


def test_lora_on_gpt2_conv1d_counts_like_peft() -> None:
    # GPT-2's projections are transformers Conv1D (weight [in, out]); PEFT wraps them with fan_in_fan_out.
    import warnings

    import peft

    cfg = NEW_FAMILIES["gpt2"]
    for targets in (["c_attn"], ["c_attn", "c_proj", "c_fc"]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "fan_in_fan_out is set to False but the target module is Conv1D"
            m = peft.get_peft_model(_model(cfg).to_empty(device="cpu"),
                                    peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets, fan_in_fan_out=True))
        measured = sum(p.numel() for p in m.parameters() if p.requires_grad)
        est = estimate({"model_config": cfg, "method": "lora", "r": 4, "target_modules": targets, "max_seq_length": 64,
                        "per_device_train_batch_size": 1})
        assert est.detail["trainable_params"] == measured, targets


def test_stablelm_qk_layernorm_is_refused() -> None:
    with pytest.raises(SizingError) as err:
        from_hf_config({**NEW_FAMILIES["stablelm"], "qk_layernorm": True})
    assert err.value.field == "model_config.qk_layernorm"


@pytest.mark.parametrize("name", sorted({"gelu", "gelu_pytorch_tanh", "relu", "silu", *__import__(
    "sizing.families", fromlist=["ACT_SAVED"]).ACT_SAVED}))
def test_activation_saved_tensors_measured(name: str) -> None:
    """families.ACT_SAVED: the storages ACT2FN[name] saves for backward, in units of its input (fused: 1)."""
    from sizing.families import ACT_SAVED

    x = torch.randn(4, 256, dtype=torch.bfloat16, requires_grad=True) * 1.0  # a non-leaf, as fc1's output
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        transformers.activations.ACT2FN[name](x)
    assert sum(seen.values()) == ACT_SAVED.get(name, 1) * x.numel() * x.element_size()


def test_python_activation_is_modelled_not_a_gap() -> None:
    """gelu_new's intermediates are counted (tests/unit/test_activations_gelu.py): no lowered confidence for them."""
    run = {"model_config": NEW_FAMILIES["gpt2"], "method": "lora", "max_seq_length": 64,
           "per_device_train_batch_size": 1}
    hf = estimate(run).to_dict()["uncertainty"]
    assert not any(r["code"] == "python_activation" for r in hf["reasons"])
    fused = estimate({**run, "model_config": {**NEW_FAMILIES["gpt2"], "activation_function": "gelu_pytorch_tanh"}})
    assert hf["confidence"] == fused.to_dict()["uncertainty"]["confidence"]
