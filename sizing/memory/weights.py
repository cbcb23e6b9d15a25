# Base weights by storage format, and the bitsandbytes quantization state (memory-model.md §1).
from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture
from ..config import RunConfig
from ..errors import SizingError
from ..frameworks import HF_STACKS, TORCHAO_01_NF4_BYTES, TORCHAO_NF4_BYTES
from ..shapes import CheckpointQuant, Linear
from .regime import Regime

BLOCK_4BIT = 64  # Params4bit blocksize default (bitsandbytes functional.quantize_4bit)
BLOCK_DQ = 256  # double quantization re-quantizes absmax in blocks of 256
CODE_4BIT_BYTES = 16 * 4  # nf4/fp4 code table, fp32, per tensor
DQ_CONSTANT_BYTES = 4 + 256 * 4  # offset scalar + state2.code (256-entry fp32 map copied per tensor)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def bytes_4bit(n: int, double_quant: bool) -> tuple[int, int]:
    """(packed data bytes, quant-state bytes) of one n-element weight in NF4/FP4.

    The data is what model.parameters() sees; the state (absmax etc.) is not a parameter.
    """
    data = _ceil_div(n, 2)
    blocks = _ceil_div(n, BLOCK_4BIT)
    if double_quant:
        state = blocks + _ceil_div(blocks, BLOCK_DQ) * 4 + DQ_CONSTANT_BYTES + CODE_4BIT_BYTES
    else:
        state = blocks * 4 + CODE_4BIT_BYTES
    return data, state


def bytes_int8(in_features: int, out_features: int) -> tuple[int, int]:
    """LLM.int8: CB int8 [out, in] + SCB fp32 [out] (one scale per output row)."""
    return in_features * out_features, 4 * out_features


@dataclass(frozen=True)
class Weights:
    base_param_bytes: int  # frozen or trainable base parameters as model.parameters() counts them
    quant_state_bytes: int  # absmax & co: real memory, not parameters
    adapter_param_bytes: int
    linear_bytes_per_layer: int  # base Linear storage of one layer (for sharding / dequant transients)
    largest_linear_elems: int  # out*in of the largest projection (4-bit dequantization transient)

    @property
    def param_bytes(self) -> int:
        return self.base_param_bytes + self.adapter_param_bytes


def bytes_torchao_nf4(n: int, factor_view: bool = False) -> tuple[int, int]:
    """torchao NF4Tensor: always double-quantized, second-level factors in bf16 (0.515747 B/param); factor_view:
    torchao 0.1 keeps the expanded factor (0.546875 B/param)."""
    data = _ceil_div(n, 2)
    return data, int(n * (TORCHAO_01_NF4_BYTES if factor_view else TORCHAO_NF4_BYTES)) - data


def bytes_gptq(in_features: int, out_features: int, bits: int, group: int, awq: bool) -> tuple[int, int]:
    """(packed data, scales + zeros + g_idx) bytes of one GPTQ / AWQ linear.

    auto-gptq QuantLinear (qlinear_cuda_old.py) / gptqmodel TorchQuantLinear: qweight int32
    [in*bits/32, out], qzeros int32 [ceil(in/g), out*bits/32], scales fp16 [ceil(in/g), out],
    g_idx int32 [in]. AutoAWQ WQLinear_GEMM (awq/modules/linear/gemm.py): qweight int32
    [in, out*bits/32], qzeros int32 [in/g, out*bits/32], scales fp16 [in/g, out], no g_idx.
    """
    groups = 1 if group == -1 else _ceil_div(in_features, group)
    data = in_features * out_features * bits // 8
    state = groups * out_features * bits // 8 + 2 * groups * out_features + (0 if awq else 4 * in_features)
    return data, state


