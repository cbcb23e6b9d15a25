"""PEFT tuners other than LoRA: the engine's trainable parameter count against PEFT's own
model.get_nb_trainable_parameters() on tiny random Llama / Qwen2 / Qwen3 models built from a config."""

from __future__ import annotations

import sys

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import harness  # noqa: E402
import peft  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

# PEFT 0.21.2 reads transformers 5's deprecated is_gradient_checkpointing (a FutureWarning, not ours).
pytestmark = [pytest.mark.physics, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]



class _RoundRobinKMeans:
    """Stands in for scikit-learn's KMeans, which AdaMSS's init imports (tuners/adamss/utils.py clustering_Z) and the
    physics environment does not install: row i goes to cluster i mod K. Only which output rows share a subspace
    depends on it, not the tensors' sizes while every cluster keeps subspace_rank rows or more."""

    def __init__(self, n_clusters: int, **_: object) -> None:
        self.n_clusters = n_clusters

    def fit_predict(self, rows):
        import numpy

        return numpy.arange(len(rows)) % self.n_clusters


@pytest.fixture(autouse=True)
def _kmeans(monkeypatch):
    import types

    cluster = types.ModuleType("sklearn.cluster")
    cluster.KMeans = _RoundRobinKMeans
    sklearn = types.ModuleType("sklearn")
    sklearn.cluster = cluster
    monkeypatch.setitem(sys.modules, "sklearn", sklearn)
    monkeypatch.setitem(sys.modules, "sklearn.cluster", cluster)


QV, KVD = ["q_proj", "v_proj"], ["k_proj", "v_proj", "down_proj"]


def _osf_pattern(trained: int) -> dict[str, int]:
    """OSF's rank_pattern keeping all but `trained` singular directions of every projection of the tiny models, as
    PEFT's MetaMathQA benchmark does for Llama-3.2-3B (experiments/osf/llama-3.2-3B-rank128): each module's smaller
    side minus `trained` (the sides from harness's configs)."""
    import harness

    cfg = harness.hf_config("llama")
    kv = cfg.num_key_value_heads * cfg.head_dim
    side = {"q_proj": min(cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim), "k_proj": min(cfg.hidden_size, kv),
            "v_proj": min(cfg.hidden_size, kv), "o_proj": min(cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim)}
    side.update(dict.fromkeys(("gate_proj", "up_proj", "down_proj"), min(cfg.hidden_size, cfg.intermediate_size)))
    return {name: width - trained for name, width in side.items()}
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
FF3 = ["gate_proj", "up_proj", "down_proj"]

