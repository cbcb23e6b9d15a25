"""Static bytes of one step: parameters, trainable count, gradients, AdamW states (memory-model.md
sections 1, 3, 4), measured on tiny Llama / Qwen2 / Qwen3 / Gemma / OLMo 2 models on CPU."""

from __future__ import annotations

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(
        _mod,
        reason=f"physics tests need {_mod} (and the rest of the pinned CPU stack): "
        "pip install -r requirements-physics.txt",
    )

import harness  # noqa: E402

pytestmark = pytest.mark.physics

REL = 0.02


CASES = harness.static_cases() + [c for c in harness.olmo2_cases() if c[2] == 0.0 and not c[3]]


@pytest.mark.parametrize("case", CASES, ids=harness.case_id)
def test_param_bytes(case, measure, estimated):
    """Every `model.parameters()` tensor at its storage dtype: bf16 base weights (embeddings, q/k/v/o
    and gate/up/down weights, Qwen2 q/k/v biases, Qwen3 q_norm/k_norm weights, RMSNorm weights),
    the lm_head weight unless tied (Gemma: counted once), LoRA A/B in the adapter dtype, NF4
    `Params4bit` packed uint8 (n/2 bytes; the absmax/code quant state is not a parameter), and the
    fp32 up-cast of every non-4-bit param by prepare_model_for_kbit_training."""
    measured = measure(case)
    harness.compare(
        "param_bytes",
        case,
        measured["param_bytes"],
        estimated(case).get("param_bytes"),
        REL,
        f"params by dtype {measured['params_by_dtype']}; bnb quant state (not counted) "
        f"{measured['quant_state_bytes']} B",
    )


@pytest.mark.parametrize("case", CASES, ids=harness.case_id)
def test_trainable_params(case, measure, estimated):
    """Count of elements with requires_grad: all params for full FT (tied embedding once), else
    LoRA A [r, in] + B [out, r] on every nn.Linear except lm_head (all-linear)."""
    measured = measure(case)
    harness.compare("trainable_params", case, measured["trainable_params"], estimated(case).get("trainable_params"), 0)


@pytest.mark.parametrize("case", CASES, ids=harness.case_id)
def test_gradient_bytes(case, measure, estimated):
    """`p.grad` right after backward, one per trainable param, in the param's dtype (AccumulateGrad):
    bf16 for full FT on bf16 weights, fp32 for PEFT-default fp32 adapters, bf16 for bf16 adapters."""
    measured = measure(case)
    harness.compare(
        "gradient_bytes",
        case,
        measured["gradient_bytes"],
        estimated(case).get("gradient_bytes"),
        REL,
        f"grad dtypes {measured['grad_dtypes']}",
    )


@pytest.mark.parametrize("case", CASES, ids=harness.case_id)
def test_optimizer_state_bytes(case, measure, estimated):
    """torch fused AdamW `exp_avg` and `exp_avg_sq` (zeros_like(p): the param's dtype) per trainable
    tensor after the first optimizer.step(); the scalar `step` tensors are excluded."""
    measured = measure(case)
    harness.compare(
        "optimizer_state_bytes",
        case,
        measured["optimizer_state_bytes"],
        estimated(case).get("optimizer_state_bytes"),
        REL,
    )


@pytest.mark.parametrize("case", [c for c in CASES if harness.REGIMES[c[1]][0] == "qlora"], ids=harness.case_id)
def test_quant_state_bytes(case, measure, estimated):
    """bitsandbytes NF4 + double-quant state, which is not a parameter: per quantized Linear the uint8
    absmax (one per 64-value block), the fp32 second-level absmax (one per 256 absmax), the fp32
    offset, the 16-entry fp32 NF4 code and the 256-entry fp32 state2 code (copied per tensor)."""
    measured = measure(case)
    harness.compare(
        "quant_state_bytes", case, measured["quant_state_bytes"], estimated(case).get("quant_state_bytes"), REL
    )
