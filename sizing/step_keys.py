# The step's cache keys and caches: configurations, architectures and cards as small hashable keys.
from __future__ import annotations

import json
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any, TypeVar

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .memory.activations import LayerSaved

T = TypeVar("T")


def with_fields(obj: T, **changes: Any) -> T:
    """dataclasses.replace(obj, **changes) for a dataclass without __post_init__: a shallow copy with those
    fields set (perf: replace passes every field through __init__; a fit table makes thousands)."""
    cls = type(obj)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls) if f.init)  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or not names.issuperset(changes) or not hasattr(obj, "__dict__"):
        return replace(obj, **changes)  # type: ignore[type-var]
    new = object.__new__(cls)  # copy.copy's own steps for a plain instance, without __reduce_ex__
    new.__dict__.update(obj.__dict__)
    for name, value in changes.items():
        object.__setattr__(new, name, value)
    return new


_FIELD_NAMES: dict[type, frozenset[str]] = {}


# Nor the `gpu` field: _step reads the card only through its gpu argument, and of that only the Hopper bit
# (the cuBLAS workspace), so one fit table's 27 cards share their shape-free parts (perf).
_KEY_FIELDS = tuple(f.name for f in fields(RunConfig) if f.name not in ("extra", "gpu"))
_KEY_GETTER = attrgetter(*_KEY_FIELDS)


_JSON = object()  # tags a field's JSON text in a key: equal to no field's own value


def _cfg_key(cfg: RunConfig, names: attrgetter[Any]) -> tuple[Any, ...]:
    """The fields `names` of cfg as a hashable key, by content (an unhashable one, a model_config: its JSON
    text, tagged)."""
    values: tuple[Any, ...] = names(cfg)
    try:
        hash(values)
        return values
    except TypeError:
        return tuple(v if _hashable(v) else (_JSON, json.dumps(v, sort_keys=True, default=dict)) for v in values)


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


# Architectures as small numbers in the cache keys, equal for equal architectures: a frozen dataclass hashes
# every field (its linears) at each lookup, a fit table makes thousands. By identity first; the object is
# kept alive by the table, so its id is never another object's.
_ARCH_BY_ID: dict[int, tuple[Architecture, int]] = {}
_ARCH_TOKEN: dict[Architecture, int] = {}


def _arch_token(arch: Architecture) -> int:
    got = _ARCH_BY_ID.get(id(arch))
    if got is not None and got[0] is arch:
        return got[1]
    if len(_ARCH_BY_ID) >= 4096 or len(_ARCH_TOKEN) >= 4096:
        for clear in CLEARS:  # every key holding a token goes with them (step.clear_caches)
            clear()
    token = _ARCH_TOKEN.setdefault(arch, len(_ARCH_TOKEN))
    _ARCH_BY_ID[id(arch)] = arch, token
    return token


def _gpu_key(gpu: Gpu | None) -> bool | None:
    """What _step reads of the card (overhead's Hopper workspace): the caches' key for it."""
    return None if gpu is None else gpu.sm >= (9, 0)


# What _step derives from the configuration without its shape (regime, trainable tensors, weights, optimizer
# states), by every field but the shape's two and extra, and each sequence length's layer_saved: a fit table's
# hundreds of probes change only the shape (perf: resolve and layer_saved were two thirds of a _step).
# tests/unit/test_step_cache.py holds the cached _step to a cold one across shapes.
_SHAPE_FIELDS = ("max_seq_length", "per_device_train_batch_size")
_BASE_GETTER = attrgetter(*(name for name in _KEY_FIELDS if name not in _SHAPE_FIELDS))
_BASE: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_SAVED: dict[tuple[Any, ...], LayerSaved] = {}
_FIXED: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
_WALKS: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # by architecture token, regime, trainable tensors and rank


CLEARS: list[Any] = [_BASE.clear, _SAVED.clear, _FIXED.clear, _WALKS.clear, _ARCH_BY_ID.clear,
                     _ARCH_TOKEN.clear]  # step adds its own