# (engine config, PEFT config); every PEFT value is one the engine reads or PEFT's default.
CASES = {
    "lora_fa": ({"peft_type": "lora_fa", "r": 8, "target_modules": ALL},
                lambda: peft.LoraConfig(r=8, target_modules=ALL)),
    "adalora": ({"peft_type": "adalora", "r": 12, "target_modules": QV},
                lambda: peft.AdaLoraConfig(init_r=12, target_r=8, target_modules=QV, total_step=100)),
    "ia3": ({"peft_type": "ia3", "target_modules": KVD},
            lambda: peft.IA3Config(target_modules=KVD, feedforward_modules=["down_proj"])),
    "vera": ({"peft_type": "vera", "r": 16, "target_modules": QV}, lambda: peft.VeraConfig(r=16, target_modules=QV)),
    "loha": ({"peft_type": "loha", "r": 8, "target_modules": ALL}, lambda: peft.LoHaConfig(r=8, target_modules=ALL)),
    "lokr": ({"peft_type": "lokr", "r": 8, "target_modules": ALL}, lambda: peft.LoKrConfig(r=8, target_modules=ALL)),
    "lokr_f4": ({"peft_type": "lokr", "r": 4, "decompose_factor": 4, "target_modules": QV},
                lambda: peft.LoKrConfig(r=4, decompose_factor=4, target_modules=QV)),
    "oft": ({"peft_type": "oft", "r": 8, "target_modules": QV},
            lambda: peft.OFTConfig(r=8, oft_block_size=0, target_modules=QV)),
    "boft": ({"peft_type": "boft", "target_modules": QV},
             lambda: peft.BOFTConfig(boft_block_size=4, target_modules=QV)),
    "prompt": ({"peft_type": "prompt_tuning", "num_virtual_tokens": 10},
               lambda: peft.PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=10)),
    "prefix": ({"peft_type": "prefix_tuning", "num_virtual_tokens": 10},
               lambda: peft.PrefixTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=10)),
    "ln": ({"peft_type": "ln_tuning"}, lambda: peft.LNTuningConfig(
        target_modules=["input_layernorm", "post_attention_layernorm", "norm"])),
    # IA3 with no target_modules: PEFT's IA3 mapping (Llama k/v/down, Qwen q/v/down), not LoRA's q/v
    "ia3_default": ({"peft_type": "ia3"}, lambda: peft.IA3Config()),
    "ia3_ff3": ({"peft_type": "ia3", "target_modules": ALL, "feedforward_modules": FF3},
                lambda: peft.IA3Config(target_modules=ALL, feedforward_modules=FF3)),
    "miss": ({"peft_type": "miss", "r": 16, "target_modules": QV}, lambda: peft.MissConfig(r=16, target_modules=QV)),
    "gralora": ({"peft_type": "gralora", "r": 16, "gralora_k": 4, "target_modules": ALL},
                lambda: peft.GraloraConfig(r=16, gralora_k=4, target_modules=ALL)),
    "shira": ({"peft_type": "shira", "r": 8, "target_modules": ALL}, lambda: peft.ShiraConfig(r=8, target_modules=ALL)),
    "hra": ({"peft_type": "hra", "r": 8, "target_modules": ALL}, lambda: peft.HRAConfig(r=8, target_modules=ALL)),
    "delora": ({"peft_type": "delora", "r": 8, "target_modules": ALL},
               lambda: peft.DeloraConfig(r=8, target_modules=ALL)),
    "hira": ({"peft_type": "hira", "r": 8, "target_modules": ALL}, lambda: peft.HiraConfig(r=8, target_modules=ALL)),
    "fourierft": ({"peft_type": "fourierft", "n_frequency": 300, "target_modules": ALL},
                  lambda: peft.FourierFTConfig(n_frequency=300, target_modules=ALL)),
    "randlora": ({"peft_type": "randlora", "r": 8, "target_modules": ALL},
                 lambda: peft.RandLoraConfig(r=8, target_modules=ALL)),
    "pvera": ({"peft_type": "pvera", "r": 16, "target_modules": QV}, lambda: peft.PveraConfig(r=16, target_modules=QV)),
    "c3a": ({"peft_type": "c3a", "block_size": 8, "target_modules": ALL},
            lambda: peft.C3AConfig(block_size=8, target_modules=ALL)),
    "beft": ({"peft_type": "beft", "target_modules": ALL}, lambda: peft.BeftConfig(target_modules=ALL)),
    "road": ({"peft_type": "road", "road_variant": "road_2", "group_size": 16, "target_modules": ALL},
             lambda: peft.RoadConfig(variant="road_2", group_size=16, target_modules=ALL)),
    "waveft": ({"peft_type": "waveft", "n_frequency": 300, "target_modules": ALL},
               lambda: peft.WaveFTConfig(n_frequency=300, target_modules=ALL)),
    "p_tuning": ({"peft_type": "p_tuning", "num_virtual_tokens": 10, "encoder_hidden_size": 32},
                 lambda: peft.PromptEncoderConfig(task_type="CAUSAL_LM", num_virtual_tokens=10,
                                                  encoder_hidden_size=32)),
    "vblora": ({"peft_type": "vblora", "r": 4, "num_vectors": 64, "vector_length": 16, "target_modules": ALL},
               lambda: peft.VBLoRAConfig(r=4, num_vectors=64, vector_length=16, target_modules=ALL)),
    "unilora": ({"peft_type": "unilora", "r": 4, "theta_d_length": 500, "target_modules": ALL},
                lambda: peft.UniLoraConfig(r=4, theta_d_length=500, target_modules=ALL)),
    "deft": ({"peft_type": "deft", "r": 8, "target_modules": ALL}, lambda: peft.DeftConfig(r=8, target_modules=ALL)),
    "deft_para": ({"peft_type": "deft", "r": 70, "deft_para": True, "target_modules": QV},
                  lambda: peft.DeftConfig(r=70, para=True, target_modules=QV)),  # r' = min(r, out): 64 on v_proj
    "lily": ({"peft_type": "lily", "r": 8, "stride_A": 2, "num_B": 3, "target_modules": ALL},
             lambda: peft.LilyConfig(r=8, stride_A=2, num_B=3, target_modules=ALL)),
    "peanut": ({"peft_type": "peanut", "r": 4, "depth": 1, "target_modules": ALL},
               lambda: peft.PeanutConfig(r=4, depth=1, target_modules=ALL)),
    "tinylora": ({"peft_type": "tinylora", "r": 2, "tinylora_u": 13, "weight_tying": 0.3, "target_modules": ALL},
                 lambda: peft.TinyLoraConfig(r=2, u=13, weight_tying=0.3, target_modules=ALL)),
    "glora": ({"peft_type": "glora", "r": 4, "target_modules": ALL}, lambda: peft.GloraConfig(r=4, target_modules=ALL)),
    "glora_vector": ({"peft_type": "glora", "config_A_B": "vector", "config_C": "vector", "config_D_E": "vector",
                      "target_modules": QV},
                     lambda: peft.GloraConfig(config_A_B="vector", config_C="vector", config_D_E="vector",
                                              target_modules=QV)),
    "psoft": ({"peft_type": "psoft", "r": 16, "target_modules": ALL},
              lambda: peft.PsoftConfig(r=16, target_modules=ALL)),
    "psoft_plain": ({"peft_type": "psoft", "r": 8, "psoft_orth": False, "psoft_mag_a": False, "target_modules": QV},
                    lambda: peft.PsoftConfig(r=8, psoft_orth=False, psoft_mag_a=False, target_modules=QV)),
    "trainable_tokens": ({"peft_type": "trainable_tokens", "num_trainable_tokens": 3},
                         lambda: peft.TrainableTokensConfig(token_indices=[0, 5, 7])),
    "adamss": ({"peft_type": "adamss", "r": 16, "num_subspaces": 4, "subspace_rank": 2, "target_modules": ALL},
               lambda: peft.AdamssConfig(r=16, num_subspaces=4, subspace_rank=2, target_modules=ALL)),
    "miss_bat": ({"peft_type": "miss", "r": 16, "miss_init": "bat", "target_modules": ALL},
                 lambda: peft.MissConfig(r=16, init_weights="bat", target_modules=ALL)),
    "miss_mini": ({"peft_type": "miss", "r": 16, "miss_init": "mini", "mini_r": 8, "target_modules": ALL},
                  lambda: peft.MissConfig(r=16, init_weights="mini", mini_r=8, target_modules=ALL)),
    "frod": ({"peft_type": "frod", "sparse_rate": 0.05, "target_modules": ALL},
             lambda: peft.FrodConfig(sparse_rate=0.05, target_modules=ALL)),
    # OSF: PEFT's default (half of each layer's smaller side kept), a fraction, and the trained rank set per module
    "osf": ({"peft_type": "osf", "target_modules": ALL}, lambda: peft.OSFConfig(target_modules=ALL)),
    "osf_fraction": ({"peft_type": "osf", "effective_rank": 0.75, "target_modules": QV},
                     lambda: peft.OSFConfig(effective_rank=0.75, target_modules=QV)),
    "osf_trained": ({"peft_type": "osf", "osf_trainable_rank": 8, "target_modules": ALL},
                    lambda: peft.OSFConfig(target_modules=ALL, rank_pattern=_osf_pattern(8))),
    "osf_default": ({"peft_type": "osf"}, lambda: peft.OSFConfig()),
    # PEFT's own default targets for the method (SHiRA's copy of LoRA's mapping: q, v; BEFT's own: v only)
    "shira_default": ({"peft_type": "shira", "r": 8}, lambda: peft.ShiraConfig(r=8)),
    "beft_default": ({"peft_type": "beft"}, lambda: peft.BeftConfig()),
}
# saved tensors walked exactly (tests below)
WALKED = ("lora_fa", "ia3", "ia3_default", "ia3_ff3", "miss", "miss_mini", "gralora", "vera", "beft", "beft_default")


