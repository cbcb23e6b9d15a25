# The model and GPU catalogs (sizing/data/*.json) and the lookup of a run's model and GPU.
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .arch import Architecture, from_hf_config, model_type_of
from .errors import SizingError

_DATA = Path(__file__).parent / "data"
# Every key a gpus.json record carries (sizing/data/gpus.json): a new key must be added here on purpose.
GPU_KEYS = frozenset({"id", "name", "reported_name", "architecture", "compute_capability", "memory_bytes",
                      "torch_total_memory_bytes", "memory_bandwidth_GBps", "bf16_dense_tflops", "fp16_dense_tflops",
                      "fp8_dense_tflops", "tf32_dense_tflops", "fp32_tflops", "tdp_watts", "interconnect",
                      "nvlink_GBps", "pcie_gen", "supports", "notes", "sources"})
# Keys a record may leave out: peer_to_peer = false where the driver refuses GPU-to-GPU access over PCIe
# (GeForce cards); absent means the card's PCIe peer access works (data-center and workstation cards).
GPU_OPTIONAL_KEYS = frozenset({"peer_to_peer"})


def _check_keys(kind: str, rec: Mapping[str, Any], required: frozenset[str], allowed: frozenset[str]) -> None:
    """A catalog record with a missing or unknown key is a data error: fail loudly, never guess."""
    if not isinstance(rec, Mapping):
        raise ValueError(f"{kind} catalog: a record is not a JSON object")
    missing, unknown = required - rec.keys(), rec.keys() - allowed
    if missing or unknown:
        raise ValueError(f"{kind} catalog record {rec.get('id', '?')!r}: missing keys {sorted(missing)}, "
                         f"unknown keys {sorted(unknown)}")


@dataclass(frozen=True)
class Source:
    """Where a model record's config.json fields come from."""

    url: str
    kind: str
    note: str


@dataclass(frozen=True)
class ModelRecord:
    """One catalog model: its id, display name, aliases, source and config.json fields (read-only)."""

    id: str
    name: str
    aliases: tuple[str, ...]
    source: Source
    config: Mapping[str, Any]
    missing: tuple[str, ...] = ()  # config.json fields no source established
    # The dtype of the checkpoint's weight files, for a config.json without torch_dtype: what from_pretrained's
    # dtype="auto" (transformers 5's default) then loads, the first floating-point weight's dtype
    # (modeling_utils._get_dtype); with its source (file sizes per parameter, the pickled storage type).
    checkpoint_dtype: str | None = None
    checkpoint_dtype_source: str = ""

    def __getitem__(self, key: str) -> Any:
        """Compatibility with the former dict records: rec["config"], rec["id"]."""
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """Compatibility with the former dict records."""
        return getattr(self, key) if key in self.keys() else default

    @staticmethod
    def keys() -> tuple[str, ...]:
        return tuple(f.name for f in fields(ModelRecord))


_MODEL_REQUIRED = frozenset({"id", "name", "aliases", "source", "config"})


CHECKPOINT_DTYPES = ("float32", "bfloat16", "float16")


def _model_record(rec: Mapping[str, Any]) -> ModelRecord:
    _check_keys("model", rec, _MODEL_REQUIRED, _MODEL_REQUIRED | {"missing", "checkpoint_dtype"})
    src = rec["source"]
    _check_keys("model source", src, frozenset({"url", "kind", "note"}), frozenset({"url", "kind", "note"}))
    ckpt = rec.get("checkpoint_dtype")
    if ckpt is not None:
        _check_keys("model checkpoint_dtype", ckpt, frozenset({"dtype", "source"}), frozenset({"dtype", "source"}))
        if ckpt["dtype"] not in CHECKPOINT_DTYPES or not str(ckpt["source"]).strip():
            raise ValueError(f"model catalog record {rec['id']!r}: checkpoint_dtype needs one of {CHECKPOINT_DTYPES} "
                             "and a source")
        if "torch_dtype" in rec["config"] or "dtype" in rec["config"]:
            raise ValueError(f"model catalog record {rec['id']!r}: checkpoint_dtype beside the config's own dtype")
    return ModelRecord(id=str(rec["id"]), name=str(rec["name"]), aliases=tuple(rec["aliases"]),
                       source=Source(str(src["url"]), str(src["kind"]), str(src["note"])),
                       config=MappingProxyType(dict(rec["config"])), missing=tuple(rec.get("missing", ())),
                       checkpoint_dtype=None if ckpt is None else str(ckpt["dtype"]),
                       checkpoint_dtype_source="" if ckpt is None else str(ckpt["source"]))


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
def model_records() -> tuple[ModelRecord, ...]:
    """Every catalog model, in file order; a record with a missing or unknown key raises."""
    data = _load("models.json")
    _check_keys("models.json", data, frozenset({"schema_version", "note", "models"}),
                frozenset({"schema_version", "note", "models"}))
    return tuple(_model_record(rec) for rec in data["models"])


