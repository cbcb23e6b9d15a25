"""The generic CSV-row mapping (scripts/validate_rows.py) on literal rows copied from validation/measurements.csv;
each expected field is read off the row's own text by hand."""

from __future__ import annotations

import csv
import io

import pytest

import row_columns as rc
import validate_rows as vr
from sizing import estimate

HEADER = ("row_id,source_id,model,method,method_detail,base_weight_dtype,quantization,double_quant,lora_rank,"
          "lora_alpha,lora_target_modules,lora_dropout,seq_len,seq_len_mode,micro_batch_size,grad_accum_steps,"
          "gradient_checkpointing,optimizer,mixed_precision,attention_impl,other_memory_settings,framework,"
          "framework_version,num_gpus,sharding,gpu_model,metric_kind,peak_memory_reported,peak_memory_unit,"
          "unit_basis,peak_memory_gib,usable_for_scoring")
# R063 (LitGPT QLoRA), R133 (Answer.AI FSDP QLoRA), R116 (torchtune 405B, GB printed but GiB logged),
# R064 (out of memory), R008 (AdaLoRA), as they stand in validation/measurements.csv (columns trimmed).
ROWS = HEADER + "\n" + "\n".join([
    'R063,S03_litgpt_config_hub,meta-llama/Llama-2-7b-hf,qlora,QLoRA (litgpt finetune_lora --quantize bnb.nf4),'
    '"nf4 4-bit linear weights, rest bf16",bnb nf4 (4-bit),"no (bnb.nf4, not nf4-dq)",32,16,"query,value",0.05,512,'
    '"max_seq_length=512 truncation; Alpaca2k samples padded to longest in batch; longest sample placed first",2,'
    'global_batch_size/micro_batch_size (see yaml),no (single device),bnb.optim.PagedAdamW (32-bit paged),'
    'bf16-true,torch SDPA (litgpt CausalSelfAttention),litgpt chunked lm_head/cross-entropy,LitGPT,'
    'commit 5895df100 (table row last changed),1,none,NVIDIA A10G (24 GB),'
    '"torch.cuda.max_memory_allocated() (\'Memory used\' printed at end of run, incl. validation/generation)",'
    '13.68,GB,decimal 1e9 (litgpt prints /1e9),12.74,yes',
    'R133,S11_answerai_fsdp_qlora,meta-llama/Llama-2-7b-hf,qlora,QLoRA via bnb Linear4bit + HF PEFT under FSDP,'
    '"nf4 4-bit (bnb Linear4bit, quant_storage bf16), rest bf16",bnb nf4 (4-bit),'
    '"bnb Linear4bit default compress_statistics=True (yes, not set explicitly)",64,16,'
    '"k_proj,q_proj,v_proj,up_proj,down_proj,gate_proj (no o_proj)",0.1,2048,'
    'fixed (dummy dataset truncated to context_length),10 (per GPU),1,"yes (reentrant, per template command)",'
    '"torch.optim.AdamW (non-fused, lr 1e-5, wd 0.1)","precision=bf16 (pure bf16, no FSDP MixedPrecision policy)",'
    'sdpa,no CPU offload; low_memory loading,'
    'Answer.AI fsdp_qlora train.py (HF transformers + PEFT + bitsandbytes + PyTorch FSDP),'
    'Feb-Mar 2024 (torch ~2.2),2,FSDP FULL_SHARD,RTX 3090 (24 GB),'
    '"torch.cuda.max_memory_reserved() from start of training through step 4 (text: \'reported peak reserved '
    'memory\')",20.97,GiB,binary GiB (code divides by 2**30),20.97,yes',
    'R116,S08_torchtune_readme_2024_09,meta-llama/Llama-3.1-405B-Instruct,qlora,QLoRA,'
    '"NF4 (torchao) linear weights, rest bf16",NF4 (torchao),yes (torchao NF4 scaler quantization),16,32,'
    '"q_proj,v_proj,k_proj,output_proj + MLP",0.0 (config),2048,packed to 2048 (every sample exactly 2048 tokens),'
    '2,1 (no gradient accumulation),yes,torch.optim.AdamW fused,'
    'none: dtype=bf16 for all params (incl. LoRA) and optimizer states,'
    'torchtune _sdpa_or_flex_attention (flex attention for packed data when available),'
    'torch.compile enabled; CEWithChunkedOutputLoss (except 405B config uses nn.CrossEntropyLoss),torchtune,'
    'torchtune @30b8519e8 (2024-09-24),8,FSDP FULL_SHARD,A100,'
    'torchtune \'Peak Memory per GPU\' (alloc/reserved/active not stated),44.8,GB,'
    '"printed \'GB\' (ambiguous; torchtune logged GiB at this commit)",,caution',
    'R064,S03_litgpt_config_hub,meta-llama/Llama-2-7b-hf,full,full fine-tuning (litgpt finetune_full),bf16,none,,,,,,'
    '512,"max_seq_length=512 truncation; Alpaca2k samples padded to longest in batch; longest sample placed first",4,'
    'global_batch_size/micro_batch_size (see yaml),FSDP activation checkpointing on Block if devices>1,'
    '"torch.optim.AdamW (betas 0.9,0.95) in bf16",bf16-true,torch SDPA (litgpt CausalSelfAttention),'
    'litgpt chunked lm_head/cross-entropy,LitGPT,commit 5895df100 (table row last changed),'
    'table: 4; yaml devices: 4,FSDP (litgpt uses FSDPStrategy when devices>1),NVIDIA A10G (24 GB),'
    '"torch.cuda.max_memory_allocated() (\'Memory used\' printed at end of run, incl. validation/generation)",,GB,'
    'decimal 1e9 (litgpt prints /1e9),,oom',
    'R008,S01_peft_metamathqa,meta-llama/Llama-3.2-3B,other,AdaLoRA,"bf16 (pure bf16 weights, use_amp=false)",none,,'
    ',,,,768,max (truncation),4,1,no,torch.optim.AdamW,"none (model loaded in bf16, no autocast)",'
    'transformers default (attn_implementation=None -> sdpa),,custom PyTorch training loop + HF PEFT,'
    'torch 2.13.0+cu130,1,none,NVIDIA L40S,torch.cuda.max_memory_reserved(),1,bytes,bytes (exact),20.1,caution',
])


