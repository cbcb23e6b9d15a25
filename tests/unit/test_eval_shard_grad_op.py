"""FSDP SHARD_GRAD_OP in the Trainer's evaluation: a unit is resharded only in its backward, so a forward without
gradients leaves every decoder unit gathered (torch _runtime_utils._post_forward_reshard frees only under FULL_SHARD
and HYBRID_SHARD; measured on the CPU: tests/physics/test_fsdp_shard_grad_op.py). The evaluation's moments hold them
all, beyond the two units in flight that FULL_SHARD holds."""

from __future__ import annotations

from sizing import estimate

RUN = {"model": "meta-llama/Llama-3.1-8B", "method": "lora", "num_gpus": 2, "eval_strategy": "steps",
       "max_seq_length": 1024, "per_device_train_batch_size": 1, "gpu": "H100-SXM-80GB", "torch_dtype": "bfloat16",
       "bf16": True}
# Llama-3.1-8B (config.json: hidden 4096, 8 KV heads of 128, intermediate 14336, 32 layers): a decoder layer's bf16
# weights, q/k/v/o, gate/up/down and two norms; PEFT's default LoRA (r 8 on q_proj and v_proj) in fp32
LAYER = 2 * (4096 * (4096 + 1024 + 1024 + 4096) + 3 * 4096 * 14336 + 2 * 4096)
ADAPTERS = 4 * 8 * ((4096 + 4096) + (4096 + 1024))
IN_FLIGHT = 2  # sizing/parallel.py UNITS_IN_FLIGHT: the units FULL_SHARD holds gathered at once


def _eval_weights(parallelism: str) -> dict[str, int]:
    est = estimate({**RUN, "parallelism": parallelism})
    return {m.what: m.parts["weights"] for m in est.moments if m.phase == "eval"}


def test_shard_grad_op_evaluates_with_every_decoder_unit_gathered() -> None:
    sgo, full = _eval_weights("fsdp_shard_grad_op"), _eval_weights("fsdp")
    assert sgo.keys() == full.keys() and len(sgo) >= 2
    for what in sgo:
        assert sgo[what] - full[what] == (32 - IN_FLIGHT) * (LAYER + ADAPTERS), what
