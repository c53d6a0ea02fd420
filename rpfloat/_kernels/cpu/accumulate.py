"""Kernels that round exact results of arithmetic, and rounded accumulation.

Private: they see only float64 arrays and integers and never validate.

Why a residual
--------------
``fl(x op y)`` (float64) followed by a rounding onto a format is a double rounding.
For round-to-nearest it is harmless when ``53 >= 2p + 2`` (p: the format's
precision); for the directed modes it is wrong in every format: ``1 + 2**-60``
rounded ``up`` onto bfloat16 must give ``1 + 2**-7``, but ``fl`` already gives 1.
So the kernels carry the exact result as an unevaluated pair ``z = s + r`` with
``s = fl(z)`` and ``|r| <= ulp(s) / 2`` -- from the error-free transformations
``two_sum`` (Knuth) and ``two_product`` (Dekker, Veltkamp splitting; numpy has no
fma) -- and :func:`round_exact` rounds ``z`` itself:

* ``r == 0``: round ``s``.
* directed modes: ``z`` lies strictly between ``s`` and its float64 neighbour ``t``
  on ``r``'s side, and no value of the format (a subset of float64) lies between
  them; ``down(z) = down(min(s, t))``, ``up(z) = up(max(s, t))``.
* ``odd``: round the one of ``s``, ``t`` whose last significand bit is odd (the
  round-to-odd value of ``z`` at 53 bits); it is never a value of a coarser grid,
  and where the grids coincide its code is odd.
* nearest modes: ``s`` rounds like ``z`` unless ``s`` is exactly a midpoint of the
  format (then ``t``, on ``z``'s side of it, rounds like ``z``), or ``s`` and ``t``
  are both values and ``z`` is their float64 midpoint (only formats as fine as
  float64 there; ``nearest_away`` then takes the larger magnitude).
* ``stochastic``: the neighbours ``A < |z| < B`` come from the kernel; the threshold
  ``floor((|z| - A) / (B - A) * 2**rand_bits)`` is computed exactly from ``s - A``
  and ``r`` (both scaled by a power of two), so the probability is exactly the
  one ``rp.round`` would use for ``z``.

Limits (documented in ``rpfloat.array``): the residual is exact while no step
overflows or underflows float64 -- operands below ``2**995`` in magnitude for the
split, products and quotients above ``2**-969``; outside that (only formats with a
float64-sized exponent range get there) the float64 result is rounded. Under the
fixed-point ``"wrap"`` policy, out-of-range nearest midpoints and stochastic
results are rounded from ``s`` (round-to-odd) as well. (Exact sums of many terms
first drop whole words there, `wrap_digits`, so that their remainder rounded to odd
keeps the low bits that decide the wrapped code.)

Accumulation order and random numbers
-------------------------------------
:func:`accumulate` reduces the last axis of ``a`` against the middle axis of ``b``
(``out[g, i, j] = sum_k a[g, i, k] * b[g, k, j]``), or the last axis of ``a`` alone
(``kind == SUM``). A term is ``a`` (SUM), the product rounded onto the product
format (PRODUCT), or the exact product (FUSED: ``acc + a*b`` is the three-term
exact sum ``acc + p + e`` of ``two_product``, brought to ``s + r`` by two_sum and
a round-to-odd addition of the low parts, which keeps every rounding of it
correct; Boldo & Melquiond, "Emulation of FMA and correctly rounded sums", 2008).
Every value held in the accumulator is a value of the accumulator format:

* sequential: ``acc = round(term_0)``, then ``acc = round(acc + term_k)``;
* pairwise: every term is rounded into the accumulator, then neighbours are added
  and rounded level by level (``(v0+v1), (v2+v3), ...``), an odd last value moving
  up a level unchanged. The kernel builds that same tree streaming, with a stack:
  after term ``k`` it merges once per trailing one bit of ``k``; the partial sums
  left at the end are merged smallest first.

Output ``o`` (C-order flat index of ``out``) with ``n`` terms draws its random
numbers from counters ``3 n o + c``: ``c = 3k`` rounds product ``k``,
``c = 3k + 1`` rounds term ``k`` into the accumulator (sequential: ``k = 0``
only), and ``c = 3t + 2`` rounds the ``t``-th addition, counted from 0 in the order
the kernel performs them (sequential: the addition of term ``k`` is ``t = k - 1``;
pairwise: the streaming order above).

Kahan's compensated summation (:func:`accumulate_kahan`): ``acc = round(term_0)``,
``c = 0``, then ``y = round(term_k - c)``, ``s = round(acc + y)``,
``d = round(s - acc)``, ``c = round(d - y)``, ``acc = s``, every rounding onto the
accumulator format. A FUSED ``term_k - c`` is the three-term exact sum
``p + e - c``, summed exactly (below). Output ``o`` draws counters ``5 n o + 5k + c``
for term ``k``: ``c = 0`` rounds the product (PRODUCT), ``c = 1`` rounds ``y`` (for
``k = 0``: the term into the accumulator), ``c = 2`` rounds ``s``, ``c = 3`` rounds
``d`` and ``c = 4`` rounds ``c``.

Blocks (:func:`accumulate_blocks`, sequential order): the exact products of terms
``k0 .. k0 + block_k - 1`` (``p + e`` of ``two_product``; products are never
rounded on their own) and the accumulator are summed exactly, in integers
(:func:`exact_add`), and the sum is rounded once: ``acc = round(acc + sum)``, the
first block ``acc = round(sum)``. The exact sum ``z`` is handed to
:func:`round_exact` as ``s = fl(z)`` (nearest even, from the integer bits) and the
remainder ``z - s`` rounded to odd onto float64 (:func:`exact_pair`): that keeps
its sign, its exact ties and, for accumulator formats of up to 42 significant bits
(``2**64`` thresholds below the remainder's last bit), the exact stochastic
threshold; above that a stochastic probability may move by ``2**-53`` of the
spacing. A block's rounding draws the counter sequential order gives its first
term: ``3 n o + 1`` for the first block, ``3 n o + 3 k0 - 1`` for the block that
starts at term ``k0``; so ``block_k=1`` is the FUSED sequential order, bit for bit.
Summands that are inf or NaN make the block's result their float64 sum (rounded);
an exact sum that float64 rounds to inf is taken as inf, as a float64 sum would be;
a zero sum is +0 unless every summand is -0.
"""
import functools
import math

import numpy as np
from numba import njit, types

