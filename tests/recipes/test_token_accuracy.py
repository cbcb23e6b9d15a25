"""The trial's compute_metrics (recipes/trial/train.py TokenAccuracy) gives one next-token accuracy however the
evaluation loop hands it the predictions: one concatenated whole, a list of batches (eval_do_concat_batches false)
or batch by batch with compute_result (batch_eval_metrics). Expected values counted by hand on a small example."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

np = pytest.importorskip("numpy", reason="the trial's metrics run on numpy arrays: pip install numpy")

from recipes.trial.train import TokenAccuracy  # noqa: E402

# two sequences of four tokens; the second's last label is padding (-100)
LABELS = np.array([[5, 1, 2, 3], [7, 4, 4, -100]])
# the ids at positions 0..2 predict the labels at 1..3: the first row 2, 2, 3 against 1, 2, 3 (2 right of 3), the
# second 4, 9 against 4, 4 (1 right of 2 scored; its third label is padding)
IDS = np.array([[2, 2, 3, 0], [4, 9, 1, 1]])
RIGHT, SCORED = 3, 5


def _prediction(ids: object, labels: object) -> SimpleNamespace:
    return SimpleNamespace(predictions=ids, label_ids=labels)


def test_a_whole_a_list_and_batches_agree() -> None:
    whole = TokenAccuracy()(_prediction(IDS, LABELS))
    listed = TokenAccuracy()(_prediction([IDS[:1], IDS[1:]], [LABELS[:1], LABELS[1:]]))
    batches = TokenAccuracy()
    assert batches(_prediction(IDS[:1], LABELS[:1]), compute_result=False) == {}
    last = batches(_prediction(IDS[1:], LABELS[1:]), compute_result=True)
    assert whole == listed == last == {"token_accuracy": RIGHT / SCORED}


def test_logits_are_reduced_to_their_argmax_and_the_counts_restart() -> None:
    logits = np.zeros((*IDS.shape, 10))
    np.put_along_axis(logits, IDS[..., None], 1.0, axis=-1)
    metric = TokenAccuracy()
    assert metric(_prediction(logits, LABELS)) == {"token_accuracy": RIGHT / SCORED}
    assert metric(_prediction(logits, LABELS)) == {"token_accuracy": RIGHT / SCORED}  # the next evaluation's own
