# Architectures and catalog records: target names of other stacks, refusals, catalog loading.
from __future__ import annotations

import re

import pytest

from sizing import SizingError, estimate
from sizing.arch import from_hf_config, target_aliases
from sizing.catalog import models

NEOX = {"model_type": "gpt_neox", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 8,
        "intermediate_size": 8192, "vocab_size": 50304}


def test_litgpt_role_names_on_fused_qkv() -> None:
    # LitGPT lora_query / lora_value on GPT-NeoX both live in the fused query_key_value projection.
    arch = from_hf_config(NEOX)
    assert target_aliases(arch, "query") == ("query_key_value",)
    assert target_aliases(arch, "lora_value") == ("query_key_value",)
    assert target_aliases(arch, "projection") == ("dense",)
    assert target_aliases(arch, "mlp") == ("dense_h_to_4h", "dense_4h_to_h")
    assert target_aliases(arch, "head") == ("lm_head",)
    assert target_aliases(arch, "nonsense") is None


def test_torchtune_feed_forward_names_on_llama() -> None:
    # torchtune FeedForward: w1 gate, w2 down, w3 up; output_proj is the attention output.
    arch = models()["meta-llama/llama-2-7b-hf"]["config"]
    a = from_hf_config(arch)
    assert [target_aliases(a, n) for n in ("w1", "w2", "w3", "output_proj")] == [
        ("gate_proj",), ("down_proj",), ("up_proj",), ("o_proj",)]


def test_phi3_fused_mlp_roles() -> None:
    a = from_hf_config(models()["microsoft/phi-3-mini-4k-instruct"]["config"])
    assert target_aliases(a, "mlp") == ("gate_up_proj", "down_proj")
    assert target_aliases(a, "key") == ("qkv_proj",)


def test_role_names_accepted_by_litgpt_not_by_transformers() -> None:
    run = {"model": "meta-llama/Llama-2-7b-hf", "method": "lora", "r": 8, "target_modules": ["query", "value"],
           "max_seq_length": 256, "per_device_train_batch_size": 1}
    est = estimate({**run, "framework": "litgpt"})
    assert est.detail["trainable_params"] == 32 * 8 * (4096 * 4)  # q and v: r * (in + out) each, 32 layers
    with pytest.raises(SizingError) as err:  # PEFT matches module names literally: no 'query' in Llama
        estimate({**run, "framework": "transformers"})
    assert err.value.code == "unknown_target_module"


# Configs copied from shared/validation/model_configs (Qwen-7B-Chat, chatglm3-6b, Baichuan2-7B-Chat, phi-2 in
# its phi-msft form, santacoder). Total parameters summed by hand from each modeling file's module shapes
# (weights + biases + norms + embeddings), for the configs below: published sizes agree (Qwen-7B 7.72 B,
# ChatGLM3-6B 6.24 B, Baichuan2-7B 7.51 B, phi-2 2.78 B (the Hub page), SantaCoder 1.1 B without its position table).
QWEN1_7B = {"architectures": ["QWenLMHeadModel"], "model_type": "qwen", "hidden_size": 4096, "intermediate_size": 22016,
            "kv_channels": 128, "num_attention_heads": 32, "num_hidden_layers": 32, "no_bias": True,
            "seq_length": 8192, "max_position_embeddings": 32768, "tie_word_embeddings": False, "vocab_size": 151936}
CHATGLM3 = {"architectures": ["ChatGLMModel"], "model_type": "chatglm", "add_bias_linear": False, "add_qkv_bias": True,
            "ffn_hidden_size": 13696, "hidden_size": 4096, "kv_channels": 128, "multi_query_attention": True,
            "multi_query_group_num": 2, "num_attention_heads": 32, "num_layers": 28, "padded_vocab_size": 65024,
            "rmsnorm": True, "seq_length": 8192, "tie_word_embeddings": False}