from ..core.bits import (
    NUMBA_OPTIONS, bits_to_float64, float32_to_bits, float64_to_bits, fused_multiply_add, wrapping_add,
)
from ..core.layout import (
    DOWN,
    P_BELOW_QUANTUM_BITS,
    P_FAST_DROP_MIN,
    P_FAST_DROP_OFFSET,
    P_FAST_HIGH_BITS,
    P_FAST_LOW_RANDOM_BITS,
    P_MAX_NEG_BITS,
    P_MAX_POS_BITS,
    P_MIN_NORMAL_BITS,
    P_OVERFLOW,
    P_SCALE_BITS,
    P_WORD_BITS,
    NEAREST,
    NEAREST_AWAY,
    OVERFLOW_WRAP,
    ODD,
    PARAMS_TYPE,
    STOCHASTIC,
    STOCHASTIC_EQUAL,
    TOWARD_ZERO,
    UP,
)
from ..core.element import round_bits
from ..core.stream import LOW_32, U32_32, counter_bits, random_bits, segment_keys

# Kinds of term for `accumulate`.
SUM, PRODUCT, FUSED = range(3)

ABS_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
SIGN_BIT = np.int64(-0x8000000000000000)
INF_BITS = np.int64(0x7FF0000000000000)
VELTKAMP = float.fromhex("0x1.0000002p+27")  # 2**27 + 1 splits a float64 in halves
TWO_TO_64 = float.fromhex("0x1p+64")
TINY = float.fromhex("0x0.0000000000001p-1022")  # smallest subnormal
U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
U64_ZERO = np.uint64(0)
U64_64 = np.uint64(64)
U64_63 = np.uint64(63)
U64_ONE = np.uint64(1)
MIDPOINTS_TYPE = types.UniTuple(types.float64, 2)
# Typed (not literal) constants: round_value compiles for one signature only.
MODE_TOWARD_ZERO = np.int64(TOWARD_ZERO)
MODE_UP = np.int64(UP)
MODE_DOWN = np.int64(DOWN)
ALL_BITS = np.int64(64)


@njit(inline="always", **NUMBA_OPTIONS)
def two_sum(a, b):
    """``(s, r)`` with ``s = fl(a + b)`` and ``s + r == a + b`` exactly (Knuth)."""
    s = a + b
    b_virtual = s - a
    a_virtual = s - b_virtual
    return s, (a - a_virtual) + (b - b_virtual)


@njit(inline="always", **NUMBA_OPTIONS)
def _split(a):
    c = VELTKAMP * a
    high = c - (c - a)
    return high, a - high


@njit(inline="always", **NUMBA_OPTIONS)
def two_product(a, b):
    """``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly (Dekker)."""
    p = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    e = ((a_high * b_high - p) + a_high * b_low + a_low * b_high) + a_low * b_low
    if not math.isfinite(e):  # an operand past 2**995 (the split overflows), or p itself not finite
        e = 0.0  # the float64 product is rounded (module docstring)
    return p, e


@njit(inline="always", **NUMBA_OPTIONS)
def add_to_odd(a, b):
    """``a + b`` rounded to odd: ``fl(a + b)``, moved one step toward the exact sum
    when inexact and its last bit is even."""
    s, r = two_sum(a, b)
    if r != 0.0:
        bits = float64_to_bits(s)
        if (bits & 1) == 0:
            away = (r > 0.0) != (bits < 0)
            s = bits_to_float64(bits + 1 if away else bits - 1)
    return s


def _compiled_at_first_call(signature):
    """``njit(signature)``, compiled when first called rather than at import, so that
    ``import rpfloat`` does not pay for kernels a program never uses (``cache=True``
    still lets later processes load them)."""

    def decorate(py_func):
        compiled = []

        @functools.wraps(py_func)
        def kernel(*args):
            if not compiled:
                compiled.append(njit(signature, **NUMBA_OPTIONS)(py_func))
            return compiled[0](*args)

        return kernel

    return decorate


# ``round_bits`` is compiled twice here and called rather than inlined at each site:
# every inlined copy costs seconds of compilation, and inlining made the loops below
# no faster. Called only from the kernels below, which fix the argument types
# (int64, params, int64, uint64, int64): one compilation each.
@njit(**NUMBA_OPTIONS)
def round_value(bits, params, mode, random, rand_bits):
    """``round_bits`` for every format (its rare paths included)."""
    return round_bits(bits, params, mode, random, rand_bits, True)


@njit(**NUMBA_OPTIONS)
def round_common(bits, params, mode, random, rand_bits):
    """``round_bits`` without its rare paths (formats reaching below float64's normal
    range, fixed-point wrap), which make every call slower; see
    ``rpfloat.accumulate.rounding_setup`` for when they are needed."""
    return round_bits(bits, params, mode, random, rand_bits, False)


@njit(inline="always", **NUMBA_OPTIONS)
def _toward_zero(magnitude, sign, params):
    """Magnitude of the format value next to ``sign | magnitude`` toward zero."""
    return bits_to_float64(round_value(magnitude | sign, params, MODE_TOWARD_ZERO, U64_ZERO, ALL_BITS) & ABS_MASK)


@njit(inline="always", **NUMBA_OPTIONS)
def _away_from_zero(magnitude, sign, params):
    """Magnitude of the format value next to ``sign | magnitude`` away from zero
    (inf or NaN when it overflows, max when saturated)."""
    mode = MODE_DOWN if sign != 0 else MODE_UP
    return bits_to_float64(round_value(magnitude | sign, params, mode, U64_ZERO, ALL_BITS) & ABS_MASK)


@njit(inline="always", **NUMBA_OPTIONS)
def _is_value(magnitude, sign, params):
    """Whether ``sign | magnitude`` (float64 bits) is a value of the format."""
    return _toward_zero(magnitude, sign, params) == bits_to_float64(magnitude)


@njit(inline="always", **NUMBA_OPTIONS)
def _nearest_pick(magnitude, other, upper, residual, params, midpoints, mode, sign):
    """The float64 (bits, sign-less) that rounds to nearest like ``|s + r|``."""
    value = bits_to_float64(magnitude)
    lower_value = _toward_zero(magnitude, sign, params)
    if lower_value == value:
        # s is a value: only a float64 tie between two values needs a rule
        if mode == NEAREST_AWAY and _is_value(other, sign, params):
            if 2.0 * abs(residual) == abs(bits_to_float64(other) - value):
                return upper
        return magnitude
    upper_value = _away_from_zero(magnitude, sign, params)
    if lower_value <= value <= upper_value and upper_value < math.inf:
        if value - lower_value == upper_value - value:
            return other
    elif value == midpoints[1 if sign != 0 else 0]:  # past max (up to inf, where the format has it)
        return other
    return magnitude


