# One decoder layer's backward, op by op: which gradients are alive together, and when saved tensors go.
#
# The autograd engine runs a layer's nodes in reverse; each node allocates its input gradients (and a
# weight's .grad), then drops the gradient it consumed and the tensors it saved. Two gradients reaching
# one tensor are summed out of place (InputBuffer::accumulate), so three are alive for that moment.
# Op order and sizes are those of torch 2.13's autograd graph of transformers 5.24's decoder layers,
# traced on CPU (tests/physics/test_layer_backward.py holds the high-water mark to the measurement).
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..arch import ATTN_IN, ATTN_OUT, MLP_IN, MLP_MID, Architecture, Linear
from .adapters import Trainable
from .backward_sinks import SinksOps
from .regime import Regime
from .weights import grouped_experts, kept_bytes


@dataclass(frozen=True)
class LayerBackward:
    peak: int  # high-water mark above the layer's saved tensors: incoming gradient and weight grads included
    events: tuple[int, ...]  # transients for the allocator replay: size > 0 mallocs, ~i frees block i


class _Layer(SinksOps):
    """The projections, MLP and attention of one layer's backward."""

    def linears(self, consumers: list[Linear], g_out: dict[str, Callable[[], int]], x_bytes: int,
                x_saved: bool) -> int:
        """Backward of the projections reading one tensor x, last-computed first (autograd runs the highest
        sequence number first); g_out: each one's output gradient (made when its turn comes, freed here).
        Returns the handle of x's summed gradient; x's shared saved copy goes with the last node saving it."""
        s, reg, n, c = self.s, self.reg, self.n, self.reg.compute
        shared = [self._shares(lin, x_bytes) for lin in consumers]
        left = sum(shared) if x_saved else 0
        grad: int | None = None
        # an fp32 x that autocast (or bitsandbytes' compute dtype) cast for the matmul: each gradient comes back in
        # the compute dtype and the cast's backward makes it fp32 (measured: tests/physics/test_layer_backward.py)
        gx = x_bytes if reg.autocast and x_bytes > c else c

        def back(p: int, width: int) -> int:
            if gx == c:
                return p
            q = s.alloc(n * width * gx)
            s.free(p)
            return q

        for lin, saves in reversed(list(zip(consumers, shared, strict=True))):
            width = lin.in_features
            g = g_out[lin.name]()
            parts: list[int] = []
            wrapped = lin.name in self.walker.targets and grouped_experts(lin, reg)
            if wrapped:  # PEFT's ParamWrapper: no lora_B(lora_A(x)) path, the experts' own weights' gradients below
                left -= saves and not reg.full
            elif lin.name in self.walker.targets:
                if self.walker.out_saved:  # VeRA: lambda_b's node runs first and frees the product it kept
                    s.release(n * lin.out_features * (c if reg.autocast else reg.adapter))
                scaled = s.alloc(n * lin.out_features * c)  # lora_B(...) * scaling
                s.alloc(self.r * lin.out_features * reg.adapter, replay=False)  # lora_B.weight.grad
                mid = s.alloc(n * self.walker.inner * c)
                s.free(scaled)
                s.release(n * self.walker.inner * c)  # lora_B's saved input: lora_A's output
                if not self.walker.frozen_a:
                    s.alloc(self.r * width * reg.adapter, replay=False)  # lora_A.weight.grad
                parts.append(back(s.alloc(n * width * c), width))
                s.free(mid)
                if not self.walker.frozen_a and not self._lora_shares(x_bytes):
                    s.release(n * width * self._lora_input(x_bytes))  # lora_A's own (cast/dropout) copy
                if reg.dropout > 0:  # dropout backward: grad * mask; the mask goes
                    d = s.alloc(n * width * c)
                    s.free(parts.pop())
                    s.release(n * width * reg.mask_bytes(self._lora_input(x_bytes)))
                    parts.append(d)
                left -= saves and not reg.full
                if x_saved and saves and left == 0:
                    s.release(n * width * x_bytes)  # lora_A's node was the last to hold x: it goes before W's turn
                    x_saved = False
            if reg.full:
                s.alloc(lin.params * reg.weight, replay=False)  # weight.grad
            parts.append(back(s.alloc(n * width * c), width))  # grad_output @ W
            if wrapped:
                # grouped_mm's gradient of the merged weight (W + lora_B @ lora_A, in the experts' dtype), made with
                # the input's, gate and up as one fused gate_up_proj (the gate's turn, the later one); the
                # parametrization's backward then turns it into lora_A's and lora_B's gradients (measured:
                # tests/physics/test_layer_backward.py)
                share = self.fused_halves.get(lin.name, 1)
                if share:
                    merged = s.alloc(share * lin.params * kept_bytes(reg))
                    s.release(share * lin.params * kept_bytes(reg))  # the saved merged weight, its node done
                    s.free(merged)
                    # then lora_A's and lora_B's gradients, once for the fused pair, whose rank is 2r (PEFT's
                    # rank_pattern: lora_A [E * 2r, h], lora_B [2I, E * 2r]; memory/adapters.py counts the same)
                    rank = self.r * share
                    s.alloc(rank * lin.count * (width + share * lin.out_features) * reg.adapter, replay=False)
            s.free(g)
            left -= saves and reg.full
            if x_saved and saves and left == 0:
                s.release(n * width * x_bytes)
            for p in parts:
                grad = p if grad is None else self.accumulate(grad, p, n * width * gx)
        assert grad is not None
        return grad

    def _lora_input(self, x_bytes: int) -> int:
        """The dtype lora_A's matmul reads x in (consumers_saved's casts)."""
        reg, cur = self.reg, x_bytes
        if reg.peft_copies(cur):
            cur = reg.adapter
        if reg.autocast and cur != reg.compute:
            cur = reg.compute
        return cur

    def _lora_shares(self, x_bytes: int) -> bool:
        reg = self.reg
        copied = reg.peft_copies(x_bytes) or reg.dropout > 0 or (
            reg.autocast and (self._lora_input(x_bytes) != x_bytes or reg.adapter_mismatch))
        return not copied

    def _shares(self, lin: Linear, x_bytes: int) -> bool:
        """Whether this projection's backward node holds x's shared saved copy."""
        reg = self.reg
        if reg.full:
            return not (reg.autocast and x_bytes != reg.compute)
        return lin.name in self.walker.targets and not self.walker.frozen_a and self._lora_shares(x_bytes)

    def mlp(self, g: int, in_bytes: int, gb: int, owned: bool = False) -> int:
        """The MLP's backward from its output gradient g (not freed, unless owned: a post-norm's input gradient, which
        goes when the down projection's node is done); returns its input's gradient."""
        s, arch, n, c = self.s, self.arch, self.n, self.reg.compute
        if arch.experts and arch.attn_sinks:
            return self.clamped_mlp(g, in_bytes, owned)
        tokens = n * arch.experts_per_token if arch.experts else n  # [APPROX] experts: routed tokens
        inter = arch.intermediate
        n0, self.n = self.n, tokens
        grouped = False  # transformers 5's fused experts (grouped_mm_experts_forward)
        if arch.experts:  # the routed experts' projections (count > 1), not the router (its own small backward)
            routed = [lin for lin in arch.linears if lin.count > 1]
            down = [lin for lin in routed if lin.feeds_from == MLP_MID][:1]
            ups = [lin for lin in routed if lin.feeds_from == MLP_IN][:2]
            grouped = bool(down) and grouped_experts(down[0], self.reg)
            if grouped and len(ups) == 2:  # one gate_up_proj
                self.fused_halves = {ups[0].name: 2, ups[1].name: 0}
        else:
            down = self.walker.by_source(MLP_MID) or [lin for lin in arch.linears if lin.feeds_from == MLP_MID][:1]
            ups = self.walker.by_source(MLP_IN) or [lin for lin in arch.linears if lin.feeds_from == MLP_IN][:2]
        mid_saved = self.reg.full or any(lin.name in self.walker.targets for lin in down)
        # else the caller's g stands for it (a zero-sized handle unless the MLP owns it)
        out_grad = self.routed_output(n, tokens) if grouped else (g if owned else None)
        gm = self.linears(down, {lin.name: lambda: s.alloc(0) if out_grad is None else out_grad for lin in down}, gb,
                          mid_saved)
        w = tokens * inter * gb
        if arch.gated_mlp and len(ups) >= 2:
            g_act, g_up = s.alloc(w), s.alloc(w)  # grad * u, grad * act(g)
            s.free(gm)
            s.release(w if self.reg.compiled else 2 * w)  # act(g) and u

            def gate() -> int:  # act's backward runs after up_proj's (lower sequence number)
                g_gate = s.alloc(w)
                s.free(g_act)
                s.release(w)  # g
                return g_gate

            outs: dict[str, Callable[[], int]] = {ups[0].name: gate, ups[1].name: lambda: g_up}
            ups = ups[:2]
        elif arch.gated_mlp and arch.fused_gate_up:  # Phi3MLP: gate and up are the halves of one output
            g_act, g_up = s.alloc(w), s.alloc(w)  # grad * up, grad * act(gate)
            s.free(gm)
            s.release(0 if self.reg.compiled else w)  # act(gate); up is a view of the fused output, still held
            g_gate = s.alloc(w)
            s.free(g_act)
            s.release(2 * w)  # the fused output: gate and up were views of it, and both their nodes are done
            g_fused = s.alloc(2 * w)  # chunk's backward: the two gradients concatenated
            s.free(g_gate)
            s.free(g_up)
            outs = {ups[0].name: lambda: g_fused}
            ups = ups[:1]
        else:
            g_pre = s.alloc(w)
            extra = self.walker.act_backward_extra(gb)
            if extra:  # a Python formula's backward, op by op: its gradients' transient peak
                s.free(s.alloc(tokens * inter * extra))
            s.free(gm)
            s.release(tokens * inter * sum(self.walker.act_tensors(gb)))  # all the activation saved
            outs = {ups[0].name: lambda: g_pre}
            ups = ups[:1]
        gx = self.linears(ups, outs, in_bytes, True)
        self.n = n0
        if tokens != n:  # [APPROX] the routed gradients scattered back to the tokens
            back = s.alloc(n * arch.hidden * c)
            s.free(gx)
            gx = back
        return gx

    def routed_output(self, n: int, routes: int) -> int:
        """transformers 5 grouped_mm_experts_forward's tail, backward, from the block's output gradient (the caller's):
        .to(dtype) after the top-k sum (fp32 under autocast), the index by the inverse sort, the routing weights'
        multiply (fp32 weights: weighted_out is fp32); returns the experts' output gradient, in their dtype
        (measured: tests/physics/test_moe_weights.py)."""
        s, h, eb = self.s, self.arch.hidden, kept_bytes(self.reg)
        up = s.alloc(n * h * 4) if self.reg.compute != 4 else None  # the sum's fp32 gradient
        expanded = s.alloc(routes * h * 4)  # expanded over the top-k, made contiguous
        if up is not None:
            s.free(up)
        zeros = s.alloc(routes * h * 4)  # index backward: zeros, then index_put
        put = s.alloc(routes * h * 4)
        s.free(zeros, expanded)
        by_w = s.alloc(routes * h * 4)  # grad * weights: the experts' output gradient, in fp32
        for_w = s.alloc(routes * h * 4)  # grad * output, reduced over h: the weights' gradient
        out = s.alloc(routes * h * eb) if eb != 4 else by_w  # to the experts' dtype
        s.free(for_w, put)
        if out != by_w:
            s.free(by_w)
        s.release(routes * h * eb + routes * 4)  # the experts' output and the weights, saved by the multiply
        return out

    def attention(self, g: int, ab: int, qb: int, owned: bool = False) -> int:
        """Attention's backward from the o_proj output gradient g (not freed); returns the gradient of its
        input (the norm's output)."""
        s, arch, reg, n = self.s, self.arch, self.reg, self.n
        q, kv, nh = arch.q_width, arch.kv_width, arch.heads
        o = self.walker.by_source(ATTN_OUT)
        # o_proj's input is SDPA's saved output unless eager attention (or a profile's copy, or a concatenated
        # RoPE output, whose layout SDPA's output follows) gives it its own
        own = reg.attention == "eager" or reg.profile.out_proj_copy or reg.rope_cat
        ga = self.linears(o, {lin.name: (lambda: g) if owned else (lambda: s.alloc(0)) for lin in o}, ab, own)
        expanded = reg.masked or (reg.profile.expand_kv and arch.kv_heads < nh)
        if reg.attention == "eager" and arch.attn_sinks:
            gq, gk, gv = self.sinks_scores(ga, ab)
        elif reg.attention == "eager":
            scores = self.ns * nh  # n * seq * heads
            cont = s.alloc(n * q * ab)  # transpose(1, 2).contiguous() backward
            s.free(ga)
            gp = s.alloc(scores * ab)  # grad of the probabilities: grad_out @ v^T
            gv = s.alloc(n * q * ab)
            s.free(cont)
            s.release(scores * (ab if ab != 4 else 0) + n * q * ab)  # the probabilities' cast and v
            if ab != 4:  # softmax(..., dtype=float32).to(q.dtype): the gradient goes back to fp32
                up = s.alloc(scores * 4)
                s.free(gp)
                gp = up
            gs = s.alloc(scores * 4)  # _softmax_backward_data
            s.free(gp)
            s.release(scores * 4)  # the fp32 softmax output
            if ab != 4:
                down = s.alloc(scores * ab)
                s.free(gs)
                gs = down
            if arch.attn_logit_softcap:  # tanh backward, then the cap's scalings
                t = s.alloc(scores * ab)
                s.free(gs)
                s.release(scores * ab)
                gs = t
            scaled = s.alloc(scores * ab)  # * scaling
            s.free(gs)
            gq, gk = s.alloc(n * q * ab), s.alloc(n * q * ab)
            s.free(scaled)
            s.release(2 * n * q * ab)
            if kv < q:  # repeat_kv backward: the groups summed back to kv heads
                gk2, gv2 = s.alloc(n * kv * ab), s.alloc(n * kv * ab)
                s.free(gk, gv)
                gk, gv = gk2, gv2
        else:
            kv_saved = q if expanded else kv
            gq, gk, gv = s.alloc(n * q * ab), s.alloc(n * kv_saved * ab), s.alloc(n * kv_saved * ab)
            if reg.backend == "cuda" and not reg.masked and ab == 2 and arch.head_dim <= 256:
                s.free(*self.flash_workspace())  # the kernel SDPA picks there (fp32: mem-efficient, not modelled)
            s.free(ga)
            s.release(n * (ab * q + 2 * ab * kv_saved + ab * q + 4 * nh))
            if kv_saved != kv:
                gk2, gv2 = s.alloc(n * kv * ab), s.alloc(n * kv * ab)
                s.free(gk, gv)
                gk, gv = gk2, gv2
        if arch.qk_norm:
            gk, gq = self.rope(gk, kv), self.rope(gq, q)
            gk, gq = self.norm(gk, kv, qb), self.norm(gq, q, qb)
        else:
            gk, gq = self.rope(gk, kv), self.rope(gq, q)
        ins = self.walker.by_source(ATTN_IN)
        names = {"q": gq, "k": gk, "v": gv}
        outs: dict[str, Callable[[], int]] = {lin.name: _const(names.get(lin.name[:1], gq)) for lin in ins}
        if len(ins) == 1:  # fused qkv: one output gradient, concatenated
            cat = s.alloc(n * (q + 2 * kv) * ab)
            s.free(gq, gk, gv)
            outs = {ins[0].name: lambda: cat}
        return self.linears(ins, outs, self.walker.pre_out(reg.resid), True)


