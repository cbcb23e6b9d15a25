# Outside the decoder layers: final norm, LM head, logits and the loss (memory-model.md §7).
from __future__ import annotations

from dataclasses import dataclass, replace

from ..arch import Architecture, Linear
from .activations import LayerWalker
from .adapters import Trainable
from .backward import head_norm_backward
from .regime import Regime

FUSED_TOKEN_TILE = 4096  # trl kernels/chunked_logprob.py: rows per tile
FUSED_VOCAB_TILE = 32768  # and vocabulary columns per tile
LITGPT_CHUNK = 128  # litgpt finetune: model(..., lm_head_chunk_size=128), chunked_cross_entropy(chunk_size=128)
# Lightning Fabric hands the model's floating outputs back in the default dtype, fp32, outside the bf16 forward
# context (_FabricModule.forward: `output = precision.convert_output(output)`, fabric/wrappers.py l.143 at Lightning
# 2.3.0; HalfPrecision.convert_output, plugins/precision/half.py l.61-62, and BitsandbytesPrecision's alike,
# bitsandbytes.py l.155-156; there since "True half-precision support in Fabric (#17287)", 2023-04): LitGPT's
# loop holds fp32 logits.
FABRIC_OUTPUT = 4
TORCHTUNE_CHUNKS = 8  # torchtune CEWithChunkedOutputLoss num_output_chunks


@dataclass(frozen=True)
class Head:
    body_side: int  # final norm + LM head input + weight copies: freed as the head's backward runs
    loss_saved: int  # logits-side tensors saved for backward (log_softmax output, labels, softcap)
    forward_extra: int  # live above body_side + loss_saved at the forward loss peak
    backward_extra: int  # live above them at the loss backward peak
    head_grad_bytes: int  # gradients produced before the decoder's backward starts
    output: int = 0  # the head's own output as its last chunk runs (LitGPT: the bf16 chunks)
    returned: int = 0  # live above body_side when the model's forward returns, before the loss runs (LitGPT)
    held: int = 0  # logits the loop keeps from the loss until its next forward returns (LitGPT's `logits`)


def head(arch: Architecture, reg: Regime, trainable: Trainable, r: int, tokens: int, seq: int,
         grad_bytes: int, norm_backward: int | None = None) -> Head:
    """The head's and the loss's tensors; the backward's extra is the larger of the loss backward's and the
    final norm's backward (after the head's, with the head's weight gradient made and the loss's saved gone;
    norm_backward: head_norm_backward's answer at this shape, when the caller has it)."""
    hd = _head(arch, reg, trainable, r, tokens, seq, grad_bytes)
    if norm_backward is None:
        norm_backward = head_norm_backward(arch, reg, trainable, r, seq, tokens)
    norm = norm_backward + hd.head_grad_bytes - hd.loss_saved
    return replace(hd, backward_extra=max(hd.backward_extra, norm))


def no_grad_head(arch: Architecture, reg: Regime, trainable: Trainable, r: int, tokens: int, seq: int) -> Head:
    """The head and the loss of a forward without gradients (the Trainer's evaluation pass, under torch.no_grad):
    what the training forward saves at the loss exists there too for a moment (the logits, their fp32 upcast and the
    log-softmax output at once), only nothing outlives the loss: body_side + loss_saved + forward_extra is its peak.
    Of the body only the final norm's output is alive then (the model's last hidden state, which its output holds
    through the loss; the norm saves nothing), with autocast's cached copy of a trainable fp32 head weight (the
    cache keeps a cast of a leaf that requires grad, gradients or not, until the forward's autocast ends)."""
    hd = _head(arch, reg, trainable, r, tokens, seq, 0)
    body = LayerWalker(arch, reg, trainable, r, seq).norm_out(reg.resid) * arch.hidden * tokens
    if (reg.full or trainable.lm_head) and reg.casts(reg.lm_head_weight):
        body += reg.compute * arch.vocab * arch.hidden
    return replace(hd, body_side=body)


