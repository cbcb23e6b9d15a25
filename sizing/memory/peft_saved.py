# What the PEFT tuners other than LoRA/DoRA keep for backward beyond the walk of their LoRA shape (or of the frozen
# base), per decoder layer: each term measured on CPU against peft 0.21.2 (tests/physics/test_peft_methods.py).
from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture, Linear
from ..config import RunConfig
from ..errors import SizingError
from ..frameworks import peft_release
from .peft_methods import Tensors, adamss_sizes, factorization, frod_nnz, osf_kept


@dataclass(frozen=True)
class Extras:
    """What a tuner's layers keep for backward beyond the walk of its LoRA shape (or of the frozen base), per decoder
    layer; each measured on CPU against PEFT 0.21.2 (tests/physics/test_peft_methods.py: byte-exact, bf16 base)."""

    rank: int | None = None  # the walk's adapter intermediate width when the tuner has none (None: r)
    dense: int = 0  # elements of out x in (and like) tensors kept, in the compute dtype under autocast, else adapter's
    per_token: int = 0  # bytes per token of fp32 tensors kept whatever autocast does
    fixed: int = 0  # bytes kept whatever the tokens and dtypes
    assembled: int = 0  # elements of adapter weights built each forward and kept by their matmuls (not under autocast)
    weight_sized: int = 0  # elements of weights built in the base weight's dtype each forward and kept (GLoRA, AdaMSS)
    copies_input: bool = True  # False: the adapter's matmul reads the layer input as it is (GLoRA), no fp32 copy
    autocast_copied: int = 0  # elements of trained factors autocast copies for a matmul (GLoRA's Xd @ Xu)
    buffers: int = 0  # elements of frozen tensors the tuner stores in the adapters' dtype (PSOFT's, TinyLoRA's A, B)
    index_bytes: int = 0  # bytes of its int64 index buffers (UniLoRA's, PSOFT's)
    base_per_token: int = 0  # elements per token kept in the base weight's dtype, the compute dtype under autocast
    per_sequence: int = 0  # elements per sequence of the micro-batch kept in that dtype (adaption prompt's keys)
    weight_buffers: int = 0  # elements of frozen tensors the tuner stores in the base weight's dtype (FRoD's U)
    # tensors it holds in CPU memory, copied to the GPU each forward and kept for backward (FRoD's basis V and
    host_copied: int = 0  # indices): elements in the base dtype,
    host_bytes: int = 0  # and bytes of int64 indices
    resid_per_token: int = 0  # elements per token kept in the residual stream's dtype (trained RMSNorm weights)
    adapter_per_token: int = 0  # elements per token kept in the adapters' dtype, the compute dtype under autocast


