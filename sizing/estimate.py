# One estimate: configuration -> memory of every component at every moment of the step -> the peak.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import uncertainty
from .arch import Architecture, model_type_of
from .card import on_card
from .catalog import Gpu, find_gpu, resolve_architecture
from .config import RunConfig, config_to_dict, parse_config
from .errors import SizingError
from .frameworks import moe_measured
from .memory.adapters import approximate, trainable
from .memory.allocator import ALLOC_ROUND, reserved_bytes, round_up, usable_bytes
from .memory.overhead import CUDA_CONTEXT
from .memory.regime import Regime, mixed_window
from .memory.timeline import COMPONENTS, Moment
from .solve import Sizer, fit_row, runs_on
from .step import outside as outside_moments
from .step import reserved_peak, step_memory
from .throughput import time_estimate
from .warnings import collect_warnings, does_not_fit, load_above_logged_peak

__all__ = ["ALLOC_ROUND", "Estimate", "estimate", "fit_entry", "reserved_bytes", "usable_bytes"]


@dataclass
class Estimate:
    """One estimate: the peak per tier, its range, the moments of the step and what the run is told."""

    config: RunConfig
    model_name: str
    arch: Architecture
    regime: Regime
    moments: list[Moment]
    peak_moment: Moment
    allocated_bytes: int
    reserved_bytes: int
    device_bytes: int
    range_bytes: dict[str, tuple[int, int]]
    confidence: str
    detail: dict[str, int]
    fits: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    time: dict[str, Any] | None = None
    confidence_reasons: list[dict[str, Any]] = field(default_factory=list)  # why the label is not higher

    @property
    def components(self) -> dict[str, int]:
        """Bytes of each component at the peak moment."""
        return {name: self.peak_moment.parts.get(name, 0) for name in COMPONENTS}

    def to_dict(self) -> dict[str, Any]:
        """The estimate as the JSON the CLI and the page print."""
        lo_hi = {f"{k}_low_bytes": v[0] for k, v in self.range_bytes.items()}
        lo_hi.update({f"{k}_high_bytes": v[1] for k, v in self.range_bytes.items()})
        return {
            "model": self.model_name,
            "peak": {"allocated_bytes": self.allocated_bytes, "reserved_bytes": self.reserved_bytes,
                     "device_bytes": self.device_bytes, "phase": self.peak_moment.phase,
                     "moment": self.peak_moment.what, "step": self.peak_moment.step},
            "components": self.components,
            "uncertainty": {"confidence": self.confidence, "reasons": self.confidence_reasons, **lo_hi},
            "fits": self.fits,
            "time": self.time,
            "warnings": self.warnings,
            "detail": self.detail,
            "config": config_to_dict(self.config),
        }


# Loops whose checkpointing is the user's own code or recipe, not a documented library default
# (TrainingArguments False, SFTConfig True): unstated, the estimate assumes it off and says so.
_OWN_CHECKPOINTING = ("custom", "litgpt", "torchtune")