@njit(inline="always", **NUMBA_OPTIONS)
def _stochastic_up(magnitude, lower_value, upper_value, residual_up, random, rand_bits):
    """Whether stochastic rounding of ``|z| = |s| + residual_up`` between the format
    values ``lower_value < |z| < upper_value`` goes up, drawing ``random``:
    ``drawn < floor((|z| - lower) / (upper - lower) * 2**rand_bits)``, exactly."""
    spacing = upper_value - lower_value  # a power of two
    scale_exp = rand_bits - (math.frexp(spacing)[1] - 1)
    head = math.ldexp(bits_to_float64(magnitude) - lower_value, scale_exp)
    tail = math.ldexp(residual_up, scale_exp)
    if tail == 0.0:
        tail = math.copysign(TINY, residual_up)  # underflowed: only its sign counts
    high, low = two_sum(head, tail)
    floor_high = np.floor(high)
    if floor_high != high:
        whole, extra = floor_high, 0.0  # |low| cannot reach the next integer
    else:
        whole, extra = high, np.floor(low)
    # threshold = whole + extra, an integer in [0, 2**rand_bits)
    if whole >= TWO_TO_64:
        threshold = U64_MAX - np.uint64(-(extra + 1.0))
    elif extra >= 0.0:
        threshold = np.uint64(whole) + np.uint64(extra)
    else:
        threshold = np.uint64(whole) - np.uint64(-extra)
    drawn = random >> (U64_64 - np.uint64(rand_bits))
    return drawn < threshold


@njit(**NUMBA_OPTIONS)
def round_exact(value, residual, params, midpoints, mode, random, rand_bits):
    """Round the exact ``value + residual`` onto the format of `params` (float64
    carrier parameters), where ``value = fl(value + residual)``.

    `midpoints` are the magnitudes halfway between ``max`` (positive, negative) and
    the next value of the unbounded-exponent grid, or -1.0 where a float64 cannot
    hold them (then no float64 is one)."""
    if params[P_OVERFLOW] == OVERFLOW_WRAP and residual != 0.0 and math.isfinite(value + residual):
        return _round_wrapping(value, residual, params, mode, random, rand_bits)
    return _round_pair(value, residual, params, midpoints, mode, random, rand_bits)


@njit(**NUMBA_OPTIONS)
def _round_wrapping(value, residual, params, mode, random, rand_bits):
    """`round_exact` for fixed-point wrap (`residual` nonzero): the exact ``z =
    value + residual`` rounded onto the grid of steps, the integer of steps then
    wrapped modulo 2**w by the last rounding. The grid's neighbours of z are
    counted in steps here, not taken from the format, whose range would wrap them.

    Whole moduli leave z first, and z keeps its sign, so that no mode decides
    otherwise: the value's remainder (fmod: exact, of the value's sign) moved one
    modulus further out (exact: its bits lie on the value's ulp, at least the
    modulus's), plus the residual's remainder (at most half an ulp of the large
    value, it may span many moduli) lies strictly between 0 and three moduli of
    z's sign. That changes z by a whole number of moduli, an even number of
    steps; TwoSum makes it a float64 and a residual within half its ulp again.
    ``value / step`` is then exact, ``low`` its floor and z lies strictly between
    ``low`` and ``low + 1`` steps: the residual, at most half a float64 ulp of
    the value, cannot reach a grid point that the value is not on, nor a
    midpoint, unless that ulp is a whole step (``|z|`` of 2**52 steps or more:
    53-bit words): then a midpoint is the value, on a grid point (the even one,
    as float64 rounds), plus a residual of half a step."""
    step = bits_to_float64(params[P_SCALE_BITS])
    modulus = step * 2.0 ** params[P_WORD_BITS]
    negative = value < 0.0 or (value == 0.0 and residual < 0.0)
    if abs(value) >= modulus and params[P_WORD_BITS] >= 53:
        # 53-bit words: three moduli are past float64's steps; the exact digits of z
        # instead, less whole moduli to |z| <= M (`wrap_digits`), keeping its sign
        digits = np.zeros(LIMBS, np.int64)
        low = min(exact_add(digits, value), exact_add(digits, residual))
        value, residual = exact_pair(digits, wrap_digits(digits, low, params), False)
        if residual == 0.0:
            return bits_to_float64(round_value(float64_to_bits(value), params, mode, random, rand_bits))
    elif abs(value) >= modulus:
        remainder = np.fmod(value, modulus) + math.copysign(modulus, value)
        value, residual = two_sum(remainder, np.fmod(residual, modulus))
        if residual == 0.0:  # z itself, now a float64
            return bits_to_float64(round_value(float64_to_bits(value), params, mode, random, rand_bits))
    scaled = value / step
    low = math.floor(scaled)
    fraction = scaled - low
    tail = residual / step
    tie = fraction == 0.0 and abs(tail) == 0.5  # a midpoint split between value and residual
    if fraction == 0.0 and tail < 0.0:  # just below the grid point `scaled`
        low -= 1.0
        fraction = 1.0
    high = low + 1.0
    if mode == NEAREST_AWAY and tie:
        steps = low if negative else high
    elif mode == NEAREST or mode == NEAREST_AWAY:  # (a tie's value is its even neighbour: nearest's)
        steps = high if fraction > 0.5 or (fraction == 0.5 and tail > 0.0) else low
    elif mode == TOWARD_ZERO:
        steps = high if negative else low
    elif mode == UP:
        steps = high
    elif mode == DOWN:
        steps = low
    elif mode == ODD:
        steps = low if np.fmod(low, 2.0) != 0.0 else high
    else:
        # the stochastic modes step a magnitude away from zero, as round_bits does
        toward, away = (high, low) if negative else (low, high)
        if mode == STOCHASTIC:
            away_from_zero = _stochastic_up(float64_to_bits(abs(value)), abs(toward) * step, abs(away) * step,
                                            -residual if negative else residual, random, rand_bits)
        else:  # STOCHASTIC_EQUAL
            away_from_zero = (random >> U64_63) == U64_ONE
        steps = away if away_from_zero else toward
    return bits_to_float64(round_value(float64_to_bits(steps * step), params, MODE_TOWARD_ZERO, U64_ZERO, ALL_BITS))