def saved_extras(cfg: RunConfig, targets: tuple[Linear, ...]) -> Extras:
    """The run's tuner's Extras on the adapted linears `targets` of one decoder layer."""
    kind, r = cfg.peft_type, cfg.r
    modules = sum(lin.count for lin in targets)
    outs = sum(lin.out_features * lin.count for lin in targets)
    ins = sum(lin.in_features * lin.count for lin in targets)
    products = sum(lin.in_features * lin.out_features * lin.count for lin in targets)
    squares = sum(lin.in_features ** 2 * lin.count for lin in targets)  # in x in tensors (BOFT's rotation, FRoD's S)
    if kind == "road":  # its fp32 output and that output's rotated half (tuners/road/layer.py _apply_road) per token;
        # four fp32 out-wide vectors (the alpha * cos / sin columns its multiplies read)
        return Extras(per_token=8 * outs, fixed=16 * outs)
    if kind == "waveft":  # F.linear(x cast to the spectrum's fp32, dense update) keeps that copy of x (LoRA's, no
        # r-wide intermediate); the update and the wavelet coefficients it came from, db1's 2 x 2 filter for 4 subbands
        # and its index bookkeeping (a bool mask and two int64 position vectors of n_frequency each)
        return Extras(rank=0, dense=2 * products + 16 * modules, fixed=17 * (cfg.n_frequency or 0) * modules)
    if kind == "fourierft":  # LoRA's fp32 input copy (no r-wide intermediate), the dense update ifft2 made from the
        # spectrum [out, in], and the two int64 index vectors that placed it
        return Extras(rank=0, dense=products, fixed=16 * (cfg.n_frequency or 0) * modules)
    if kind in ("vblora", "unilora"):  # lora_A [r, in] and lora_B [out, r] built each forward (autocast: bf16 copies,
        # walked as LoRA's); VB-LoRA's top-k mix: k gathered fp32 bank rows per entry, int64 indices and fp32 weights
        # per sub-vector
        entries = r * (ins + outs)
        mix = 4 * cfg.topk * entries + 12 * cfg.topk * entries // cfg.vector_length if kind == "vblora" else 0
        # UniLoRA's scales (the adapters' dtype) and int64 indices per entry are buffers
        return Extras(fixed=mix, assembled=entries, buffers=entries if kind == "unilora" else 0,
                      index_bytes=8 * entries if kind == "unilora" else 0)
    if kind == "deft":  # its fp32 output and (output @ relu(P)) per token (beyond LoRA's x copy and x @ R^T, or the
        # frozen base's under PaRa); relu(P) [out, r] and R * scaling [r, in] rebuilt each forward
        return Extras(per_token=4 * (outs + r * modules), assembled=r * outs + (0 if cfg.deft_para else r * ins))
    if kind == "lily":  # the router's softmax per token; the num_B-mixed B [r, out] and the mix weights per layer
        return Extras(per_token=4 * cfg.num_B * modules, fixed=4 * r * outs + 4 * cfg.num_B * modules)
    if kind == "glora":  # F.linear(x, W + W * A + B) keeps x as it is and that effective weight [out, in]
        lora = cfg.config_A_B == "lora"
        return Extras(rank=0, weight_sized=products, copies_input=False,
                      autocast_copied=2 * r * (ins + outs) if lora else 0)
    if kind == "tinylora":  # the rank r' = min(r, in, out) R [r', r'] built from v and P each forward; its frozen
        # SVD factors A [r', in], B [out, r'] and projections P [u, r', r'] are buffers
        rr = min([r, *(min(lin.in_features, lin.out_features) for lin in targets)])
        return Extras(rank=rr, fixed=4 * rr * rr * modules,
                      buffers=rr * (ins + outs) + cfg.tinylora_u * rr * rr * modules)
    if kind == "psoft":  # x @ A^T [tokens, r] (A and B are frozen SVD buffers); the Cayley solve keeps five r x r
        # matrices and an r-vector (measured with psoft_orth and both scales, the defaults);
        # A [r, in], B [out, r] and the skew matrix's two int64 index vectors are buffers
        return Extras(fixed=4 * (5 * r * r + r) * modules, buffers=r * (ins + outs),
                      index_bytes=16 * (r * (r - 1) // 2) * modules if cfg.psoft_orth else 0)
    if kind == "peanut":  # x's fp32 copy (no r-wide intermediate); W.T in fp32 and the dense update from it, and
        # 1 + 3 depth [in, r] activations of the weight
        return Extras(rank=0, dense=2 * products + (1 + 3 * cfg.depth) * r * ins)
    if kind == "adamss":  # F.linear(x, newB) keeps nothing of x (newB is a frozen buffer); the projection [tokens,
        # r_e] and each subspace's output [tokens, R] are kept, with the copies of newB, A_i and B_i cast to the base
        # dtype (autocast's under autocast). newB [r_e, in (+1 with a bias)] is a buffer in the adapters' dtype. The
        # scatter keeps its int64 index [out] for backward: a plain dict entry PEFT never moves, so on a GPU a copy
        # made each forward
        sizes = [(lin, *adamss_sizes(cfg, lin)) for lin in targets]
        return Extras(base_per_token=sum((rank + ke * sub) * lin.count for lin, rank, ke, sub in sizes), fixed=8 * outs,
                      weight_sized=sum((rank * (lin.in_features + lin.bias) + ke * sub * rank + sub * lin.out_features)
                                       * lin.count for lin, rank, ke, sub in sizes),
                      buffers=sum(rank * (lin.in_features + lin.bias) * lin.count for lin, rank, _, _ in sizes))
    # Measured on CPU with a bf16 base and fp32 adapters (tests/physics/test_peft_methods.py OUTPUT_SIDE):
    if kind == "adalora":  # LoRA's, plus lora_A * lora_E [r, in] and the scaled update [tokens, out] (out_saved)
        return Extras(assembled=r * ins, fixed=4 * modules)
    if kind == "oft":  # x cast and split into r blocks (LoRA's input copy, no r-wide intermediate); the Cayley solve of
        # r blocks of (in / r)^2: four fp32 tensors
        return Extras(rank=0, fixed=16 * sum(lin.in_features * (lin.in_features // r) * lin.count for lin in targets))
    if kind == "shira":  # F.linear(x as it is, W + sparse delta): the new weight in the base dtype, the delta's COO
        # (int64 indices, fp32 values) of r * (in + out) entries
        return Extras(rank=0, copies_input=False, weight_sized=products, fixed=20 * r * (ins + outs))
    if kind == "hra":  # LoRA's input copy; the r Householder factors multiplied into an fp32 in x in product one by
        # one, each step's kept (r + 1 of them), the reflected weight twice, the normalised vectors
        return Extras(rank=0, fixed=4 * sum(((r + 1) * lin.in_features ** 2 + 2 * lin.out_features * lin.in_features
                                             + 2 * r * lin.in_features + r) * lin.count for lin in targets))
    if kind == "delora":  # LoRA's, a second r-wide fp32 intermediate (the normalised one), six r-vectors and a scalar
        return Extras(per_token=4 * r * modules, fixed=(24 * r + 4) * modules)
    if kind == "hira":  # LoRA's input copy and the dense Hadamard weight W * (B @ A) [out, in]
        return Extras(rank=0, dense=products)
    if kind == "randlora":  # x meets frozen random bases (not kept); the min(in, out)-wide intermediate per token and
        # a min x min product
        mins = [min(lin.in_features, lin.out_features) for lin in targets for _ in range(lin.count)]
        return Extras(rank=0, per_token=4 * sum(mins), fixed=4 * sum(m * m for m in mins))
    if kind == "c3a":  # LoRA's input copy (split into blocks for the FFT), no r-wide intermediate
        return Extras(rank=0)
    if kind == "loha":  # F.linear(x cast to the adapters' dtype, delta): LoRA's input copy (no r-wide intermediate)
        # and the dense delta [out, in] the Hadamard product of its two factor pairs builds; a 0-d scale per module
        return Extras(rank=0, dense=products, fixed=4 * modules)
    if kind == "lokr":  # likewise the Kronecker delta [out, in]; a decomposed w2 (r below half its larger side, as
        # _lokr's tensors) keeps its product w2_a @ w2_b [out_k, in_n] too
        kept = 0
        for lin in targets:
            _, out_k = factorization(lin.out_features, cfg.decompose_factor)
            _, in_n = factorization(lin.in_features, cfg.decompose_factor)
            kept += out_k * in_n * lin.count if r < max(out_k, in_n) / 2 else 0
        return Extras(rank=0, dense=products, assembled=kept)
    if kind == "miss" and cfg.miss_init == "mini":  # the block repeated out / mini_r times, kept by its matmul
        return Extras(assembled=r * outs)
    if kind == "miss" and cfg.miss_init == "bat":  # F.linear(x cast to the block's dtype, W + delta): LoRA's input
        # copy (no r-wide intermediate), the weight W cast to that dtype and reshaped into r x r blocks (kept by W @
        # block) and the whole updated weight [out, in], both in the block's dtype
        return Extras(rank=0, dense=2 * products)
    if kind == "boft":  # x @ rotation keeps x as it is and the rotation; the frozen base's output, scaled by boft_s,
        # is kept per token in x's dtype (16-bit here); per adapted layer three in x in tensors in that dtype (the block
        # diagonal cast to x, the permuted product, the rotation it multiplies), the Cayley solve of in/4 blocks of 4 x
        # 4 (three fp32 tensors and int32 pivots: 52 in bytes) and the scale's out-wide ones (16-bit) and product (fp32)
        return Extras(rank=0, copies_input=False, base_per_token=outs,
                      weight_sized=3 * squares,
                      fixed=52 * ins + 6 * outs)
    if kind == "frod":  # z = x @ V per token (V frozen: x not kept), S densified from its coalesced COO (values and
        # int64 indices) and lambda's cast, in x's 16-bit dtype; the base layer is skipped. U [out, in] per module
        # is a buffer in the base dtype, unless runtime_offload_base_weight moves W to the CPU for it (same size). The
        # basis V [in, in] and S's indices stay in CPU memory (plain references PEFT never moves): copies each forward
        nnz = [frod_nnz(lin.in_features, cfg.sparse_rate) * lin.count for lin in targets]
        return Extras(base_per_token=ins, weight_sized=squares + ins, fixed=20 * sum(nnz),
                      weight_buffers=0 if cfg.runtime_offload_base_weight else products,
                      host_copied=squares, host_bytes=16 * sum(nnz))
    if kind == "osf":
        return _osf(cfg, targets)
    return Extras()


def _osf(cfg: RunConfig, targets: tuple[Linear, ...]) -> Extras:
    """OSF (tuners/osf). PEFT 0.21 adds x @ delta^T, delta = A @ B with A = [U_low * S_low, -U_low_init * S_low_init]
    [out, 2t] and B = [V_low; V_low_init] [2t, in] concatenated each forward: the two matmuls keep x cast to A's
    dtype (LoRA's input copy), B, h = x @ B^T [tokens, 2t] and A (autocast's compute-dtype copies of x and B under
    autocast). Frozen buffers, in the adapters' dtype (cast_adapter_dtype casts BufferDicts too): the three init
    copies, and U_high [out, k] where out > in, V_high [k, in] where out < in. Before 0.21 (tuners/osf/layer.py at
    v0.20.0) the forward rebuilt the whole weight U_high S_high V_high + U_low S_low V_low and ran F.linear(x cast to
    its dtype, W): W [out, in] and U_low * S_low [out, t] are kept, no per-token intermediate; U_high, S_high and
    V_high are buffers."""
    # per adapted linear: (its copies, trained rank t, kept rank k, in, out)
    ranks = [(lin.count, min(lin.in_features, lin.out_features) - k, k, lin.in_features, lin.out_features)
             for lin in targets for k in (osf_kept(cfg, lin),)]
    if peft_release(cfg) < (0, 21):
        return Extras(rank=0, dense=sum(n * i * o for n, _, _, i, o in ranks),
                      assembled=sum(n * t * o for n, t, _, _, o in ranks),
                      autocast_copied=sum(n * t * (i + o) for n, t, _, i, o in ranks),
                      buffers=sum(n * k * (i + o + 1) for n, _, k, i, o in ranks))
    factors = sum(n * 2 * t * (i + o) for n, t, _, i, o in ranks)
    high = sum(n * k * (o if o > i else i if o < i else 0) for n, _, k, i, o in ranks)
    return Extras(rank=0, adapter_per_token=sum(n * 2 * t for n, t, _, _, _ in ranks), assembled=factors,
                  autocast_copied=factors, buffers=sum(n * t * (i + o + 1) for n, t, _, i, o in ranks) + high)


def adaption_prompt(cfg: RunConfig, arch: Architecture) -> tuple[Tensors, Extras]:
    """Adaption prompt (LLaMA-Adapter; peft tuners/adaption_prompt, 0.21.2): an adaption_prompt [adapter_len, hidden]
    and a gate [1] in each of the last adapter_layers attention layers, and what one adapted layer keeps for backward:
    the query it computes again (RoPE'd), its fp32 softmax over the prompt's tokens, that cast back and its gated
    product per token, and the prompt's keys and values repeated to every head and sequence."""
    model_type = arch.peft_model_type or arch.model_type
    if model_type not in ("llama", "mistral"):  # config.py TRANSFORMERS_MODEL_CONFIG (gpt2's needs its own k_proj)
        raise SizingError("invalid_value", f"peft_type adaption_prompt supports model_type llama and mistral (PEFT "
                          f"0.21), not '{model_type}'", field="peft_type", value="adaption_prompt")
    if arch.hidden != arch.heads * arch.head_dim:  # layer.py views the prompt's keys as hidden / head_dim heads
        raise SizingError("invalid_value", f"peft_type adaption_prompt needs hidden_size = heads x head_dim (this "
                          f"model: {arch.hidden} vs {arch.heads} x {arch.head_dim}); PEFT's forward fails",
                          field="peft_type", value="adaption_prompt")
    layers = cfg.adapter_layers or arch.layers
    if layers > arch.layers:  # model.py: "Config specifies more adapter layers ... than the model has"
        raise SizingError("invalid_value", f"adapter_layers={layers} exceeds the model's {arch.layers} layers",
                          field="adapter_layers", value=layers, max=arch.layers)
    length, heads = cfg.adapter_len, arch.heads
    return ([(length, arch.hidden, layers), (1, 1, layers)],
            Extras(per_token=4 * heads * length, base_per_token=arch.q_width + 2 * heads * length,
                   per_sequence=2 * heads * length * arch.head_dim))
