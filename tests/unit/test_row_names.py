"""Model names as measurement tables write them, matched to catalog records (scripts/row_names.py, row_catalog.py).
Each expected id is written by hand from what the name says; the refusals name why."""

from __future__ import annotations

import pytest

import validate_rows as vr
from row_names import checkpoint_id, parse, written_as

# (written, row's params_nominal, expected catalog id)
MATCHES = [
    # the spellings refused before the token rule
    ("Llama-3-8B", "", "meta-llama/Meta-Llama-3-8B"),
    ("Qwen2 7B", "", "Qwen/Qwen2-7B"),
    ("Qwen2 72B", "", "Qwen/Qwen2-72B-Instruct"),  # the only Qwen2 72B record: its instruct sibling
    ("Phi-3 mini", "", "microsoft/Phi-3-mini-4k-instruct"),  # 4k and 128k share the architecture: file order
    ("TinyLlama 1.1B", "", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"),  # the base before the chat
    # the ones that worked stay
    ("Llama 2 7B", "", "meta-llama/Llama-2-7b-hf"),
    ("Llama 3.1 70B", "", "meta-llama/Llama-3.1-70B"),
    ("Gemma 2 9B", "", "google/gemma-2-9b"),
    ("Falcon 40B", "", "tiiuae/falcon-40b"),
    # versions glued, spaced or hyphenated; the "Meta-" prefix and "-hf" are not part of the name
    ("llama-3-8b", "", "meta-llama/Meta-Llama-3-8B"),
    ("Llama3 8B", "", "meta-llama/Meta-Llama-3-8B"),
    ("Llama-3-8B-Instruct", "", "meta-llama/Meta-Llama-3-8B-Instruct"),
    ("llama3.1-8b-instruct", "", "meta-llama/Llama-3.1-8B-Instruct"),
    ("Llama 3.2 1B", "", "meta-llama/Llama-3.2-1B"),
    ("Llama 3.3 70B", "", "meta-llama/Llama-3.3-70B-Instruct"),  # only the instruct release exists
    ("LLaMA-2 13B", "", "meta-llama/Llama-2-13b-hf"),
    ("Llama-2-7b-chat", "", "meta-llama/Llama-2-7b-chat-hf"),
    ("Llama 7B", "", "huggyllama/llama-7b"),  # no generation: the first LLaMA
    ("LLaMA 33B", "", "huggyllama/llama-30b"),  # its display name gives both sizes
    ("Code Llama 7B", "", "codellama/CodeLlama-7b-hf"),
    ("CodeLlama 34B Instruct", "", "codellama/CodeLlama-34b-Instruct-hf"),
    ("Vicuna 13B", "", "lmsys/vicuna-13b-v1.5"),
    ("open_llama 7b v2", "", "openlm-research/open_llama_7b_v2"),
    ("Mistral 7B v0.1", "", "mistralai/Mistral-7B-v0.1"),
    # v0.1 / v0.2 (32000-row vocabulary) and v0.3 (32768): one shape, vocabularies 2.4 % apart (config.json of each
    # release): the first base release, said in the assumption
    ("Mistral 7B", "", "mistralai/Mistral-7B-v0.1"),
    ("Mistral 7B Instruct", "", "mistralai/Mistral-7B-Instruct-v0.1"),
    ("mistral-7b-instruct-v0.2", "", "mistralai/Mistral-7B-Instruct-v0.2"),
    ("Mixtral 8x7B", "", "mistralai/Mixtral-8x7B-v0.1"),
    ("Mixtral-8x7B-Instruct", "", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
    ("Mistral NeMo 12B", "", "mistralai/Mistral-Nemo-Base-2407"),
    ("Mistral-Large-2407", "", "mistralai/Mistral-Large-Instruct-2407"),
    ("Zephyr 7B beta", "", "HuggingFaceH4/zephyr-7b-beta"),
    ("Qwen 2.5 7B Instruct", "", "Qwen/Qwen2.5-7B-Instruct"),
    ("Qwen2.5-14B-Instruct", "", "Qwen/Qwen2.5-14B"),  # the base as its sibling
    ("Qwen1.5 7B", "", "Qwen/Qwen1.5-7B"),
    ("Qwen 1.8B Chat", "", "Qwen/Qwen-1_8B-Chat"),
    ("Qwen 7B Chat Int4", "", "Qwen/Qwen-7B-Chat-Int4"),
    ("Qwen3 30B A3B", "", "Qwen/Qwen3-30B-A3B"),
    ("Phi-3.5 mini", "", "microsoft/Phi-3.5-mini-instruct"),
    ("Phi-4 mini", "", "microsoft/Phi-4-mini-instruct"),
    ("phi 2", "", "microsoft/phi-2"),
    ("Phi-2 (2.7B)", "", "microsoft/phi-2"),
    ("Phi-1.5", "", "microsoft/phi-1_5"),
    ("TinyLlama-1.1B-Chat", "", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"),
    ("gemma2 2b", "", "google/gemma-2-2b"),
    ("Gemma-2-9b-it", "", "google/gemma-2-9b-it"),
    ("BLOOM 7B", "", "bigscience/bloom-7b1"),  # 7b1 is 7.1B: a nominal 7B within 2 %
    ("GPT-2 XL", "", "openai-community/gpt2-xl"),
    ("gpt2 medium", "", "openai-community/gpt2-medium"),  # not the one-word id gpt2
    ("GPT-J 6B", "", "EleutherAI/gpt-j-6b"),
    ("Pythia 1.4B", "", "EleutherAI/pythia-1.4b"),
    ("SmolLM2 360M", "", "HuggingFaceTB/SmolLM2-360M"),
    ("InternLM2.5-7B", "", "internlm/internlm2_5-7b"),
    ("chatglm3 6b", "", "THUDM/chatglm3-6b"),
    ("Qwen2-1.5B", "", "Qwen/Qwen2-1.5B"),
    ("Yi 6B", "", "01-ai/Yi-6B"),
    ("StarCoder", "", "bigcode/starcoder"),  # not StarCoder2: another generation
    ("StarCoder 15B", "", "bigcode/starcoder"),  # its display name states 15.5B: 15B is that size with fewer digits
    ("Mistral Small 22B", "", "mistralai/Mistral-Small-Instruct-2409"),  # the display name's 22B; the id has none
    # Mistral Small 3 (2501): 24B, 5120 wide, a 131072-token vocabulary, not the 22B 2409 release (6144 wide, 56
    # layers, 32768 tokens); its base and instruct releases share the architecture: the base
    ("Mistral Small 24B", "", "mistralai/Mistral-Small-24B-Base-2501"),
    ("Mistral-Small-24B-Instruct-2501", "", "mistralai/Mistral-Small-24B-Instruct-2501"),
    ("Yi-1.5-34B", "", "01-ai/Yi-1.5-34B"),
    ("Falcon-180B", "", "tiiuae/falcon-180B"),
    ("MPT-30B", "", "mosaicml/mpt-30b"),
    ("stablelm-2-1_6b", "", "stabilityai/stablelm-2-1_6b"),
    ("OLMo 2 7B", "", "allenai/OLMo-2-1124-7B"),  # OLMo 2 is modelled; OLMo (1) is not (refused below)
    ("Dolly v2 12B", "", "databricks/dolly-v2-12b"),
    ("dolly-v2-3b", "", "databricks/dolly-v2-3b"),
    ("RedPajama-INCITE-7B", "", "togethercomputer/RedPajama-INCITE-7B-Base"),  # the base before its tuned siblings
    ("RedPajama-INCITE-7B-Chat", "", "togethercomputer/RedPajama-INCITE-7B-Chat"),
    ("RedPajama-INCITE-Base-3B-v1", "", "togethercomputer/RedPajama-INCITE-Base-3B-v1"),
    # the only 6.7B DeepSeek Coder record: the base release is its sibling (the instruct is tuned from it)
    ("deepseek-coder-6.7b", "", "deepseek-ai/deepseek-coder-6.7b-instruct"),
    ("deepseek-ai/deepseek-coder-6.7b-base", "", "deepseek-ai/deepseek-coder-6.7b-instruct"),
    # Hub configs found as pages (catalog branch, round 8); were refusals
    ("OpenHermes 2.5 Mistral 7B", "", "teknium/OpenHermes-2.5-Mistral-7B"),
    ("teknium/OpenHermes-2.5-Mistral-7B", "", "teknium/OpenHermes-2.5-Mistral-7B"),
    ("Yi-1.5-9B", "", "01-ai/Yi-1.5-9B"),
    ("Yi 1.5 9B Chat", "", "01-ai/Yi-1.5-9B-Chat"),
    ("01-ai/Yi-1.5-6B-Chat", "", "01-ai/Yi-1.5-6B-Chat"),
    ("Yi-1.5-6B", "", "01-ai/Yi-1.5-6B"),  # not Yi-6B (same shapes, another release)
    ("granite-3.1-8b", "", "ibm-granite/granite-3.1-8b-instruct"),  # the base release: its instruct sibling
    ("Granite 3.1 2B Instruct", "", "ibm-granite/granite-3.1-2b-instruct"),
    ("deepseek-llm-7b", "", "deepseek-ai/deepseek-llm-7b-base"),  # the base before its chat sibling
    ("deepseek-llm-7b-chat", "", "deepseek-ai/deepseek-llm-7b-chat"),
    ("SOLAR 10.7B", "", "upstage/SOLAR-10.7B-v1.0"),
    ("upstage/SOLAR-10.7B-Instruct-v1.0", "", "upstage/SOLAR-10.7B-v1.0"),  # its instruct sibling
    ("starcoder2-3b", "", "bigcode/starcoder2-3b"),
    ("StarCoder2 15B", "", "bigcode/starcoder2-15b"),
    ("Qwen2.5-Coder-3B-Instruct", "", "Qwen/Qwen2.5-Coder-3B-Instruct"),
    ("Qwen 2.5 Coder 3B", "", "Qwen/Qwen2.5-Coder-3B"),  # not Qwen2.5-3B (same shapes, another release)
    ("Qwen3-4B-Instruct-2507", "", "Qwen/Qwen3-4B-Instruct-2507"),
    ("starcoder2 7b", "", "bigcode/starcoder2-7b"),
    ("DeepSeek R1 Distill Qwen 14B", "", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"),
    ("deepseek-r1-distill-qwen-1.5b", "", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"),
    ("unsloth/DeepSeek-R1-Distill-Qwen-32B-bnb-4bit", "", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
    ("Llama 2 70B GPTQ", "", "TheBloke/Llama-2-70B-GPTQ"),
    # organisations and re-uploads of the same weights: read by the checkpoint name
    ("NousResearch/Llama-2-7b-chat-hf", "", "meta-llama/Llama-2-7b-chat-hf"),
    ("TheBloke/Llama-2-13B-chat-fp16", "", "meta-llama/Llama-2-13b-chat-hf"),
    ("unsloth/llama-3-8b", "", "meta-llama/Meta-Llama-3-8B"),
    ("unsloth/mistral-7b-v0.3", "", "mistralai/Mistral-7B-v0.3"),
    ("unsloth/Meta-Llama-3.1-8B-Instruct", "", "meta-llama/Llama-3.1-8B-Instruct"),
    ("unsloth/llama-3-8b-bnb-4bit", "", "meta-llama/Meta-Llama-3-8B"),  # the base architecture, loaded in 4-bit
    # comments after the name
    ("meta-llama/Llama-2-7b-hf, 4-bit", "", "meta-llama/Llama-2-7b-hf"),
    ("Llama 2 7B 4-bit", "", "meta-llama/Llama-2-7b-hf"),
    # a name without a size takes the row's params_nominal
    ("Llama-2", "7B", "meta-llama/Llama-2-7b-hf"),
    ("Mistral v0.1", "7B", "mistralai/Mistral-7B-v0.1"),
]


@pytest.mark.parametrize(("written", "size", "expected"), MATCHES)
def test_spellings_match_their_record(written: str, size: str, expected: str) -> None:
    rid, note = vr.catalog_model(written, size)
    assert rid == expected
    if checkpoint_id(written) != expected:  # anything but the id itself says what was taken as what
        assert note and f"'{written}'" in note and expected in note


# (written, refusal code): ambiguous names list their candidates; other architectures are never sized instead.
REFUSED = [
    ("Llama-2", "row_ambiguous_model"),  # 7B, 13B, 70B
    ("StableLM 3B", "row_ambiguous_model"),  # base-alpha-3b (gpt_neox) vs 3b-4e1t (stablelm)
    ("Llama 70B", "row_unknown_model"),  # no generation: LLaMA 1 has 65B; Llama 2 / 3 70B are other names
    ("Llama 34B", "row_unknown_model"),  # Code Llama's 34B is not a "Llama 34B"
    ("StarCoder 7B", "row_unknown_model"),  # StarCoder is 15.5B; StarCoder2 7B is another generation
    # no sourced config.json in the catalog: never the 7B of the same line (its own 95-layer shape)
    ("deepseek-ai/deepseek-llm-67b-chat", "row_unknown_model"),
    ("OLMo-7B", "row_unknown_model"),  # olmo: a family the engine does not model
    ("Yi-1.5-9B-32K", "row_unknown_model"),  # another context release; no record (not the 4096-position 9B)
    ("OpenHermes-2-Mistral-7B", "row_unknown_model"),  # the earlier release: not the 2.5 record by name
    ("TheBloke/Llama-2-7B-GPTQ", "row_unknown_model"),  # a GPTQ checkpoint whose quantization_config is unknown
    ("TheBloke/Llama-2-7B-Chat-GGUF", "row_unknown_model"),
    ("unsloth/Llama-3.2-1B-Instruct-unsloth-bnb-4bit", "row_quantization_unsupported"),  # some layers in 16 bits
    ("google/flan-t5-xl", "row_encoder_decoder_unsupported"),
    ("t5-base", "row_encoder_decoder_unsupported"),
    ("bigscience/T0_3B", "row_encoder_decoder_unsupported"),
    ("bigscience/mt0-xxl", "row_encoder_decoder_unsupported"),
    ("facebook/bart-large", "row_encoder_decoder_unsupported"),
]


@pytest.mark.parametrize(("written", "code"), REFUSED)
def test_names_refused_with_the_reason(written: str, code: str) -> None:
    with pytest.raises(vr.RowRefused) as err:
        vr.catalog_model(written)
    assert err.value.code == code


def test_a_size_only_the_rows_params_column_states_is_held_to_the_display_name() -> None:
    # 21B is within 10 % of the 2409 release's count (22.2B) but not its display name's 22B, nor the 2501 ids' 24B
    with pytest.raises(vr.RowRefused) as err:
        vr.catalog_model("Mistral Small", "21B")
    assert err.value.code == "row_unknown_model"


@pytest.mark.parametrize(("size", "stated", "same"), [
    ("15b", 15.5, True), ("16b", 15.5, True), ("14b", 15.5, False), ("22b", 22.0, True), ("24b", 22.0, False),
    ("0.124b", 0.124, True), ("1.5b", 1.5, True), ("1.6b", 1.5, False), ("8x7b", 46.7, False),
])
def test_a_written_size_is_the_stated_one_with_fewer_digits(size: str, stated: float, same: bool) -> None:
    assert written_as(size, stated) is same


def test_ambiguous_names_list_the_candidates() -> None:
    with pytest.raises(vr.RowRefused) as err:
        vr.catalog_model("StableLM 3B")
    message = err.value.message
    assert "stabilityai/stablelm-base-alpha-3b" in message and "stabilityai/stablelm-3b-4e1t" in message


def test_releases_whose_vocabularies_barely_differ_are_one_model_with_the_difference_said() -> None:
    rid, note = vr.catalog_model("Mistral 7B")
    assert rid == "mistralai/Mistral-7B-v0.1"
    assert note is not None and "vocabularies 2.4% apart" in note and "mistralai/Mistral-7B-v0.3" in note


def test_tokens() -> None:
    name = parse("Qwen-1_8B-Chat")
    assert (name.words, name.tuned, name.sizes) == ({"qwen"}, {"chat"}, {"1.8b"})
    assert parse("bloom-7b1").sizes == {"7.1b"} and parse("SmolLM2-135M").sizes == {"0.135b"}
    assert parse("Mixtral-8x7B-v0.1").sizes == {"8x7b"} and parse("Mixtral-8x7B-v0.1").numbers == {"0.1"}
    assert parse("Qwen2.5-7B").generation == {"2.5"} and parse("Qwen2.5-7B").words == {"qwen"}
    assert parse("Mistral-Large-Instruct-2407").numbers == {"2407"}  # a date release, not a generation
    assert parse("TinyLlama-1.1B-Chat-v1.0").numbers == parse("TinyLlama 1.1B Chat v1").numbers == {"1"}
    assert parse("llama-3-8b-bnb-4bit").bnb_bits == 4


def _row(model: str, method: str, quant: str) -> dict[str, str]:
    return {"model": model, "method": method, "quantization": quant, "method_detail": "", "base_weight_dtype": ""}


def test_bnb_upload_loads_in_its_format() -> None:
    # the quantization column's 4-bit format, else nf4; another format, or full fine-tuning, is refused
    fields = vr.method_fields(_row("unsloth/llama-3-8b-bnb-4bit", "LoRA", ""))
    assert fields == {"method": "qlora", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    assert vr.method_fields(_row("unsloth/llama-3-8b-bnb-4bit", "QLoRA", "bnb fp4"))["bnb_4bit_quant_type"] == "fp4"
    for quant, method in (("int8", "LoRA"), ("none", "full")):
        with pytest.raises(vr.RowRefused) as err:
            vr.method_fields(_row("unsloth/llama-3-8b-bnb-4bit", method, quant))
        assert err.value.code == "row_inconsistent"
    # a name without the marker is unchanged
    assert vr.method_fields(_row("unsloth/llama-3-8b", "LoRA", "")) == {"method": "lora"}


def test_bnb_upload_row_estimates_as_its_base_in_4bit() -> None:
    from sizing import estimate
    from tests.unit.test_validate_rows import rows

    row = rows()["R063"]  # LitGPT QLoRA on Llama-2-7b-hf, bnb nf4
    case = vr.row_case({**row, "model": "unsloth/llama-2-7b-bnb-4bit"})
    assert case.config["model"] == "meta-llama/Llama-2-7b-hf" and case.config["load_in_4bit"] is True
    assert any("bitsandbytes 4-bit upload" in note for note in case.assumptions)
    base = vr.row_case(row).config
    assert estimate(case.config).allocated_bytes == estimate(base).allocated_bytes