def rows() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in csv.DictReader(io.StringIO(ROWS))}


def test_litgpt_qlora_row() -> None:
    case = vr.row_case(rows()["R063"])
    c = case.config
    assert (c["model"], c["method"], c["framework"]) == ("meta-llama/Llama-2-7b-hf", "qlora", "litgpt")
    assert (c["load_in_4bit"], c["bnb_4bit_quant_type"], c["bnb_4bit_use_double_quant"]) == (True, "nf4", False)
    assert (c["r"], c["lora_alpha"], c["lora_dropout"], c["target_modules"]) == (32, 16.0, 0.05, ["query", "value"])
    assert (c["max_seq_length"], c["packing"], c["per_device_train_batch_size"]) == (512, False, 2)
    assert (c["gradient_checkpointing"], c["optim"], c["bf16"], c["torch_dtype"]) == (
        False, "paged_adamw_32bit", False, "bfloat16")
    assert (c["loss_implementation"], c["gpu"], c["num_gpus"]) == ("chunked_ce", "A10G-24GB", 1)
    # "global_batch_size/micro_batch_size (see yaml)" and no config_hub file named in this trimmed row: LitGPT's
    # finetune default TrainArgs(global_batch_size=16) // 1 device // 2 = 8 micro-batches per step
    assert c["gradient_accumulation_steps"] == 8
    # the row as published names config_hub/finetune/llama-2-7b/qlora.yaml: global_batch_size 8 there
    named = {**rows()["R063"], "source_locator": "config https://github.com/Lightning-AI/litgpt/blob/5895df1/"
             "config_hub/finetune/llama-2-7b/qlora.yaml"}
    assert vr.row_case(named).config["gradient_accumulation_steps"] == 4
    assert (case.tier, case.metric, case.measured_gib, case.source) == ("allocated", "allocated", 12.74, "S03")
    est = estimate(c)  # the engine accepts LitGPT's role names on Llama's separate q/v projections
    assert est.detail["trainable_params"] == 32 * 32 * (4096 + 4096 + 4096 + 4096)


def test_answerai_fsdp_qlora_row() -> None:
    c = vr.row_case(rows()["R133"]).config
    assert (c["framework"], c["num_gpus"], c["parallelism"]) == ("custom", 2, "fsdp")
    assert "cpu_offload" not in c  # "no CPU offload"
    assert (c["bnb_4bit_quant_storage"], c["bnb_4bit_use_double_quant"]) == ("bfloat16", True)
    # "(no o_proj)" takes o_proj out, it does not add it
    assert c["target_modules"] == ["k_proj", "q_proj", "v_proj", "up_proj", "down_proj", "gate_proj"]
    assert (c["packing"], c["per_device_train_batch_size"], c["optim"], c["bf16"]) == (True, 10, "adamw_torch", False)
    assert c["prepare_model_for_kbit_training"] is False  # train.py does not call it and the row does not say so
    assert c["gpu"] == "RTX-3090-24GB"


def test_torchtune_row_version_units_and_unstated_metric() -> None:
    case = vr.row_case(rows()["R116"])
    c = case.config
    assert (c["framework"], c["framework_version"]) == ("torchtune", "0.3")  # 2024-09-24: after the v0.3.0 tag
    assert (c["quantization_backend"], c["torch_compile"], c["optim"]) == ("torchao", True, "adamw_torch_fused")
    assert c["target_modules"] == ["q_proj", "v_proj", "k_proj", "output_proj", "mlp"]
    assert case.measured_gib == 44.8  # printed "GB" but logged in GiB at that commit
    assert case.tier == "unstated"
    assert c["gpu"] == "A100-SXM-80GB"  # memory not stated: the largest SXM variant, said in the assumptions
    assert any("A100" in a for a in case.assumptions)


def test_oom_row_and_devices_over_table() -> None:
    case = vr.row_case(rows()["R064"])
    assert case.measured_gib is None and case.oom_gpu == "A10G-24GB"
    assert (case.config["num_gpus"], case.config["parallelism"], case.config["gradient_checkpointing"]) == (
        4, "fsdp", True)


def _as(row_id: str, **cols: str) -> dict[str, str]:
    """Row R008 (S01, PEFT's MetaMathQA harness) with the columns another S01 row states."""
    return {**rows()["R008"], "row_id": row_id, **cols}


@pytest.mark.parametrize(("stated", "expected"), [
    ("torch 2.13.0+cu130; transformers 5.13.1; peft 0.19.2.dev0", "0.19.2.dev0"),  # S01's column, as written
    ("PEFT v0.21.1", "0.21.1"), ("torch 2.13.0+cu130", None)])
def test_peft_release_read_where_stated(stated: str, expected: str | None) -> None:
    """The PEFT release a row states goes to peft_version (AdaLoRA's kept update depends on it); none: the current."""
    assert vr.row_case(_as("R008", framework_version=stated)).config.get("peft_version") == expected


def test_other_peft_methods_refused_with_code() -> None:
    for detail in ("SHADOW",):  # no peft_type for it
        with pytest.raises(vr.RowRefused) as err:
            vr.row_case(_as("R018", method_detail=detail))
        assert err.value.code == "row_method_not_modelled"
        assert "adalora" in str(err.value)  # the message names what is supported


