"""The trial in this process (the package, not a subprocess): every bad input is refused before a model is
loaded, and an error, SIGTERM or SIGINT in each phase leaves a valid report with the phase, the status and
every step measured so far. The signals are real: the fault hook sends them to this very process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from recipes.trial.cli import main  # stdlib and sizing only: torch is imported when a trial runs
from tests.recipes.conftest import STACK, TINY_LLAMA, require, write_data

FAST: dict[str, Any] = {"model": None, "model_config": TINY_LLAMA, "method": "lora", "r": 4, "max_seq_length": 32,
                        "per_device_train_batch_size": 2, "optim": "adamw_torch"}
PHASES = ("setup", "load", "eval_before", "train", "eval", "save", "reload")
pytestmark = pytest.mark.filterwarnings("ignore")  # the HF stack's own deprecation warnings


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("base") / "random-base"


def _run(tmp: Path, config: dict[str, Any] | str, base: Path | None = None, steps: str = "2",
         extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "config.json"
    cfg.write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    data = tmp / "data.jsonl"
    if not data.exists():
        write_data(data, rows=12)
    argv = [str(cfg), "--data", str(data), "--out", str(tmp / "out"), "--max-steps", steps, "--random-weights",
            *extra]
    if base is not None:
        argv += ["--base-cache", str(base)]
    code = main(argv)
    report = json.loads((tmp / "out" / "report.json").read_text(encoding="utf-8"))
    return code, report


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    require(STACK)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_FAULTSECRET42")
    for var in ("TRIAL_TEST_FAULT", "TRIAL_SIMULATE_OOM_AT_STEP", "TRIAL_TEST_BREAK_RELOAD", "WORLD_SIZE", "RANK",
                "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "ACCELERATE_USE_FSDP"):
        # set, then delete: monkeypatch then restores the original even when the in-process trial sets the
        # variable itself (expandable_segments), so nothing leaks into later tests' subprocesses
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)


BAD: list[tuple[str, dict[str, Any] | str, tuple[str, ...], str, str]] = [
    ("unknown key", {**FAST, "lora_rnak": 99}, (), "lora_rnak", "unknown field"),
    ("wrong type", {**FAST, "r": "eight"}, (), "r", "whole number"),
    ("missing model", {k: v for k, v in FAST.items() if k not in ("model", "model_config")}, (), "model", "model"),
    ("not an object", "[1, 2]", (), "", "JSON object"),
    ("not json", "{nope", (), "", "not valid JSON"),
    ("framework not run", {**FAST, "framework": "litgpt"}, (), "framework", "Hugging Face stack"),
    ("loss not run", {**FAST, "loss_implementation": "chunked_ce"}, (), "loss_implementation", "hf"),
    ("gpus vs launch", {**FAST, "num_gpus": 2, "parallelism": "ddp"}, (), "num_gpus", "1 process"),
    ("zero", {**FAST, "num_gpus": 1, "cpu_offload": True}, (), "cpu_offload", "false"),
    ("peft type not run", {**FAST, "peft_type": "ia3"}, (), "peft_type", "LoRA only"),
    # requirements-physics.txt pins peft 0.21.2: another release would measure another run
    ("peft release not installed", {**FAST, "peft_version": "0.19.2"}, (), "peft_version", "this environment has 0.21"),
    ("own fsdp units not run", {**FAST, "num_gpus": 2, "parallelism": "fsdp", "fsdp_shard_embeddings": True}, (),
     "fsdp_shard_embeddings",
     "decoder layers only"),
    ("max steps 0", FAST, ("--max-steps", "0"), "--max-steps", "at least 1"),
    ("tokenizer too large", {**FAST, "model_config": {**TINY_LLAMA, "vocab_size": 100}}, (), "--tokenizer",
     "vocabulary only 100"),
]


@pytest.mark.parametrize(("case", "config", "extra", "field", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_before_a_model_is_loaded(tmp_path: Path, schema: Any, case: str,
                                                       config: dict[str, Any] | str, extra: tuple[str, ...],
                                                       field: str, words: str) -> None:
    steps = extra[1] if extra[:1] == ("--max-steps",) else "2"
    code, report = _run(tmp_path, config, steps=steps)
    schema.validate(report)
    assert code == 2, report["message"]
    assert report["status"] == "error" and report["failure"]["kind"] == "bad_input"
    assert words in report["message"] and "\n" not in report["message"]
    if field:
        assert report["failure"]["field"] == field
    assert report["phase"] == "setup" and report["model"] is None
    assert not (tmp_path / "out" / "random-base").exists()  # no model was built or loaded


def test_empty_and_missing_data(tmp_path: Path, schema: Any) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "data.jsonl").write_text("\n", encoding="utf-8")
    code, report = _run(tmp_path / "a", FAST)
    assert code == 2 and "holds 0 example(s)" in report["message"] and report["failure"]["field"] == "--data"
    (tmp_path / "b").mkdir()
    code, report = _run(tmp_path / "b", FAST, extra=("--data", str(tmp_path / "missing.jsonl")))
    schema.validate(report)
    assert code == 2 and "cannot read the data" in report["message"] and report["model"] is None


def test_a_hub_id_while_offline(tmp_path: Path) -> None:
    config = {k: v for k, v in FAST.items() if k != "model_config"} | {"model": "nobody/no-such-model-xyz"}
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    write_data(tmp_path / "data.jsonl", rows=12)
    code = main([str(tmp_path / "config.json"), "--data", str(tmp_path / "data.jsonl"), "--out", str(tmp_path / "out"),
                 "--max-steps", "2"])
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert code == 2 and report["failure"]["field"] == "model" and "no-such-model-xyz" in report["message"]
    assert "\n" not in report["message"]


@pytest.mark.parametrize("stated", [False, True])
def test_random_weights_for_a_hub_model_need_its_dtype(tmp_path: Path, stated: bool) -> None:
    """A model named by id whose config.json gives no dtype: from_pretrained(dtype="auto") loads its weight files'
    dtype (transformers modeling_utils._get_dtype), which a random build cannot know, so the trial asks for
    torch_dtype instead of measuring a bfloat16 base against an estimate of, say, gpt2's float32 files."""
    require(STACK)
    folder = tmp_path / "hub-model"  # hub_config reads a local folder as it reads the hub
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in TINY_LLAMA.items() if k != "dtype"}),
                                        encoding="utf-8")
    config = {k: v for k, v in FAST.items() if k != "model_config"} | {"model": str(folder)}
    if stated:
        config["torch_dtype"] = "float32"
    code, report = _run(tmp_path / "run", config)
    if stated:
        assert code == 0, report.get("message")
    else:
        assert code == 2 and report["failure"]["field"] == "torch_dtype" and "torch_dtype" in report["message"]


