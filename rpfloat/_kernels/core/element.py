"""Rounding one carrier value onto a format: `round_bits`, integer operations only.

This is what every backend shares: the array loops (``rpfloat._kernels.cpu``) call
it for every element their fast paths leave, and it alone decides every case.
The format arrives as the parameter tuple of ``layout.PARAM_NAMES`` (plain
integers), so a new format never compiles anything. The carrier is float32, seen
as int32, or float64, seen as int64; the arithmetic stays in that width so that
float32 data fill eight SIMD lanes.

A finite carrier magnitude ``a`` (the bits without the sign) splits as::

    a = E EEEEEEEE | MMMMMMM...M          (carrier exponent field E, carrier_man_bits M)
    x = sig * 2**c_exp,  sig = 1.M (E > 0) or 0.M (E == 0)

The format's spacing at x is ``2**q_exp``; ``drop = q_exp - c_exp`` low bits of
``sig`` are rounded away::

    sig = K KKKK|R TTTT      K: kept (k), R: the half bit, T: the rest

Wherever the format's grid is a grid of ``a`` itself (every x at or above one
spacing), rounding is "add a mode-dependent bias below K, clear the low bits":
carries run into the exponent field by themselves. Below one spacing the result
is 0 or one spacing. Steps: (1) sign off, (2) where x lies and how many bits go,
(3) the bias or step the mode asks for, (4) overflow policy and +-inf,
(5) the sign back on (no -0 where the format has none); NaN passes unchanged.
Rounding is on the magnitude, so every mode is sign-symmetric except up/down,
which pick "away from zero" or "toward zero" by the sign.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from .bits import (
    NUMBA_OPTIONS, bits_to_float64, count_leading_zeros, float32_to_bits, float64_to_bits, shift_left, shift_right,
)
from .layout import (
    DOWN, NEAREST, NEAREST_AWAY, ODD, OVERFLOW_WRAP, P_BELOW_DROP_OFFSET, P_BELOW_QUANTUM_BITS, P_BELOW_TIE_UP,
    P_BIAS_PARITY, P_CARRIER_BIAS, P_CARRIER_MAN_BITS, P_DEEP, P_HALF_QUANTUM_BITS, P_KEEP_INF, P_MAN_BITS,
    P_MAX_NEG_BITS, P_MAX_POS_BITS, P_MIN_NORMAL_BITS, P_NO_NEGATIVE_ZERO, P_OVERFLOW, P_OVERFLOW_NEG_BITS,
    P_OVERFLOW_POS_BITS, P_PARITY_OFFSET, P_SCALE_BITS, P_SIGNED, P_WORD_BITS, STOCHASTIC, TOWARD_ZERO, UP,
)
from .stream import top_bits_mask_32

ONE = np.int64(1)
ZERO = np.int64(0)
U64_BITS = np.uint64(64)
U_ONE = np.uint64(1)
U_ZERO = np.uint64(0)
U_63 = np.uint64(63)
U_32 = np.uint64(32)
U_63_ONES = np.uint64(0x7FFFFFFFFFFFFFFF)
U_SIGN_64 = np.uint64(0x8000000000000000)
U_LOW_32 = np.uint64(0xFFFFFFFF)
LOW_32_MASK = np.int64(0xFFFFFFFF)


@njit(**NUMBA_OPTIONS)
def _truncates(mode, negative):
    """Whether `mode` rounds this sign's magnitudes toward zero (never overflows)."""
    return (mode == TOWARD_ZERO) | ((mode == UP) & negative) | ((mode == DOWN) & ~negative)


@njit(**NUMBA_OPTIONS)
def _wrap(sig, drop, kept, negative, params):
    """Carrier bits of the two's complement wrap of the rounded fixed-point integer."""
    word_bits = params[P_WORD_BITS]
    word_mask = (ONE << word_bits) - ONE
    if drop > 0:
        count = kept
    elif -drop >= 64:
        count = ZERO
    else:
        count = sig << (-drop)  # the integer k; high bits lost are multiples of 2**64
    count &= word_mask
    if negative:
        count = (-count) & word_mask
    if params[P_SIGNED] and count >= (ONE << (word_bits - ONE)):
        count -= ONE << word_bits
    value = np.float64(count) * bits_to_float64(params[P_SCALE_BITS])
    if params[P_CARRIER_MAN_BITS] == 23:
        return np.int64(float32_to_bits(np.float32(value)))
    return float64_to_bits(value)


