"""The scale of a block from its largest magnitude: what every backend of the
scaled formats computes per block (``rpfloat.scaledformat``).

A block's scale ``X`` follows ``m``, the largest magnitude of its finite values
(a block holding NaN or inf has no scale: its elements are NaN). Power-of-two
scales ``X = 2**s``, with ``emax = floor(log2(element max))`` and ``m = f * 2**e``,
``f`` in [1, 2)::

    floor   s = e - emax
    ceil    s = e - emax + (f != 1)
    even    s = e - emax + (RNE(m * 2**-(e - emax) / q) * q == 2**(emax + 1))
            q: the element's spacing in its top binade [2**emax, 2**(emax + 1))
    rceil   s = e - emax + (m > element_max * 2**(e - emax))

each clamped to [s_min, s_max] (an all-zero block takes s_min). ``2**(e - emax)``
puts m in the element's top binade, so m's next power of two is at most one
binade further (ceil, even) and the smallest s with ``m <= element_max * 2**s``
is ``e - emax`` or one more (rceil). Every step is exact in float64.

Scales with significand bits (NVFP4) are ``m / element_max`` rounded to nearest
even in the scale format and clamped to [its smallest subnormal, its max]. The
float64 quotients, that one and each element's ``v / X``, round as the exact ones
do for the pairs of element and scale format that ``ScaledFormat`` takes
(``_check_scale_rounds_once``: the scale's precision and the element's most
significant bits, plus 24 with a tensor scale, come to at most 53).

A quotient at or below float64's least normal, 2**-1022, may have lost bits (the
subnormals' spacing is 2**-1074). The general kernels then divide again, ``v *
2**128 / X`` (a normal float64, exact for a power-of-two X), and round that onto
the element's (or scale format's) grid times 2**128 (`shifted_params`), which
decides as the exact quotient would.
"""
import math

import numpy as np
from numba import njit
from numba.cpython.unsafe.tuple import tuple_setitem

from .bits import NUMBA_OPTIONS, bits_to_float64, count_leading_zeros, float64_to_bits
from .element import round_bits
from .layout import (
    NEAREST, P_BELOW_DROP_OFFSET, P_BELOW_QUANTUM_BITS, P_DEEP, P_HALF_QUANTUM_BITS, P_MAN_BITS, P_MAX_NEG_BITS,
    P_MAX_POS_BITS, P_MIN_NORMAL_BITS, P_OVERFLOW_NEG_BITS, P_OVERFLOW_POS_BITS,
)

# scale kinds and the power-of-two roundings (the order of rpfloat.scaledformat.SCALE_ROUNDINGS)
POWER_OF_TWO, SIGNIFICAND = range(2)
FLOOR, CEIL, EVEN, RCEIL = range(4)
FRACTION_64 = np.int64(0x000FFFFFFFFFFFFF)
TWO_52 = 2.0**52
MIN_EXPONENT_64 = -1022  # float64's least normal exponent
HIDDEN_BIT_64 = np.int64(1) << 52
INF_BITS_64 = np.int64(0x7FF0000000000000)
# tiny quotients are rounded times 2**TINY_SHIFT (even: a float64 exponent field keeps its parity)
TINY_SHIFT = 128
TIMES_TINY_SHIFT = 2.0**TINY_SHIFT
UNDO_TINY_SHIFT = 2.0**-TINY_SHIFT

# Layout of the block parameters (rpfloat.scaling builds them), all int64:
# scale kind, rounding, s_min, s_max, element emax, exponent of the element's
# spacing in its top binade, block size, whether the kernel writes the element
# values (encode) rather than the scaled values
(B_KIND, B_ROUNDING, B_S_MIN, B_S_MAX, B_EMAX, B_TOP_SPACING_EXP, B_BLOCK_SIZE, B_ELEMENTS) = range(8)
N_BLOCK_PARAMS = 8
# and the float64 ones: the element's largest value, the tensor scale g (1.0 if
# none), the scale format's smallest positive value and largest value
(F_ELEMENT_MAX, F_TENSOR_SCALE, F_SCALE_MIN, F_SCALE_MAX) = range(4)
N_FLOAT_PARAMS = 4