def _peft_count(style: str, name: str) -> int:
    cfg = harness.hf_config(style)
    cfg.num_hidden_layers = 2
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    pm = peft.get_peft_model(model, CASES[name][1]())
    if name == "lora_fa":
        from peft.optimizers import create_lorafa_optimizer

        create_lorafa_optimizer(pm, r=8, lora_alpha=8, lr=1e-4)  # freezes every lora_A
    return int(pm.get_nb_trainable_parameters()[0])


@pytest.mark.parametrize("style", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trainable_params_match_peft(engine, style, name):
    """Trainable parameters (and so gradient and AdamW bytes) equal PEFT's count exactly."""
    mc = dict(harness.MODEL_CONFIGS[style], num_hidden_layers=2)
    est = engine.estimate(engine.load_config({"model_config": mc, "torch_dtype": "bfloat16", "max_seq_length": 64,
                                              "per_device_train_batch_size": 1, **CASES[name][0]}), backend="cpu")
    assert est.detail["trainable_params"] == _peft_count(style, name)
    if name not in WALKED:  # walked exactly: test_lora_fa_saved_activations, test_ia3_saved_activations, ...
        assert est.confidence == "low" and any(w["code"] == "peft_method_approximate" for w in est.warnings)


@pytest.mark.parametrize("layers", [None, 1])
def test_adaption_prompt_params_match_peft(engine, layers):
    """Adaption prompt wraps attention modules, not Linears: a prompt [adapter_len, hidden] and a gate per adapted
    layer (the last adapter_layers; null: all), counted as PEFT counts them on a tiny Llama (llama and mistral only)."""
    mc = dict(harness.MODEL_CONFIGS["llama"], num_hidden_layers=2)
    fields = {"peft_type": "adaption_prompt", "adapter_len": 7, "adapter_layers": layers}
    est = engine.estimate(engine.load_config({"model_config": mc, "torch_dtype": "bfloat16", "max_seq_length": 64,
                                              "per_device_train_batch_size": 1, **fields}), backend="cpu")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**mc))
    pm = peft.get_peft_model(model, peft.AdaptionPromptConfig(adapter_len=7, adapter_layers=layers or 2,
                                                              task_type="CAUSAL_LM"))
    assert est.detail["trainable_params"] == pm.get_nb_trainable_parameters()[0]


ALL_FA = {"peft_type": "lora_fa", "r": 8, "target_modules": ALL}


def _saved_per_layer(dtype: torch.dtype, autocast: bool, dropout: float) -> dict[str, int]:
    """Bytes saved for backward by layers 0 and 1 of a tiny Llama under LoRA-FA (harness.SavedRecorder)."""
    from peft.optimizers import create_lorafa_optimizer

    return _recorded(peft.LoraConfig(r=8, target_modules=ALL, lora_dropout=dropout), dtype, autocast,
                     prepare=lambda pm: create_lorafa_optimizer(pm, r=8, lora_alpha=8, lr=1e-4))  # freezes lora_A


@pytest.mark.parametrize(("load", "autocast", "dropout"), [
    ("bfloat16", False, 0.0), ("bfloat16", False, 0.1), ("float32", True, 0.0)])
def test_lora_fa_saved_activations(engine, load, autocast, dropout):
    """LoRA-FA saves what LoRA saves minus lora_A's input (lora_A frozen): byte-exact per decoder layer."""
    from sizing.catalog import resolve_architecture
    from sizing.memory.activations import layer_saved
    from sizing.memory.adapters import trainable
    from sizing.memory.regime import resolve

    cfg = engine.load_config({"model_config": dict(harness.MODEL_CONFIGS["llama"]), "torch_dtype": load,
                              "bf16": autocast, "max_seq_length": harness.S, "lora_dropout": dropout,
                              "per_device_train_batch_size": harness.B, "packing": True, **ALL_FA})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    ls = layer_saved(arch, resolve(cfg, arch, "cpu"), trainable(cfg, arch), cfg.r, cfg.max_seq_length)
    middle = ls.per_token * harness.N + ls.constant
    first = middle + ls.layer0_delta_per_token * harness.N + ls.layer0_delta_constant
    got = _saved_per_layer(getattr(torch, load), autocast, dropout)
    assert middle == got["L1"]  # every decoder layer but the first: byte-exact
    # Layer 0 (its input needs no gradient) is measured 1.0 % / 2.1 % above (bf16) and 2.9 % below (autocast)
    # the engine's layer-0 correction, which was derived for LoRA; an open item, one layer of L.
    assert abs(first - got["L0"]) <= 0.03 * got["L0"]
    est = engine.estimate(cfg, backend="cpu")
    assert not any(w["code"] == "peft_method_approximate" for w in est.warnings)


