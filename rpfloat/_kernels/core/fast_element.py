"""The fast path every format with a fast range takes: `fast_round_bits`, and
the range it serves (`fast_bounds`, `checked_magnitude`).

It rounds the common magnitudes only (no overflow, inf, NaN or carrier subnormal
below the format's grid) with fewer instructions than ``element.round_bits``
and the same decisions; a backend runs it over its elements and gives what lay
outside its range to ``round_bits`` again (the CPU's block loop,
``cpu.loops``; the CUDA kernels, ``cuda.kernels``). The CPU's other fast paths
(``cpu.fast_*``) serve narrower cases faster.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from .bits import NUMBA_OPTIONS, bit_xor, shift_left, shift_right
from .element import (
    LOW_32_MASK, U_32, U_63, U_63_ONES, U_ONE, U_SIGN_64, directed_bias, same_width, shift_mask, step_below,
)
from .layout import (
    NEAREST, NEAREST_AWAY, ODD, P_BELOW_DROP_OFFSET, P_BELOW_QUANTUM_BITS, P_CARRIER_MAN_BITS, P_FAST_ALIGNED_BITS,
    P_FAST_DROP_MIN, P_FAST_DROP_OFFSET, P_FAST_HIGH_BITS, P_FAST_LOW_BITS, P_FAST_LOW_RANDOM_BITS,
    P_FAST_RANGE_MASK, P_NO_NEGATIVE_ZERO, STOCHASTIC, STOCHASTIC_EQUAL, TOWARD_ZERO, UP, DOWN,
)
from .stream import top_bits_mask_32, top_bits_mask_64

# the modes `fast_round_bits` decides (in mode-number order); a mode added to
# core.element.round_bits alone takes the table's general loop
FAST_BITS_MODES = (NEAREST, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC, STOCHASTIC_EQUAL)

def stochastic_bias(template, random, width, rand_bits):
    """The top `width` bits of the uint64 `random` (0 <= width <= 25 for int32
    data, <= 54 for int64) with those beyond its top `rand_bits` cleared, as an
    integer of `template`'s type: the stochastic rounding bias. For int32 data
    only the high half of `random` is read."""
    raise NotImplementedError("stochastic_bias runs inside numba kernels only")


@overload(stochastic_bias, jit_options=NUMBA_OPTIONS)
def _stochastic_bias(template, random, width, rand_bits):
    if template == types.int32:
        def bias_32(template, random, width, rand_bits):
            high = np.uint32(random >> U_32)
            high = np.uint32(high & top_bits_mask_32(rand_bits, 0))
            # width 0 (shift 32 & 31 = 0) leaves bits that the caller masks off
            return np.int32(shift_right(high, np.uint32(np.int32(np.int32(32) - width) & np.int32(31))))
        return bias_32

    def bias_64(template, random, width, rand_bits):
        kept = random & top_bits_mask_64(rand_bits)
        # width 0 (shift 64 & 63 = 0) leaves bits that the caller masks off
        return np.int64(kept >> np.uint64((64 - np.int64(width)) & 63))
    return bias_64


def stochastic_up_word(template, sig, drop, random, rand_bits):
    """`stochastic_up` for ``sig < 2**(W-drop)`` (W = 32 for int32 data, 64 for int64):
    the threshold fits one word. For int32 data only the high half of `random`
    is read."""
    raise NotImplementedError("stochastic_up_word runs inside numba kernels only")


@overload(stochastic_up_word, jit_options=NUMBA_OPTIONS)
def _stochastic_up_word(template, sig, drop, random, rand_bits):
    if template == types.int32:
        def up_32(template, sig, drop, random, rand_bits):
            # unsigned a < b as signed (a ^ 2**31) < (b ^ 2**31): for the complement a,
            # a ^ 2**31 is the high half xor 0x7FFFFFFF
            flipped = np.int32(bit_xor(np.uint32(random >> U_32), np.uint32(0x7FFFFFFF)))
            mask = top_bits_mask_32(rand_bits, 0)
            shift = np.uint32(np.int32(np.int32(32) - drop) & np.int32(31))  # 32 - drop is in 0..8
            threshold = np.uint32(shift_left(np.uint32(sig), shift) & mask)
            return flipped < np.int32(bit_xor(threshold, np.uint32(0x80000000)))
        return up_32

    def up_64(template, sig, drop, random, rand_bits):
        mask = top_bits_mask_64(rand_bits)
        shift = np.uint64((64 - drop) & 63)  # 64 - drop is in 0..11
        threshold = (np.uint64(sig) << shift) & mask
        # unsigned a < b as signed (a ^ 2**63) < (b ^ 2**63), a the complement
        return np.int64(random ^ U_63_ONES) < np.int64(threshold ^ U_SIGN_64)
    return up_64


def sign_bit_of(template):
    """The sign bit of `template`'s type (int32 or int64), as that type."""
    raise NotImplementedError("sign_bit_of runs inside numba kernels only")


@overload(sign_bit_of, jit_options=NUMBA_OPTIONS)
def _sign_bit_of(template):
    bit = np.int32(-(2**31)) if template == types.int32 else np.int64(-(2**63))
    return lambda template: bit


