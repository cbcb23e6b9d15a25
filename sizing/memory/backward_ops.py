# Elementwise pieces of a decoder layer's backward, op by op (norms, RoPE, the flash kernel's buffers), and
# the live-bytes simulator they run on (memory/backward.py walks the layer with them).
from __future__ import annotations

from ..arch import Architecture
from .activations import LayerWalker
from .adapters import Trainable
from .regime import Regime


class Sim:
    """Live bytes of one layer's backward, and the transient blocks alive at its high-water mark."""

    def __init__(self) -> None:
        self.cur = self.peak = 0
        self._sizes: list[int] = []
        self._live: dict[int, int] = {}  # replayed handles alive now, in allocation order
        self._at_peak: tuple[int, ...] = ()

    def alloc(self, size: int, replay: bool = True) -> int:
        self.cur += size
        h = len(self._sizes)
        self._sizes.append(size)
        if replay and size:
            self._live[h] = size
        if self.cur > self.peak:
            self.peak = self.cur
            self._at_peak = tuple(self._live.values())
        return h

    def free(self, *handles: int) -> None:
        for h in handles:
            self.cur -= self._sizes[h]
            self._sizes[h] = 0
            self._live.pop(h, None)

    def events(self) -> tuple[int, ...]:
        """For the allocator replay: the gradients alive together at the high-water mark, each its own
        block, allocated in order and then freed (the op-by-op list has ~60 events per layer; replaying
        them all made the estimate 4x slower, while the peak's set is what sizes the cached segments)."""
        return (*self._at_peak, *(~i for i in range(len(self._at_peak))))

    def release(self, size: int) -> None:
        """A saved tensor freed by the node that used it (the replay frees a layer's saved blocks at its end)."""
        self.cur -= size


class Ops:
    """One decoder layer's backward ops on a Sim (n tokens)."""

    def __init__(self, arch: Architecture, reg: Regime, tr: Trainable, r: int, seq: int, n: int,
                 sim: Sim | None = None, ns: int | None = None, rows: int | None = None) -> None:
        self.arch, self.reg, self.r, self.seq, self.n = arch, reg, r, seq, n
        self.walker = LayerWalker(arch, reg, tr, r, seq)
        self.s = Sim() if sim is None else sim
        # The walk's only shape-dependent sizes besides n: n * seq (attention scores) and the flash kernel's
        # padded rows (batch * seq rounded up to 128); a trace passes them as symbols (memory/backward_trace.py).
        self.ns = n * seq if ns is None else ns
        self.rows = rows
        self.fused_halves: dict[str, int] = {}  # a fused weight's gradient, counted at one half's turn (MoE)

    def accumulate(self, a: int, b: int, size: int) -> int:
        out = self.s.alloc(size)  # out-of-place sum of two gradients of one tensor
        self.s.free(a, b)
        return out

    def norm(self, g: int, width: int, in_bytes: int) -> int:
        """RMSNorm / LayerNorm backward from its output gradient g (freed); returns the input gradient."""
        s, n, arch = self.s, self.n, self.arch
        ob = self.walker.norm_out(in_bytes)
        if arch.norm == "layer":  # native_layer_norm_backward: one fused kernel, fp32 under autocast
            f = 4 if self.reg.autocast else in_bytes
            gi = s.alloc(n * width * f)
            s.free(g)
            s.release(n * width * f + 8 * n)
            if f != in_bytes:
                cast = s.alloc(n * width * in_bytes)
                s.free(gi)
                gi = cast
            return gi
        # weight * x_hat.to(dtype): grad * weight, then to fp32; x * rsqrt(var): two products, the rsqrt's
        # reduced; mean(x^2) backward: expand/div, pow, 2x, times grad; the two fp32 input grads summed.
        a = s.alloc(n * width * ob)
        x_hat = 0
        if self.reg.full:
            s.free(s.alloc(n * width * ob))  # grad * x_hat for the weight's gradient, reduced
            if not self.reg.compiled:  # the product's node is done: autograd frees its saved x_hat now
                x_hat = n * width * (in_bytes if arch.norm == "rms" else 4)
                s.release(x_hat)
        s.free(g)
        b = s.alloc(n * width * 4) if ob != 4 else a
        if b != a:
            s.free(a)
        c1 = s.alloc(n * width * 4)
        s.free(s.alloc(n * width * 4))  # grad * x for the rsqrt's gradient, reduced to [N]
        s.free(b)
        d = s.alloc(n * width * 4)
        # PowBackward's grad * (2 * x.pow(1)): its two temporaries live until the product exists
        e1, e2, e3 = s.alloc(n * width * 4), s.alloc(n * width * 4), s.alloc(n * width * 4)
        s.free(e1, e2, d)
        total = self.accumulate(c1, e3, n * width * 4)
        s.release(self.walker.norm_saved(in_bytes, width) * n - x_hat)
        if in_bytes != 4:
            cast = s.alloc(n * width * in_bytes)
            s.free(total)
            total = cast
        return total

    def rope(self, g: int, width: int) -> int:
        """apply_rotary_pos_emb backward: grad * sin through rotate_half (neg of one half, two slice_backward
        pads, summed), plus grad * cos; returns the input gradient (g freed)."""
        s, w = self.s, self.n * width * self.reg.compute
        a = s.alloc(w)
        half = s.alloc(w // 2)
        s1 = s.alloc(w)
        s.free(half)
        s2 = s.alloc(w)
        s.free(a)
        rot = self.accumulate(s1, s2, w)
        out = self.accumulate(rot, s.alloc(w), w)
        s.free(g)
        cont = s.alloc(w)  # transpose(1, 2) undone: contiguous for the projection's matmul
        s.free(out)
        return cont

    def flash_workspace(self) -> tuple[int, ...]:
        """FlashAttention-2's backward on CUDA (PyTorch flash_api.cpp mha_bwd, the same in flash-attn):
        fp32 softmax_d [B, nh, S_128] and dq_accum [B, S_128, nh, d_32|64], and with fewer kv heads the
        dk/dv of every query head before they are summed into the groups; all freed when it returns.
        (The CPU kernel's buffers are internal to it: the physics tests cannot see them.)"""
        arch, s, rows = self.arch, self.s, self.rows
        if rows is None:
            rows = -(-self.n // self.seq) * (-(-self.seq // 128) * 128)  # batch * seq rounded up to 128
        nh, d = arch.heads, arch.head_dim
        d_acc = -(-d // (32 if d <= 128 else 64)) * (32 if d <= 128 else 64)
        out = [s.alloc(4 * nh * rows), s.alloc(4 * rows * nh * d_acc)]
        if arch.kv_heads < nh:
            out += [s.alloc(self.n * nh * d * self.reg.compute), s.alloc(self.n * nh * d * self.reg.compute)]
        return tuple(out)