def _recorded(pcfg, dtype: torch.dtype, autocast: bool, prepare=None, cast_adapters: bool = True) -> dict[str, int]:
    """Bytes each decoder layer of a tiny Llama under the PEFT config `pcfg` saves for backward (harness.SavedRecorder),
    by layer label; `prepare` runs on the PEFT model first (LoRA-FA's optimizer freezes lora_A); cast_adapters:
    get_peft_model's autocast_adapter_dtype."""
    from torch.autograd.graph import saved_tensors_hooks

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(harness.hf_config("llama"), dtype=dtype)
    pm = peft.get_peft_model(model, pcfg, autocast_adapter_dtype=cast_adapters)
    if prepare is not None:
        prepare(pm)
    rec = harness.SavedRecorder(pm, pm.get_base_model().model.layers)
    ids = torch.randint(0, 8192, (harness.B, harness.S))
    with saved_tensors_hooks(rec.pack, lambda t: t), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        out = pm(input_ids=ids, labels=ids)
    got = rec.by_label()
    rec.remove()
    del out
    return got


def _recorded_layer1(pcfg, dtype: torch.dtype, autocast: bool) -> int:
    return _recorded(pcfg, dtype, autocast)["L1"]


def _walked_layer1(engine, fields: dict):
    """The engine's configuration for the same tiny Llama run and what it says one middle layer saves."""
    from sizing.catalog import resolve_architecture
    from sizing.memory.activations import layer_saved
    from sizing.memory.adapters import trainable
    from sizing.memory.regime import resolve

    cfg = engine.load_config({"model_config": dict(harness.MODEL_CONFIGS["llama"]), "max_seq_length": harness.S,
                              "per_device_train_batch_size": harness.B, "packing": True, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    ls = layer_saved(arch, resolve(cfg, arch, "cpu"), trainable(cfg, arch), cfg.r, cfg.max_seq_length)
    return cfg, ls.per_token * harness.N + ls.constant


@pytest.mark.parametrize("name", ["ia3", "ia3_ff3"])
def test_ia3_saved_activations(engine, name):
    """IA3 on a bf16 base: the frozen outputs of the modules it scales (k_proj, v_proj; all attention projections)
    and the fp32 casts of the feed-forward modules' inputs (down_proj; gate, up and down) are saved by the multiply
    with ia3_l; byte-exact per decoder layer >= 1."""
    _, walked = _walked_layer1(engine, {"torch_dtype": "bfloat16", **CASES[name][0]})
    assert walked == _recorded_layer1(CASES[name][1](), torch.bfloat16, False)

TUNERS = {  # PEFT's own dropout field, per tuner
    "vera": lambda r, targets, dropout: peft.VeraConfig(r=r, target_modules=targets, vera_dropout=dropout),
    "miss": lambda r, targets, dropout: peft.MissConfig(r=r, target_modules=targets, miss_dropout=dropout),
    "gralora": lambda r, targets, dropout: peft.GraloraConfig(r=r, gralora_k=4, target_modules=targets,
                                                              gralora_dropout=dropout),
}


@pytest.mark.parametrize(("kind", "targets", "load", "autocast", "dropout"), [
    ("miss", QV, "bfloat16", False, 0.0), ("miss", QV, "bfloat16", False, 0.1), ("miss", QV, "float32", True, 0.0),
    ("miss", ALL, "bfloat16", False, 0.1),
    ("gralora", QV, "bfloat16", False, 0.0), ("gralora", QV, "float32", True, 0.1),
    ("gralora", ALL, "bfloat16", False, 0.0), ("gralora", ALL, "bfloat16", False, 0.1),
    ("vera", QV, "bfloat16", False, 0.0), ("vera", QV, "bfloat16", False, 0.1), ("vera", QV, "float32", True, 0.0),
    ("vera", ALL, "bfloat16", False, 0.0)])
def test_miss_gralora_saved_activations(engine, kind, targets, load, autocast, dropout):
    """MiSS saves LoRA-FA's tensors (the r-wide block sum its matmul reads, not its input: the sum keeps nothing);
    GraLoRA saves LoRA's, with the intermediate gralora_k * r wide (its block-diagonal einsum's permuted copy); VeRA
    saves no input (vera_A is a buffer), the r-wide product lambda_d scales and the out-wide one lambda_b scales.
    Byte-exact per decoder layer >= 1 on a tiny Llama."""
    extra = {"gralora_k": 4} if kind == "gralora" else {}
    cfg, walked = _walked_layer1(engine, {"torch_dtype": load, "bf16": autocast, "lora_dropout": dropout,
                                          "peft_type": kind, "r": 16, "target_modules": targets, **extra})
    assert walked == _recorded_layer1(TUNERS[kind](16, targets, dropout), getattr(torch, load), autocast)
    est = engine.estimate(cfg, backend="cpu")
    assert not any(w["code"] == "peft_method_approximate" for w in est.warnings)


@pytest.mark.parametrize("kind", sorted(TUNERS))
def test_output_cast_tuners_under_autocast_over_fp32_are_approximate(engine, kind):
    """Under autocast over fp32 weights, MiSS, GraLoRA and VeRA cast their result to the input's dtype: gate_proj's and
    up_proj's outputs come out fp32 and the MLP saves them so (MiSS measured 2,880 and 1,504 bytes per token more
    than the walk on this tiny Llama). The estimate must say its activations are approximate, and be below the truth."""
    extra = {"gralora_k": 4} if kind == "gralora" else {}
    cfg, walked = _walked_layer1(engine, {"torch_dtype": "float32", "bf16": True, "peft_type": kind, "r": 16,
                                          "target_modules": ALL, **extra})
    assert walked < _recorded_layer1(TUNERS[kind](16, ALL, 0.0), torch.float32, True)
    est = engine.estimate(cfg, backend="cpu")
    assert est.confidence == "low" and any(w["code"] == "peft_method_approximate" for w in est.warnings)


@pytest.mark.parametrize("model_type", ["gpt2", "bloom"])
def test_ia3_defaults_on_mlp_named_targets(engine, model_type):
    """PEFT's IA3 defaults name the MLP's output projection as "mlp.c_proj" (GPT-2) or "mlp.dense_4h_to_h" (BLOOM):
    GPT-2's attention c_proj is not adapted; the engine counts what PEFT builds on a tiny model of each."""
    if model_type == "gpt2":
        hf = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128)
    else:
        hf = transformers.BloomConfig(n_layer=2, hidden_size=64, n_head=4, vocab_size=512)
    torch.manual_seed(0)
    pm = peft.get_peft_model(transformers.AutoModelForCausalLM.from_config(hf), peft.IA3Config())
    est = engine.estimate(engine.load_config({"model_config": hf.to_dict(), "peft_type": "ia3",
                                              "torch_dtype": "float32", "max_seq_length": 64,
                                              "per_device_train_batch_size": 1}), backend="cpu")
    assert est.detail["trainable_params"] == int(pm.get_nb_trainable_parameters()[0])


_TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=512, pad_token_id=0)
NO_DEFAULT = {  # model types PEFT 0.21.2's mappings leave out (utils/constants.py), as tiny configs
    "phi3": lambda: transformers.Phi3Config(**_TINY),
    "mistral": lambda: transformers.MistralConfig(**_TINY),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(**_TINY, moe_intermediate_size=32, num_experts=4,
                                                     num_experts_per_tok=2),
    # Gemma 3 with its vision tower: PEFT reads the top-level model_type, gemma3, not gemma3_text
    "gemma3": lambda: transformers.Gemma3Config(
        text_config={k: v for k, v in _TINY.items() if k != "pad_token_id"} | {"head_dim": 16},
        vision_config=dict(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                           image_size=28, patch_size=14, vision_use_head=False), mm_tokens_per_image=4),
}


