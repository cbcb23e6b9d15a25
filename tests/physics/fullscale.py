"""Full-scale oracle: one real-size training step traced under FakeTensorMode (no memory allocated).

The model is built from a config of sizing/data/models.json with random (meta) weights, LoRA is applied
by peft on the meta device, then every parameter and buffer is replaced by a FakeTensor on "cpu" (same
dtype, shape, requires_grad; tied weights stay tied). Two steps then run as transformers.Trainer(bf16=True)
runs them: forward under torch.autocast("cpu", bf16) + accelerate's convert_to_fp32, loss from
model(**batch, labels=...), backward, clip_grad_norm_(1.0), fused AdamW step, zero_grad(set_to_none=True).
harness.LiveMem (weakrefs on storages, like torch.distributed._tools.mem_tracker.MemTracker) counts the
live bytes; FakeTensor storages report their real nbytes, so the peak is the allocated peak a CUDA run
would have minus 512 B rounding and kernel workspaces (memory-model.md section 10).

Why not MemTracker itself: in torch 2.13 its pre-forward hook calls param.register_hook() on every
parameter of the module, which raises "cannot register a hook on a tensor that doesn't require gradient"
for the frozen base weights of a LoRA model (mem_tracker.py _track_module_params_and_buffers).
Why not build under FakeTensorMode directly: peft's _move_adapter_to_device_of_base_layer calls
module.to(), which swaps FakeTensor parameters (torch.utils.swap_tensors) and fails with
"Cannot swap t1 because it has weakref associated with it".

Run it alone to print the table:  python tests/physics/fullscale.py [--all]
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import transformers  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

transformers.logging.set_verbosity_error()

MODELS_JSON = Path(__file__).resolve().parents[2] / "sizing" / "data" / "models.json"
LORA_R, LORA_ALPHA = 16, 32

# (model id, method, gradient checkpointing, attention, seq, batch); the first is the default-run case
CASES = [
    ("meta-llama/Llama-3.2-1B", "lora", False, "sdpa", 1024, 1),
    ("meta-llama/Llama-3.2-1B", "lora", True, "sdpa", 1024, 1),
    ("meta-llama/Llama-3.2-1B", "lora", False, "eager", 1024, 1),
    ("meta-llama/Llama-3.2-1B", "full", False, "sdpa", 1024, 1),
    ("meta-llama/Llama-3.2-1B", "full", True, "sdpa", 1024, 1),
    ("Qwen/Qwen2.5-1.5B", "lora", False, "sdpa", 1024, 2),
    ("Qwen/Qwen2.5-1.5B", "full", True, "sdpa", 1024, 2),
    ("meta-llama/Llama-3.1-8B", "lora", True, "sdpa", 2048, 1),
    ("meta-llama/Llama-3.1-8B", "full", True, "sdpa", 2048, 1),
]


# Tiny configs for the oracle's self-check (fake trace == real trace): harness.py's styles, larger vocab
TINY = {f"tiny-{k}": dict(harness.MODEL_CONFIGS[k]) for k in ("llama", "gemma")}


def model_config(model_id: str) -> dict:
    """The HF config dict of a catalogued model (exactly what the engine receives as model_config)."""
    if model_id in TINY:
        return dict(TINY[model_id])
    models = json.loads(MODELS_JSON.read_text())["models"]
    return dict(next(m for m in models if m["id"] == model_id)["config"])


def _hf_config(cfgd: dict):
    c = dict(cfgd)
    model_type = c.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype", "transformers_version"):
        c.pop(k, None)
    return transformers.AutoConfig.for_model(model_type, **c)


def engine_config(model_id: str, method: str, gc_on: bool, attn: str, seq: int, batch: int) -> dict:
    """The sizing.load_config input that describes the traced run."""
    cfg = {
        "model_config": model_config(model_id), "method": method, "torch_dtype": "bfloat16", "bf16": True,
        "max_seq_length": seq, "per_device_train_batch_size": batch, "packing": True,
        "gradient_checkpointing": gc_on, "attn_implementation": attn, "optim": "adamw_torch_fused",
        "framework": "transformers",
    }
    if method == "lora":
        cfg.update({"r": LORA_R, "lora_alpha": LORA_ALPHA, "lora_dropout": 0.0, "target_modules": "all-linear",
                    "adapter_dtype": "float32"})
    return cfg


class PhaseMem(harness.LiveMem):
    """LiveMem that also remembers the phase (forward/backward/optimizer) and the op of its peak."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "start"
        self.at_peak = ("start", "")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = self.peak
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.peak > before:
            self.at_peak = (self.phase, str(func))
        return out


def _to_fake(model: torch.nn.Module) -> None:
    """Replace every meta parameter/buffer by a FakeTensor on cpu (call inside FakeTensorMode); shared
    tensors (tied embeddings) are replaced by one shared tensor."""
    memo: dict[int, torch.Tensor] = {}
    for mod in model.modules():
        for k, p in list(mod._parameters.items()):
            if p is not None:
                if id(p) not in memo:
                    memo[id(p)] = torch.nn.Parameter(torch.empty(p.shape, dtype=p.dtype, device="cpu"),
                                                     requires_grad=p.requires_grad)
                mod._parameters[k] = memo[id(p)]
        for k, b in list(mod._buffers.items()):
            if b is not None:
                if id(b) not in memo:
                    memo[id(b)] = torch.empty(b.shape, dtype=b.dtype, device="cpu")
                mod._buffers[k] = memo[id(b)]


