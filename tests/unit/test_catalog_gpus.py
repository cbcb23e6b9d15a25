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
    "RTX 4090 D", "RTX 4090 Laptop", "RTX 4090 48GB", "RTX 3090 12GB",
])
def test_other_cards_of_a_line_are_not_taken_as_the_catalog_card(text: str) -> None:
    assert vr.match_gpu(text)[0] is None


# Cards people own or rent for LoRA / QLoRA on one 10-24 GB board (the 2026-12 brief's list, the ones sourced).
OWNED = ("RTX-2080-Ti-11GB", "RTX-3080-10GB", "RTX-3090-Ti-24GB", "RTX-4060-Ti-16GB", "RTX-4070-Ti-SUPER-16GB",
         "RTX-4080-16GB", "RTX-4080-SUPER-16GB", "RTX-5080-16GB", "RTX-A4000-16GB", "RTX-4000-Ada-20GB")


def test_owned_cards_are_in_the_catalog() -> None:
    assert [g for g in OWNED if g.lower() not in gpus()] == []


@pytest.mark.parametrize(("gid", "smi_mib", "torch_bytes"), [
    # paired nvidia-smi / deviceQuery captures (thamada/gls @e20f22d0, gls/RTX3080_*, RTX4060Ti_*, RTX4000Ada_*)
    ("RTX-3080-10GB", 10240, 10485956608), ("RTX-4060-Ti-16GB", 16380, 16857038848),
    ("RTX-4000-Ada-20GB", 20475, 21125267456),
])
def test_owned_cards_hold_their_captured_totals(gid: str, smi_mib: int, torch_bytes: int) -> None:
    gpu = find_gpu(gid)
    assert (gpu.memory_bytes, gpu.usable_bytes) == (smi_mib * 2**20, torch_bytes)


@pytest.mark.parametrize(("gid", "smi_mib"), [
    # nvidia-smi only (noonghunna/club-3090 #353; nvidia_gpu_exporter's RTX 4080 SUPER capture; geerlingguy/
    # raspberry-pi-pcie-devices #791): without a total_memory capture the driver's reservation is assumed
    ("RTX-3090-Ti-24GB", 24564), ("RTX-4080-SUPER-16GB", 16376), ("RTX-A4000-16GB", 16376),
])
def test_cards_without_a_torch_capture_reserve_600_mib(gid: str, smi_mib: int) -> None:
    gpu = find_gpu(gid)
    assert (gpu.memory_bytes, gpu.usable_bytes) == (smi_mib * 2**20, (smi_mib - 600) * 2**20)


@pytest.mark.parametrize(("text", "expected"), [
    ("RTX 3090 Ti", "RTX-3090-Ti-24GB"), ("NVIDIA GeForce RTX 3090 Ti", "RTX-3090-Ti-24GB"),
    ("RTX 3090", "RTX-3090-24GB"), ("NVIDIA GeForce RTX 3090", "RTX-3090-24GB"),
    ("GeForce RTX 4080 SUPER", "RTX-4080-SUPER-16GB"), ("RTX 4080", "RTX-4080-16GB"), ("RTX4080", "RTX-4080-16GB"),
    ("RTX 4000 Ada", "RTX-4000-Ada-20GB"), ("NVIDIA RTX 4000 Ada Generation", "RTX-4000-Ada-20GB"),
    ("RTX A4000", "RTX-A4000-16GB"), ("RTX 3080", "RTX-3080-10GB"), ("RTX 3080 10GB", "RTX-3080-10GB"),
    ("RTX 4060 Ti 16GB", "RTX-4060-Ti-16GB"), ("RTX 4070 Ti SUPER", "RTX-4070-Ti-SUPER-16GB"),
    ("NVIDIA GeForce RTX 5080", "RTX-5080-16GB"), ("RTX 2080 Ti", "RTX-2080-Ti-11GB"),
    ("GeForce RTX 2080 Ti", "RTX-2080-Ti-11GB"),  # the name older drivers print (NVIDIA/nvidia-docker #1146)
    # another card of the line: its variant word or memory size is not the catalog card's
    ("RTX 3080 Ti", None), ("RTX 3080 12GB", None), ("RTX 4060 Ti 8GB", None), ("RTX 4070 Ti 16GB", None),
    ("RTX 4000 SFF Ada", None), ("RTX 4000", None), ("RTX 4090 D", None), ("RTX 4090 Laptop", None),
    ("RTX 2080 Ti 22GB", None),
])
def test_owned_card_spellings(text: str, expected: str | None) -> None:
    assert vr.match_gpu(text)[0] == expected