@pytest.mark.parametrize(("kind", "model_type"), [("lora", "phi3"), ("ia3", "phi3"), ("adalora", "mistral"),
                                                  ("lora", "qwen3_moe"), ("lora", "gemma3")])
def test_no_peft_default_targets_refused(engine, kind, model_type):
    """Where PEFT's mapping for the tuner has no entry for the model type, get_peft_model asks for target_modules
    (LoRA on Phi-3, Qwen3-MoE or a Gemma 3 with its vision tower, IA3 on Phi-3, AdaLoRA on Mistral); the engine
    refuses the same configuration, naming the field."""
    from sizing.errors import SizingError

    hf = NO_DEFAULT[model_type]()
    tuner = {"lora": lambda: peft.LoraConfig(), "ia3": lambda: peft.IA3Config(),
             "adalora": lambda: peft.AdaLoraConfig(total_step=10)}[kind]
    with pytest.raises(ValueError, match="target_modules"):
        peft.get_peft_model(transformers.AutoModelForCausalLM.from_config(hf), tuner())
    with pytest.raises(SizingError) as err:
        engine.estimate(engine.load_config({"model_config": hf.to_dict(), "peft_type": kind, "max_seq_length": 64,
                                            "per_device_train_batch_size": 1}), backend="cpu")
    assert (err.value.code, err.value.field) == ("target_modules_required", "target_modules")


