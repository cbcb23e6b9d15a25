"""Architecture reader against transformers 5 itself: parameter counts of every natively supported family
(the model built on the meta device, no memory), and what PEFT's all-linear and bitsandbytes reach in a
transformers-5 MoE model (fused 3-D experts and a bare router weight are not nn.Linear)."""

from __future__ import annotations

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(
        _mod,
        reason=f"physics tests need {_mod} (and the rest of the pinned CPU stack): "
        "pip install -r requirements-physics.txt",
    )

import torch  # noqa: E402
import transformers  # noqa: E402

from sizing.arch import from_hf_config  # noqa: E402

pytestmark = pytest.mark.physics

_BASE = {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 128}
# One tiny config per family the reader knows and transformers 5.24 builds without remote code.
FAMILIES = {
    "llama": {}, "mistral": {}, "qwen2": {}, "qwen3": {"head_dim": 16}, "gemma": {"head_dim": 16},
    "gemma2": {"head_dim": 16}, "gemma3_text": {"head_dim": 16}, "phi3": {"pad_token_id": 0},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "head_dim": 16},
    "phi": {"num_key_value_heads": 4},
    "opt": {"ffn_dim": 160, "word_embed_proj_dim": 64, "intermediate_size": None, "num_key_value_heads": None},
    "falcon": {"new_decoder_architecture": False, "multi_query": True, "num_key_value_heads": None},
    "gpt_neox": {"num_key_value_heads": None},
    "bloom": {"n_head": 4, "num_key_value_heads": None},
    "olmo2": {"head_dim": 16},
    "olmo3": {"head_dim": 16},
    "glm4": {"head_dim": 16, "pad_token_id": 0},
    "exaone4": {"head_dim": 16},
    "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16, "sliding_window": 8},
    "gpt_bigcode": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 160, "n_positions": 128,
                    "num_key_value_heads": None},
}


def _config(family: str) -> dict[str, object]:
    cfg = {**_BASE, **FAMILIES[family], "model_type": family}
    return {k: v for k, v in cfg.items() if v is not None}


def _model(cfg: dict[str, object]) -> torch.nn.Module:
    d = dict(cfg)
    hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(hf)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_total_params_match_transformers(family: str) -> None:
    cfg = _config(family)
    model = _model(cfg)
    measured = sum(p.numel() for p in model.parameters())  # a tied head is one parameter
    assert from_hf_config(cfg).total_params == measured


def _linear_names(model: torch.nn.Module) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


@pytest.mark.parametrize("family", ["mixtral", "qwen3_moe", "gpt_oss"])
def test_moe_experts_and_router_are_not_linear(family: str) -> None:
    cfg = _config(family)
    model = _model(cfg)
    arch = from_hf_config(cfg)
    linear = _linear_names(model) - {"lm_head"}
    assert linear == {lin.name for lin in arch.linears if lin.nn_linear}
    assert {lin.name for lin in arch.linears if not lin.nn_linear} and not linear & {
        lin.name for lin in arch.linears if not lin.nn_linear}


