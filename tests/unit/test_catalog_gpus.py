"""The GPU catalog covers the cards people rent for fine-tuning, and the row mapping reads their common spellings."""
from __future__ import annotations

import pytest

import validate_rows as vr
from sizing.catalog import find_gpu, gpus
from sizing.errors import SizingError

# Rented cards (the brief's list); MI300X is AMD and refused below.
RENTED = ("T4-16GB", "L4-24GB", "A10-24GB", "A10G-24GB", "A40-48GB", "RTX-A6000-48GB", "RTX-6000-Ada-48GB", "L40-48GB",
          "L40S-48GB", "A100-PCIe-40GB", "A100-SXM-40GB", "A100-PCIe-80GB", "A100-SXM-80GB", "H100-PCIe-80GB",
          "H100-SXM-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "GH200-96GB", "B200-180GB", "RTX-3090-24GB",
          "RTX-4090-24GB", "RTX-5090-32GB", "V100-16GB", "V100-32GB")


def test_rented_cards_are_in_the_catalog() -> None:
    assert [g for g in RENTED if g.lower() not in gpus()] == []


@pytest.mark.parametrize(("gid", "smi_mib", "torch_bytes"), [
    # nvidia-smi memory.total and deviceQuery totalGlobalMem of the captures the records cite (thamada/nvidia-smi).
    ("A40-48GB", 46068, 47608692736), ("RTX-6000-Ada-48GB", 49140, 51002867712),
])
def test_new_cards_hold_their_captured_totals(gid: str, smi_mib: int, torch_bytes: int) -> None:
    gpu = find_gpu(gid)
    assert (gpu.memory_bytes, gpu.usable_bytes) == (smi_mib * 2**20, torch_bytes)


@pytest.mark.parametrize(("text", "expected"), [
    # names as nvidia-smi prints them: one card each, no assumption
    ("NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"), ("A100-SXM4-80GB", "A100-SXM-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"), ("H100 80GB HBM3", "H100-SXM-80GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"), ("Tesla V100-SXM2-32GB", "V100-32GB"), ("NVIDIA A40", "A40-48GB"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada-48GB"), ("H100-SXM5-80GB", "H100-SXM-80GB"),
    # how write-ups name them
    ("A100 80GB", "A100-SXM-80GB"), ("RTX 4090 24GB", "RTX-4090-24GB"), ("Tesla T4", "T4-16GB"),
    ("RTX4090", "RTX-4090-24GB"), ("RTX3090", "RTX-3090-24GB"), ("2xA100", "A100-SXM-80GB"),
    ("8x H100", "H100-SXM-80GB"), ("A40", "A40-48GB"), ("RTX 6000 Ada", "RTX-6000-Ada-48GB"),
    ("H100 NVL", "H100-NVL-94GB"),
    ("H100", "H100-SXM-80GB"),  # form factor unstated: the SXM board, not the larger NVL
    ("RTX 6000", None),  # Quadro RTX 6000 (Turing, 24 GB) is not the RTX 6000 Ada
    ("MI300X", None),
])
def test_gpu_spellings(text: str, expected: str | None) -> None:
    assert vr.match_gpu(text)[0] == expected


def test_named_board_needs_no_assumption() -> None:
    assert vr.match_gpu("A100-SXM4-80GB")[1] is None
    assert "SXM" in (vr.match_gpu("H100")[1] or "")


@pytest.mark.parametrize("gpu_id", ["MI300X", "AMD-MI300X-192GB", "Instinct MI250"])
def test_amd_gpus_are_refused_by_name(gpu_id: str) -> None:
    with pytest.raises(SizingError) as err:
        find_gpu(gpu_id)
    assert err.value.code == "unknown_gpu" and "only NVIDIA CUDA GPUs" in str(err.value)


@pytest.mark.parametrize(("name", "gid"), [
    ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"), ("nvidia h100 80gb hbm3", "H100-SXM-80GB"), ("Tesla T4", "T4-16GB"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090-24GB"), ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada-48GB"),
    ("L40S 48GB", "L40S-48GB"), ("a100-sxm-80gb", "A100-SXM-80GB"),
])
def test_find_gpu_by_the_name_nvidia_smi_prints(name: str, gid: str) -> None:
    assert find_gpu(name).id == gid


def test_every_reported_name_names_one_card() -> None:
    names = [str(g.record["reported_name"]).lower() for g in gpus().values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("text", [
    # another card of a catalog card's line: a variant word or a memory size the catalog card lacks
    "RTX 4090 D", "RTX 4090 Laptop", "RTX 4090 48GB", "RTX 3090 Ti", "RTX 3090 12GB",
])
def test_other_cards_of_a_line_are_not_taken_as_the_catalog_card(text: str) -> None:
    assert vr.match_gpu(text)[0] is None