@njit(**NUMBA_OPTIONS)
def power_of_two_exponent(largest, block_params, element_max):
    """The exponent s of the block scale ``2**s`` for the block's largest finite
    magnitude `largest` (a float64; module docstring), from its bits: integer
    operations only."""
    s_min, s_max = block_params[B_S_MIN], block_params[B_S_MAX]
    if largest == 0.0:
        return s_min
    bits = float64_to_bits(largest)
    field = (bits >> 52) & 0x7FF
    fraction = bits & FRACTION_64
    if field == 0:  # a float64 subnormal: normalise its significand
        shift = count_leading_zeros(fraction) - 11
        fraction = (fraction << shift) & FRACTION_64
        field = 1 - shift
    emax = block_params[B_EMAX]
    s = field - 1023 - emax  # floor(log2 m) - emax
    rounding = block_params[B_ROUNDING]
    if rounding == CEIL:
        s += 1 if fraction != 0 else 0
    elif rounding == EVEN:
        # m's significand rounded to the element's fraction bits in its top binade:
        # a carry out of the fraction moves m to the next binade
        kept = emax - block_params[B_TOP_SPACING_EXP]
        if kept < 52:
            dropped = 52 - kept
            half = np.int64(1) << (dropped - 1)
            # (the last kept bit, for the tie: the hidden bit where no fraction bit is kept)
            rounded = fraction + half - 1 + (((fraction | HIDDEN_BIT_64) >> dropped) & 1)
            s += 1 if rounded > FRACTION_64 else 0
    elif rounding == RCEIL:
        s += 1 if fraction > (float64_to_bits(element_max) & FRACTION_64) else 0
    return min(max(s, s_min), s_max)


SMALLEST_NORMAL_64 = 2.0**-1022


@njit(inline="always", **NUMBA_OPTIONS)  # as round_bits: too large for LLVM to inline
def round_element(quotient, value, scale, element_params, mode, random, rand_bits, general):
    """The element value ``q`` of `value` in its block of `scale`: `quotient`
    (``value / scale`` in float64) rounded onto the element format
    (`element_params`, float64 carrier, saturating) in `mode` (`general`: a
    constant, as ``round_bits`` takes it).

    A quotient at or below 2**-1022 from a nonzero `value` may have lost bits:
    `general` rounds the exact quotient (`round_tiny_quotient`). The straight-line
    form (`general` False: no deep elements) takes it as ``copysign(2**-1022,
    value)``, which decides as the exact quotient for the elements it serves,
    those whose smallest positive value is at least 2**-958: nearest gives 0, the
    directed modes, odd and stochastic_equal see a nonzero magnitude of the right
    sign, and stochastic rounding steps up with probability below 2**-64 either
    way."""
    if abs(quotient) <= SMALLEST_NORMAL_64 and value != 0.0:
        if general:
            return round_tiny_quotient(value, scale, element_params, mode, random, rand_bits)
        quotient = math.copysign(SMALLEST_NORMAL_64, value)
    return bits_to_float64(round_bits(float64_to_bits(quotient), element_params, mode, random, rand_bits, general))


@njit(**NUMBA_OPTIONS)  # (not inlined: rare, and it would double the loops' code)
def round_tiny_quotient(value, scale, params, mode, random, rand_bits):
    """``value / scale`` (nonzero `value`; a quotient at most 2**-1022 in
    magnitude) rounded onto the format of `params` (float64 carrier) in `mode`,
    as the exact quotient rounds: ``value * 2**128 / scale`` is a normal float64
    (exact for a power-of-two scale; else rounded once, as a normal quotient is),
    rounded onto the format's grid times 2**128, and the result times 2**-128
    (exact: a value of the format). A quotient below 2**-1150 is taken as
    ``copysign(2**-1150, value)``, more than 2**64 times below the shifted
    grid's least step (at least 2**-946) as the exact one is."""
    shifted = (value * TIMES_TINY_SHIFT) / scale
    if abs(shifted) < SMALLEST_NORMAL_64:
        shifted = math.copysign(SMALLEST_NORMAL_64, value)
    rounded = round_bits(float64_to_bits(shifted), shifted_params(params), mode, random, rand_bits, True)
    return bits_to_float64(rounded) * UNDO_TINY_SHIFT