@pytest.mark.parametrize(("method", "detail", "peft_type"), [
    ("other", "AdaLoRA", "adalora"), ("other", "IA3", "ia3"), ("other", "LoHa", "loha"), ("other", "LoKr", "lokr"),
    ("other", "OFT", "oft"), ("other", "BOFT", "boft"), ("other", "VeRA", "vera"),
    ("other", "prefix tuning", "prefix_tuning"), ("other", "prompt tuning", "prompt_tuning"),
    ("other", "LayerNorm tuning", "ln_tuning"), ("lora", "LoRA-FA optimizer (A frozen)", "lora_fa"),
    ("other", "MiSS", "miss"), ("other", "GraLoRA", "gralora"), ("other", "SHiRA", "shira"), ("other", "HRA", "hra"),
    ("other", "DeLoRA", "delora"), ("other", "Bone", "miss"), ("other", "HiRA", "hira"),
    ("other", "FourierFT", "fourierft"), ("other", "RandLoRA", "randlora"), ("other", "PVeRA", "pvera"),
    ("other", "C3A", "c3a"), ("other", "BEFT", "beft"), ("other", "RoAd", "road"), ("other", "WaveFT", "waveft"),
    ("other", "P-tuning", "p_tuning"), ("other", "VB-LoRA", "vblora"), ("other", "UniLoRA", "unilora"),
    ("other", "DEFT", "deft"), ("other", "Lily", "lily"), ("other", "PEANuT", "peanut"),
    ("other", "TinyLoRA", "tinylora"), ("other", "GLoRA", "glora"), ("other", "PSOFT", "psoft"),
    ("other", "trainable tokens", "trainable_tokens"), ("other", "AdaMSS", "adamss"),
    ("other", "adaption prompt", "adaption_prompt"), ("other", "LLaMA-Adapter (adaption prompt)", "adaption_prompt"),
    ("other", "FRoD", "frod"), ("other", "OSF", "osf"),
])
def test_peft_method_rows_mapped(method: str, detail: str, peft_type: str) -> None:
    """S01 rows (R007-R017) name their tuner in method_detail; pure-bf16 base, no quantization."""
    c = vr.row_case(_as("X", method=method, method_detail=detail)).config
    assert (c["method"], c["peft_type"]) == ("lora", peft_type)


def test_osf_rank_read_from_the_stated_trainable_count() -> None:
    """R018 (PEFT's osf--llama-3.2-3B-rank128 run) names OSF and states 194,535,936 trainable parameters, not its
    rank: the benchmark's adapter_config keeps min(out, in) - 128 directions of each of the seven projections
    (rank_pattern q 2944, k 896, ...), so every layer trains rank 128, which the count gives back. A stated
    effective_rank is read as it is; a count no uniform rank gives leaves PEFT's default."""
    row = _as("R018", method="other", method_detail="OSF", trainable_params="194535936",
              lora_target_modules="down_proj,gate_proj,k_proj,o_proj,q_proj,up_proj,v_proj")
    assert vr.row_case(row).config["osf_trainable_rank"] == 128
    stated = vr.row_case({**row, "method_detail": "OSF (effective_rank=64)"}).config
    assert stated["effective_rank"] == 64 and "osf_trainable_rank" not in stated
    assert vr.row_case({**row, "method_detail": "OSF (effective_rank=0.25)"}).config["effective_rank"] == 0.25
    assert "osf_trainable_rank" not in vr.row_case({**row, "trainable_params": "194535937"}).config


def test_miss_variants_and_size_fields_read() -> None:
    """MiSS's init_weights "bat" and "mini" (with its mini_r) are read where the row states them, Bone being MiSS's
    former name; GraLoRA's gralora_k likewise (PEFT's default 2 otherwise)."""
    for detail, init in (("MiSS (init_weights=bat)", "bat"), ("Bone (init_weights=bat)", "bat"), ("MiSS", None)):
        assert vr.row_case(_as("X", method_detail=detail)).config.get("miss_init") == init
    mini = vr.row_case(_as("X", method_detail="MiSS mini (mini_r=64)")).config
    assert (mini["peft_type"], mini["miss_init"], mini["mini_r"]) == ("miss", "mini", 64)
    assert vr.row_case(_as("X", method_detail="GraLoRA (gralora_k=4)")).config["gralora_k"] == 4
    assert "gralora_k" not in vr.row_case(_as("X", method_detail="GraLoRA")).config
    assert vr.row_case(_as("X", method_detail="FourierFT (n_frequency=5000)")).config["n_frequency"] == 5000
    assert vr.row_case(_as("X", method_detail="C3A (block_size=64)")).config["block_size"] == 64
    assert vr.row_case(_as("X", method_detail="WaveFT (n_frequency=5000)")).config["n_frequency"] == 5000
    assert vr.row_case(_as("X", method_detail="TinyLoRA (weight_tying=1.0)")).config["weight_tying"] == 1.0
    tokens = vr.row_case(_as("X", method_detail="trainable tokens (token_indices: [128000, 128001, 7])")).config
    assert tokens["num_trainable_tokens"] == 3
    glora = vr.row_case(_as("X", method_detail="GLoRA (config_A_B: vector, config_C: vector)")).config
    assert (glora["config_A_B"], glora["config_C"]) == ("vector", "vector")
    adamss = vr.row_case(_as("X", method_detail="AdaMSS (num_subspaces=32, subspace_rank=2)")).config
    assert (adamss["num_subspaces"], adamss["subspace_rank"]) == (32, 2)
    prompt = vr.row_case(_as("X", method_detail="adaption prompt (adapter_len=100, adapter_layers=28)")).config
    assert (prompt["adapter_len"], prompt["adapter_layers"]) == (100, 28)
    lily = vr.row_case(_as("X", method_detail="Lily (stride_A=14, num_B=2)")).config
    assert (lily["stride_A"], lily["num_B"]) == (14, 2)
    assert vr.row_case(_as("X", method_detail="DEFT (para: true)")).config["deft_para"] is True
    assert "deft_para" not in vr.row_case(_as("X", method_detail="DEFT (relu)")).config
    road = vr.row_case(_as("X", method_detail="RoAd (variant road_2, group_size 64)")).config
    assert (road["road_variant"], road["group_size"]) == ("road_2", 64)


def test_ia3_feedforward_modules_read_where_stated() -> None:
    """PEFT's all-attention IA3 run (ia3--llama-3.2-3B-all-attn) scales the inputs of up, gate and down; a row that
    says so is estimated with them, one that does not with PEFT's mapping (down_proj)."""
    row = _as("X", method_detail="IA3, feedforward_modules: up_proj, gate_proj, down_proj",
              lora_target_modules="gate_proj,o_proj,q_proj,k_proj,v_proj,down_proj,up_proj")
    assert vr.row_case(row).config["feedforward_modules"] == ["up_proj", "gate_proj", "down_proj"]
    assert "feedforward_modules" not in vr.row_case(_as("X", method_detail="IA3")).config


