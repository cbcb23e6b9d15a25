# Activations saved for backward, per decoder layer and per token (memory-model.md §5, §6).
#
# Rules (all byte-exact on CPU in the design's verify_saved_tensors.py):
# - a matmul saves an operand only if the other one needs a gradient: a frozen Linear saves only its
#   weight; a trainable one (or lora_A) saves its input;
# - consumers of one tensor share one saved copy unless a cast, a dropout or autocast makes their own;
# - RMSNorm computes in fp32 and saves its fp32 input (4h + 4 B/token) even in bf16 training;
# - SwiGLU/GeGLU saves g, act(g) and u whatever trains, because the input needs a gradient;
# - a plain MLP's activation saves its input, plus the intermediates of transformers' Python formulas (gelu_new).
from __future__ import annotations

from dataclasses import dataclass

from ..arch import ATTN_IN, ATTN_OUT, MLP_IN, MLP_MID, Architecture, Linear
from .adapters import NO_EXTRAS, Trainable
from .peft_methods import ia3_constant, ia3_pieces
from .regime import Regime
from .weights import grouped_experts, kept_bytes, quantized_linear

# Loops that run their own model code (F.gelu, one fused kernel), not transformers' ACT2FN (frameworks.py).
_OWN_MODEL_CODE = ("litgpt", "torchtune")


@dataclass(frozen=True)
class LayerSaved:
    per_token: int  # bytes saved by one middle decoder layer per token (B·S tokens)
    constant: int  # bytes per layer independent of tokens (autocast weight copies, DoRA norms)
    layer0_delta_per_token: int  # layer 0 of a PEFT model without input grads saves less
    layer0_delta_constant: int  # ... and keeps no autocast copies of its q/k/v lora_A weights
    checkpoint_per_token: int  # what a checkpointed layer keeps: its input hidden state
    # of per_token, what is the layer's input itself (its first norm saves its input uncast): under checkpointing
    # the kept input, which the recomputation does not allocate again
    input_per_token: int
    pieces: tuple[int, ...]  # per-token bytes of the saved tensor groups in forward order (allocator replay)
    held_per_token: int  # inputs kept by bitsandbytes-0.42 4-bit matmuls (survive with the graph)
    cached_weight_copies: int  # autocast's cache of trainable weights cast to bf16 (all layers)
    # a checkpointed layer's recomputation at its high-water mark, per token, beyond all the layer saves (gpt-oss:
    # the gathered expert biases and unsaved intermediates, before the experts' output is saved); 0: below it
    recompute_extra_per_token: int = 0

    def recomputed(self, kept_input: int) -> tuple[int, ...]:
        """Per-token bytes a checkpointed layer's recomputation in backward allocates, by group (`pieces`): all it
        saves but `kept_input` (input_per_token, or 0 where the kept input is not the GPU tensor the first norm
        reads), out of the first norm's group. Their sum and `constant`: what the recorded recomputation keeps
        (tests/physics/data/ckpt_forward.json recompute_kept)."""
        if not kept_input:
            return self.pieces
        first = self.pieces[0] - kept_input
        return ((first,) if first else ()) + self.pieces[1:]


