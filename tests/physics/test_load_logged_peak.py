"""What torchtune's logged peak covers: its recipes reset the peak counters after the model's setup.

torchtune's single-device recipes call get_memory_stats(device, reset_stats=True) right after model init
(recipes/lora_finetune_single_device.py v0.1.0 l.299 memory_stats_log, v0.4.0 l.479, v0.6.1 l.491), which reads
the peaks and then calls torch.cuda.reset_peak_memory_stats; c10's reset_peak_stat sets `stat.peak =
stat.current` (c10/cuda/CUDACachingAllocator.cpp). So the allocated peak a run logs starts from what is allocated
after the load (the step's peak is the logged one), and the reserved peak from what is reserved then, which holds
every segment the load cached (no empty_cache on one device). The load still happens, and can run out of memory.
"""

from __future__ import annotations

from sizing import estimate
from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.memory.allocator import round_up
from sizing.step import outside, step_memory

# torchtune 0.1's Llama-2-7B QLoRA on a 4090 (validation row R090's configuration): the load, torchao 0.1's
# unchunked to_nf4, allocates more than the training step does.
R090 = {"model": "meta-llama/Llama-2-7b-hf", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
        "quantization_backend": "torchao", "method": "qlora", "framework": "torchtune", "framework_version": "0.1",
        "torch_dtype": "bfloat16", "bnb_4bit_compute_dtype": "bfloat16", "r": 8, "lora_alpha": 16.0,
        "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj", "k_proj", "output_proj", "mlp"],
        "max_seq_length": 512, "packing": False, "per_device_train_batch_size": 2, "num_gpus": 1,
        "gradient_accumulation_steps": 16, "gradient_checkpointing": True, "optim": "adamw_torch",
        "attn_implementation": "sdpa", "gpu": "RTX-4090-24GB"}


def _moments(cfg_dict):
    cfg = parse_config(cfg_dict)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None)
    return mem, outside(mem, cfg.expandable_segments)


def test_logged_allocated_peak_is_the_steps():
    """After the reset the allocated peak is the step's; the load's is reported beside it, with a warning."""
    mem, (load,) = _moments(R090)
    assert load.moment.total > mem.peak.total  # the configuration this test is about
    est = estimate(R090)
    assert est.allocated_bytes == mem.peak.total
    assert est.detail["load_allocated_bytes"] == load.moment.total
    (w,) = [w for w in est.warnings if w["code"] == "load_above_logged_peak"]
    assert w["params"]["bytes"] == load.moment.total and w["params"]["logged_bytes"] == mem.peak.total
    assert est.peak_moment.phase == "load"  # the moment that reserves the most (reserved's peak is the load's)


def test_logged_reserved_peak_keeps_what_the_load_cached():
    """reserved's peak restarts from the current reserved, which holds the load's cached segments."""
    _, (load,) = _moments(R090)
    est = estimate(R090)
    assert est.detail["ample_reserved_bytes"] >= round_up(load.reserved)


def test_a_step_above_the_load_gets_no_warning():
    """A load under the step's peak is not hidden by the reset: nothing to say."""
    run = {**R090, "framework_version": "0.4", "max_seq_length": 4096, "per_device_train_batch_size": 4}
    mem, (load,) = _moments(run)
    assert load.moment.total < mem.peak.total
    est = estimate(run)
    assert est.allocated_bytes == mem.peak.total
    assert not [w for w in est.warnings if w["code"] == "load_above_logged_peak"]


def test_other_frameworks_count_no_reset():
    """transformers + PEFT (bitsandbytes, quantized on load by from_pretrained): no load moment is replayed,
    and allocated is the step's peak as before."""
    run = {**R090, "framework": "transformers", "quantization_backend": "bitsandbytes",
           "target_modules": ["q_proj", "v_proj", "k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
    run.pop("framework_version")
    mem, loads = _moments(run)
    assert loads == ()
    est = estimate(run)
    assert est.allocated_bytes == mem.peak.total and "load_allocated_bytes" not in est.detail
