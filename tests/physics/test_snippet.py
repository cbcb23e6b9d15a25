"""The calculator's "copy the Python snippet" runs on the real stack and builds the run sizing sized.

The snippet is executed as a user would paste it, except that `from_pretrained` returns a tiny model
with random weights (no hub): the PEFT model it builds must train exactly the parameters the estimate
counted, and TrainingArguments must carry the configuration's settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from sitebuild import calculator_pages

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 160,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "max_position_embeddings": 512, "tie_word_embeddings": False}


# peft 0.21 itself still calls the transformers API that transformers 5 renamed
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.parametrize("change", [
    {"method": "qlora"},
    {"method": "lora", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], "optim": "adamw_torch_fused"},
    {"method": "lora", "use_dora": True, "gradient_checkpointing": False, "per_device_train_batch_size": 4},
    {"method": "full", "optim": "adamw_torch", "torch_dtype": "float32", "bf16": True},
])
def test_the_snippet_builds_the_estimated_run(change: dict[str, Any], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    config = {**calculator_pages.default_config(), "model": None, "model_config": TINY, "max_seq_length": 256, **change}
    result = calculator_pages.bridge().compute(config)
    assert result["ok"], result
    monkeypatch.chdir(tmp_path)  # TrainingArguments(output_dir="out")
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[config["torch_dtype"]]
    torch.manual_seed(0)
    tiny = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY)).to(dtype)
    loads: list[dict[str, Any]] = []

    def from_pretrained(name: str, **kwargs: Any) -> Any:
        loads.append({"name": name, **kwargs})
        return tiny

    # The one change to the pasted code: this machine has no GPU, and TrainingArguments refuses bf16 without one
    # unless told to train on the CPU.
    code = result["snippet"].replace('output_dir="out",', 'output_dir="out", use_cpu=True,')
    assert code != result["snippet"]
    namespace: dict[str, Any] = {}
    with mock.patch.object(transformers.AutoModelForCausalLM, "from_pretrained", side_effect=from_pretrained):
        exec(compile(code, "snippet.py", "exec"), namespace)  # our own generated code
    load = loads[0]
    assert load["dtype"] == dtype and load["attn_implementation"] == config["attn_implementation"]
    assert ("quantization_config" in load) == (config["method"] == "qlora")
    model = namespace["model"]
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == result["estimate"]["detail"]["trainable_params"]
    args = namespace["training_args"]
    assert args.per_device_train_batch_size == config["per_device_train_batch_size"]
    assert args.gradient_accumulation_steps == config["gradient_accumulation_steps"]
    assert str(args.optim.value if hasattr(args.optim, "value") else args.optim) == config["optim"]
    assert args.activation_checkpointing == config["gradient_checkpointing"] and args.bf16 == config["bf16"]