# peft 0.21 calls transformers' deprecated is_gradient_checkpointing
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_qlora_moe_bytes_match_bitsandbytes() -> None:
    """Tiny Mixtral loaded 4-bit the way transformers does it: bitsandbytes converts the attention
    nn.Linear layers only; the fused experts and the router stay bf16. Engine bytes must match."""
    import tempfile

    import bitsandbytes.functional as bnbf
    import peft

    try:  # same probe as harness._bnb_available: a broken CPU backend is a skip with its reason
        w = torch.randn(64, 64, dtype=torch.bfloat16)
        bnbf.dequantize_4bit(*bnbf.quantize_4bit(w, quant_type="nf4", compress_statistics=True))
    except Exception as e:  # pragma: no cover - depends on the install
        pytest.skip(f"bitsandbytes 4-bit does not work on this CPU: {type(e).__name__}: {e}")
    from sizing import estimate

    cfg = _config("mixtral")
    d = dict(cfg)
    hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
    q = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                        bnb_4bit_compute_dtype=torch.bfloat16)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="sizing_physics_") as tmp:
        transformers.AutoModelForCausalLM.from_config(hf).to(torch.bfloat16).save_pretrained(tmp)
        m = transformers.AutoModelForCausalLM.from_pretrained(tmp, quantization_config=q, device_map="cpu",
                                                              dtype=torch.bfloat16)
    m = peft.get_peft_model(m, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    params = {id(p): p for p in m.parameters()}
    measured = sum(p.numel() * p.element_size() for p in params.values())
    experts = [p for n, p in m.named_parameters() if ".experts." in n or n.endswith("gate.weight")]
    assert experts and all(p.dtype == torch.bfloat16 for p in experts)
    run = {"model_config": cfg, "method": "qlora", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
           "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
           "prepare_model_for_kbit_training": False, "torch_dtype": "bfloat16", "max_seq_length": 16,
           "per_device_train_batch_size": 1}
    est = estimate(run)
    assert est.detail["param_bytes"] == measured


# peft 0.21 calls transformers' deprecated is_gradient_checkpointing, and warns that its own rank/alpha pattern
# for the fused gate_up_proj matched no *module* (it targets a parameter)
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore:The following (rank|alpha)_pattern keys did not match:RuntimeWarning")
@pytest.mark.parametrize(("family", "named"), [("mixtral", ["q_proj", "gate", "w1", "w3", "w2"]),
                                               ("qwen3_moe", ["gate_proj", "up_proj", "down_proj"])])
def test_all_linear_on_transformers5_moe_counts_like_the_engine(family: str, named: list[str]) -> None:
    import peft

    from sizing import estimate

    cfg = _config(family)
    for targets in ("all-linear", named, ["v_proj"]):
        m = peft.get_peft_model(_model(cfg).to_empty(device="cpu"),
                                peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets))
        measured = sum(p.numel() for p in m.parameters() if p.requires_grad)
        est = estimate({"model_config": cfg, "method": "lora", "r": 4, "target_modules": targets, "max_seq_length": 16,
                        "per_device_train_batch_size": 1})
        assert est.detail["trainable_params"] == measured, targets


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_peft_reaches_only_gpt_oss_attention() -> None:
    """PEFT 0.21 maps no v4 names onto gpt-oss's experts: all-linear adapts q/k/v/o (with their biases kept) and the
    engine counts the same; naming an expert parameter or the router fails in PEFT and is refused by the engine."""
    import peft

    from sizing import SizingError, estimate

    cfg = _config("gpt_oss")
    run = {"model_config": cfg, "method": "lora", "r": 4, "max_seq_length": 16, "per_device_train_batch_size": 1}
    for targets in ("all-linear", ["q_proj", "o_proj"]):
        m = peft.get_peft_model(_model(cfg).to_empty(device="cpu"),
                                peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets))
        assert not any("lora" in n for n, _ in m.named_parameters() if ".mlp." in n)
        measured = sum(p.numel() for p in m.parameters() if p.requires_grad)
        assert estimate({**run, "target_modules": targets}).detail["trainable_params"] == measured, targets
    for targets in (["down_proj"], ["router"]):
        with pytest.raises(ValueError):
            peft.get_peft_model(_model(cfg).to_empty(device="cpu"), peft.LoraConfig(r=4, target_modules=targets))
        with pytest.raises(SizingError) as err:
            estimate({**run, "target_modules": targets})
        assert err.value.code == "target_not_linear"


def test_peft_accepts_a_rank_above_a_layer_width() -> None:
    """An 8-wide router (LitGPT's nn.Linear(n_embd, n_expert)) with r=16: PEFT checks r > 0 only."""
    import peft

    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = torch.nn.Linear(64, 8, bias=False)

    m = peft.get_peft_model(Toy(), peft.LoraConfig(r=16, target_modules=["gate"]))
    assert sum(p.numel() for p in m.parameters() if p.requires_grad) == 16 * (64 + 8)


# Gemma 3's multimodal checkpoint as the Hub stores it: a sparse text_config (Gemma3TextConfig's defaults fill the
# rest) and a SigLIP vision_config; AutoModelForCausalLM builds Gemma3ForConditionalGeneration, vision tower included
GEMMA3_MM = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "mm_tokens_per_image": 16,
             "image_token_index": 500, "boi_token_index": 498, "eoi_token_index": 499,
             "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 160,
                             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                             "vocab_size": 512, "max_position_embeddings": 128},
             "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 48, "intermediate_size": 96,
                               "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 56, "patch_size": 14,
                               "vision_use_head": False}}


def _gemma3_mm() -> torch.nn.Module:
    d = dict(GEMMA3_MM)
    hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(hf).to(torch.bfloat16)


