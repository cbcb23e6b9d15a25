"""compute_metrics at full scale, against the evaluation loop's arithmetic (transformers 5.24 trainer.py
evaluation_loop, EvalLoopContainer): each gathered batch's fp32 logits (accelerate's prepared model under bf16 mixed
precision) and int64 labels are concatenated onto the kept ones, the old whole and the batch's alive with the new whole,
until eval_accumulation_steps batches have passed. The CPU measurement of the same loop: tests/physics/
test_eval_predictions.py."""

from __future__ import annotations

import pytest

from sizing import estimate
from sizing.errors import SizingError
from sizing.memory.timeline import EVAL_CONCAT, EVAL_HELD

VOCAB, SEQ = 128_256, 1024  # Llama-3.1-8B's vocabulary
RUN = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "max_seq_length": SEQ, "per_device_train_batch_size": 1,
       "gpu": "H100-SXM-80GB", "eval_strategy": "steps", "per_device_eval_batch_size": 8, "compute_metrics": True}


def _concat(**fields: object) -> int:
    moments = [m for m in estimate({**RUN, **fields}).moments if m.what in (EVAL_CONCAT, EVAL_HELD)]
    assert len(moments) == 1
    return moments[0].parts["logits_and_loss"]


@pytest.mark.parametrize(("samples", "steps", "gpus", "held"), [
    (200, None, 1, 200),  # the whole set, 25 batches
    (200, 4, 1, 32),  # four batches of 8, then to the CPU
    (200, 4, 2, 64),  # every GPU gathers both GPUs' batches: 16 sequences a batch
    (12, None, 1, 12),  # the second batch is the set's last, 4 sequences: 12 kept
])
def test_the_concatenation_holds_the_kept_predictions_twice(samples: int, steps: int | None, gpus: int,
                                                            held: int) -> None:
    parallel = {"num_gpus": gpus, "parallelism": "fsdp"} if gpus > 1 else {}
    got = _concat(eval_samples=samples, eval_accumulation_steps=steps, **parallel)
    logits, labels = held * SEQ * VOCAB * 4, held * SEQ * 8
    assert got == 2 * logits + labels


def test_argmax_keeps_token_ids_and_one_batch_is_kept_as_it_is() -> None:
    held = 200
    assert _concat(eval_samples=held, preprocess_logits_for_metrics="argmax") == 2 * held * SEQ * 8 + held * SEQ * 8
    # a set of one batch is never concatenated: the batch's predictions and labels, as the loop got them
    assert _concat(eval_samples=8) == 8 * SEQ * (VOCAB * 4 + 8)


def test_the_kept_predictions_are_alive_through_the_last_batchs_loss() -> None:
    """The loss over the last batch's logits runs with the earlier batches' predictions and labels kept: 192 of 200."""
    def loss_moment(**fields: object) -> int:
        [m] = [m for m in estimate({**RUN, **fields}).moments if m.what.startswith("evaluation forward: cross")]
        return m.parts["logits_and_loss"]

    assert loss_moment(eval_samples=200) - loss_moment(compute_metrics=False) == 192 * SEQ * (VOCAB * 4 + 8)


def test_a_list_of_batches_is_never_concatenated() -> None:
    """eval_do_concat_batches=False: EvalLoopContainer appends each batch's to a list, so the held moment is the kept
    predictions and labels once (the 25 batches of 200 sequences), never the concatenation's twice."""
    moments = [m for m in estimate({**RUN, "eval_samples": 200, "eval_do_concat_batches": False}).moments
               if m.phase == "eval"]
    assert not [m for m in moments if m.what == EVAL_CONCAT]
    [held] = [m for m in moments if m.what == EVAL_HELD]
    assert held.parts["logits_and_loss"] == 200 * SEQ * (VOCAB * 4 + 8)


def test_batch_eval_metrics_keeps_no_earlier_batch() -> None:
    """batch_eval_metrics=True: compute_metrics takes each batch's predictions and the loop drops them: the last
    batch's loss holds what it holds without compute_metrics, the held moment one batch, and eval_samples is not
    needed (nothing grows with the set)."""
    def loss(**fields: object) -> int:
        [m] = [m for m in estimate({**RUN, **fields}).moments if m.what.startswith("evaluation forward: cross")]
        return m.parts["logits_and_loss"]

    assert loss(batch_eval_metrics=True) == loss(compute_metrics=False)
    [held] = [m for m in estimate({**RUN, "batch_eval_metrics": True}).moments if m.what == EVAL_HELD]
    assert held.parts["logits_and_loss"] == 8 * SEQ * (VOCAB * 4 + 8)
    with pytest.raises(SizingError) as err:
        estimate({**RUN, "eval_samples": None})
    assert err.value.code == "eval_samples_required"


def test_a_set_smaller_than_the_batch_is_one_batch_of_it() -> None:
    """The DataLoader gives a set of 3 sequences as one batch of 3, whatever per_device_eval_batch_size says: the
    evaluation's loss is that of a batch of 3."""
    def loss(**fields: object) -> int:
        run = {**RUN, "compute_metrics": False, **fields}
        [m] = [m for m in estimate(run).moments if m.what.startswith("evaluation forward: cross")]
        return m.parts["logits_and_loss"]

    assert loss(eval_samples=3) == loss(per_device_eval_batch_size=3)
    assert loss(eval_samples=3) < loss()


@pytest.mark.parametrize(("fields", "code"), [
    ({"eval_samples": 200}, "eval_predictions"),
    ({"eval_samples": 200, "eval_do_concat_batches": False}, "eval_predictions_list"),
    # every GPU gathers all four GPUs' batches: 32 sequences' fp32 logits, more than one GPU's loss over its 8
    ({"batch_eval_metrics": True, "num_gpus": 4, "parallelism": "ddp"}, "eval_predictions_batch"),
])
def test_the_warning_names_how_the_predictions_are_held(fields: dict[str, object], code: str) -> None:
    """Each way of holding them has its own remedies; the list, whose peak is the last batch's loss with the earlier
    batches' kept (most of it those), gets the list's warning, not the evaluation batch's or the logits'."""
    codes = [w["code"] for w in estimate({**RUN, **fields}).warnings]
    assert code in codes and "eval_peak" not in codes and "logits_dominate" not in codes
