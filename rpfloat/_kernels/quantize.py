"""The rounding kernel: one element, and the loops over arrays.

One kernel serves every format, floating or fixed point: the format arrives as a
tuple of plain integers (built once per format and carrier by ``rpfloat._params``),
so a new format never compiles anything. The carrier is float32 (data seen as
int32) or float64 (int64); the arithmetic is int64 throughout, which holds every
magnitude of either carrier without touching the sign bit.

A finite carrier magnitude ``a`` (the bits without the sign) splits as::

    a = E EEEEEEEE | MMMMMMM...M          (carrier exponent field E, C_MAN bits M)
    x = sig * 2**c_exp,  sig = 1.M (E > 0) or 0.M (E == 0)

The format's spacing at x is ``2**q_exp``; ``drop = q_exp - c_exp`` low bits of
``sig`` are rounded away::

    sig = K KKKK|R TTTT      K: kept (k), R: round bit (half), T: sticky bits

Steps: (1) NaN / inf, (2) sign off, (3) the exponent of x and the spacing there,
(4) the increment that the mode asks for, (5) put the result back into carrier
bits, (6) overflow policy, (7) sign back on (no -0 where the format has none).
Rounding is on the magnitude, so every mode is sign-symmetric except up/down,
which pick "away from zero" or "toward zero" by the sign.
"""
import numpy as np
from numba import njit, types

from ._bits import (
    NUMBA_OPTIONS,
    bits_to_float64,
    count_leading_zeros,
    float32_to_bits,
    float64_to_bits,
)
from .random import splitmix64

# Rounding modes, as in rpfloat.modes.Mode (kept as plain ints for numba).
NEAREST, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC, STOCHASTIC_EQUAL = range(8)

# Overflow policies.
OVERFLOW_INF, OVERFLOW_SATURATE, OVERFLOW_NAN, OVERFLOW_WRAP = range(4)

# Layout of the parameter tuple (see rpfloat._params.kernel_params).
PARAM_NAMES = (
    "carrier_man_bits",   # 23 or 52
    "carrier_bias",       # 127 or 1023
    "man_bits",           # format significand bits (fixed point: 1, unused)
    "emin",               # format exponent of min_normal (fixed point: huge)
    "bias_parity",        # format bias & 1: code parity when man_bits == 0
    "below_quantum_exp",  # exponent of the spacing below min_normal (fixed: -frac_bits)
    "below_tie_up",       # 1: ties below min_normal go up (no subnormals, man_bits >= 1)
    "below_quantum_bits",  # carrier bits of 2**below_quantum_exp
    "max_pos_bits",       # carrier bits of the largest positive value
    "max_neg_bits",       # carrier bits of the magnitude of the most negative value
    "overflow",           # OVERFLOW_*
    "keep_inf",           # 1: +-inf inputs are values of the format and stay
    "no_negative_zero",   # 1: a zero result is +0
    "deep",               # 1: emin below the carrier's, carrier subnormals need their exponent
    "word_bits",          # fixed point wrap: word length w
    "signed",             # fixed point wrap: two's complement
    "scale_bits",         # fixed point wrap: float64 bits of 2**-frac_bits
)
N_PARAMS = len(PARAM_NAMES)
PARAMS_TYPE = types.UniTuple(types.int64, N_PARAMS)

ONE = np.int64(1)
ZERO = np.int64(0)
U64_BITS = np.uint64(64)
U_ONE = np.uint64(1)
U_63 = np.uint64(63)


@njit(inline="always", **NUMBA_OPTIONS)
def _truncates(mode, negative):
    """Whether `mode` rounds this sign's magnitudes toward zero (never overflows)."""
    return (mode == TOWARD_ZERO) | ((mode == UP) & negative) | ((mode == DOWN) & ~negative)


@njit(inline="always", **NUMBA_OPTIONS)
def _wrap(sig, drop, kept, negative, params):
    """Carrier bits of the two's complement wrap of the rounded fixed-point integer."""
    word_bits = params[14]
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
    if params[15] and count >= (ONE << (word_bits - ONE)):
        count -= ONE << word_bits
    value = np.float64(count) * bits_to_float64(params[16])
    if params[0] == 23:
        return np.int64(float32_to_bits(np.float32(value)))
    return float64_to_bits(value)