@njit(**NUMBA_OPTIONS)
def _round_pair(value, residual, params, midpoints, mode, random, rand_bits):
    """`round_exact` without its fixed-point wrap step."""
    bits = float64_to_bits(value)
    magnitude = bits & ABS_MASK
    if residual == 0.0 or magnitude >= INF_BITS or not math.isfinite(residual):
        return bits_to_float64(round_value(bits, params, mode, random, rand_bits))
    if magnitude == 0:  # an underflowed product: the residual is all there is
        return bits_to_float64(round_value(float64_to_bits(residual), params, mode, random, rand_bits))
    negative = bits < 0
    sign = bits & SIGN_BIT
    away = (residual > 0.0) != negative  # the residual adds to the magnitude
    other = magnitude + 1 if away else magnitude - 1  # float64 neighbour on z's side
    lower = min(magnitude, other)
    upper = max(magnitude, other)
    if mode == TOWARD_ZERO:
        pick = lower
    elif mode == UP:
        pick = lower if negative else upper
    elif mode == DOWN:
        pick = upper if negative else lower
    elif mode == ODD:
        pick = magnitude if (magnitude & 1) == 1 else other
    elif mode == STOCHASTIC_EQUAL:
        if _is_value(magnitude, sign, params):
            if _is_value(other, sign, params):
                pick = upper if (random >> U64_63) == U64_ONE else lower
                return bits_to_float64(round_value(pick | sign, params, MODE_TOWARD_ZERO, U64_ZERO, ALL_BITS))
            pick = other
        else:
            pick = magnitude
    elif mode == STOCHASTIC:
        lower_value = _toward_zero(lower, sign, params)
        upper_value = _away_from_zero(upper, sign, params)
        if lower_value <= bits_to_float64(lower) and bits_to_float64(upper) <= upper_value < math.inf:
            residual_up = abs(residual) if away else -abs(residual)
            if _stochastic_up(magnitude, lower_value, upper_value, residual_up, random, rand_bits):
                pick = float64_to_bits(upper_value)
            else:
                pick = float64_to_bits(lower_value)
            return bits_to_float64(round_value(pick | sign, params, MODE_TOWARD_ZERO, U64_ZERO, ALL_BITS))
        pick = magnitude if (magnitude & 1) == 1 else other  # overflow: round to odd first
    else:
        pick = _nearest_pick(magnitude, other, upper, residual, params, midpoints, mode, sign)
    return bits_to_float64(round_value(pick | sign, params, mode, random, rand_bits))


@njit(inline="always", **NUMBA_OPTIONS)
def _round(value, residual, params, midpoints, mode, random, rand_bits, general):
    """:func:`round_exact`, with a shortcut for the common case (exact, no rare path)."""
    if residual == 0.0 and not general:
        return bits_to_float64(round_common(float64_to_bits(value), params, mode, random, rand_bits))
    return round_exact(value, residual, params, midpoints, mode, random, rand_bits)


_ARRAY1 = types.Array(types.float64, 1, "C")
_ARRAY3 = types.Array(types.float64, 3, "C")
_INPUT1 = types.Array(types.float64, 1, "C", readonly=True)  # writeable arrays convert to it
_INPUT3 = types.Array(types.float64, 3, "C", readonly=True)


_FLOAT32_IN = types.Array(types.float32, 1, "C", readonly=True)


_SUM_BLOCK = 256
_MAGNITUDE_32 = np.int32(0x7FFFFFFF)


@_compiled_at_first_call(types.int64(_FLOAT32_IN, _FLOAT32_IN, types.Array(types.float32, 1, "C"),
                                     types.Array(types.int64, 1, "C")))
def float32_sums(a, b, total, inexact):
    """``total = fl32(a + b)``; the indices where the float32 sum is not exact
    (TwoSum's error is not 0, or NaN) go to the front of `inexact` (as large as
    `total`), and their count is returned. Blocks of 256 run without a branch
    (the lanes or the bits of their errors' magnitudes: nonzero where any sum was
    inexact); only a block with an inexact sum is looked at again."""
    count = 0
    errors = np.empty(_SUM_BLOCK, dtype=np.float32)
    for start in range(0, total.size, _SUM_BLOCK):
        stop = min(start + _SUM_BLOCK, total.size)
        # slices indexed from 0, and an integer OR: LLVM vectorises this loop (a
        # boolean OR over indices from `start` kept it scalar, 9x slower)
        a_block, b_block, total_block = a[start:stop], b[start:stop], total[start:stop]
        error_bits = np.int32(0)
        for i in range(a_block.size):
            s, error = two_sum(a_block[i], b_block[i])
            total_block[i] = s
            errors[i] = error
            error_bits |= float32_to_bits(error) & _MAGNITUDE_32  # 0 for +-0, nonzero for NaN
        if error_bits != 0:
            for i in range(stop - start):
                if not (errors[i] == np.float32(0.0)):
                    inexact[count] = start + i
                    count += 1
    return count


@_compiled_at_first_call(types.void(_INPUT1, _INPUT1, _ARRAY1, _ARRAY1))
def divide_exactly(a, b, quotient, residual):
    """``quotient = fl(a / b)`` and ``residual = (a - quotient * b) / b``: the
    remainder exact (one fused multiply-add, wherever it is a float64), its
    quotient rounded, so ``quotient + residual`` is ``a / b`` within a relative
    ``2**-106``."""
    for i in range(a.size):
        quotient[i] = a[i] / b[i]
        residual[i] = fused_multiply_add(-quotient[i], b[i], a[i]) / b[i]


@_compiled_at_first_call(types.void(_INPUT1, _ARRAY1, _ARRAY1))
def sqrt_exactly(a, root, residual):
    """``root = fl(sqrt(a))`` and ``residual = (a - root**2) / (2 root)``: the
    remainder exact (one fused multiply-add), the rest rounded."""
    for i in range(a.size):
        root[i] = np.sqrt(a[i])
        residual[i] = fused_multiply_add(-root[i], root[i], a[i]) / (2.0 * root[i])


@_compiled_at_first_call(types.void(_INPUT1, _INPUT1, types.Array(types.int64, 1, "C", readonly=True), _ARRAY1,
                                   PARAMS_TYPE, MIDPOINTS_TYPE, types.int64, types.uint64, types.int64))
def round_pairs_at(values, residuals, indices, out, params, midpoints, mode, key, rand_bits):
    """``out[i] = round_exact(values[i], residuals[i])`` for each ``i`` in `indices`;
    element ``i`` draws number ``i`` of the stream `key`, as ``rp.round`` does.
    Stochastic rounding takes `stochastic_pair` where it applies."""
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    random = U64_ZERO
    for i in indices:
        if stochastic:
            random = random_bits(key, i)
        if mode == STOCHASTIC:
            done, result = stochastic_pair(values[i], residuals[i], params, random, rand_bits)
            if done:
                out[i] = result
                continue
        out[i] = round_exact(values[i], residuals[i], params, midpoints, mode, random, rand_bits)