def build_meta(model_id: str, method: str, gc_on: bool, attn: str, device: str = "meta") -> torch.nn.Module:
    """The configured model on the meta device (or a real one on "cpu"): bf16 weights, checkpointing as the
    Trainer enables it, LoRA."""
    torch.manual_seed(0)
    with torch.device(device):
        m = transformers.AutoModelForCausalLM.from_config(
            _hf_config(model_config(model_id)), attn_implementation=attn, dtype=torch.bfloat16)
        if gc_on:  # TrainingArguments(gradient_checkpointing=True): non-reentrant (transformers 5 default)
            m.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        if method == "lora":
            from peft import LoraConfig, get_peft_model

            lc = LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules="all-linear")
            m = get_peft_model(m, lc)  # autocast_adapter_dtype=True: fp32 adapters (PEFT default)
            if gc_on:
                m.enable_input_require_grads()
    m.train()
    return m


def trace(model_id: str, method: str, gc_on: bool, attn: str, seq: int, batch: int, fake: bool = True) -> dict:
    """Trace two Trainer-like steps under FakeTensorMode (fake=False: with real tensors, for small models);
    bytes of the live tensors at the peaks."""
    import contextlib

    from accelerate.utils import convert_to_fp32

    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = build_meta(model_id, method, gc_on, attn, "meta" if fake else "cpu")
            with FakeTensorMode() if fake else contextlib.nullcontext():
                if fake:
                    _to_fake(m)
                params = list(m.parameters())
                trainable = [p for p in params if p.requires_grad]
                opt = torch.optim.AdamW(trainable, lr=1e-4, fused=True)  # optim="adamw_torch_fused"
                vocab = model_config(model_id)["vocab_size"]
                ids = torch.randint(0, vocab, (batch, seq))
                # No attention_mask: an all-ones mask is what an unpadded batch carries, and transformers then
                # drops it (masking_utils._ignore_causal_mask_sdpa -> SDPA is_causal, GQA without repeat_kv).
                # A FAKE ones mask cannot be read, so is_tracing() keeps a materialized mask, which makes
                # sdpa_attention.use_gqa_in_sdpa False and saves repeat_kv copies a real run does not have.
                inputs = dict(input_ids=ids, labels=ids.clone())
                tracker = PhaseMem()
                for t in params + list(m.buffers()) + list(inputs.values()):
                    tracker.add(t)
                static = tracker.cur
                peaks, where = [], []
                with tracker:
                    for _ in range(2):
                        tracker.peak = tracker.cur
                        tracker.phase = "forward"
                        with torch.autocast("cpu", dtype=torch.bfloat16):  # accelerate mixed_precision="bf16"
                            out = convert_to_fp32(m(**inputs))
                        loss = out.loss
                        del out
                        tracker.phase = "backward"
                        loss.backward()
                        del loss
                        tracker.phase = "optimizer"
                        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                        peaks.append(tracker.peak)
                        where.append(tracker.at_peak)
    finally:
        torch.set_num_threads(threads)
    return dict(static_bytes=static, step0_peak=peaks[0], step1_peak=peaks[1], peak_bytes=max(peaks),
                peak_at=where[peaks.index(max(peaks))], step=peaks.index(max(peaks)),
                trainable_params=sum(p.numel() for p in trainable), seconds=time.perf_counter() - t0)


def estimate(case: tuple) -> dict:
    """The engine's allocated peak for the case (CPU kernels), its cuBLAS workspace part and its moment."""
    import sizing

    est = sizing.estimate(sizing.load_config(engine_config(*case)), backend="cpu")
    pk = est.peak_moment
    return dict(allocated=est.allocated_bytes, workspace=pk.parts.get("workspace", 0),
                moment=f"step {pk.step} {pk.phase}: {pk.what}")


def case_id(case: tuple) -> str:
    model_id, method, gc_on, attn, seq, batch = case
    return f"{model_id.split('/')[-1]}-{method}-{attn}-{'ckpt' if gc_on else 'nockpt'}-S{seq}xB{batch}"


def error(traced: dict, est: dict) -> float:
    """Relative error of the engine's allocated peak less its workspace (kernel workspaces are not tensors
    the tracker sees, memory-model.md section 10) against the traced peak."""
    return (est["allocated"] - est["workspace"] - traced["peak_bytes"]) / traced["peak_bytes"]


def row(case: tuple, r: dict, e: dict) -> str:
    """One markdown row of the oracle table."""
    gib = 2**30
    phase, op = r["peak_at"]
    return (f"| {case_id(case)} | {r['peak_bytes'] / gib:.3f} | step {r['step']} {phase} ({op}) | "
            f"{e['allocated'] / gib:.3f} | {(e['allocated'] - e['workspace']) / gib:.3f} | {e['moment']} | "
            f"{100 * error(r, e):+.2f} | {r['seconds']:.0f} |")


HEADER = ("| case | traced peak GiB | traced peak at | engine allocated GiB | engine - workspace GiB | engine peak at "
          "| error % | s |\n|---|---|---|---|---|---|---|---|")


def main() -> None:
    import peft

    sel = CASES if "--all" in sys.argv else CASES[:1]
    print(f"torch {torch.__version__}  transformers {transformers.__version__}  peft {peft.__version__}")
    print(HEADER)
    for c in sel:
        r = trace(*c)
        print(row(c, r, estimate(c)), flush=True)


if __name__ == "__main__":
    main()
