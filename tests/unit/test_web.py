# sizing.web, the calculator page's Python API: answers as JSON text, refusals as data, never a traceback.
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from sizing import estimate, load_config, solve, step, web
from sizing.catalog import gpus, model_records
from sizing.solve import fit_table

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "qlora-llama31-8b.json").read_text("utf-8"))


def test_catalog_lists_every_model_and_gpu_of_the_catalog() -> None:
    cat = web.catalog()
    assert [m["id"] for m in cat["models"]] == [r["id"] for r in model_records()]
    assert {g["id"]: g["memory_bytes"] for g in cat["gpus"]} == {g.id: g.memory_bytes for g in gpus().values()}


def test_compute_wraps_the_engine_without_changing_a_number() -> None:
    answer = json.loads(web.compute_json(json.dumps(EXAMPLE)))
    cfg = load_config(EXAMPLE)
    assert answer["ok"] is True
    assert answer["estimate"] == json.loads(json.dumps(estimate(cfg).to_dict()))
    assert answer["fit_table"] == json.loads(json.dumps(fit_table(cfg)))
    assert "get_peft_model(model, lora_config)" in answer["snippet"]


def test_the_page_s_three_answers_end_in_the_table_computed_at_once() -> None:
    """The page asks for the peak, then the table's verdicts, then the table with its searches, which builds on the
    verdicts' rows and Sizer (solve.fit_table(verdicts=...)): its rows are those of one cold fit_table, in the same
    order of keys (the JSON the worker sends)."""
    changes = ({"r": 40}, {"r": 40, "gpu": "L4-24GB", "max_seq_length": 4096},
               {"r": 12, "gradient_checkpointing": False})
    for change in changes:
        raw = {**EXAMPLE, **change}
        web.compute(raw, table=False, peak=True)
        web.compute(raw, table=True, searches=False)
        got = web.compute_json(json.dumps(raw))
        solve._LAST.clear()
        step.clear_caches()
        cold = json.dumps(fit_table(load_config(raw)), allow_nan=False)
        assert json.dumps(json.loads(got)["fit_table"]) == cold


def test_without_the_table_only_the_table_is_left_out() -> None:
    full = json.loads(web.compute_json(json.dumps(EXAMPLE)))
    peak = json.loads(web.compute_json(json.dumps(EXAMPLE), False))
    assert peak["fit_table"] is None
    assert peak["estimate"] == full["estimate"]


def test_the_cached_table_cannot_be_changed_by_a_caller() -> None:
    first = web.compute(EXAMPLE)
    first["fit_table"][0]["gpu"] = "changed"
    assert web.compute(EXAMPLE)["fit_table"][0]["gpu"] != "changed"


def test_refusals_are_data_with_code_and_field() -> None:
    bad_value = json.loads(web.compute_json(json.dumps({**EXAMPLE, "r": -1})))
    assert bad_value["ok"] is False and bad_value["error"]["field"] == "r"
    assert json.loads(web.compute_json("{"))["error"]["code"] == "bad_json"
    deep = json.loads(web.compute_json('{"model": ' + "[" * 5000))
    assert deep["ok"] is False
    not_an_object = json.loads(web.compute_json("[1]"))
    assert not_an_object["ok"] is False and set(not_an_object["error"]) == {"code", "field", "message", "params"}


def test_answers_are_json_that_javascript_parses() -> None:
    values: list[Any] = [math.nan, math.inf, (1, 2.5), {"a": -math.inf}, None, True, "x", 3]
    assert web._finite(values) == [None, None, [1, 2.5], {"a": None}, None, True, "x", 3]
    json.loads(web.compute_json(json.dumps({**EXAMPLE, "max_seq_length": 10**30})), parse_constant=_no_constant)


def test_a_report_that_is_not_json_is_refused() -> None:
    for text in ("{", "[]", '{"schema_version": 1}'):
        answer = json.loads(web.report_json(text))
        assert answer["ok"] is False and answer["error"]["code"]


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in the answer: JavaScript's JSON.parse refuses it")