@njit(**NUMBA_OPTIONS)
def stochastic_pair(value, residual, params, random, rand_bits):
    """``(True, round_exact(value, residual, ...))`` in mode stochastic, by integer
    arithmetic, where the pair lies in the format's fast range (the grid there
    has one spacing per float64 binade, ``2**drop`` float64 steps, with
    subnormals below min_normal); else ``(False, anything)``. Without a branch,
    so that loops over it vectorise.

    The exact ``|z| = |value + residual|`` lies between two neighbouring float64
    magnitudes ``lower < upper``; the format values around it are ``lower`` with
    its low `drop` bits cleared and that plus ``2**drop`` (in float64 steps of
    ``lower``'s binade, also across a power of two). In those steps ``|z| -
    lower_value = D + d`` with the integer ``D = |value| - lower_value`` and ``|d|
    < 1``, so ``floor((|z| - lower_value) / spacing * 2**rand_bits)`` is ``D *
    2**k + floor(d * 2**k)`` with ``k = rand_bits - drop`` (``d * 2**k`` is
    ``residual`` times a power of two: exact)."""
    bits = float64_to_bits(value)
    magnitude = bits & ABS_MASK
    sign = bits & SIGN_BIT
    away = (residual > 0.0) != (bits < 0)  # the residual adds to the magnitude
    lower = magnitude if away else magnitude - 1
    exponent = lower >> 52
    drop = max(params[P_FAST_DROP_MIN], params[P_FAST_DROP_OFFSET] - exponent)
    shift = rand_bits - drop
    scale_field = 2098 - exponent + shift  # float64 field of 2**(k + 1075 - exponent): steps to units
    usable = ((residual != 0.0) & (abs(residual) < math.inf) & (magnitude < INF_BITS) & (exponent >= 1)
              & (params[P_FAST_LOW_RANDOM_BITS] <= lower) & (lower < params[P_FAST_HIGH_BITS])
              # below min_normal, one spacing per binade only where the format has subnormals
              & ((lower >= params[P_MIN_NORMAL_BITS]) | (params[P_BELOW_QUANTUM_BITS] < params[P_MIN_NORMAL_BITS]))
              & (drop <= 52) & (shift >= 1) & (shift <= 63) & (scale_field >= 1) & (scale_field <= 2046))
    # (clamped, so that every operation below is defined where the pair is not usable)
    drop = min(max(drop, 0), 52)
    shift = min(max(shift, 1), 63)
    scale_field = min(max(scale_field, 1), 2046)
    lower_value = lower & ~((np.int64(1) << drop) - 1)
    upper_value = lower_value + (np.int64(1) << drop)
    limit = params[P_MAX_NEG_BITS] if sign != 0 else params[P_MAX_POS_BITS]
    residual_up = abs(residual) if away else -abs(residual)
    scaled = residual_up * bits_to_float64(np.int64(scale_field) << 52)
    usable = usable & (lower_value != 0) & (upper_value <= limit) & (scaled != 0.0)
    tail = np.int64(np.floor(scaled if usable else 0.0))  # in (-2**k, 2**k)
    # D * 2**k + tail, modulo 2**64 (D * 2**k is 2**64 only where tail < 0)
    threshold = wrapping_add(np.uint64(magnitude - lower_value) << np.uint64(shift), np.uint64(tail))
    drawn = random >> (U64_64 - np.uint64(rand_bits))
    pick = upper_value if drawn < threshold else lower_value
    return usable, bits_to_float64(pick | sign)


_PAIR_BLOCK = 256  # a power of two: no block straddles a 2**32 boundary of the random stream


@_compiled_at_first_call(types.int64(_INPUT1, _INPUT1, _ARRAY1, PARAMS_TYPE, types.uint64, types.int64,
                                     types.Array(types.int64, 1, "C")))
def stochastic_pairs(values, residuals, out, params, key, rand_bits, pending):
    """Stochastic rounding of every pair with a residual, by `stochastic_pair`,
    element ``i`` drawing number ``i`` of the stream `key`: ``out[i]`` where it
    applies; the indices of the other pairs with a residual go to the front of
    `pending` (as large as `values`), for `round_pairs_at`, and their count is
    returned. Elements without a residual keep ``out[i]``. Blocks of 256 run
    without a branch; only a block with pending pairs is looked at again."""
    count = 0
    flags = np.empty(_PAIR_BLOCK, np.int32)
    for start in range(0, values.size, _PAIR_BLOCK):
        stop = min(start + _PAIR_BLOCK, values.size)
        keys = segment_keys(key, np.uint64(start) >> U32_32)
        first = np.uint32(np.uint64(start) & LOW_32)
        value_block, residual_block, out_block = values[start:stop], residuals[start:stop], out[start:stop]
        any_pending = np.int32(0)
        for i in range(value_block.size):
            random = counter_bits(keys, wrapping_add(first, np.uint32(i)))
            done, result = stochastic_pair(value_block[i], residual_block[i], params, random, rand_bits)
            out_block[i] = result if done else out_block[i]
            flag = np.int32((not done) & (residual_block[i] != 0.0))
            flags[i] = flag
            any_pending |= flag
        if any_pending != 0:
            for i in range(stop - start):
                if flags[i] != 0:
                    pending[count] = start + i
                    count += 1
    return count


@_compiled_at_first_call(types.void(_INPUT3, _INPUT3, _ARRAY3, PARAMS_TYPE, MIDPOINTS_TYPE, types.boolean,
                                   PARAMS_TYPE, MIDPOINTS_TYPE, types.boolean, types.int64, types.int64,
                                   types.boolean, types.boolean, types.uint64, types.int64))
def accumulate(a, b, out, product_params, product_midpoints, product_general, acc_params, acc_midpoints,
               acc_general, mode, kind, pairwise, exact_products, key, rand_bits):
    """``out[g, i, j]``: the rounded reduction over ``k`` of ``a[g, i, k] * b[g, k, j]``
    in the order and with the random counters of the module docstring (SUM: `a` is
    all ones, the terms are `b`'s values).

    `exact_products`: every ``a * b`` is exact in float64 (the caller checked), so
    no ``two_product`` is needed. The loops run ``i, k, j``: the ``cols`` accumulators
    of a row advance together, so their roundings are independent and overlap (one
    chain of roundings would wait on each one's latency); in the common case the
    ``j`` loop is straight-line code and the rare sums that float64 cannot hold are
    rounded exactly afterwards.
    """
    simple = exact_products and not (pairwise or kind == FUSED or product_general or acc_general)
    if simple:
        _accumulate_sequential(a, b, out, product_params, acc_params, acc_midpoints, mode, kind, key, rand_bits)
    else:
        _accumulate_general(a, b, out, product_params, product_midpoints, product_general, acc_params,
                            acc_midpoints, acc_general, mode, kind, pairwise, exact_products, key, rand_bits)


