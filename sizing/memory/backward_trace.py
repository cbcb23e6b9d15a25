# The op-by-op backward walk run once per configuration on symbols, then evaluated per shape (perf).
#
# At a fixed model, method and regime the walk's control flow does not depend on the shape: every size it
# allocates or frees is an integer linear combination of five shape features, F = (1, n, n*seq, rows, seq)
# (n tokens, rows the flash kernel's padded rows), and the only shape-dependent decision is which moment
# is the high-water mark. Running the walk once with `Sym` values gives every moment's live total and live
# transients as coefficient vectors; a shape then costs a few dot products instead of ~100 simulated ops.
# Exact (integers, same first-maximum rule as Sim); tests/unit/test_backward_trace.py holds it to the walk.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import NoReturn

from ..arch import Architecture
from .activations import LayerSaved, layer_saved
from .adapters import Trainable
from .backward import LayerBackward, _Layer, head_norm_backward, head_norm_walk, layer_backward, walk
from .backward_ops import Sim
from .regime import Regime

Coef = tuple[int, int, int, int, int]


class Inexact(Exception):
    """An operation the linear form cannot represent exactly: the caller walks concretely instead."""


class Sym(int):
    """An integer linear in the shape features F (coefficients c): int only so the walk's int-typed code
    accepts it; every operation the walk may apply is overridden, anything else raises Inexact."""

    c: Coef

    def __new__(cls, c: Coef) -> Sym:
        self = super().__new__(cls, 0)
        self.c = c
        return self

    def __add__(self, o: int) -> Sym:
        a = self.c
        if isinstance(o, Sym):
            b = o.c
            return Sym((a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4]))
        return Sym((a[0] + int(o), a[1], a[2], a[3], a[4]))

    __radd__ = __add__

    def __neg__(self) -> Sym:
        return Sym((-self.c[0], -self.c[1], -self.c[2], -self.c[3], -self.c[4]))

    def __sub__(self, o: int) -> Sym:
        return self + -o

    def __rsub__(self, o: int) -> Sym:
        return -self + o

    def __mul__(self, k: int) -> Sym:
        if isinstance(k, Sym):
            raise Inexact("a product of two shape-dependent sizes")
        k = int(k)
        return Sym((self.c[0] * k, self.c[1] * k, self.c[2] * k, self.c[3] * k, self.c[4] * k))

    __rmul__ = __mul__

    def __floordiv__(self, k: int) -> Sym:
        if isinstance(k, Sym) or k == 0 or any(x % k for x in self.c):
            raise Inexact("a division that does not divide every coefficient")
        return Sym((self.c[0] // k, self.c[1] // k, self.c[2] // k, self.c[3] // k, self.c[4] // k))

    def __bool__(self) -> bool:
        return any(self.c)

    def __eq__(self, o: object) -> bool:
        if isinstance(o, Sym):
            return self.c == o.c
        return isinstance(o, int) and self.c == (o, 0, 0, 0, 0)

    def __ne__(self, o: object) -> bool:
        return not self == o

    def __hash__(self) -> int:
        return hash(self.c)

    def _inexact(self, *_: object) -> NoReturn:
        raise Inexact("an operation outside the linear form")

    __lt__ = __le__ = __gt__ = __ge__ = _inexact  # a shape-dependent decision: not representable
    __truediv__ = __rtruediv__ = __rfloordiv__ = __mod__ = __rmod__ = __divmod__ = __rdivmod__ = _inexact
    __pow__ = __rpow__ = __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _inexact
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = __abs__ = __pos__ = _inexact
    __int__ = __float__ = __index__ = __round__ = __trunc__ = __floor__ = __ceil__ = _inexact


def _coef(x: int) -> Coef:
    return x.c if isinstance(x, Sym) else (int(x), 0, 0, 0, 0)


class _Tracer(Sim):
    """Sim that records, at every allocation (where Sim checks its high-water mark), the live total and the
    live replayed transients, instead of comparing them. Sim keeps the first moment whose total strictly
    exceeds every earlier one (and 0); with features >= 0 a moment no larger in every coefficient than an
    earlier one (or than 0) never does, so it is not recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.moments: list[tuple[Coef, tuple[Coef, ...]]] = []

    def alloc(self, size: int, replay: bool = True) -> int:
        self.cur += size
        h = len(self._sizes)
        self._sizes.append(size)
        if replay and size:
            self._live[h] = size
        cur = c0, c1, c2, c3, c4 = _coef(self.cur)
        if c0 <= 0 and c1 <= 0 and c2 <= 0 and c3 <= 0 and c4 <= 0:
            return h
        for (k0, k1, k2, k3, k4), _ in self.moments:
            if k0 >= c0 and k1 >= c1 and k2 >= c2 and k3 >= c3 and k4 >= c4:
                return h
        self.moments.append((cur, tuple(_coef(x) for x in self._live.values())))
        return h


class LayerTrace:
    """One configuration's layer backward as a function of the shape: layer_backward(.., seq, n) exactly."""

    def __init__(self, moments: list[tuple[Coef, tuple[Coef, ...]]], args: tuple[Architecture, Regime,
                 Trainable, int]) -> None:
        # at() runs with every feature >= 1: a moment that a later one exceeds in some coefficient and
        # matches in the others is below it at every shape, so never the (first) maximum either.
        def below(m: Coef, k: Coef) -> bool:
            return m != k and all(a <= b for a, b in zip(m, k, strict=True))

        self.moments = [(m, live) for i, (m, live) in enumerate(moments)
                        if not any(below(m, k) for k, _ in moments[i + 1:])]
        self.args = args

    def at(self, seq: int, n: int) -> LayerBackward:
        """layer_backward(*args, seq, n), from the trace (shapes with n, seq >= 1; others walk concretely)."""
        if n < 1 or seq < 1:
            return layer_backward(*self.args, seq, n)
        ns, rows = n * seq, -(-n // seq) * (-(-seq // 128) * 128)  # the features, as _Layer computes them
        best, at_peak = 0, ()  # type: int, tuple[Coef, ...]
        for (c0, c1, c2, c3, c4), live in self.moments:
            v = c0 + c1 * n + c2 * ns + c3 * rows + c4 * seq
            if v > best:
                best, at_peak = v, live
        sizes = [x for x in (a0 + a1 * n + a2 * ns + a3 * rows + a4 * seq for a0, a1, a2, a3, a4 in at_peak) if x]
        return LayerBackward(best, (*sizes, *(~i for i in range(len(sizes)))))


def _symbolic(run: Callable[[_Layer], object], arch: Architecture, reg: Regime, tr: Trainable,
              r: int) -> LayerTrace | None:
    """`run` (a walk over one layer's ops) once on the shape's symbols; None when it is not linear in them."""
    sim = _Tracer()
    n, ns, rows, seq = Sym((0, 1, 0, 0, 0)), Sym((0, 0, 1, 0, 0)), Sym((0, 0, 0, 1, 0)), Sym((0, 0, 0, 0, 1))
    try:
        run(_Layer(arch, reg, tr, r, seq, n, sim=sim, ns=ns, rows=rows))
    except Inexact:
        return None
    return LayerTrace(sim.moments, (arch, reg, tr, r))


def layer_trace(arch: Architecture, reg: Regime, tr: Trainable, r: int) -> LayerTrace | None:
    """The layer backward walked once on the shape's symbols; None when the walk is not linear in them."""
    return _symbolic(walk, arch, reg, tr, r)


class Walk:
    """One configuration's layer backward by shape: walked op by op for the first shapes asked, traced once a
    third asks (a trace costs ~10 walks; the fewest-GPUs probes ask one or two shapes per configuration).
    The trace must reproduce the walks already made, or it is dropped: C-level uses of an int (indexing,
    range) would read a Sym as 0 without raising."""

    def __init__(self, arch: Architecture, reg: Regime, tr: Trainable, r: int) -> None:
        self.args = arch, reg, tr, r
        self.walked: list[tuple[int, int, LayerBackward]] = []
        self.trace: LayerTrace | None = None

    def at(self, seq: int, n: int) -> LayerBackward:
        """layer_backward(arch, reg, tr, r, seq, n)."""
        if self.trace is None and len(self.walked) == 2:
            trace = layer_trace(*self.args)  # None: not linear in the shape, walked every time
            if trace is not None and all(trace.at(s, k) == lb for s, k, lb in self.walked):
                self.trace = trace
            self.walked.append((0, 0, LayerBackward(0, ())))  # tried once: never again
        if self.trace is not None:
            return self.trace.at(seq, n)
        got = layer_backward(*self.args, seq, n)
        if len(self.walked) < 2:
            self.walked.append((seq, n, got))
        return got


class HeadNorm:
    """head_norm_backward(arch, reg, tr, r, seq, n) by shape, as Walk: walked for the first two shapes, then the ops
    traced once on the shape's symbols and kept if they reproduce both walks (a third of a _step: perf)."""

    def __init__(self, arch: Architecture, reg: Regime, tr: Trainable, r: int) -> None:
        self.args = arch, reg, tr, r
        self.walked: list[tuple[int, int, int]] = []
        self.trace: LayerTrace | None = None

    def at(self, seq: int, n: int) -> int:
        """head_norm_backward(arch, reg, tr, r, seq, n)."""
        if self.trace is None and len(self.walked) == 2:
            trace = _head_norm_trace(*self.args)
            if trace is not None and all(trace.at(s, k).peak == peak for s, k, peak in self.walked):
                self.trace = trace
            self.walked.append((0, 0, 0))  # tried once: never again
        if self.trace is not None and n >= 1 and seq >= 1:
            return self.trace.at(seq, n).peak
        got = head_norm_backward(*self.args, seq, n)
        if len(self.walked) < 2:
            self.walked.append((seq, n, got))
        return got


def _head_norm_trace(arch: Architecture, reg: Regime, tr: Trainable, r: int) -> LayerTrace | None:
    """head_norm_walk on the shape's symbols (LayerTrace's moments: its at() gives the peak); None when not linear."""
    return _symbolic(head_norm_walk, arch, reg, tr, r)


_SAVED_FIELDS = tuple(f.name for f in fields(LayerSaved))


def _at_seq(x: int, seq: int) -> int:
    if isinstance(x, Sym):
        c = x.c
        if c[1] or c[2] or c[3]:
            raise Inexact("layer_saved depends on more than the sequence length")
        return c[0] + c[4] * seq
    return x


class SavedBySeq:
    """layer_saved(arch, reg, tr, r, seq) for every seq: the forward walk run once on the sequence symbol
    (what a layer saves is linear in seq: eager scores, the padding mask), from the third length asked, and
    checked against the two walked before it (as Walk)."""

    def __init__(self, arch: Architecture, reg: Regime, tr: Trainable, r: int) -> None:
        self.args = arch, reg, tr, r
        self.walked: list[tuple[int, LayerSaved]] = []
        self.sym: LayerSaved | None = None

    def _eval(self, sym: LayerSaved, seq: int) -> LayerSaved:
        values = {name: _at_seq(getattr(sym, name), seq) for name in _SAVED_FIELDS if name != "pieces"}
        pieces = tuple(v for v in (_at_seq(x, seq) for x in sym.pieces) if v)  # the walk keeps the non-zero
        return LayerSaved(**values, pieces=pieces)

    def at(self, seq: int) -> LayerSaved:
        """layer_saved(arch, reg, tr, r, seq)."""
        if self.sym is None and len(self.walked) == 2:
            try:
                sym = layer_saved(*self.args, Sym((0, 0, 0, 0, 1)))
                if all(self._eval(sym, s) == ls for s, ls in self.walked):
                    self.sym = sym
            except Inexact:
                pass
            self.walked.append((0, self.walked[0][1]))  # tried once: never again
        if self.sym is not None and seq >= 1:
            return self._eval(self.sym, seq)
        got = layer_saved(*self.args, seq)
        if len(self.walked) < 2:
            self.walked.append((seq, got))
        return got