class LayerWalker:
    """Walks one decoder layer in forward order, adding what autograd keeps."""

    def __init__(self, arch: Architecture, reg: Regime, trainable: Trainable, r: int, seq: int) -> None:
        rank = trainable.extras.rank  # a tuner without lora_A / lora_B (WaveFT): 0
        r = r if rank is None else rank
        self.arch, self.reg, self.r, self.seq = arch, reg, r, seq
        self.targets = {lin.name for lin in trainable.targets}
        self.frozen_a = trainable.frozen_a
        self.inner = trainable.inner or r  # the saved intermediate's width (lora_A's output: r)
        self.has_a = trainable.has_a
        self.out_saved = trainable.out_saved
        self.copies_input = trainable.extras.copies_input
        self.mask_total = 0  # dropout masks on attention-input consumers (layer-0 correction)
        self.held = 0  # inputs kept by bitsandbytes-0.42 4-bit matmuls, per token
        self.kept = 0  # without a pre-norm: the per-token bytes of the layer input the attention projections save
        self.shared = 0  # per-token bytes of the last consumers_saved's one shared copy of its input
        self.pieces: list[int] = []  # per-token bytes of each group of tensors walk() saves, in forward order
        self.recompute_extra = 0  # LayerSaved.recompute_extra_per_token
        # the adapters add lora_B(lora_A(x)) * scaling to the base output (LoRA, LoRA-FA): no tuner's own terms, no
        # DoRA magnitude
        self.plain_lora = bool(trainable.targets) and self.has_a and not self.out_saved and not trainable.scaled \
            and trainable.extras == NO_EXTRAS and not reg.dora

    def _rec(self, *per_token: int) -> int:
        """Record each tensor's per-token bytes (a group if one figure stands for several) and their sum."""
        self.pieces.extend(x for x in per_token if x)
        return sum(per_token)

    # -- dtypes ---------------------------------------------------------------------------------
    def norm_out(self, in_bytes: int) -> int:
        reg = self.reg
        if self.arch.norm == "rms":  # weight * x.to(input_dtype): type promotion with the weight
            return max(reg.norm_weight, in_bytes)
        if self.arch.norm in ("rms_gemma", "rms_cast"):  # output.type_as(x), (weight * x).to(input_dtype)
            return in_bytes
        return 4 if reg.autocast else in_bytes  # layer_norm runs in fp32 under autocast

    def linear_out(self, in_bytes: int) -> int:
        reg = self.reg
        if reg.quant and not reg.full:
            return in_bytes  # bnb Linear4bit/8bitLt return the input's dtype
        return reg.compute if reg.autocast else reg.weight

    def pre_out(self, resid: int) -> int:
        """Bytes per element of what the projections read: the pre-norm's output, or the residual stream itself."""
        return self.norm_out(resid) if self.arch.pre_norms else resid

    # -- saved tensors --------------------------------------------------------------------------
    def norm_saved(self, in_bytes: int, width: int) -> int:
        trains = self.reg.full
        if self.reg.compiled:
            # AOT autograd keeps the norm's input as it is and the rsqrt; the fp32 copy and x_hat
            # are recomputed in the backward.
            return in_bytes * width + (8 if self.arch.norm == "layer" else 4)
        if self.arch.norm == "layer":
            # native_layer_norm keeps its input (an fp32 copy under autocast) and fp32 mean/rstd.
            return (4 if self.reg.autocast else in_bytes) * width + 8
        extra = 0
        if trains:  # weight * x_hat saves x_hat: input dtype (Llama) or fp32 (Gemma's (1 + w), OLMo 2's product)
            extra = (in_bytes if self.arch.norm == "rms" else 4) * width
        return 4 * width + 4 + extra

    def input_kept(self, in_bytes: int, width: int) -> int:
        """Bytes per token of norm_saved that are the norm's input itself, no cast having made a copy (measured for
        RMS norms: a checkpointed layer's recomputation, tests/physics/data/ckpt_forward.json recompute_kept;
        LayerNorm by norm_saved's own rule: native_layer_norm saves its input unless autocast casts it to fp32;
        compiled, by norm_saved's rule too: AOT autograd saves the norm's input as it is, a graph input)."""
        if self.reg.compiled:
            return in_bytes * width
        if self.arch.norm == "layer":
            return in_bytes * width if not self.reg.autocast or in_bytes == 4 else 0
        return 4 * width if in_bytes == 4 else 0  # x.to(torch.float32) of an fp32 x is x

    def consumers_saved(self, tensor_bytes: int, width: int, consumers: list[Linear], already_saved: bool) -> int:
        reg, c = self.reg, self.reg.compute
        shared = False
        extra = 0
        if reg.profile.holds_4bit_inputs and reg.quant == "4bit" and not reg.full and consumers:
            shared = True  # MatMul4Bit (bitsandbytes 0.42) keeps A in ctx.tensors
            self.held += tensor_bytes * width
        if reg.profile.fused_lora_qkv:
            qkv = [lin for lin in consumers if lin.name in self.targets and lin.name in ("q_proj", "k_proj", "v_proj")]
            if qkv:
                consumers = [lin for lin in consumers if lin not in qkv]
                extra += self.fused_qkv_lora(tensor_bytes, width, qkv)
        for lin in consumers:
            if reg.full:
                if reg.autocast and tensor_bytes != c:
                    extra += c * width  # autocast casts per op: each consumer saves its own copy
                else:
                    shared = True
            if lin.name in self.targets:
                cur, copied = tensor_bytes, False
                if self.copies_input and reg.peft_copies(cur):
                    cur, copied = reg.adapter, True  # lora.Linear._cast_input_dtype
                if reg.dropout > 0:
                    mask = reg.mask_bytes(cur) * width
                    extra += mask
                    if lin.feeds_from == ATTN_IN:
                        self.mask_total += mask
                    copied = True
                if reg.autocast and (cur != c or reg.adapter_mismatch):
                    cur, copied = c, True
                if self.frozen_a:
                    pass  # LoRA-FA: lora_A is frozen, so its matmul saves no input (measured in tests/physics)
                elif copied:
                    extra += cur * width
                else:
                    shared = True
                extra += self.inner * (c if reg.autocast else reg.adapter)  # lora_B input: lora_A output
                if self.out_saved:  # VeRA: the product lambda_b multiplies
                    extra += lin.out_features * (c if reg.autocast else reg.adapter)
                if reg.dora:  # base_result and lora_result kept by the magnitude; lora_result in the adapters' dtype
                    # unless autocast runs lora_B (measured: tests/physics/test_peft_methods.py)
                    extra += (c + (c if reg.autocast else reg.adapter)) * lin.out_features
        self.shared = tensor_bytes * width if shared and not already_saved else 0
        return extra + self.shared

    def fused_qkv_lora(self, tensor_bytes: int, width: int, qkv: list[Linear]) -> int:
        """LitGPT LoRAQKVLinear: one dropout output and one lora_A output for all adapted q/k/v;
        with fewer than three adapted, zero_pad's index_copy saves the un-padded update."""
        reg, c = self.reg, self.reg.compute
        extra = len(qkv) * self.r * c
        if reg.dropout > 0:
            mask = reg.mask_bytes(tensor_bytes) * width
            self.mask_total += mask
            extra += mask + tensor_bytes * width
        if len(qkv) < 3:
            extra += c * sum(lin.out_features for lin in qkv)
        return extra

    def by_source(self, source: str) -> list[Linear]:
        return [lin for lin in self.arch.linears if lin.feeds_from == source and lin.count == 1]

    def walk(self) -> int:
        arch, reg, c = self.arch, self.reg, self.reg.compute
        h, q, kv, nh, inter, seq = arch.hidden, arch.q_width, arch.kv_width, arch.heads, arch.intermediate, self.seq
        resid = reg.resid
        total = self._rec(self.norm_saved(resid, h)) if arch.pre_norms else 0
        attn_in = self.pre_out(resid)
        consumers = self.by_source(ATTN_IN) + (self.by_source(MLP_IN) if arch.pre_norms == 1 else [])
        total += self._rec(self.consumers_saved(attn_in, h, consumers, already_saved=False))
        self.kept = self.shared if not arch.pre_norms else 0  # the projections save the layer input itself
        qb = self.linear_out(attn_in)
        if arch.qk_norm:  # RMSNorm on q and k: fp32 input and rsqrt per head (per token: OLMo 2's whole width)
            rows = 2 if arch.qk_norm_whole else nh + arch.kv_heads
            total += self._rec(4 * (q + kv) + 4 * rows)
            if reg.full:
                total += self._rec((qb if arch.norm == "rms" else 4) * (q + kv))
        ab = c if reg.autocast else qb  # SDPA runs in the autocast dtype
        prof = reg.profile
        # A padding mask disables GQA-aware SDPA; LitGPT and torchtune expand k and v themselves.
        expanded = reg.masked or (prof.expand_kv and arch.kv_heads < nh)
        if reg.attention == "eager" and arch.attn_sinks:
            # gpt-oss: the scores with the sink column appended (torch.cat promotes to the sinks' dtype: the load
            # dtype, fp32 after prepare_model_for_kbit_training), less their row max (its int64 index saved), and a
            # softmax in that dtype over seq + 1 columns, whose sliced probabilities feed the PV matmul (a copy when
            # cast to v's dtype); q, repeat_kv'd k and v as below (measured: tests/physics/test_activations.py)
            sb = max(ab, reg.norm_weight)
            total += self._rec(ab * q, ab * q, ab * q, sb * nh * (seq + 1), 8 * nh, (ab if sb != ab else 0) * nh * seq)
            out_saved = False
        elif reg.attention == "eager":
            # q, repeat_kv'd k and v (nh heads), fp32 softmax output and its cast for the PV matmul.
            total += self._rec(ab * q, ab * q, ab * q, 4 * nh * seq, (ab if ab != 4 else 0) * nh * seq)
            if arch.attn_logit_softcap:
                total += self._rec(ab * nh * seq)  # tanh output of the soft-capped scores
            out_saved = False
        else:
            kv_saved = q if expanded else kv
            total += self._rec(ab * q, ab * kv_saved, ab * kv_saved, ab * q + 4 * nh)  # q, k, v, out, logsumexp
            if reg.masked:
                total += self._rec(ab * seq)  # SDPA's additive mask, one per layer
            # v is a view of the fused qkv output, which then stays alive whole, unless something copied it first: a
            # DynamicCache update (reg.kv_copied), autocast's cast to SDPA's dtype (ab != qb: the fp32 projections
            # after prepare_model_for_kbit_training, measured), or repeat_kv (of one group it is the tensor itself)
            fused = (arch.fused_qkv and not reg.kv_copied) or prof.keeps_fused_qkv
            if fused and ab == qb and not (expanded and arch.kv_heads < nh):
                total += self._rec(qb * (q + kv))
            out_saved = not (prof.out_proj_copy or reg.rope_cat)
        total += self._rec(self.consumers_saved(ab, q, self.by_source(ATTN_OUT), already_saved=out_saved))
        if arch.post_norms:
            total += self._rec(self.norm_saved(self.linear_out(ab), h))
        if arch.pre_norms == 1:
            mlp_in = attn_in
        else:
            if arch.pre_norms:
                total += self._rec(self.norm_saved(resid, h))
            mlp_in = self.pre_out(resid)
            total += self._rec(self.consumers_saved(mlp_in, h, self.by_source(MLP_IN), already_saved=False))
        in_kept = self.shared > 0  # the MLP's input itself is saved (not only casts of it)
        gb = self.linear_out(mlp_in)
        mid = post = 0
        product_kept = False
        if arch.experts:
            total += self._rec(self.experts(mlp_in, gb))
        else:
            if arch.gated_mlp:  # g, act(g), u; compiled graphs recompute act(g) in the backward
                total += self._rec(*[gb * inter] * (2 if reg.compiled else 3))
            else:  # what the activation saves of fc1's output (its input, and a Python formula's intermediates)
                total += self._rec(*[b * inter for b in self.act_tensors(gb)])
            mid = self._rec(self.consumers_saved(gb, inter, self.by_source(MLP_MID), already_saved=False))
            total += mid
            product_kept = self.shared > 0  # and the product, down_proj's input
        if arch.post_norms:
            post = self._rec(self.norm_saved(gb, h))
            total += post
        self.recompute_extra = max(self.recompute_extra, self.mlp_recompute_extra(
            mlp_in, gb, mid, post, (in_kept, product_kept)))
        return total

    def mlp_recompute_extra(self, mlp_in: int, gb: int, after_product: int, post: int, kept: tuple[bool, bool]) -> int:
        """A checkpointed layer's recomputation, per token above all the layer saves, at the LoRA adds of a gated MLP
        (0: not above). At an adapted projection lora_B's output and its scaled copy are alive beside the base output,
        and so is PEFT's cast of the input to the adapters' dtype (fp32 adapters: held by forward's local x until it
        returns); the residual stream after attention is alive too (bf16: the norm saved an fp32 copy of it). At the
        fused gate_up_proj or up_proj (the second of Llama's down(act(gate(x)) * up(x))) the later saves are not made
        yet (act(gate) after the fused one, the product's); at down_proj its base output is alive, and the
        recomputation stops as lora_B's matmul saves its inputs, the layer's last save (torch.utils.checkpoint's early
        stop; autograd saves inputs before the op runs), unless a norm on the MLP's output saves after it. An input
        only casts of which are saved (`kept` False: the MLP's input, the product) is alive unsaved meanwhile: the
        product while down_proj runs, the MLP's input (the decoder layer's local) until the MLP returns. Before a
        non-reentrant recomputation (at the first unpack) autograd has run what needs no saved tensor: the backward of
        down_proj's `* scaling` (a gradient [N, h]), or with a norm on the MLP's output that casts last (OLMo 2, Gemma
        2), that cast's backward (an fp32 [N, h] gradient).
        Measured on the CPU: tests/physics/test_layer_backward.py."""
        arch, reg = self.arch, self.reg
        if not (self.plain_lora and reg.checkpointing and arch.gated_mlp and arch.pre_norms in (0, 2)) \
                or arch.experts or reg.compiled:
            return 0
        lb = reg.compute if reg.autocast else reg.adapter  # lora_B's output and its product with the scaling
        h, inter = arch.hidden, arch.intermediate
        # without pre-norms (OLMo 2) the residual stream is the MLP's input itself, counted as that
        live = h * reg.resid - self.input_kept(reg.resid, h) if arch.pre_norms else 0
        unsaved_in = 0 if kept[0] else mlp_in * h

        def cast(x_bytes: int, width: int) -> int:  # lora.Linear._cast_input_dtype's copy
            return width * reg.adapter if self.copies_input and reg.peft_copies(x_bytes) else 0

        found = []
        ins = self.by_source(MLP_IN)
        adapted = [lin for lin in ins if lin.name in self.targets]
        if adapted:
            last = adapted[-1]  # the fused gate_up_proj, or the up projection
            after = after_product + post
            if arch.fused_gate_up:
                after += gb * inter  # act(gate)
            elif last is not ins[-1]:
                after += 2 * gb * inter  # the gate alone adapted: act(gate) and up's output come after it
            found.append(cast(mlp_in, h) + unsaved_in + 2 * last.out_features * lb + live - after)
        down = [lin for lin in self.by_source(MLP_MID) if lin.name in self.targets]
        if down:
            lora_out = 2 * h * lb - post if arch.post_norms else 0
            unsaved = unsaved_in + (0 if kept[1] else gb * inter)
            found.append(cast(gb, inter) + unsaved + h * gb + lora_out + live)
        if not found:
            return 0
        if reg.reentrant:
            pre = 0
        elif arch.post_norms:  # the cast's backward makes the fp32 gradient of the norm's output
            pre = 4 * h if arch.norm in ("rms_cast", "rms_gemma") else 0
        else:
            pre = h * lb if down else 0
        return max(max(found) + pre, 0)

    def act_tensors(self, gb: int) -> list[int]:
        """Bytes per element of each tensor the plain MLP's activation saves, its input of gb bytes."""
        arch, reg = self.arch, self.reg
        # torch.compile fuses the formula and keeps only its input; LitGPT and torchtune run F.gelu
        if arch.act_saved == 1 or reg.compiled or reg.profile.name in _OWN_MODEL_CODE:
            return [gb]
        fp32 = arch.act_fp32_cuda_autocast if reg.autocast and reg.backend == "cuda" else 0
        return [4] * fp32 + [gb] * (arch.act_saved - fp32)

    def act_backward_extra(self, gb: int) -> int:
        """Bytes per element the activation's backward holds beyond its output and input gradients (measured)."""
        if self.act_tensors(gb) == [gb]:
            return 0
        plain, cuda_autocast = self.arch.act_backward_extra
        if self.reg.autocast and self.reg.backend == "cuda" and gb < 4:
            return cuda_autocast * gb  # pow's fp32 branch of the chain
        return plain * gb

    def experts(self, mlp_in: int, gb: int) -> int:
        """Routed experts [APPROX]: per routed token the gated MLP set, its output kept by the routing
        weight multiply, and the gathered input when the experts train."""
        arch, reg = self.arch, self.reg
        experts = [lin for lin in arch.linears if lin.count > 1]
        grouped = any(grouped_experts(lin, reg) for lin in experts)
        # transformers 5's grouped_mm computes in the experts' own dtype (fp32 once prepare_model_for_kbit_training
        # has up-cast them); with PEFT's ParamWrapper on them their merged weight needs its gradient, so the gathered
        # input is kept as in full fine-tuning (measured: tests/physics/test_moe_weights.py)
        eb = kept_bytes(reg) if grouped else gb
        trains = reg.full or (grouped and any(lin.name in self.targets for lin in experts))
        if arch.attn_sinks:
            return self.clamped_experts(eb, trains)
        per_route = 3 * eb * arch.intermediate + eb * arch.hidden
        if trains:
            per_route += (eb if grouped else mlp_in) * arch.hidden + eb * arch.intermediate
        router = 4 * arch.experts * 2  # fp32 router softmax output and its top-k inputs
        return arch.experts_per_token * per_route + router

    def clamped_experts(self, eb: int, trains: bool) -> int:
        """gpt-oss's experts under grouped_mm (GptOssExperts._apply_gate, integrations/moe.py 5.24), per routed token:
        gate_up's output (the clamps keep it whole), the clamped gate, sigmoid(alpha * gate), up + 1 and the gate's
        product (the multiplies keep them), the expert's output and its routing weight (kept by the weights'
        multiply), and three int64 index vectors (the gather's, the weights' sort, the inverse sort); when the experts
        train, the gathered input, the down projection's input and the bias gather's expert ids too. Per token the
        router keeps its top-k indices and the top-k softmax, in the logits' dtype (measured:
        tests/physics/test_activations.py)."""
        arch, reg = self.arch, self.reg
        h, inter = arch.hidden, arch.intermediate
        rb = reg.compute if reg.autocast else reg.weight  # F.linear's logits and the softmax over them
        per_route = 6 * eb * inter + eb * h + rb + 3 * 8
        if trains:
            per_route += eb * h + eb * inter + 8
        # the recomputation's high-water mark, at the product feeding the down projection: the gathered gate_up
        # bias [routes, 2I] (alive until the down bias is gathered), the clamped up, histc's fp32 copy of the expert
        # ids and, non-reentrant, the routed gradient the backward made before it needed the recomputation, with the
        # gathered input and the product unsaved unless the experts train, the experts' output, its weight and the
        # inverse sort not saved yet; and per token the MLP's input and the residual stream after attention (unless
        # fp32: then the norm saved it as it is) (measured: tests/physics/test_moe_weights.py)
        routed_grad = 0 if reg.reentrant else max(eb, rb) * h
        extra = 3 * eb * inter + 4 - eb * h - rb - 8 + routed_grad + (0 if trains else eb * inter + eb * h)
        resid = 2 * h * reg.resid - self.input_kept(reg.resid, h)
        self.recompute_extra = arch.experts_per_token * extra + resid
        return arch.experts_per_token * (per_route + 8 + rb)

    def constants(self) -> tuple[int, int]:
        """(per-layer constant bytes, autocast-cached trainable weight copies per layer)."""
        reg = self.reg
        const = cached = 0
        if reg.autocast:
            adapted = frozenset(self.targets)
            for lin in self.arch.linears:
                if (not quantized_linear(lin, reg, adapted) and reg.casts(kept_bytes(reg))
                        and not grouped_experts(lin, reg)):
                    # autocast's bf16 copy of an fp32 weight (a 4-bit run's router too, up-cast by
                    # prepare_model_for_kbit_training) is saved for backward (input needs grad)
                    size = 2 * lin.params
                    const += size
                    cached += size if reg.full else 0
                if lin.name in self.targets and reg.casts_adapters:
                    size = 2 * self.r * (lin.in_features * self.has_a + lin.out_features) * lin.count
                    const += size
                    cached += size
        for lin in self.arch.linears:
            if lin.name in self.targets and grouped_experts(lin, reg):
                # PEFT's ParamWrapper adds lora_B @ lora_A to the fused expert weights through a parametrization at
                # every forward (tuners/lora/layer.py, 0.21); grouped_mm keeps that merged weight for backward
                const += lin.params * kept_bytes(reg)
        if reg.dora:
            const += sum(12 * lin.out_features for lin in self.arch.linears if lin.name in self.targets)
        if self.arch.norm == "rms_gemma":
            # Gemma's norm multiplies by (1.0 + weight.float()): that fp32 vector is saved per norm.
            const += 4 * self.arch.hidden * (self.arch.pre_norms + self.arch.post_norms)
            const += 4 * 2 * self.arch.head_dim if self.arch.qk_norm else 0
        return const, cached

    def layer0_lora_a_copies(self) -> int:
        """Autocast copies of fp32 lora_A weights fed by the layer input: not saved in layer 0 when
        that input needs no gradient (lora_A's matmul then saves only its input)."""
        reg = self.reg
        if not reg.casts_adapters or not self.has_a:
            return 0
        return sum(2 * self.r * lin.in_features for lin in self.by_source(ATTN_IN) if lin.name in self.targets)