def test_the_catalog_carries_the_limits_the_engine_refuses_past() -> None:
    # A model's limits are where the engine stops: its max_position_embeddings for the length, and for a
    # pre-quantized checkpoint the one method it accepts (its refusal names that method as "expected").
    # the form's fields (no load_in_4bit / load_in_8bit: the method implies them)
    base = {k: v for k, v in EXAMPLE.items() if not k.startswith("load_in_")} | {"gpu": None}
    for model in web.catalog()["models"]:
        cfg = {**base, "model": model["id"]}
        top, method = model["max_seq_length"], model["method"]
        if method is not None:
            refused = web.compute({**cfg, "max_seq_length": 512, "method": "qlora" if method != "qlora" else "lora"},
                                  table=False)
            assert refused["error"]["params"]["expected"] == method, model["id"]
            cfg["method"] = method
        if top is not None:
            assert web.compute({**cfg, "max_seq_length": top}, table=False)["ok"], model["id"]
            over = web.compute({**cfg, "max_seq_length": top + 1}, table=False)
            assert over["error"]["code"] == "seq_too_long", model["id"]


def test_the_peak_answer_is_the_estimate_without_the_own_gpus_searches() -> None:
    words = {"lang": "en", "text": {}}
    verdicts = set()
    for cfg in (EXAMPLE, {**EXAMPLE, "per_device_train_batch_size": 64}, {**EXAMPLE, "gpu": "T4-16GB", "bf16": True}):
        # with the table, the estimate's own entry comes from the table's row (web._with_table): the engine's
        whole = web.compute(cfg, table=True)
        assert json.loads(json.dumps(whole["estimate"])) == json.loads(json.dumps(estimate(load_config(cfg)).to_dict()))
        full = web.compute(cfg, table=False, words=words)
        peak = web.compute(cfg, table=False, words=words, peak=True)
        (entry,), (fast,) = full["estimate"]["fits"], peak["estimate"]["fits"]
        assert {k: entry[k] for k in fast} == fast and set(entry) - set(fast) <= {"max_micro_batch", "max_seq_length"}
        assert {**peak["estimate"], "fits": full["estimate"]["fits"]} == full["estimate"]  # every other figure
        assert peak["view"] == full["view"]  # the page shows the same
        verdicts.add(fast["fits"])
        text = json.dumps(cfg)
        assert json.loads(web.compute_json(text, False, None, True))["estimate"] == peak["estimate"]
    assert verdicts == {True, False}  # a run that fits and one that does not (its warning, the ladder pending)
    assert "refusal" in fast  # and one on a card without bf16 (its row is the refusal, searches or not)


def test_the_table_without_searches_is_the_whole_table_less_each_cards_searches() -> None:
    """The page's second answer: every figure of the whole fit table but each card's largest micro-batch and
    longest sequence (the view shows "…" there), the estimate of the peak answer, the ladder still to come."""
    words = {"lang": "en", "text": {}}
    verdicts = set()
    for cfg in (EXAMPLE, {**EXAMPLE, "per_device_train_batch_size": 64}):
        whole = web.compute(cfg, table=True, words=words)
        part = web.compute(cfg, table=True, words=words, searches=False)
        assert part["estimate"] == web.compute(cfg, table=False, words=words, peak=True)["estimate"]
        by_gpu = {row["gpu"]: row for row in whole["fit_table"]}
        assert [row["gpu"] for row in part["fit_table"]] == list(by_gpu)
        for row in part["fit_table"]:
            full = by_gpu[row["gpu"]]
            searched = set(full) - set(row)
            # a card the run cannot start on (no bf16) is refused whole, with 0 for both: nothing to search
            assert searched == ({"max_micro_batch", "max_seq_length"} if "refusal" not in row else set())
            assert {k: full[k] for k in row} == row
        fit = next(b for b in part["view"]["blocks"] if b["key"] == "fit")
        cells = [[c["text"] for c in r["cells"]] for r in fit["rows"]]
        runs = [c for c, row in zip(cells, part["fit_table"], strict=True) if "refusal" not in row]
        assert runs and all(c[3:5] == ["…", "…"] for c in runs)
        fits = whole["estimate"]["fits"][0]["fits"]
        assert part["ladder"] is None and ("ladder" in part["view"]["pending"]) == (not fits)
        assert (whole["ladder"] is not None) == (not fits)
        verdicts.add(fits)
        # the JSON bridge the worker calls gives the same
        text = json.dumps(cfg)
        assert json.loads(web.compute_json(text, True, None, False, False))["fit_table"] == \
            json.loads(json.dumps(part["fit_table"]))
    assert verdicts == {True, False}