def test_virtual_tokens_read_from_trainable_params() -> None:
    """R016 states 614,400 trainable = 200 x 3072 (Llama-3.2-3B hidden); R015 11,468,800 = 200 x 28 x 2 x 1024."""
    prompt = _as("R016", method_detail="prompt tuning", trainable_params="614400")
    prefix = _as("R015", method_detail="prefix tuning", trainable_params="11468800")
    assert vr.row_case(prompt).config["num_virtual_tokens"] == 200
    assert vr.row_case(prefix).config["num_virtual_tokens"] == 200
    odd = _as("X", method_detail="prompt tuning", trainable_params="614401")  # not a multiple: the default stays
    assert "num_virtual_tokens" not in vr.row_case(odd).config


def test_lorafa_optimizer_is_adamw() -> None:
    """peft's LoraFAOptimizer keeps AdamW's two moments per trained tensor (optimizers/lorafa.py)."""
    row = _as("R007", method="lora", method_detail="LoRA-FA optimizer (A frozen)",
              optimizer='PEFT create_lorafa_optimizer (AdamW-based) {"r": 32, "lora_alpha": 64}')
    assert vr.row_case(row).config["optim"] == "adamw_torch"


@pytest.mark.parametrize(("text", "expected"), [
    ("", None), ("PEFT defaults for the architecture (T5: q,v; BLOOM: query_key_value)", None),
    ("all-linear", "all-linear"), ("q_proj,v_proj (if default)", ["q_proj", "v_proj"]),
    ("all (query,key,value,projection,mlp,head)", ["query", "key", "value", "projection", "mlp", "lm_head"]),
    ("q_proj,k_proj,v_proj,output_proj + MLP + final output projection",
     ["q_proj", "k_proj", "v_proj", "output_proj", "mlp", "lm_head"]),
])
def test_target_module_texts(text: str, expected: object) -> None:
    assert vr.target_modules(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("NVIDIA L40S", "L40S-48GB"), ("RTX 4090 (24 GB)", "RTX-4090-24GB"), ("4090", "RTX-4090-24GB"),
    ("A100 80GB", "A100-SXM-80GB"), ("A6000", "RTX-A6000-48GB"), ("H100 80GB", "H100-SXM-80GB"),
    ("not stated", None), ("24 GB GPUs (text: '2X24GB GPUs')", None),  # 3090, 4090, A10G, L4, A5000...
    ("40 GB GPUs (text: '2X40GB GPUs'; model not named)", "A100-SXM-40GB"),  # only A100s have 40 GB
    # memory written "40G" or in GiB; the G of A10G is the model's name, not 10 GB
    ("A100-40G", "A100-SXM-40GB"), ("A100 80 GiB", "A100-SXM-80GB"), ("A10G (AWS g5.xlarge)", "A10G-24GB"),
    ("RTX 4090 (24G)", "RTX-4090-24GB"),
])
def test_gpu_texts(text: str, expected: str | None) -> None:
    assert vr.match_gpu(text)[0] == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("peak memory *active* (torch.cuda.memory_stats active_bytes.all.peak)", "active"),
    ("TorchTracemalloc in example scripts (torch.cuda.max_memory_allocated, total = begin + peak delta)", "allocated"),
    ("torchtune peak memory per GPU (stat not named; README earlier said 'peak memory reserved')", "reserved"),
    ("unspecified; values read off a GPU-memory screenshot/text (likely nvidia-smi-style device memory)", "device"),
    ("torchtune 'Peak Memory per GPU' (alloc/reserved/active not stated)", "unstated"),
    # W&B's system charts read NVML (docs.wandb.ai/ref/python/experiments/system-metrics), not torch's counters
    ("W&B system metrics, GPU Memory Allocated (GB)", "device"), ("wandb gpu.0.memoryAllocatedBytes", "device"),
    ("pynvml nvmlDeviceGetMemoryInfo used", "device"), ("gpustat during training", "device"),
    ("torch.cuda.max_memory_allocated() logged to wandb", "allocated"),
    ("nvtop", "device"), ("total - free from torch.cuda.mem_get_info()", "device"),
])
def test_metric_texts(text: str, expected: str) -> None:
    assert vr.metric(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("TorchTune @e802c057d (2024-02-08)", "0.0"), ("torchtune @fef3ed10d (2024-04-16)", "0.1"),
    ("torchtune @1814feb17 (2024-11-18)", "0.4"), ("~March 2024", "0.0"), ("torchtune 0.2.1", "0.2.1"),
])
def test_torchtune_versions_from_dates(text: str, expected: str) -> None:
    assert vr.torchtune_version(text.lower()) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("8-bit AdamW (bitsandbytes; config default PagedAdamW8bit) with optimizer_in_bwd=True",
     {"optim": "adamw_8bit", "optimizer_in_backward": True}),
    ("bnb.optim.PagedAdamW (32-bit paged)", {"optim": "paged_adamw_32bit"}),
    ("torch.optim.AdamW (fused), no optimizer_in_bwd", {"optim": "adamw_torch_fused"}),
    ("torch.optim.AdamW (non-fused, lr 1e-5, wd 0.1)", {"optim": "adamw_torch"}),
    ("HF TrainingArguments default (AdamW torch)", {}),
    ("torch SGD (no momentum state by default)", {"optim": "sgd"}),
    # DeepSpeed's / Apex's FusedAdam steps in place like torch's fused AdamW (deepspeed/ops/adam/fused_adam.py)
    ("DeepSpeed FusedAdam", {"optim": "adamw_torch_fused"}), ("FusedAdam (apex)", {"optim": "adamw_torch_fused"}),
])
def test_optimizer_texts(text: str, expected: dict[str, object]) -> None:
    assert vr.optimizer(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("loaded fp32 (no torch_dtype at the time) then DeepSpeed bf16", "bfloat16"),
    ("loaded fp32 (no torch_dtype at the time), FSDP bf16 mixed precision", "float32"),
    ("nf4 4-bit linear weights, rest bf16", "bfloat16"),
])
def test_dtype_texts(text: str, expected: str) -> None:
    assert vr.dtype_of(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("adamw_torch_fused", "adamw_torch_fused"), ("torch AdamW, fused=False", "adamw_torch"),
    ("paged_adamw_8bit", "paged_adamw_8bit"), ("adamw_bnb_8bit", "adamw_8bit"),
])
def test_optimizer_names_as_the_trainer_spells_them(text: str, expected: str) -> None:
    assert vr.optimizer(text)["optim"] == expected


