#!/usr/bin/env python3
"""A short, representative fine-tuning trial that measures what the `sizing` estimate predicts.

    python trial.py CONFIG.json --data DATA.jsonl --out DIR --max-steps N
                    [--random-weights] [--tokenizer PATH] [--eval-fraction 0.1] [--seed 0]
    accelerate launch --num_processes 2 trial.py ...        # DDP / FSDP: per-GPU figures

CONFIG.json is the run configuration of the calculator (Hugging Face field names). The trial loads the base
model in the configured format, applies LoRA / DoRA (or trains all weights), trains --max-steps optimizer steps
with transformers.Trainer on the longest samples first, evaluates the held-out loss before and after, saves the
adapter, reloads it on a fresh base and checks the outputs match. DIR/report.json (report.schema.json) holds the
per-step memory, the checks, the versions and the hardware; `python -m sizing report DIR/report.json` compares
it with the estimate. The Hugging Face token is read from HF_TOKEN only; it is never printed or written.

Exit status: 0 ok, 3 out of memory, 1 any other error (the report says which).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib.metadata
import json
import math
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, cast

SCHEMA_VERSION = 1
EXIT_OK, EXIT_ERROR, EXIT_OOM = 0, 1, 3
DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
          "float32": "float32", "fp32": "float32"}
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


class SimulatedOOM(Exception):
    """Raised at step TRIAL_SIMULATE_OOM_AT_STEP (tests): handled exactly like torch.OutOfMemoryError."""


class TrialError(Exception):
    """A refusal the user can act on (bad configuration, bad data); reported without a traceback."""


# ---------------------------------------------------------------------------------------------------------------
# Secrets and output


def _token() -> str | None:
    value = os.environ.get("HF_TOKEN", "").strip()
    return value or None


def scrub(text: str) -> str:
    """Remove the token from any text that leaves the process."""
    token = _token()
    return text.replace(token, "***") if token else text


def _rank() -> tuple[int, int, int]:
    env = os.environ
    return int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")), int(env.get("LOCAL_RANK", "0"))


def progress(message: str) -> None:
    rank, world, _ = _rank()
    prefix = "[trial]" if world == 1 else f"[trial rank {rank}]"
    print(scrub(f"{prefix} {message}"), file=sys.stderr, flush=True)


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------------------------------------------------------
# Configuration and data


def read_config(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TrialError(f"cannot read the configuration {path}: {exc}") from None
    if not isinstance(data, dict):
        raise TrialError("the configuration must be a JSON object")
    method = data.get("method", "lora")
    if method not in ("full", "lora", "qlora", "lora8"):
        raise TrialError(f"method must be full, lora, qlora or lora8, not {method!r}")
    if data.get("model_config") is None and not data.get("model"):
        raise TrialError("the configuration names no model ('model' or 'model_config')")
    return data


def _quant_bits(cfg: dict[str, Any]) -> int:
    if cfg.get("method") == "qlora" or cfg.get("load_in_4bit"):
        return 4
    if cfg.get("method") == "lora8" or cfg.get("load_in_8bit"):
        return 8
    return 0


def read_jsonl(path: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TrialError(f"cannot read the data {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise TrialError(f"{path} line {number} is not valid JSON") from None
        if not isinstance(row, dict) or not ("text" in row or "messages" in row):
            raise TrialError(f'{path} line {number}: expected {{"text": ...}} or {{"messages": [...]}}')
        rows.append(row)
    if len(rows) < 2:
        raise TrialError(f"{path} holds {len(rows)} example(s); a trial needs at least 2 (train and eval)")
    return rows


def byte_tokenizer() -> Any:
    """A byte-level tokenizer made on the spot (259 ids: pad, bos, eos and the 256 bytes); nothing downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet())):
        vocab[char] = i + 3
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tokenize(rows: list[dict[str, Any]], tokenizer: Any, max_len: int) -> list[list[int]]:
    out: list[list[int]] = []
    for row in rows:
        if "messages" in row:
            if not getattr(tokenizer, "chat_template", None):
                raise TrialError("the data has 'messages' but the tokenizer has no chat template")
            text = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        else:
            text = str(row["text"])
        ids = list(tokenizer(text, add_special_tokens=True)["input_ids"])
        if tokenizer.eos_token_id is not None and (not ids or ids[-1] != tokenizer.eos_token_id):
            ids.append(tokenizer.eos_token_id)
        out.append(ids[:max_len])
    return out


