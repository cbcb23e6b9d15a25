# Properties: more of anything never needs less memory; no input raises anything but SizingError.
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sizing import SizingError, estimate

from .conftest import TINY_LLAMA

METHODS = st.sampled_from(["full", "lora", "qlora", "lora8"])
BASE: dict[str, Any] = {"model_config": TINY_LLAMA, "target_modules": "all-linear"}


def _run(**kw: Any) -> dict[str, Any]:
    return {**BASE, **kw}


@settings(max_examples=60, deadline=None)
@given(method=METHODS, r=st.integers(1, 63), seq=st.integers(1, 1024), batch=st.integers(1, 16),
       ckpt=st.booleans(), dropout=st.sampled_from([0.0, 0.1]), attn=st.sampled_from(["sdpa", "eager"]))
def test_more_rank_sequence_or_batch_never_needs_less(method: str, r: int, seq: int, batch: int, ckpt: bool,
                                                      dropout: float, attn: str) -> None:
    run = _run(method=method, r=r, max_seq_length=seq, per_device_train_batch_size=batch,
               gradient_checkpointing=ckpt, lora_dropout=dropout, attn_implementation=attn, bf16=True)
    base = estimate(run).allocated_bytes
    if method != "full":
        assert estimate({**run, "r": r + 1}).allocated_bytes >= base
    assert estimate({**run, "max_seq_length": seq + 1}).allocated_bytes >= base
    assert estimate({**run, "per_device_train_batch_size": batch + 1}).allocated_bytes >= base


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**7), st.floats(allow_nan=True),
                        st.text(max_size=12), st.lists(st.text(max_size=8), max_size=3))
FIELDS = st.sampled_from(["method", "r", "lora_dropout", "max_seq_length", "per_device_train_batch_size",
                          "torch_dtype", "bf16", "optim", "target_modules", "gpu", "attn_implementation",
                          "load_in_4bit", "framework", "model", "bogus", "packing", "num_gpus"])


@settings(max_examples=200, deadline=None)
@given(changes=st.dictionaries(FIELDS, JSON_VALUES, max_size=4))
def test_no_input_raises_anything_but_sizing_error(changes: dict[str, Any]) -> None:
    try:
        est = estimate(_run(**changes))
    except SizingError as err:
        assert err.code and str(err)
    else:
        assert est.allocated_bytes > 0 and est.reserved_bytes >= est.allocated_bytes


@settings(max_examples=30, deadline=None)
@given(config=st.dictionaries(st.sampled_from(list(TINY_LLAMA)), JSON_VALUES, max_size=3))
def test_broken_model_configs_are_refused_cleanly(config: dict[str, Any]) -> None:
    try:
        estimate({"model_config": {**TINY_LLAMA, **config}, "method": "lora", "max_seq_length": 64})
    except SizingError as err:
        assert err.field is None or err.field.startswith(("model_config", "max_seq_length", "r"))