OUTPUT_SIDE = {  # tuners that act on the frozen output, as the engine's configuration and PEFT's (test below)
    "beft": ({"peft_type": "beft"}, lambda targets: peft.BeftConfig(target_modules=targets)),
    "road": ({"peft_type": "road", "road_variant": "road_2", "group_size": 16},
             lambda targets: peft.RoadConfig(variant="road_2", group_size=16, target_modules=targets)),
    "waveft": ({"peft_type": "waveft", "n_frequency": 300},
               lambda targets: peft.WaveFTConfig(n_frequency=300, target_modules=targets)),
    "fourierft": ({"peft_type": "fourierft", "n_frequency": 300},
                  lambda targets: peft.FourierFTConfig(n_frequency=300, target_modules=targets)),
    "vblora": ({"peft_type": "vblora", "r": 4, "num_vectors": 64, "vector_length": 16},
               lambda targets: peft.VBLoRAConfig(r=4, num_vectors=64, vector_length=16, target_modules=targets)),
    "unilora": ({"peft_type": "unilora", "r": 4}, lambda targets: peft.UniLoraConfig(r=4, target_modules=targets)),
    "deft": ({"peft_type": "deft", "r": 8}, lambda targets: peft.DeftConfig(r=8, target_modules=targets)),
    "deft_para": ({"peft_type": "deft", "r": 8, "deft_para": True},
                  lambda targets: peft.DeftConfig(r=8, para=True, target_modules=targets)),
    "lily": ({"peft_type": "lily", "r": 8}, lambda targets: peft.LilyConfig(r=8, target_modules=targets)),
    "peanut": ({"peft_type": "peanut", "r": 8, "depth": 2},
               lambda targets: peft.PeanutConfig(r=8, depth=2, target_modules=targets)),
    "tinylora": ({"peft_type": "tinylora", "r": 2}, lambda targets: peft.TinyLoraConfig(r=2, target_modules=targets)),
    "glora": ({"peft_type": "glora", "r": 8}, lambda targets: peft.GloraConfig(r=8, target_modules=targets)),
    "psoft": ({"peft_type": "psoft", "r": 16}, lambda targets: peft.PsoftConfig(r=16, target_modules=targets)),
    "adamss": ({"peft_type": "adamss", "r": 16, "num_subspaces": 4, "subspace_rank": 2},
               lambda targets: peft.AdamssConfig(r=16, num_subspaces=4, subspace_rank=2, target_modules=targets)),
    "frod": ({"peft_type": "frod", "sparse_rate": 0.02},
             lambda targets: peft.FrodConfig(sparse_rate=0.02, target_modules=targets)),
    "osf": ({"peft_type": "osf"}, lambda targets: peft.OSFConfig(target_modules=targets)),
    "osf_trained": ({"peft_type": "osf", "osf_trainable_rank": 8},
                    lambda targets: peft.OSFConfig(target_modules=targets, rank_pattern=_osf_pattern(8))),
    "boft": ({"peft_type": "boft"}, lambda targets: peft.BOFTConfig(boft_block_size=4, target_modules=targets)),
    "loha": ({"peft_type": "loha", "r": 8}, lambda targets: peft.LoHaConfig(r=8, target_modules=targets)),
    # LoRA-shaped tuners walked from measurement (a bf16 base; under autocast they keep other dtypes)
    "adalora": ({"peft_type": "adalora", "r": 12, "lora_dropout": 0.0},
                lambda targets: peft.AdaLoraConfig(init_r=12, target_r=8, total_step=100, target_modules=targets)),
    "oft": ({"peft_type": "oft", "r": 8},
            lambda targets: peft.OFTConfig(r=8, oft_block_size=0, target_modules=targets)),
    "shira": ({"peft_type": "shira", "r": 8}, lambda targets: peft.ShiraConfig(r=8, target_modules=targets)),
    "hra": ({"peft_type": "hra", "r": 8}, lambda targets: peft.HRAConfig(r=8, target_modules=targets)),
    "delora": ({"peft_type": "delora", "r": 8}, lambda targets: peft.DeloraConfig(r=8, target_modules=targets)),
    "hira": ({"peft_type": "hira", "r": 8}, lambda targets: peft.HiraConfig(r=8, target_modules=targets)),
    "randlora": ({"peft_type": "randlora", "r": 8}, lambda targets: peft.RandLoraConfig(r=8, target_modules=targets)),
    "pvera": ({"peft_type": "pvera", "r": 16}, lambda targets: peft.PveraConfig(r=16, target_modules=targets)),
    "c3a": ({"peft_type": "c3a", "block_size": 16},
            lambda targets: peft.C3AConfig(block_size=16, target_modules=targets)),
    "ln": ({"peft_type": "ln_tuning", "target_modules": None}, lambda targets: peft.LNTuningConfig(
        target_modules=["input_layernorm", "post_attention_layernorm", "norm"])),
    "dora": ({"peft_type": "lora", "r": 8, "use_dora": True, "lora_dropout": 0.0},
             lambda targets: peft.LoraConfig(r=8, use_dora=True, target_modules=targets)),
    "lokr": ({"peft_type": "lokr", "r": 8}, lambda targets: peft.LoKrConfig(r=8, target_modules=targets)),
    "lokr_f4": ({"peft_type": "lokr", "r": 4, "decompose_factor": 4},
                lambda targets: peft.LoKrConfig(r=4, decompose_factor=4, target_modules=targets)),
    "miss_bat": ({"peft_type": "miss", "r": 16, "miss_init": "bat"},
                 lambda targets: peft.MissConfig(r=16, init_weights="bat", target_modules=targets)),
    "miss_mini": ({"peft_type": "miss", "r": 16, "miss_init": "mini", "mini_r": 8},
                  lambda targets: peft.MissConfig(r=16, init_weights="mini", mini_r=8, target_modules=targets)),
    "frod_offload": ({"peft_type": "frod", "sparse_rate": 0.02, "runtime_offload_base_weight": True},
                     lambda targets: peft.FrodConfig(sparse_rate=0.02, runtime_offload_base_weight=True,
                                                     target_modules=targets)),
    # every attention layer adapted (it adapts attention modules: the targets are not its own)
    "adaption_prompt": ({"peft_type": "adaption_prompt", "adapter_len": 10, "target_modules": None},
                        lambda targets: peft.AdaptionPromptConfig(adapter_len=10, adapter_layers=4,
                                                                  task_type="CAUSAL_LM")),
}


