"""The `sizing` wheel imported under Pyodide (Node) answers exactly what CPython answers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sitebuild import calculator_pages, pyodide_runtime, stdlib_trim
from sizing import web
from tests import sharedsite
from tests.needs import cannot_run

ROOT = Path(__file__).resolve().parents[2]


NODE = shutil.which("node")
PYODIDE = ROOT / "node_modules" / "pyodide"


def configs() -> list[str]:
    """JSON texts as the page sends them: the default, variations, and refusals."""
    base = calculator_pages.default_config()
    tiny = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 32000,
            "max_position_embeddings": 4096, "tie_word_embeddings": False}
    variants: list[Any] = [
        base,
        {**base, "method": "lora", "r": 64, "lora_alpha": 128, "target_modules": ["q_proj", "v_proj"]},
        {**base, "method": "full", "torch_dtype": "float32", "optim": "adamw_bnb_8bit", "max_seq_length": 2048},
        {**base, "num_gpus": 4, "parallelism": "fsdp", "price_per_gpu_hour": 2.5, "model": "Qwen/Qwen2.5-14B"},
        {**base, "model": None, "model_config": tiny, "per_device_train_batch_size": 4},
        {**base, "r": "<b>16</b>"},
        {**base, "max_seq_length": 10**30},
        {**base, "model_config": {"model_type": "<script>alert(1)</script>", "hidden_size": "x"}},
        [1, 2, 3],
    ]
    return [json.dumps(v) for v in variants] + ['{"model": ', '{"model": "' + "[" * 50]


def reports() -> list[str]:
    """Trial reports as the page sends them: a complete one, an out-of-memory one, broken ones."""
    gib = 2**30
    step = {"step": 1, "completed": True, "seconds": 3.5, "tokens": 4096, "micro_batches": 1, "loss": 1.0,
            "host_max_rss_bytes": gib, "max_memory_allocated_bytes": 9 * gib, "max_memory_reserved_bytes": 10 * gib,
            "device_used_bytes": None, "device_source": None, "reason": "no pynvml"}
    good = {"schema_version": 1, "status": "ok", "message": "done", "failure": None, "rank": 0, "world_size": 1,
            "config": calculator_pages.default_config(), "measurements": {"steps": [step, {**step, "step": 2}],
                                                                          "peaks": None},
            "checks": {"reload_matches": True, "eval_loss_before": 2.0, "eval_loss_after": 1.0}}
    oom = {**good, "status": "oom", "failure": {"kind": "out_of_memory", "phase": "backward", "step": 1,
                                                 "exception": "CUDA out of memory", "peak_allocated_bytes": gib,
                                                 "peak_reserved_bytes": gib}}
    return [json.dumps(good), json.dumps(oom), json.dumps({**good, "schema_version": 9}), "{", "[]"]


@pytest.fixture(scope="module")
def pyodide_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if NODE is None or not (PYODIDE / "pyodide.mjs").is_file():
        cannot_run("node or node_modules/pyodide missing (run `npm ci`)")  # under CI=true: a failure
    tmp = tmp_path_factory.mktemp("pyodide")
    name, data = calculator_pages.build_wheel()
    (tmp / name).write_bytes(data)
    (tmp / "configs.json").write_text(json.dumps({"configs": configs(), "reports": reports()}), "utf-8")
    with sharedsite.cache_lock():  # the site build may be filling the same cache in another xdist worker
        # the page's standard library: precompiled and trimmed to what the calculator imports (stdlib_trim.py)
        full = pyodide_runtime.stdlib_pyc(calculator_pages.pyodide_version() or "", pytest.fail)
        assert full is not None
        trimmed = stdlib_trim.trimmed_stdlib(full, data, calculator_pages.default_config(),
                                             pyodide_runtime.STDLIB_CACHE, lambda *a: pyodide_runtime._run_node(
                                                 *a, pytest.fail))
        assert trimmed is not None and trimmed.stat().st_size < full.stat().st_size / 2
    proc = subprocess.run([NODE, str(Path(__file__).parent / "run_node.mjs"), str(tmp / name),
                           str(tmp / "configs.json"), str(trimmed)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.fail(f"node exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout))


def test_runs_python_314_with_the_wheel(pyodide_answers: dict[str, Any]) -> None:
    assert pyodide_answers["version"].startswith("3.14 "), pyodide_answers["version"]
    assert pyodide_answers["version"].endswith(calculator_pages.package_version())


def test_pyodide_answers_equal_cpython(pyodide_answers: dict[str, Any]) -> None:
    bridge = web
    texts = configs()
    assert len(pyodide_answers["answers"]) == len(texts)
    for text, answer in zip(texts, pyodide_answers["answers"], strict=True):
        assert json.loads(answer) == json.loads(bridge.compute_json(text)), text[:200]


def test_pyodide_reads_trial_reports_as_cpython_does(pyodide_answers: dict[str, Any]) -> None:
    bridge = web
    texts = reports()
    answers = [json.loads(a) for a in pyodide_answers["reports"]]
    assert answers == [json.loads(bridge.report_json(text)) for text in texts]
    assert [a["ok"] for a in answers] == [True, True, False, False, False]
    assert answers[0]["comparison"]["figures"]["reserved"]["measured_bytes"] == 10 * 2**30


def test_some_answers_are_refusals_with_a_field(pyodide_answers: dict[str, Any]) -> None:
    answers = [json.loads(a) for a in pyodide_answers["answers"]]
    assert answers[0]["ok"] and answers[4]["ok"]
    assert answers[0]["estimate"]["peak"]["allocated_bytes"] > 0
    refused = [a["error"] for a in answers if not a["ok"]]
    assert {"r", "max_seq_length"} <= {e["field"] for e in refused}