def _projections_backward(hd: Head, grads: int, labels: int) -> Head:
    """torchtune's chunked output (TransformerDecoder.chunked_output: all eight projections run before the loss):
    autograd runs every chunk's loss backward first (its nodes are younger and the ready queue takes the highest
    sequence number), so the projections' backward starts with all `grads` bytes of bf16 logits gradients alive and
    the loss's saved tensors gone. A trained head's weight gradients meet in its AccumulateGrad input buffer; the
    first sum is out of place (mm's weight gradient is a transposed view whose base shares its storage:
    input_buffer.cpp can_accumulate_inplace), so at the second projection six chunks' gradients, the buffer, the
    new gradient and their sum are alive. Measured: test_torchtune_loss.py (order and live bytes)."""
    part = grads // TORCHTUNE_CHUNKS
    w = hd.head_grad_bytes
    live = grads + max(w, 3 * w - 2 * part)
    return replace(hd, backward_extra=max(hd.backward_extra, live - (hd.loss_saved - labels)))


def _litgpt(body: int, n: int, seq: int, vocab: int, labels: int, head_grad: int, full: bool, softcap: int) -> Head:
    """LitGPT's step. LoRA and QLoRA (finetune/lora.py at 5895df100 l.276-280, the same at f247be87e l.297-301 and
    2b195c7f5 l.304-308): `logits = model(input_ids, lm_head_chunk_size=128)` runs the head on 128-position chunks
    (lora.py at 5895df100 l.547-549; at 2b195c7f5 l.546-548 it returns before the final soft-cap, l.550-551),
    `logits[-1] = logits[-1][..., :-1, :]` and chunked_cross_entropy (utils.py at 5895df100 l.268-276) reshapes
    each chunk (the sliced last one is copied when B > 1) and saves its fp32 log-softmax output. Full fine-tuning
    (finetune/full.py at 5895df100 l.229-231): `logits = model(input_ids)` (soft-capped where the model caps), and
    `chunked_cross_entropy(logits[..., :-1, :], ...)` reshapes the whole slice (a copy when B > 1) and splits it
    into 128-row chunks (utils.py l.278-291); its backward concatenates their gradients and pads them back to the
    logits' shape. Either way Fabric returns the logits as fp32 copies while the head's bf16 output is still
    referenced (FABRIC_OUTPUT), and the loop's `logits` stay alive until its next forward returns. Autograd runs
    the loss backward chunk by chunk before the head's (younger nodes first). Measured on the CPU with LitGPT's
    source and Lightning 2.3.0 (tests/physics/record_litgpt_lora.py, data/litgpt_lora.json)."""
    batch, rows = n // seq, min(LITGPT_CHUNK, seq)
    last = (seq - 1) % LITGPT_CHUNK + 1  # positions in the last chunk
    logits = FABRIC_OUTPUT * n * vocab
    shifted = 4 * (n - batch) * vocab  # the fp32 log-softmax outputs: one position fewer per sequence
    saved = logits + shifted + labels + softcap
    returned = 2 * n * vocab + logits + softcap
    if full:
        # the reshaped copy in the forward; in the backward the concatenated gradient, then padded to the logits
        return Head(body, saved, shifted if batch > 1 else 0, logits, head_grad,
                    output=2 * n * vocab, returned=returned, held=logits)
    # one chunk's gradient of the log-softmax output and of its input above what is saved
    sliced = 4 * batch * (last - 1) * vocab if batch > 1 else 0  # reshape of the non-contiguous slice: a copy
    return Head(body, saved, sliced, 2 * 4 * batch * rows * vocab, head_grad,
                output=2 * n * vocab, returned=returned, held=logits)


