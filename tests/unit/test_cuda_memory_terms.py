# "Available to CUDA" has one meaning everywhere (CUDA's total, torch.cuda.get_device_properties().total_memory);
# what a run may reserve once its CUDA context is up has its own name ("usable after the CUDA context").
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sitebuild import sizing_blocks
from sitebuild.calculator_results import results_view
from sitebuild.sizing_labels import LABELS
from sizing import web
from sizing.cli import main
from sizing.memory.overhead import CUDA_CONTEXT

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qlora-llama31-8b.json"
GiB = 2**30
RECORD = next(g for g in json.loads((ROOT / "sizing" / "data" / "gpus.json").read_text("utf-8"))["gpus"]
              if g["id"] == "H100-SXM-80GB")
CUDA_TOTAL = f"{RECORD['torch_total_memory_bytes'] / GiB:.2f}"  # 79.20: the catalog record, as measured
AFTER_CONTEXT = f"{(RECORD['torch_total_memory_bytes'] - CUDA_CONTEXT[1]) / GiB:.2f}"  # 78.70


def test_the_two_amounts_differ_by_the_cuda_context() -> None:
    assert (CUDA_TOTAL, AFTER_CONTEXT) == ("79.20", "78.70")


def test_the_command_line_names_each_amount(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("H100-SXM-80GB "))
    assert f"{CUDA_TOTAL} GiB available to CUDA" in line
    assert main(["estimate", str(EXAMPLE), "--gpu", "H100-SXM-80GB"]) == 0
    out = capsys.readouterr().out
    assert f"({AFTER_CONTEXT} GiB usable after the CUDA context," in out
    assert f"{AFTER_CONTEXT} GiB available" not in out


def test_gpu_page_table_and_chart_name_each_amount() -> None:
    specs = sizing_blocks.render("[[sizing:gpu_specs gpu=H100-SXM-80GB]]", "en")
    assert f"| {LABELS['memory_cuda']['en']} | {CUDA_TOTAL} GiB |" in specs
    assert f"| {LABELS['capacity']['en']} | {AFTER_CONTEXT} GiB |" in specs
    chart = sizing_blocks.render("[[sizing:gpu_context_chart gpu=H100-SXM-80GB]]", "en")
    assert "Usable after the CUDA context" in chart and "Available to CUDA" not in chart


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_the_calculator_names_the_amount_it_shows(lang: str) -> None:
    answer = web.compute(json.loads(EXAMPLE.read_text("utf-8")))
    compare = next(b for b in results_view(answer, lang)["blocks"] if b["key"] == "compare")
    row = next(r for r in compare["rows"] if r["attrs"]["data-row"] == "capacity")
    assert row["cells"][0]["text"] == LABELS["capacity"][lang]
    assert re.sub(r"[,.]", ".", row["cells"][1]["text"]).startswith(AFTER_CONTEXT)
    assert LABELS["capacity"][lang] != LABELS["memory_cuda"][lang]
