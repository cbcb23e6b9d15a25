# Per-step measurements: time after the GPU has finished, peaks since the step's start, driver memory, tokens.
from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import Any

from .env import device_used_bytes, gib, progress

NO_CUDA = "CUDA is not available (CPU run): GPU memory is not measured"
PEAK_KEYS = ("max_memory_allocated_bytes", "max_memory_reserved_bytes", "device_used_bytes")


class Recorder:
    """Per-step figures; the GPU-only ones are null with a reason when there is no GPU (never estimated).

    `steps` is the report's own list, and `on_record` rewrites the report after every step, so whatever
    stops the run later leaves every measured step on disk."""

    def __init__(self, max_steps: int, steps: list[dict[str, Any]], on_record: Callable[[], None]) -> None:
        import torch

        self.cuda = torch.cuda.is_available()
        self.max_steps = max_steps
        self.steps = steps
        self.on_record = on_record
        self.tokens = 0
        self.micro_batches = 0
        self.t0: float | None = None
        self.reason = None if self.cuda else NO_CUDA
        self.training = False  # inside trainer.train(): an evaluation then is the configured pass (evaluated)

    def begin(self) -> None:
        """The step starts: the GPU is idle, the peaks are reset, the clock starts."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.tokens = 0
        self.micro_batches = 0
        self.t0 = time.perf_counter()

    def count(self, inputs: dict[str, Any]) -> None:
        """One micro-batch: its non-pad tokens (the attention mask; padding-free batches have no padding)."""
        self.micro_batches += 1
        mask = inputs.get("attention_mask")
        ids = inputs.get("input_ids")
        if mask is not None:
            self.tokens += int(mask.sum())
        elif ids is not None:
            self.tokens += int(ids.numel())

    def snapshot(self, step: int, completed: bool) -> dict[str, Any]:
        """The figures of the step so far; the clock is read after the GPU has finished its queued work."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - self.t0 if self.t0 is not None else 0.0
        record: dict[str, Any] = {"step": step, "completed": completed, "seconds": round(seconds, 6),
                                  "tokens": self.tokens, "micro_batches": self.micro_batches, "loss": None,
                                  "host_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        if self.cuda:
            used, source = device_used_bytes(torch.cuda.current_device())
            record.update({"max_memory_allocated_bytes": int(torch.cuda.max_memory_allocated()),
                           "max_memory_reserved_bytes": int(torch.cuda.max_memory_reserved()),
                           "device_used_bytes": used, "device_source": source,
                           "reason": None if used is not None else source})
        else:
            record.update({"max_memory_allocated_bytes": None, "max_memory_reserved_bytes": None,
                           "device_used_bytes": None, "device_source": None, "reason": self.reason})
        return record

    def end(self, step: int) -> None:
        """The optimizer step is done: record it and rewrite the report."""
        record = self.snapshot(step, completed=True)
        self.steps.append(record)
        self.t0 = None
        tps = record["tokens"] / record["seconds"] if record["seconds"] else 0.0
        progress(f"step {step}/{self.max_steps}: {record['seconds']:.2f} s, {record['tokens']} tokens "
                 f"({tps:,.0f}/s), peak allocated {gib(record['max_memory_allocated_bytes'])}, "
                 f"reserved {gib(record['max_memory_reserved_bytes'])}, device {gib(record['device_used_bytes'])}")
        self.on_record()

    def evaluated(self, step: int, accuracy: float | None = None) -> None:
        """The evaluation pass that followed step `step` (eval_strategy): its peaks join the step's, measured since
        the step began (the Trainer evaluates after on_step_end, before the next step resets the peaks); `accuracy`:
        what compute_metrics returned, when it ran."""
        import torch

        record = self.steps[-1] if self.steps else None
        if record is None or record["step"] != step:
            return
        record["evaluated"] = True
        if accuracy is not None:
            record["eval_token_accuracy"] = accuracy
        if self.cuda:
            torch.cuda.synchronize()
            for key, now in (("max_memory_allocated_bytes", torch.cuda.max_memory_allocated()),
                             ("max_memory_reserved_bytes", torch.cuda.max_memory_reserved())):
                record[key] = max(record[key] or 0, int(now))
        self.on_record()

    def loss(self, step: int, value: float) -> None:
        """The logged training loss of a recorded step."""
        for record in reversed(self.steps):
            if record["step"] == step:
                record["loss"] = value
                break

    def partial(self) -> dict[str, Any] | None:
        """The unfinished step when the run stops inside one (None between steps)."""
        if self.t0 is None:
            return None
        last = self.steps[-1]["step"] if self.steps else 0
        record = self.snapshot(last + 1, completed=False)
        self.steps.append(record)
        self.t0 = None
        return record


def peaks(steps: list[dict[str, Any]], reason: str | None) -> dict[str, Any]:
    """The highest figure over the steps (and which step), host RSS and tokens per second."""
    out: dict[str, Any] = {}
    for key in PEAK_KEYS:
        values = [(s[key], s["step"]) for s in steps if s.get(key) is not None]
        if values:
            value, step = max(values)
            out[key] = {"value": value, "step": step, "reason": None}
        else:
            out[key] = {"value": None, "step": None, "reason": reason or "not measured"}
    done = [s for s in steps if s["completed"]]
    seconds = sum(s["seconds"] for s in done)
    out["host_max_rss_bytes"] = max((s["host_max_rss_bytes"] for s in steps), default=None)
    out["tokens_per_second"] = sum(s["tokens"] for s in done) / seconds if seconds else None
    # the first step builds optimizer states and warms kernels: the steady speed is from the second on
    later = done[1:]
    later_s = sum(s["seconds"] for s in later)
    out["steady_tokens_per_second"] = sum(s["tokens"] for s in later) / later_s if later_s else None
    return out


def before_train() -> dict[str, Any]:
    """GPU memory as training starts (model loaded, adapter applied, first evaluation done). The caching
    allocator keeps what it freed on the way, so a step's reserved peak does not read below `reserved_bytes`
    even when the step itself needs less (the cache is released only when memory runs short)."""
    import torch

    if not torch.cuda.is_available():
        return {"allocated_bytes": None, "reserved_bytes": None, "reason": NO_CUDA}
    torch.cuda.synchronize()
    return {"allocated_bytes": int(torch.cuda.memory_allocated()), "reserved_bytes": int(torch.cuda.memory_reserved()),
            "reason": None}
