"""Issue 11's bad input, command by command: a file the engine cannot read or a model it cannot model gives one
line `error: CODE [FIELD]: ...` and exit 2 from `sizing estimate`, `config` and `report` (no traceback)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHAPE = {"hidden_size": 256, "num_hidden_layers": 2, "vocab_size": 1000, "num_attention_heads": 4,
         "intermediate_size": 512}
REPORT = {"schema_version": 1, "status": "ok", "message": "", "checks": {}, "rank": 0, "world_size": 1,
          "measurements": {"steps": [], "peaks": {}}}


def _config_cases() -> list[tuple[str, dict[str, Any], str, str]]:
    """(what, configuration, code, field) of models the engine refuses, with the field it names."""
    return [
        ("unknown model_type", {"model_config": {**SHAPE, "model_type": "foo_unknown"}},
         "unsupported_architecture", "model_config.model_type"),
        ("a model_type that is a list", {"model_config": {**SHAPE, "model_type": ["llama"]}},
         "unsupported_architecture", "model_config.model_type"),
        ("no model_type, no catalog shape", {"model_config": {**SHAPE, "hidden_size": 250}},
         "unsupported_architecture", "model_config.model_type"),
        ("HQQ checkpoint", {"model_config": {**SHAPE, "model_type": "llama", "quantization_config": {
            "quant_method": "hqq"}}}, "unsupported_quantization", "model_config.quantization_config.quant_method"),
        ("FP8 checkpoint", {"model_config": {**SHAPE, "model_type": "llama", "quantization_config": {
            "quant_method": "fp8"}}}, "unsupported_quantization", "model_config.quantization_config.quant_method"),
        ("5-bit GPTQ", {"model_config": {**SHAPE, "model_type": "llama", "quantization_config": {
            "quant_method": "gptq", "bits": 5}}}, "unsupported_quantization", "model_config.quantization_config.bits"),
    ]


def _sizing(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "sizing", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def _one_line(run: subprocess.CompletedProcess[str], code: str, field: str | None = None) -> None:
    assert run.returncode == 2, run.stderr[-400:]
    assert run.stdout == "" and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    head = f"error: {code} [{field}]:" if field else f"error: {code}"
    assert run.stderr.startswith(head), run.stderr[:300]


@pytest.mark.parametrize(("what", "cfg", "code", "field"), _config_cases(), ids=[c[0] for c in _config_cases()])
def test_a_model_the_engine_cannot_model_is_refused_by_every_command(tmp_path: Path, what: str, cfg: dict[str, Any],
                                                                    code: str, field: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({**REPORT, "config": cfg}), encoding="utf-8")
    for args in (("estimate", str(path)), ("config", str(path)), ("report", str(report))):
        _one_line(_sizing(*args), code, field)


UNREADABLE = [
    ("Latin-1 bytes in a value", b'{"model": "meta-llama/Llama-3.1-8B", "run_name": "caf\xe9"}', "not_utf8"),
    ("UTF-16 with a byte-order mark", '{"model": "meta-llama/Llama-3.1-8B"}'.encode("utf-16"), "not_utf8"),
    ("50k nested objects in model_config",
     b'{"model_config": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001, "bad_json"),
    ("100k nested arrays", b"[" * 100_000 + b"]" * 100_000, "bad_json"),
]


@pytest.mark.parametrize(("what", "content", "code"), UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_unreadable_files_give_one_line_for_every_command(tmp_path: Path, what: str, content: bytes,
                                                          code: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    for command in ("estimate", "config", "report"):
        _one_line(_sizing(command, str(path)), code)


def test_a_hub_model_id_is_still_normalised_by_config(tmp_path: Path) -> None:
    # `config` prints what a trial runs; a trial may load any hub id, so only a model_config is held to the engine
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"model": "someone/not-in-the-catalog"}), encoding="utf-8")
    run = _sizing("config", str(path))
    assert run.returncode == 0 and json.loads(run.stdout)["model"] == "someone/not-in-the-catalog"


def test_a_field_set_twice_is_refused_but_a_pasted_config_json_keeps_json_load_behaviour() -> None:
    """read_json(unique_keys=True) refuses a key repeated in the run configuration, naming it; a repeated key inside
    a nested object (model_config, a config.json that Transformers reads with json.load) keeps the last value."""
    from sizing.errors import SizingError
    from sizing.jsontext import read_json

    with pytest.raises(SizingError) as err:
        read_json('{"r": 8, "model": "m", "r": 64}', unique_keys=True)
    assert (err.value.code, err.value.field) == ("duplicate_key", "r")
    assert read_json('{"r": 8, "r": 64}') == {"r": 64}  # without the flag: json's own rule
    nested = read_json('{"model_config": {"hidden_size": 8, "hidden_size": 16}, "r": 4}', unique_keys=True)
    assert nested == {"model_config": {"hidden_size": 16}, "r": 4}
