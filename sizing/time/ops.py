# The kernels of one micro-batch: every GEMM by its shape, attention by kernel, the memory-bound rest.
from __future__ import annotations

from ..arch import ATTN_IN, MLP_IN, Architecture
from ..config import RunConfig
from ..memory.adapters import Trainable
from ..memory.regime import Regime
from ..memory.weights import grouped_experts, kept_bytes, quantized_linear
from .elementwise import attention_ops, layer_elementwise, loss_ops
from .op import VIEWS_PER_LAYER_PASS, Op, gemm


def linear_ops(name: str, phase: str, count: float, tokens: int, fin: int, fout: int, e: int, w: int,
               weight_grad: bool, fp32: bool = False) -> list[Op]:
    """Forward y = xW^T, or backward dX = dY W (always: the chain reaches earlier layers) and dW = dY^T X."""
    if phase != "backward":
        return [gemm(name, phase, count, tokens, fin, fout, e, w, fp32)]
    out = [gemm(name + ".dX", phase, count, tokens, fout, fin, e, w, fp32)]
    if weight_grad:
        out.append(gemm(name + ".dW", phase, count, fout, tokens, fin, e, e, fp32))
    return out


# Bytes moved per weight when a quantized weight is dequantized for a matmul:
# bitsandbytes NF4/FP4: one kernel reads 0.5 B + an fp32 absmax per 64-block (0.0625 B) and writes the weight
# in the compute dtype (functional.dequantize_4bit); LLM.int8 reads 1 B and writes the compute dtype.
# torchao NF4Tensor.get_original_weight in eager mode, per weight (two per byte): >>4 and &15 (1 + 1), two
# .to(long) (4.5 + 4.5), two nf4[idx] gathers (5 + 5), two * scalers (2 + 2), stack + reshape (4) -> 29 B, 12
# kernels. torch.compile traces NF4 (torchao's NF4 is compile-compatible) and fuses it into one kernel that
# reads the packed bytes and writes the weight, as bitsandbytes does.
DEQUANT_READ = {"4bit": 0.5625, "8bit": 1.0}
TORCHAO_NF4_BYTES = 29.0
TORCHAO_NF4_KERNELS = 12.0


def _layer(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, tokens: int, phase: str,
           kernel: str) -> list[Op]:
    e, layers = reg.compute, arch.layers
    ops: list[Op] = []
    targets = frozenset(lin.name for lin in tr.targets)
    a = reg.adapter if reg.adapter and not reg.autocast else e  # adapter math dtype
    # Non-reentrant checkpointing (transformers 5 and torchtune default) stops recomputing once the last saved
    # tensor is back: the layer's last GEMM (its base, or lora_B when adapted) is not recomputed; a FLOP count
    # of the step (tests/unit/test_time_vs_torch.py) shows exactly that.
    last = arch.linears[-1].name if phase == "recompute" else ""
    for lin in arch.linears:
        per_expert = max(1, round(tokens * lin.active / lin.count)) if lin.count > 1 else tokens
        n = layers * lin.count
        quant = quantized_linear(lin, reg, targets) and not reg.full
        stored = kept_bytes(reg)  # a weight the run does not quantize (fused experts on a 4-bit HF run too)
        w = e if quant else stored  # a quantized weight reaches the GEMM dequantized to the compute dtype
        grouped = grouped_experts(lin, reg) and not quant  # GEMMs in the experts' own dtype, no weight cast
        g = stored if grouped else e
        if not (lin.name == last and lin.name not in targets):
            ops += linear_ops(lin.name, phase, n, per_expert, lin.in_features, lin.out_features, g, w, reg.full,
                              fp32=grouped and stored == 4)
        if quant and reg.quant:
            torchao = reg.profile.torchao_nf4 and reg.quant == "4bit" and not reg.compiled
            per_weight = TORCHAO_NF4_BYTES if torchao else DEQUANT_READ[reg.quant] + e
            ops.append(Op(lin.name + ".dequant", phase, n, 0.0, lin.in_features * lin.out_features * per_weight,
                          TORCHAO_NF4_KERNELS if torchao else 1.0))
        if reg.autocast and stored == 4 and not quant and not grouped and phase != "backward":
            # autocast casts fp32 weights once per forward (and recompute); backward reuses the saved copy
            ops.append(Op(lin.name + ".cast", phase, n, 0.0, lin.in_features * lin.out_features * 6.0))
        if reg.autocast and reg.resid == 4 and lin.feeds_from in (ATTN_IN, MLP_IN) and not reg.compiled:
            # autocast casts the fp32 residual-stream input of each such linear to 16 bits (and its gradient back)
            ops.append(Op(lin.name + ".input_cast", phase, n, 0.0, tokens * lin.in_features * 6.0))
        if lin.name in targets:
            lora = _lora(cfg, reg, lin.name, phase, n, per_expert, lin.in_features, lin.out_features, e, a)
            ops += [o for o in lora if not (lin.name == last and o.name.endswith(".lora_B"))]
    ops += layer_elementwise(cfg, arch, reg, tokens, phase)
    ops += attention_ops(cfg, arch, reg, tokens, phase, kernel)
    ops.append(Op("layer_views", phase, layers, kernels=0.0, views=VIEWS_PER_LAYER_PASS))
    return ops