@njit(inline="always", **NUMBA_OPTIONS)
def _accumulate_sequential(a, b, out, product_params, acc_params, acc_midpoints, mode, kind, key, rand_bits):
    """Sequential order, exact products, no rare path: for each ``k`` the row's
    products are rounded (phase 0, PRODUCT only), then added (phase 1), both by one
    inlined rounding (each inlined copy costs seconds of compilation)."""
    groups, rows, n = a.shape
    cols = out.shape[2]
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    first_phase = 0 if kind == PRODUCT else 1
    acc = np.zeros(cols, dtype=np.float64)
    terms = np.empty(cols, dtype=np.float64)
    totals = np.empty(cols, dtype=np.float64)
    residuals = np.empty(cols, dtype=np.float64)
    random = U64_ZERO
    for g in range(groups):
        for i in range(rows):
            first_output = (g * rows + i) * cols
            for k in range(n):
                x = a[g, i, k]
                for j in range(cols):
                    terms[j] = x * b[g, k, j]  # exact
                inexact = False
                for phase in range(first_phase, 2):
                    params = product_params if phase == 0 else acc_params
                    for j in range(cols):
                        base = np.int64(3) * n * (first_output + j)
                        if phase == 0:
                            total, residual, counter = terms[j], 0.0, base + 3 * k
                        elif k == 0:
                            total, residual, counter = terms[j], 0.0, base + 1
                        else:
                            total, residual = two_sum(acc[j], terms[j])
                            counter = base + 3 * k - 1
                        if stochastic:
                            random = random_bits(key, counter)
                        rounded = bits_to_float64(round_bits(float64_to_bits(total), params, mode, random,
                                                             rand_bits, False))
                        if phase == 0:
                            terms[j] = rounded
                        else:
                            acc[j] = rounded
                            totals[j] = total
                            residuals[j] = residual
                            inexact |= residual != 0.0
                if inexact:  # rare: sums float64 could not hold, rounded again exactly
                    for j in range(cols):
                        if residuals[j] != 0.0:
                            if stochastic:
                                random = random_bits(key, np.int64(3) * n * (first_output + j) + 3 * k - 1)
                            acc[j] = round_exact(totals[j], residuals[j], acc_params, acc_midpoints, mode, random,
                                                 rand_bits)
            for j in range(cols):
                out[g, i, j] = acc[j]
                acc[j] = 0.0


@njit(inline="always", **NUMBA_OPTIONS)
def popcount(k):
    """The number of 1 bits of the int `k` >= 0."""
    count = 0
    while k:
        k &= k - 1
        count += 1
    return count


@njit(inline="always", **NUMBA_OPTIONS)
def _accumulate_general(a, b, out, product_params, product_midpoints, product_general, acc_params,
                        acc_midpoints, acc_general, mode, kind, pairwise, exact_products, key, rand_bits):
    """Every case: inexact products, fused products, pairwise order (evaluated
    streaming, with a stack per accumulator), the kernel's rare paths."""
    groups, rows, n = a.shape
    cols = out.shape[2]
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    acc = np.zeros(cols, dtype=np.float64)
    stack = np.empty((cols, 64 if pairwise else 0), dtype=np.float64)
    random = U64_ZERO
    for g in range(groups):
        for i in range(rows):
            first_output = (g * rows + i) * cols
            for k in range(n):
                x = a[g, i, k]
                merges_before = k - popcount(k)
                for j in range(cols):
                    base = np.int64(3) * n * (first_output + j)
                    if exact_products:
                        term, term_residual = x * b[g, k, j], 0.0
                    else:
                        term, term_residual = two_product(x, b[g, k, j])
                    if kind == PRODUCT:
                        if stochastic:
                            random = random_bits(key, base + 3 * k)
                        term = _round(term, term_residual, product_params, product_midpoints, mode, random,
                                      rand_bits, product_general)
                        term_residual = 0.0
                    if pairwise or k == 0:  # the term enters the accumulator
                        total, residual, counter = term, term_residual, base + 3 * k + 1
                    elif kind == FUSED:
                        high, low = two_sum(acc[j], term)
                        if not math.isfinite(high):  # inf or NaN: the low parts (NaN from inf - inf) say nothing
                            total, residual = high, 0.0
                        elif low == 0.0 and term_residual == 0.0:  # exact (and -0 + -0 stays -0)
                            total, residual = high, 0.0
                        else:
                            total, residual = two_sum(high, add_to_odd(low, term_residual))
                        counter = base + 3 * k - 1
                    else:
                        total, residual = two_sum(acc[j], term)
                        counter = base + 3 * k - 1
                    level = 0
                    while True:  # one rounding site for entries, additions and pairwise merges
                        if stochastic:
                            random = random_bits(key, counter)
                        rounded = _round(total, residual, acc_params, acc_midpoints, mode, random, rand_bits,
                                         acc_general)
                        if not pairwise:
                            acc[j] = rounded
                            break
                        if (k >> level) & 1 == 0:
                            stack[j, level] = rounded
                            break
                        total, residual = two_sum(stack[j, level], rounded)
                        counter = base + 3 * (merges_before + level) + 2
                        level += 1
            if pairwise and n > 0:
                # the partial sums left on the stack, smallest (rightmost) first
                lowest = 0
                while (n >> lowest) & 1 == 0:
                    lowest += 1
                for j in range(cols):
                    base = np.int64(3) * n * (first_output + j)
                    t = n - popcount(n)
                    value = stack[j, lowest]
                    for level in range(lowest + 1, 64):
                        if (n >> level) & 1 == 1:
                            total, residual = two_sum(stack[j, level], value)
                            if stochastic:
                                random = random_bits(key, base + 3 * t + 2)
                            value = round_exact(total, residual, acc_params, acc_midpoints, mode, random,
                                                rand_bits)
                            t += 1
                    acc[j] = value
            for j in range(cols):
                out[g, i, j] = acc[j]
                acc[j] = 0.0


# -- exact sums of many float64s ----------------------------------------------------------
#
# A fixed-point number with unit 2**-1074 (float64's smallest subnormal) in LIMBS
# 32-bit digits held in int64 slots: every finite float64 is an integer there, so sums
# of them are exact integer additions. Digits may leave [0, 2**32) between
# normalisations (each addition moves a digit by less than 2**33); the top slot is the
# sign. Slots below the lowest digit an addition touched stay zero.