def arrange(seqs: list[list[int]], max_len: int, packing: bool) -> list[list[int]]:
    """Longest first (the peak must be seen in the first steps); with packing, full blocks of max_len tokens."""
    ordered = sorted(seqs, key=len, reverse=True)
    if not packing:
        return ordered
    flat = [t for s in ordered for t in s]
    blocks = [flat[i:i + max_len] for i in range(0, len(flat), max_len)]
    return sorted(blocks, key=len, reverse=True)


class ListDataset:
    def __init__(self, seqs: list[list[int]]) -> None:
        self.seqs = seqs

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": self.seqs[i]}


def make_collator(pad_id: int) -> Any:
    import torch

    def collate(batch: list[dict[str, list[int]]]) -> dict[str, Any]:
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, b in enumerate(batch):
            seq = torch.tensor(b["input_ids"], dtype=torch.long)
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        labels = ids.masked_fill(mask == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    return collate


# ---------------------------------------------------------------------------------------------------------------
# Environment: versions, hardware, device memory


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvml() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _nvidia_smi(query: str) -> list[str] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip().splitlines() if proc.returncode == 0 else None


def versions() -> dict[str, Any]:
    import torch

    driver: str | None = None
    nvml = _nvml()
    if nvml is not None:
        try:
            raw = nvml.nvmlSystemGetDriverVersion()
            driver = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:
            driver = None
    if driver is None:
        lines = _nvidia_smi("driver_version")
        driver = lines[0].strip() if lines else None
    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "driver": driver, "transformers": _version("transformers"), "peft": _version("peft"),
            "accelerate": _version("accelerate"), "bitsandbytes": _version("bitsandbytes")}


def hardware() -> dict[str, Any]:
    import torch

    rank, world, local = _rank()
    gpus: list[dict[str, Any]] = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            prop = torch.cuda.get_device_properties(i)
            gpus.append({"index": i, "name": prop.name, "total_memory_bytes": int(prop.total_memory),
                         "compute_capability": f"{prop.major}.{prop.minor}"})
    return {"gpu_count": len(gpus), "gpus": gpus, "cpu_count": os.cpu_count() or 0,
            "platform": platform.platform(), "rank": rank, "world_size": world, "local_rank": local}


def device_used_bytes(device_index: int) -> tuple[int | None, str]:
    """Memory the driver reports (what nvidia-smi shows): this process on the GPU if it can tell, else the GPU."""
    nvml = _nvml()
    if nvml is not None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(_physical_index(device_index))
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                    return int(proc.usedGpuMemory), "pynvml: this process"
            return int(nvml.nvmlDeviceGetMemoryInfo(handle).used), "pynvml: whole GPU"
        except Exception:
            pass
    lines = _nvidia_smi("memory.used")
    if lines:
        idx = _physical_index(device_index)
        if idx < len(lines):
            return int(float(lines[idx])) * 2**20, "nvidia-smi: whole GPU"
    return None, "neither pynvml nor nvidia-smi is available"


def _physical_index(device_index: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    parts = [p.strip() for p in visible.split(",") if p.strip()]
    if parts and device_index < len(parts) and parts[device_index].isdigit():
        return int(parts[device_index])
    return device_index


# ---------------------------------------------------------------------------------------------------------------
# Models


def _dtype(name: Any) -> Any:
    import torch

    if name in (None, "auto"):
        return "auto"
    key = DTYPES.get(str(name))
    if key is None:
        raise TrialError(f"torch_dtype must be bfloat16, float16 or float32, not {name!r}")
    return getattr(torch, key)


def build_random_base(cfg: dict[str, Any], target: Path, seed: int) -> Path:
    """The architecture of model_config with random weights, saved once so every load uses the same base."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_config = cfg.get("model_config")
    if model_config is None:
        model_config = AutoConfig.from_pretrained(cfg["model"], token=_token()).to_dict()
    fields = dict(model_config)
    model_type = fields.pop("model_type", None)
    if not model_type:
        raise TrialError("model_config lacks 'model_type'")
    for key in ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config"):
        fields.pop(key, None)
    hf_config = AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    model.save_pretrained(target)
    del model
    gc.collect()
    return target


def load_base(source: str, cfg: dict[str, Any]) -> Any:
    """The base model in the configured format (the same call for training and for the reload check)."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    kwargs: dict[str, Any] = {"dtype": _dtype(cfg.get("torch_dtype", "auto")),
                              "attn_implementation": cfg.get("attn_implementation", "sdpa")}
    token = _token()
    if token:
        kwargs["token"] = token
    bits = _quant_bits(cfg)
    if bits:
        if bits == 4:
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type=cfg.get("bnb_4bit_quant_type", "fp4"),
                bnb_4bit_use_double_quant=bool(cfg.get("bnb_4bit_use_double_quant", False)),
                bnb_4bit_compute_dtype=_dtype(cfg.get("bnb_4bit_compute_dtype", "float32")),
                bnb_4bit_quant_storage=_dtype(cfg.get("bnb_4bit_quant_storage", "uint8"))
                if cfg.get("bnb_4bit_quant_storage", "uint8") != "uint8" else torch.uint8,
            )
        else:
            kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
        kwargs["device_map"] = {"": torch.cuda.current_device()} if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if bits and _prepare_kbit(cfg):
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model)  # its defaults, as the estimate assumes
    return model