def _lora(cfg: RunConfig, reg: Regime, name: str, phase: str, n: float, t: int, fin: int, fout: int,
          e: int, a: int) -> list[Op]:
    """lora_B(lora_A(dropout(x))) * scaling added to the base output (peft/tuners/lora/layer.py)."""
    r, fp32 = cfg.r, a == 4
    if phase == "backward":
        ops = [gemm(name + ".lora_B.dX", phase, n, t, fout, r, a, a, fp32),
               gemm(name + ".lora_B.dW", phase, n, fout, t, r, a, a, fp32),
               gemm(name + ".lora_A.dX", phase, n, t, r, fin, a, a, fp32),
               gemm(name + ".lora_A.dW", phase, n, r, t, fin, a, a, fp32)]
    else:
        ops = [gemm(name + ".lora_A", phase, n, t, fin, r, a, a, fp32),
               gemm(name + ".lora_B", phase, n, t, r, fout, a, a, fp32)]
    # scaling mul (2a), add to the base output (e + 2a), cast back when the adapter dtype differs (a + e);
    # PEFT casts x to the adapter dtype first (e + a per input element) and dropout reads/writes it.
    cast_back = (a + e) if a != e else 0
    out_bytes = t * fout * (2 * a + e + 2 * a + cast_back)
    in_bytes = t * fin * ((e + a) if (reg.peft_casts_input and a != e) else 0)
    in_bytes += t * fin * (2 * a + 1) if reg.dropout > 0 else 0
    kernels = 2 + (1 if cast_back else 0) + (1 if in_bytes else 0) + (1 if reg.dropout > 0 else 0)
    if reg.dora:
        # DoRA (peft/tuners/lora/dora.py) every pass: lora_B @ lora_A into a weight-sized fp32 matrix, W + scaling
        # * that (read e + 4, write 4), its row norm (read 4): ~18 B per weight; the norm is detached, so backward
        # only re-reads the delta (~10 B). The output side: (m/||W'|| - 1) * base + m/||W'|| * lora * s, ~34 B each.
        ops.append(gemm(name + ".dora_delta", phase, n, fout, r, fin, a, a, fp32))
        out_bytes += t * fout * 34
        kernels += 8
        ops.append(Op(name + ".dora_norm", phase, n, 0.0, fin * fout * (10.0 if phase == "backward" else 18.0), 4.0))
    # Backward of the casts, the scaling mul and the add: one gradient cast / mul each, ~ the forward's bytes.
    return ops


def micro_batch_ops(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable,
                    kernel: str = "flash") -> list[Op]:
    """Every kernel of one micro-batch's forward, backward and (under checkpointing) recompute."""
    tokens = cfg.max_seq_length * cfg.per_device_train_batch_size
    e = reg.compute
    ops: list[Op] = []
    phases = ["forward", "backward"] + (["recompute"] if reg.checkpointing else [])
    for phase in phases:
        ops += _layer(cfg, arch, reg, tr, tokens, phase, kernel)
    head_trains = reg.full or tr.lm_head
    head_w = e if reg.autocast else reg.lm_head_weight
    ops += linear_ops("lm_head", "forward", 1, tokens, arch.hidden, arch.vocab, e, head_w, False)
    ops += linear_ops("lm_head", "backward", 1, tokens, arch.hidden, arch.vocab, e, head_w, head_trains)
    ops += loss_ops(cfg, arch, reg, tokens)
    # Embedding lookup (read + write a row per token); a trained table gets a dense gradient (zero-fill + index_add).
    ops.append(Op("embedding", "forward", 1, 0.0, 2.0 * tokens * arch.hidden * reg.embed))
    if reg.full:
        ops.append(Op("embedding.grad", "backward", 1, 0.0,
                      arch.vocab * arch.hidden * reg.embed + 3.0 * tokens * arch.hidden * e, 2))
    return ops