LIMBS = 70  # 2240 bits: float64's 2098 and room for 2**40 additions
NORMALIZE_EVERY = 1 << 24  # additions between normalisations: digits stay below 2**58
DIGIT_MASK = np.int64(0xFFFFFFFF)
FRACTION_MASK = np.int64((1 << 52) - 1)
IMPLICIT_BIT = np.int64(1 << 52)
SIGNIFICAND_MASK = np.uint64((1 << 53) - 1)
U64_32 = np.uint64(32)


@njit(**NUMBA_OPTIONS)
def exact_add(digits, x):
    """Add the finite float64 `x` to `digits` exactly; returns the lowest digit touched."""
    bits = float64_to_bits(x)
    field = (bits >> 52) & 0x7FF
    significand = bits & FRACTION_MASK
    position = np.int64(0)  # of the significand's last bit, in units of 2**-1074
    if field != 0:
        significand |= IMPLICIT_BIT
        position = field - 1
    digit = position >> 5
    shift = position & 31
    low_part = (significand & DIGIT_MASK) << shift  # < 2**63
    high_part = (significand >> 32) << shift  # < 2**52
    d0 = low_part & DIGIT_MASK
    d1 = (low_part >> 32) + (high_part & DIGIT_MASK)
    d2 = high_part >> 32
    if bits < 0:
        digits[digit] -= d0
        digits[digit + 1] -= d1
        digits[digit + 2] -= d2
    else:
        digits[digit] += d0
        digits[digit + 1] += d1
        digits[digit + 2] += d2
    return digit


@njit(**NUMBA_OPTIONS)
def exact_normalize(digits, low):
    """Carry: digits ``low .. LIMBS-2`` into [0, 2**32), the value unchanged; the top
    slot is then 0 for a value >= 0 and -1 for a negative one."""
    for i in range(low, LIMBS - 1):
        carry = digits[i] >> 32  # floor division: negative digits borrow
        digits[i] -= carry << 32
        digits[i + 1] += carry


@njit(**NUMBA_OPTIONS)
def _exact_magnitude(digits, low):
    """Normalise to the magnitude; returns whether the value was negative."""
    exact_normalize(digits, low)
    if digits[LIMBS - 1] >= 0:
        return False
    for i in range(low, LIMBS):
        digits[i] = -digits[i]
    exact_normalize(digits, low)
    return True


@njit(**NUMBA_OPTIONS)
def _exact_leading(digits, low):
    """``(significand, position, half, rest)`` of a normalised magnitude: its 53 bits
    from ``position = max(top bit - 52, 0)`` up, the bit below them, and whether any
    lower bit is set; significand -1 for zero."""
    top = LIMBS - 1
    while top >= low and digits[top] == 0:
        top -= 1
    if top < low:
        return np.int64(-1), np.int64(0), False, False
    width = 0
    while (digits[top] >> width) != 0:
        width += 1
    position = max(32 * top + width - 1 - 52, 0)
    digit = position >> 5
    shift = np.uint64(position & 31)
    window = (np.uint64(digits[digit]) >> shift) | (np.uint64(digits[digit + 1]) << (U64_32 - shift))
    if shift != U64_ZERO:
        window |= np.uint64(digits[digit + 2]) << (U64_64 - shift)
    significand = np.int64(window & SIGNIFICAND_MASK)
    half = False
    rest = False
    if position > 0:
        below = position - 1
        digit = below >> 5
        shift = below & 31
        half = ((digits[digit] >> shift) & 1) == 1
        rest = (digits[digit] & ((np.int64(1) << shift) - 1)) != 0
        i = low
        while not rest and i < digit:
            rest = digits[i] != 0
            i += 1
    return significand, np.int64(position), half, rest


@njit(**NUMBA_OPTIONS)
def exact_pair(digits, low, negative_zero):
    """The exact value ``z`` held in `digits` (lowest touched digit `low`) as the pair
    ``(s, r)`` that :func:`round_exact` takes, and `digits` cleared.

    ``s = fl(z)``, rounded to nearest even from the integer bits themselves (no float
    arithmetic), and ``r``: the remainder ``z - s``, computed exactly the same way and
    rounded to odd onto float64 (it keeps its sign, an exact ``ulp(s)/2`` tie, and
    every bit of ``(s + r)`` above ``2**-53 |r|``). A zero sum is -0.0 where
    `negative_zero` (every summand was -0.0), else +0.0; a sum that float64 rounds to
    inf gives ``(±inf, 0)``."""
    negative = _exact_magnitude(digits, low)
    significand, position, half, rest = _exact_leading(digits, low)
    if significand < 0:
        return (-0.0 if negative_zero else 0.0), 0.0
    if half and (rest or (significand & 1) == 1):
        significand += 1
    head = math.ldexp(float(significand), position - 1074)  # exact, or inf
    tail = 0.0
    if not math.isinf(head):
        low = min(low, exact_add(digits, -head))
        tail_negative = _exact_magnitude(digits, low)
        significand, position, half, rest = _exact_leading(digits, low)
        if significand >= 0:
            if half or rest:
                significand |= 1  # round to odd
            tail = math.ldexp(float(significand), position - 1074)
            if tail_negative:
                tail = -tail
    digits[low:] = 0
    if negative:
        return -head, -tail
    return head, tail


@njit(**NUMBA_OPTIONS)
def wrap_digits(digits, low, params):
    """Under fixed-point wrap (`params`), the exact ``z`` in `digits` less whole
    moduli ``M = 2**w`` steps (a power of two), keeping its sign: ``z mod M`` for
    a positive z, less ``M`` for a negative one, so that ``|z| <= M``; a zero
    stays. The wrapped code depends on z modulo M and, through the rounding of
    its fraction of a step, on its sign alone. Its low bits then lie within
    float64's reach of ``fl(z)`` (``M <= 2**53`` steps: whole steps are exact),
    which `exact_pair`'s remainder rounded to odd would otherwise drop (a block
    sum far past the range). Returns the lowest digit touched. Other policies:
    `digits` as they are."""
    if params[P_OVERFLOW] != OVERFLOW_WRAP:
        return low
    step_exponent = ((params[P_SCALE_BITS] >> 52) & 0x7FF) - 1023
    position = step_exponent + params[P_WORD_BITS] + 1074  # of the modulus, in units of 2**-1074
    if position < 0 or position >= 32 * (LIMBS - 1) - 34:  # (no room: such formats do not get here)
        return low
    exact_normalize(digits, low)
    negative = digits[LIMBS - 1] < 0
    digit = position >> 5
    zero = not negative
    for i in range(low, LIMBS - 1):
        zero = zero and digits[i] == 0
    if zero:
        return low
    # the bits below the modulus of the two's complement value: z mod M, in [0, M)
    digits[digit] &= (np.int64(1) << (position & 31)) - 1
    for i in range(digit + 1, LIMBS):
        digits[i] = 0
    if negative:
        digits[digit] -= np.int64(1) << (position & 31)
    low = min(low, digit)
    exact_normalize(digits, low)
    return low


