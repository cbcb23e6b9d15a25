# Outside the decoder layers: final norm, LM head, logits and the loss (memory-model.md §7).
from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture, Linear
from .activations import LayerWalker
from .adapters import Trainable
from .regime import Regime

FUSED_TOKEN_TILE = 4096  # trl kernels/chunked_logprob.py: rows per tile
FUSED_VOCAB_TILE = 32768  # and vocabulary columns per tile


@dataclass(frozen=True)
class Head:
    body_side: int  # final norm + LM head input + weight copies: freed as the head's backward runs
    loss_saved: int  # logits-side tensors saved for backward (log_softmax output, labels, softcap)
    forward_extra: int  # live above body_side + loss_saved at the forward loss peak
    backward_extra: int  # live above them at the loss backward peak
    head_grad_bytes: int  # gradients produced before the decoder's backward starts


def head(arch: Architecture, reg: Regime, trainable: Trainable, r: int, tokens: int, seq: int,
         grad_bytes: int) -> Head:
    h, vocab, n, c = arch.hidden, arch.vocab, tokens, reg.compute
    walker = LayerWalker(arch, reg, trainable, r, seq)
    head_trains = reg.full or trainable.lm_head
    body = walker.norm_saved(reg.resid, h) * n
    if arch.norm == "rms_gemma":
        body += 4 * h  # the final norm's fp32 (1 + weight) vector
    lm_head = Linear("lm_head", h, vocab, "head")
    if trainable.lm_head:
        walker.targets.add("lm_head")
    if head_trains:
        body += walker.consumers_saved(walker.norm_out(reg.resid), h, [lm_head], already_saved=False) * n
    if reg.autocast and reg.lm_head_weight != c:
        body += c * vocab * h  # the bf16 cast of an fp32 head weight is saved for backward
    logits = c if reg.autocast else reg.lm_head_weight
    labels = 8 * n  # int64 targets
    head_grad = (vocab * h * grad_bytes) if reg.full else (r * (h + vocab) * grad_bytes if trainable.lm_head else 0)
    if reg.loss == "fused_linear_ce":
        # trl fused LM head: logits never materialize; saved hidden copy, log_z and entropy (fp32 [N]).
        tile = min(n, FUSED_TOKEN_TILE) * min(vocab, FUSED_VOCAB_TILE) * c
        cast = FUSED_VOCAB_TILE * h * c if reg.lm_head_weight != c else 0
        saved = n * (h * c + 8) + labels
        back = tile + cast + 4 * n * h + ((4 + c) * vocab * h if head_trains and reg.full else 0)
        return Head(body, saved, tile + cast + 7 * 4 * n, back, head_grad)
    softcap = logits * n * vocab if arch.final_logit_softcap else 0  # tanh output of capped logits
    if reg.loss == "chunked_ce":
        return _chunked(body, labels, softcap, logits, n, vocab, head_grad)
    # HF ForCausalLMLoss: logits.float() (4NV, transient), log_softmax output saved (4NV);
    # backward: grad of log_softmax output + fp32 grad of logits = 8NV above what is saved.
    saved = 4 * n * vocab + labels + softcap
    upcast = 4 * n * vocab if logits != 4 else 0
    return Head(body, saved, logits * n * vocab + upcast, 8 * n * vocab, head_grad)


CHUNKS = 8  # torchtune CEWithChunkedOutputLoss num_output_chunks


def _chunked(body: int, labels: int, softcap: int, logits: int, n: int, vocab: int, head_grad: int) -> Head:
    """Chunked cross-entropy (LitGPT, torchtune): logits kept in the compute dtype, upcast and
    log_softmax one chunk at a time [APPROX until checked against the frameworks' code]."""
    saved = logits * n * vocab + 4 * n * vocab + labels + softcap
    chunk = n * vocab // CHUNKS
    return Head(body, saved, 4 * chunk, 8 * chunk + logits * n * vocab, head_grad)
