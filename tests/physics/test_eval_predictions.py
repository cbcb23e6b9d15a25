"""What compute_metrics makes the Trainer's evaluation keep, measured on the CPU with a real Trainer.evaluate(): every
batch's logits (fp32: accelerate converts the prepared model's outputs under bf16 mixed precision) or, through
preprocess_logits_for_metrics, their argmax, and the labels, concatenated onto those of the earlier batches
(EvalLoopContainer.add: the old whole, the batch's and the new whole are alive at once) until eval_accumulation_steps
batches have passed. The engine's evaluation moments (step._kept, timeline._evaluation) must hold the live bytes
measured above the model."""

from __future__ import annotations

import gc

import pytest

for _mod in ("torch", "transformers", "peft", "accelerate"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import harness  # noqa: E402
import torch  # noqa: E402

from sizing import estimate  # noqa: E402

# peft 0.21 calls transformers' deprecated is_gradient_checkpointing (get_peft_model)
pytestmark = [pytest.mark.physics, pytest.mark.filterwarnings("ignore::FutureWarning")]

SEQ, BATCH, SAMPLES = 64, 4, 12  # three evaluation batches
VOCAB = harness.MODEL_CONFIGS["llama"]["vocab_size"]


class _Set(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.ids = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=torch.Generator().manual_seed(3))

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> dict:
        x = self.ids[i]
        return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x.clone()}


def _to_host(numpify):
    """trainer_pt_utils.nested_numpify, whose arrays share the CPU tensors' storage (on a GPU, .cpu() copies them to
    the host): copied, so the tensors the evaluation moved off the device are freed, as on a GPU."""
    import numpy as np

    def moved(tensors):
        out = numpify(tensors)
        if isinstance(out, (list, tuple)):
            return type(out)(np.array(x, copy=True) for x in out)
        return np.array(out, copy=True)

    return moved


def _measured(argmax: bool, steps: int | None, tmp_path, monkeypatch, **loop: bool) -> tuple[int, tuple]:
    """Peak live bytes of Trainer.evaluate() above the model's parameters and buffers, and what compute_metrics
    was handed (the predictions' shape and dtype; a list: each batch's). `loop`: batch_eval_metrics,
    eval_do_concat_batches."""
    from transformers import Trainer, TrainingArguments, trainer_pt_utils

    monkeypatch.setattr(trainer_pt_utils, "nested_numpify", _to_host(trainer_pt_utils.nested_numpify))

    m, _ = harness.build("llama", "lora_fp32")
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, bf16=True, per_device_eval_batch_size=BATCH,
                             eval_accumulation_steps=steps, report_to=[], dataloader_num_workers=0,
                             disable_tqdm=True, **loop)
    seen: list[tuple] = []

    def metrics(p, compute_result: bool = True) -> dict:
        got = p.predictions if isinstance(p.predictions, list) else [p.predictions]
        seen.append(tuple((tuple(x.shape), str(x.dtype).replace("torch.", "")) for x in got))
        return {}

    trainer = Trainer(model=m, args=args, eval_dataset=_Set(), compute_metrics=metrics,
                      preprocess_logits_for_metrics=(lambda logits, labels: logits.argmax(dim=-1)) if argmax else None)
    tracker, start = harness.tracking(list(m.parameters()) + list(m.buffers()))
    with harness.one_thread(), harness.Fp32Matmul(), tracker:
        trainer.evaluate()
    del trainer, m
    gc.collect()
    return tracker.peak - start, seen[0]


def _engine(argmax: bool, steps: int | None, **loop: bool) -> int:
    """The engine's evaluation peak above the weights, adapters and states."""
    run = {**harness.engine_config("llama", "lora_fp32"), "max_seq_length": SEQ, "eval_strategy": "steps",
           "per_device_eval_batch_size": BATCH, "compute_metrics": True, "eval_samples": SAMPLES,
           "preprocess_logits_for_metrics": "argmax" if argmax else "none", "eval_accumulation_steps": steps, **loop}
    moments = [m for m in estimate(run, backend="cpu").moments if m.phase == "eval"]
    return max(m.parts.get("activations", 0) + m.parts.get("logits_and_loss", 0) for m in moments)


@pytest.mark.parametrize(("argmax", "steps"), [(False, None), (False, 2), (True, None)],
                         ids=["logits_whole_set", "logits_two_batches", "argmax"])
def test_kept_predictions_peak(argmax: bool, steps: int | None, tmp_path, monkeypatch) -> None:
    measured, handed = _measured(argmax, steps, tmp_path, monkeypatch)
    logits = SEQ * VOCAB * 4  # one sequence's fp32 logits
    if argmax:
        assert handed == (((SAMPLES, SEQ), "int64"),)
        # the token ids are small: the peak is one batch's loss (10 bytes per logit), as without compute_metrics
        assert measured < 11 * BATCH * SEQ * VOCAB
    else:
        assert handed == (((SAMPLES, SEQ, VOCAB), "float32"),)
        held = SAMPLES if steps is None else min(steps * BATCH, SAMPLES)
        assert measured >= 2 * held * logits  # the old whole and the batch's, then the new whole: twice the kept
    assert _engine(argmax, steps) == pytest.approx(measured, rel=0.02), (_engine(argmax, steps), measured)


def test_a_list_of_batches_holds_the_kept_predictions_once(tmp_path, monkeypatch) -> None:
    """eval_do_concat_batches=False: EvalLoopContainer appends each batch's predictions to a list, so nothing is
    concatenated: the peak is the last batch's loss with the earlier batches' logits kept, below the concatenation's
    twice-the-kept."""
    measured, handed = _measured(False, None, tmp_path, monkeypatch, eval_do_concat_batches=False)
    assert handed == (((BATCH, SEQ, VOCAB), "float32"),) * (SAMPLES // BATCH)
    logits = SEQ * VOCAB * 4
    assert (SAMPLES - BATCH) * logits < measured < 2 * SAMPLES * logits
    engine = _engine(False, None, eval_do_concat_batches=False)
    assert engine == pytest.approx(measured, rel=0.02), (engine, measured)


def test_batch_eval_metrics_keeps_nothing_across_batches(tmp_path, monkeypatch) -> None:
    """batch_eval_metrics=True: compute_metrics gets each batch's predictions as tensors and the loop drops them:
    the peak is one batch's, as without compute_metrics, and the engine needs no eval_samples for it."""
    measured, handed = _measured(False, None, tmp_path, monkeypatch, batch_eval_metrics=True)
    assert handed == (((BATCH, SEQ, VOCAB), "float32"),)  # the first call's: one batch
    assert measured < 11 * BATCH * SEQ * VOCAB
    engine = _engine(False, None, batch_eval_metrics=True)
    assert engine == pytest.approx(measured, rel=0.02), (engine, measured)
