# GPU figures in the guides' prose come from the catalog record, so two figures of one card cannot disagree
# (the hand-typed driver-memory table once said 79.10 GiB beside 81106 MiB, which is 79.21).
from __future__ import annotations

import pytest

from sitebuild import sizing_blocks
from sizing.catalog import find_gpu


def _cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()[2:]]


def test_driver_memory_columns_agree_with_each_other() -> None:
    text = sizing_blocks.render("[[sizing:driver_memory gpus=H100-SXM-80GB,H200-SXM-141GB,B300-288GB]]", "en")
    rows = {r[0]: r for r in _cells(text)}
    h100 = rows[find_gpu("H100-SXM-80GB").name]
    smi, total, gib, reserved = (float(c.split()[0].replace(",", "")) for c in h100[1:5])
    assert abs(total / 1024 - gib) <= 0.01  # the GiB column is the MiB column (each rounded once)
    assert abs(smi - total - reserved) <= 1  # the driver's reservation is the difference
    assert rows[find_gpu("B300-288GB").name][2] == "not published"  # no capture: said, not guessed


def test_pcie_x16_from_the_transfer_rate() -> None:
    # PCI-SIG: 4.0 runs 16 GT/s per lane, 5.0 32 GT/s, 128b/130b encoding: an x16 link moves about
    # 31.5 GB/s per direction on 4.0 and 63 GB/s on 5.0; both directions together, twice that.
    assert sizing_blocks.render("[[sizing:pcie gen=4]]", "en") == "63\u00a0GB/s"
    assert sizing_blocks.render("[[sizing:pcie gen=5]]", "en") == "126\u00a0GB/s"


@pytest.mark.parametrize(("field", "en", "ru"), [
    ("bandwidth", "3.35\u00a0TB/s", "3,35\u00a0ТБ/с"), ("bf16_tflops", "989\u00a0TFLOPS", "989\u00a0TFLOPS"),
    ("nvlink", "900\u00a0GB/s", "900\u00a0ГБ/с"), ("name", "H100 SXM5 80GB", "H100 SXM5 80GB")])
def test_h100_figures_in_each_language(field: str, en: str, ru: str) -> None:
    # The H100 SXM5 datasheet: 3.35 TB/s HBM3, 989 dense BF16 TFLOPS (1979 with sparsity), NVLink 900 GB/s.
    assert sizing_blocks.render(f"[[sizing:gpu {field} gpu=H100-SXM-80GB]]", "en") == en
    assert sizing_blocks.render(f"[[sizing:gpu {field} gpu=H100-SXM-80GB]]", "ru") == ru


def test_an_unknown_field_stops_the_build() -> None:
    with pytest.raises(sizing_blocks.PlaceholderError):
        sizing_blocks.render("[[sizing:gpu tdp gpu=H100-SXM-80GB]]", "en")


def test_every_scored_source_resolves_to_a_pinned_published_file() -> None:
    text = sizing_blocks.render("[[sizing:accuracy_sources]]", "en")
    rows = _cells(text)
    assert len(rows) >= 10
    for row in rows:
        url = row[1].split("](", 1)[1].split(")", 1)[0]
        # A file at a 40-hex commit, or a pull request: what the figures were read from cannot move.
        assert ("/blob/" in url and len(url.split("/blob/")[1].split("/")[0]) == 40) or "/pull/" in url, url
