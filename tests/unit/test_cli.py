# The command line: a table, the JSON contract, and one clear line on bad input.
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sizing.cli import build_parser, main
from sizing.config import normalize
from sizing.contract import BY_NAME, FIELDS, flag

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qlora-llama31-8b.json"


def test_estimate_prints_breakdown_peak_and_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    for text in ("weights", "quantization_state", "logits_and_loss", "Peak: backward", "H100-SXM-80GB: fits"):
        assert text in out


def test_estimate_json_follows_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(EXAMPLE), "--json", "--gpu", "L4-24GB", "--set", "r=64"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["peak"]) >= {"allocated_bytes", "reserved_bytes", "device_bytes", "phase"}
    assert set(data["components"]) == {"weights", "quantization_state", "adapters", "gradients", "optimizer_states",
                                       "master_weights", "activations", "logits_and_loss", "workspace"}
    assert sum(data["components"].values()) == data["peak"]["allocated_bytes"]
    assert data["fits"][0]["gpu"] == "L4-24GB" and data["config"]["r"] == 64


def test_bad_input_is_one_line_with_code_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B", "r": -1}))
    assert main(["estimate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "out_of_range [r]" in err
    cfg.write_text("{not json")
    assert main(["estimate", str(cfg)]) == 2
    assert "bad_json" in capsys.readouterr().err


def test_models_and_gpus_list_the_catalogs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) >= 40 and "not supported" not in out
    assert main(["gpus"]) == 0
    assert "H200-SXM-141GB" in capsys.readouterr().out


def _sizing(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "sizing", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


BAD_FILES: list[tuple[str, bytes, str]] = [
    ("non-UTF-8 bytes", b'\xff\xfe{"model": "x"}', "not_utf8"),
    ("100k nested arrays", b"[" * 100_000, "bad_json"),
    ("a 5000-digit integer", b'{"model": "meta-llama/Llama-3.1-8B", "r": ' + b"9" * 5000 + b"}", "bad_json"),
    ("a float past the range", b'{"model": "meta-llama/Llama-3.1-8B", "lora_alpha": 1e400}', "bad_json"),
    ("NaN", b'{"model": "meta-llama/Llama-3.1-8B", "r": NaN}', "bad_json"),
    ("Infinity", b'{"model": "meta-llama/Llama-3.1-8B", "lora_dropout": -Infinity}', "bad_json"),
    ("an array", b"[1, 2]", "invalid_config"),
    ("a string", b'"model"', "invalid_config"),
    ("absurd alpha", b'{"model": "meta-llama/Llama-3.1-8B", "lora_alpha": 1e308}', "out_of_range"),
    ("absurd tokens", b'{"model": "meta-llama/Llama-3.1-8B", "dataset_tokens": 1e300}', "out_of_range"),
    ("a newline in a name", b'{"model": "a\\nb\\u2028c"}', "unknown_model"),
    ("a megabyte key", b'{"' + b"k" * 1_000_000 + b'": 1}', "unknown_field"),
    # json keeps the last of two values silently: the run would be r=64 without a word
    ("a field set twice", b'{"model": "meta-llama/Llama-3.1-8B", "r": 8, "lora_alpha": 16, "r": 64}', "duplicate_key"),
]


@pytest.mark.parametrize(("what", "content", "code"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_get_one_line_and_exit_2(tmp_path: Path, what: str, content: bytes, code: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    # `config` normalises without the catalog (a trial may name any model): it cannot know a model id is unknown
    for command in ("estimate", "fit") if code == "unknown_model" else ("estimate", "fit", "config"):
        run = _sizing(command, str(path))
        assert run.returncode == 2, (what, command, run.stderr[-300:])
        assert run.stderr.startswith(f"error: {code}") and run.stderr.count("\n") == 1, (what, run.stderr[:300])
        assert len(run.stderr) < 600 and run.stdout == ""


@pytest.mark.parametrize(("what", "content", "code"), [b for b in BAD_FILES if b[2] in ("not_utf8", "bad_json")],
                         ids=[b[0] for b in BAD_FILES if b[2] in ("not_utf8", "bad_json")])
def test_bad_report_files_get_one_line_and_exit_2(tmp_path: Path, what: str, content: bytes, code: str) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(content)
    run = _sizing("report", str(path))
    assert run.returncode == 2 and run.stderr.startswith(f"error: {code}") and run.stderr.count("\n") == 1, what


def test_config_prints_the_normalised_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B", "framework": "trl", "method": "qlora"}))
    assert main(["config", str(path), "--set", "lora_alpha=2.5", "--max-seq-length", "2048"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == normalize({"model": "meta-llama/Llama-3.1-8B", "framework": "trl", "method": "qlora",
                             "lora_alpha": 2.5, "max_seq_length": 2048})
    assert out["gradient_checkpointing"] is True and out["prepare_model_for_kbit_training"] is False


def test_estimate_json_config_is_the_normalised_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(EXAMPLE), "--json", "--set", "framework_version=0.1", "--r", "32"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    example = json.loads(EXAMPLE.read_text("utf-8"))
    assert config == normalize({**example, "framework_version": "0.1", "r": 32})
    assert set(config) == set(BY_NAME) and config["framework_version"] == "0.1"


def test_every_flag_of_the_table_exists_on_every_run_command() -> None:
    parser = build_parser()
    for command in ("estimate", "fit", "config"):
        flagged = [f.name for f in FIELDS if f.flag]
        args = parser.parse_args([command, "x.json", *[a for n in flagged for a in (flag(n), "1")]])
        assert all(getattr(args, n) == "1" for n in flagged)


def test_a_typed_flag_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(EXAMPLE), "--r", "sixteen"]) == 2
    assert "wrong_type [r]" in capsys.readouterr().err
    assert main(["estimate", str(EXAMPLE), "--set", "=3"]) == 2
    assert "bad_override" in capsys.readouterr().err


def test_a_card_without_bf16_is_marked_in_the_fit_table_and_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    """V100 (compute capability 7.0) has no bf16: the example's bf16 run is refused there although 12.9 GiB are
    left, and the table says why instead of a bare 'no' next to a positive headroom."""
    assert main(["fit", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    v100 = next(line for line in out.splitlines() if line.startswith("V100-32GB"))
    assert v100.split()[1] == "no*" and float(v100.split()[2]) > 0
    assert "no*: the card has no bf16" in out
    assert main(["estimate", str(EXAMPLE), "--gpu", "V100-32GB"]) == 0
    assert "V100-32GB: does NOT run (the card has no bf16)" in capsys.readouterr().out