def test_unknown_optimizer_framework_and_quantization_refused() -> None:
    # the 8-bit and paged variants of other families (TrainingArguments OptimizerNames galore_adamw_8bit,
    # ademamix_8bit, rmsprop_bnb_8bit) were read as bitsandbytes AdamW by their "8bit"/"paged"
    for text in ("SGD (momentum 0.9)", "SGD, momentum=0.95, nesterov", "GaLore AdamW (rank 128)",
                 "galore_adamw_8bit", "ademamix_8bit", "rmsprop_bnb_8bit"):
        with pytest.raises(vr.RowRefused) as err:
            vr.optimizer(text)
        assert err.value.code == "row_optimizer_unsupported"
    assert vr.optimizer("torch.optim.SGD (lr 2e-5, momentum 0)")["optim"] == "sgd"
    assert vr.optimizer("torch.optim.Adam (lr 1e-4)")["optim"] == "adamw_torch"  # the same two moments
    with pytest.raises(vr.RowRefused) as err:
        vr.framework({"framework": "Unsloth 2024.8", "framework_version": ""})
    assert err.value.code == "row_framework_unsupported"
    # LitGPT's repository was Lightning-AI/lit-gpt until 2024; lit-llama, its predecessor, has its own model code
    # (finetune/lora.py: cross-entropy on the whole logits) and is refused rather than sized as either stack
    for name in ("lit-gpt", "Lit-GPT (Lightning AI)", "litgpt 0.4"):
        assert vr.framework({"framework": name, "framework_version": ""})[0] == "litgpt"
    with pytest.raises(vr.RowRefused) as err:
        vr.framework({"framework": "lit-llama", "framework_version": ""})
    assert err.value.code == "row_framework_unsupported"
    with pytest.raises(vr.RowRefused) as err:
        vr.quantization("HQQ 4-bit", "")
    assert err.value.code == "row_quantization_unsupported"
    assert vr.quantization("bnb nf4 with double quant", "")["bnb_4bit_use_double_quant"] is True


def test_gptq_row_uses_the_catalog_checkpoint() -> None:
    row = {**rows()["R063"], "model": "TheBloke/Mistral-7B-v0.1-GPTQ", "quantization": "GPTQ 4-bit (act order)",
           "method": "qlora", "lora_target_modules": "q_proj,v_proj", "framework": "HF Trainer + PEFT"}
    c = vr.row_case(row).config
    assert c["method"] == "lora" and "load_in_4bit" not in c
    estimate(c)  # LoRA over the GPTQ base is a valid run
    with pytest.raises(vr.RowRefused):
        vr.row_case({**row, "model": "mistralai/Mistral-7B-v0.1"})  # no GPTQ checkpoint of that id in the catalog


def test_fsdp_shard_grad_op_is_its_own_mode() -> None:
    # SHARD_GRAD_OP keeps every unit gathered from its forward to its backward and has no DeepSpeed bucket
    # (tests/physics/test_fsdp_shard_grad_op.py); it was mapped to zero2 before that mode existed
    assert vr.parallel({"num_gpus": "4", "sharding": "FSDP SHARD_GRAD_OP"})["parallelism"] == "fsdp_shard_grad_op"
    assert vr.parallel({"num_gpus": "4", "sharding": "DeepSpeed ZeRO-2"})["parallelism"] == "zero2"


def test_model_names_without_organisation_or_as_display_names() -> None:
    assert vr.catalog_model("meta-llama/Llama-3.2-3B-Instruct (torchtune default checkpoint)")[0] == \
        "meta-llama/Llama-3.2-3B-Instruct"
    assert vr.catalog_model("Llama-2-7b-hf")[0] == "meta-llama/Llama-2-7b-hf"
    assert vr.catalog_model("Llama 3.1 8B Instruct")[0] == "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(vr.RowRefused) as err:
        vr.catalog_model("bigscience/T0_3B")  # encoder-decoder: not a catalog model, refused by its family word
    assert err.value.code == "row_encoder_decoder_unsupported"


@pytest.mark.parametrize(("text", "expected"), [
    ("4,096", 4096), ("4k", 4096), ("2048 (packed)", 2048), ("global 32 (8 per GPU)", 8), ("10 (per GPU)", 10),
])
def test_numbers_as_sources_write_them(text: str, expected: int) -> None:
    assert vr.per_device(text) == expected


def test_method_keywords_and_siblings() -> None:
    row = rows()["R063"]
    assert vr.method_fields({**row, "method": "QLoRA (4-bit)"})["method"] == "qlora"
    assert vr.method_fields({**row, "method": "DoRA", "quantization": "none"}) == {"method": "lora", "use_dora": True}
    assert vr.method_fields({**row, "method": "Full fine-tuning", "quantization": "none"}) == {"method": "full"}
    # a chat variant not in the catalog takes its base model's architecture, and says so (Llama-2-7b-chat-hf has
    # its own record since the catalog branch's round 4: Qwen2.5-14B-Instruct is one that still has none)
    rid, note = vr.catalog_model("Qwen/Qwen2.5-14B-Instruct")
    assert rid == "Qwen/Qwen2.5-14B" and note and "sibling" in note
    assert vr.catalog_model("meta-llama/Llama-2-7b-chat-hf") == ("meta-llama/Llama-2-7b-chat-hf", None)


