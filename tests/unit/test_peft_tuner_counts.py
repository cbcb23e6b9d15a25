"""Trainable parameter counts of PEFT tuners on a real-size model against the counts PEFT's own benchmark logged
(huggingface/peft@51c2ff66 method_comparison/MetaMathQA/results/*.json, train_info.num_trainable_params,
Llama-3.2-3B; DeLoRA's and SHiRA's from later commits, named per case)."""

from __future__ import annotations

import pytest

from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.errors import SizingError
from sizing.memory.adapters import trainable

QV = ["q_proj", "v_proj"]
ALL7 = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.mark.parametrize(("fields", "logged"), [
    # miss--llama-3.2-3B-default.json: MissConfig(r=64, target_modules=[q_proj, v_proj]), init_weights=True
    ({"peft_type": "miss", "r": 64}, 7_340_032),
    # gralora--llama-3.2-3B-rank32.json: GraloraConfig(r=32, gralora_k=2, hybrid_r=0)
    ({"peft_type": "gralora", "r": 32}, 9_175_040),
    # delora--llama-3.2-3B-rank32.json (huggingface/peft@52903c83): DeloraConfig(r=32, target_modules=[v_proj, q_proj])
    ({"peft_type": "delora", "r": 32}, 9_175_096),
    # shira--llama-3.2-3B-lr_0.0003-random_seed_42.json (@10f97f83): ShiraConfig(r=32, target_modules=[q_proj, v_proj])
    ({"peft_type": "shira", "r": 32}, 9_175_040),
    # hira--llama-3.2-3B-rank32-lr4.5e-3.json: HiraConfig(r=32, target_modules=[q_proj, v_proj])
    ({"peft_type": "hira", "r": 32}, 9_175_040),
    # fourierft--llama-3.2-3B-default.json and -n_frequency-5000.json: FourierFTConfig(n_frequency=1000 / 5000)
    ({"peft_type": "fourierft"}, 56_000),
    ({"peft_type": "fourierft", "n_frequency": 5000}, 280_000),
    # randlora--llama-3.2-3B-default.json: RandLoraConfig(r=32); pvera--llama-3.2-3B-default.json and -rank64.json
    ({"peft_type": "randlora", "r": 32}, 9_289_728),
    ({"peft_type": "pvera", "r": 256}, 143_360),
    ({"peft_type": "pvera", "r": 64}, 121_856),
    # c3a--llama-3.2-3B-default.json: C3AConfig(block_size=64, target_modules=[q_proj, v_proj])
    ({"peft_type": "c3a", "block_size": 64}, 5_505_024),
    # beft--llama-3.2-3B-target-v_proj.json: BeftConfig(target_modules=[v_proj]); BEFT's own default is v_proj too
    ({"peft_type": "beft", "target_modules": ["v_proj"]}, 28_672),
    ({"peft_type": "beft", "target_modules": None}, 28_672),
    # road--llama-3.2-3B-lr_0.001.json: RoadConfig(variant="road_2", group_size=64, target_modules=[v_proj, q_proj])
    ({"peft_type": "road", "road_variant": "road_2"}, 229_376),
    # waveft--llama-3.2-3B-n_frequency-5000.json: WaveFTConfig(n_frequency=5000); its default n_frequency is 2592
    ({"peft_type": "waveft", "n_frequency": 5000}, 280_000),
    ({"peft_type": "waveft"}, 28 * 2 * 2592),
    # ptuning--llama-3.2-3B-default.json: PromptEncoderConfig(num_virtual_tokens=20), MLP encoder at the hidden size
    ({"peft_type": "p_tuning", "num_virtual_tokens": 20}, 28_382_208),
    # vblora--llama-3.2-3B-default.json: VBLoRAConfig(r=4, num_vectors=256, vector_length=256, topk=2)
    ({"peft_type": "vblora", "r": 4}, 1_212_416),
    # unilora--llama-3.2-3B-default.json: UniLoraConfig(r=32, theta_d_length=256): one vector for the whole model
    ({"peft_type": "unilora", "r": 32}, 256),
    # deft--llama-3.2-3B-rank32.json and -rank32-para.json: DeftConfig(r=32) (LoRA's count) and para=True (P only)
    ({"peft_type": "deft", "r": 32}, 9_175_040),
    ({"peft_type": "deft", "r": 32, "deft_para": True}, 3_670_016),
    # lily--llama-3.2-3B-rank140-mlp-a2-b2-s8.0.json and -rank896-a2-b2-s2.0.json: LilyConfig(stride_A=14, num_B=2):
    # two A per target over 28 layers, one B [num_B * r, out] per target, a router per layer
    ({"peft_type": "lily", "r": 140, "stride_A": 14, "target_modules": ["gate_proj", "up_proj", "down_proj"]},
     9_485_280),
    ({"peft_type": "lily", "r": 896, "stride_A": 14}, 18_450_432),
    # peanut--llama-3.2-3B-rank1-relu-depth0-s32.0.json and -rank32-...: PeanutConfig(r=1 / 32, depth=0)
    ({"peft_type": "peanut", "r": 1}, 229_376),
    ({"peft_type": "peanut", "r": 32}, 7_340_032),
    # tinylora--llama-3.2-3B-default.json and -weight-tying.json: TinyLoraConfig(r=2, u=64, weight_tying=0 / 1):
    # a vector per adapted module (56), or one for all
    ({"peft_type": "tinylora", "r": 2}, 3_584),
    ({"peft_type": "tinylora", "r": 2, "weight_tying": 1.0}, 64),
    # glora--llama-3.2-3B-default.json and -vector-paths.json: GloraConfig(r=8) and config_A_B / config_C "vector"
    # (Llama's projections have no bias: the C, D and E paths are zero buffers)
    ({"peft_type": "glora", "r": 8}, 4_587_520),
    ({"peft_type": "glora", "config_A_B": "vector", "config_C": "vector"}, 229_376),
    # psoft--llama-3.2-3B-default.json and -fast.json: PsoftConfig(r=256): the skew matrix's upper triangle and two
    # r-wide scales per module (A and B are frozen buffers)
    ({"peft_type": "psoft", "r": 256}, 1_856_512),
    # trainable_tokens--llama-3.2-3B-sos+eos.json: TrainableTokensConfig(token_indices=[128000, 128001]): two rows
    # of the tied embedding (the head shares them)
    ({"peft_type": "trainable_tokens", "num_trainable_tokens": 2, "target_modules": None}, 6_144),
    # miss--llama-3.2-3B-bat.json and -mini.json: MissConfig(r=64, init_weights="bat") ([out / 64, 64, 64] blocks:
    # the default's count) and (r=64, init_weights="mini", mini_r=64): one [64, 64] block per module
    ({"peft_type": "miss", "r": 64, "miss_init": "bat"}, 7_340_032),
    ({"peft_type": "miss", "r": 64, "miss_init": "mini", "mini_r": 64}, 229_376),
    # adamss--llama-3.2-3B-rank32.json: AdamssConfig(r=100, num_subspaces=32, subspace_rank=1) on q_proj, v_proj:
    # 32 subspaces of [1, 100] A and the out rows of B, per module
    ({"peft_type": "adamss", "r": 100, "num_subspaces": 32, "subspace_rank": 1}, 293_888),
    # adaptionprompt--llama-3.2-3B-lr_0.0005.json: AdaptionPromptConfig(adapter_len=100, adapter_layers=28): a
    # [100, 3072] prompt and a gate in each of the 28 attention layers (its target_modules: self_attn)
    ({"peft_type": "adaption_prompt", "adapter_len": 100, "adapter_layers": 28}, 8_601_628),
    ({"peft_type": "adaption_prompt", "adapter_len": 100}, 8_601_628),  # null: every layer
    # frod--llama-3.2-3B-default.json and -sparse0.02-lr_0.001.json: FrodConfig(sparse_rate=0.01 / 0.02) on q, v:
    # lambda [in] and int(in^2 x sparse_rate) entries of S per module
    ({"peft_type": "frod", "sparse_rate": 0.01}, 5_456_808),
    ({"peft_type": "frod", "sparse_rate": 0.02}, 10_741_640),
    # osf--llama-3.2-3B-rank128.json: OSFConfig(rank_pattern=...) keeping min(out, in) - 128 directions of each of the
    # seven projections (q 2944, k 896, ...): U_low [out, 128], S_low [128], V_low [128, in] per module
    ({"peft_type": "osf", "osf_trainable_rank": 128, "target_modules": ALL7}, 194_535_936),
    # ia3--llama-3.2-3B-default.json: IA3Config() on k_proj, v_proj, down_proj (PEFT's IA3 defaults for Llama)
    ({"peft_type": "ia3", "target_modules": None}, 286_720),
    # ia3--llama-3.2-3B-all-attn-5k-lr0.005.json: all seven projections, feed-forward up, gate and down
    ({"peft_type": "ia3", "target_modules": ["gate_proj", "o_proj", "q_proj", "k_proj", "v_proj", "down_proj",
                                             "up_proj"], "feedforward_modules": ["up_proj", "gate_proj", "down_proj"]},
     630_784),
])
def test_counts_match_peft_benchmark_logs(fields: dict, logged: int) -> None:
    cfg = parse_config({"model": "meta-llama/Llama-3.2-3B", "target_modules": QV, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    assert trainable(cfg, arch).params == logged


@pytest.mark.parametrize(("fields", "code", "field"), [
    ({"peft_type": "miss", "r": 4096}, "rank_too_large", "r"),  # MiSS: r <= in_features (3072)
    # SHiRA: r * (in + out) <= in * out; v_proj is 3072 -> 1024, so r <= 768 (shira/layer.py update_layer)
    ({"peft_type": "shira", "r": 769}, "rank_too_large", "r"),
    # FourierFT: n_frequency <= in * out (v_proj: 3072 * 1024; fourierft/layer.py update_layer)
    ({"peft_type": "fourierft", "n_frequency": 3072 * 1024 + 1}, "invalid_value", "n_frequency"),
    ({"peft_type": "c3a", "block_size": 480}, "invalid_value", "block_size"),  # 480 divides neither 3072 nor 1024
    # RoAd: group_size even (config.py) and a divisor of every adapted output (layer.py update_layer)
    ({"peft_type": "road", "group_size": 63}, "invalid_value", "group_size"),
    ({"peft_type": "road", "group_size": 48}, "invalid_value", "group_size"),  # 1024 (v_proj) is not a multiple
    ({"peft_type": "waveft", "n_frequency": 3072 * 1024 + 1}, "invalid_value", "n_frequency"),
    ({"peft_type": "psoft", "r": 1025}, "rank_too_large", "r"),  # r <= min(in, out): v_proj's 1024
    # MiSS bat: r x r blocks tile the weight (1024 is no multiple of 48); mini: mini_r divides every output width
    ({"peft_type": "miss", "r": 48, "miss_init": "bat"}, "invalid_value", "r"),
    ({"peft_type": "miss", "r": 16, "miss_init": "mini", "mini_r": 48}, "invalid_value", "mini_r"),
    # adaption prompt: no more adapted layers than the model has (adaption_prompt/model.py _create_adapted_attentions)
    ({"peft_type": "adaption_prompt", "adapter_layers": 29}, "invalid_value", "adapter_layers"),
    ({"peft_type": "vblora", "vector_length": 48}, "invalid_value", "vector_length"),  # 1024 is not a multiple
    ({"peft_type": "vblora", "topk": 257}, "invalid_value", "topk"),  # top-k of 256 bank vectors
    ({"peft_type": "gralora", "r": 30, "gralora_k": 4}, "invalid_value", "gralora_k"),  # k must divide r
    ({"peft_type": "gralora", "r": 28, "gralora_k": 7}, "invalid_value", "gralora_k"),  # ... and 3072, 1024
    # IA3Config: feedforward_modules must be among target_modules
    ({"peft_type": "ia3", "feedforward_modules": ["down_proj"]}, "invalid_value", "feedforward_modules"),
    # OSF: update_layer refuses an effective_rank of 0 or less: v_proj's smaller side is 1024, so at most 1023 train
    ({"peft_type": "osf", "osf_trainable_rank": 1024}, "invalid_value", "osf_trainable_rank"),
    ({"peft_type": "osf", "effective_rank": 0}, "invalid_value", "effective_rank"),
])
def test_peft_checks_refused_with_field(fields: dict, code: str, field: str) -> None:
    """What PEFT's update_layer (or GraLoRA's forward view into k blocks) rejects is refused, naming the field."""
    cfg = parse_config({"model": "meta-llama/Llama-3.2-3B", "target_modules": QV, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    with pytest.raises(SizingError) as err:
        trainable(cfg, arch)
    assert (err.value.code, err.value.field) == (code, field)


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-7B", "google/gemma-2-9b"])
def test_adaption_prompt_refused_where_peft_has_no_model_type(model: str) -> None:
    """AdaptionPromptConfig knows llama, mistral and gpt2 only (peft 0.21.2 tuners/adaption_prompt/config.py
    TRANSFORMERS_MODEL_CONFIG; gpt2's path reads a k_proj GPT-2's attention has not): any other is refused, naming
    peft_type."""
    cfg = parse_config({"model": model, "peft_type": "adaption_prompt"})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    with pytest.raises(SizingError) as err:
        trainable(cfg, arch)
    assert (err.value.code, err.value.field) == ("invalid_value", "peft_type")


@pytest.mark.parametrize("method", ["qlora", "lora8"])
@pytest.mark.parametrize("kind", ["road", "peanut", "tinylora", "glora", "psoft", "adamss", "frod", "osf"])
def test_tuners_refused_on_a_quantized_base(method: str, kind: str) -> None:
    """RoAd's bitsandbytes layers cast the input, not the result, back (peft 0.21.2 tuners/road/bnb.py): a 4- or
    8-bit base returns float32 outputs (without autocast, sdpa then refuses q, k and v of mixed dtypes). PEANuT builds
    its update from W.T, which a k-bit base stores packed: its forward fails; TinyLoRA makes its vector in the packed
    weight's integer dtype and fails in get_peft_model; GLoRA refuses any layer but a plain nn.Linear; PSOFT's SVD
    init refuses an integer weight; AdaMSS and FRoD make their parameters in the packed weight's dtype, which cannot
    require a gradient; OSF reads the packed weight's [n/2, 1] shape: its default effective_rank is 0, which
    update_layer refuses, and any other leaves integer factors that cannot require a gradient (measured on CPU,
    bitsandbytes 0.50.2)."""
    with pytest.raises(SizingError) as err:
        parse_config({"model": "meta-llama/Llama-3.2-3B", "method": method, "peft_type": kind})
    assert (err.value.code, err.value.field) == ("conflict", "peft_type")


@pytest.mark.parametrize("model", ["google/gemma-3-4b-it", "Qwen/Qwen3-30B-A3B", "microsoft/phi-4"])
def test_models_without_a_peft_default_ask_for_targets(model: str) -> None:
    """PEFT keys its default target_modules by the top-level model_type: gemma3 (the multimodal checkpoints),
    qwen3_moe and phi3 (Phi-4) are in none of its mappings (utils/constants.py, 0.21.2), so get_peft_model asks for
    target_modules (measured on tiny models: tests/physics/test_peft_methods.py); the engine asks too."""
    cfg = parse_config({"model": model, "target_modules": None})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    with pytest.raises(SizingError) as err:
        trainable(cfg, arch)
    assert (err.value.code, err.value.field) == ("target_modules_required", "target_modules")