def layer_backward(arch: Architecture, reg: Regime, tr: Trainable, r: int, seq: int, tokens: int) -> LayerBackward:
    """One middle decoder layer's backward, op by op: its high-water mark above its saved tensors
    (the incoming gradient and the layer's weight gradients included) and the allocation events."""
    la = _Layer(arch, reg, tr, r, seq, tokens)
    walk(la)
    return LayerBackward(la.s.peak, la.s.events())


def walk(la: _Layer) -> None:
    """Run one middle decoder layer's backward on la's simulator (memory/backward_trace.py runs it on symbols)."""
    s, n, h, arch, reg = la.s, la.n, la.arch.hidden, la.arch, la.reg
    resid, c = reg.resid, reg.compute
    w = la.walker
    g0 = s.alloc(n * h * resid, replay=False)  # the gradient of the layer's output
    attn_in = w.pre_out(resid)
    qb = w.linear_out(attn_in)
    ab = c if reg.autocast else qb
    mlp_in = attn_in
    gb = w.linear_out(mlp_in)
    if arch.pre_norms == 1:  # one norm feeds attention and MLP in parallel (GPT-J, Phi, Falcon style)
        gm = la.mlp(g0, mlp_in, gb)
        ga = la.attention(g0, ab, qb)
        gx = la.norm(la.accumulate(gm, ga, n * h * c), h, resid)
        la.accumulate(g0, gx, n * h * resid)
        return
    # without pre-norms (OLMo 2) the projections' input gradients are the residual stream's
    pre: Callable[[int], int] = (lambda g: la.norm(g, h, resid)) if arch.pre_norms else (lambda g: g)
    g_mlp = la.norm(s.alloc(0), h, gb) if arch.post_norms else g0
    gx2 = pre(la.mlp(g_mlp, mlp_in, gb, owned=g_mlp != g0))
    if g_mlp != g0:
        s.free(g_mlp)
    g1 = la.accumulate(g0, gx2, n * h * resid)
    g_attn = la.norm(s.alloc(0), h, ab) if arch.post_norms else g1
    gx = pre(la.attention(g_attn, ab, qb, owned=g_attn != g1))
    if g_attn != g1:
        s.free(g_attn)
    la.accumulate(g1, gx, n * h * resid)  # the layer input's gradient: freed by the next layer's backward


def _const(h: int) -> Callable[[], int]:
    return lambda: h


def head_norm_backward(arch: Architecture, reg: Regime, tr: Trainable, r: int, seq: int, tokens: int) -> int:
    """The final norm's backward after the LM head's: the head input's gradient and the norm's fp32
    transients, above the saved tensors (the decoder's are all still alive)."""
    la = _Layer(arch, reg, tr, r, seq, tokens)
    head_norm_walk(la)
    return la.s.peak


def head_norm_walk(la: _Layer) -> None:
    """Run head_norm_backward's ops on la's simulator (memory/backward_trace.py runs them on symbols)."""
    g = la.s.alloc(la.n * la.arch.hidden * la.walker.norm_out(la.reg.resid))
    la.norm(g, la.arch.hidden, la.reg.resid)
