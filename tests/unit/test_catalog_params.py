# Catalog records added from sourced configs: each one's parameter count against a figure from outside the engine.
from __future__ import annotations

import pytest

from sizing.arch import from_hf_config
from sizing.catalog import models

_PADDLE = "https://github.com/ZHUI/paddlenlp_model_readme/blob/"
_P1, _P2 = "ffc26950e6a9f69fb01d7c9b64607770d729e56b", "10d0a05fa8598301f2daaf815381315f6646d593"  # mirror commits
_P3 = "0abc042b9d9525304d4e12e12ec7d7f3aaf48cc2"
_KERAS = "https://github.com/keras-team/keras-hub/blob/71453d08f59edc90d276e999319fc51e61cbf82c/keras_hub/src/models/"
_HPMLL = "https://github.com/HPMLL/llm-benchmark/blob/0347b4f3ca6ae4773aab83c33cf569d8bd7506d9/models/"
_L7 = _HPMLL + "Llama-2-7b-hf/pytorch_model.bin.index.json"
_L13 = _HPMLL + "Llama-2-13b-hf/pytorch_model.bin.index.json"

# Exact counts: a checkpoint index's metadata.total_size in bytes over the bytes of its dtype (bf16 2, fp32 4),
# less the non-parameter buffers the index also lists (rotary_emb.inv_freq: head_dim / 2 floats per layer).
LLAMA2_7B = 26_953_670_656 // 4 - 32 * 64  # Llama-2-7b-hf/pytorch_model.bin.index.json, float32
LLAMA2_13B = 52_063_467_520 // 4 - 40 * 64  # Llama-2-13b-hf/pytorch_model.bin.index.json, float32
# The Pythia model card's "Naming convention and parameter count" table (total params), as copied with the card.
_PYTHIA = ("https://github.com/Wenxin-Jiang/CS577-NLP/blob/7917f9a43c53ca000e7a2c6e38ffce2cc2433fdf/project/"
           "model_cards/_train/EleutherAI_pythia-12b-deduped_README.md")
_PYTHIA_TOTALS = {"70m": 70_426_624, "160m": 162_322_944, "410m": 405_334_016, "1b": 1_011_781_632,
                  "1.4b": 1_414_647_808, "2.8b": 2_775_208_960, "6.9b": 6_857_302_016, "12b": 11_846_072_320}