def test_expandable_segments_is_set_or_a_contradiction_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    code, report = _run(tmp_path, FAST)
    assert code == 2 and report["failure"]["field"] == "expandable_segments"


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("kind", ["error", "sigterm", "sigint"])
def test_a_stop_in_any_phase_leaves_a_valid_report(tmp_path: Path, base: Path, schema: Any,
                                                   monkeypatch: pytest.MonkeyPatch, phase: str, kind: str) -> None:
    where = "train@2" if phase == "train" else phase
    monkeypatch.setenv("TRIAL_TEST_FAULT", f"{where}:{kind}")
    code, report = _run(tmp_path, FAST, base=base, steps="3")
    schema.validate(report)
    assert report["phase"] == phase and report["finished_at"]
    status, expected_code = {"error": ("error", 1), "sigterm": ("interrupted", 143),
                             "sigint": ("interrupted", 130)}[kind]
    assert report["status"] == status and code == expected_code, report["message"]
    assert report["failure"]["phase"] == phase
    steps = report["measurements"]["steps"]
    done = [s["step"] for s in steps if s["completed"]]
    expected_done = {"setup": [], "load": [], "eval_before": [], "train": [1]}.get(phase, [1, 2, 3])
    assert done == expected_done
    if phase == "train":  # the step in progress is kept, marked unfinished, and named
        assert steps[-1]["step"] == 2 and steps[-1]["completed"] is False and report["failure"]["step"] == 2
    if kind != "error":
        assert ("SIGTERM" if kind == "sigterm" else "SIGINT") in report["message"]
    else:
        assert (tmp_path / "out" / "error-traceback.txt").exists()


