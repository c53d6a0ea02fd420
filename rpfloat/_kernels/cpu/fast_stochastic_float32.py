"""Stochastic rounding onto fixed point by scaling: the element function of the
fast loop of kernel ``loops.round_scaled_stochastic``, for float32 data; and
the same below min_normal for floating-point formats, whose spacing is fixed
there (the smallest subnormal's, or without subnormals min_normal, between 0 and
min_normal: `split_stochastic`, kernel ``loops.round_stochastic_split``: from
min_normal up it rounds as ``fast_same_drop.stochastic_uniform``, with one bit
count).

For a fixed-point format with spacing ``2**-frac_bits`` the magnitude of x
scales to ``a = |x| * 2**frac_bits`` (exact: a power of two), whose integer part
``k = floor(a)`` and fraction ``a - k`` are exact in float32 too (Sterbenz's
lemma for a >= 1). The rounded magnitude is ``k + 1`` with the spec's
probability ``floor(frac * 2**r) / 2**r`` (r = `rand_bits`), that is, with D the
complement of the high half of the element's 64-bit random number (as
``loops`` draws it for float32 data; the low half only matters beyond the
fraction's last bit) and T = ``frac * 2**32``::

    up  iff  (D & M) < (T & M),   M: the top min(r, 32) bits of a word

In the fast range ``a >= 2**-8`` (the range's low end for stochastic rounding:
``2**(carrier_man_bits + 1 - 32)``), so a's last bit, and the fraction's, is
worth 2**-31 at least: T is an even integer below 2**32. The test is then the
same on both sides shifted right by one bit (``(D & M) >> 1 < (T & M) >> 1``),
where T >> 1 = ``frac * 2**31`` is what a signed conversion gives exactly and
both sides compare as signed words: one conversion and one comparison where
x86's AVX2 (no unsigned ones) needs six. D needs no mask (``X = (T & M) >> 1``
is a multiple of the lowest bit that M keeps, so ``D & M < X`` iff ``D < X``),
and with H the random high half shifted right by one, ``D >> 1 = 2**31 - 1 - H``:

    up  iff  H + X >= 2**31,   that is, iff the int32 sum H + X is negative

whose sign bit selects the result: one addition instead of a complement, a
mask and a comparison.

Below 2**-8, T is no longer exact: the high word decides the step wherever
``D >> 1 != X`` (then ``D < T`` and ``D >> 1 < X`` agree whatever the low
words), and leaves it undecided where they are equal, about once in 2**31
elements, but only with more than 31 random bits: with fewer, M keeps neither
D's last bit nor T's, so ``D >> 1 == X`` means ``D & M == T & M``, no step, as
the sum says. The split loop's variant from 0 up (``table.split_from_zero``:
float6, float4 and the like, onto which raw data put a share of values below
2**-8 spacings) flags those (`stochastic_count`'s `tied`) and gives their block
to the general loop. The flag costs the loop two instructions, so the other
formats keep the range from 2**-8 up and send what lies below to the general
loop.

The result ``k * 2**-frac_bits`` (or ``(k + 1) * 2**-frac_bits``) is exact: k + 1
fits the significand wherever a has a fraction, and a has none from 2**23 up.
k + 1 is ``ceil(a)`` there (a rounding instruction, no constant 1 to keep in a
register). A zero result is +0 (fixed point has no -0). `stochastic_count`
returns k or k + 1 and `store_scaled` scales it and gives it x's sign. The loop
takes |x| from the range check (the same operation) and x's sign as ``x ^ |x|``;
into a float64 result (a widening kernel) the scaling joins the exponent's
rebias, an integer addition. With fewer constants live, LLVM keeps them in
registers rather than reload them each iteration (the reloads take shuffle
ports).

The kernel table (``table``) gives the loop the formats of its conditions
``table.scaled_random`` (fixed point, no wrap-around, a float32 carrier,
``2**+-frac_bits`` normal numbers of it) and ``table.stochastic_split``. float64
data keep the bit-level kernel, faster there: AVX2 has no vector conversion of
float64 to 64-bit integers. The arithmetic is on floats, so the thread must keep
subnormal numbers, as for ``fast_fixed.round_scaled`` (the table checks).
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ..core.bits import (
    HIGH_WORD, LOW_WORD, NUMBA_OPTIONS, bit_and, bit_xor, bits_to_float32, float32_to_bits, float64_to_bits, shift_left,
    shift_right, wrapping_add,
)
from ..core.stream import top_bits_mask_32
from .fast_same_drop import stochastic_uniform

SIGN_32 = np.int32(-(2**31))
TWO_31 = np.float32(2.0**31)
SHIFT_33 = np.uint64(33)
MAGNITUDE_32 = np.int32(0x7FFFFFFF)
ONE_32 = np.uint32(1)
THREE = np.uint32(3)
TWENTY_NINE = np.uint32(29)


@njit(**NUMBA_OPTIONS)
def loop_two_31(hidden):
    """``2.0**31`` as a float32 value for `stochastic_count` in a loop, from
    ``bits.hidden_zero``."""
    return bits_to_float32(bit_xor(float32_to_bits(TWO_31), np.int32(hidden)))


@njit(**NUMBA_OPTIONS)
def stochastic_count(scaled, random, rand_bits, two_31):
    """``(count, tied)``: the float32 `scaled` (``a`` of the module docstring,
    from 0 up) rounded stochastically to an integer (a float32), drawing the
    uint64 `random`, and whether the high word left the step undecided (``D >> 1
    == X``: module docstring; then the element must be done again by the
    general loop, which reads the low word too); `two_31` is ``2.0**31``
    (`loop_two_31`)."""
    count = np.floor(scaled)
    half_mask = np.int32(shift_right(top_bits_mask_32(rand_bits, 0), ONE_32))  # M >> 1, M: the top r bits
    half_threshold = bit_and(np.int32((scaled - count) * two_31), half_mask)  # (T & M) >> 1
    half_random = np.int32(random >> SHIFT_33)  # the high half >> 1, whose complement is D >> 1
    total = wrapping_add(half_random, half_threshold)
    up = total < np.int32(0)  # the sum reached 2**31
    return (np.ceil(scaled) if up else count), total == np.int32(0x7FFFFFFF)  # up only where scaled has a fraction


@njit(**NUMBA_OPTIONS)
def split_stochastic(bits, drop, min_normal_bits, quantum_bits, random, rand_bits, two_31):
    """float32 bits `bits` (an int32) rounded stochastically onto a
    floating-point format, sign included: from min_normal up
    (`min_normal_bits`) every magnitude drops the same `drop` bits and rounds as
    ``uniform.stochastic_uniform`` does; below it the spacing is the fixed
    ``2**q_min`` (`quantum_bits`: its float32 bits, a normal number; min_normal
    itself in a format without subnormals), onto which
    the magnitude rounds by scaling, as fixed point does. Valid in the stochastic
    fast range of formats with the ``stochastic_split`` parameter; `two_31` as for
    `stochastic_count`. Returns the result's bits and `stochastic_count`'s `tied`
    (which may be set above min_normal too, where it does not matter: the
    element is only done again)."""
    inverse = bits_to_float32(np.int32(quantum_bits))  # loop invariants: 2**q_min,
    scale = np.float32(1.0) / inverse  # and 2**-q_min, exact (both normal)
    magnitude = bit_and(bits, MAGNITUDE_32)
    count, tied = stochastic_count(bits_to_float32(magnitude) * scale, random, rand_bits, two_31)
    below = np.int32(float32_to_bits(count * inverse) | bit_and(bits, SIGN_32))
    above = stochastic_uniform(bits, drop, random, rand_bits)
    return (above if magnitude >= np.int32(min_normal_bits) else below), tied


def store_scaled(target, i, count, sign, inverse, rebias):
    """``target[i] =`` the result ``count * inverse`` (`count`: a float32 integer
    from `stochastic_count`, `inverse`: the float32 ``2**-frac_bits``) with the
    sign bit `sign` (an int32), +0 for a zero count (fixed point has no -0). A
    widening kernel's target (uint32 pairs) takes the float64 of it, built from
    the count's float32 bits with 32-bit integer operations: `rebias` adds to
    their exponent field, in the high word, the float32 -> float64 bias
    difference and ``-frac_bits`` at once (`widening_rebias`)."""
    raise NotImplementedError("store_scaled runs inside numba kernels only")


@overload(store_scaled, jit_options=NUMBA_OPTIONS)
def _store_scaled(target, i, count, sign, inverse, rebias):
    if target.dtype == types.uint32:
        def store_pair(target, i, count, sign, inverse, rebias):
            word = np.uint32(float32_to_bits(count))
            high = np.uint32(wrapping_add(shift_right(word, THREE), rebias) | np.uint32(sign))
            target[2 * i + HIGH_WORD] = high if word != np.uint32(0) else np.uint32(0)
            target[2 * i + LOW_WORD] = shift_left(word, TWENTY_NINE)
        return store_pair

    def store(target, i, count, sign, inverse, rebias):
        magnitude = float32_to_bits(count * inverse)
        target[i] = np.int32(magnitude | sign) if magnitude != np.int32(0) else np.int32(0)
    return store


@njit(**NUMBA_OPTIONS)
def widening_rebias(inverse_64):
    """What `store_scaled` adds to the high word of a widening kernel's results:
    the exponent field of the float64 ``2**-frac_bits`` (`inverse_64`) less
    float32's bias (the count's), in the field's place (bit 20 up), as a uint32."""
    return np.uint32(np.uint32(float64_to_bits(inverse_64) >> 32) - np.uint32(127 << 20))
