# The model and GPU catalogs (sizing/data/*.json) and the lookup of a run's model and GPU.
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .arch import Architecture, from_hf_config
from .errors import SizingError

_DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    memory_bytes: int  # nvidia-smi memory.total
    torch_total_memory_bytes: int | None  # what CUDA (and PyTorch) can allocate
    memory_bandwidth_GBps: float | None
    bf16_dense_tflops: float | None
    fp16_dense_tflops: float | None
    compute_capability: str
    supports: dict[str, Any]
    record: dict[str, Any]

    @property
    def usable_bytes(self) -> int:
        """Memory a process can allocate: CUDA's total, or nvidia-smi's minus the driver's reservation."""
        if self.torch_total_memory_bytes:
            return self.torch_total_memory_bytes
        # gpus.md §2.1: smi - torch is 240-1103 MiB across cards; 600 MiB is the middle of that range.
        return self.memory_bytes - 600 * 2**20

    @property
    def sm(self) -> tuple[int, int]:
        major, _, minor = self.compute_capability.partition(".")
        return int(major), int(minor or 0)


def _load(name: str) -> dict[str, Any]:
    with open(_DATA / name, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def models() -> dict[str, dict[str, Any]]:
    """Catalog models by id and by alias (case-insensitive keys)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in _load("models.json")["models"]:
        for key in (rec["id"], *rec.get("aliases", [])):
            out[key.lower()] = rec
    return out


def model_records() -> list[dict[str, Any]]:
    return list(_load("models.json")["models"])


@cache
def gpus() -> dict[str, Gpu]:
    out: dict[str, Gpu] = {}
    for rec in _load("gpus.json")["gpus"]:
        total = rec.get("memory_bytes") or rec.get("torch_total_memory_bytes")
        if not total:
            continue  # no trustworthy capacity: a card we cannot size against
        gpu = Gpu(id=rec["id"], name=rec["name"], memory_bytes=int(total),
                  torch_total_memory_bytes=rec.get("torch_total_memory_bytes"),
                  memory_bandwidth_GBps=rec.get("memory_bandwidth_GBps"),
                  bf16_dense_tflops=rec.get("bf16_dense_tflops"), fp16_dense_tflops=rec.get("fp16_dense_tflops"),
                  compute_capability=str(rec.get("compute_capability", "8.0")), supports=rec.get("supports", {}),
                  record=rec)
        out[gpu.id.lower()] = gpu
    return out


def find_gpu(gpu_id: str) -> Gpu:
    gpu = gpus().get(gpu_id.lower())
    if gpu is None:
        raise SizingError("unknown_gpu", f"unknown GPU '{gpu_id}' (see `sizing gpus`)", field="gpu", value=gpu_id)
    return gpu


def resolve_architecture(model: str | None, model_config: Any) -> tuple[Architecture, str]:
    """The run's architecture and a display name: model_config wins over a catalog id."""
    if model_config is not None:
        name = str(model_config.get("_name_or_path") or model or "custom model")
        return from_hf_config(model_config), name
    assert model is not None  # parse_config guarantees one of the two
    rec = models().get(model.lower())
    if rec is None:
        raise SizingError("unknown_model", f"unknown model '{model}': use a catalog id (see `sizing models`) "
                          "or paste its config.json as model_config", field="model", value=model)
    return from_hf_config(rec["config"]), str(rec["id"])