@cache
def models() -> dict[str, ModelRecord]:
    """Catalog models by id and by alias (case-insensitive keys)."""
    out: dict[str, ModelRecord] = {}
    for rec in model_records():
        for key in (rec.id, *rec.aliases):
            if key.lower() in out:
                raise ValueError(f"model catalog: id or alias {key!r} appears twice")
            out[key.lower()] = rec
    return out


@cache
def gpus() -> dict[str, Gpu]:
    out: dict[str, Gpu] = {}
    for rec in _load("gpus.json")["gpus"]:
        _check_keys("gpu", rec, GPU_KEYS, GPU_KEYS | GPU_OPTIONAL_KEYS)
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


@cache
def _gpus_by_name() -> dict[str, Gpu]:
    """Catalog GPUs by the name nvidia-smi prints ("NVIDIA A100-SXM4-80GB") and by display name, when unique."""
    out: dict[str, list[Gpu]] = {}
    for gpu in gpus().values():
        for name in {str(gpu.record.get("reported_name", "")), gpu.name}:
            if name:
                out.setdefault(name.lower(), []).append(gpu)
    return {name: found[0] for name, found in out.items() if len(found) == 1}


def find_gpu(gpu_id: str) -> Gpu:
    """A catalog GPU by id, by the name nvidia-smi reports or by its display name (case-insensitive)."""
    gpu = gpus().get(gpu_id.lower()) or _gpus_by_name().get(" ".join(gpu_id.split()).lower())
    if gpu is None and re.search(r"\b(MI\d{2,3}\w*|INSTINCT|RADEON|AMD)\b", gpu_id.upper().replace("-", " ")):
        # The memory model is CUDA's (caching allocator, context, NCCL); ROCm's HIP allocator is not modelled.
        raise SizingError("unknown_gpu", f"AMD GPU '{gpu_id}' is not supported: only NVIDIA CUDA GPUs are modelled "
                          "(see `sizing gpus`)", field="gpu", value=gpu_id)
    if gpu is None:
        raise SizingError("unknown_gpu", f"unknown GPU '{gpu_id}' (see `sizing gpus`)", field="gpu", value=gpu_id)
    return gpu


_SHAPE_KEYS = (("hidden_size", "n_embd", "n_embed", "d_model"), ("num_hidden_layers", "n_layer", "num_layers"),
               ("num_attention_heads", "n_head"), ("intermediate_size", "n_inner", "ffn_hidden_size"),
               ("vocab_size", "padded_vocab_size"))


def _shape(cfg: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(next((cfg[k] for k in names if cfg.get(k) is not None), None) for names in _SHAPE_KEYS)


def shape_match(cfg: Mapping[str, Any]) -> tuple[str, str] | None:
    """(model_type, catalog id) of the catalog models with this config's shape, when they agree on one family."""
    shape = _shape(cfg)
    if None in shape[:3]:
        return None
    found = [(model_type_of(rec.config), rec.id) for rec in model_records() if _shape(rec.config) == shape]
    families = {mt for mt, _ in found if mt}
    if len(families) != 1:
        return None
    family = families.pop()
    # The first such record in file order: base releases come before the fine-tunes added later.
    return family, next(rid for mt, rid in found if mt == family)


def resolve_architecture(model: str | None, model_config: Any) -> tuple[Architecture, str]:
    """The run's architecture and a display name: model_config wins over a catalog id.

    A config.json without model_type or a known architectures class takes the family of the catalog
    models of the same shape (hidden size, layers, heads, FFN width, vocabulary); the name says so.
    """
    if model_config is not None:
        name = str(model_config.get("_name_or_path") or model or "custom model")
        if isinstance(model_config, Mapping) and not model_type_of(model_config):
            match = shape_match(model_config)
            if match is None:
                raise SizingError("unsupported_architecture", "model_config has no model_type and its shape matches "
                                  "no catalog model: add \"model_type\" (for example \"llama\")",
                                  field="model_config.model_type")
            model_config = {**model_config, "model_type": match[0]}
            name = f"{name} (model_type {match[0]} from the shape of {match[1]})"
        return from_hf_config(model_config), name
    if model is None:  # parse_config refuses this already; a direct caller gets the same refusal
        raise SizingError("missing_field", "give a catalog model id in 'model' or a config.json in 'model_config'",
                          field="model")
    rec = models().get(model.lower())
    if rec is None:
        raise SizingError("unknown_model", f"unknown model '{model}': use a catalog id (see `sizing models`) "
                          "or paste its config.json as model_config", field="model", value=model)
    config = rec.config
    if rec.checkpoint_dtype is not None:  # the config.json says no dtype: "auto" loads the weight files' one
        config = {**config, "torch_dtype": rec.checkpoint_dtype}
    return from_hf_config(config), rec.id