def same_width(template, value):
    """`value` as an integer of `template`'s type (int32 or int64)."""
    raise NotImplementedError("same_width runs inside numba kernels only")


@overload(same_width, jit_options=NUMBA_OPTIONS)
def _same_width(template, value):
    width = np.int32 if template == types.int32 else np.int64
    return lambda template, value: width(value)


def shift_mask(template):
    """31 for int32, 63 for int64: masking a shift count with it tells LLVM the
    shift stays inside the type, which lets it keep int32 shifts in int32 lanes."""
    raise NotImplementedError("shift_mask runs inside numba kernels only")


@overload(shift_mask, jit_options=NUMBA_OPTIONS)
def _shift_mask(template):
    mask = 31 if template == types.int32 else 63
    return lambda template: mask


@njit(**NUMBA_OPTIONS)
def step_below(magnitude, negative, params, mode):
    """Deterministic modes, below one spacing (the result is 0 or one spacing):
    whether the magnitude steps up. Nearest: a tie steps up only where the format
    has no subnormals (m > h or m == h and t  <=>  m > h - t)."""
    zero = same_width(magnitude, 0)
    if mode == NEAREST:
        return magnitude > same_width(magnitude, params[P_HALF_QUANTUM_BITS] - params[P_BELOW_TIE_UP])
    if mode == NEAREST_AWAY:
        return magnitude >= same_width(magnitude, params[P_HALF_QUANTUM_BITS])
    if mode == UP:
        return False if negative else magnitude != zero
    if mode == DOWN:
        return magnitude != zero if negative else False
    if mode == ODD:
        return magnitude != zero
    return False  # toward zero; the stochastic modes decide for themselves


@njit(**NUMBA_OPTIONS)
def directed_bias(low_mask, negative, mode):
    """toward_zero, up, down: all dropped bits (away from zero) or none."""
    zero = same_width(low_mask, 0)
    if mode == UP:
        return zero if negative else low_mask
    if mode == DOWN:
        return low_mask if negative else zero
    return zero


def stochastic_up(template, rest, drop, random, rand_bits):
    """Whether stochastic rounding steps up: ``floor(R / 2**(64-r)) < floor(rest * 2**(r-drop))``
    for the uint64 random number R and r = `rand_bits`, that is ``R < T`` with
    ``T = rest * 2**(64-drop)`` cut to its top r bits (``0 <= rest < 2**max(drop, 0)``).
    For int32 data (``rest < 2**25``) this runs in 32-bit halves, so that float32
    data keep eight SIMD lanes; the low half of R decides only where the high
    halves tie."""
    raise NotImplementedError("stochastic_up runs inside numba kernels only")


@overload(stochastic_up, jit_options=NUMBA_OPTIONS)
def _stochastic_up(template, rest, drop, random, rand_bits):
    if template == types.int32:
        return _stochastic_up_halves
    return _stochastic_up_64



def _clamped_shift(value, count):
    """`value` (uint32) times 2**count, floored, for any int32 `count`."""
    raise NotImplementedError


@overload(_clamped_shift, jit_options=NUMBA_OPTIONS)
def _clamped_shift_impl(value, count):
    def impl(value, count):
        left = shift_left(value, np.uint32(min(max(count, np.int32(0)), np.int32(31))))
        right = shift_right(value, np.uint32(min(max(-count, np.int32(0)), np.int32(31))))
        return left if count >= 0 else right
    return impl