_GPT_OSS_CARD = "https://arxiv.org/abs/2508.10925"
EXACT: dict[str, tuple[int, str]] = {
    "Qwen/Qwen1.5-7B": (15_442_649_088 // 2, "https://github.com/huggingface/transformers/blob/f092c38c0bf55916e1c78bcf0f"
                        "800a7f8a54860b/examples/pytorch/torchacc/qwen/Qwen1.5-7B/model.safetensors.index.json"),
    # Code Llama 13B is Llama 2 13B with 16 more vocabulary rows in embed_tokens and lm_head (32016 vs 32000).
    "codellama/CodeLlama-13b-hf": (LLAMA2_13B + 2 * 16 * 5120, _L13),
    # Vicuna v1.5 is a full fine-tune of Llama 2 (its model card): the same tensors as the base checkpoint.
    "lmsys/vicuna-7b-v1.5": (LLAMA2_7B, _L7),
    "lmsys/vicuna-13b-v1.5": (LLAMA2_13B, _L13),
    # WizardCoder-Python-7B: Code Llama Python 7B (Llama 2 7B shapes) with one added token in embed_tokens and lm_head.
    "WizardLM/WizardCoder-Python-7B-V1.0": (LLAMA2_7B + 2 * 4096, _L7),
    # The model card's hyperparameter table: n_parameters 20554567680.
    "EleutherAI/gpt-neox-20b": (20_554_567_680, "https://huggingface.co/EleutherAI/gpt-neox-20b (model card)"),
    # LLaMA (v1), arXiv:2302.13971 Table 2: 6.7B, 13.0B, 32.5B, 65.2B (three figures).
    "huggyllama/llama-7b": (6_700_000_000, "https://arxiv.org/abs/2302.13971 (Table 2)"),
    "huggyllama/llama-13b": (13_000_000_000, "https://arxiv.org/abs/2302.13971 (Table 2)"),
    "huggyllama/llama-30b": (32_500_000_000, "https://arxiv.org/abs/2302.13971 (Table 2)"),
    "huggyllama/llama-65b": (65_200_000_000, "https://arxiv.org/abs/2302.13971 (Table 2)"),
    **{f"EleutherAI/pythia-{k}": (v, _PYTHIA) for k, v in _PYTHIA_TOTALS.items() if k not in ("1b", "6.9b")},
    # The model card: "Number of Parameters: 7.61B" (three figures: exact to 0.07 %).
    "Qwen/Qwen2.5-Coder-7B": (7_610_000_000, _PADDLE + _P1 + "/Qwen/Qwen2.5-Coder-7B/index.md"),
    "Qwen/Qwen2.5-Coder-3B": (3_090_000_000, _PADDLE + _P1 + "/Qwen/Qwen2.5-Coder-3B/index.md"),  # 3.09B (tied)
    # keras-hub presets' "params" (a separate implementation's weight count, converted from the Hub checkpoints).
    # OPT: keras-hub's position table has 2048 rows, transformers' OPTLearnedPositionalEmbedding 2048 + 2.
    "facebook/opt-125m": (125_237_760 + 2 * 768, _KERAS + "opt/opt_presets.py"),
    "bigscience/bloom-560m": (559_214_592, _KERAS + "bloom/bloom_presets.py"),
    "bigscience/bloom-1b1": (1_065_314_304, _KERAS + "bloom/bloom_presets.py"),
    "bigscience/bloom-1b7": (1_722_408_960, _KERAS + "bloom/bloom_presets.py"),
    "bigscience/bloom-3b": (3_002_557_440, _KERAS + "bloom/bloom_presets.py"),
    # OpenAI's gpt-oss model card (arXiv 2508.10925, Table 1): 20.91B and 116.83B parameters in total
    "openai/gpt-oss-20b": (20_910_000_000, _GPT_OSS_CARD),
    "openai/gpt-oss-120b": (116_830_000_000, _GPT_OSS_CARD),
    "Qwen/Qwen3-235B-A22B": (235_093_634_560, _KERAS + "qwen3_moe/qwen3_moe_presets.py"),
    # The 2507 releases change only the context and rope base: the same tensors as the first release.
    "Qwen/Qwen3-235B-A22B-Instruct-2507": (235_093_634_560, _KERAS + "qwen3_moe/qwen3_moe_presets.py"),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": (30_532_122_624, _KERAS + "qwen3_moe/qwen3_moe_presets.py"),
    "Qwen/Qwen3-4B-Instruct-2507": (4_022_468_096, _KERAS + "qwen3/qwen3_presets.py"),  # as Qwen/Qwen3-4B
    "google/codegemma-7b-it": (8_537_680_896, _KERAS + "gemma/gemma_presets.py"),  # code_gemma_instruct_7b_en
    # Code Llama 7B Python keeps Llama 2's 32000-row vocabulary: keras-hub's llama2_7b_en count.
    "codellama/CodeLlama-7b-Python-hf": (6_738_415_616, _KERAS + "llama/llama_presets.py"),
    "codellama/CodeLlama-13b-Python-hf": (LLAMA2_13B, _L13),  # Llama 2 13B shapes, 32000 rows
    "openai-community/gpt2": (124_439_808, _KERAS + "gpt2/gpt2_presets.py"),  # gpt2_base_en
    "openai-community/gpt2-medium": (354_823_168, _KERAS + "gpt2/gpt2_presets.py"),
    "openai-community/gpt2-large": (774_030_080, _KERAS + "gpt2/gpt2_presets.py"),
    "openai-community/gpt2-xl": (1_557_611_200, _KERAS + "gpt2/gpt2_presets.py"),  # gpt2_extra_large_en
    # The GPT-J model card's hyperparameter table: n_parameters 6053381344 (the engine: 0.04 % less).
    "EleutherAI/gpt-j-6b": (6_053_381_344, "https://huggingface.co/EleutherAI/gpt-j-6b (model card)"),
    # SmolLM's release names (135M, 360M, 1.7B), as the LLaMA paper's sizes above: within 1 %.
    "HuggingFaceTB/SmolLM-135M": (135_000_000, "https://huggingface.co/blog/smollm"),
    "HuggingFaceTB/SmolLM-360M": (360_000_000, "https://huggingface.co/blog/smollm"),
    "HuggingFaceTB/SmolLM-1.7B": (1_700_000_000, "https://huggingface.co/blog/smollm"),
    # The MPT-7B card's hyperparameter table: n_parameters 6.7B (two figures; the engine: 6.65B).
    # keras-hub's smollm3_3b_en count (the engine: 2,304 fewer, 0.0001 %).
    "HuggingFaceTB/SmolLM3-3B": (3_075_100_928, _KERAS + "smollm3/smollm3_presets.py"),
    "tiiuae/falcon-rw-1b": (1_311_625_216, _KERAS + "falcon/falcon_presets.py"),  # falcon_refinedweb_1b_en
    "mosaicml/mpt-7b": (6_700_000_000, "https://huggingface.co/mosaicml/mpt-7b (model card, copied in "
                        "asgaardlab/model-card-reorganization)"),
    "mistralai/Ministral-8B-Instruct-2410": (8_000_000_000, "https://huggingface.co/mistralai/Ministral-8B-Instruct-2410"),
    # The OPT paper's Table 1 sizes (two and three figures): 30B, 66B.
    "facebook/opt-30b": (30_000_000_000, "https://arxiv.org/abs/2205.01068 (Table 1)"),
    "facebook/opt-66b": (66_000_000_000, "https://arxiv.org/abs/2205.01068 (Table 1)"),
    # Model cards: Phi-4-mini "3.8B parameters" (tied: an untied head would be 4.45B); Mistral Large 2 "123B".
    "microsoft/Phi-4-mini-instruct": (3_800_000_000, "https://huggingface.co/microsoft/Phi-4-mini-instruct (card)"),
    "mistralai/Mistral-Large-Instruct-2407": (123_000_000_000,
                                              "https://huggingface.co/mistralai/Mistral-Large-Instruct-2407 (card)"),
    # The StarCoder paper: "15.5B parameter models" (the engine: 15.47B without the uncounted 8192-row position table).
    "bigcode/starcoder": (15_500_000_000, "https://arxiv.org/abs/2305.06161 (abstract)"),
    # Checkpoint indexes' total_size over 2 bytes (16-bit shards; neither lists a buffer): Mistral Small 3's
    # model.safetensors.index.json (47,144,806,400) and MPT-30B's pytorch_model.bin.index.json (59,914,401,792).
    "mistralai/Mistral-Small-24B-Instruct-2501": (47_144_806_400 // 2, "https://github.com/OpenMOSE/RWKV-LM-RLHF/blob/"
                                                  "7e8f62ab3f43bd70de656d5205d1cb4216b4ea58/main/tokenizer/"
                                                  "mistralsmall3/model.safetensors.index.json"),
    "mosaicml/mpt-30b": (59_914_401_792 // 2, "https://github.com/dandelionsllm/pandallm/blob/"
                         "dbf4dd5918cf541fbaf310465fe81e7ab77c8f47/models/mpt/pytorch_model.bin.index.json"),
    # The Stable LM 2 1.6B card's architecture table: 1,644,417,024 parameters (the engine: 98,304 more, 0.006 %).
    "stabilityai/stablelm-2-1_6b": (1_644_417_024, "https://github.com/YinanWusoymilk/hf-readme/blob/"
                                    "1ab39f24f8f9548593ac6304367f31ae3ff45178/training_and_application/readme_files/"
                                    "stabilityai_stablelm-2-1_6b.md"),
    # Dolly v2 is Pythia tuned with its embeddings resized to a 50280-token tokenizer (databrickslabs/dolly
    # training/trainer.py): the Pythia table's totals less the dropped rows of embed_in and embed_out (Pythia 2.8B
    # 50304 rows, 6.9B 50432, 12B 50688).
    "databricks/dolly-v2-3b": (_PYTHIA_TOTALS["2.8b"] - 2 * (50304 - 50280) * 2560, _PYTHIA),
    "databricks/dolly-v2-7b": (_PYTHIA_TOTALS["6.9b"] - 2 * (50432 - 50280) * 4096, _PYTHIA),
    "databricks/dolly-v2-12b": (_PYTHIA_TOTALS["12b"] - 2 * (50688 - 50280) * 5120, _PYTHIA),
    # pytorch_model.bin.index.json total_size 13,731,385,408 (float16) less 32 layers' buffers: the 2048 x 2048 bool
    # causal mask (transformers counts a bool as 1/8 byte), masked_bias (2 bytes), rotary inv_freq (64 x 2 bytes).
    "togethercomputer/RedPajama-INCITE-7B-Base": ((13_731_385_408 - 32 * (2048 * 2048 // 8 + 2 + 64 * 2)) // 2,
                                                  "https://github.com/drcege/RedPajama-INCITE-7B-Base/blob/"
                                                  "8e6f27e6e8ccf7db2df9ebeaa2cbcd605b9fd92e/pytorch_model.bin.index.json"),
    # The cached Hub revision's model.safetensors.index.json: total_size 13,481,025,536 (bfloat16, no buffers).
    "deepseek-ai/deepseek-coder-6.7b-instruct": (13_481_025_536 // 2, "https://github.com/karthiktatineni/"
                                                 "Finetuning-deepseek-coder-6.7b/blob/3538f66d820d3bc09bffa32e8c4a8817"
                                                 "caaeda54/.hf_cache/models--deepseek-ai--deepseek-coder-6.7b-instruct/"
                                                 "blobs/d4338e87a01134a05058c25623116fb6678a90c7"),
    # The LFS pointers of the 'Added bf16 tensors' commit: 4,999,983,456 + 67,121,712 bytes of bfloat16 safetensors
    # (their JSON headers, tens of KB, included).
    "ibm-granite/granite-3.1-2b-instruct": ((4_999_983_456 + 67_121_712) // 2, "https://huggingface.co/ibm-granite/"
                                           "granite-3.1-2b-instruct/commit/d8cff08a5868ad6cc303bf6e9702de776136ee00"),
}

# Published file sizes of the bf16 safetensors shards (GiB with one decimal, MiB for single small files), as the
# PaddleNLP mirror lists the Hub files of each checkpoint: the engine's bf16 bytes must agree within 1 %
# (tied vs untied embeddings differ by 13-20 % on these models, so the check separates them).
LISTED_GIB: dict[str, tuple[float, str]] = {
    "Qwen/Qwen2-0.5B": (942.3 / 1024, _PADDLE + _P1 + "/Qwen/Qwen2-0.5B/index.md"),
    "Qwen/Qwen2-7B-Instruct": (3.7 + 3.6 + 3.6 + 3.3,
                               _PADDLE + _P2 + "/Qwen/Qwen2-7B-Instruct/index.md"),
    # Same architecture fields as Qwen2-1.5B and Qwen2-0.5B, whose base checkpoints the mirror lists.
    "Qwen/Qwen2-1.5B-Instruct": (2.9, _PADDLE + _P1 + "/Qwen/Qwen2-1.5B/index.md"),
    "Qwen/Qwen2-0.5B-Instruct": (942.3 / 1024,
                                 _PADDLE + _P1 + "/Qwen/Qwen2-0.5B/index.md"),
    "Qwen/Qwen2.5-Math-7B": (3.7 + 3.6 + 3.6 + 3.3, _PADDLE + _P1 + "/Qwen/Qwen2.5-Math-7B/index.md"),
    # Mistral 7B Instruct v0.1 / v0.2 have the tensor shapes of the base v0.1 (litgpt's entries differ in context
    # and rope only): its three shards are 4.6 + 4.7 + 4.2 GiB.
    "mistralai/Mistral-7B-Instruct-v0.1": (4.6 + 4.7 + 4.2, _PADDLE + _P1 + "/mistralai/Mistral-7B-v0.1/index.md"),
    "mistralai/Mistral-7B-Instruct-v0.2": (4.6 + 4.7 + 4.2, _PADDLE + _P1 + "/mistralai/Mistral-7B-v0.1/index.md"),
    # Qwen1.5 4B / 14B / 72B and Qwen2-72B-Instruct (records from GenZ's transcription): the shard lists of the mirror.
    "Qwen/Qwen1.5-4B": (3.7 + 3.6, _PADDLE + _P1 + "/Qwen/Qwen1.5-4B/index.md"),
    "Qwen/Qwen1.5-14B": (6 * 3.7 + 2.9 + 1.5, _PADDLE + _P1 + "/Qwen/Qwen1.5-14B/index.md"),
    "Qwen/Qwen1.5-72B": (30 * 3.6 + 7 * 3.4 + 2.3, _PADDLE + _P1 + "/Qwen/Qwen1.5-72B/index.md"),
    "Qwen/Qwen2-72B-Instruct": (3.5 + 26 * 3.7 + 9 * 3.6 + 3.2, _PADDLE + _P2 + "/Qwen/Qwen2-72B-Instruct/index.md"),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": (8.1 + 6.9,
                                                 _PADDLE + _P1 + "/deepseek-ai/DeepSeek-R1-Distill-Llama-8B/index.md"),
    "Qwen/Qwen2.5-Coder-14B": (5 * 4.6 + 4.4, _PADDLE + _P1 + "/Qwen/Qwen2.5-Coder-14B/index.md"),
    "Qwen/Qwen2.5-Coder-32B": (4.6 + 12 * 4.5 + 2.0, _PADDLE + _P1 + "/Qwen/Qwen2.5-Coder-32B/index.md"),
    # QwQ-32B: litgpt's entry has Qwen2.5-Coder-32B's shapes exactly (same widths, layers, heads, vocabulary).
    "Qwen/QwQ-32B": (4.6 + 12 * 4.5 + 2.0, _PADDLE + _P1 + "/Qwen/Qwen2.5-Coder-32B/index.md"),
    # R1-Distill-Qwen: the distilled checkpoints' own shard lists (1.5B: one file, which counts its untied head).
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": (3.3, _PADDLE + _P1 + "/deepseek-ai/"
                                                  "DeepSeek-R1-Distill-Qwen-1.5B/index.md"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (8.0 + 6.2,
                                                _PADDLE + _P1 + "/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B/index.md"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": (3 * 8.1 + 3.3,
                                                 _PADDLE + _P1 + "/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B/index.md"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (7 * 8.2 + 3.8,
                                                 _PADDLE + _P1 + "/deepseek-ai/DeepSeek-R1-Distill-Qwen-32B/index.md"),
    # Qwen2 base releases: their own shard lists (the same sizes as the instruct releases')
    "Qwen/Qwen2-7B": (3.7 + 3.6 + 3.6 + 3.3, _PADDLE + _P1 + "/Qwen/Qwen2-7B/index.md"),
    "Qwen/Qwen2-1.5B": (2.9, _PADDLE + _P1 + "/Qwen/Qwen2-1.5B/index.md"),
}

# Checkpoint file sizes in decimal GB as the Hub tree page of each release lists them (three figures), with the bytes
# a parameter takes in those files: the engine's count times those bytes must agree within 1 % (a tied head would be
# 2-4 % less, an untied one 2-4 % more, on these models).
_HUB = "https://huggingface.co/"
HUB_TREE_GB: dict[str, tuple[float, int, str]] = {
    # pytorch_model-0000{1,2}-of-00002.bin, bfloat16 (torch.BFloat16Storage)
    "teknium/OpenHermes-2.5-Mistral-7B": (9.94 + 4.54, 2, _HUB + "teknium/OpenHermes-2.5-Mistral-7B/tree/"
                                          "d4a2212040c95d9dd9c509be188b24b1b1019c22"),
    "01-ai/Yi-1.5-6B": (4.93 + 4.98 + 2.21, 2, _HUB + "01-ai/Yi-1.5-6B/tree/main"),
    "01-ai/Yi-1.5-9B": (4.93 + 4.98 + 4.97 + 2.78, 2, _HUB + "01-ai/Yi-1.5-9B/tree/main"),
    "ibm-granite/granite-3.1-8b-instruct": (4.97 + 4.99 + 4.97 + 1.41, 2,
                                            _HUB + "ibm-granite/granite-3.1-8b-instruct/tree/main"),
    "deepseek-ai/deepseek-llm-7b-base": (9.97 + 3.85, 2, _HUB + "deepseek-ai/deepseek-llm-7b-base/tree/main"),
    "upstage/SOLAR-10.7B-v1.0": (4.94 + 5 + 4.92 + 4.92 + 1.69, 2, _HUB + "upstage/SOLAR-10.7B-v1.0/tree/main"),
    # float32 checkpoints: one 12.1 GB model.safetensors; 14 shards, 63.8 GB the repository in all
    "bigcode/starcoder2-3b": (12.1, 4, _HUB + "bigcode/starcoder2-3b/tree/54da76775f65ecde085d6e75aa17a053b043900e"),
    "bigcode/starcoder2-15b": (63.8, 4, _HUB + "bigcode/starcoder2-15b/tree/main"),
}


@pytest.mark.parametrize("model_id", sorted(HUB_TREE_GB))
def test_checkpoint_bytes_match_the_hub_file_sizes(model_id: str) -> None:
    gb, bytes_per_param, _source = HUB_TREE_GB[model_id]
    assert abs(bytes_per_param * _total(model_id) / 1e9 - gb) <= 0.01 * gb


# Records with no independent count found, each with the reason.
NO_FIGURE: dict[str, str] = {
    "mistralai/Mistral-Nemo-Base-2407": "the model card says 12B only (2 % from any exact count)",
    # The bf16 Qwen1.5-32B-Chat shards on the mirror (16 x 3.6 + 2.9 GiB, each rounded: +-0.85 GiB) cannot tell
    # this config's intermediate_size 27648 from a narrower MLP, and the GPTQ files' sizes were not found.
    "Qwen/Qwen1.5-32B-Chat-GPTQ-Int4": "no size of the GPTQ files found",
    "WizardLM/WizardCoder-15B-V1.0": "the card says 15B only; no n_positions in the scrape (position table uncounted)",
    "microsoft/Phi-3-mini-128k-instruct": "the card says 3.8B only (the architecture is the 4k record's)",
    "openlm-research/open_llama_3b": "the card says 3B only",
    "openlm-research/open_llama_3b_v2": "the card says 3B only",
    # Llama-2 7B / 13B shapes, whose counts are checked through vicuna above; no count published for these weights.
    "openlm-research/open_llama_7b": "the card says 7B only",
    "openlm-research/open_llama_7b_v2": "the card says 7B only",
    "openlm-research/open_llama_13b": "the card says 13B only",
    # OPT 2.7B / 13B: the paper's and keras-hub's nominal sizes (2.7B, 13B) are 1.8 % / 1.1 % from any exact count.
    "facebook/opt-2.7b": "only nominal sizes published (2.7B)",
    "facebook/opt-13b": "only nominal sizes published (13B)",
    "codellama/CodeLlama-70b-hf": "the card says 70B only (1.5 % from the exact count)",
    # Two independent transcriptions agree on these configs (mlc-llm's presets and litgpt's entries, or the
    # StarCoder2 7B shape), but no exact count was found: the names (3B, 1.6B, 7B) are 2-7 % from any count.
    "stabilityai/stablelm-3b-4e1t": "only the nominal 3B published in the copies found",
    "stabilityai/stablelm-2-zephyr-1_6b": "only the nominal 1.6B published in the copies found",
    "bigcode/starcoder2-7b": "only the nominal 7B published in the copies found",
    "mistralai/Mistral-Small-Instruct-2409": "only the nominal 22B (1.1 % from the count)",
    "internlm/internlm2-7b": "only the nominal 7B published in the copies found",
    "internlm/internlm2_5-7b": "only the nominal 7B published in the copies found",
    "distilbert/distilgpt2": "only the nominal 82M (0.2 % from the count) in the copies found",
    # candle's config_6b; the same shapes as the Yi-6B-Chat record (another source), checked below
    "01-ai/Yi-6B": "only the nominal 6B published in the copies found (the count: 6.06B)",
    "01-ai/Yi-1.5-34B": "only the nominal 34B published in the copies found (the count: 34.39B, 1.1 % more)",
    # 180B is 0.8 % from the count (178.56B) and 0.3 % from an untied head's (179.52B): it cannot tell the two apart
    "tiiuae/falcon-180B": "only the nominal 180B published in the copies found",
    "allenai/OLMo-2-1124-7B": "only the nominal 7B published in the copies found (the count: 7.30B)",
    "allenai/OLMo-2-1124-13B": "only the nominal 13B published in the copies found (the count: 13.72B)",
    "togethercomputer/RedPajama-INCITE-Base-3B-v1": "only the nominal 2.8B in the copies found (the count: 2.78B)",
}


# Chat / instruct releases whose litgpt entry is the base's entry expanded for both ids (and whose base record has
# litgpt's widths, layers and vocabulary): the record repeats the base's config, so the base's check covers it.
SAME_AS = {
    "meta-llama/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-chat-hf":
    "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-chat-hf": "meta-llama/Llama-2-70b-hf",
    "meta-llama/Meta-Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3-70B",
    "codellama/CodeLlama-7b-Instruct-hf": "codellama/CodeLlama-7b-hf", "google/gemma-2b-it": "google/gemma-2b",
    "google/gemma-7b-it": "google/gemma-7b", "google/gemma-2-2b-it": "google/gemma-2-2b",
    "google/gemma-2-9b-it": "google/gemma-2-9b", "google/gemma-2-27b-it": "google/gemma-2-27b",
    "Qwen/Qwen2.5-0.5B-Instruct": "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-3B-Instruct": "Qwen/Qwen2.5-3B",
    "tiiuae/falcon-7b-instruct": "tiiuae/falcon-7b",
    "HuggingFaceTB/SmolLM2-135M-Instruct": "HuggingFaceTB/SmolLM2-135M",
    "HuggingFaceTB/SmolLM2-360M-Instruct": "HuggingFaceTB/SmolLM2-360M",
    "HuggingFaceTB/SmolLM2-1.7B-Instruct": "HuggingFaceTB/SmolLM2-1.7B",
    # fine-tunes and sibling releases whose cited configs have the base's fields (notes: which source says so)
    "bigscience/bloomz-560m": "bigscience/bloom-560m",
    "bigscience/bloomz-1b1": "bigscience/bloom-1b1",
    "bigscience/bloomz-1b7": "bigscience/bloom-1b7",
    "bigscience/bloomz-3b": "bigscience/bloom-3b",
    "bigscience/bloom-7b1": "bigscience/bloomz-7b1",
    "HuggingFaceH4/zephyr-7b-beta": "mistralai/Mistral-7B-v0.1",
    "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF": "meta-llama/Llama-3.1-70B-Instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": "meta-llama/Llama-3.3-70B-Instruct",
    "codellama/CodeLlama-34b-Python-hf": "codellama/CodeLlama-34b-hf",
    "codellama/CodeLlama-34b-Instruct-hf": "codellama/CodeLlama-34b-hf",
    "codellama/CodeLlama-70b-Python-hf": "codellama/CodeLlama-70b-hf",
    "codellama/CodeLlama-70b-Instruct-hf": "codellama/CodeLlama-70b-hf",
    "mistralai/Mistral-Large-Instruct-2411": "mistralai/Mistral-Large-Instruct-2407",
    "microsoft/Phi-4-mini-reasoning": "microsoft/Phi-4-mini-instruct",
    "Qwen/Qwen3-30B-A3B-Base": "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-30B-A3B-Thinking-2507": "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-235B-A22B-Thinking-2507": "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "stabilityai/stablelm-zephyr-3b": "stabilityai/stablelm-3b-4e1t",
    "mistralai/Mistral-Small-24B-Base-2501": "mistralai/Mistral-Small-24B-Instruct-2501",
    "togethercomputer/RedPajama-INCITE-7B-Chat": "togethercomputer/RedPajama-INCITE-7B-Base",
    "togethercomputer/RedPajama-INCITE-7B-Instruct": "togethercomputer/RedPajama-INCITE-7B-Base",
    "01-ai/Yi-1.5-6B-Chat": "01-ai/Yi-1.5-6B",
    "01-ai/Yi-1.5-9B-Chat": "01-ai/Yi-1.5-9B",
    "deepseek-ai/deepseek-llm-7b-chat": "deepseek-ai/deepseek-llm-7b-base",
    "Qwen/Qwen2.5-Coder-3B-Instruct": "Qwen/Qwen2.5-Coder-3B",
}


@pytest.mark.parametrize("model_id", sorted(SAME_AS))
def test_tuned_release_has_its_base_config(model_id: str) -> None:
    base = SAME_AS[model_id]
    assert dict(models()[model_id.lower()].config) == dict(models()[base.lower()].config)
    assert _total(model_id) == _total(base)


def _total(model_id: str) -> int:
    return from_hf_config(models()[model_id.lower()].config).total_params


@pytest.mark.parametrize("model_id", sorted(EXACT))
def test_exact_parameter_count(model_id: str) -> None:
    figure, _source = EXACT[model_id]
    assert abs(_total(model_id) - figure) <= 0.01 * figure


# Records that predate this check, against the same kind of figure.
_TORCHACC = ("https://github.com/huggingface/transformers/blob/5e8e34578ad42f255a6f03fd4e7119b3819b22d8/examples/pytorch/"
             "torchacc/llama3/")
_LLAMA32_CARD = _PADDLE + _P3 + "/meta-llama/Llama-3.2-1B/index.md"
EARLIER: dict[str, tuple[int, str]] = {
    "EleutherAI/pythia-1b": (_PYTHIA_TOTALS["1b"], _PYTHIA),
    "EleutherAI/pythia-6.9b": (_PYTHIA_TOTALS["6.9b"], _PYTHIA),
    "meta-llama/Llama-2-7b-hf": (LLAMA2_7B, _L7),
    "meta-llama/Llama-2-13b-hf": (LLAMA2_13B, _L13),
    # model.safetensors.index.json total_size of the vendored Hub folders, bfloat16
    "meta-llama/Meta-Llama-3-8B": (16_060_522_496 // 2, _TORCHACC + "Meta-Llama-3-8B/model.safetensors.index.json"),
    "meta-llama/Meta-Llama-3-70B": (141_107_412_992 // 2, _TORCHACC + "Meta-Llama-3-70B/model.safetensors.index.json"),
    # The Llama 3.2 card's parameter table: 1B (1.23B), 3B (3.21B); the mirror's copy of the card.
    "meta-llama/Llama-3.2-1B": (1_230_000_000, _LLAMA32_CARD),
    "meta-llama/Llama-3.2-3B": (3_210_000_000, _LLAMA32_CARD),
    # keras-hub preset counts (catalog branch, second round): exact for all but Gemma 3 4B-27B (+0.004 % or less).
    **{rid: (n, _KERAS + path) for rid, n, path in [
        ("google/gemma-2b", 2_506_172_416, "gemma/gemma_presets.py"),
        ("google/gemma-7b", 8_537_680_896, "gemma/gemma_presets.py"),
        ("google/gemma-2-2b", 2_614_341_888, "gemma/gemma_presets.py"),
        ("google/gemma-2-9b", 9_241_705_984, "gemma/gemma_presets.py"),
        ("google/gemma-2-27b", 27_227_128_320, "gemma/gemma_presets.py"),
        ("google/gemma-3-1b-it", 999_885_952, "gemma3/gemma3_presets.py"),
        ("google/gemma-3-4b-it", 3_880_099_328, "gemma3/gemma3_presets.py"),  # gemma3_instruct_4b_text
        ("google/gemma-3-12b-it", 11_765_788_416, "gemma3/gemma3_presets.py"),
        ("google/gemma-3-27b-it", 27_009_002_240, "gemma3/gemma3_presets.py"),
        ("mistralai/Mistral-7B-v0.1", 7_241_732_096, "mistral/mistral_presets.py"),
        ("mistralai/Mistral-7B-v0.3", 7_248_023_552, "mistral/mistral_presets.py"),
        ("mistralai/Mistral-7B-Instruct-v0.3", 7_248_023_552, "mistral/mistral_presets.py"),
        ("microsoft/Phi-3-mini-4k-instruct", 3_821_079_552, "phi3/phi3_presets.py"),
        ("microsoft/Phi-3-mini-128k-instruct", 3_821_079_552, "phi3/phi3_presets.py"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8_030_261_248, "llama3/llama3_presets.py"),
        ("meta-llama/Llama-3.1-8B", 8_030_261_248, "llama3/llama3_presets.py"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46_702_792_704, "mixtral/mixtral_presets.py"),
        ("Qwen/Qwen3-30B-A3B", 30_532_122_624, "qwen3_moe/qwen3_moe_presets.py"),
        ("Qwen/Qwen3-0.6B", 596_049_920, "qwen3/qwen3_presets.py"),
        ("Qwen/Qwen3-1.7B", 1_720_574_976, "qwen3/qwen3_presets.py"),
        ("Qwen/Qwen3-4B", 4_022_468_096, "qwen3/qwen3_presets.py"),
        ("Qwen/Qwen3-8B", 8_190_735_360, "qwen3/qwen3_presets.py"),
        ("Qwen/Qwen3-14B", 14_768_307_200, "qwen3/qwen3_presets.py"),
        ("Qwen/Qwen3-32B", 32_762_123_264, "qwen3/qwen3_presets.py"),
        ("Qwen/Qwen2.5-72B", 72_706_203_648, "qwen/qwen_presets.py"),  # qwen2.5_instruct_72b_en
        # OPT-1.3B: keras-hub's 2048-row position table, transformers' 2048 + 2
        ("facebook/opt-1.3b", 1_315_753_984 + 2 * 2048, "opt/opt_presets.py")]},
}
EARLIER_GIB: dict[str, tuple[float, str]] = {
    "Qwen/Qwen2.5-0.5B": (942.3 / 1024, _PADDLE + _P1 + "/Qwen/Qwen2.5-0.5B/index.md"),
    "Qwen/Qwen2.5-3B": (3.7 + 2.1, _PADDLE + _P1 + "/Qwen/Qwen2.5-3B/index.md"),
    "Qwen/Qwen2.5-1.5B": (2.9, _PADDLE + _P1 + "/Qwen/Qwen2.5-1.5B/index.md"),
    "Qwen/Qwen2.5-14B": (3.6 + 6 * 3.7 + 1.6, _PADDLE + _P1 + "/Qwen/Qwen2.5-14B/index.md"),
    "Qwen/Qwen2.5-32B": (16 * 3.6 + 2.9, _PADDLE + _P1 + "/Qwen/Qwen2.5-32B/index.md"),
    "mistralai/Mixtral-8x7B-v0.1": (18 * 4.6 + 3.9, _PADDLE + _P3 + "/mistralai/Mixtral-8x7B-v0.1/index.md"),
}


@pytest.mark.parametrize("model_id", sorted(EARLIER))
def test_earlier_records_parameter_count(model_id: str) -> None:
    figure, _source = EARLIER[model_id]
    assert abs(_total(model_id) - figure) <= 0.01 * figure


@pytest.mark.parametrize("model_id", sorted({**LISTED_GIB, **EARLIER_GIB}))
def test_bf16_bytes_match_published_file_sizes(model_id: str) -> None:
    gib, _source = {**LISTED_GIB, **EARLIER_GIB}[model_id]
    assert abs(2 * _total(model_id) / 2**30 - gib) <= 0.01 * gib


# The catalog's first 88 records (file order) predate this check; every record after them must be in one table.
FIRST_CHECKED = 88


def test_yi_6b_has_the_shapes_of_its_chat_release() -> None:
    # two sources (candle's config_6b, the Yi-6B-Chat-4bits config.json) agree on every shape field
    assert _total("01-ai/Yi-6B") == _total("01-ai/Yi-6B-Chat")


def test_every_added_record_is_checked_or_explained() -> None:
    from sizing.catalog import model_records

    added = {rec.id for rec in model_records()[FIRST_CHECKED:]}
    tables = [set(EXACT), set(LISTED_GIB), set(HUB_TREE_GB), set(NO_FIGURE), set(SAME_AS)]
    assert added == set().union(*tables)
    assert sum(map(len, tables)) == len(added)  # no record in two tables


# Families people fine-tune that the engine does not model (no catalog record): refused by name, with the list.
# (gptj, mpt, starcoder2, stablelm, granite, internlm2, codegen, olmo2 and gpt_oss were on this list until the
# families were added.)
@pytest.mark.parametrize("model_type", ["olmo", "cohere", "deepseek_v2", "nemotron"])
def test_unmodelled_families_refused_with_the_supported_list(model_type: str) -> None:
    from sizing import SizingError, estimate

    cfg = {"model_type": model_type, "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 512, "vocab_size": 1000}
    with pytest.raises(SizingError) as err:
        estimate({"model_config": cfg, "method": "lora", "max_seq_length": 128, "per_device_train_batch_size": 1})
    assert (err.value.code, err.value.field) == ("unsupported_architecture", "model_config.model_type")
    assert f"'{model_type}' is not supported" in str(err.value) and "llama, mistral" in str(err.value)


# Real configs of checkpoints people fine-tune whose architecture the engine does not model (shape fields as the
# cited copies give them): each is refused by name, never sized as a similar model.
_AIC = ("https://github.com/ai-dynamo/aiconfigurator/blob/095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/"
        "aiconfigurator_core/model_configs/")
_MLC = "https://github.com/mlc-ai/mlc-llm/blob/79d603f085f50500e9509fa01785ffa7ecfaaa93/python/mlc_llm/model/model_preset.py"
GPT_OSS_20B = {  # _AIC + "openai--gpt-oss-20b_config.json": MoE, attention sinks, MXFP4 experts
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
    "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "num_local_experts": 32, "num_experts_per_tok": 4, "vocab_size": 201088, "attention_bias": True,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}
REAL_UNMODELLED = {
    # _MLC MODEL_PRESETS['deepseek_v2_lite']: multi-head latent attention (kv_lora_rank), shared + routed experts
    "deepseek_v2": {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
                    "intermediate_size": 10944, "kv_lora_rank": 512, "n_routed_experts": 64,
                    "num_attention_heads": 16, "num_hidden_layers": 27, "num_key_value_heads": 16,
                    "vocab_size": 102400},
    # _MLC MODEL_PRESETS['aya-23']: Cohere (parallel block, LayerNorm without bias, logit scale)
    "cohere": {"architectures": ["CohereForCausalLM"], "model_type": "cohere", "hidden_size": 4096,
               "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
               "num_key_value_heads": 8, "vocab_size": 256000},
}


@pytest.mark.parametrize("model_type", sorted(REAL_UNMODELLED))
def test_real_unmodelled_configs_refused_by_model_type(model_type: str) -> None:
    from sizing import SizingError, estimate

    for cfg in (REAL_UNMODELLED[model_type], {k: v for k, v in REAL_UNMODELLED[model_type].items()
                                              if k != "model_type"}):  # the architectures class alone
        with pytest.raises(SizingError) as err:
            estimate({"model_config": cfg, "method": "lora", "max_seq_length": 128, "per_device_train_batch_size": 1})
        assert (err.value.code, err.value.field) == ("unsupported_architecture", "model_config.model_type")
        assert "is not supported" in str(err.value) and "llama, mistral" in str(err.value)


# _MLC MODEL_PRESETS['olmo2_7b'] (the 32 layers, 4096 wide, 32 heads of allenai/OLMo-2-1124-7B's model card)
OLMO2_7B = {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_size": 4096,
            "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 32, "vocab_size": 100352}


def test_olmo2_is_sized_by_model_type_or_class() -> None:
    """OLMo 2, once refused, is read by model_type or by its class alone. Its parameters counted module by module as
    transformers 5.24 models/olmo2/modeling_olmo2.py declares them: embed_tokens and an untied lm_head (V x h); per
    layer q/k/v/o_proj (h x 32 * 128 each), q_norm and k_norm over the whole projections (32 * 128 each),
    gate/up/down_proj (h x I each), post_attention_layernorm and post_feedforward_layernorm (h each); the final norm."""
    from sizing.arch import from_hf_config

    h, inter, layers, vocab = 4096, 11008, 32, 100352
    per_layer = 4 * h * h + 2 * h + 3 * h * inter + 2 * h
    expected = 2 * vocab * h + layers * per_layer + h
    for cfg in (OLMO2_7B, {k: v for k, v in OLMO2_7B.items() if k != "model_type"}):
        arch = from_hf_config(cfg)
        assert (arch.model_type, arch.pre_norms, arch.post_norms, arch.qk_norm_whole) == ("olmo2", 0, 2, True)
        assert arch.total_params == expected


# allenai/Olmo-3-1025-7B as public code restates its config.json: 4096 wide, 32 layers, 32 heads and as many key/value
# heads (no GQA), FFN 11008, vocabulary 100278 (dolma2-tokenizer), 65536 positions, a 4096-token window skipped on
# every fourth layer (a vLLM OLMo 3 backbone contract test; a C++ config-loader test has the layer_types). The Hub
# lists 7,298,011,136 parameters for the checkpoint (quoted by a fine-tune's model card that names it its base).
OLMO3_7B = {"architectures": ["Olmo3ForCausalLM"], "model_type": "olmo3", "hidden_size": 4096,
            "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
            "vocab_size": 100278, "max_position_embeddings": 65536, "sliding_window": 4096,
            "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"] * 8}


def test_olmo3_is_olmo2_with_a_window() -> None:
    """OLMo 3 is read by model_type or by its class alone, with OLMo 2's layer (no pre-norms, norms on the sublayer
    outputs, q/k norms over the whole projections) and the Hub's parameter count. Its window is the config's, 4096
    when the key is missing (Olmo3Config's default), none when no layer is a sliding one; past the window the
    estimate of a packed run says it sizes every layer as a windowed one."""
    from sizing import estimate
    from sizing.arch import from_hf_config

    for cfg in (OLMO3_7B, {k: v for k, v in OLMO3_7B.items() if k != "model_type"}):
        arch = from_hf_config(cfg)
        assert (arch.model_type, arch.pre_norms, arch.post_norms, arch.qk_norm_whole) == ("olmo3", 0, 2, True)
        assert arch.total_params == 7_298_011_136
        assert (arch.sliding_window, arch.mask_kinds) == (4096, 2)
    assert from_hf_config({k: v for k, v in OLMO3_7B.items() if k != "sliding_window"}).sliding_window == 4096
    assert from_hf_config({**OLMO3_7B, "layer_types": ["full_attention"] * 32}).sliding_window is None
    assert from_hf_config({**OLMO3_7B, "sliding_window": None}).sliding_window is None
    run = {"model_config": OLMO3_7B, "method": "lora", "target_modules": "all-linear", "packing": True,
           "per_device_train_batch_size": 1, "gpu": "H100-SXM-80GB"}
    reasons = [[r["code"] for r in estimate({**run, "max_seq_length": n}).confidence_reasons] for n in (4000, 8192)]
    assert "sliding_window" not in reasons[0] and "sliding_window" in reasons[1]


@pytest.mark.parametrize(("model_id", "active"), [("openai/gpt-oss-20b", 3_610_000_000),
                                                   ("openai/gpt-oss-120b", 5_130_000_000)])
def test_gpt_oss_active_parameters(model_id: str, active: int) -> None:
    """The card's active parameters per token (arXiv 2508.10925, Table 1): all but the embedding table, with 4 of the
    experts of each layer (each expert's weights and biases)."""
    arch = from_hf_config(models()[model_id].config)
    experts = arch.layers * sum(lin.params for lin in arch.linears if lin.count > 1)
    routed = experts * arch.experts_per_token // arch.experts
    assert abs(arch.total_params - arch.vocab * arch.hidden - experts + routed - active) <= 0.005 * active


def test_gpt_oss_mxfp4_checkpoint_trains_dequantized() -> None:
    """The Hub checkpoint's MXFP4 experts: LoRA and full fine-tuning size the dequantized bf16 model (the
    parameters of the card, 2 bytes each); QLoRA is refused (transformers refuses a bitsandbytes config on it)."""
    from sizing import SizingError, estimate

    run = {"model": "openai/gpt-oss-20b", "method": "lora", "target_modules": "all-linear", "bf16": True,
           "max_seq_length": 256, "per_device_train_batch_size": 1}
    est = estimate(run)
    assert est.detail["param_bytes"] == 2 * _total("openai/gpt-oss-20b") + est.detail["trainable_params"] * 4
    with pytest.raises(SizingError) as err:
        estimate({**run, "method": "qlora", "load_in_4bit": True})
    assert (err.value.code, err.value.field) == ("conflict", "method")


def test_mxfp4_refused_outside_gpt_oss() -> None:
    """MXFP4 is read as gpt-oss's expert format only (transformers' Mxfp4HfQuantizer replaces GptOssExperts alone):
    under another family it is refused, with the formats the weights model knows."""
    from sizing import SizingError
    from sizing.arch import from_hf_config

    disguised = {**GPT_OSS_20B, "model_type": "mixtral"}
    with pytest.raises(SizingError) as err:
        from_hf_config(disguised)
    assert (err.value.code, err.value.field) == ("unsupported_quantization",
                                                 "model_config.quantization_config.quant_method")
    assert "mxfp4" in str(err.value) and "gptq" in str(err.value)


# Ids of the same weights (mirrors, re-uploads, renamed organisations): each resolves to the record of those weights.
ALIAS_OF = {
    "NousResearch/Llama-2-7b-hf": "meta-llama/Llama-2-7b-hf", "TheBloke/Llama-2-7B-fp16": "meta-llama/Llama-2-7b-hf",
    "TheBloke/Llama-2-70B-fp16": "meta-llama/Llama-2-70b-hf", "TheBloke/CodeLlama-7B-fp16": "codellama/CodeLlama-7b-hf",
    "TheBloke/CodeLlama-34B-Python-fp16": "codellama/CodeLlama-34b-Python-hf",
    "unsloth/Mistral-7B-v0.2": "mistralai/Mistral-7B-v0.2",
    "gpt2": "openai-community/gpt2", "gpt2-xl": "openai-community/gpt2-xl", "distilgpt2": "distilbert/distilgpt2",
}


@pytest.mark.parametrize("alias", sorted(ALIAS_OF))
def test_alias_resolves_to_its_record(alias: str) -> None:
    from sizing import estimate

    assert models()[alias.lower()].id == ALIAS_OF[alias]
    run = {"method": "lora", "r": 8, "target_modules": "all-linear", "max_seq_length": 256,
           "per_device_train_batch_size": 1}
    assert (estimate({**run, "model": alias}).allocated_bytes
            == estimate({**run, "model": ALIAS_OF[alias]}).allocated_bytes)


# The Gemma 3 Technical Report (arXiv:2503.19786), Table 1: vision encoder + embedding + non-embedding parameters, in
# millions: 4B 417 + 675 + 3,209; 12B 417 + 1,012 + 10,759; 27B 417 + 1,416 + 25,600. AutoModelForCausalLM loads the
# whole Gemma3ForConditionalGeneration (the keras-hub counts above are the text decoder's alone).
GEMMA3_WHOLE = {"google/gemma-3-4b-it": 4_301e6, "google/gemma-3-12b-it": 12_188e6, "google/gemma-3-27b-it": 27_433e6}


@pytest.mark.parametrize("model_id", sorted(GEMMA3_WHOLE))
def test_gemma3_records_load_the_vision_tower(model_id: str) -> None:
    arch = from_hf_config(models()[model_id.lower()].config)
    assert arch.tower is not None
    assert abs(arch.all_params - GEMMA3_WHOLE[model_id]) <= 0.001 * GEMMA3_WHOLE[model_id]