def checkpoint_method(arch: Architecture) -> str | None:
    """The only method a pre-quantized checkpoint trains with (None: any): LoRA on top of GPTQ / AWQ (PEFT wraps
    the frozen QuantLinear: tuners/lora/gptq.py GPTQLoraLinear, awq.py AwqLoraLinear), QLoRA / 8-bit LoRA on a
    checkpoint saved by bitsandbytes; gpt-oss's MXFP4 checkpoint LoRA (full fine-tuning of it is accepted too:
    check_checkpoint)."""
    cq = arch.checkpoint_quant
    if cq is None:
        return None
    if cq.method == "mxfp4":  # trained dequantized, in the load dtype: LoRA (or full fine-tuning), not QLoRA
        return "lora"
    if cq.method == "bitsandbytes":
        return "qlora" if cq.bits == 4 else "lora8"
    return "lora"


def check_checkpoint(cfg: RunConfig, arch: Architecture) -> None:
    """A pre-quantized checkpoint fixes the method (checkpoint_method)."""
    cq = arch.checkpoint_quant
    wanted = checkpoint_method(arch)
    if cq is not None and cq.method == "mxfp4" and cfg.quantized:
        # from_pretrained refuses a BitsAndBytesConfig on a checkpoint quantized otherwise (quantizers/auto.py
        # merge_quantization_configs: "The model is quantized with Mxfp4Config but you are passing a
        # BitsAndBytesConfig config"); the MXFP4 experts train only dequantized (Mxfp4Config(dequantize=True)), so
        # the model is modelled in its load dtype and QLoRA needs a bf16 copy of the checkpoint
        raise SizingError("conflict", "the checkpoint's experts are MXFP4: transformers trains them dequantized "
                          "(Mxfp4Config(dequantize=True)) and refuses a bitsandbytes config on it; use method lora or "
                          "full, or a bf16 copy of the checkpoint for QLoRA", field="method", value=cfg.method,
                          expected="lora")
    if cq is None or wanted is None or cq.method == "mxfp4":
        return
    if cq.method == "bitsandbytes":
        if cfg.method != wanted:
            raise SizingError("conflict", f"the checkpoint is saved in bitsandbytes {cq.bits}-bit: use method "
                              f"{wanted}", field="method", value=cfg.method, expected=wanted)
        return
    if cfg.method != wanted:
        raise SizingError("conflict", f"the checkpoint is already quantized with {cq.method.upper()} "
                          f"({cq.bits}-bit): its integer weights cannot be trained or re-quantized; use method lora",
                          field="method", value=cfg.method, expected="lora")


def quantized_linear(lin: Linear, reg: Regime, adapted: frozenset[str]) -> bool:
    """Whether a quantized run stores this linear's weight quantized. torchtune 0.1 quantizes only the LoRA bases;
    on the Hugging Face stacks replace_with_bnb_linear converts nn.Linear modules only, so transformers 5's fused
    experts (3-D nn.Parameter) and bare router weights keep a floating dtype (bitsandbytes issue #1849; measured:
    tests/physics/test_moe_weights.py)."""
    if not reg.quant or (reg.profile.quantize_only_adapted and lin.name not in adapted):
        return False
    return lin.nn_linear or not reg.profile.fused_experts


def grouped_experts(lin: Linear, reg: Regime) -> bool:
    """transformers 5's fused experts: their default grouped_mm (integrations/moe.py _grouped_mm, 5.24) is not
    autocast-enabled and casts its input to the weights' dtype, so no bf16 copy of an fp32 expert weight is made and
    the experts' GEMMs run in the weights' dtype (measured: tests/physics/test_moe_weights.py)."""
    return not lin.nn_linear and lin.count > 1 and reg.profile.fused_experts


def kept_bytes(reg: Regime) -> int:
    """Bytes per element of a base linear weight the run does not quantize: on the Hugging Face stacks
    prepare_model_for_kbit_training up-casts every floating parameter that is not Params4bit to fp32, like the
    norms (peft utils/other.py, v0.21 l.205-209); elsewhere the load dtype."""
    return reg.norm_weight if reg.quant and reg.profile.name in HF_STACKS else reg.weight


