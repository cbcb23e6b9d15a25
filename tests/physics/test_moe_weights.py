"""A mixture of experts on the Hugging Face stack, measured on CPU with a tiny Mixtral: transformers 5 keeps the
experts as 3-D nn.Parameters (gate_up_proj, down_proj) and the router as a bare weight, so bitsandbytes'
replace_with_bnb_linear leaves them in the load dtype (bitsandbytes issue #1849) and prepare_model_for_kbit_training
up-casts them to fp32 with the norms; their grouped_mm casts its input to the weights' dtype (no bf16 copy of an fp32
expert), and PEFT 0.21 adapts them through ParamWrapper, whose merged weight each forward keeps for backward and which
refuses lora_dropout. The engine's parameter bytes, per-layer constant saved bytes and warning must follow."""

from __future__ import annotations

import tempfile
import warnings

import pytest

for _mod in ("torch", "transformers", "peft", "bitsandbytes"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import torch  # noqa: E402
import transformers  # noqa: E402

from sizing import load_config  # noqa: E402
from sizing.catalog import resolve_architecture  # noqa: E402
from sizing.step import step_memory  # noqa: E402

pytestmark = pytest.mark.physics

MIXTRAL = dict(model_type="mixtral", vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
               max_position_embeddings=256, tie_word_embeddings=False)
# Qwen3-MoE: the same fused Qwen3MoeExperts, its own expert width (moe_intermediate_size) and q/k norms
QWEN3_MOE = dict(model_type="qwen3_moe", vocab_size=256, hidden_size=128, intermediate_size=256,
                 moe_intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=32, num_experts=8, num_experts_per_tok=2, max_position_embeddings=256,
                 tie_word_embeddings=False, norm_topk_prob=True)
MODELS = {"mixtral": MIXTRAL, "qwen3_moe": QWEN3_MOE}


def _load(prep: bool, model: str = "mixtral") -> torch.nn.Module:
    """The tiny Mixtral in NF4 + double quant, loaded as transformers does it; prepared for k-bit training."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    torch.manual_seed(0)
    config = dict(MODELS[model])
    hf = transformers.AutoConfig.for_model(config.pop("model_type"), **config)
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                           bnb_4bit_compute_dtype=torch.bfloat16)
    with warnings.catch_warnings(), tempfile.TemporaryDirectory(prefix="sizing_physics_") as d:
        warnings.simplefilter("ignore")
        AutoModelForCausalLM.from_config(hf).to(torch.bfloat16).save_pretrained(d)
        m = AutoModelForCausalLM.from_pretrained(d, quantization_config=q, device_map="cpu", dtype=torch.bfloat16)
        if prep:
            from peft import prepare_model_for_kbit_training

            m = prepare_model_for_kbit_training(m, use_gradient_checkpointing=False)
    return m


def _lora(m: torch.nn.Module) -> torch.nn.Module:
    """PEFT's all-linear LoRA at r=8, fp32 adapters (autocast_adapter_dtype, the default): since PEFT 0.17 it also
    wraps the router and the fused expert parameters."""
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PEFT's note on its rank_pattern for the fused gate_up_proj
        return get_peft_model(m, LoraConfig(r=8, target_modules="all-linear"))


def _detail(framework: str, prep: bool, adapter_dtype: str = "float32", model: str = "mixtral") -> dict[str, int]:
    cfg = load_config({"model_config": dict(MODELS[model]), "method": "qlora", "framework": framework, "r": 8,
                       "target_modules": "all-linear", "adapter_dtype": adapter_dtype, "torch_dtype": "bfloat16",
                       "bf16": True, "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                       "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
                       "prepare_model_for_kbit_training": prep, "max_seq_length": 64,
                       "per_device_train_batch_size": 1})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return dict(step_memory(cfg, arch, None).detail)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("framework", ["transformers", "custom", "trl"])
@pytest.mark.parametrize("prep", [False, True], ids=["bf16_experts", "prepared_fp32_experts"])
def test_fused_experts_stay_floating(framework: str, prep: bool, model: str) -> None:
    m = _lora(_load(prep, model))
    measured = sum(p.numel() * p.element_size() for p in m.parameters())
    kinds = {(type(p).__name__, str(p.dtype)) for n, p in m.named_parameters() if "experts" in n and "lora" not in n}
    assert kinds == {("Parameter", "torch.float32" if prep else "torch.bfloat16")}, kinds  # never Params4bit
    engine = _detail(framework, prep, model=model)["param_bytes"]
    assert engine == measured, f"{framework}: parameters {measured:,} B measured, engine {engine:,} B"


@pytest.mark.parametrize("prep", [False, True], ids=["bf16_experts", "prepared_fp32_experts"])
def test_layer_saved_bytes(prep: bool) -> None:
    """One decoder layer with all-linear LoRA (bf16 adapters: no autocast copy of theirs) under bf16 autocast, run
    at two token counts: the saved bytes that do not grow with the tokens are the expert weights with lora_B @ lora_A
    added (PEFT's ParamWrapper parametrization, kept by grouped_mm for backward) in the experts' dtype, and with the
    preparation the router's bf16 copy (F.linear is autocast); grouped_mm makes no bf16 copy of fp32 experts."""
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_peft_model(_load(prep), LoraConfig(r=8, target_modules="all-linear"), autocast_adapter_dtype=False)
    base = model.get_base_model().model
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def saved(tokens: int) -> int:
        x = torch.randn(1, tokens, MIXTRAL["hidden_size"], dtype=torch.float32 if prep else torch.bfloat16,
                        requires_grad=True)
        pos = torch.arange(tokens)[None]
        storages: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            at = t.untyped_storage().data_ptr()
            if at not in params and at != x.untyped_storage().data_ptr():  # a weight or its view: no new bytes
                storages[at] = t.untyped_storage().nbytes()
            return t

        with torch.autocast("cpu", torch.bfloat16):
            rope = base.rotary_emb(x, pos)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", torch.bfloat16):
            base.layers[0](x, position_embeddings=rope, attention_mask=None, position_ids=pos)
        return sum(storages.values())

    small, large = 64, 192  # the router sends these to every expert (random weights, many tokens)
    s1, s2 = saved(small), saved(large)
    constant = (large * s1 - small * s2) // (large - small)
    detail = _detail("transformers", prep, "bfloat16")
    engine = detail["layer_constant_bytes"]
    # the router's bookkeeping (top-k indices, grouped_mm's per-expert offsets) is a few hundred bytes at this size
    assert abs(engine - constant) <= 0.005 * constant, f"constant saved bytes {constant:,} measured, engine {engine:,}"
    # per token: each route keeps gate_up's output, act(gate), their product, the gathered input and the expert's
    # output in the experts' dtype; the router's indices and sort order (int64, ~0.1 KB a token) are not modelled
    per_token, engine_per_token = (s2 - s1) / (large - small), detail["layer_saved_bytes_per_token"]
    assert abs(engine_per_token - per_token) <= 0.06 * per_token, (per_token, engine_per_token)


@pytest.mark.parametrize("dropout", [0.0, 0.05])
def test_dropout_on_fused_experts_is_refused_by_peft_and_warned(dropout: float) -> None:
    """PEFT 0.21's ParamWrapper (its LoRA on a fused expert parameter) refuses lora_dropout != 0: get_peft_model
    raises ValueError for all-linear with dropout on a Transformers-5 MoE. The engine says so exactly then."""
    from peft import LoraConfig, get_peft_model

    from sizing import estimate

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            get_peft_model(_load(False), LoraConfig(r=8, target_modules="all-linear", lora_dropout=dropout))
        refused = False
    except ValueError:
        refused = True
    cfg = {"model_config": dict(MIXTRAL), "method": "lora", "r": 8, "target_modules": "all-linear",
           "lora_dropout": dropout, "torch_dtype": "bfloat16", "max_seq_length": 64, "per_device_train_batch_size": 1}
    warned = "moe_experts_dropout" in {w["code"] for w in estimate(cfg).warnings}
    assert (refused, warned) == (dropout > 0, dropout > 0)


# Few tokens and wide experts: the experts' weight gradients are most of a layer's backward; many tokens and narrow
# experts: the routed tokens' gradients (the top-k sum, the inverse sort, the fp32 routing weights' multiply) are most
# of it
WIDE = {**MIXTRAL, "vocab_size": 64, "intermediate_size": 512, "num_local_experts": 8, "num_hidden_layers": 4}
NARROW = {**MIXTRAL, "vocab_size": 64, "num_hidden_layers": 4}
# (config, batch, sequence, tolerance). Measured: full +0.2 / +0.4 %, LoRA -2.1 / +0.4 %, LoRA checkpointed -0.7 /
# +3.7 % (wide / narrow); the wide LoRA case was +12 % while the fused gate_up's LoRA gradients came before its merged
# weight's gradient and at rank r (PEFT makes them after it, at rank 2r)
SHAPES = [(WIDE, 1, 16, 0.05), (NARROW, 2, 256, 0.05)]
# gpt-oss: eager attention with sinks (the scores, seq + 1 wide, dominate the narrow shape), biased experts with the
# clamped SwiGLU; checkpointed, the recomputation's own high-water mark (the gathered gate_up bias) is the layer's.
# Measured when added: full +0.1 / +0.0 %, LoRA +0.0 / +0.0 %, LoRA checkpointed -0.2 / -0.2 %, full checkpointed
# +0.1 / +1.4 % (wide / narrow); before its own ops were walked: -15 .. +68 %
GPT_OSS = {"model_type": "gpt_oss", "vocab_size": 64, "hidden_size": 128, "intermediate_size": 256,
           "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
           "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 256,
           "tie_word_embeddings": False, "sliding_window": 128}
SHAPES += [({**GPT_OSS, "intermediate_size": 512, "num_local_experts": 8}, 1, 16, 0.05), (GPT_OSS, 2, 256, 0.05)]


@pytest.mark.parametrize("shape", SHAPES, ids=["wide-16", "narrow-512", "gpt_oss-wide-16", "gpt_oss-narrow-512"])
@pytest.mark.parametrize(("method", "ckpt"), [("full", False), ("lora", False), ("lora", True), ("full", True)])
def test_layer_backward_holds_the_experts_weight_gradients(method: str, ckpt: bool, shape: tuple) -> None:
    """Decoder layer 2's backward: the routed output's gradient (fp32, as the routing weights), then full
    fine-tuning makes each expert weight's gradient; PEFT's ParamWrapper makes the merged weight's (gate_up's 3-D
    tensor whole), which its parametrization turns into lora_A's and lora_B's before the next projection's, and the
    merged weight saved for it goes with its node."""
    import harness

    base, batch, seq, tol = shape
    config = dict(base)
    torch.manual_seed(0)
    model_type = config.pop("model_type")
    attn = harness.ATTENTION.get(model_type, "sdpa")  # gpt-oss: transformers' default, eager (it has no sdpa)
    m = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(model_type, **config),
                                                      attn_implementation=attn)
    m = m.to(torch.bfloat16)
    if ckpt:
        m.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"),
                               autocast_adapter_dtype=False)
        if ckpt:
            m.enable_input_require_grads()
    ids = torch.randint(0, base["vocab_size"], (batch, seq), generator=torch.Generator().manual_seed(1))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            measured = harness.layer_backward_peak(m, 2, {"input_ids": ids, "labels": ids.clone()}, autocast=True)
    finally:
        torch.set_num_threads(threads)
    cfg = {"model_config": dict(base), "method": method, "torch_dtype": "bfloat16", "bf16": True,
           "max_seq_length": seq, "per_device_train_batch_size": batch, "packing": True, "gradient_checkpointing": ckpt,
           "attn_implementation": "sdpa"}
    if method == "lora":
        cfg.update({"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear",
                    "adapter_dtype": "bfloat16"})
    engine = harness.engine_layer_backward(cfg)
    assert abs(engine - measured) <= tol * measured, (measured, engine)
