# Memory-bound work of a decoder layer (norms, RoPE, activations, residuals), attention by kernel, the loss.
from __future__ import annotations

from ..arch import Architecture
from ..config import RunConfig
from ..memory.regime import Regime
from .op import Op, gemm

# Bytes per element and kernel launches of one op family as eager PyTorch runs it, forward / backward,
# counted from transformers' modeling_llama.py (the same code shape in torchtune / LitGPT):
# RMSNorm: x.to(fp32), pow(2), mean, +eps, rsqrt, x*rsqrt, .to(dtype), weight*x -> (28 + 4e) B, 8 kernels;
# its autograd graph: the backward of each of those ops plus the sum of two gradient paths -> (56 + 6e) B, 14.
# RoPE on q or k: q*cos, neg + cat (rotate_half), *sin, add -> 10e B, 5 kernels, backward the same.
# Gated MLP: act(g) then * u -> 5e B, 2 kernels; backward: two mul grads and the act grad -> 9e B, 3.
# Residual add: read two, write one -> 3e B, 1 kernel each way.
# Under torch.compile Inductor fuses each family into one kernel that reads its inputs and writes its outputs once.


def _norm(e: int, phase: str, compiled: bool) -> tuple[float, float]:
    if compiled:
        return (2.0 * e, 1.0) if phase != "backward" else (3.0 * e, 2.0)
    return (28.0 + 4 * e, 8.0) if phase != "backward" else (56.0 + 6 * e, 14.0)


def layer_elementwise(cfg: RunConfig, arch: Architecture, reg: Regime, tokens: int, phase: str) -> list[Op]:
    """Norms, RoPE, activation, residual adds and layout copies of every decoder layer in one pass."""
    e, n, c, bwd = reg.compute, arch.layers, reg.compiled, phase == "backward"
    t, h = tokens, arch.hidden
    r = reg.resid  # the residual stream keeps the embedding's dtype (fp32 after prepare_model_for_kbit_training)
    norm_b, norm_k = _norm(r, phase, c)
    norms = arch.pre_norms + arch.post_norms
    ops = [Op("norms", phase, n * norms, 0.0, norm_b * t * h, norm_k)]
    if arch.qk_norm:
        ops.append(Op("qk_norm", phase, n * 2, 0.0, norm_b * t * (arch.q_width + arch.kv_width) / 2, norm_k))
    rope_b, rope_k = (2.0 * e, 1.0) if c else (10.0 * e, 5.0)
    ops.append(Op("rope", phase, n * 2, 0.0, rope_b * t * (arch.q_width + arch.kv_width) / 2, rope_k))
    inter = arch.intermediate * max(1.0, float(arch.experts_per_token or 1))
    if arch.gated_mlp:
        act_b, act_k = ((5.0 * e if c else 9.0 * e), (1.0 if c else 3.0)) if bwd else ((3.0 * e, 1.0) if c else
                                                                                      (5.0 * e, 2.0))
    else:
        act_b, act_k = (3.0 * e, 1.0) if bwd else (2.0 * e, 1.0)
    ops.append(Op("mlp_act", phase, n, 0.0, act_b * t * inter, act_k))
    ops.append(Op("residual", phase, n * 2, 0.0, (r if c else 3.0 * r) * t * h, 0.0 if c else 1.0))
    # attention output transposed back to [tokens, heads*d] (a contiguous copy); GQA k/v expanded to all heads
    copy = 2.0 * e * t * arch.q_width
    if reg.profile.expand_kv and arch.kv_heads != arch.heads:
        copy += 2.0 * e * t * arch.q_width * 2
    ops.append(Op("layout", phase, n, 0.0, copy, 1.0 if c else 2.0))
    return ops


def attention_kernel(reg: Regime, sm_major: int) -> str:
    """Which kernel computes attention: flash (FA2, SDPA flash), mem_efficient (SDPA cutlass) or math/eager."""
    if reg.attention == "eager":
        return "math"
    if reg.attention == "flash_attention_2":
        return "flash"
    # SDPA: the flash backend needs sm80+ and a 16-bit dtype; otherwise the memory-efficient kernel.
    # transformers drops an all-ones padding mask, so fixed-length batches reach the causal kernels.
    return "flash" if sm_major >= 8 and reg.compute == 2 else "mem_efficient"


def attention_ops(cfg: RunConfig, arch: Architecture, reg: Regime, tokens: int, phase: str,
                  kernel: str = "flash") -> list[Op]:
    """QK^T, softmax and PV of every layer: one fused kernel, or batched GEMMs plus an fp32 softmax."""
    e, s, d, n = reg.compute, cfg.max_seq_length, arch.head_dim, arch.layers
    heads = cfg.per_device_train_batch_size * arch.heads
    bwd = phase == "backward"
    if kernel == "math":
        # scores [S, S] per head, no causal skipping; HF eager adds the mask, softmax in fp32, casts back
        count = n * heads * (2 if bwd else 1) * 2
        ops = [gemm("attn.bmm", phase, count, s, d, s, e, e)]
        per_score = (2.0 * e + 24.0) if bwd else (4.0 * e + 8.0)
        ops.append(Op("attn.softmax", phase, n, 0.0, per_score * heads * s * s, 3.0))
        return ops
    # fused kernels skip the masked half of the causal square; backward does 5 matmuls to forward's 2 (FA2)
    flops = 4.0 * heads * s * s * d * 0.5 * (2.5 if bwd else 1.0)
    io = tokens * (2 * arch.q_width + 2 * arch.kv_width) * e * (2.5 if bwd else 1.0)
    return [Op("attention", phase, n, flops, io, 3.0 if bwd else 1.0, attention=kernel)]


# Bytes per logit element of the loss, forward + backward (e = logits dtype):
# hf: logits.float() (e + 4), log_softmax (8), nll; backward: nll grad (4), log_softmax grad (12), cast (4 + e);
# chunked_ce: the same per chunk (torchtune / LitGPT, 8 chunks); fp32_logits: head writes fp32, no upcast copy;
# fused_linear_ce: logits exist only chunk by chunk and the gradient is written in place (Liger / TRL).
LOSS_BYTES = {"hf": 32.0, "chunked_ce": 32.0, "fp32_logits": 28.0, "fused_linear_ce": 2.0}
LOSS_KERNELS = {"hf": 10.0, "chunked_ce": 56.0, "fp32_logits": 9.0, "fused_linear_ce": 24.0}


def loss_ops(cfg: RunConfig, arch: Architecture, reg: Regime, tokens: int) -> list[Op]:
    """The logits' cross-entropy forward and backward: memory-bound over tokens x vocab."""
    e = reg.compute
    per = LOSS_BYTES.get(reg.loss, 32.0) + (2 * e if reg.loss in ("hf", "chunked_ce", "fused_linear_ce") else e)
    return [Op("loss", "forward", 1, 0.0, per * tokens * arch.vocab, LOSS_KERNELS.get(reg.loss, 10.0))]