BAICHUAN2_7B = {"architectures": ["BaichuanForCausalLM"], "model_type": "baichuan", "hidden_size": 4096,
                "intermediate_size": 11008, "max_position_embeddings": 4096, "num_attention_heads": 32,
                "num_hidden_layers": 32, "tie_word_embeddings": False, "vocab_size": 125696}
PHI2_MSFT = {"architectures": ["PhiForCausalLM"], "model_type": "phi-msft", "n_embd": 2560, "n_head": 32,
             "n_head_kv": None, "n_inner": None, "n_layer": 32, "n_positions": 2048, "rotary_dim": 32,
             "tie_word_embeddings": False, "vocab_size": 51200}
SANTACODER = {"architectures": ["GPTBigCodeForCausalLM"], "n_embd": 2048, "n_head": 16, "n_inner": 8192, "n_layer": 24,
              "vocab_size": 49280, "model_type": "gpt_bigcode"}


@pytest.mark.parametrize(("cfg", "total"), [
    (QWEN1_7B, 7_721_324_544), (CHATGLM3, 6_243_584_000), (BAICHUAN2_7B, 7_505_973_248),
    (PHI2_MSFT, 2_779_683_840), (SANTACODER, 1_120_692_224),
])
def test_legacy_families_parameter_counts(cfg: dict[str, object], total: int) -> None:
    assert from_hf_config(cfg).total_params == total


def test_gpt_bigcode_is_multi_query_with_learned_positions() -> None:
    a = from_hf_config({**SANTACODER, "n_positions": 2048})
    assert (a.kv_heads, a.linears[0].name, a.linears[0].out_features) == (1, "c_attn", 2048 + 2 * 128)
    assert a.total_params == 1_120_692_224 + 2048 * 2048  # wpe [n_positions, n_embd]
    assert a.tied_embeddings and a.default_lora_targets == ("c_attn",)


def test_family_without_peft_default_needs_target_modules() -> None:
    run = {"model_config": PHI2_MSFT, "method": "lora", "max_seq_length": 256, "per_device_train_batch_size": 1}
    with pytest.raises(SizingError) as err:
        estimate(run)
    assert (err.value.code, err.value.field) == ("target_modules_required", "target_modules")
    est = estimate({**run, "target_modules": ["Wqkv", "out_proj"], "r": 8})
    assert est.detail["trainable_params"] == 32 * 8 * ((2560 + 7680) + (2560 + 2560))


def test_encoder_decoder_refused_by_name() -> None:
    t0 = {"architectures": ["T5ForConditionalGeneration"], "d_ff": 5120, "d_model": 2048, "num_heads": 32,
          "num_layers": 24, "vocab_size": 32128}  # bigscience/T0_3B as stored in shared/ (no model_type)
    with pytest.raises(SizingError) as err:
        from_hf_config(t0)
    assert (err.value.code, err.value.field) == ("encoder_decoder_unsupported", "model_config.model_type")


@pytest.mark.parametrize(("field", "value"), [("num_hidden_layers", 10**9), ("hidden_size", 10**12),
                                              ("vocab_size", 10**10)])
def test_absurd_sizes_refused(field: str, value: int) -> None:
    cfg = {**BAICHUAN2_7B, "model_type": "llama", field: value}
    with pytest.raises(SizingError) as err:
        from_hf_config(cfg)
    assert (err.value.code, err.value.field) == ("model_config_invalid", f"model_config.{field}")


# Qwen/Qwen-7B-Chat-Int4's quantization_config (shared/validation/model_configs).
GPTQ_QC = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "static_groups": False, "sym": True,
           "true_sequential": True, "quant_method": "gptq"}