def test_a_reused_output_folder_starts_clean(tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAL_TEST_FAULT", "eval:error")
    code, _ = _run(tmp_path, FAST, base=base)
    assert code == 1 and (tmp_path / "out" / "error-traceback.txt").exists()
    monkeypatch.setenv("TRIAL_TEST_FAULT", "load:sigterm")
    code, report = _run(tmp_path, FAST, base=base)
    assert code == 143 and report["measurements"]["steps"] == []
    assert not (tmp_path / "out" / "error-traceback.txt").exists() and not (tmp_path / "out" / "adapter").exists()


def test_a_broken_reload_fails_the_check(tmp_path: Path, base: Path, schema: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAL_TEST_BREAK_RELOAD", "1")
    code, report = _run(tmp_path, {**FAST, "torch_dtype": "bfloat16", "bf16": True}, base=base)
    schema.validate(report)
    assert code == 4 and report["status"] == "check_failed"
    checks = report["checks"]
    assert checks["reload_matches"] is False and checks["reload_weights_equal"] is False
    assert checks["reload_weights_differing"] and "reload" in report["message"]


def test_no_training_fails_the_negative_control(tmp_path: Path, base: Path) -> None:
    code, report = _run(tmp_path, FAST, base=base, extra=("--learning-rate", "0"))
    assert code == 4 and report["checks"]["base_differs"] is False
    assert "negative control" in report["message"]


def test_a_short_token_is_scrubbed_and_the_report_stays_valid(tmp_path: Path, base: Path, schema: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "0")
    monkeypatch.setenv("TRIAL_TEST_FAULT", "eval:error")  # the message carries no "0" of its own; a traceback does
    config = {**FAST, "gpu": "H100-SXM-80GB", "model_config": {**TINY_LLAMA, "name": "0"}}
    code, report = _run(tmp_path, config, base=base)
    schema.validate(report)  # valid JSON whatever the token's value
    assert code == 1 and report["config"]["gpu"] == "H100-SXM-80GB"  # "0" inside a word is not a token
    assert report["config"]["model_config"]["name"] == "***"
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".txt"):
            text = path.read_text(encoding="utf-8")
            assert '"0"' not in text and "'0'" not in text, path


@pytest.mark.parametrize(("adapter_dtype", "expected"), [("auto", ["float32"]), ("bfloat16", ["bfloat16"])])
def test_adapter_dtype_is_what_the_adapters_train_in(tmp_path: Path, base: Path, adapter_dtype: str,
                                                     expected: list[str]) -> None:
    config = {**FAST, "torch_dtype": "bfloat16", "bf16": True, "adapter_dtype": adapter_dtype}
    code, report = _run(tmp_path, config, base=base, steps="1")
    assert code == 0, report["message"]
    assert report["model"]["trainable_dtypes"] == expected  # auto: PEFT's autocast_adapter_dtype upcast


def test_expandable_segments_sets_the_allocator_before_torch_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from recipes.trial.config import configure_allocator

    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    configure_allocator(False)
    assert "PYTORCH_CUDA_ALLOC_CONF" not in os.environ
    configure_allocator(True)
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_an_oom_outside_training_names_its_phase(tmp_path: Path, base: Path, schema: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAL_TEST_FAULT", "eval_before:oom")
    code, report = _run(tmp_path, FAST, base=base)
    schema.validate(report)
    assert code == 3 and report["status"] == "oom"
    assert report["failure"]["phase"] == "eval_before" and report["failure"]["step"] is None
    assert "the eval_before phase" in report["message"]


def test_a_chat_template_bos_is_not_doubled() -> None:
    from recipes.trial.data import tokenize

    class Tok:  # a template that writes BOS itself, and a tokenizer that adds another
        bos_token_id, eos_token_id, chat_template = 1, 2, "x"

        def apply_chat_template(self, messages: Any, tokenize: bool) -> str:
            return "<s>" + "".join(m["content"] for m in messages)

        def __call__(self, text: str, add_special_tokens: bool) -> dict[str, list[int]]:
            ids = [1] if text.startswith("<s>") else []
            return {"input_ids": [1, *ids, *(ord(c) for c in text.removeprefix("<s>"))]}

    rows = [{"messages": [{"role": "user", "content": "ab"}]}, {"text": "cd"}]
    assert tokenize(rows, Tok(), 16) == [[1, 97, 98, 2], [1, 99, 100, 2]]
    assert tokenize(rows, Tok(), 3) == [[1, 97, 98], [1, 99, 100]]  # truncation keeps the start


@pytest.mark.parametrize("optim", ["lion_8bit", "paged_lion_32bit", "paged_adamw_8bit", "adamw_8bit"])
def test_a_bitsandbytes_optimizer_without_bitsandbytes_is_refused(tmp_path: Path, schema: Any,
                                                                 monkeypatch: pytest.MonkeyPatch, optim: str) -> None:
    """The Trainer builds these from bitsandbytes: without it the trial says so before loading a model."""
    import importlib.util

    import recipes.trial.config as trial_config

    real = importlib.util.find_spec
    monkeypatch.setattr(trial_config.importlib.util, "find_spec",
                        lambda name, *a: None if name == "bitsandbytes" else real(name, *a))
    code, report = _run(tmp_path, {**FAST, "optim": optim})
    schema.validate(report)
    assert code == 2 and report["failure"]["kind"] == "bad_input" and report["failure"]["field"] == "optim"
    assert "bitsandbytes" in report["message"]
