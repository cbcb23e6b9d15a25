"""TRL's SFTTrainer computed the loss on the model's whole logits (super().compute_loss: transformers' cross-entropy)
until v1.7.0 made loss_type "chunked_nll" the default (trl sft_config.py v1.7.0; v1.6.0 still "nll" with a warning
that the default will change), and v1.15 the fused LM head: the estimate follows the release the configuration
names in framework_version, the current one when it names none."""

from __future__ import annotations

from sizing import estimate

RUN = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "framework": "trl", "max_seq_length": 4096,
       "per_device_train_batch_size": 2, "gpu": "H100-SXM-80GB"}
LOGITS = 2 * 4096 * 128_256  # batch x tokens x Llama 3.1's vocabulary


def _logits_and_loss(**fields: object) -> int:
    return max(m.parts.get("logits_and_loss", 0) for m in estimate({**RUN, **fields}).moments)


def test_releases_before_the_chunked_loss_hold_the_whole_logits() -> None:
    # the bf16 logits and the fp32 log-softmax that cross_entropy keeps for its backward: 6 bytes a logit at least
    for release in ("0.19.0", "1.6.0"):
        assert _logits_and_loss(framework_version=release) >= 6 * LOGITS, release
    # the chunked and fused losses never make the whole logits
    for release in ("1.7.0", None):
        assert _logits_and_loss(framework_version=release) < LOGITS, release