@njit(inline="always", **NUMBA_OPTIONS)
def round_bits(bits, params, mode, random, rand_bits):
    """Round one carrier value, given and returned as its (sign-extended) bits.

    `random` is a uint64 of random bits (used by the stochastic modes only);
    `rand_bits` in 1..64 is how many of its top bits make the probability.
    """
    carrier_man_bits = params[0]
    carrier_bias = params[1]
    man_bits = params[2]
    emin = params[3]
    # (1) special values ------------------------------------------------------
    hidden = ONE << carrier_man_bits
    inf_bits = ((carrier_bias << ONE) + ONE) << carrier_man_bits
    abs_mask = inf_bits | (hidden - ONE)  # every bit below the sign
    sign_bit = abs_mask + ONE  # wraps to int64's minimum for float64
    negative = bits < 0
    magnitude = bits & abs_mask
    if magnitude > inf_bits:
        return bits  # NaN stays NaN, payload and all
    if magnitude == inf_bits and params[11]:
        result = magnitude
    else:
        # (3) exponent of x and the format's spacing there --------------------
        biased = magnitude >> carrier_man_bits
        if biased == 0:
            sig = magnitude
            carrier_exp = 1 - carrier_bias - carrier_man_bits
            exponent = 1 - carrier_bias
            if params[13] and magnitude != 0:
                exponent = 63 - count_leading_zeros(magnitude) + carrier_exp
        else:
            sig = (magnitude & (hidden - ONE)) | hidden
            carrier_exp = biased - carrier_bias - carrier_man_bits
            exponent = biased - carrier_bias
        below = exponent < emin
        if below:
            quantum_exp = params[5]
        else:
            quantum_exp = exponent - man_bits
        drop = quantum_exp - carrier_exp
        if magnitude == inf_bits:
            drop = ZERO  # an infinity to be treated as a value beyond max
        # (4) the increment ------------------------------------------------------
        if drop <= 0:
            kept = sig
            increment = ZERO
            result = magnitude
        else:
            clipped = min(drop, carrier_man_bits + 2)
            kept = sig >> clipped
            rest = sig & ((ONE << clipped) - ONE)
            half = ONE << (clipped - ONE)
            if man_bits == 0:
                # the code's parity is the exponent field's
                odd_code = (kept != 0) & (((exponent + params[4]) & ONE) == 1)
            else:
                odd_code = (kept & ONE) == 1
            inexact = rest != 0
            if mode == NEAREST:
                tie_up = odd_code | (below & (params[6] == 1))
                increment = np.int64((rest > half) | ((rest == half) & tie_up))
            elif mode == NEAREST_AWAY:
                increment = np.int64(rest >= half)
            elif mode == TOWARD_ZERO:
                increment = ZERO
            elif mode == UP:
                increment = np.int64(inexact & ~negative)
            elif mode == DOWN:
                increment = np.int64(inexact & negative)
            elif mode == ODD:
                increment = np.int64(inexact & ~odd_code)
            elif mode == STOCHASTIC:
                # up iff r < floor(rest * 2**rand_bits / 2**drop): P = floor(frac * 2**r) / 2**r
                shift = rand_bits - drop
                if shift >= 0:
                    threshold = np.uint64(rest) << np.uint64(shift)
                elif shift > -64:
                    threshold = np.uint64(rest) >> np.uint64(-shift)
                else:
                    threshold = np.uint64(0)
                drawn = random >> (U64_BITS - np.uint64(rand_bits))
                increment = np.int64(drawn < threshold)
            else:  # STOCHASTIC_EQUAL
                increment = np.int64(inexact & ((random >> U_63) == U_ONE))
            # (5) back into carrier bits: where the format's grid is a grid of `a`
            # itself, truncate and add; else x is below one spacing (0 or one step)
            if drop <= carrier_man_bits + np.int64(biased <= 1):
                result = ((magnitude >> drop) + increment) << drop
            else:
                result = increment * params[7]
        # (6) overflow --------------------------------------------------------------
        if params[10] == OVERFLOW_WRAP:
            if magnitude == inf_bits:
                return inf_bits + (ONE << (carrier_man_bits - ONE))
            result = _wrap(sig, drop, kept + increment if drop > 0 else kept, negative, params)
            return result if (result & abs_mask) != 0 else ZERO
        max_bits = params[9] if negative else params[8]
        if result > max_bits:
            if _truncates(mode, negative) or params[10] == OVERFLOW_SATURATE:
                result = max_bits
            elif params[10] == OVERFLOW_INF:
                result = inf_bits
            else:
                result = inf_bits + (ONE << (carrier_man_bits - ONE))  # quiet NaN
    # (7) the sign ---------------------------------------------------------------
    if negative and not (result == 0 and params[12]):
        result |= sign_bit
    return result


def _loop_signature(bits_type):
    array = types.Array(bits_type, 1, "C")
    return types.void(array, array, PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64)


SIGNATURES = [_loop_signature(types.int32), _loop_signature(types.int64)]


@njit(SIGNATURES, **NUMBA_OPTIONS)
def round_array(source, target, params, mode, key, offset, rand_bits):
    """Round every element of `source` (carrier bits) into `target` (may be `source`).

    Element ``i`` draws random number ``offset + i`` of the stream `key`, so a slice
    rounded with the matching offset gives the same bits as the whole array.
    The mode is chosen here, once, so that each loop is compiled for one mode.
    """
    n = source.size
    if mode == NEAREST:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, NEAREST, U_ONE, 64)
    elif mode == NEAREST_AWAY:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, NEAREST_AWAY, U_ONE, 64)
    elif mode == TOWARD_ZERO:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, TOWARD_ZERO, U_ONE, 64)
    elif mode == UP:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, UP, U_ONE, 64)
    elif mode == DOWN:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, DOWN, U_ONE, 64)
    elif mode == ODD:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, ODD, U_ONE, 64)
    elif mode == STOCHASTIC:
        for i in range(n):
            random = splitmix64(key, offset + i)
            target[i] = round_bits(np.int64(source[i]), params, STOCHASTIC, random, rand_bits)
    else:
        for i in range(n):
            random = splitmix64(key, offset + i)
            target[i] = round_bits(np.int64(source[i]), params, STOCHASTIC_EQUAL, random, 64)
