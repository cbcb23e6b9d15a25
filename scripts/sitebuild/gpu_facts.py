"""GPU figures in the guides' prose, from sizing's data instead of typed by hand (registered in sizing_blocks).

* `[[sizing:gpu FIELD gpu=ID]]`: one figure of a catalog card with its unit, in the page's language:
  name, memory (nvidia-smi, GiB), memory_mib, cuda_total_mib, cuda_total_gib, usable (what a run may
  reserve: total_memory minus the CUDA context), driver_reserved_mib, bandwidth, bf16_tflops, nvlink,
  compute_capability.
* `[[sizing:cuda_context]]`: the range of the CUDA context the engine assumes per process.
* `[[sizing:nccl_buffers gpus=N]]`: NCCL's buffers outside PyTorch for N GPUs (sizing.parallel).
* `[[sizing:pcie gen=G]]`: the x16 link of PCIe generation G, both directions, from its transfer rate.
* `[[sizing:driver_memory gpus=A,B]]`: the table of the three memory totals of each card.
"""

from __future__ import annotations

from typing import Any

from sitebuild.sizing_labels import fmt_num
from sizing.catalog import Gpu, find_gpu
from sizing.estimate import usable_bytes
from sizing.memory.overhead import CUDA_CONTEXT
from sizing.parallel import nccl_bytes

GiB, MiB = 2**30, 2**20
UNITS: dict[str, dict[str, str]] = {
    "GiB": {"ru": "ГиБ", "uz": "GiB", "en": "GiB"}, "MiB": {"ru": "МиБ", "uz": "MiB", "en": "MiB"},
    "MB": {"ru": "МБ", "uz": "MB", "en": "MB"}, "GB/s": {"ru": "ГБ/с", "uz": "GB/s", "en": "GB/s"},
    "TB/s": {"ru": "ТБ/с", "uz": "TB/s", "en": "TB/s"}, "TFLOPS": {"ru": "TFLOPS", "uz": "TFLOPS", "en": "TFLOPS"},
}
# PCI Express transfer rate per lane (GT/s) by generation, with 128b/130b encoding from 3.0 on
# (PCI-SIG, PCI Express Base Specification 4.0 and 5.0): 16 lanes, 8 bits per byte, both directions.
PCIE_GTS = {3: 8.0, 4: 16.0, 5: 32.0}
WORDS: dict[str, dict[str, str]] = {
    "gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "smi": {"ru": "`nvidia-smi` memory.total", "uz": "`nvidia-smi` memory.total", "en": "`nvidia-smi` memory.total"},
    "total": {"ru": "`total_memory`", "uz": "`total_memory`", "en": "`total_memory`"},
    "oom": {"ru": "«total capacity» в сообщении OOM", "uz": "OOM xabaridagi «total capacity»",
            "en": "OOM \"total capacity\""},
    "reserved": {"ru": "Резерв драйвера", "uz": "Drayver zaxirasi", "en": "Driver reservation"},
    "unpublished": {"ru": "не опубликовано", "uz": "e’lon qilinmagan", "en": "not published"},
}


def _u(value: float, unit: str, lang: str, decimals: int) -> str:
    return f"{fmt_num(value, lang, decimals)}\u00a0{UNITS[unit][lang]}"


def _rate(gbps: float, lang: str) -> str:
    """GB/s below 1000, TB/s from 1000 on (decimal units, as the datasheets give them)."""
    if gbps >= 1000:
        return _u(gbps / 1000, "TB/s", lang, 2 if gbps % 100 else 1)
    return _u(gbps, "GB/s", lang, 0 if gbps == int(gbps) else 1)


def _field(gpu: Gpu, field: str, lang: str) -> str:
    total = gpu.torch_total_memory_bytes
    values: dict[str, Any] = {
        "name": lambda: gpu.name,
        "memory": lambda: _u(gpu.memory_bytes / GiB, "GiB", lang, 2),
        "memory_mib": lambda: _u(gpu.memory_bytes / MiB, "MiB", lang, 0),
        "cuda_total_mib": lambda: _u(total / MiB, "MiB", lang, 0) if total else WORDS["unpublished"][lang],
        "cuda_total_gib": lambda: _u(total / GiB, "GiB", lang, 2) if total else WORDS["unpublished"][lang],
        "usable": lambda: _u(usable_bytes(gpu) / GiB, "GiB", lang, 2),
        "driver_reserved_mib": lambda: _u((gpu.memory_bytes - total) / MiB, "MiB", lang, 0) if total else "—",
        "bandwidth": lambda: _rate(gpu.memory_bandwidth_GBps or 0, lang),
        "bf16_tflops": lambda: _u(gpu.bf16_dense_tflops or 0, "TFLOPS", lang, 0),
        "nvlink": lambda: _rate(float(gpu.record.get("nvlink_GBps") or 0), lang),
        "compute_capability": lambda: gpu.compute_capability,
    }
    if field not in values:
        raise KeyError(f"unknown GPU field {field!r}; one of {', '.join(values)}")
    return str(values[field]())


def gpu_fact(words: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:gpu FIELD gpu=ID]]`: one figure of a catalog card, with its unit."""
    return _field(find_gpu(str(kw["gpu"])), words[0], lang)


def cuda_context(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:cuda_context]]`: the low and high CUDA context per process the engine assumes."""
    return f"{fmt_num(CUDA_CONTEXT[0] / GiB, lang, 2)}–{_u(CUDA_CONTEXT[2] / GiB, 'GiB', lang, 2)}"


def nccl(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:nccl_buffers gpus=N]]`: NCCL's buffers per GPU for N GPUs, in decimal MB as the source gives."""
    return _u(nccl_bytes(int(kw["gpus"])) / 1e6, "MB", lang, 0)


def pcie(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:pcie gen=G]]`: an x16 link of generation G, both directions together."""
    gts = PCIE_GTS[int(kw["gen"])]
    return _u(2 * 16 * gts * 128 / 130 / 8, "GB/s", lang, 0)


def driver_memory(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:driver_memory gpus=A,B]]`: nvidia-smi's total, total_memory in MiB and in GiB (what the OOM
    message prints), and the driver's reservation between them, all from one record per card."""
    head = [WORDS[k][lang] for k in ("gpu", "smi", "total", "oom", "reserved")]
    rows = []
    for gpu in (find_gpu(i) for i in str(kw["gpus"]).split(",")):
        rows.append([gpu.name] + [_field(gpu, f, lang) for f in ("memory_mib", "cuda_total_mib", "cuda_total_gib",
                                                                  "driver_reserved_mib")])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


HANDLERS = {"gpu": gpu_fact, "cuda_context": cuda_context, "nccl_buffers": nccl, "pcie": pcie,
            "driver_memory": driver_memory}

__all__ = ["HANDLERS", "cuda_context", "driver_memory", "gpu_fact", "nccl", "pcie"]
