# What a GPU offers the step: peak matmul rate in the run's dtype, bandwidth, SMs, fitted efficiencies.
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..catalog import Gpu
from ..config import RunConfig
from ..memory.regime import Regime

DATA = Path(__file__).resolve().parent.parent / "data" / "time_model.json"


@lru_cache(maxsize=1)
def model_data() -> dict[str, Any]:
    """The roofline's parameters (sizing/data/time_model.json)."""
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class Device:
    """One GPU as the roofline sees it, for one run's matmul dtype."""

    gpu_id: str
    architecture: str
    matmul_dtype: str  # "bf16" | "fp16" | "fp32" | "tf32"
    peak_flops: float  # dense FLOP/s of the tensor cores (or CUDA cores for fp32) in matmul_dtype
    fp32_flops: float  # plain fp32 FLOP/s (fp32 adapter matmuls, fp32 softmax)
    bandwidth: float  # B/s, datasheet
    sm_count: int
    gemm_efficiency: float
    bandwidth_efficiency: float
    pcie_GBps: float
    link_GBps: float  # NCCL bus bandwidth of GPU-to-GPU collectives: NVLink, PCIe peer-to-peer, or via host memory
    fitted: bool = False  # gemm_efficiency comes from this GPU's own timed runs (or the user's utilization)


# PCIe unidirectional x16 throughput in GB/s by generation (PCI-SIG: 3.0 ~15.8, 4.0 ~31.5, 5.0 ~63, 6.0 ~121);
# ~80 % of it is reached by large pinned copies.
PCIE_GBPS = {3: 15.8, 4: 31.5, 5: 63.0, 6: 121.0}
PCIE_EFFICIENCY = 0.8

# GPU-to-GPU collectives are costed at NCCL's bus bandwidth (busbw: the per-GPU rate independent of the GPU count;
# NVIDIA/nccl-tests doc/PERFORMANCE.md), one figure per kind of link, measured at large (>= 256 MB) messages.
# NVLink: ring busbw is ~80 % of the one-way rate: A100 all-reduce 234.89 of 300 GB/s (78 %, stas00/ml-engineering
# network/README.md @744d01e1 L1283), 231.58 at 8 GB (Azure/AI-benchmarking-guide Azure_Results/ND_A100_v4_results.md
# @3bb66cac); H200 all-gather 361.4 / reduce-scatter 362.9 of 450 (80-81 %, same README L980-981); "effective
# NVLink bandwidth of 370GB/s" for H100 (NVIDIA/nccl-tests #212, sjeaugey 2024-05-06).
NVLINK_EFFICIENCY = 0.8
# PCIe with peer access, all-reduce busbw: 6x RTX 4090 on the P2P driver 24.54 GB/s at 32 MB, 0.78 of Gen4 x16
# (tinygrad/open-gpu-kernel-modules README @ tag 550.54.15-p2p); 8x RTX 5090 on the P2P driver 45.4-45.7 GB/s at
# 16-64 MB, 0.72 of Gen5 x16 (aikitoria/open-gpu-kernel-modules README @08dc3455): PCIE_EFFICIENCY.
# Without peer access (GeForce: gpus.json peer_to_peer false) NCCL diverts every hop through host memory (NVIDIA/nccl
# src/graph/paths.cc @5067397c L762-772) and a ring's two directions share that path: 2x RTX 2080 Ti, Gen3 x16,
# P2P "NS": all_gather busbw 3.79 GB/s, all_reduce 4.00 at 1 GiB (Anthony-Hoo/Anthony-Hoo.github.io
# posts/AutoDL_Multi-GPU_Interconnection_Test.md @37e805e8), 0.24-0.25 of 15.8; 2x RTX 3090, Gen4 x16, P2P off:
# 16.77 GB/s both ways together, 0.27 of 31.5 each way (noonghunna/club-3090 docs/PCIE_P2P.md @00ee3a68, 4a).
# The host sets it: a Gen5 dual-EPYC host copies at 0.45 (aikitoria README, 5090 bidirectional P2P=Disabled ~57).
PCIE_NO_P2P_EFFICIENCY = 0.25


def matmul_dtype(cfg: RunConfig, reg: Regime, gpu: Gpu) -> str:
    """The dtype the run's matmuls execute in: bf16, fp16 (also bf16 requests on GPUs without bf16), fp32."""
    if cfg.fp16 or (reg.compute == 2 and reg.load_dtype == "float16" and not cfg.bf16):
        return "fp16"
    if reg.compute == 2:
        # T4 / V100 have no bf16 tensor cores: a run there trains on its fp16 path (issue 13, item 5).
        return "bf16" if gpu.supports.get("bf16") and gpu.bf16_dense_tflops else "fp16"
    return "tf32" if cfg.extra.get("tf32") else "fp32"


def _bandwidth_efficiency(arch: str) -> float:
    gens: dict[str, dict[str, float]] = model_data()["generations"]
    return float({**gens["default"], **gens.get(arch, {})}["bandwidth_efficiency"])


def matmul_ratio(gpu: Gpu, dtype: str, spec: float) -> float | None:
    """Measured torch.matmul TFLOPS over the datasheet figure for `dtype`, or None without a benchmark row."""
    row = model_data()["matmul_benchmark"]["gpus"].get(gpu.id, {})
    measured = row.get(dtype) or (row.get("fp16") if dtype == "bf16" else None)
    return float(measured) / spec if measured else None


def device(cfg: RunConfig, reg: Regime, gpu: Gpu) -> Device | None:
    """The GPU's figures for this run, or None when the catalog lacks its peak or bandwidth."""
    rec = gpu.record
    dtype = matmul_dtype(cfg, reg, gpu)
    key = {"bf16": "bf16_dense_tflops", "fp16": "fp16_dense_tflops", "fp32": "fp32_tflops",
           "tf32": "tf32_dense_tflops"}[dtype]
    peak = rec.get(key) or (rec.get("fp32_tflops") if dtype == "tf32" else None)
    fp32 = rec.get("fp32_tflops") or peak
    if not peak or not fp32 or not gpu.memory_bandwidth_GBps:
        return None
    data = model_data()
    # GEMM ceiling: the measured large-matmul rate (its share of the datasheet peak) times the share of it a
    # training step's GEMMs reach (fitted); a GPU without a benchmark row takes the median measured share.
    ratio = matmul_ratio(gpu, dtype, float(peak))
    fitted = ratio is not None or cfg.utilization is not None
    share = ratio if ratio is not None else float(data["default_matmul_ratio"])
    eff = cfg.utilization if cfg.utilization is not None else share * float(data["training_gemm_factor"])
    line = PCIE_GBPS.get(int(rec.get("pcie_gen") or 4), 31.5)
    pcie = line * PCIE_EFFICIENCY
    link = float(rec.get("nvlink_GBps") or 0) / 2 * NVLINK_EFFICIENCY  # NVLink: bidirectional -> one way
    if not link:
        link = line * (PCIE_EFFICIENCY if rec.get("peer_to_peer", True) else PCIE_NO_P2P_EFFICIENCY)
    return Device(gpu.id, str(rec.get("architecture", "")), dtype, float(peak) * 1e12, float(fp32) * 1e12,
                  float(gpu.memory_bandwidth_GBps) * 1e9, int(data["sm_count"].get(gpu.id, data["default_sm_count"])),
                  float(eff), _bandwidth_efficiency(str(rec.get("architecture", ""))), pcie * 1e9, link * 1e9, fitted)