def test_turing_and_volta_cards_train_in_fp16() -> None:
    # gpus.md §3: bf16 needs CC >= 8.0; a card below it has no bf16 figure and says so in supports
    assert {"T4-16GB", "V100-16GB", "RTX-2080-Ti-11GB", "Quadro-RTX-8000-48GB", "P100-PCIe-16GB", "P40-24GB"} <= {
        g.id for g in gpus().values() if g.sm < (8, 0)}
    for gpu in gpus().values():
        if gpu.sm < (8, 0):
            assert gpu.bf16_dense_tflops is None and gpu.supports.get("bf16") is False, gpu.id
        else:
            assert gpu.supports.get("bf16") is True, gpu.id


# Cards with published fine-tuning measurements that users name (the 2026-12 brief's second list, the ones sourced).
NAMED = ("RTX-3060-12GB", "RTX-4070-12GB", "RTX-4070-Ti-12GB", "A800-SXM-80GB", "A800-PCIe-80GB", "H800-SXM-80GB",
         "P100-PCIe-16GB", "P40-24GB", "Quadro-RTX-8000-48GB")


def test_named_cards_are_in_the_catalog() -> None:
    assert [g for g in NAMED if g.lower() not in gpus()] == []


@pytest.mark.parametrize(("gid", "smi_mib"), [
    # nvidia-smi memory.total of the captures the records cite (geerlingguy/raspberry-pi-pcie-devices #790; vduma;
    # dexmal/dexbotic #41; vllm-project/vllm #41519; R530+ P100, P40 ECC-on, H800 and Quadro ECC-off captures)
    ("RTX-3060-12GB", 12288), ("RTX-4070-12GB", 12282), ("RTX-4070-Ti-12GB", 12282), ("A800-SXM-80GB", 81920),
    ("A800-PCIe-80GB", 81920), ("H800-SXM-80GB", 81559), ("P100-PCIe-16GB", 16384), ("P40-24GB", 23040),
    ("Quadro-RTX-8000-48GB", 49152),
])
def test_named_cards_hold_their_captured_totals(gid: str, smi_mib: int) -> None:
    gpu = find_gpu(gid)
    assert (gpu.memory_bytes, gpu.usable_bytes) == (smi_mib * 2**20, (smi_mib - 600) * 2**20)


@pytest.mark.parametrize(("text", "expected"), [
    ("RTX 3060", "RTX-3060-12GB"), ("NVIDIA GeForce RTX 3060", "RTX-3060-12GB"), ("RTX 3060 12GB", "RTX-3060-12GB"),
    ("RTX 4070", "RTX-4070-12GB"), ("NVIDIA GeForce RTX 4070", "RTX-4070-12GB"), ("4070 Ti", "RTX-4070-Ti-12GB"),
    ("RTX 4070 Ti", "RTX-4070-Ti-12GB"), ("NVIDIA GeForce RTX 4070 Ti", "RTX-4070-Ti-12GB"),
    ("RTX 4070 Ti SUPER", "RTX-4070-Ti-SUPER-16GB"),
    ("A800 80GB", "A800-SXM-80GB"), ("A800-SXM4-80GB", "A800-SXM-80GB"), ("NVIDIA A800-SXM4-80GB", "A800-SXM-80GB"),
    ("NVIDIA A800 80GB PCIe", "A800-PCIe-80GB"), ("A800 PCIe", "A800-PCIe-80GB"),
    ("H800", "H800-SXM-80GB"), ("NVIDIA H800", "H800-SXM-80GB"), ("8x H800", "H800-SXM-80GB"),
    ("Tesla P100-PCIE-16GB", "P100-PCIe-16GB"), ("Kaggle P100", "P100-PCIe-16GB"), ("P100", "P100-PCIe-16GB"),
    ("P40", "P40-24GB"), ("Tesla P40", "P40-24GB"),
    ("Quadro RTX 8000", "Quadro-RTX-8000-48GB"), ("RTX 8000", "Quadro-RTX-8000-48GB"),
    ("RTX8000", "Quadro-RTX-8000-48GB"),
    # another card of the line: a variant word, memory size or board the catalog card lacks
    ("RTX 3060 Ti", None), ("RTX 3060 8GB", None), ("RTX 3060 Laptop", None), ("RTX 4070 SUPER", None),
    ("H800 PCIe", None), ("NVIDIA H800 PCIe", None), ("Tesla P100-SXM2-16GB", None), ("Tesla P100-PCIE-12GB", None),
    ("Quadro RTX 6000", None),
])
def test_named_card_spellings(text: str, expected: str | None) -> None:
    assert vr.match_gpu(text)[0] == expected


def test_every_card_has_its_sm_count() -> None:
    # the roofline's wave quantization (sizing/time) uses the card's own SM count, not the 108 default
    from sizing.time.device import model_data

    assert [g for g in gpus() if find_gpu(g).id not in model_data()["sm_count"]] == []