def test_gptq_linear_bytes_by_hand() -> None:
    from sizing.memory.weights import bytes_gptq

    # c_attn 4096 -> 12288 at 4 bits, group 128: qweight 4096*12288/2; 32 groups: qzeros 32*12288/2,
    # scales fp16 2*32*12288; g_idx int32 4*4096.
    assert bytes_gptq(4096, 12288, 4, 128, awq=False) == (25_165_824, 196_608 + 786_432 + 16_384)
    assert bytes_gptq(4096, 12288, 4, 128, awq=True) == (25_165_824, 196_608 + 786_432)
    assert bytes_gptq(4096, 4096, 4, -1, awq=False) == (8_388_608, 4096 // 2 + 2 * 4096 + 4 * 4096)


def test_gptq_checkpoint_accepted_for_lora_refused_otherwise() -> None:
    cfg = {**QWEN1_7B, "quantization_config": GPTQ_QC}
    run = {"model_config": cfg, "method": "lora", "target_modules": ["c_attn"], "r": 8, "max_seq_length": 256,
           "per_device_train_batch_size": 1, "torch_dtype": "float16"}
    est = estimate(run)
    plain = estimate({**run, "model_config": QWEN1_7B})
    # the int4 body is about a quarter of the fp16 body: embeddings and lm_head (2 x 151936 x 4096 fp16) stay
    assert est.detail["param_bytes"] < 0.45 * plain.detail["param_bytes"]
    for method in ("qlora", "full"):
        with pytest.raises(SizingError) as err:
            estimate({**run, "method": method})
        assert (err.value.code, err.value.field) == ("conflict", "method")


def test_unknown_quantization_format_refused() -> None:
    aqlm = {"quant_method": "aqlm", "nbits_per_codebook": 16}
    cfg = {**BAICHUAN2_7B, "model_type": "llama", "quantization_config": aqlm}
    with pytest.raises(SizingError) as err:
        from_hf_config(cfg)
    assert (err.value.code, err.value.field) == ("unsupported_quantization",
                                                 "model_config.quantization_config.quant_method")


MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
           "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 32000, "max_position_embeddings": 32768}


def test_mixtral_router_rank_above_width_is_legal() -> None:
    # LitGPT's router is nn.Linear(n_embd, n_expert): 8 wide; PEFT accepts r=16 on it (only r > 0 is checked).
    est = estimate({"model_config": MIXTRAL, "framework": "litgpt", "method": "lora", "r": 16,
                    "target_modules": ["gate", "w1"], "max_seq_length": 128, "per_device_train_batch_size": 1})
    assert est.detail["trainable_params"] == 32 * 16 * ((4096 + 8) + 8 * (4096 + 14336))


def test_transformers5_moe_targets_as_peft_converts_them() -> None:
    # PEFT 0.21 + transformers 5 (utils/transformers_weight_conversion.py): all-linear adds the router and the
    # fused experts; w1 + w3 are one gate_up_proj adapted at rank 2r: lora_A [E*2r, h], lora_B [2I, E*2r].
    run = {"model_config": MIXTRAL, "method": "lora", "r": 8, "max_seq_length": 128, "per_device_train_batch_size": 1}
    est = estimate({**run, "target_modules": "all-linear"})
    attn = 8 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096))
    router = 8 * (4096 + 8)
    gate_up = 8 * 16 * (4096 + 2 * 14336)
    down = 8 * 8 * (14336 + 4096)
    assert est.detail["trainable_params"] == 32 * (attn + router + gate_up + down)
    with pytest.raises(SizingError) as err:  # w1 without w3: PEFT refuses to split the fused parameter
        estimate({**run, "target_modules": ["w1"]})
    assert err.value.code == "target_not_linear"
    # bitsandbytes converts nn.Linear only: QLoRA leaves the 45.1 B expert parameters in bf16
    q = estimate({**run, "method": "qlora", "target_modules": ["q_proj"]}).detail["param_bytes"]
    assert q > 2 * 32 * 8 * 3 * 4096 * 14336


