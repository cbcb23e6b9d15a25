# The checks that can fail: the saved weights reload bit for bit, the outputs match, the untrained base differs.
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .data import ListDataset, collate
from .model import device_map, load_base, torch_dtype

EMPTY_CHECKS: dict[str, Any] = {
    "reload_matches": None, "reload_weights_equal": None, "reload_weights_compared": None,
    "reload_weights_differing": None, "reload_max_abs_diff": None, "reload_atol": None, "reload_rtol": None,
    "base_differs": None, "base_max_abs_diff": None, "reload_reason": "not reached",
    "eval_loss_before": None, "eval_loss_after": None, "failed": [],
}


def fixed_inputs(evalset: ListDataset, pad_id: int) -> dict[str, Any]:
    """Two held-out sequences (at most 32 tokens each): the inputs every logits comparison uses."""
    return collate([{"input_ids": s[:32]} for s in evalset.seqs[:2]], pad_id)


def logits(model: Any, inputs: Mapping[str, Any], cfg: Mapping[str, Any]) -> Any:
    """fp32 logits on the CPU, zero at padding, under the training's autocast."""
    import torch

    device = next(p.device for p in model.parameters())
    batch = {k: v.to(device) for k, v in inputs.items() if k != "labels"}
    dtype = torch.bfloat16 if cfg["bf16"] else torch.float16 if cfg["fp16"] else None
    was_training = model.training
    model.eval()
    with torch.no_grad(), torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        out = model(**batch).logits.float().cpu()
    model.train(was_training)
    return out * inputs["attention_mask"].unsqueeze(-1)


def tolerance(cfg: Mapping[str, Any]) -> tuple[float, float]:
    """Logits tolerance of the compute dtype (a reload reorders no arithmetic, but kernels may differ)."""
    if cfg["bf16"] or cfg["load_in_4bit"] or cfg["load_in_8bit"] or cfg["torch_dtype"] == "bfloat16":
        return 5e-2, 5e-2
    if cfg["fp16"] or cfg["torch_dtype"] == "float16":
        return 1e-2, 1e-2
    return 1e-4, 1e-4


def _digest(tensor: Any, dtype: Any = None) -> str:
    import torch

    t = tensor.detach()
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    raw = t.cpu().contiguous().reshape(-1).view(torch.uint8)
    return f"{t.dtype}:{tuple(tensor.shape)}:" + hashlib.sha256(raw.numpy().tobytes()).hexdigest()


def weights(model: Any, cfg: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """name -> (digest, dtype) of what is saved: the adapter's tensors, or the full state dict."""
    if cfg["method"] == "full":
        state = model.state_dict()
    else:
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(model)
    return {k: (_digest(v), v.dtype) for k, v in state.items()}


def compare_weights(expected: Mapping[str, tuple[str, Any]], got_model: Any, cfg: Mapping[str, Any]) -> list[str]:
    """Names whose reloaded tensor is not bit-identical (in the saved dtype) to the trained one, plus missing
    and unexpected names; an empty list is a match."""
    if cfg["method"] == "full":
        state = got_model.state_dict()
    else:
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(got_model)
    bad = sorted(set(expected) ^ set(state))
    bad += sorted(k for k in expected if k in state and _digest(state[k], expected[k][1]) != expected[k][0])
    return bad


def reload(saved: Path, base_source: str, cfg: Mapping[str, Any]) -> Any:
    """The saved weights on a fresh base, on this process's device, as a user would load them."""
    if os.environ.get("TRIAL_TEST_BREAK_RELOAD"):  # tests: a reload that returns the untrained start
        from .model import apply_adapter

        return apply_adapter(load_base(base_source, cfg), cfg)
    if cfg["method"] == "full":
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(saved, dtype=torch_dtype(cfg["torch_dtype"]),
                                                    attn_implementation=cfg["attn_implementation"],
                                                    device_map=device_map())
    from peft import PeftModel

    return PeftModel.from_pretrained(load_base(base_source, cfg), str(saved))


def reload_check(saved: Path, base_source: str, cfg: Mapping[str, Any], reference: Any, base_logits: Any,
                 inputs: Mapping[str, Any], trained: Mapping[str, tuple[str, Any]],
                 initial: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """Reload and compare: every saved tensor bit for bit and the logits within the dtype's tolerance; the
    negative control is the untrained start, whose tensors must differ (else the check proves nothing)."""
    import torch

    atol, rtol = tolerance(cfg)
    fresh = reload(saved, base_source, cfg)
    differing = compare_weights(trained, fresh, cfg)
    got = logits(fresh, inputs, cfg)
    diff = float((got - reference).abs().max())
    close = bool(torch.allclose(got, reference, atol=atol, rtol=rtol))
    unchanged = [k for k in trained if k in initial and initial[k][0] == trained[k][0]]
    base_diff = float((base_logits - reference).abs().max())
    failed = []
    if differing:
        failed.append(f"reload: {len(differing)} of {len(trained)} saved tensor(s) differ after the reload "
                      f"(first: {differing[0]})")
    if not close:
        failed.append(f"reload: logits differ by up to {diff:.3g} (tolerance {atol:g})")
    if len(unchanged) == len(trained):
        failed.append("negative control: training left every saved tensor equal to the untrained start, so "
                      "the reload check cannot tell a trained model from the base")
    return {"reload_matches": not differing and close, "reload_weights_equal": not differing,
            "reload_weights_compared": len(trained), "reload_weights_differing": differing[:20],
            "reload_max_abs_diff": diff, "reload_atol": atol, "reload_rtol": rtol,
            "base_differs": len(unchanged) < len(trained), "base_max_abs_diff": base_diff, "reload_reason": None,
            "failed": failed}