def test_benchmark_scores_any_csv_of_the_format(tmp_path: object) -> None:
    import pathlib

    import validate

    path = pathlib.Path(str(tmp_path)) / "other.csv"
    # a byte-order mark, a usable row, an OOM row, an unreadable row and a row marked "no"
    bad = {**rows()["R063"], "row_id": "X3", "micro_batch_size": "two"}
    skip = {**rows()["R063"], "row_id": "X4", "usable_for_scoring": "no"}
    with open(path, "w", encoding="utf-8-sig", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows()["R063"]))
        w.writeheader()
        w.writerows([{**rows()["R063"], "row_id": "X1"}, {**rows()["R064"], "row_id": "X2"}, bad, skip])
    scored, refused, n_usable = validate.score_as_written(validate.load_csv(path))
    assert n_usable == 2  # X1 and X3 (the OOM row is a lower bound, X4 is not usable)
    assert [s.row_id for s in scored] == ["X1", "X2"]
    assert refused == [("X3", "row_missing_field: micro_batch_size is not stated")]


def test_fsdp_row_mapping_reads_no_shard_and_sharded_layers() -> None:
    # fsdp_qlora's "ddp" is FSDP NO_SHARD (train.py l.715); a plain DDP stays DDP
    no_shard = {**rows()["R133"], "sharding": "FSDP NO_SHARD ('ddp')"}
    assert vr.row_case(no_shard).config["parallelism"] == "fsdp_no_shard"
    assert vr.row_case({**rows()["R133"], "sharding": "DDP"}).config["parallelism"] == "ddp"
    # torchtune's recipe config sets custom_sharded_layers: the row names it (llama3_1/70B_full.yaml from v0.3.0)
    tt = {**rows()["R116"], "source_locator": "config recipes/configs/llama3_1/70B_full.yaml"}
    assert vr.row_case(tt).config["fsdp_shard_embeddings"] is True
    older = {**tt, "framework_version": "torchtune @fef3ed10d (2024-04-16)"}  # 0.1: the config did not set it
    assert "fsdp_shard_embeddings" not in vr.row_case(older).config
    said = {**rows()["R116"], "other_memory_settings": "custom_sharded_layers: ['tok_embeddings', 'output']"}
    assert vr.row_case(said).config["fsdp_shard_embeddings"] is True
    assert "fsdp_shard_embeddings" not in vr.row_case(rows()["R116"]).config  # 405B QLoRA config: not set


@pytest.mark.parametrize(("fw", "version_text", "expected"), [
    # TrainingArguments' default: adamw_hf before v4.32.0 (PR #25109, 2023-07-26), torch's foreach AdamW until
    # torch 2.8 (2025-08-06) made adamw_torch_fused the default (PR #37358); a hand-written loop has no default
    ("transformers", "transformers 4.31.0", None), ("transformers", "transformers 4.40.2", "adamw_torch"),
    ("transformers", "transformers 4.57.1", None), ("trl", "peft @aa2ca83ca (2024-02-26) examples/sft", "adamw_torch"),
    ("trl", "TRL 0.4 (2023-05-02)", None), ("trl", "2025-10-01", None), ("trl", "", None),
    ("custom", "transformers 4.40.2", None),
])
def test_trainer_default_optimizer_by_release(fw: str, version_text: str, expected: str | None) -> None:
    version = rc.transformers_version(version_text.lower()) if fw == "transformers" else None
    got = vr.trainer_default_optim({"framework_version": version_text}, fw, version)
    assert got.get("optim") == expected


@pytest.mark.parametrize(("version_text", "optimizer_text", "expected"), [
    # torchtune's configs pass fused: True to torch.optim.AdamW from #1575 (cca50f02e, 2024-09-14, in v0.3.1)
    ("torchtune @1814feb17 (2024-11-18)", "torch AdamW (non-8bit), optimizer_in_bwd False", "adamw_torch_fused"),
    ("torchtune 0.3.1", "torch.optim.AdamW", "adamw_torch_fused"),
    ("torchtune 0.3.0", "torch.optim.AdamW", "adamw_torch"),
    ("torchtune @0217d44c2 (2024-05-09)", "torch.optim.AdamW (lr 2e-5)", "adamw_torch"),
    ("torchtune @1814feb17 (2024-11-18)", "torch.optim.AdamW (fused=False)", "adamw_torch"),
])
def test_torchtune_configs_fuse_adamw_from_their_release(version_text: str, optimizer_text: str,
                                                          expected: str) -> None:
    opt = vr.optimizer(optimizer_text)
    row = {"framework_version": version_text, "optimizer": optimizer_text}
    assert {**opt, **rc.torchtune_fused(row, opt)}["optim"] == expected


@pytest.mark.parametrize(("framework", "targets", "model", "expected"), [
    # swift/llm/utils/model.py LoRATM at cfcb67265 (the benchmark's commit): qwen c_attn, chatglm query_key_value,
    # baichuan W_pack, llama-like q/k/v
    ("ms-swift (swift sft)", "DEFAULT", "Qwen/Qwen-7B-Chat", ["c_attn"]),
    ("swift", "", "THUDM/chatglm3-6b", ["query_key_value"]),
    ("ms-swift", "DEFAULT", "baichuan-inc/Baichuan2-7B-Chat", ["W_pack"]),
    ("ms-swift", "default", "01-ai/Yi-6B-Chat", ["q_proj", "k_proj", "v_proj"]),
    ("ms-swift", "ALL (all linear)", "Qwen/Qwen-7B-Chat", None),
    ("HF Trainer + PEFT", "DEFAULT", "Qwen/Qwen-7B-Chat", None),
])
def test_swift_default_lora_targets(framework: str, targets: str, model: str, expected: list[str] | None) -> None:
    row = {"framework": framework, "lora_target_modules": targets}
    assert rc.swift_default_targets(row, model) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("yes", True), ("no", False), ("not stated", None), ("Yes (non-reentrant)", True),
    # use_reentrant configures checkpointing, so naming it says checkpointing is on, whatever its value
    ("use_reentrant=False", True), ("gradient_checkpointing_kwargs={'use_reentrant': False}", True),
    ("activation checkpointing", True), ("without gradient checkpointing", False),
    ("1", True), ("0", False), ("✓", True), ("✗", False), ("selective", None),
    ("enable_activation_checkpointing: True if devices > 1", False),  # one GPU here
])
def test_checkpointing_texts(text: str, expected: bool | None) -> None:
    assert vr.checkpointing(text, 1) is expected