@pytest.mark.parametrize(("kind", "targets", "load", "autocast"), [
    ("beft", QV, "bfloat16", False), ("beft", ALL, "bfloat16", False), ("beft", ALL, "float32", True),
    ("road", QV, "bfloat16", False), ("road", ALL, "bfloat16", False), ("road", ALL, "float32", True),
    ("waveft", QV, "bfloat16", False), ("waveft", ALL, "bfloat16", False), ("waveft", QV, "float32", True),
    ("fourierft", QV, "bfloat16", False), ("fourierft", ALL, "bfloat16", False), ("fourierft", QV, "float32", True),
    ("vblora", QV, "bfloat16", False), ("vblora", ALL, "bfloat16", False), ("vblora", QV, "float32", True),
    ("unilora", QV, "bfloat16", False), ("unilora", ALL, "bfloat16", False), ("unilora", QV, "float32", True),
    ("deft", QV, "bfloat16", False), ("deft", ALL, "bfloat16", False), ("deft_para", QV, "bfloat16", False),
    ("lily", QV, "bfloat16", False), ("lily", ALL, "bfloat16", False),
    ("peanut", QV, "bfloat16", False), ("peanut", ALL, "bfloat16", False),
    ("tinylora", QV, "bfloat16", False), ("tinylora", ALL, "bfloat16", False),
    ("glora", QV, "bfloat16", False), ("glora", ALL, "bfloat16", False), ("glora", QV, "float32", True),
    ("psoft", QV, "bfloat16", False), ("psoft", ALL, "bfloat16", False),
    ("adamss", QV, "bfloat16", False), ("adamss", ALL, "bfloat16", False), ("adamss", QV, "float32", True),
    ("adaption_prompt", QV, "bfloat16", False),
    ("frod", QV, "bfloat16", False), ("frod", ALL, "bfloat16", False), ("frod_offload", QV, "bfloat16", False),
    ("osf", QV, "bfloat16", False), ("osf", ALL, "bfloat16", False), ("osf", QV, "float32", True),
    ("osf_trained", ALL, "bfloat16", False),
    ("boft", QV, "bfloat16", False), ("boft", ALL, "bfloat16", False),
    ("miss_bat", QV, "bfloat16", False), ("miss_bat", ALL, "bfloat16", False),
    ("loha", QV, "bfloat16", False), ("loha", ALL, "bfloat16", False), ("loha", QV, "float32", True),
    ("ln", QV, "bfloat16", False), ("ln", QV, "float32", True),
    *[(kind, targets, "bfloat16", False) for kind in ("adalora", "oft", "shira", "hra", "delora", "hira", "randlora",
                                                       "pvera", "c3a") for targets in (QV, ALL)],
    ("c3a", QV, "float32", True), ("adalora", QV, "float32", True),  # fp32 weights: ranknum stays frozen
    ("dora", QV, "bfloat16", False), ("dora", ALL, "bfloat16", False), ("dora", QV, "float32", True),
    ("lokr", QV, "bfloat16", False), ("lokr", ALL, "bfloat16", False), ("lokr", QV, "float32", True),
    ("lokr_f4", QV, "bfloat16", False), ("lokr_f4", ALL, "bfloat16", False),
    ("miss_mini", QV, "bfloat16", False), ("miss_mini", ALL, "bfloat16", False), ("miss_mini", QV, "float32", True)])
def test_output_side_tuners_saved_activations(engine, kind, targets, load, autocast):
    """(And VB-LoRA, UniLoRA, DEFT, Lily, PEANuT: peft_saved.saved_extras.)
    BEFT's added bias saves nothing (the frozen base's tensors only); RoAd keeps its fp32 output and that output's
    rotated half, 8 * out bytes per token per adapted layer; WaveFT keeps x cast to its fp32 spectrum's dtype (LoRA's
    input copy, no r-wide intermediate) and, per adapted layer, its dense out x in update and the wavelet coefficients
    it was made from. Byte-exact per decoder layer >= 1 on a tiny Llama (the engine calls RoAd and WaveFT approximate:
    neither is walked op by op)."""
    fields, make = OUTPUT_SIDE[kind]
    _, walked = _walked_layer1(engine, {"torch_dtype": load, "bf16": autocast, "target_modules": targets, **fields})
    # Adaption prompt's layer 0 keeps none of the attention's tensors (no input gradient there): RoPE's cos and sin,
    # which every layer shares and the engine counts once for the model, are first kept, so recorded, in layer 1
    layer = "L2" if kind == "adaption_prompt" else "L1"
    assert walked == _recorded(make(targets), getattr(torch, load), autocast)[layer]


@pytest.mark.parametrize("targets", [QV, ALL])
def test_osf_bf16_adapters_saved_activations(engine, targets):
    """OSF with get_peft_model(autocast_adapter_dtype=False), as PEFT's benchmark ran it: the factors, their stacked
    copies and the 2t-wide product stay bf16 and the input is not copied; byte-exact per decoder layer >= 1."""
    recorded = _recorded(peft.OSFConfig(target_modules=targets), torch.bfloat16, False, cast_adapters=False)["L1"]
    _, walked = _walked_layer1(engine, {"torch_dtype": "bfloat16", "adapter_dtype": "bfloat16", "peft_type": "osf",
                                        "target_modules": targets})
    assert walked == recorded


def test_osf_mlp_under_autocast_over_fp32_returns_fp32(engine):
    """OSF adds delta_out.to(x.dtype) to the base output: under autocast over fp32 weights an adapted gate_proj and
    up_proj return fp32 (bf16 + fp32), so SiLU keeps gate's output and the product keeps SiLU's and up's in fp32, not
    bf16. The walk keeps LoRA's dtypes (OSF is approximate, like MiSS's and GraLoRA's result.to(previous_dtype)):
    one middle layer is low by exactly those three intermediate-wide tensors' other two bytes per token."""
    fields, make = OUTPUT_SIDE["osf_trained"]
    _, walked = _walked_layer1(engine, {"torch_dtype": "float32", "bf16": True, "target_modules": ALL, **fields})
    recorded = _recorded(make(ALL), torch.float32, True)["L1"]
    assert recorded - walked == 3 * 2 * harness.hf_config("llama").intermediate_size * harness.N