@njit(inline="always", **NUMBA_OPTIONS)
def _times_tiny_shift(bits):
    """The float64 bits of the positive value of `bits` times 2**128 (inf's
    where that passes float64's max); 0, inf and the fixed-point formats'
    "no normals" mark (past inf) stay as they are."""
    if bits <= 0 or bits >= INF_BITS_64:
        return bits
    return float64_to_bits(bits_to_float64(bits) * TIMES_TINY_SHIFT)


@njit(**NUMBA_OPTIONS)
def shifted_params(params):
    """The kernel parameters (float64 carrier, saturating) of the format whose
    values are those of `params`' times 2**128, for magnitudes below 2**-894:
    the thresholds and values move up 128 binades (the largest ones may become
    inf, which no result there reaches), as many bits drop below the least
    normal, and half a least step is one the carrier holds. 128 is even, so the
    parity of an exponent field, which a format without fraction bits takes for
    its code's, stays; and every format's least normal, at least 2**-1074,
    becomes a normal float64 (not deep)."""
    for field in (P_MIN_NORMAL_BITS, P_BELOW_QUANTUM_BITS, P_MAX_POS_BITS, P_MAX_NEG_BITS, P_OVERFLOW_POS_BITS,
                  P_OVERFLOW_NEG_BITS):
        params = tuple_setitem(params, field, _times_tiny_shift(params[field]))
    params = tuple_setitem(params, P_BELOW_DROP_OFFSET, params[P_BELOW_DROP_OFFSET] + TINY_SHIFT)
    half_quantum = bits_to_float64(params[P_BELOW_QUANTUM_BITS]) * 0.5
    params = tuple_setitem(params, P_HALF_QUANTUM_BITS, float64_to_bits(half_quantum))
    return tuple_setitem(params, P_DEEP, 0)


@njit(inline="always", **NUMBA_OPTIONS)
def significand_scale(largest, float_params, scale_params):
    """The scale (a value of the scale format) of a block whose largest finite
    magnitude is `largest`: ``largest / (element_max * g)`` rounded to nearest
    even (saturating at the scale format's max) and at least its smallest value.

    A quotient in the scale format's normal range, a normal float64 of at most
    51 fraction bits' binade (every scale format of 1 to 51 fraction bits),
    rounds in float64 arithmetic: over its step ``2**(e - man_bits)`` it lies in
    ``[2**man_bits, 2**(man_bits + 1))``, where adding and taking away 2**52
    rounds it to an integer, ties to even (the default floating-point
    environment, which the scaled kernels run in). A quotient at or below
    2**-1022, which may have lost bits, takes `round_tiny_quotient`; the rest
    (quotients below the scale format's normals, formats without fraction bits)
    ``round_bits``."""
    divisor = float_params[F_ELEMENT_MAX] * float_params[F_TENSOR_SCALE]
    quotient = largest / divisor
    scale_max = float_params[F_SCALE_MAX]
    if quotient >= scale_max:  # (inf among them) saturates
        return scale_max
    man_bits = scale_params[P_MAN_BITS]
    bits = float64_to_bits(quotient)
    exponent = ((bits >> 52) & 0x7FF) - 1023
    if (1 <= man_bits <= 51 and bits >= scale_params[P_MIN_NORMAL_BITS]
            and exponent - man_bits >= MIN_EXPONENT_64 and scale_params[P_DEEP] == 0):
        step = power_of_two(exponent - man_bits)
        rounded = ((quotient * power_of_two(man_bits - exponent) + TWO_52) - TWO_52) * step
    elif quotient <= SMALLEST_NORMAL_64 and largest != 0.0:
        rounded = round_tiny_quotient(largest, divisor, scale_params, NEAREST, np.uint64(0), 64)
    else:
        rounded = bits_to_float64(round_bits(bits, scale_params, NEAREST, np.uint64(0), 64, True))
    return min(max(rounded, float_params[F_SCALE_MIN]), scale_max)


@njit(**NUMBA_OPTIONS)
def power_of_two(exponent):
    """``2.0**exponent`` for an exponent in [-1022, 1023], from its bits."""
    return bits_to_float64(np.int64(exponent + 1023) << 52)
