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
