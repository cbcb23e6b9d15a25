"""sizing/report.py: a trial report against the estimate of its run (standard library only, no torch)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sizing import SizingError, estimate
from sizing.cli import main
from sizing.report import compare, format_comparison, load_report, parse_report

CONFIG: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B", "method": "qlora", "torch_dtype": "bfloat16", "bf16": True,
    "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
    "bnb_4bit_compute_dtype": "bfloat16", "r": 16, "lora_alpha": 32, "max_seq_length": 2048,
    "per_device_train_batch_size": 1, "gradient_checkpointing": True, "gpu": "H100-SXM-80GB",
}
GiB = 2**30


def _step(n: int, alloc: int | None, reserved: int | None, device: int | None) -> dict[str, Any]:
    return {"step": n, "completed": True, "seconds": 1.0, "tokens": 2048, "micro_batches": 1, "loss": 1.0,
            "host_max_rss_bytes": GiB, "max_memory_allocated_bytes": alloc, "max_memory_reserved_bytes": reserved,
            "device_used_bytes": device, "device_source": "pynvml: this process" if device else None,
            "reason": None if alloc else "CUDA is not available (CPU run): GPU memory is not measured"}


def report(steps: list[dict[str, Any]], status: str = "ok") -> dict[str, Any]:
    return {"schema_version": 1, "status": status, "message": "trial completed", "failure": None, "rank": 0,
            "world_size": 1, "config": CONFIG, "measurements": {"steps": steps, "peaks": None},
            "checks": {"reload_matches": True, "eval_loss_before": 2.0, "eval_loss_after": 1.5}}


def test_percentages_against_the_estimate() -> None:
    est = estimate(CONFIG)
    measured = est.allocated_bytes // 2
    rep = load_report(json.dumps(report([_step(1, measured // 2, GiB, 2 * GiB), _step(2, measured, 3 * GiB, None)])))
    cmp = compare(rep)
    alloc = cmp["figures"]["allocated"]
    assert alloc["measured_bytes"] == measured and alloc["measured_step"] == 2
    assert alloc["difference_percent"] == pytest.approx((est.allocated_bytes - measured) / measured * 100, abs=0.01)
    assert cmp["figures"]["reserved"]["measured_bytes"] == 3 * GiB
    assert cmp["figures"]["device"]["measured_bytes"] == 2 * GiB
    assert "allocated" in format_comparison(cmp)


def test_cpu_report_keeps_the_reason_and_has_no_percentages() -> None:
    cmp = compare(parse_report(report([_step(1, None, None, None)])))
    for fig in cmp["figures"].values():
        assert fig["measured_bytes"] is None and fig["difference_percent"] is None
        assert "CUDA is not available" in fig["reason"]
    assert "not measured: CUDA" in format_comparison(cmp)


@pytest.mark.parametrize(("mutate", "code"), [
    (lambda r: r.pop("config"), "report_malformed"),
    (lambda r: r.update(status="fine"), "report_malformed"),
    (lambda r: r.update(schema_version=2), "report_version"),
    (lambda r: r["measurements"].update(steps={}), "report_malformed"),
    (lambda r: r["measurements"]["steps"].append(_step(1, -5, None, None)), "report_malformed"),
    (lambda r: r["measurements"].update(peaks={"max_memory_allocated_bytes": {"value": "big"}}), "report_malformed"),
])
def test_malformed_reports_are_refused(mutate: Any, code: str) -> None:
    data = copy.deepcopy(report([]))
    mutate(data)
    with pytest.raises(SizingError) as err:
        parse_report(data)
    assert err.value.code == code


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(SizingError) as err:
        load_report("{nope")
    assert err.value.code == "bad_json"
    with pytest.raises(SizingError) as err:
        load_report("[]")
    assert err.value.code == "report_malformed"


def test_cli(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report([_step(1, GiB, 2 * GiB, 3 * GiB)])), encoding="utf-8")
    assert main(["report", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures"]["device"]["measured_bytes"] == 3 * GiB
    path.write_text("{}", encoding="utf-8")
    assert main(["report", str(path)]) == 2
    assert "report_malformed" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert "report_unreadable" in capsys.readouterr().err


def test_step_time_leaves_out_the_first_step_and_compares_with_the_estimate() -> None:
    steps = [_step(1, GiB, GiB, None), _step(2, GiB, GiB, None), _step(3, GiB, GiB, None), _step(4, GiB, GiB, None)]
    steps[0]["seconds"], steps[1]["seconds"], steps[2]["seconds"], steps[3]["seconds"] = 9.0, 2.0, 4.0, 3.0
    cmp = compare(load_report(json.dumps(report(steps))))
    t = cmp["time"]
    assert t["measured_step_seconds"] == 3.0 and t["steps_timed"] == 3  # median of 2, 4, 3: warm-up left out
    assert t["measured_tokens_per_second"] == pytest.approx(3 * 2048 / 9.0)
    est = estimate(CONFIG).time
    assert est is not None and t["estimated_step_seconds"] == est["step_seconds"]
    assert t["step_difference_percent"] == pytest.approx((est["step_seconds"] - 3.0) / 3.0 * 100, abs=0.01)
    assert "step time: measured 3.00 s (median of 3 step(s))" in format_comparison(cmp)


def test_a_reserved_peak_at_the_floor_left_before_training_is_named() -> None:
    data = report([_step(1, 9 * GiB, 12 * GiB, None), _step(2, 9 * GiB, 12 * GiB, None)])
    data["measurements"]["before_train"] = {"allocated_bytes": 6 * GiB, "reserved_bytes": 12 * GiB, "reason": None}
    cmp = compare(load_report(json.dumps(data)))
    assert cmp["before_train"] == {"allocated_bytes": 6 * GiB, "reserved_bytes": 12 * GiB,
                                   "reserved_peak_is_this_floor": True}
    assert "reserved when training began: 12.00 GiB" in format_comparison(cmp)
    assert "compare allocated" in format_comparison(cmp)
    data["measurements"]["before_train"]["reserved_bytes"] = 8 * GiB
    assert compare(load_report(json.dumps(data)))["before_train"]["reserved_peak_is_this_floor"] is False
    del data["measurements"]["before_train"]  # reports written before the field existed
    assert compare(load_report(json.dumps(data)))["before_train"] is None
    data["measurements"]["before_train"] = {"allocated_bytes": "x", "reserved_bytes": 1}
    with pytest.raises(SizingError) as err:
        load_report(json.dumps(data))
    assert err.value.code == "report_malformed" and err.value.field == "measurements.before_train"


def _with_hardware(data: dict[str, Any], names: list[str], world: int = 1) -> dict[str, Any]:
    data["world_size"] = world
    data["hardware"] = {"gpu_count": len(names), "gpus": [{"index": i, "name": n, "total_memory_bytes": 80 * GiB,
                                                           "compute_capability": "9.0"} for i, n in enumerate(names)],
                        "device_name": names[0] if names else None, "cpu_count": 8, "platform": "linux", "rank": 0,
                        "world_size": world, "local_rank": 0}
    return data


def _timed(status: str = "ok") -> dict[str, Any]:
    steps = [_step(1, GiB, GiB, None), _step(2, GiB, GiB, None), _step(3, GiB, GiB, None)]
    return report(steps, status)


def test_a_cpu_run_has_no_timing_comparison() -> None:
    cmp = compare(parse_report(_with_hardware(_timed(), [])))
    t = cmp["time"]
    assert t["measured_step_seconds"] == 1.0 and t["estimated_step_seconds"] is not None
    assert t["step_difference_percent"] is None and t["tokens_difference_percent"] is None
    assert "CPU run" in t["not_compared"] and "step time not compared" in format_comparison(cmp)


def test_the_configured_gpu_is_checked_against_the_one_measured() -> None:
    # CONFIG names H100-SXM-80GB, whose catalog record says the driver reports "NVIDIA H100 80GB HBM3"
    same = compare(parse_report(_with_hardware(_timed(), ["NVIDIA H100 80GB HBM3"])))
    assert same["hardware"]["gpu_matches"] is True and same["time"]["step_difference_percent"] is not None
    other = compare(parse_report(_with_hardware(_timed(), ["NVIDIA A10G"])))
    assert other["hardware"]["gpu_matches"] is False and other["time"]["step_difference_percent"] is None
    assert "NVIDIA A10G" in other["time"]["not_compared"]
    assert other["figures"]["allocated"]["difference_percent"] is not None  # memory does not depend on the card


def test_a_process_count_other_than_num_gpus_is_not_compared_per_gpu() -> None:
    cmp = compare(parse_report(_with_hardware(_timed(), ["NVIDIA H100 80GB HBM3"] * 2, world=2)))
    assert cmp["hardware"]["world_size_matches"] is False
    alloc = cmp["figures"]["allocated"]
    assert alloc["measured_bytes"] == GiB and alloc["difference_percent"] is None and alloc["within_range"] is None
    assert "num_gpus 1" in alloc["reason"] and "not compared" in format_comparison(cmp)


@pytest.mark.parametrize("status", ["interrupted", "check_failed"])
def test_interrupted_and_failed_check_reports_are_read(status: str) -> None:
    data = _timed(status)
    data["checks"]["failed"] = ["reload: 2 of 8 saved tensor(s) differ after the reload (first: a)"]
    cmp = compare(parse_report(data))
    assert cmp["status"] == status and cmp["steps"] == 3
    assert "check failed: reload: 2 of 8" in format_comparison(cmp)


@pytest.mark.parametrize("text", [
    "[" * 100_000,  # nested past the decoder's recursion limit
    '{"schema_version": ' + "9" * 5000 + "}",  # past int's digit limit
    '{"schema_version": 1, "x": 1e400}',  # past the float range
    '{"schema_version": NaN}', '{"schema_version": -Infinity}',  # not JSON numbers
])
def test_a_report_is_read_as_strictly_as_the_command_line_reads_it(text: str) -> None:
    """The page imports a report through load_report (sizing/web.py report_json), the CLI through read_json: both
    refuse what is not strict JSON with bad_json, never an internal error or a silent NaN / infinity."""
    from sizing import web

    with pytest.raises(SizingError) as err:
        load_report(text)
    assert err.value.code == "bad_json"
    assert json.loads(web.report_json(text))["error"]["code"] == "bad_json"