def gaps(cfg: RunConfig, arch: Architecture, reg: Regime, given: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The inputs the estimate knows it models less exactly (codes of uncertainty.REASONS); `given` is the
    configuration as the user wrote it, before defaults (None: a normalised one, every field stated)."""
    sm = find_gpu(cfg.gpu).sm if cfg.gpu else None
    out = [name for name, on in (("moe", bool(arch.experts) and not moe_measured(cfg, sm)),
                                 ("torch_compile", cfg.torch_compile),
                                 # a Python-formula activation (gelu_new) is modelled: memory/activations.py
                                 ("peft_approximate", bool(approximate(cfg, arch, reg))))
           if on]
    if isinstance(cfg.model_config, Mapping) and not model_type_of(cfg.model_config):
        out.append("shape_matched")
    if mixed_window(cfg, arch):
        out.append("sliding_window")
    if given is not None and given.get("gradient_checkpointing") is None and cfg.framework in _OWN_CHECKPOINTING:
        out.append("checkpointing_unstated")
    if cfg.torch_dtype == "auto" and cfg.framework in ("transformers", "custom") and arch.default_dtype is None:
        # from_pretrained's dtype="auto" loads the weight files' dtype, which neither config.json nor the catalog
        # gives here: regime.load_dtype takes bfloat16, and a float32 checkpoint would load twice its bytes
        out.append("dtype_assumed")
    return tuple(out)


def _bands(cfg: RunConfig, arch: Architecture, reg: Regime,
           given: Mapping[str, Any] | None) -> tuple[dict[str, tuple[float, float]], str, list[dict[str, Any]]]:
    """Measured/estimated ratio bands per tier for the run's regime, the confidence label and its reasons."""
    multi, why = cfg.num_gpus > 1, gaps(cfg, arch, reg, given)
    out = {tier: uncertainty.widen(*uncertainty.band(cfg.method, tier, multi)[:2], why)
           for tier in ("allocated", "reserved")}
    key, grp = uncertainty.group(cfg.method, "reserved", multi)
    conf, codes = uncertainty.confidence(grp, why)
    err = float(grp["error"]) if grp is not None and "error" in grp else None
    reasons = [{"code": c, "message": uncertainty.reason_text(c, "en", err), "params": {"regime": key, "error": err}}
               for c in codes]
    return out, conf, reasons


def estimate(config: RunConfig | Mapping[str, Any], backend: str = "cuda", searches: bool = True) -> Estimate:
    """Peak GPU memory of one training step for `config` (a RunConfig or a contract mapping).

    backend "cpu" models CPU kernels (dropout masks in the input dtype), for the physics tests.
    searches=False: the own GPU's fit entry without its largest micro-batch and longest sequence (the page's
    first answer; every other figure is the same).
    """
    cfg = config if isinstance(config, RunConfig) else parse_config(config)
    arch, name = resolve_architecture(cfg.model, cfg.model_config)
    if arch.max_positions and cfg.max_seq_length > arch.max_positions:
        raise SizingError("seq_too_long", f"max_seq_length {cfg.max_seq_length} exceeds the model's "
                          f"max_position_embeddings {arch.max_positions}; raise it in model_config (with rope scaling) "
                          "if you really extend the context", field="max_seq_length",
                          value=cfg.max_seq_length, max=arch.max_positions)
    gpu = find_gpu(cfg.gpu) if cfg.gpu else None
    mem = step_memory(cfg, arch, gpu, backend)
    reg, ms, detail, pk = mem.regime, mem.moments, mem.detail, mem.peak
    bands, confidence, reasons = _bands(cfg, arch, reg, None if isinstance(config, RunConfig) else config)
    allocated = pk.total
    paged = detail["paged_optimizer_bytes"]

    ample = reserved = reserved_peak(mem, cfg.expandable_segments)
    load_hidden = 0  # a load's allocated peak that the framework's own log does not show
    for o in outside_moments(mem, cfg.expandable_segments):
        # A moment outside the step (memory/timeline.Outside) that reserves the most is the run's peak moment.
        # torchtune resets the peaks after the model's setup (frameworks.TORCHTUNE): its logged allocated peak is
        # the step's; the cache the load left stays in its reserved peak (and the load, as the moment that
        # reserves the most) and in the fit verdict, and a warning says what the load allocates.
        if reg.profile.peak_reset_after_load and o.moment.phase == "load":
            load_hidden = max(load_hidden, o.moment.total)
        else:
            allocated = max(allocated, o.moment.total)
        if round_up(o.reserved) >= ample:
            pk = o.moment
        ms = [*ms, o.moment]
    # On the named card the allocator releases its cached segments at the wall instead of reserving more
    # (card.on_card): a run that fits there (the verdict, solve.Sizer.required) shows that card's
    # max_memory_reserved; one that does not, the ample card's (what it would take). detail keeps the ample
    # card's either way, for a user renting a larger card.
    wall = None
    if gpu is not None and runs_on(cfg, gpu) and reserved_peak(mem, cfg.expandable_segments, True) <= usable_bytes(gpu):
        wall = usable_bytes(gpu) // ALLOC_ROUND * ALLOC_ROUND
        reserved = on_card(mem, cfg.expandable_segments, usable_bytes(gpu))[0]
    detail = {**detail, "ample_reserved_bytes": ample}
    if load_hidden:
        detail["load_allocated_bytes"] = load_hidden
    outside = paged + detail["nccl_bytes"]  # device memory PyTorch's counters do not see
    device = reserved + CUDA_CONTEXT[1] + outside
    # The range: what the published rows of this regime measured relative to the estimate
    # (sizing/data/residuals.json); the device tier adds the CUDA context's own spread to reserved's.
    alloc_lo, alloc_hi = int(allocated * bands["allocated"][0]), int(allocated * bands["allocated"][1])
    res_lo, res_hi = int(reserved * bands["reserved"][0]), round_up(int(reserved * bands["reserved"][1]))
    if wall is not None:  # a run that fits never reserves more than the card has
        res_hi = max(min(res_hi, wall), reserved)
        res_lo = min(res_lo, res_hi)
    ranges = {"allocated": (alloc_lo, alloc_hi), "reserved": (res_lo, res_hi),
              "device": (res_lo + CUDA_CONTEXT[0] + outside, res_hi + CUDA_CONTEXT[2] + outside)}
    est = Estimate(config=cfg, model_name=name, arch=arch, regime=reg, moments=ms, peak_moment=pk,
                   allocated_bytes=allocated, reserved_bytes=reserved, device_bytes=device, range_bytes=ranges,
                   confidence=confidence, detail=detail, confidence_reasons=reasons)
    est.warnings = collect_warnings(cfg, arch, reg, gpu, detail, pk.parts, pk.phase, pk.what)
    if load_hidden > allocated:
        est.warnings.append(load_above_logged_peak(load_hidden, allocated))
    why = approximate(cfg, arch, reg)  # a PEFT method whose saved tensors are not walked exactly
    if why:
        est.warnings.append({"code": "peft_method_approximate", "message": f"{why}: confidence low",
                             "params": {"method": cfg.peft_type}})
    if gpu is not None:
        est.fits = [fit_entry(est, gpu, searches)]
        if not est.fits[0]["fits"] and "refusal" not in est.fits[0]:
            est.warnings.insert(0, does_not_fit(gpu, -est.fits[0]["headroom_bytes"]))
        est.time = time_estimate(cfg, arch, reg, trainable(cfg, arch), gpu)
    return est


def fit_entry(est: Estimate, gpu: Gpu, searches: bool = True) -> dict[str, Any]:
    """The fit row of the estimate's configuration on one GPU (searches=False: verdict and headroom only)."""
    return fit_row(Sizer(est.config), gpu, searches=searches)
