# The GPU-to-GPU link: NCCL bus bandwidth per kind of link, and the bytes FSDP moves per step.
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizing.catalog import find_gpu, resolve_architecture
from sizing.config import parse_config
from sizing.memory.adapters import trainable
from sizing.memory.regime import resolve
from sizing.time.device import device
from sizing.time.step_ops import traffic

ROOT = Path(__file__).resolve().parents[2]
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 2048}


def _inputs(**over: object) -> tuple:
    cfg = parse_config({"model_config": TINY, "method": "lora", "max_seq_length": 128,
                        "per_device_train_batch_size": 2, "gpu": "A100-SXM-80GB", "bf16": True, **over})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return cfg, arch, resolve(cfg, arch, "cuda"), trainable(cfg, arch), find_gpu(str(cfg.gpu))


@pytest.mark.parametrize(("gpu", "busbw_GBps"), [
    # NVLink 3 / 4: 600 and 900 GB/s bidirectional, ~80 % of one way as ring busbw (A100 234.89 measured, H200
    # all-gather 361.4: stas00/ml-engineering network/README.md L1283, L980)
    ("A100-SXM-80GB", 240.0), ("H100-SXM-80GB", 360.0),
    # PCIe 4.0 x16 with peer access: 0.8 x 31.5 (6x RTX 4090 on the P2P driver: 24.54 measured)
    ("L40S-48GB", 25.2), ("A100-PCIe-80GB", 25.2),
    # GeForce, no peer access: 0.25 x 31.5 (2x RTX 2080 Ti without P2P: 3.79-4.00 of 15.8 measured)
    ("RTX-4090-24GB", 7.875), ("RTX-3090-24GB", 7.875), ("RTX-4080-SUPER-16GB", 7.875),
    # PCIe 5.0 x16 without peer access: 0.25 x 63
    ("RTX-5090-32GB", 15.75), ("RTX-5080-16GB", 15.75),
])
def test_collectives_run_at_the_links_bus_bandwidth(gpu: str, busbw_GBps: float) -> None:
    cfg, _arch, reg, _tr, card = _inputs(gpu=gpu)
    dev = device(cfg, reg, card)
    assert dev is not None and dev.link_GBps == pytest.approx(busbw_GBps * 1e9)


def test_host_copies_keep_the_pcie_rate_without_peer_access() -> None:
    # offload and paging copy to and from the host: peer access does not enter them
    cfg, _arch, reg, _tr, card = _inputs(gpu="RTX-4090-24GB")
    dev = device(cfg, reg, card)
    assert dev is not None and dev.pcie_GBps == pytest.approx(31.5 * 0.8 * 1e9)


def test_geforce_cards_are_the_ones_without_peer_access() -> None:
    # the stock driver refuses P2P on GeForce cards (noonghunna/club-3090 docs/PCIE_P2P.md, section 5), on every one
    records = json.loads((ROOT / "sizing" / "data" / "gpus.json").read_text("utf-8"))["gpus"]
    no_p2p = sorted(r["id"] for r in records if r.get("peer_to_peer") is False)
    assert no_p2p == sorted(r["id"] for r in records if r["reported_name"].startswith("NVIDIA GeForce"))
    assert {"RTX-3090-24GB", "RTX-4090-24GB", "RTX-5090-32GB", "RTX-3090-Ti-24GB", "RTX-4080-16GB"} <= set(no_p2p)


def test_fsdp_lora_gathers_the_frozen_weights_twice_and_reduce_scatters_the_adapters() -> None:
    # 2 GPUs, FULL_SHARD: per micro-batch all-gather W for forward and for backward, reduce-scatter the LoRA grads;
    # each moves (n-1)/n = 1/2 of the buffer per GPU.
    cfg, arch, reg, tr, _gpu = _inputs(num_gpus=2, parallelism="fsdp")
    weights = arch.total_params * reg.weight
    grads = tr.params * reg.adapter
    assert traffic(cfg, arch, reg, tr).link_bytes == pytest.approx(0.5 * (2 * weights + grads))


def test_fsdp_full_finetune_moves_three_quarters_of_three_model_copies_on_four_gpus() -> None:
    cfg, arch, reg, tr, _gpu = _inputs(num_gpus=4, parallelism="fsdp", method="full", gradient_accumulation_steps=2)
    per_micro = 3 / 4 * 3 * arch.total_params * reg.weight  # gather, gather, reduce-scatter
    assert traffic(cfg, arch, reg, tr).link_bytes == pytest.approx(2 * per_micro)


def test_cpu_offload_runs_the_update_on_the_host_at_16_bytes_per_parameter() -> None:
    # FSDP CPU offload: each rank's shard of the trainable parameters is updated by the host's Adam, which reads and
    # writes ~16 B per parameter (fp32 master, m, v and the gradient, 4 B each); the count is parameters, not bytes
    # (a bf16 full fine-tune used to be charged 32 B per parameter)
    for method, over in (("full", {}), ("lora", {"r": 8})):
        cfg, arch, reg, tr, _card = _inputs(method=method, num_gpus=4, parallelism="fsdp", cpu_offload=True, **over)
        params = arch.total_params if method == "full" else tr.params
        assert traffic(cfg, arch, reg, tr).cpu_optimizer_bytes == pytest.approx(params / 4 * 16)


def test_fsdp_copies_each_gradient_in_and_fsdp2_each_gather_out_on_the_compute_stream() -> None:
    # torch _fsdp_collectives.py foreach_all_gather_copy_out: split_with_sizes_copy reads the all-gather output and
    # writes the unit's parameters, once per gather; reshard_after_forward=True gathers for forward and backward.
    # Each backward copies the unsharded gradients into one flat buffer: FSDP2 foreach_reduce_scatter_copy_in,
    # FSDP1 autograd's concatenation into the flat gradient (measured on CPU: tests/physics/test_fsdp2_copy_out.py).
    # torchtune shards with FSDP2 from 0.3 (fully_shard in recipes/*_distributed.py v0.3.0), FSDP1 before; the HF
    # Trainer's default FSDP is FSDP1.
    cfg, arch, reg, tr, _gpu = _inputs(num_gpus=4, parallelism="fsdp", framework="torchtune",
                                       gradient_accumulation_steps=3)
    weights, grads = arch.total_params * reg.weight, tr.params * reg.adapter
    assert traffic(cfg, arch, reg, tr).copy_bytes == pytest.approx(2 * (weights * 2 + grads) * 3)
    cfg, arch, reg, tr, _gpu = _inputs(num_gpus=4, parallelism="fsdp_shard_grad_op", framework="torchtune")
    assert traffic(cfg, arch, reg, tr).copy_bytes == pytest.approx(2 * (weights + grads))  # kept from forward
    for over in ({"framework": "torchtune", "framework_version": "0.2.1"}, {"framework": "transformers"}):
        cfg, arch, reg, tr, _gpu = _inputs(**{"num_gpus": 4, "parallelism": "fsdp", **over})
        assert traffic(cfg, arch, reg, tr).copy_bytes == pytest.approx(2 * tr.params * reg.adapter)
    cfg, arch, reg, tr, _gpu = _inputs(num_gpus=4, parallelism="ddp", framework="torchtune")
    assert traffic(cfg, arch, reg, tr).copy_bytes == 0.0