@njit(**NUMBA_OPTIONS)
def fast_round_bits(bits, params, mode, random, rand_bits):
    """`round_bits` for magnitudes in ``[fast_low_bits, fast_high_bits]``: no NaN,
    inf or overflow (at most the format's largest value), and none below the
    carrier's normals unless the format's spacing there is at least one carrier
    normal (``fast_aligned_bits``). From one spacing up the format's grid is a
    grid of the magnitude bits ("add a bias, clear the low bits", with
    ``max(fast_drop_min, fast_drop_offset - exponent field)`` bits dropped); below
    it the result is 0 or one spacing. Stochastic rounding below one spacing
    compares with the fraction's top word only, so there the range starts where
    the fraction's bits fit one word (``fast_low_random_bits``), and zeros, which
    never step up (the loop's range check counts them in: `checked_magnitude`). Formats whose
    range is empty (man_bits == 0, deep, wrap-around) never come here. For int32
    data only the high half of `random` is read; the decisions are `round_bits`'."""
    one = same_width(bits, 1)
    zero = same_width(bits, 0)
    carrier_man_bits = same_width(bits, params[P_CARRIER_MAN_BITS] & shift_mask(bits))
    hidden = shift_left(one, carrier_man_bits)
    sign_bit = sign_bit_of(bits)
    negative = bits < zero
    magnitude = same_width(bits, bits & ~sign_bit)
    biased = shift_right(magnitude, carrier_man_bits)
    below = magnitude < same_width(bits, params[P_FAST_ALIGNED_BITS])
    drop = same_width(bits, max(same_width(bits, params[P_FAST_DROP_MIN]),
                                same_width(bits, same_width(bits, params[P_FAST_DROP_OFFSET]) - biased)))
    drop = same_width(bits, drop & shift_mask(bits))  # garbage (unused) below one spacing
    low_mask = same_width(bits, shift_left(one, drop) - one)
    sig = same_width(bits, (magnitude & (hidden - one)) | hidden)
    step = step_below(magnitude, negative, params, mode)
    if mode == NEAREST:
        odd_code = same_width(bits, shift_right(sig, drop) & one)
        bias = same_width(bits, (shift_right(low_mask, one) + odd_code) & low_mask)
    elif mode == NEAREST_AWAY:
        bias = same_width(bits, shift_right(same_width(bits, low_mask + one), one))
    elif mode == TOWARD_ZERO or mode == UP or mode == DOWN:
        bias = directed_bias(low_mask, negative, mode)
    elif mode == ODD:
        odd_code = same_width(bits, shift_right(sig, drop) & one)
        inexact = same_width(bits, (magnitude & low_mask) != zero)
        bias = shift_left(same_width(bits, inexact & ~odd_code), drop)
    elif mode == STOCHASTIC:
        bias = same_width(bits, stochastic_bias(bits, random, drop, rand_bits) & low_mask)
        below_drop = same_width(bits, same_width(bits, params[P_BELOW_DROP_OFFSET]) - biased)
        # a zero (sig would read as the hidden bit) never steps up
        step = stochastic_up_word(bits, sig, below_drop, random, rand_bits) & (magnitude != zero)
    else:  # STOCHASTIC_EQUAL
        up = (random >> U_63) == U_ONE
        bias = low_mask if up else zero
        step = magnitude != zero if up else False
    if below:
        result = same_width(bits, params[P_BELOW_QUANTUM_BITS]) if step else zero
    else:
        result = same_width(bits, same_width(bits, magnitude + bias) & ~low_mask)
    unsigned_zero = same_width(bits, -same_width(bits, result == zero)) & same_width(bits, -params[P_NO_NEGATIVE_ZERO])
    return same_width(bits, result | (bits & sign_bit & ~unsigned_zero))


@njit(**NUMBA_OPTIONS)
def range_magnitude(bits, params):
    """What must lie in the fast path's range (`fast_round_bits`): the magnitude.
    Where negatives are not in it (unsigned formats), the range mask keeps the
    sign bit, so that their bits are negative integers, below the range."""
    return same_width(bits, bits & same_width(bits, params[P_FAST_RANGE_MASK]))


@njit(**NUMBA_OPTIONS)
def fast_bounds(params, mode, halves):
    """The fast range in `mode`: the least and greatest range magnitude
    (`range_magnitude`, int64) that the fast loop rounds. For the halves loop
    (`halves`, ``fast_stochastic_float64.round_block``) it starts at one spacing, and is narrowed
    to what the high words tell: from a multiple of 2**32, to one below a multiple."""
    low = params[P_FAST_LOW_RANDOM_BITS] if mode == STOCHASTIC else params[P_FAST_LOW_BITS]
    high = params[P_FAST_HIGH_BITS]
    if halves:
        low = max(low, params[P_FAST_ALIGNED_BITS]) + LOW_32_MASK
        low -= low & LOW_32_MASK
        high -= (high + 1) & LOW_32_MASK
    return low, high


@njit(**NUMBA_OPTIONS)
def checked_magnitude(bits, low, params, zero_ok):
    """`range_magnitude` as the range check sees it: where the fast loop also
    rounds zeros (`zero_ok`), a zero range magnitude counts as `low`."""
    magnitude = range_magnitude(bits, params)
    if zero_ok:
        return same_width(bits, low) if magnitude == same_width(bits, 0) else magnitude
    return magnitude