@njit(inline="always", **NUMBA_OPTIONS)
def _product(x, y, exact_products):
    """``(p, e)``: the product as ``fl(x*y)`` and its error (0 when known exact)."""
    if exact_products:
        return x * y, 0.0
    return two_product(x, y)


@_compiled_at_first_call(types.void(_INPUT3, _INPUT3, _ARRAY3, PARAMS_TYPE, MIDPOINTS_TYPE, types.boolean,
                                   types.int64, types.int64, types.boolean, types.uint64, types.int64))
def accumulate_blocks(a, b, out, acc_params, acc_midpoints, acc_general, mode, block_k, exact_products, key,
                      rand_bits):
    """``out[g, i, j]``: sequential order over blocks of `block_k` terms, each block's
    exact products summed exactly and added to the accumulator with one rounding
    (module docstring). SUM passes all-ones `a` and ``exact_products``."""
    groups, rows, n = a.shape
    cols = out.shape[2]
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    digits = np.zeros(LIMBS, dtype=np.int64)
    random = U64_ZERO
    for g in range(groups):
        for i in range(rows):
            for j in range(cols):
                base = np.int64(3) * n * ((g * rows + i) * cols + j)
                acc = 0.0
                for start in range(0, n, block_k):
                    low = np.int64(LIMBS)
                    special = 0.0  # the float64 sum of the infinite and NaN summands
                    finite = True
                    negative_zero = True
                    added = 0
                    if start > 0:
                        if not math.isfinite(acc):
                            special, finite = acc, False
                        elif acc != 0.0:
                            low = min(low, exact_add(digits, acc))
                            added += 1
                        negative_zero = acc == 0.0 and math.copysign(1.0, acc) < 0.0
                    for k in range(start, min(start + block_k, n)):
                        p, e = _product(a[g, i, k], b[g, k, j], exact_products)
                        if not math.isfinite(p):
                            special = p if finite else special + p
                            finite = False
                            continue
                        negative_zero = negative_zero and p == 0.0 and math.copysign(1.0, p) < 0.0
                        if p != 0.0:
                            low = min(low, exact_add(digits, p))
                            added += 1
                            if e != 0.0:  # (two_product's error is finite: 0 past 2**995)
                                low = min(low, exact_add(digits, e))
                                added += 1
                            if added >= NORMALIZE_EVERY:
                                exact_normalize(digits, low)
                                added = 0
                    if finite:
                        low = wrap_digits(digits, low, acc_params)
                        total, residual = exact_pair(digits, low, negative_zero)
                    else:
                        digits[low:] = 0
                        total, residual = special, 0.0
                    if stochastic:
                        random = random_bits(key, base + (3 * start - 1 if start > 0 else 1))
                    acc = _round(total, residual, acc_params, acc_midpoints, mode, random, rand_bits, acc_general)
                out[g, i, j] = acc


@_compiled_at_first_call(types.void(_INPUT3, _INPUT3, _ARRAY3, PARAMS_TYPE, MIDPOINTS_TYPE, types.boolean,
                                   PARAMS_TYPE, MIDPOINTS_TYPE, types.boolean, types.int64, types.int64,
                                   types.boolean, types.uint64, types.int64))
def accumulate_kahan(a, b, out, product_params, product_midpoints, product_general, acc_params, acc_midpoints,
                     acc_general, mode, kind, exact_products, key, rand_bits):
    """``out[g, i, j]``: compensated (Kahan) summation of the terms, every operation
    rounded onto the accumulator format (module docstring)."""
    groups, rows, n = a.shape
    cols = out.shape[2]
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    digits = np.zeros(LIMBS, dtype=np.int64)
    random = U64_ZERO
    for g in range(groups):
        for i in range(rows):
            for j in range(cols):
                base = np.int64(5) * n * ((g * rows + i) * cols + j)
                acc = 0.0
                compensation = 0.0
                for k in range(n):
                    counter = base + 5 * k
                    term, term_residual = _product(a[g, i, k], b[g, k, j], exact_products)
                    if kind == PRODUCT:
                        if stochastic:
                            random = random_bits(key, counter)
                        term = _round(term, term_residual, product_params, product_midpoints, mode, random,
                                      rand_bits, product_general)
                        term_residual = 0.0
                    # y = round(term - c): exact even for a fused term (three summands)
                    if k == 0:
                        total, residual = term, term_residual
                    elif (term_residual != 0.0 and compensation != 0.0 and math.isfinite(term)
                          and math.isfinite(compensation)):
                        low = min(exact_add(digits, term), exact_add(digits, term_residual))
                        low = min(low, exact_add(digits, -compensation))
                        low = wrap_digits(digits, low, acc_params)
                        total, residual = exact_pair(digits, low, False)
                    elif term_residual != 0.0 and compensation == 0.0:
                        total, residual = term, term_residual
                    else:
                        total, residual = two_sum(term, -compensation)
                    if stochastic:
                        random = random_bits(key, counter + 1)
                    y = _round(total, residual, acc_params, acc_midpoints, mode, random, rand_bits, acc_general)
                    if k == 0:
                        acc = y
                        continue
                    # s = round(acc + y), c = round(round(s - acc) - y)
                    total, residual = two_sum(acc, y)
                    if stochastic:
                        random = random_bits(key, counter + 2)
                    s = _round(total, residual, acc_params, acc_midpoints, mode, random, rand_bits, acc_general)
                    total, residual = two_sum(s, -acc)
                    if stochastic:
                        random = random_bits(key, counter + 3)
                    d = _round(total, residual, acc_params, acc_midpoints, mode, random, rand_bits, acc_general)
                    total, residual = two_sum(d, -y)
                    if stochastic:
                        random = random_bits(key, counter + 4)
                    compensation = _round(total, residual, acc_params, acc_midpoints, mode, random, rand_bits,
                                          acc_general)
                    acc = s
                out[g, i, j] = acc