@pytest.mark.parametrize(("cols", "expected"), [
    # QLoRA names its base: 4-bit NF4 (Dettmers et al. 2023) when the quantization column is left empty
    ({"method": "QLoRA", "quantization": ""}, {"method": "qlora", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}),
    ({"method": "QLoRA", "quantization": "not stated"}, {"method": "qlora", "load_in_4bit": True}),
    ({"method": "QLoRA 8-bit", "quantization": ""}, {"method": "lora8", "load_in_8bit": True}),  # as the text says
    ({"method": "QLoRA", "quantization": "bitsandbytes"}, {"method": "qlora", "bnb_4bit_quant_type": "nf4"}),
    ({"method": "QDoRA", "quantization": "nf4"}, {"method": "qlora", "use_dora": True}),
    # LoRA's initialisation and scaling variants train LoRA's tensors
    ({"method": "rsLoRA", "method_detail": ""}, {"method": "lora"}),
    ({"method": "PiSSA", "method_detail": ""}, {"method": "lora"}),
    ({"method": "LoRA+", "method_detail": ""}, {"method": "lora"}),
    # a PEFT method named in the method column itself
    ({"method": "IA3", "method_detail": ""}, {"method": "lora", "peft_type": "ia3"}),
    ({"method": "AdaLoRA", "method_detail": ""}, {"method": "lora", "peft_type": "adalora"}),
])
def test_method_texts(cols: dict[str, str], expected: dict[str, object]) -> None:
    config = vr.row_case(_as("R002", **cols)).config
    assert {k: config.get(k) for k in expected} == expected


def test_qlora_with_a_quantization_column_saying_none_is_refused() -> None:
    with pytest.raises(vr.RowRefused) as err:
        vr.row_case(_as("R002", method="QLoRA", quantization="none"))
    assert err.value.code == "row_inconsistent"


def test_sharding_the_engine_does_not_model_is_refused() -> None:
    """Layers split across cards (device_map, pipeline), tensors split inside layers (tensor parallel) and ZeRO-1's
    sharded states give each GPU another share than DDP's, which they had been sized as."""
    for text in ("device_map=auto (naive pipeline)", "model parallel", "tensor parallel (TP=2)", "ZeRO-1",
                 "DeepSpeed ZeRO stage 1", "Megatron TP=2 PP=2"):
        with pytest.raises(vr.RowRefused) as err:
            vr.parallel({"num_gpus": "2", "sharding": text})
        assert err.value.code == "row_parallelism_unsupported", text
    # HYBRID_SHARD shards inside a node as FULL_SHARD does (torch.distributed.fsdp.ShardingStrategy docs)
    assert vr.parallel({"num_gpus": "8", "sharding": "FSDP HYBRID_SHARD"})["parallelism"] == "fsdp"
    assert vr.parallel({"num_gpus": "2", "sharding": "DeepSpeed ZeRO-3, no offload"})["parallelism"] == "zero3"


def test_fp8_mixed_precision_is_refused() -> None:
    for text in ("fp8", "FP8 (Transformer Engine)", "torchao float8 training"):
        with pytest.raises(vr.RowRefused) as err:
            vr.precision({"mixed_precision": text, "base_weight_dtype": "bf16"}, "transformers")
        assert err.value.code == "row_precision_unsupported", text


@pytest.mark.parametrize(("seq_len", "mode", "expected"), [
    ("2048", "max_seq_length 2048, padding='max_length'", (2048, True)),  # every batch at full length
    ("2048", "padded to max length", (2048, True)), ("2048", "padded to longest in batch", (2048, False)),
    ("512-2048", "", (2048, False)),  # a range of lengths: the longest sets the peak
    ("~1500 avg, max 2048", "", (2048, False)), ("avg 1500 / maximum 4k", "", (4096, False)),
    ("512 to 4k", "", (4096, False)), ("8192 (packed)", "", (8192, True)), ("2,048", "", (2048, False)),
])
def test_sequence_texts(seq_len: str, mode: str, expected: tuple[int, bool]) -> None:
    got = vr.sequences({"seq_len": seq_len, "seq_len_mode": mode})
    assert (got["max_seq_length"], got["packing"]) == expected


def test_releases_written_in_the_framework_column() -> None:
    assert vr.framework({"framework": "transformers 4.41.2", "framework_version": ""}) == ("transformers", "4.41.2")
    # TRL's release as written: the engine follows it (its loss before v1.7.0, its defaults, its preparation)
    assert vr.framework({"framework": "TRL SFTTrainer", "framework_version": "trl 0.9.6"}) == ("trl", "0.9.6")
    assert vr.framework({"framework": "TRL", "framework_version": "trl v1.8.0"}) == ("trl", "1.8.0")


