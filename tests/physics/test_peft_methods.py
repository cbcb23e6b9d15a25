"""PEFT tuners other than LoRA: the engine's trainable parameter count against PEFT's own
model.get_nb_trainable_parameters() on tiny random Llama / Qwen2 / Qwen3 models built from a config."""

from __future__ import annotations

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

QV, KVD = ["q_proj", "v_proj"], ["k_proj", "v_proj", "down_proj"]
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

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
}


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
    assert est.confidence == "low" and any(w["code"] == "peft_method_approximate" for w in est.warnings)