def _stochastic_up_halves(template, rest, drop, random, rand_bits):
    high = np.uint32(random >> U_32)
    low = np.uint32(random & U_LOW_32)
    value = np.uint32(rest)
    threshold_high = _clamped_shift(value, np.int32(np.int32(32) - drop))
    low_shift = np.int32(np.int32(64) - drop)
    threshold_low = _clamped_shift(value, low_shift) if low_shift < 32 else np.uint32(0)
    # keep the top r bits of T (r in 1..64): masks that depend on r only
    mask_high = top_bits_mask_32(rand_bits, 0)
    mask_low = top_bits_mask_32(rand_bits, 32)
    threshold_high = np.uint32(threshold_high & mask_high)
    threshold_low = np.uint32(threshold_low & mask_low)
    return (high < threshold_high) | ((high == threshold_high) & (low < threshold_low))


def _stochastic_up_64(template, rest, drop, random, rand_bits):
    # 64-bit arithmetic (rest < 2**54): the fraction scaled to r bits
    shift = rand_bits - np.int64(drop)
    up_shift = np.uint64(min(max(shift, 0), 63))
    down_shift = np.uint64(min(max(-shift, 0), 63))
    threshold = (np.uint64(rest) << up_shift) >> down_shift
    drawn = random >> (U64_BITS - np.uint64(rand_bits))
    return drawn < threshold