def nf4_linears(arch: Architecture, reg: Regime, adapted: frozenset[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """torchao NF4 runs: (element counts of one layer's NF4 linears, bytes of its linears kept in bf16)."""
    quantized: list[int] = []
    kept: list[int] = []
    for lin in arch.linears:
        n = lin.in_features * lin.out_features
        if reg.profile.quantize_only_adapted and lin.name not in adapted:
            kept += [n * reg.weight] * lin.count
        else:
            quantized += [n] * lin.count
    return tuple(quantized), tuple(kept)


def weights(cfg: RunConfig, arch: Architecture, reg: Regime, adapter_params: int,
            adapted: frozenset[str] = frozenset(), buffer_bytes: int = 0) -> Weights:
    """Bytes of the base weights (by storage format), their quantization state and the adapters (buffer_bytes: the
    tuner's module buffers, counted with them)."""
    check_checkpoint(cfg, arch)
    L = arch.layers
    prof = reg.profile
    cq = arch.checkpoint_quant
    int_ckpt = cq is not None and cq.method in ("gptq", "awq")
    # Biases of quantized linears stay floating (they are not part of Params4bit / Int8Params); GPTQ / AWQ
    # keep them in fp16 (QuantLinear registers bias as float16).
    bias_bytes = 2 if int_ckpt else reg.norm_weight if reg.quant else reg.weight
    per_layer, state_per_layer = _linears(cfg, arch.linears, reg, adapted, bias_bytes, cq)
    norms = L * arch.norm_params_per_layer + arch.outer_norms * arch.hidden * (2 if arch.norm_bias else 1)
    # transformers never quantizes lm_head (replace_with_bnb_linear skips the output embedding); LitGPT's
    # BitsandbytesPrecision replaces every nn.Linear, the head included.
    head = arch.lm_head_params * reg.lm_head_weight
    head_state = 0
    if reg.quant == "4bit" and prof.quantize_lm_head and not arch.tied_embeddings:
        head, head_state = bytes_4bit(arch.vocab * arch.hidden, cfg.bnb_4bit_use_double_quant)
    other = arch.embedding_params * reg.embed + head + norms * reg.norm_weight
    tower = tower_state = 0
    if arch.tower is not None:  # replace_with_bnb_linear reaches its nn.Linear modules too (shapes.Tower)
        data, state = _linears(cfg, arch.tower.linears, reg, adapted, bias_bytes, None)
        tower = arch.tower.layers * data + arch.tower.other_params * bias_bytes
        tower_state = arch.tower.layers * state
    largest = max(lin.in_features * lin.out_features for lin in arch.linears)
    return Weights(base_param_bytes=L * per_layer + other + tower,
                   quant_state_bytes=L * state_per_layer + head_state + tower_state,
                   adapter_param_bytes=adapter_params * reg.adapter + buffer_bytes, linear_bytes_per_layer=per_layer,
                   largest_linear_elems=largest)


def _linears(cfg: RunConfig, linears: tuple[Linear, ...], reg: Regime, adapted: frozenset[str],
             bias_bytes: int, cq: CheckpointQuant | None) -> tuple[int, int]:
    """(stored bytes, quantization-state bytes) of one layer's linears."""
    prof = reg.profile
    int_ckpt = cq is not None and cq.method in ("gptq", "awq")
    per_layer = state_per_layer = 0
    for lin in linears:
        n = lin.in_features * lin.out_features
        fmt = reg.quant if quantized_linear(lin, reg, adapted) else None
        if int_ckpt and cq is not None and (lin.nn_linear or lin.count > 1):
            # GPTQ / AWQ quantize every linear of the decoder layers, experts too; the router stays fp16.
            data, state = bytes_gptq(lin.in_features, lin.out_features, cq.bits, cq.group_size, cq.method == "awq")
        elif fmt and prof.torchao_nf4:
            data, state = bytes_torchao_nf4(n, prof.nf4_factor_view)
        elif fmt == "4bit":
            data, state = bytes_4bit(n, cfg.bnb_4bit_use_double_quant or cfg.quantization_backend == "torchao")
        elif fmt == "8bit":
            data, state = bytes_int8(lin.in_features, lin.out_features)
        else:
            data, state = n * kept_bytes(reg), 0
        if lin.bias:
            data += lin.out_features * bias_bytes
        per_layer += lin.count * data
        state_per_layer += lin.count * state
    return per_layer, state_per_layer