def _head(arch: Architecture, reg: Regime, trainable: Trainable, r: int, tokens: int, seq: int,
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
    elif reg.profile.holds_4bit_inputs and reg.quant == "4bit" and reg.profile.quantize_lm_head:
        body += walker.norm_out(reg.resid) * h * n  # the 4-bit lm_head (bitsandbytes 0.42) keeps its input
    if reg.casts(reg.lm_head_weight):
        body += c * vocab * h  # the bf16 cast of an fp32 head weight is saved for backward
    if trainable.head_tokens and not head_trains:
        # trainable tokens on a tied head: F.linear(x, W.index_copy(0, index, rows)) saves that new weight and its
        # input; index_copy its int64 index and the rows cast to the weight's dtype
        rows = trainable.head_tokens
        body += reg.lm_head_weight * (vocab + rows) * h + walker.norm_out(reg.resid) * h * n + 8 * rows
    logits = c if reg.autocast else reg.lm_head_weight
    labels = 8 * n  # int64 targets
    head_grad = (vocab * h * grad_bytes) if reg.full else (r * (h + vocab) * grad_bytes if trainable.lm_head else 0)
    if reg.loss == "fused_linear_ce":
        # trl fused LM head: logits never materialize; saved hidden copy, log_z and entropy (fp32 [N]).
        tile = min(n, FUSED_TOKEN_TILE) * min(vocab, FUSED_VOCAB_TILE) * c
        cast = FUSED_VOCAB_TILE * h * c if reg.casts(reg.lm_head_weight) else 0
        saved = n * (h * c + 8) + labels
        back = tile + cast + 4 * n * h + ((4 + c) * vocab * h if head_trains and reg.full else 0)
        return Head(body, saved, tile + cast + 7 * 4 * n, back, head_grad)
    softcap = logits * n * vocab if arch.final_logit_softcap else 0  # tanh output of capped logits
    nv = n * vocab
    if reg.loss == "chunked_ce" and reg.profile.name == "litgpt":
        return _litgpt(body, n, seq, vocab, labels, head_grad, reg.full, softcap if reg.full else 0)
    if reg.loss == "chunked_ce":
        # torchtune CEWithChunkedOutputLoss: 8 bf16 chunks, each upcast inside the loss. Eager keeps
        # the fp32 log-softmax outputs; compiled keeps the bf16 chunks and recomputes.
        part = nv // TORCHTUNE_CHUNKS
        if reg.compiled:
            # training.compile_loss compiles compute_cross_entropy (v0.4.0 _compile.py l.80): inductor fuses the
            # upcast into the reductions and saves each bf16 chunk + two fp32 row statistics (no N x V fp32 in
            # forward); backward writes the chunk's bf16 gradient (test_torchtune_loss.py, inductor on the CPU)
            return _projections_backward(Head(body, 2 * nv + labels + 8 * n + softcap, 0, 2 * part, head_grad),
                                         2 * nv, labels)
        return _projections_backward(Head(body, 4 * nv + labels + softcap, 2 * nv + 4 * part, 8 * part, head_grad),
                                     2 * nv, labels)
    if reg.loss == "hf" and reg.profile.drops_fp32_logits and reg.plain_loss_compiled:
        # compile_loss compiles the whole nn.CrossEntropyLoss (where the recipe keeps it: lora_finetune_single_device):
        # it saves its fp32 input (the upcast logits, kept past `del logits`) + row statistics; forward's high point
        # is the bf16 projection next to its upcast, backward's the fp32 gradient next to the saved input
        return Head(body, 4 * nv + labels + 8 * n + softcap, 2 * nv, 4 * nv, head_grad)
    if reg.loss == "hf" and reg.profile.drops_fp32_logits:
        # torchtune >= 0.3, nn.CrossEntropyLoss: fp32 logits + the log-softmax output at the loss; the recipe
        # deletes the logits before backward, which then holds the saved output, its gradient and the logits'.
        return Head(body, 4 * nv + labels + softcap, 4 * nv, 8 * nv, head_grad)
    if reg.loss == "fp32_logits":
        # torchtune 0.1-0.2: fp32 logits, a sliced contiguous copy and CE on the transposed tensor
        # (the CUDA softmax kernel makes one more contiguous copy): 12 NV forward, 16 NV backward.
        return Head(body, 4 * nv + labels + softcap, 8 * nv, 12 * nv, head_grad)
    if reg.loss == "hf" and reg.hf_logits != "current":
        # transformers < 4.49 (frameworks.hf_logits): the loss shifts the fp32 logits into a B(S-1) x V copy and
        # saves log_softmax over it; its backward holds that output, its gradient and the softmax's (12 B(S-1)V).
        # "upcast" (< 4.46): the forward's .float() freed the projection, the fp32 logits stay with the output.
        shifted = 4 * (n - n // seq) * vocab
        held = 4 * nv if reg.hf_logits == "upcast" else logits * nv + (4 * nv if logits != 4 else 0)
        return Head(body, shifted + labels + softcap, held + shifted, 2 * shifted, head_grad)
    # HF ForCausalLMLoss: logits.float() (4NV, transient), log_softmax output saved (4NV);
    # backward: grad of log_softmax output + fp32 grad of logits = 8NV above what is saved.
    saved = 4 * n * vocab + labels + softcap
    upcast = 4 * n * vocab if logits != 4 else 0
    return Head(body, saved, logits * n * vocab + upcast, 8 * n * vocab, head_grad)
