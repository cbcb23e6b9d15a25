# The generated JSON Schema of configurations: committed as generated, and it agrees with parse_config.
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizing import SizingError
from sizing.config import parse_config
from sizing.contract import FIELDS
from sizing.schema import SCHEMA_PATH, config_schema, schema_text

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(config_schema())
BASE = {"model": "meta-llama/Llama-3.1-8B"}


def _parses(config: Any) -> bool:
    try:
        parse_config(config)
    except SizingError:
        return False
    return True


def test_the_committed_schema_is_the_generated_one() -> None:
    jsonschema.Draft202012Validator.check_schema(config_schema())
    assert (ROOT / SCHEMA_PATH).read_text("utf-8") == schema_text(), "run: python -m sizing schema > " + SCHEMA_PATH


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.json")), ids=lambda p: p.name)
def test_every_example_meets_the_schema_and_parses(path: Path) -> None:
    config = json.loads(path.read_text("utf-8"))
    assert VALIDATOR.is_valid(config) and _parses(config)


REFUSED: list[Any] = [
    [], "model", {}, {"model": None}, {"model": "  "}, {**BASE, "lora_rnak": 8}, {**BASE, "r": "16"},
    {**BASE, "r": 0}, {**BASE, "r": 8.5}, {**BASE, "r": True}, {**BASE, "r": 65537}, {**BASE, "lora_alpha": 1e308},
    {**BASE, "lora_dropout": 1.5}, {**BASE, "dataset_tokens": 1e300}, {**BASE, "method": "prefix"},
    {**BASE, "torch_dtype": "int8"}, {**BASE, "bf16": "yes"}, {**BASE, "bf16": 1}, {**BASE, "target_modules": 5},
    {**BASE, "target_modules": []}, {**BASE, "target_modules": " , "}, {**BASE, "target_modules": ["q_proj", ""]},
    {**BASE, "model_config": [1]}, {**BASE, "framework_version": ""}, {**BASE, "utilization": 0},
    {**BASE, "framework_version": "latest"}, {**BASE, "peft_version": "x0.21"}, {**BASE, "peft_version": "0 .21"},
    {**BASE, "bf16": True, "fp16": True}, {**BASE, "load_in_4bit": True},
    {**BASE, "method": "full", "load_in_8bit": True},
    {**BASE, "method": "qlora", "load_in_4bit": False}, {**BASE, "method": "qlora", "load_in_8bit": True},
    {**BASE, "method": "lora8", "load_in_4bit": True}, {**BASE, "method": "full", "use_dora": True},
    {**BASE, "method": None, "load_in_4bit": True},  # null method is the default lora
]
ACCEPTED: list[Any] = [
    BASE, {"model_config": {"model_type": "llama"}}, {**BASE, "r": 8.0}, {**BASE, "torch_dtype": "bf16"},
    {**BASE, "bnb_4bit_compute_dtype": "torch.float16"}, {**BASE, "target_modules": "q_proj, v_proj"},
    {**BASE, "method": "qlora", "load_in_4bit": True, "load_in_8bit": False}, {**BASE, "use_dora": True},
    {**BASE, "fp16": True, "framework": "trl"}, {**BASE, "bf16": None, "fp16": True}, {**BASE, "model": " x "},
    {**BASE, "peft_version": " 0.19.2.dev0 "}, {**BASE, "framework_version": "2.13.0+cu130"},
    {**BASE, "framework_version": "v0.1"},
    {k: None for k in (f.name for f in FIELDS)} | BASE, {**BASE, "num_gpus": 1, "parallelism": "fsdp"},
]


@pytest.mark.parametrize(("config", "valid"), [(c, False) for c in REFUSED] + [(c, True) for c in ACCEPTED])
def test_schema_and_parse_config_agree(config: Any, valid: bool) -> None:
    assert (VALIDATOR.is_valid(config), _parses(config)) == (valid, valid)


def _anything() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.floats(-2.0, 2e6, allow_nan=False),
                        st.sampled_from(["", " ", "auto", "bf16", "lora", "qlora", "full", "all-linear",
                                         "q_proj,v_proj", "trl", "nf4", "float32", "fsdp", "0.1", ","]))
    return st.one_of(scalars, st.lists(st.sampled_from(["q_proj", "", "v_proj"]), max_size=3),
                     st.just({"model_type": "llama"}))


def _in_range(spec: Any) -> st.SearchStrategy[Any]:
    if spec.choices:
        return st.sampled_from(spec.accepts())
    if spec.type in ("int", "float"):
        return (st.integers if spec.type == "int" else st.floats)(spec.low, spec.high)
    return st.booleans() if spec.type == "bool" else _anything()


# A few fields, each a value of its own range or anything; sometimes an unknown key.
RANDOM = st.lists(st.sampled_from(FIELDS), max_size=6).flatmap(lambda specs: st.fixed_dictionaries(
    {f.name: st.one_of(_in_range(f), _in_range(f), _anything()) for f in specs},
    optional={"lora_rank": st.integers(1, 8)}))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=RANDOM)
def test_schema_and_parse_config_agree_on_random_configs(data: dict[str, Any]) -> None:
    config = {**BASE, **data}
    assert VALIDATOR.is_valid(config) == _parses(config), config
