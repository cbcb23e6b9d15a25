# The quick answer on the home page: each cell checked against sizing.estimate (the public entry point, not
# the Sizer the block uses): the card fits, its micro-batch is the largest, every smaller eligible card
# misses, and the link's query with the form's defaults is that very configuration.
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from sitebuild import quick_answer as qa
from sitebuild import sizing_blocks
from sizing import estimate
from sizing.catalog import find_gpu, gpus
from sizing.estimate import usable_bytes

# A dense and an MoE model, the smallest and the largest; every method, length and stack.
CELLS = [(m, meth, seq, stack) for m in ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.3-70B-Instruct",
                                         "Qwen/Qwen3-30B-A3B")
         for meth in qa.METHODS for seq in qa.CONTEXTS for stack in qa.STACKS]


def _fits(config: dict[str, Any], gpu: str, batch: int) -> bool:
    est = estimate({**config, "gpu": gpu, "per_device_train_batch_size": batch})
    return bool(est.fits[0]["fits"])


def _config_of_link(href: str) -> dict[str, Any]:
    """What the calculator computes for the link: the form's defaults, then the query (calculator.js applyQuery)."""
    query = dict(parse_qsl(urlsplit(href).query))
    config = qa.base_config()
    for key, value in query.items():
        default = config.get(key)
        config[key] = int(value) if isinstance(default, int) and not isinstance(default, bool) else value
    return config


@pytest.mark.parametrize(("model", "method", "seq", "stack"), CELLS)
def test_cell_is_the_smallest_card_and_the_largest_micro_batch(model: str, method: str, seq: int,
                                                                stack: str) -> None:
    cell = qa.cell(model, method, seq, stack)
    config = _config_of_link(qa.link(cell, "calculator/index.md"))
    assert config["model"] == model and config["method"] == method and config["framework"] == stack
    assert config["max_seq_length"] == seq
    if cell.gpu is None:
        one = {**config, "num_gpus": 1, "parallelism": "none"}
        for gpu in qa.eligible(method):
            assert not _fits(one, gpu.id, 1), gpu.id
        assert config["gpu"] == qa.eligible(method)[-1].id  # the largest card, under FSDP
        if cell.num_gpus == 0:  # "does not fit": not even sharded over solve.MAX_GPUS of them
            assert not _fits({**config, "num_gpus": 512, "parallelism": "fsdp"}, config["gpu"], 1)
            return
        assert _fits(config, config["gpu"], 1)
        assert not _fits({**config, "num_gpus": cell.num_gpus - 1}, config["gpu"], 1)
        return
    assert _fits(config, cell.gpu, cell.micro_batch)
    assert not _fits(config, cell.gpu, cell.micro_batch + 1)
    chosen = usable_bytes(find_gpu(cell.gpu))
    # Every smaller eligible card misses. A card enters the memory model through its capacity and its
    # generation (Hopper's larger cuBLAS workspace, sizing.solve.Sizer), so the largest smaller card of
    # each generation decides for the rest of it.
    largest_smaller: dict[bool, Any] = {}
    for gpu in qa.eligible(method):
        if usable_bytes(gpu) < chosen:
            largest_smaller[gpu.sm >= (9, 0)] = gpu  # eligible() is sorted by capacity: the last one wins
    for gpu in largest_smaller.values():
        assert not _fits(config, gpu.id, 1), gpu.id


def test_cards_without_bf16_or_bitsandbytes_are_never_offered() -> None:
    no_bf16 = {g.id for g in gpus().values() if g.supports.get("bf16") is not True}
    assert no_bf16 >= {"T4-16GB", "V100-16GB", "V100-32GB"}
    assert not no_bf16 & {g.id for g in qa.eligible("lora")}
    assert all(g.supports.get("bitsandbytes") is True for g in qa.eligible("qlora"))


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_the_table_has_a_row_per_model_and_method(lang: str) -> None:
    text = sizing_blocks.render("[[sizing:quick_answer calc=../calculator/index.md]]", lang)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(qa.MODELS) * len(qa.METHODS)
    assert all(line.count("](../calculator/index.md?") + line.count(qa.TEXT["none"][lang]) == 6 for line in rows)