def _prepare_kbit(cfg: dict[str, Any]) -> bool:
    value = cfg.get("prepare_model_for_kbit_training")
    if value is None:
        return bool(cfg.get("framework", "transformers") != "trl")
    return bool(value)


def apply_adapter(model: Any, cfg: dict[str, Any]) -> Any:
    if cfg.get("method", "lora") == "full":
        return model
    from peft import LoraConfig, get_peft_model

    targets = cfg.get("target_modules", "all-linear")
    lora = LoraConfig(r=int(cfg.get("r", 8)), lora_alpha=int(cfg.get("lora_alpha", 8)),
                      lora_dropout=float(cfg.get("lora_dropout", 0.0)), target_modules=targets,
                      use_dora=bool(cfg.get("use_dora", False)), task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


# ---------------------------------------------------------------------------------------------------------------
# Training with per-step measurements


class Recorder:
    """Per-step figures; the GPU-only ones are null with a reason when there is no GPU (never estimated)."""

    def __init__(self, max_steps: int) -> None:
        import torch

        self.cuda = torch.cuda.is_available()
        self.max_steps = max_steps
        self.steps: list[dict[str, Any]] = []
        self.tokens = 0
        self.micro_batches = 0
        self.t0 = time.perf_counter()
        self.losses: dict[int, float] = {}
        self.reason = None if self.cuda else "CUDA is not available (CPU run): GPU memory is not measured"

    def begin(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.tokens = 0
        self.micro_batches = 0
        self.t0 = time.perf_counter()

    def snapshot(self, step: int, completed: bool) -> dict[str, Any]:
        import torch

        record: dict[str, Any] = {"step": step, "completed": completed,
                                  "seconds": round(time.perf_counter() - self.t0, 6), "tokens": self.tokens,
                                  "micro_batches": self.micro_batches, "loss": self.losses.get(step),
                                  "host_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        if self.cuda:
            torch.cuda.synchronize()
            dev = torch.cuda.current_device()
            used, source = device_used_bytes(dev)
            record.update({"max_memory_allocated_bytes": int(torch.cuda.max_memory_allocated()),
                           "max_memory_reserved_bytes": int(torch.cuda.max_memory_reserved()),
                           "device_used_bytes": used, "device_source": source,
                           "reason": None if used is not None else source})
        else:
            record.update({"max_memory_allocated_bytes": None, "max_memory_reserved_bytes": None,
                           "device_used_bytes": None, "device_source": None, "reason": self.reason})
        return record

    def end(self, step: int) -> dict[str, Any]:
        record = self.snapshot(step, completed=True)
        self.steps.append(record)
        tps = record["tokens"] / record["seconds"] if record["seconds"] else 0.0
        progress(f"step {step}/{self.max_steps}: {record['seconds']:.2f} s, {record['tokens']} tokens "
                 f"({tps:,.0f}/s), peak allocated {_gib(record['max_memory_allocated_bytes'])}, "
                 f"reserved {_gib(record['max_memory_reserved_bytes'])}, device {_gib(record['device_used_bytes'])}")
        return record

    def peaks(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("max_memory_allocated_bytes", "max_memory_reserved_bytes", "device_used_bytes"):
            values = [(s[key], s["step"]) for s in self.steps if s.get(key) is not None]
            if values:
                value, step = max(values)
                out[key] = {"value": value, "step": step, "reason": None}
            else:
                out[key] = {"value": None, "step": None, "reason": self.reason or "not measured"}
        done = [s for s in self.steps if s["completed"]]
        seconds = sum(s["seconds"] for s in done)
        tokens = sum(s["tokens"] for s in done)
        out["host_max_rss_bytes"] = max((s["host_max_rss_bytes"] for s in self.steps), default=None)
        out["tokens_per_second"] = tokens / seconds if seconds else None
        # the first step builds optimizer states and warms kernels: the steady speed is from the second on
        later = done[1:]
        later_s = sum(s["seconds"] for s in later)
        out["steady_tokens_per_second"] = sum(s["tokens"] for s in later) / later_s if later_s else None
        return out


def make_trainer(model: Any, cfg: dict[str, Any], args: argparse.Namespace, train: ListDataset,
                 evalset: ListDataset, pad_id: int, recorder: Recorder) -> Any:
    import torch
    from torch.utils.data import SequentialSampler
    from transformers import Trainer, TrainerCallback, TrainingArguments

    simulate = int(os.environ.get("TRIAL_SIMULATE_OOM_AT_STEP", "0") or 0)

    class Callback(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            recorder.begin()

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            logs = kwargs.get("logs")
            if logs and "loss" in logs:
                recorder.losses[state.global_step] = float(logs["loss"])
                if recorder.steps and recorder.steps[-1]["step"] == state.global_step:
                    recorder.steps[-1]["loss"] = float(logs["loss"])

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            recorder.end(state.global_step)

    class TrialTrainer(Trainer):
        def _get_train_sampler(self, *a: Any, **kw: Any) -> Any:
            return SequentialSampler(cast(ListDataset, self.train_dataset))  # keep the longest-first order

        def training_step(self, model: Any, inputs: dict[str, Any], *a: Any, **kw: Any) -> Any:
            step = self.state.global_step + 1
            if simulate and step == simulate:
                raise SimulatedOOM(f"simulated out-of-memory at step {step} (TRIAL_SIMULATE_OOM_AT_STEP)")
            recorder.micro_batches += 1
            if "attention_mask" in inputs:
                recorder.tokens += int(inputs["attention_mask"].sum())
            return super().training_step(model, inputs, *a, **kw)

    bf16, fp16 = bool(cfg.get("bf16") or False), bool(cfg.get("fp16") or False)
    lr = args.learning_rate if args.learning_rate is not None else (2e-5 if cfg.get("method") == "full" else 2e-4)
    batch = int(cfg.get("per_device_train_batch_size", 8))
    targs = TrainingArguments(
        output_dir=str(Path(args.out) / "checkpoints"), max_steps=args.max_steps, per_device_train_batch_size=batch,
        per_device_eval_batch_size=batch, gradient_accumulation_steps=int(cfg.get("gradient_accumulation_steps", 1)),
        # transformers 5 names gradient checkpointing `activation_checkpointing` (the old name is deprecated)
        activation_checkpointing=bool(cfg.get("gradient_checkpointing", False)),
        activation_checkpointing_kwargs={"use_reentrant": False}, bf16=bf16, fp16=fp16,
        optim=cfg.get("optim", "adamw_torch_fused"), learning_rate=lr, logging_steps=1, save_strategy="no",
        eval_strategy="no", report_to=[], seed=args.seed, data_seed=args.seed, remove_unused_columns=False,
        dataloader_num_workers=0, disable_tqdm=True, prediction_loss_only=True, use_cpu=not torch.cuda.is_available(),
        warmup_steps=0, lr_scheduler_type="constant",
    )
    return TrialTrainer(model=model, args=targs, train_dataset=train, eval_dataset=evalset,
                        data_collator=make_collator(pad_id), callbacks=[Callback()])


# ---------------------------------------------------------------------------------------------------------------
# Reload check


def _fixed_inputs(evalset: ListDataset, pad_id: int, max_len: int) -> dict[str, Any]:
    seqs = [s[: min(32, max_len)] for s in evalset.seqs[:2]]
    batch: dict[str, Any] = make_collator(pad_id)([{"input_ids": s} for s in seqs])
    return batch


def _logits(model: Any, inputs: dict[str, Any], cfg: dict[str, Any]) -> Any:
    import torch

    device = next(p.device for p in model.parameters())
    batch = {k: v.to(device) for k, v in inputs.items() if k != "labels"}
    dtype = torch.bfloat16 if cfg.get("bf16") else torch.float16 if cfg.get("fp16") else None
    model.eval()
    with torch.no_grad(), torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        out = model(**batch).logits.float().cpu()
    return out * inputs["attention_mask"].unsqueeze(-1)


def tolerance(cfg: dict[str, Any]) -> tuple[float, float]:
    if cfg.get("bf16") or _quant_bits(cfg) or DTYPES.get(str(cfg.get("torch_dtype"))) == "bfloat16":
        return 5e-2, 5e-2
    if cfg.get("fp16") or DTYPES.get(str(cfg.get("torch_dtype"))) == "float16":
        return 1e-2, 1e-2
    return 1e-4, 1e-4


def adapter_state(model: Any, cfg: dict[str, Any]) -> dict[str, Any] | None:
    """A CPU copy of the trained adapter tensors (None for full fine-tuning: the logits check covers it)."""
    if cfg.get("method", "lora") == "full":
        return None
    from peft import get_peft_model_state_dict

    return {k: v.detach().to("cpu", copy=True) for k, v in get_peft_model_state_dict(model).items()}


def reload_check(saved: Path, base_source: str, cfg: dict[str, Any], reference: Any,
                 inputs: dict[str, Any], trained: dict[str, Any] | None) -> dict[str, Any]:
    """Outputs on fixed inputs after a reload on a fresh base match the trained model's (and, for an adapter,
    the reloaded adapter tensors equal the trained ones: a tiny trained delta alone could hide a failed load)."""
    import torch

    atol, rtol = tolerance(cfg)
    fresh = load_base(base_source, cfg)
    weights_equal: bool | None = None
    if cfg.get("method", "lora") != "full":
        from peft import PeftModel, get_peft_model_state_dict

        fresh = PeftModel.from_pretrained(fresh, str(saved))
        loaded = get_peft_model_state_dict(fresh)
        weights_equal = trained is not None and set(loaded) == set(trained) and all(
            torch.equal(loaded[k].detach().cpu().to(trained[k].dtype), trained[k]) for k in trained)
    else:
        from transformers import AutoModelForCausalLM

        del fresh
        fresh = AutoModelForCausalLM.from_pretrained(saved, dtype=_dtype(cfg.get("torch_dtype", "auto")))
    got = _logits(fresh, inputs, cfg)
    diff = float((got - reference).abs().max())
    close = bool(torch.allclose(got, reference, atol=atol, rtol=rtol))
    return {"reload_matches": close and weights_equal is not False, "reload_weights_equal": weights_equal,
            "reload_max_abs_diff": diff, "reload_atol": atol, "reload_rtol": rtol, "reload_reason": None}


# ---------------------------------------------------------------------------------------------------------------
# The trial


def before_train() -> dict[str, Any]:
    """GPU memory as training starts (model loaded, adapter applied, first evaluation done). The caching
    allocator keeps what it freed on the way (bf16 copies quantized to 4 bits, the evaluation's logits), so
    a step's reserved peak does not read below `reserved_bytes` even when the step itself needs less (the
    cache is released only when memory runs short)."""
    import torch

    if not torch.cuda.is_available():
        return {"allocated_bytes": None, "reserved_bytes": None,
                "reason": "CUDA is not available (CPU run): GPU memory is not measured"}
    torch.cuda.synchronize()
    return {"allocated_bytes": int(torch.cuda.memory_allocated()), "reserved_bytes": int(torch.cuda.memory_reserved()),
            "reason": None}


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, SimulatedOOM | torch.OutOfMemoryError)


def run(args: argparse.Namespace, report: dict[str, Any], recorder_box: list[Recorder]) -> None:
    import torch

    out = Path(args.out)
    cfg = report["config"]
    rank, world, local_rank = _rank()
    if world > 1 and torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # one GPU per process; the 4-/8-bit base is placed on it
    report["versions"] = versions()
    report["hardware"] = hardware()
    if not torch.cuda.is_available():
        progress("no CUDA device: the trial runs on the CPU, GPU memory figures will be null")
    rows = read_jsonl(args.data)

    # base model source
    if args.random_weights:
        base = out / "random-base"
        if rank == 0:
            progress(f"building {cfg.get('model') or 'model_config'} with random weights")
            build_random_base(cfg, base, args.seed)
        if world > 1:  # the other ranks wait until rank 0 has written the random base
            if not torch.distributed.is_initialized():
                torch.distributed.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
            torch.distributed.barrier()
        base_source = str(base)
    else:
        base_source = cfg.get("model") or ""
        if not base_source:
            raise TrialError("no 'model' to load: give a hub id or a local path, or use --random-weights")

    # tokenizer and data
    from transformers import AutoTokenizer

    if args.tokenizer:
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, token=_token())
    elif args.random_weights:
        tokenizer = byte_tokenizer()
    else:
        tokenizer = AutoTokenizer.from_pretrained(base_source, token=_token())
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    max_len = int(cfg.get("max_seq_length", 1024))
    order = list(range(len(rows)))
    random.Random(args.seed).shuffle(order)
    n_eval = min(len(rows) - 1, max(1, round(len(rows) * args.eval_fraction)))
    eval_rows = [rows[i] for i in order[:n_eval]]
    train_rows = [rows[i] for i in order[n_eval:]]
    packing = bool(cfg.get("packing", False))
    train = ListDataset(arrange(tokenize(train_rows, tokenizer, max_len), max_len, packing))
    evalset = ListDataset(arrange(tokenize(eval_rows, tokenizer, max_len), max_len, packing))
    lengths = [len(s) for s in train.seqs]
    report["data"] = {"train_sequences": len(train), "eval_sequences": len(evalset),
                      "longest_train_tokens": max(lengths), "max_seq_length": max_len, "packing": packing,
                      "order": "longest first"}
    progress(f"data: {len(train)} train / {len(evalset)} eval sequences, longest {max(lengths)} tokens "
             f"(max_seq_length {max_len})")

    # model
    progress(f"loading the base ({cfg.get('method', 'lora')}, {_quant_bits(cfg) or 'no'}-bit quantization)")
    model = apply_adapter(load_base(base_source, cfg), cfg)
    vocab = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > vocab:
        raise TrialError(f"the tokenizer has {len(tokenizer)} tokens but the model only {vocab}")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    report["model"] = {"source": "random weights" if args.random_weights else base_source,
                       "trainable_parameters": int(trainable),
                       "parameters": int(sum(p.numel() for p in model.parameters()))}
    recorder = Recorder(args.max_steps)
    recorder_box.append(recorder)
    trainer = make_trainer(model, cfg, args, train, evalset, tokenizer.pad_token_id, recorder)

    progress("evaluating the held-out loss before training")
    report["checks"]["eval_loss_before"] = float(trainer.evaluate()["eval_loss"])
    progress(f"eval loss before: {report['checks']['eval_loss_before']:.4f}; training {args.max_steps} steps")
    report["measurements"]["before_train"] = before_train()
    report["phase"] = "train"
    trainer.train()
    report["measurements"]["steps"] = recorder.steps
    report["measurements"]["peaks"] = recorder.peaks()
    report["phase"] = "eval"
    report["checks"]["eval_loss_after"] = float(trainer.evaluate()["eval_loss"])
    progress(f"eval loss after: {report['checks']['eval_loss_after']:.4f}")

    # save, then reload on a fresh base and compare outputs on fixed inputs
    report["phase"] = "save"
    saved = out / ("model" if cfg.get("method") == "full" else "adapter")
    trainer.save_model(str(saved))
    if rank == 0:
        tokenizer.save_pretrained(str(saved))
    report["saved"] = str(saved.name)
    report["phase"] = "reload"
    inputs = _fixed_inputs(evalset, tokenizer.pad_token_id, max_len)
    sharded = bool(getattr(trainer, "is_fsdp_enabled", False))
    reference = _logits(trainer.model, inputs, cfg) if rank == 0 and not sharded else None
    trained = adapter_state(trainer.model, cfg) if rank == 0 and not sharded else None
    del trainer, model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if sharded:
        report["checks"]["reload_reason"] = ("not checked under FSDP (the weights are sharded): rerun the saved "
                                             "adapter check in one process")
    elif rank == 0:
        progress("reloading the saved weights on a fresh base")
        report["checks"].update(reload_check(saved, base_source, cfg, reference, inputs, trained))
        progress(f"reload matches: {report['checks']['reload_matches']} "
                 f"(max |diff| {report['checks']['reload_max_abs_diff']:.2e})")
    else:
        report["checks"]["reload_reason"] = "checked by rank 0 only"
    report["phase"] = "done"


def new_report(args: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    rank, world, _ = _rank()
    return {
        "schema_version": SCHEMA_VERSION, "status": "error", "message": "", "failure": None,
        "started_at": _now(), "finished_at": None, "rank": rank, "world_size": world,
        "trial": {"max_steps": args.max_steps, "eval_fraction": args.eval_fraction, "seed": args.seed,
                  "random_weights": bool(args.random_weights), "learning_rate": args.learning_rate},
        "config": cfg, "data": None, "model": None, "saved": None, "phase": "setup",
        "measurements": {"steps": [], "peaks": None},
        "checks": {"reload_matches": None, "reload_weights_equal": None, "reload_max_abs_diff": None,
                   "reload_atol": None, "reload_rtol": None, "reload_reason": "not reached",
                   "eval_loss_before": None, "eval_loss_after": None},
        "versions": None, "hardware": None,
    }


def write_report(out: Path, report: dict[str, Any]) -> Path:
    rank = report["rank"]
    name = "report.json" if rank == 0 else f"report.rank{rank}.json"
    path = out / name
    text = scrub(json.dumps(report, indent=2, default=str, allow_nan=False))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _sanitize(value: Any) -> Any:
    """JSON has no NaN / infinity: a non-finite loss is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _sanitize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sanitize(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("config", help="the run configuration JSON (the calculator's export)")
    parser.add_argument("--data", required=True, help='JSONL: {"text": ...} or {"messages": [...]} per line')
    parser.add_argument("--out", required=True, help="output folder: report.json, the adapter, logs")
    parser.add_argument("--max-steps", type=int, required=True, help="optimizer steps to train")
    parser.add_argument("--random-weights", action="store_true", help="the architecture with random weights")
    parser.add_argument("--tokenizer", default=None, help="tokenizer path or id (default: the model's)")
    parser.add_argument("--eval-fraction", type=float, default=0.1, help="share of examples held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=None, help="default 2e-4 (LoRA), 2e-5 (full)")
    args = parser.parse_args(argv)
    if args.max_steps < 1 or not 0 < args.eval_fraction < 1:
        parser.error("--max-steps must be at least 1 and --eval-fraction between 0 and 1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)  # renamed arguments in transformers 5
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        cfg = read_config(args.config)
    except TrialError as exc:
        progress(f"error: {exc}")
        return EXIT_ERROR
    report = new_report(args, cfg)
    recorder_box: list[Recorder] = []
    code = EXIT_ERROR
    try:
        run(args, report, recorder_box)
        report["status"], report["message"] = "ok", "trial completed"
        code = EXIT_OK
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            report["message"] = "interrupted"
        elif _is_oom(exc):
            code = EXIT_OOM
            recorder = recorder_box[0] if recorder_box else None
            step = (recorder.steps[-1]["step"] + 1 if recorder and recorder.steps else 1) \
                if report["phase"] == "train" else None
            partial = recorder.snapshot(step or 0, completed=False) if recorder else None
            if recorder and partial and report["phase"] == "train":
                recorder.steps.append(partial)
            if recorder:
                report["measurements"]["steps"] = recorder.steps
                report["measurements"]["peaks"] = recorder.peaks()
            peak = partial.get("max_memory_allocated_bytes") if partial else None
            where = f"step {step}" if step else f"the {report['phase']} phase"
            report["status"] = "oom"
            report["message"] = (f"out of memory at {where}: peak allocated in that step {_gib(peak)}"
                                 f"{' (no GPU: not measured)' if peak is None else ''}; {exc}").strip()
            report["failure"] = {"kind": "out_of_memory", "phase": report["phase"], "step": step,
                                 "exception": type(exc).__name__, "peak_allocated_bytes": peak,
                                 "peak_reserved_bytes": partial.get("max_memory_reserved_bytes") if partial else None}
        else:
            report["message"] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, TrialError) else str(exc)
            report["failure"] = {"kind": "error", "phase": report["phase"], "step": None,
                                 "exception": type(exc).__name__, "peak_allocated_bytes": None,
                                 "peak_reserved_bytes": None}
            if not isinstance(exc, TrialError):
                (out / "error-traceback.txt").write_text(scrub(traceback.format_exc()), encoding="utf-8")
    report["finished_at"] = _now()
    path = write_report(out, _sanitize(report))
    progress(f"{report['status']}: {report['message']}")
    if report["status"] == "error" and (out / "error-traceback.txt").exists():
        progress(f"the traceback is in {out / 'error-traceback.txt'}")
    progress(f"report: {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