def _gemma3_run(method: str, targets: object, **more: object) -> dict:
    return {"model_config": GEMMA3_MM, "method": method, "r": 4, "lora_alpha": 8, "target_modules": targets,
            "torch_dtype": "bfloat16", "max_seq_length": 16, "per_device_train_batch_size": 1, "bf16": True, **more}


def test_gemma3_multimodal_counts_its_vision_tower() -> None:
    """Every parameter is loaded; full fine-tuning leaves them all trainable, but a text-only step gives the tower's
    no gradient: the engine's gradient bytes are the language model's."""
    from sizing import estimate

    m = _gemma3_mm()
    assert type(m).__name__ == "Gemma3ForConditionalGeneration"
    assert from_hf_config(GEMMA3_MM).all_params == sum(p.numel() for p in m.parameters())
    m.train()
    ids = torch.randint(0, 400, (1, 16), generator=torch.Generator().manual_seed(1))
    m(input_ids=ids, labels=ids).loss.backward()
    est = estimate(_gemma3_run("full", None), backend="cpu")
    assert est.detail["trainable_params"] == sum(p.numel() for p in m.parameters() if p.requires_grad)
    assert est.detail["gradient_bytes"] == sum(p.grad.numel() * p.grad.element_size() for p in m.parameters()
                                               if p.grad is not None)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("targets", ["all-linear", ["q_proj", "v_proj"]], ids=["all-linear", "q-v"])
def test_gemma3_vision_adapters_are_stored_but_never_trained(targets: object) -> None:
    """PEFT's target names reach the SigLIP tower's linears (its q_proj / v_proj too); a text-only step runs no
    forward through the tower, so those adapters get no gradient (and AdamW no state)."""
    import peft

    from sizing import estimate

    m = peft.get_peft_model(_gemma3_mm(), peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets),
                            autocast_adapter_dtype=False)
    lora = {n: p for n, p in m.named_parameters() if "lora_" in n}
    assert any("vision_tower" in n for n in lora)
    ids = torch.randint(0, 400, (1, 16), generator=torch.Generator().manual_seed(1))
    m.train()
    m(input_ids=ids, labels=ids).loss.backward()
    assert all(p.grad is None for n, p in lora.items() if "vision_tower" in n)
    est = estimate(_gemma3_run("lora", targets, adapter_dtype="bfloat16"), backend="cpu")
    assert est.detail["param_bytes"] == sum(p.numel() * p.element_size() for p in m.parameters())
    assert est.detail["trainable_params"] == sum(p.numel() for p in m.parameters() if p.requires_grad)
    assert est.detail["gradient_bytes"] == sum(p.grad.numel() * p.grad.element_size() for p in lora.values()
                                               if p.grad is not None)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # peft 0.21 calls the deprecated is_gradient_checkpointing
def test_gemma3_qlora_quantizes_the_vision_tower() -> None:
    """bitsandbytes' replace_with_bnb_linear converts the tower's nn.Linear modules as the language model's; the
    engine's parameter bytes match the loaded model's."""
    import tempfile

    import bitsandbytes.functional as bnbf
    import peft

    try:  # as test_qlora_moe_bytes_match_bitsandbytes
        w = torch.randn(64, 64, dtype=torch.bfloat16)
        bnbf.dequantize_4bit(*bnbf.quantize_4bit(w, quant_type="nf4", compress_statistics=True))
    except Exception as e:  # pragma: no cover - depends on the install
        pytest.skip(f"bitsandbytes 4-bit does not work on this CPU: {type(e).__name__}: {e}")
    from sizing import estimate

    q = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                        bnb_4bit_compute_dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory(prefix="sizing_physics_") as tmp:
        _gemma3_mm().save_pretrained(tmp)
        m = transformers.AutoModelForCausalLM.from_pretrained(tmp, quantization_config=q, device_map="cpu",
                                                              dtype=torch.bfloat16)
    tower = [type(mod).__name__ for n, mod in m.named_modules() if "vision_tower" in n and "proj" in n.split(".")[-1]]
    assert tower and set(tower) == {"Linear4bit"}
    m = peft.get_peft_model(m, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    measured = sum(p.numel() * p.element_size() for p in {id(p): p for p in m.parameters()}.values())
    run = _gemma3_run("qlora", ["q_proj", "v_proj"], bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                      bnb_4bit_compute_dtype="bfloat16", prepare_model_for_kbit_training=False)
    assert estimate(run).detail["param_bytes"] == measured
