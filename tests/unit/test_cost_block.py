# The cost guide's table: each card's hours are sizing.estimate's for the fewest GPUs that hold the run, and
# the break-even column is the ratio of GPU-hours (equal cost when price × GPU-hours is equal).
from __future__ import annotations

from sitebuild import sizing_blocks
from sizing import estimate

RUN = ("model=meta-llama/Llama-3.1-8B method=qlora bf16=true bnb_4bit_quant_type=nf4 r=16 "
       "target_modules=all-linear max_seq_length=4096 per_device_train_batch_size=1 packing=true "
       "gradient_checkpointing=true dataset_tokens=50000000 num_train_epochs=2")
CONFIG = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "bf16": True, "bnb_4bit_quant_type": "nf4", "r": 16,
          "target_modules": "all-linear", "max_seq_length": 4096, "per_device_train_batch_size": 1, "packing": True,
          "gradient_checkpointing": True, "dataset_tokens": 50_000_000, "num_train_epochs": 2}


def _num(cell: str) -> float:
    return float(cell.split()[0].replace(",", ""))


def test_hours_and_break_even_follow_from_the_estimate() -> None:
    text = sizing_blocks.render(f"[[sizing:cost_table gpus=H100-SXM-80GB,B200-180GB {RUN}]]", "en")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    hours = {}
    for row, gpu in zip(rows, ("H100-SXM-80GB", "B200-180GB"), strict=True):
        assert row[1] == "1"  # an 8B QLoRA run fits one card of either kind
        t = estimate({**CONFIG, "gpu": gpu}).time
        assert t is not None
        assert _num(row[3]) == round(t["total_hours"], 1)
        hours[gpu] = t["total_hours"]
        # GPU-hours per million tokens: 100 million training tokens (50 million × 2 epochs).
        assert abs(_num(row[5]) - t["total_hours"] / 100) < 0.001
    assert abs(_num(rows[1][6]) - hours["H100-SXM-80GB"] / hours["B200-180GB"]) < 0.006
