# gpt-oss's pieces of a layer's backward, op by op: eager attention with sink logits, and the experts' clamped SwiGLU
# under grouped_mm with biases (transformers 5.24 models/gpt_oss/modeling_gpt_oss.py, integrations/moe.py).
from __future__ import annotations

from .backward_ops import Ops
from .weights import kept_bytes


class SinksOps(Ops):
    """The backward of GptOssAttention's eager scores and of GptOssMLP (memory/backward.py's _Layer uses them)."""

    def sinks_scores(self, ga: int, ab: int) -> tuple[int, int, int]:
        """eager_attention_forward's backward from the attention output's gradient ga (freed): the PV matmul, the
        sink column's slice, the softmax, the row max subtracted (its index scattered back), the concatenation (its
        sinks' gradient reduced), the scaling and the QK matmul; returns the gradients of q, k and v (kv heads)."""
        s, arch, n = self.s, self.arch, self.n
        q, kv, nh = arch.q_width, arch.kv_width, arch.heads
        sb = max(ab, self.reg.norm_weight)  # the scores' dtype after torch.cat with the sinks (activations.py)
        scores, wide = self.ns * nh, self.ns * nh + n * nh  # without and with the sink column
        cont = s.alloc(n * q * ab)  # transpose(1, 2).contiguous() backward
        s.free(ga)
        gv = s.alloc(n * q * ab)  # probabilities^T @ grad
        gp = s.alloc(scores * ab)  # grad @ v^T
        s.free(cont)
        s.release(n * q * ab + (scores * ab if sb != ab else 0))  # v repeated to every head (and the cast copy)
        if sb != ab:  # .to(v's dtype): the gradient goes back to the scores' dtype
            up = s.alloc(scores * sb)
            s.free(gp)
            gp = up
        padded = s.alloc(wide * sb)  # probs[..., :-1] backward: the sink column's zeros
        s.free(gp)
        gs = s.alloc(wide * sb)  # _softmax_backward_data
        s.free(padded)
        s.release(wide * sb)  # the softmax output
        neg = s.alloc(wide * sb)  # minus the row max: its gradient, negated and summed per row
        row = s.alloc(n * nh * sb)
        s.free(neg)
        zeros = s.alloc(wide * sb)  # max(dim) backward: scattered back at the saved index
        put = s.alloc(wide * sb)
        s.free(zeros, row)
        s.release(8 * n * nh)  # the index
        g_all = self.accumulate(gs, put, wide * sb)
        if self.reg.full:
            s.alloc(nh * sb, replay=False)  # the sinks' gradient, reduced
        if sb != ab:  # torch.cat promoted the bf16 scores: their slice goes back to ab
            down = s.alloc(scores * ab)
            s.free(g_all)
            g_all = down
        scaled = s.alloc(scores * ab)  # * scaling
        s.free(g_all)
        gq, gk = s.alloc(n * q * ab), s.alloc(n * q * ab)
        s.free(scaled)
        s.release(2 * n * q * ab)  # q and k repeated to every head
        if kv < q:  # repeat_kv backward: the groups summed back to kv heads
            gk2 = s.alloc(n * kv * ab)
            s.free(gk)
            gv2 = s.alloc(n * kv * ab)
            s.free(gv)
            gk, gv = gk2, gv2
        return gq, gk, gv

    def clamped_mlp(self, g: int, in_bytes: int, owned: bool) -> int:
        """GptOssMLP's backward from the block's output gradient g (freed only if owned): the top-k sum and the
        inverse sort, the routing weights' multiply, the down projection (grouped_mm; with full fine-tuning its
        weight's gradient and the bias gather's), the clamped SwiGLU op by op (bool masks of the clamps, the slices
        of the interleaved gate and up put back), gate_up's projection, the gather back to the tokens and the router;
        returns the MLP input's gradient."""
        s, arch, reg, n = self.s, self.arch, self.reg, self.n
        h, inter, e, full = arch.hidden, arch.intermediate, arch.experts, reg.full
        routes = n * arch.experts_per_token
        eb = kept_bytes(reg)  # grouped_mm's dtype: the experts' own
        rb = reg.compute if reg.autocast else reg.weight  # the router's logits and softmax
        wb = max(eb, rb)  # the weighted output's
        a = routes * inter * eb
        cast = s.alloc(n * h * wb) if wb != in_bytes else None  # .to(hidden dtype) backward
        expanded = s.alloc(routes * h * wb)  # the top-k sum's gradient, expanded and made contiguous
        if cast is not None:
            s.free(cast)
        zeros = s.alloc(routes * h * wb)  # the inverse sort's index backward
        put = s.alloc(routes * h * wb)
        s.free(zeros, expanded)
        s.release(8 * routes)  # the inverse sort
        g_out = s.alloc(routes * h * wb)  # grad * weights: the experts' output gradient
        g_w = s.alloc(routes * h * wb)  # grad * output, reduced over h: the weights' gradient
        g_ws = s.alloc(routes * rb)
        s.free(g_w, put)
        s.release(routes * h * eb + routes * rb)  # the experts' output and the weights, saved by the multiply
        if wb != eb:
            down_cast = s.alloc(routes * h * eb)
            s.free(g_out)
            g_out = down_cast
        if full:
            s.alloc(e * inter * h * eb, replay=False)  # down_proj's gradient
        g_mid = s.alloc(a)
        if full:
            s.release(a)  # the down projection's input
            s.free(s.alloc(e * h * eb))  # the bias gather's backward: zeros, then index_put into the gradient
            s.alloc(e * h * eb, replay=False)
        s.free(g_out)
        g_up1, g_glu = s.alloc(a), s.alloc(a)  # (up + 1) * glu
        s.free(g_mid)
        s.release(2 * a)  # up + 1 and glu
        g_gate, g_sig = s.alloc(a), s.alloc(a)  # gate * sigmoid(alpha * gate)
        s.free(g_glu)
        s.release(a)  # the clamped gate
        g_s = s.alloc(a)  # sigmoid_backward
        s.free(g_sig)
        s.release(a)  # the sigmoid's output
        g_alpha = s.alloc(a)  # * alpha
        s.free(g_s)
        g_gate = self.accumulate(g_gate, g_alpha, a)
        masks = s.alloc(routes * inter), s.alloc(routes * inter)  # up.clamp(-limit, limit): both bounds' masks
        w_up = s.alloc(a)
        s.free(*masks, g_up1)
        mask = s.alloc(routes * inter)  # gate.clamp(max=limit)
        w_gate = s.alloc(a)
        s.free(mask, g_gate)
        s.release(2 * a)  # gate_up's output, saved by the clamps
        sl_gate = s.alloc(2 * a)  # gate_up[..., ::2] and [..., 1::2] put back
        s.free(w_gate)
        sl_up = s.alloc(2 * a)
        s.free(w_up)
        g_gu = self.accumulate(sl_gate, sl_up, 2 * a)
        if full:
            s.alloc(e * h * 2 * inter * eb, replay=False)  # gate_up_proj's gradient
        g_in = s.alloc(routes * h * eb)
        if full:
            s.release(routes * h * eb)  # the gathered input
            s.free(s.alloc(e * 2 * inter * eb))  # the bias gather's backward
            s.alloc(e * 2 * inter * eb, replay=False)
        s.free(g_gu)
        if full:
            s.release(8 * routes)  # the bias gather's expert ids
        g_wi = s.alloc(routes * rb)  # the weights' sort, backward: the top-k softmax's gradient
        s.free(g_ws)
        s.release(8 * routes)  # the sort order
        zeros = s.alloc(n * h * in_bytes)  # the gather's backward: index_put (accumulated) into the tokens
        gx = s.alloc(n * h * in_bytes)
        s.free(zeros, g_in)
        s.release(8 * routes)  # the gather's index (order // top_k)
        if owned:
            s.free(g)
        g_top = s.alloc(n * arch.experts_per_token * rb)  # softmax over the top-k
        s.free(g_wi)
        s.release(n * arch.experts_per_token * rb)
        zeros = s.alloc(n * e * rb)  # topk backward: scattered into the logits
        logits = s.alloc(n * e * rb)
        s.free(zeros, g_top)
        s.release(8 * n * arch.experts_per_token)
        g_router = s.alloc(n * h * rb)  # F.linear's input gradient
        if full:
            s.alloc(e * (h + 1) * kept_bytes(reg), replay=False)  # the router's weight and bias gradients
        s.free(logits)
        if rb != in_bytes:  # autocast's cast of the router's input, backward
            up = s.alloc(n * h * in_bytes)
            s.free(g_router)
            g_router = up
        return self.accumulate(gx, g_router, n * h * in_bytes)
