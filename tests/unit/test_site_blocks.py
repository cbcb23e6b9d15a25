# The build-time placeholders print exactly what the engine computes, in the page's number format.
from __future__ import annotations

import re

import pytest

from sitebuild import sizing_blocks
from sitebuild.sizing_labels import fmt_num
from sizing import estimate


@pytest.mark.parametrize(("lang", "text"), [("ru", "131\u00a0072"), ("uz", "131\u00a0072"), ("en", "131,072")])
def test_lora_example_in_each_language(lang: str, text: str) -> None:
    assert sizing_blocks.render("[[sizing:lora_params in=4096 out=4096 r=16]]", lang) == text
    assert sizing_blocks.render("[[sizing:lora_bytes in=4096 out=4096 r=16]]", lang) == "256 KiB"


def test_estimate_placeholder_equals_the_engine() -> None:
    run = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "max_seq_length": 4096,
           "per_device_train_batch_size": 1, "bf16": True}
    est = estimate(run)
    text = sizing_blocks.render("[[sizing:estimate allocated model=meta-llama/Llama-3.1-8B method=qlora "
                                "max_seq_length=4096 per_device_train_batch_size=1 bf16=true]]", "en")
    assert text == fmt_num(est.allocated_bytes / 2**30, "en", 2)


def test_gpu_fit_table_cells_match_the_engine() -> None:
    table = sizing_blocks.render("[[sizing:gpu_fit_table gpu=H100-SXM-80GB]]", "en")
    run = sizing_blocks._reference_run("meta-llama/Llama-3.1-8B", "qlora", 2048, "H100-SXM-80GB")
    fit = estimate(run).fits[0]
    row = next(line for line in table.splitlines() if "Llama-3.1-8B" in line and "QLoRA" in line)
    first = row.split("|")[3].strip()
    assert first == f"✓ {fmt_num(fit['headroom_bytes'] / 2**30, 'en', 2)} · ×{fit['max_micro_batch']}"


def test_unknown_or_broken_placeholders_stop_the_build() -> None:
    with pytest.raises(sizing_blocks.PlaceholderError):
        sizing_blocks.render("[[sizing:nothing]]", "en")
    with pytest.raises(sizing_blocks.PlaceholderError):
        sizing_blocks.render("[[sizing:estimate allocated model=no/such-model]]", "en")


def test_charts_are_self_contained_svg() -> None:
    svg = sizing_blocks.render("[[sizing:gpu_context_chart gpu=L40S-48GB]]", "ru")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert not re.search(r"(href|src)=\"https?://", svg)


def test_json_list_arguments() -> None:
    text = sizing_blocks.render('[[sizing:estimate adapters model=meta-llama/Llama-3.1-8B method=lora '
                                'target_modules=["q_proj","v_proj"] r=16]]', "en")
    est = estimate({"model": "meta-llama/Llama-3.1-8B", "method": "lora", "target_modules": ["q_proj", "v_proj"],
                    "r": 16})
    assert text == fmt_num(est.components["adapters"] / 2**30, "en", 2)


# Product and bus names that stay as written in every language; any other Latin word on a ru page is English left over.
TECH = {"PCIe", "NVLink", "NVLink-C", "NVSwitch", "HGX", "GPU", "CPU", "SXM", "Gen", "Grace", "AWS", "LPDDR", "P"}


@pytest.mark.parametrize("lang", ["ru", "uz"])
def test_gpu_specs_speak_the_page_language(lang: str) -> None:
    """The specifications table of every catalog card: the interconnect (English in gpus.json) in the page's words,
    GiB as the page writes it (ГиБ in ru), no English phrase left (it read 'PCIe 4.0 x16; no NVLink' on ru pages)."""
    from sizing.catalog import gpus

    for gpu in gpus().values():
        table = sizing_blocks.HANDLERS["gpu_specs"]([], {"gpu": gpu.id}, lang)
        row = next(line for line in table.splitlines() if sizing_blocks.label("interconnect", lang) in line)
        value = row.split("|")[2]
        if lang == "ru":
            # whole Latin words (model codes such as G5, x16, LPDDR5X, C2C are not words)
            latin = set(re.findall(r"(?<![A-Za-z0-9])[A-Za-z][A-Za-z-]*[A-Za-z](?![A-Za-z0-9])", value))
            assert latin <= TECH, (gpu.id, value)
            assert " GiB" not in table and "ГиБ" in table, gpu.id
        assert not re.search(r"\b(?:no|between|cards?|links|bridge|per|node|common|variant|instances)\b", value), (
            gpu.id, value)
