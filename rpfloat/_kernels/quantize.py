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
def round_bits(bits, params, mode, random, rand_bits, general):
    """Round one carrier value, given and returned as its (sign-extended) bits.

    `random` is a uint64 of random bits (used by the stochastic modes only);
    `rand_bits` in 1..64 is how many of its top bits make the probability.
    `general` (a compile-time constant at every call) enables the two rare paths,
    formats whose emin lies below the carrier's and fixed-point wrap-around; the
    fast loops leave them out so that the loop body is a straight line that LLVM
    turns into SIMD code. Written with selects rather than early returns for the
    same reason.
    """
    carrier_man_bits = params[0]
    carrier_bias = params[1]
    man_bits = params[2]
    emin = params[3]
    hidden = ONE << carrier_man_bits
    inf_bits = ((carrier_bias << ONE) + ONE) << carrier_man_bits
    abs_mask = inf_bits | (hidden - ONE)  # every bit below the sign
    sign_bit = abs_mask + ONE  # wraps to int64's minimum for float64
    quiet_nan = inf_bits | (hidden >> ONE)
    # (1) sign off; NaN and inf are resolved at the end -----------------------
    negative = bits < 0
    magnitude = bits & abs_mask
    # (2) exponent of x and the format's spacing there --------------------------
    biased = magnitude >> carrier_man_bits
    is_normal = biased != 0
    biased_or_one = max(biased, ONE)
    exponent = biased_or_one - carrier_bias
    if general and params[13] and not is_normal and magnitude != 0:
        exponent = 63 - count_leading_zeros(magnitude) + 1 - carrier_bias - carrier_man_bits
    sig = (magnitude & (hidden - ONE)) | (hidden if is_normal else ZERO)
    # carrier subnormals lie below every format's min_normal, except where their
    # exponent was worked out just above (formats reaching below the carrier)
    exact_exponent = general and params[13] != 0
    below = (exponent < emin) | (not is_normal and not exact_exponent)
    carrier_exp = biased_or_one - carrier_bias - carrier_man_bits
    quantum_exp = params[5] if below else exponent - man_bits
    raw_drop = quantum_exp - carrier_exp
    drop = max(raw_drop, ZERO)  # 0: exact in the carrier's precision
    # (3) the increment the mode asks for ---------------------------------------
    clipped = min(drop, carrier_man_bits + 2)
    kept = sig >> clipped
    rest = sig & ((ONE << clipped) - ONE)
    half = (ONE << clipped) >> ONE
    # code parity: k's, except for man_bits == 0, where it is the exponent field's
    odd_code = (kept & ((exponent + params[4]) | np.int64(man_bits != 0)) & ONE) == ONE
    inexact = rest != 0
    if mode == NEAREST:
        tie_up = odd_code | (below & (params[6] == 1))
        increment = np.int64((rest > half) | ((rest == half) & tie_up & inexact))
    elif mode == NEAREST_AWAY:
        increment = np.int64((rest >= half) & inexact)
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
        up_shift = np.uint64(max(shift, ZERO))
        down_shift = np.uint64(min(max(-shift, ZERO), np.int64(63)))
        threshold = (np.uint64(rest) << up_shift) >> down_shift  # rest < 2**54: >> 63 is 0
        drawn = random >> (U64_BITS - np.uint64(rand_bits))
        increment = np.int64(drawn < threshold)
    else:  # STOCHASTIC_EQUAL
        increment = np.int64(inexact & ((random >> U_63) == U_ONE))
    # (4) back into carrier bits: where the format's grid is a grid of the
    # magnitude bits themselves, truncate and add; else x lies below one spacing
    aligned = drop <= carrier_man_bits + np.int64(biased <= 1)
    if aligned:
        result = ((magnitude >> clipped) + increment) << clipped
    else:
        result = (-increment) & params[7]  # a mask, not a product: no 64-bit multiply in SIMD
    # (5) overflow; +-inf inputs are values beyond max unless the format keeps them
    max_bits = params[9] if negative else params[8]
    if _truncates(mode, negative) or params[10] == OVERFLOW_SATURATE:
        overflowed = max_bits
    elif params[10] == OVERFLOW_INF:
        overflowed = inf_bits
    else:
        overflowed = quiet_nan
    if magnitude >= inf_bits:
        result = inf_bits if params[11] else overflowed
    elif result > max_bits:
        result = overflowed
    if general and params[10] == OVERFLOW_WRAP:
        if magnitude >= inf_bits:
            result = quiet_nan
        else:
            wrapped = _wrap(sig, raw_drop, kept + increment, negative, params)
            result = wrapped & abs_mask
            negative = wrapped < 0
    # (6) the sign; NaN stays NaN, payload and all ------------------------------
    if negative and not (result == 0 and params[12]):
        result |= sign_bit
    return bits if magnitude > inf_bits else result


def _loop_signature(bits_type):
    source = types.Array(bits_type, 1, "C", readonly=True)  # writeable arrays convert to it
    target = types.Array(bits_type, 1, "C")
    return types.void(source, target, PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64)


SIGNATURES = [_loop_signature(types.int32), _loop_signature(types.int64)]


@njit(SIGNATURES, **NUMBA_OPTIONS)
def round_array(source, target, params, mode, key, offset, rand_bits):
    """Round every element of `source` (carrier bits) into `target` (may be `source`).

    Element ``i`` draws random number ``offset + i`` of the stream `key`, so a slice
    rounded with the matching offset gives the same bits as the whole array.
    The mode is chosen here, once, so that each loop is compiled for one mode.
    """
    n = source.size
    if params[13] or params[10] == OVERFLOW_WRAP:
        for i in range(n):
            random = splitmix64(key, offset + i)
            target[i] = round_bits(np.int64(source[i]), params, mode, random, rand_bits, True)
    elif mode == NEAREST:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, NEAREST, U_ONE, 64, False)
    elif mode == NEAREST_AWAY:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, NEAREST_AWAY, U_ONE, 64, False)
    elif mode == TOWARD_ZERO:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, TOWARD_ZERO, U_ONE, 64, False)
    elif mode == UP:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, UP, U_ONE, 64, False)
    elif mode == DOWN:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, DOWN, U_ONE, 64, False)
    elif mode == ODD:
        for i in range(n):
            target[i] = round_bits(np.int64(source[i]), params, ODD, U_ONE, 64, False)
    elif mode == STOCHASTIC:
        for i in range(n):
            random = splitmix64(key, offset + i)
            target[i] = round_bits(np.int64(source[i]), params, STOCHASTIC, random, rand_bits, False)
    else:
        for i in range(n):
            random = splitmix64(key, offset + i)
            target[i] = round_bits(np.int64(source[i]), params, STOCHASTIC_EQUAL, random, 64, False)
