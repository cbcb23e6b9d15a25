# Searches over a monotone-ish integer function: the largest value that still fits, from a guess.
from __future__ import annotations

from collections.abc import Callable

from .memory.allocator import ALLOC_ROUND


def _settle(ok: Callable[[int], bool], guess: int, high: int) -> int:
    """Largest n in [0, high] with ok(n), for an ok that holds up to some n and not after (ok(0) holds),
    found by galloping from `guess` and bisecting: a few evaluations when the guess is close."""
    guess = min(max(guess, 0), high)
    step = 1
    if ok(guess):
        lo, hi = guess, guess + 1
        while hi <= high and ok(hi):
            lo, step = hi, step * 2
            hi = lo + step
        hi = min(hi, high + 1)
    else:
        hi, lo = guess, guess - 1
        while lo > 0 and not ok(lo):
            hi, step = lo, step * 2
            lo = max(lo - step, 0)
    while hi - lo > 1:  # ok(lo), not ok(hi) (hi = high + 1: beyond the range)
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _bracketed(value: Callable[[int], int], limit: int, a: int, b: int, v: int,
               one_side: Callable[[int, int], int]) -> int:
    """The largest a with value(a) <= limit < value(a + 1) inside the bracket (a, b) from the first probe v: once
    both ends are probed, interpolation between them, each guess that does not halve the bracket followed by a
    bisection; before that the next probe is one_side(v, value(v)) (the caller's rule, kept inside the bracket)."""
    va: int | None = None
    vb: int | None = None
    bisect = False
    while b - a > 1:
        x = value(v)
        width = b - a
        if x <= limit:
            a, va = v, x
        else:
            b, vb = v, x
        if b - a <= 1:
            break
        if va is not None and vb is not None:
            nxt = (a + b) // 2 if bisect else a + (limit - va) * (b - a) // max(vb - va, 1)
            bisect = not bisect and b - a > width // 2
        else:
            nxt = one_side(v, x)
        v = min(max(nxt, a + 1), b - 1)
    return a


def _boundary(value: Callable[[int], int], limit: int, a: int, b: int, guess: int) -> int:
    """Largest v in (a, b) with value(v) <= limit, a when none, for a value non-decreasing on [a, b] with
    value(a) <= limit < value(b) (ends outside the cell stand for it): from the guess, extrapolating along
    the last two values until the limit is bracketed, then interpolating (every guess that does not halve
    the bracket followed by a bisection)."""
    last: list[int] = []  # the previous probe and its value
    step = 1

    def one_side(v: int, x: int) -> int:
        nonlocal step
        if last and last[1] != x:  # along the slope, one past the crossing
            d = (limit - x) * (v - last[0]) // (x - last[1])
            nxt = v + d + (1 if d >= 0 else -1)
        else:
            nxt = v + step if x <= limit else v - step
            step *= 2
        last[:] = v, x
        return nxt

    return _bracketed(value, limit, a, b, min(max(guess, a + 1), b - 1), one_side)


def _largest(value: Callable[[int], int], limit: int, high: int) -> int:
    """Largest n in [1, high] with value(n) <= limit for a non-decreasing value; 0 when value(1) > limit.

    Memory is close to linear in tokens, so after doubling to a bracket the next guess interpolates
    between its ends; the caching allocator's 2 MiB steps make the value a staircase, so a guess that
    fits is followed by a probe one step further. A guess that does not halve the bracket is followed
    by a bisection, which keeps the worst case within twice plain bisection.
    """
    if value(1) > limit:
        return 0
    lo, hi = 1, 2
    while hi <= high and value(hi) <= limit:
        lo, hi = hi, hi * 2
    if hi > high:
        if value(high) <= limit:
            return high
        hi = high
    bisect = False
    while hi - lo > 1:
        width = hi - lo
        v_lo, v_hi = value(lo), value(hi)
        guess = (lo + hi) // 2 if bisect else lo + (limit - v_lo) * width // max(v_hi - v_lo, 1)
        guess = min(max(guess, lo + 1), hi - 1)
        if value(guess) <= limit:
            lo = guess
            step = width * ALLOC_ROUND // max(abs(v_hi - v_lo), 1) + 1  # n per allocator step
            probe = min(lo + step, hi - 1)
            if not bisect and probe > lo:
                if value(probe) <= limit:
                    lo = probe
                else:
                    hi = probe
        else:
            hi = guess
        bisect = not bisect and hi - lo > width // 2
    return lo


def _crossing(value: Callable[[int], int], limit: int, guess: int, high: int, slope: float) -> int:
    """Some v in [0, high] with value(v) <= limit and value(v + 1) > limit (or v = high; 0: value(1) > limit),
    the one nearest a guess close to it when value is monotone: the first step along `slope` (value's increase
    per unit, from a cheaper model of it), doubling until the limit is bracketed, then interpolating inside
    the bracket (each guess that does not halve it followed by a bisection). Nothing but the bracket's ends is
    relied on, so a value that is not monotone still gets an answer with that property."""
    step = 1

    def one_side(v: int, x: int) -> int:  # to one past the crossing along the slope, at least `step` (doubling)
        nonlocal step
        d = int((limit - x) / max(slope, 1e-9))
        nxt = v + max(d + 1, step) if x <= limit else v - max(-d, step)
        step *= 2
        return nxt

    # value(0) <= limit by definition; value(high + 1) > limit: beyond the range
    return _bracketed(value, limit, 0, high + 1, min(max(guess, 1), high), one_side)