def layer_saved(arch: Architecture, reg: Regime, trainable: Trainable, r: int, seq: int) -> LayerSaved:
    """What one decoder layer saves for backward, per token and per layer, and its layer-0 correction."""
    layer = LayerWalker(arch, reg, trainable, r, seq)
    per_token = layer.walk()
    scaled = ia3_pieces(trainable.scaled, trainable.feedforward, reg.adapter, layer.linear_out(reg.compute))  # IA3
    layer.pieces.extend(x for x in scaled if x)
    per_token += sum(scaled)
    const, cached = layer.constants()
    const += ia3_constant(trainable.scaled, trainable.feedforward, reg.adapter)
    ex = trainable.extras  # the tuner's own terms (peft_saved.saved_extras: each measured on CPU)
    base = reg.compute if reg.autocast else reg.weight  # what the tuners' casts to the base's dtype give
    # dense updates (WaveFT, FourierFT, PEANuT): built from fp32 parameters, bf16 where autocast runs their matmuls
    const += ex.dense * (reg.compute if reg.autocast else reg.adapter) + ex.fixed
    if not reg.autocast:  # VB-LoRA's and UniLoRA's built lora_A and lora_B (autocast's copies are walked as LoRA's)
        const += ex.assembled * reg.adapter
    # GLoRA's effective weight, in the base's dtype (under autocast: the compute-dtype copy its matmul reads, and the
    # copies of the A and B paths' factors their product reads)
    const += ex.weight_sized * base
    if reg.autocast:
        const += ex.autocast_copied * reg.compute
    if reg.backend != "cpu":  # FRoD's CPU-held basis and indices, copied to the GPU each forward
        const += ex.host_copied * reg.weight + ex.host_bytes
    if ex.resid_per_token:  # LN tuning: weight * x_hat.to(input dtype) keeps x_hat for the weight's gradient
        layer.pieces.append(ex.resid_per_token * reg.resid)
        per_token += ex.resid_per_token * reg.resid
    if ex.base_per_token or ex.per_sequence:  # AdaMSS's projection and subspace outputs, adaption prompt's terms
        # a sequence's prompt keys and values as bytes per token of this length (rounded up: under 1 B a token)
        kept = ex.base_per_token * base + -(-ex.per_sequence * base // seq)
        layer.pieces.append(kept)
        per_token += kept
    if ex.adapter_per_token:  # OSF's 2t-wide product: the adapters' dtype, autocast's where it runs the matmul
        kept = ex.adapter_per_token * (reg.compute if reg.autocast else reg.adapter)
        layer.pieces.append(kept)
        per_token += kept
    if ex.per_token:  # fp32 whatever autocast does (RoAd's and DEFT's multiplies promote to their fp32 parameters)
        layer.pieces.append(ex.per_token)
        per_token += ex.per_token
    delta = delta_const = 0
    if not reg.full and not reg.checkpointing:
        # No input grads into layer 0 (no enable_input_require_grads without checkpointing): its
        # input norm saves nothing and the q/k/v dropout masks are not kept.
        delta = -((layer.norm_saved(reg.resid, arch.hidden) if arch.pre_norms else 0) + layer.mask_total)
        delta_const = -layer.layer0_lora_a_copies()
    return LayerSaved(per_token=per_token, constant=const, layer0_delta_per_token=delta,
                      layer0_delta_constant=delta_const,
                      checkpoint_per_token=reg.resid * arch.hidden,
                      input_per_token=layer.input_kept(reg.resid, arch.hidden) if arch.pre_norms else layer.kept,
                      pieces=tuple(layer.pieces),
                      held_per_token=layer.held,
                      cached_weight_copies=cached * arch.layers, recompute_extra_per_token=layer.recompute_extra)