@njit(inline="always", **NUMBA_OPTIONS)
def round_bits(bits, params, mode, random, rand_bits, general):
    """Round one carrier value, given and returned as its (sign-extended) bits.

    `bits` is an int32 (float32 carrier) or int64 (float64 carrier); the
    arithmetic stays in that width, so that float32 data fill eight SIMD lanes.
    `random` is a uint64 of random bits (used by the stochastic modes only);
    `rand_bits` in 1..64 is how many of its top bits make the probability.
    `general` (a compile-time constant in every kernel) enables the two rare paths,
    formats whose min_normal is a carrier subnormal and fixed-point wrap-around;
    the fast loops leave them out so that the loop body is a straight line that
    LLVM turns into SIMD code. Written with selects rather than early returns
    for the same reason. Numba widens int32 arithmetic to int64; every step is
    cast back so that LLVM can narrow it again.
    """
    one = same_width(bits, 1)
    zero = same_width(bits, 0)
    carrier_man_bits = same_width(bits, params[P_CARRIER_MAN_BITS] & shift_mask(bits))
    hidden = shift_left(one, carrier_man_bits)
    inf_bits = same_width(bits, (2 * params[P_CARRIER_BIAS] + 1) << params[P_CARRIER_MAN_BITS])
    abs_mask = same_width(bits, inf_bits | (hidden - one))  # every bit below the sign
    sign_bit = same_width(bits, ~abs_mask)
    quiet_nan = same_width(bits, inf_bits | shift_right(hidden, one))
    # (1) sign off; NaN and inf are resolved at the end -----------------------
    negative = bits < zero
    signed_source = bits  # whose sign the result takes (wrap-around may change it)
    magnitude = same_width(bits, bits & abs_mask)
    # (2) where x lies, and how many low bits of its significand go -------------
    biased = shift_right(magnitude, carrier_man_bits)
    below = magnitude < same_width(bits, params[P_MIN_NORMAL_BITS])
    if below:
        drop = same_width(bits, same_width(bits, params[P_BELOW_DROP_OFFSET]) - max(biased, one))
    else:
        drop = same_width(bits, carrier_man_bits - same_width(bits, params[P_MAN_BITS]))
    sig = same_width(bits, (magnitude & (hidden - one)) | (hidden if biased != zero else zero))
    parity_source = same_width(bits, biased + same_width(bits, params[P_PARITY_OFFSET]))
    if general and params[P_DEEP] != 0 and biased == zero and not below and magnitude != zero:
        # a carrier subnormal that is normal in the format: its true exponent
        exponent = 63 - count_leading_zeros(np.int64(magnitude)) + 1 - params[P_CARRIER_BIAS] - params[P_CARRIER_MAN_BITS]
        drop = same_width(bits, exponent - params[P_MAN_BITS] - (1 - params[P_CARRIER_BIAS] - params[P_CARRIER_MAN_BITS]))
        parity_source = same_width(bits, exponent + params[P_BIAS_PARITY])
    raw_drop = drop  # < 0: x is a multiple of the spacing (fixed-point wrap needs it)
    # drop > carrier_man_bits + 1: x lies below half a spacing of the format
    clipped = same_width(bits, min(max(drop, zero), same_width(bits, carrier_man_bits + 2)) & shift_mask(bits))
    # where the format's grid is a grid of the magnitude bits themselves, rounding
    # is "add a bias, clear the low bits"; else x lies below one spacing, which
    # the bits cannot show, and the result is 0 or one spacing
    aligned = clipped <= same_width(bits, carrier_man_bits + (biased <= one))
    low_mask = same_width(bits, shift_left(one, clipped) - one)
    half = same_width(bits, shift_right(low_mask, one) + (low_mask != zero))
    rest = same_width(bits, sig & low_mask)
    # parity of the truncated code: k's, or for man_bits == 0 the exponent field's
    parity_mask = same_width(bits, parity_source | -same_width(bits, params[P_MAN_BITS] != 0))
    odd_code = same_width(bits, shift_right(sig, clipped) & parity_mask & one)
    # (3) the rounding bias (aligned) and the step decision (below one spacing) -
    step = step_below(magnitude, negative, params, mode)
    if mode == NEAREST:
        tie_up = odd_code | (same_width(bits, params[P_BELOW_TIE_UP]) & same_width(bits, below))
        bias = same_width(bits, (half - one + tie_up) & low_mask)
    elif mode == NEAREST_AWAY:
        bias = half
    elif mode == TOWARD_ZERO or mode == UP or mode == DOWN:
        bias = directed_bias(low_mask, negative, mode)
    elif mode == ODD:
        # jam: set the code's last bit when inexact (an increment only if it was clear)
        bias = shift_left(same_width(bits, same_width(bits, rest != zero) & ~odd_code), clipped)
    elif mode == STOCHASTIC:
        # P(up) = floor(frac * 2**r) / 2**r, frac = rest / 2**raw_drop: up where
        # the complement of the random number is below the fraction, the event
        # in which adding the random number's top bits below K carries into K
        # (how `fast_round_bits` decides)
        step = stochastic_up(bits, rest, raw_drop, ~random, rand_bits)
        bias = low_mask if step else zero
    else:  # STOCHASTIC_EQUAL
        step = magnitude != zero if (random >> U_63) == U_ONE else False
        bias = low_mask if step else zero
    if aligned:
        result = shift_left(shift_right(same_width(bits, magnitude + bias), clipped), clipped)
    else:
        result = same_width(bits, params[P_BELOW_QUANTUM_BITS]) if step else zero
    # (4) overflow; +-inf inputs are values beyond max unless the format keeps them
    # (the policy's choice per sign is a parameter: no branch on it in the loop)
    max_bits = same_width(bits, params[P_MAX_NEG_BITS]) if negative else same_width(bits, params[P_MAX_POS_BITS])
    if _truncates(mode, negative):
        overflowed = max_bits
    else:
        overflowed = same_width(bits, params[P_OVERFLOW_NEG_BITS]) if negative else same_width(bits, params[P_OVERFLOW_POS_BITS])
    keep_inf = same_width(bits, -params[P_KEEP_INF])  # all ones or zero
    if magnitude >= inf_bits:
        result = same_width(bits, (inf_bits & keep_inf) | (overflowed & ~keep_inf))
    elif result > max_bits:
        result = overflowed
    if general and params[P_OVERFLOW] == OVERFLOW_WRAP:
        if magnitude >= inf_bits:
            result = quiet_nan
        else:
            if aligned:
                rounded_count = shift_right(same_width(bits, sig + bias), clipped)
            else:
                rounded_count = np.int64(step)
            wrapped = _wrap(np.int64(sig), np.int64(raw_drop), np.int64(rounded_count), negative, params)
            result = same_width(bits, wrapped & abs_mask)
            signed_source = same_width(bits, wrapped)
    # (5) the sign; NaN stays NaN, payload and all --------------------------------
    unsigned_zero = same_width(bits, -same_width(bits, result == zero)) & same_width(bits, -params[P_NO_NEGATIVE_ZERO])
    result = same_width(bits, result | (signed_source & sign_bit & ~unsigned_zero))
    return bits if magnitude > inf_bits else result