@pytest.mark.parametrize(("text", "expected"), [
    # a Hugging Face run's "q, v" can only be the model's q_proj and v_proj (PEFT matches module-name suffixes);
    # group words name every projection of the group (Llama 3.2 3B's config.json module names)
    ("q, k, v, o", ["q_proj", "k_proj", "v_proj", "o_proj"]),
    ("attention + MLP", ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    ("QKV", ["q_proj", "k_proj", "v_proj"]), ("MLP only", ["gate_proj", "up_proj", "down_proj"]),
    ("all", "all-linear"), ("lm_head too", ["lm_head"]), ("q_proj,v_proj", ["q_proj", "v_proj"]),
])
def test_role_words_become_the_models_module_names(text: str, expected: object) -> None:
    assert vr.row_case(_as("R002", lora_target_modules=text)).config["target_modules"] == expected


def test_litgpt_keeps_its_own_target_names() -> None:
    """LitGPT and torchtune name their projections by role; the engine maps those itself (sizing.shapes)."""
    assert vr.peft_target_names(["query", "value"], "meta-llama/Llama-3.2-3B", "litgpt") == ["query", "value"]


@pytest.mark.parametrize(("text", "expected"), [
    ("global batch 64, micro 4", 4), ("micro_batch_size=1", 1), ("effective 32 (8x4)", 8),
    ("32 (effective 128)", 32), ("16 global (2 per GPU)", 2), ("global batch size 32", 32),  # nothing else written
])
def test_micro_batch_texts(text: str, expected: int) -> None:
    assert vr.per_device(text) == expected


@pytest.mark.parametrize(("reported", "unit", "gib"), [
    ("14,000", "MiB", 14000 / 1024), ("14000 MiB", "", 14000 / 1024), ("15.2 GiB", "", 15.2),
    ("38,868,615,168 bytes", "", 38868615168 / 2**30), ("22.5", "GB", 22.5e9 / 2**30),
])
def test_reported_memory_with_its_unit(reported: str, unit: str, gib: float) -> None:
    """Without peak_memory_gib: thousands separators and a unit written with the value ("14000 MiB" had been read as
    14000 GB, "14,000" as 14)."""
    row = {"peak_memory_reported": reported, "peak_memory_unit": unit, "unit_basis": "", "peak_memory_gib": ""}
    assert vr.measured_gib(row) == pytest.approx(gib)


@pytest.mark.parametrize(("text", "expected"), [
    ("None (bf16)", {}), ("fp16", {}), ("no quantization", {}),  # the base in a floating dtype
    ("QLoRA", {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}),
    ("4 bit", {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}), ("8 bit", {"load_in_8bit": True}),
])
def test_quantization_texts(text: str, expected: dict[str, object]) -> None:
    assert vr.quantization(text, "") == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("FA2", "flash_attention_2"), ("fa3", "flash_attention_2"), ("flash-attn", "flash_attention_2"),
    ("eager", "eager"), ("SDPA (default)", "sdpa"), ("not stated", None), ("default", None),
])
def test_attention_texts(text: str, expected: str | None) -> None:
    assert vr.attention(text) == expected


def test_checkpointing_and_attention_named_among_other_settings() -> None:
    config = vr.row_case(_as("R002", gradient_checkpointing="", attention_impl="",
                             other_memory_settings="gradient checkpointing, flash attention 2")).config
    assert (config["gradient_checkpointing"], config["attn_implementation"]) == (True, "flash_attention_2")
    config = vr.row_case(_as("R002", gradient_checkpointing="", other_memory_settings="no gradient checkpointing"))\
        .config
    assert config["gradient_checkpointing"] is False


@pytest.mark.parametrize(("text", "expected"), [
    ("2 nodes x 8 GPUs", 16), ("2 nodes, 8 GPUs each", 16), ("2x8", 16), ("16 (2 nodes)", 16), ("8x A100", 8),
    ("table: 4; yaml devices: 2", 2),
])
def test_gpu_count_texts(text: str, expected: int) -> None:
    """Nodes times GPUs per node (these had been read as the node count)."""
    assert vr.parallel({"num_gpus": text, "sharding": "FSDP"})["num_gpus"] == expected


def test_gpu_count_written_with_the_card() -> None:
    assert vr.parallel({"num_gpus": "", "gpu_model": "8x A100", "sharding": "FSDP"}) == \
        {"num_gpus": 8, "parallelism": "fsdp"}
    assert vr.parallel({"num_gpus": "", "gpu_model": "RTX 4090 (24 GB)", "sharding": ""}) == {"num_gpus": 1}


@pytest.mark.parametrize(("text", "count", "gpu"), [
    # the count after the card: Kaggle's "T4 x2" accelerator, a node written "A100 80GB x 8"
    ("T4 x2", 2, "T4-16GB"), ("Kaggle T4x2", 2, "T4-16GB"), ("A100 80GB x 8", 8, "A100-SXM-80GB"),
    ("H100 SXM5 x8", 8, "H100-SXM-80GB"), ("A100 (80GB) ×4", 4, "A100-SXM-80GB"),
    ("RTX A6000 x 4", 4, "RTX-A6000-48GB"),
    # no count: an instance name's "2xlarge", an "x86" host, the X of a card's own name
    ("AWS g5.2xlarge (A10G)", 1, "A10G-24GB"), ("A100 80GB on an x86 host", 1, "A100-SXM-80GB"),
    ("RTX 3090 24GB", 1, "RTX-3090-24GB"), ("GTX 980", 1, None), ("2x 40 GB GPUs", 2, "A100-SXM-40GB"),
])
def test_gpu_count_after_the_card(text: str, count: int, gpu: str | None) -> None:
    assert vr.parallel({"num_gpus": "", "gpu_model": text, "sharding": ""})["num_gpus"] == count
    assert vr.match_gpu(text)[0] == gpu


@pytest.mark.parametrize(("text", "expected"), [
    ("Llama 2 (7B)", "meta-llama/Llama-2-7b-hf"), ("Llama-2 (13B)", "meta-llama/Llama-2-13b-hf"),
    ("Qwen2.5 (7B)", "Qwen/Qwen2.5-7B"), ("Gemma (2B)", "google/gemma-2b"),
])
def test_size_written_in_the_names_comment(text: str, expected: str) -> None:
    """A size in parentheses names the model's size when the name states none (these had been refused as several
    architectures)."""
    assert vr.catalog_model(text, "")[0] == expected


def test_lora_dropout_none_is_zero() -> None:
    """A dropout written as "none" is 0.0 (PEFT's nn.Identity), not the engine's default."""
    assert vr.row_case(_as("R002", lora_dropout="none")).config["lora_dropout"] == 0.0


@pytest.mark.parametrize(("text", "expected"), [
    ("Lion (lr 1e-4)", "lion_32bit"), ("lion_8bit", "lion_8bit"), ("paged_lion_32bit", "paged_lion_32bit"),
    ("bnb.optim.PagedLion8bit", "paged_lion_8bit"),
])
def test_lion_is_bitsandbytes_lion(text: str, expected: str) -> None:
    assert vr.optimizer(text)["optim"] == expected