@pytest.mark.parametrize("targets", [QV, ALL])
def test_adalora_before_peft_0_21_1_keeps_no_scaled_update(engine, targets):
    """PEFT 0.21.0's cast_adapter_dtype cast each adapter parameter's .data to fp32 in place, so AdaLoRA's frozen
    ranknum stayed frozen; 0.21.1 reassigns a new Parameter through the ParameterDict, trainable (tuners_utils.py at
    v0.21.0 and v0.21.1). The installed 0.21.2 is made to hold 0.21.0's result (ranknum frozen again, fp32 as the
    in-place cast left it): one middle layer saves what the engine walks for peft_version 0.21.0, byte for byte, and
    less than for 0.21.1."""
    fields, make = OUTPUT_SIDE["adalora"]

    def frozen_ranknum(pm) -> None:
        for name, param in pm.named_parameters():
            if ".ranknum." in name:
                assert param.requires_grad and param.dtype == torch.float32  # 0.21.2's cast, as the engine says
                param.requires_grad_(False)

    run = {"torch_dtype": "bfloat16", "bf16": False, "target_modules": targets, **fields}
    _, before = _walked_layer1(engine, {**run, "peft_version": "0.21.0"})
    _, after = _walked_layer1(engine, {**run, "peft_version": "0.21.1"})
    assert before == _recorded(make(targets), torch.bfloat16, False, prepare=frozen_ranknum)["L1"]
    assert before < after


BUFFERED = {  # tuners whose frozen factors are buffers (PSOFT's and TinyLoRA's A and B, UniLoRA's indices and scales)
    "psoft": ({"peft_type": "psoft", "r": 16}, lambda: peft.PsoftConfig(r=16, target_modules=ALL), "psoft"),
    "tinylora": ({"peft_type": "tinylora", "r": 2}, lambda: peft.TinyLoraConfig(r=2, target_modules=ALL), "tinylora_"),
    "unilora": ({"peft_type": "unilora", "r": 4}, lambda: peft.UniLoraConfig(r=4, target_modules=ALL), "unilora_"),
    "lora": ({"peft_type": "lora", "r": 4}, lambda: peft.LoraConfig(r=4, target_modules=ALL), "lora_"),
    "adamss": ({"peft_type": "adamss", "r": 16},
               lambda: peft.AdamssConfig(r=16, target_modules=ALL), "adamss_newB"),
    "frod": ({"peft_type": "frod"}, lambda: peft.FrodConfig(target_modules=ALL), "frod_U"),
    "osf": ({"peft_type": "osf"}, lambda: peft.OSFConfig(target_modules=ALL), "_osf_"),
}


@pytest.mark.parametrize("name", sorted(BUFFERED))
def test_tuner_buffers_are_resident(engine, name):
    """The weights the engine holds resident are PEFT's model's parameters plus the tuner's buffers, byte for byte
    (bf16 base, fp32 adapters; LoRA: no buffers), on a tiny Llama."""
    fields, make, prefix = BUFFERED[name]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(harness.hf_config("llama"), dtype=torch.bfloat16)
    pm = peft.get_peft_model(model, make())
    held = sum(p.numel() * p.element_size() for p in pm.parameters())
    held += sum(b.numel() * b.element_size() for n, b in pm.named_buffers() if prefix in n)
    est = engine.estimate(engine.load_config({"model_config": dict(harness.MODEL_CONFIGS["llama"]),
                                              "torch_dtype": "bfloat16", "max_seq_length": 64,
                                              "per_device_train_batch_size": 1, "target_modules": ALL, **fields}),
                          backend="cpu")
    assert est.detail["param_bytes"] == held


def test_trainable_tokens_tied_head_keeps_its_rebuilt_weight(engine):
    """Trainable tokens on a tied model: the head multiplies an index_copy of the whole embedding weight, which it keeps
    for backward with its input. What the head keeps above BEFT's (a frozen head, the same frozen body) on a tiny tied
    Llama equals what the engine adds to its retained bytes."""
    from torch.autograd.graph import saved_tensors_hooks

    mc = dict(harness.MODEL_CONFIGS["llama"], tie_word_embeddings=True)

    def head_saved(pcfg) -> int:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**mc), dtype=torch.bfloat16)
        pm = peft.get_peft_model(model, pcfg)
        rec = harness.SavedRecorder(pm, pm.get_base_model().model.layers)
        ids = torch.randint(0, 8192, (harness.B, harness.S))
        with saved_tensors_hooks(rec.pack, lambda t: t):
            out = pm(input_ids=ids, labels=ids)
        got = rec.by_label()["head"]
        rec.remove()
        del out
        return got

    def retained(fields: dict) -> int:
        cfg = engine.load_config({"model_config": mc, "torch_dtype": "bfloat16", "max_seq_length": harness.S,
                                  "per_device_train_batch_size": harness.B, "packing": True, **fields})
        return engine.estimate(cfg, backend="cpu").detail["retained_activation_bytes"]

    measured = head_saved(peft.TrainableTokensConfig(token_indices=[0, 5, 7])) - head_saved(
        peft.BeftConfig(target_modules=["v_proj"]))
    walked = retained({"peft_type": "trainable_tokens", "num_trainable_tokens": 3}) - retained(
        {"peft_type": "beft", "target_modules": ["v_proj"]})
    assert measured > 8192 * 256 * 2  # the vocab x hidden bf16 copy at least
    assert walked == measured