def test_catalog_records_are_frozen_and_strict() -> None:
    import dataclasses

    from sizing.catalog import _model_record, model_records

    rec = model_records()[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        rec.config["hidden_size"] = 1  # type: ignore[index]
    assert rec["config"] is rec.config and rec.get("missing") == rec.missing  # the dict-style shim
    good = {"id": "a/b", "name": "B", "aliases": [], "source": {"url": "u", "kind": "k", "note": ""}, "config": {}}
    _model_record(good)
    for bad in ({**good, "extra": 1}, {k: v for k, v in good.items() if k != "name"},
                {**good, "source": {"url": "u", "kind": "k"}}):
        with pytest.raises(ValueError):
            _model_record(bad)


def test_catalog_notes_carry_no_research_artefacts() -> None:
    import re

    from sizing.catalog import model_records

    for rec in model_records():
        text = rec.source.note + " " + rec.source.url
        assert not re.search(r"/work/|find_string|the index|not identifiable", text), rec.id
        assert rec.source.url.startswith("https://"), rec.id


def test_config_without_model_type_matched_by_shape() -> None:
    from sizing.catalog import resolve_architecture

    base = dict(models()["meta-llama/llama-2-7b-hf"].config)
    bare = {k: v for k, v in base.items() if k not in ("model_type", "architectures")}
    arch, name = resolve_architecture(None, bare)
    assert arch.model_type == "llama" and "from the shape of meta-llama/Llama-2-7b-hf" in name
    assert arch.total_params == from_hf_config(base).total_params
    with pytest.raises(SizingError) as err:
        resolve_architecture(None, {**bare, "hidden_size": 4000})  # no catalog model has this shape
    assert (err.value.code, err.value.field) == ("unsupported_architecture", "model_config.model_type")


def test_catalog_gptq_checkpoints_are_sized_as_gptq() -> None:
    run = {"method": "lora", "max_seq_length": 256, "per_device_train_batch_size": 1}
    gptq = estimate({**run, "model": "TheBloke/Mistral-7B-v0.1-GPTQ"}).detail["param_bytes"]
    bf16 = estimate({**run, "model": "mistralai/Mistral-7B-v0.1", "torch_dtype": "bfloat16"}).detail["param_bytes"]
    assert gptq < 0.35 * bf16


def test_resolve_without_model_or_config_is_a_refusal_not_an_assert() -> None:
    from sizing.catalog import resolve_architecture

    with pytest.raises(SizingError) as err:
        resolve_architecture(None, None)
    assert (err.value.code, err.value.field) == ("missing_field", "model")


def test_internlm2_remote_code_shapes_by_hand() -> None:
    # modeling_internlm2.py (remote code, not in transformers): wqkv [h -> (nh + 2 nkv) d], wo [h -> h], w1/w3 [h -> I],
    # w2 [I -> h], attention_norm + ffn_norm (RMSNorm weights), norm, tok_embeddings and an untied output head.
    cfg = {"model_type": "internlm2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 160, "vocab_size": 512, "bias": False}
    h, inter, vocab, layers, kv_width = 64, 160, 512, 2, 2 * 16
    arch = from_hf_config(cfg)
    assert arch.total_params == 2 * vocab * h + h + layers * (h * (h + 2 * kv_width) + h * h + 3 * h * inter + 2 * h)
    assert arch.linear_names() == ("wqkv", "wo", "w1", "w3", "w2") and arch.default_lora_targets == ()
    assert [arch.role_targets(r) for r in ("q", "gate", "up", "down")] == [("wqkv",), ("w1",), ("w3",), ("w2",)]
    assert arch.eager_only and not from_hf_config({**cfg, "attn_implementation": "flash_attention_2"}).eager_only


# Records whose config.json names no dtype: dtype="auto" loads the checkpoint's own (checkpoint_dtype).
AUTO = {"method": "lora", "framework": "transformers", "torch_dtype": "auto", "max_seq_length": 128,
        "per_device_train_batch_size": 1}


def test_gpt2_auto_loads_its_float32_checkpoint() -> None:
    # huggingface.co/openai-community/gpt2 at 75e09b4: model.safetensors 548 MB, pytorch_model.bin pickles FloatStorage.
    # GPT-2 small by hand: wte 50257*768 + wpe 1024*768 + ln_f 1536 + 12 blocks of (ln_1, ln_2: 2*1536; c_attn
    # 768*2304 + 2304; attn c_proj 768*768 + 768; c_fc 768*3072 + 3072; mlp c_proj 3072*768 + 768) = 124,439,808.
    # LoRA r=8 on c_attn (PEFT's gpt2 default): 12 * 8 * (768 + 2304) = 294,912 parameters, kept in fp32 by PEFT.
    est = estimate({**AUTO, "model": "openai-community/gpt2"})
    assert est.regime.load_dtype == "float32"
    assert est.detail["param_bytes"] == 4 * 124_439_808 + 4 * 294_912


def test_starcoder2_3b_auto_loads_float32() -> None:
    # huggingface.co/bigcode/starcoder2-3b at 444cd6f: its one weight file, model.safetensors, is 12.1 GB.
    est = estimate({**AUTO, "model": "bigcode/starcoder2-3b", "target_modules": ["q_proj", "v_proj"]})
    assert est.regime.load_dtype == "float32"
    assert abs(est.detail["param_bytes"] - 12.1e9) <= 0.01 * 12.1e9


@pytest.mark.parametrize(("model_id", "dtype", "gb"), [
    ("facebook/opt-1.3b", "float16", 2.63),  # pytorch_model.bin 2.63 GB, torch.HalfStorage (tree ff3875e)
    ("tiiuae/falcon-rw-1b", "bfloat16", 2.62),  # pytorch_model.bin 2.62 GB, torch.BFloat16Storage (tree acfc7b0)
])
def test_16_bit_checkpoints_keep_2_bytes_a_weight(model_id: str, dtype: str, gb: float) -> None:
    est = estimate({**AUTO, "model": model_id})
    assert est.regime.load_dtype == dtype
    assert abs(est.detail["param_bytes"] - gb * 1e9) <= 0.01 * gb * 1e9


def test_bloomz_7b1_auto_loads_its_float16_checkpoint() -> None:
    # huggingface.co/bigscience/bloomz-7b1 at 94748a2: pytorch_model.bin, 14.1 GB, pickles torch.HalfStorage only.
    # BLOOM 7b1 by hand (h=4096, 30 layers, tied vocab 250880): embedding 250880*4096 + its layernorm 8192 + ln_f
    # 8192 + 30 blocks of (2 layernorms 2*8192; query_key_value 4096*12288 + 12288; dense 4096*4096 + 4096;
    # dense_h_to_4h 4096*16384 + 16384; dense_4h_to_h 16384*4096 + 4096) = 7,069,016,064 (the file's 14.1 GB / 2).
    # LoRA r=8 on query_key_value (PEFT's bloom default): 30 * 8 * (4096 + 12288) = 3,932,160, kept in fp32.
    est = estimate({**AUTO, "model": "bigscience/bloomz-7b1"})
    assert est.regime.load_dtype == "float16"
    assert est.detail["param_bytes"] == 2 * 7_069_016_064 + 4 * 3_932_160


def test_llama_2_auto_loads_its_float16_checkpoint() -> None:
    # The Hub's config.json of Llama-2-7b-hf says "torch_dtype": "float16" (the copy in scaleapi/llm-engine's tests,
    # models.json). By hand (h=4096, 32 layers, FFN 11008, untied vocab 32000): 2 * 32000*4096 + 32 * (4*4096^2 +
    # 3*4096*11008 + 2*4096) + 4096 = 6,738,415,616 parameters, 2 bytes each; LoRA r=8 on q_proj and v_proj (PEFT's
    # llama default): 32 * 2 * 8 * (4096 + 4096) = 4,194,304, kept in fp32.
    est = estimate({**AUTO, "model": "meta-llama/Llama-2-7b-hf"})
    assert est.regime.load_dtype == "float16"
    assert est.detail["param_bytes"] == 2 * 6_738_415_616 + 4 * 4_194_304


def test_checkpoint_dtypes_cite_the_hub() -> None:
    # the Hub's own files, or a commit-pinned copy of its config.json on GitHub
    pinned = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/")
    recs = [r for r in models().values() if r.checkpoint_dtype is not None]
    sources = [r.checkpoint_dtype_source for r in recs]
    assert sources and all("https://huggingface.co/" in s or pinned.match(s) for s in sources)
