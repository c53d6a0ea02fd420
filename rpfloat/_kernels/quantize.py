"""The rounding kernel: one element (`round_bits`), and the loops over arrays.

One kernel serves every format, floating or fixed point: the format arrives as a
tuple of plain integers (built once per format and carrier by ``rpfloat._params``),
so a new format never compiles anything. The carrier is float32, seen as int32,
or float64, seen as int64; the arithmetic stays in that width so that float32
data fill eight SIMD lanes.

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

Two element functions share this scheme. `round_bits` handles everything.
`fast_round_bits` handles the common magnitudes only (no overflow, inf, NaN or
carrier subnormal below the format's grid), with fewer instructions; the loops
(the kernels `_kernel` makes) run it over blocks of elements, find what lay
outside its range and give those elements (the runs of 8 or pieces of 128
holding them) to `round_bits` again. Both decide
every case alike, and the tests hold both to the oracle on the same data.

Compile time: only `round_bits` is inlined in numba's IR (``inline="always"``):
on its own it is too large for LLVM to inline, and a call per element made the
general path up to 15 times slower (stochastic rounding of data mostly beyond
max). Every other helper is a plain njit function that LLVM inlines and folds
with the kernel's constant mode, giving the same machine code as an IR inline,
which costs seconds of compilation per kernel (CI compiles every kernel from
scratch).

A widening kernel takes float32 data to a float64 result (fixed-point formats
wider than float32, such as q16.16): its fast path rounds the float32 bits with
float32 parameters wherever the result fits float32, its general path rounds
the float64 value, both in the same pass over memory.

Fixed point with saturation in nearest, up, down and toward_zero (most
fixed-point use) takes a shorter kernel of its own instead, built on the
hardware's rounding instructions: ``scaled.round_scaled``. Stochastic rounding
of float64 data onto formats with at most 20 significand bits runs its fast loop
in 32-bit words (``halves.round_block``, kernel `round_stochastic_halves`; from
0 up for float16 and narrower formats, `round_stochastic_halves_from_zero`).
Stochastic rounding of float32 data onto fixed point (no wrap-around) runs its
fast loop on floats, by scaling (``scaled_random.stochastic_count``,
kernel `round_scaled_stochastic`). Rounding to nearest onto most floating-point
formats runs its fast loop by adding a power of two (``adding.nearest_by_adding``,
kernel `round_nearest_by_adding`). Formats that drop the same bits from every
magnitude of the fast range (bfloat16 and tf32 in float32, formats without
subnormals) run theirs with one shift count (``uniform.py``, `UNIFORM_KERNELS`).
``choose.kernel_for`` picks these kernels.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ._bits import (
    HIGH_WORD,
    LOW_WORD,
    NUMBA_OPTIONS,
    bits_to_float32,
    bits_to_float64,
    float64_words,
    count_leading_zeros,
    hidden_zero,
    float32_to_bits,
    float64_to_bits,
    shift_left,
    shift_right,
    wrapping_add,
    wrapping_mul,
    bit_or,
    bit_xor,
)
from .adding import nearest_by_adding
from .halves import MAGNITUDE_32, MIN_DROP, ZERO_HALVES_QUANTUM, opaque_all_ones, round_block, round_block_from_zero
from .scaled_random import loop_two_31, split_stochastic, stochastic_count, store_scaled, widening_rebias
from .uniform import stochastic_uniform, uniform_round
from .random import (
    WEYL_32, counter_bits, fill_halves, keyed_bits, keyed_weyl, loop_constants, segment_keys, top_bits_mask_32,
    top_bits_mask_64,
)
# the kernels' mode numbers, as in rpfloat.modes.Mode (re-exported from here)
from ._modes import DOWN, NEAREST, NEAREST_AWAY, ODD, STOCHASTIC, STOCHASTIC_EQUAL, TOWARD_ZERO, UP

# Overflow policies.
OVERFLOW_INF, OVERFLOW_SATURATE, OVERFLOW_NAN, OVERFLOW_WRAP = range(4)

# Layout of the parameter tuple (see rpfloat._params.kernel_params).
PARAM_NAMES = (
    "carrier_man_bits",   # 23 or 52
    "carrier_bias",       # 127 or 1023
    "man_bits",           # format significand bits (fixed point: 1, unused)
    "min_normal_bits",    # carrier bits of min_normal; magnitudes below use one spacing
    "parity_offset",      # man_bits == 0: the code's parity is (carrier field + this) & 1
    "below_drop_offset",  # dropped bits below min_normal: this - max(carrier field, 1)
    "below_tie_up",       # 1: ties below min_normal go up (no subnormals, man_bits >= 1)
    "below_quantum_bits",  # carrier bits of the spacing below min_normal
    "max_pos_bits",       # carrier bits of the largest positive value (widening: float32 at or below it)
    "max_neg_bits",       # carrier bits of the magnitude of the most negative value
    "overflow",           # OVERFLOW_*
    "keep_inf",           # 1: +-inf inputs are values of the format and stay
    "no_negative_zero",   # 1: a zero result is +0
    "deep",               # 1: min_normal is a carrier subnormal; those need their exponent
    "word_bits",          # fixed point wrap: word length w
    "signed",             # fixed point wrap: two's complement
    "scale_bits",         # fixed point wrap: float64 bits of 2**-frac_bits
    "bias_parity",        # deep formats: bias & 1
    "half_quantum_bits",  # carrier bits of half the spacing below min_normal (0: none)
    "overflow_pos_bits",  # what a positive overflow becomes (not toward zero): max, inf or NaN
    "overflow_neg_bits",  # the same for negative overflow (magnitude bits)
    "fast_low_bits",      # magnitudes in [fast_low_bits, fast_high_bits] take the
    "fast_high_bits",     #   fast path (fast_round_bits); low > high: none do
    "fast_low_random_bits",  # the same low end for mode stochastic
    "fast_aligned_bits",  # fast path: from here up, "add a bias, clear the low bits"
    "fast_drop_min",      # fast path: bits dropped = max(fast_drop_min,
    "fast_drop_offset",   #   fast_drop_offset - carrier exponent field)
    "fast_range_mask",    # bits & this is what must lie in the fast range: the magnitude,
                          #   or the bits themselves where negatives are not fast (unsigned)
    "scaled",             # 1: fixed point that kernel `scaled.round_scaled` rounds in
                          #   nearest, up, down and toward_zero
    "scaled_random",      # 1: fixed point whose stochastic rounding of float32 data the fast
                          #   loop of `round_scaled_stochastic` does by scaling (scaled_random.py)
    "nearest_by_adding",  # 1: a floating-point format whose rounding to nearest the fast loop of
                          #   `round_nearest_by_adding` does by adding a power of two (adding.py)
    "uniform_drop",       # 1: a floating-point format whose deterministic rounding the fast loops of
                          #   `UNIFORM_KERNELS` do with one bit count for all (uniform.py)
    "stochastic_uniform",  # 1: the same for stochastic rounding of float32 data (bfloat16, tf32),
                           #   kernel UNIFORM_KERNELS[STOCHASTIC]
    "stochastic_split",   # 1: a floating-point format whose stochastic rounding of float32
                          #   data the fast loop of `round_stochastic_split` does in two parts
                          #   (scaled_random.split_stochastic)
    "uniform_from_zero",  # 1: uniform_drop, and the carrier's subnormals drop fast_drop_min bits too
                          #   (bfloat16, tf32 in float32): the uniform loops take every magnitude from 0
)
N_PARAMS = len(PARAM_NAMES)
(
    P_CARRIER_MAN_BITS, P_CARRIER_BIAS, P_MAN_BITS, P_MIN_NORMAL_BITS, P_PARITY_OFFSET,
    P_BELOW_DROP_OFFSET, P_BELOW_TIE_UP, P_BELOW_QUANTUM_BITS, P_MAX_POS_BITS, P_MAX_NEG_BITS,
    P_OVERFLOW, P_KEEP_INF, P_NO_NEGATIVE_ZERO, P_DEEP, P_WORD_BITS, P_SIGNED, P_SCALE_BITS,
    P_BIAS_PARITY, P_HALF_QUANTUM_BITS, P_OVERFLOW_POS_BITS, P_OVERFLOW_NEG_BITS,
    P_FAST_LOW_BITS, P_FAST_HIGH_BITS, P_FAST_LOW_RANDOM_BITS, P_FAST_ALIGNED_BITS,
    P_FAST_DROP_MIN, P_FAST_DROP_OFFSET, P_FAST_RANGE_MASK, P_SCALED, P_SCALED_RANDOM, P_NEAREST_BY_ADDING,
    P_UNIFORM_DROP, P_STOCHASTIC_UNIFORM, P_STOCHASTIC_SPLIT, P_UNIFORM_FROM_ZERO,
) = range(N_PARAMS)  # positions in the tuple, in PARAM_NAMES order
PARAMS_TYPE = types.UniTuple(types.int64, N_PARAMS)

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


def sign_bit_of(template):
    """The sign bit of `template`'s type (int32 or int64), as that type."""
    raise NotImplementedError("sign_bit_of runs inside numba kernels only")


@overload(sign_bit_of, jit_options=NUMBA_OPTIONS)
def _sign_bit_of(template):
    bit = np.int32(-(2**31)) if template == types.int32 else np.int64(-(2**63))
    return lambda template: bit


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
    (`halves`, ``halves.round_block``) it starts at one spacing, and is narrowed
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


def range_keys(bits, low, params, zero_ok):
    """The fast loop's range check of one element: ``(low_key, high_key)``, whose
    least and greatest over a block lie within `range_limits` iff every element
    lies in the range (or is a zero, where `zero_ok`). For int32 bits, unsigned
    keys: the low key is the magnitude less 1 where zeros count (a zero wraps to
    the greatest key), and the high key the magnitude, where the sign bit kept
    for unsigned formats is above the range: one subtraction instead of a
    comparison and a selection, and no `low` to keep in a register. int64 bits
    (no unsigned 64-bit vector minimum in AVX2) keep `checked_magnitude`."""
    raise NotImplementedError("range_keys runs inside numba kernels only")


def range_limits(bits, low, high, zero_ok):
    """``(low_limit, high_limit)`` for `range_keys` of elements like `bits`."""
    raise NotImplementedError("range_limits runs inside numba kernels only")


@njit(**NUMBA_OPTIONS)
def _zero_shift(low, zero_ok):
    """What `range_keys` adds to an int32 magnitude: -1 (0xFFFFFFFF) where zeros
    count and lie below the range, else 0, as a uint32."""
    return np.uint32(0xFFFFFFFF) if zero_ok and low > 0 else np.uint32(0)


@overload(range_keys, jit_options=NUMBA_OPTIONS)
def _range_keys(bits, low, params, zero_ok):
    if bits == types.int32:
        def unsigned_keys(bits, low, params, zero_ok):
            magnitude = np.uint32(range_magnitude(bits, params))
            return wrapping_add(magnitude, _zero_shift(low, zero_ok)), magnitude
        return unsigned_keys

    def signed_keys(bits, low, params, zero_ok):
        magnitude = checked_magnitude(bits, low, params, zero_ok)
        return magnitude, magnitude
    return signed_keys


@overload(range_limits, jit_options=NUMBA_OPTIONS)
def _range_limits(bits, low, high, zero_ok):
    if bits == types.int32:
        def unsigned_limits(bits, low, high, zero_ok):
            return wrapping_add(np.uint32(low), _zero_shift(low, zero_ok)), np.uint32(high)
        return unsigned_limits
    return lambda bits, low, high, zero_ok: (low, high)


@njit(**NUMBA_OPTIONS)
def irregular(bits, low, high, params, zero_ok):
    """1 where `bits` is outside the fast range [`low`, `high`] (and not a zero
    that the fast loop rounds, `zero_ok`), else 0."""
    magnitude = checked_magnitude(bits, low, params, zero_ok)
    return same_width(bits, (magnitude < same_width(bits, low)) | (magnitude > same_width(bits, high)))


@njit(**NUMBA_OPTIONS)
def lowest_set_bit(flags):
    """The position of the lowest set bit of the uint64 `flags` (not 0), as an int64."""
    return np.int64(63) - count_leading_zeros(np.int64(flags & (~flags + U_ONE)))


@njit(**NUMBA_OPTIONS)
def nonzero_bytes(flags):
    """The uint64 `flags` with the top bit of every nonzero byte set, every other bit clear."""
    low_7 = np.uint64(0x7F7F7F7F7F7F7F7F)
    return (((flags & low_7) + low_7) | flags) & ~low_7


@njit(**NUMBA_OPTIONS)
def count_irregular(source, low, high, params, zero_ok):
    """How many elements of `source` lie outside the fast range [`low`, `high`]
    (zeros inside it where `zero_ok`)."""
    count = same_width(source[0], 0)
    for i in range(source.size):
        count = wrapping_add(count, irregular(source[i], low, high, params, zero_ok))
    return count


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


# A widening kernel (float32 data, float64 result) sees its target as uint32
# pairs (each float64's low and high words, LOW_WORD and HIGH_WORD: 2n words) so
# that every value in its fast loop is 32 bits wide: LLVM then rounds eight
# elements per vector, where a 64-bit store in the loop would make it take four.
# (The uint32 type is what tells these functions that a kernel widens.)


def widen(bits, target):
    """Source carrier bits as carrier bits of `target`: for a widening kernel the
    float64 bits of the float32 whose bits these are, else `bits` unchanged."""
    raise NotImplementedError("widen runs inside numba kernels only")


@overload(widen, jit_options=NUMBA_OPTIONS)
def _widen(bits, target):
    if target.dtype == types.uint32:
        return _widen_float32
    return lambda bits, target: bits


SUBNORMAL_32_SCALE = np.float64(2.0**-149)  # the float32 subnormal spacing


def _widen_float32(bits, target):
    # A float32 subnormal (or zero) is its significand field times 2**-149, made
    # from integers: converting it as a float would give 0 in a thread that treats
    # denormals as zero, which some libraries turn on for the whole process.
    magnitude = bits & np.int32(0x7FFFFFFF)
    if magnitude < np.int32(0x00800000):
        value = np.float64(magnitude) * SUBNORMAL_32_SCALE
        return float64_to_bits(-value if bits < np.int32(0) else value)
    return float64_to_bits(np.float64(bits_to_float32(bits)))


def wide_random(source):
    """Whether the fast loop over `source` reads both halves of its random numbers
    (float64 data): then it mixes them beforehand, a block at a time, in 32-bit
    lanes (``random.fill_halves``)."""
    raise NotImplementedError("wide_random runs inside numba kernels only")


@overload(wide_random, jit_options=NUMBA_OPTIONS)
def _wide_random(source):
    wide = source.dtype == types.int64
    return lambda source: wide


def words_per_element(target):
    """2 for a widening kernel's target (uint32 pairs), else 1."""
    raise NotImplementedError("words_per_element runs inside numba kernels only")


@overload(words_per_element, jit_options=NUMBA_OPTIONS)
def _words_per_element(target):
    words = 2 if target.dtype == types.uint32 else 1
    return lambda target: words


def store_fast(target, i, bits):
    """``target[i] =`` a fast-path result (source carrier bits). A widening kernel
    writes the float64 of that float32, which is 0 or a normal number (the fast
    range of its parameters has nothing else), in 32-bit operations."""
    raise NotImplementedError("store_fast runs inside numba kernels only")


@overload(store_fast, jit_options=NUMBA_OPTIONS)
def _store_fast(target, i, bits):
    if target.dtype == types.uint32:
        def store_pair(target, i, bits):
            high, low = float64_words(np.uint32(np.uint32(bits) & np.uint32(0x7FFFFFFF)))
            target[2 * i + HIGH_WORD] = np.uint32(high | (np.uint32(bits) & np.uint32(0x80000000)))
            target[2 * i + LOW_WORD] = low
        return store_pair
    def store(target, i, bits):
        target[i] = bits
    return store


def store_general(target, i, bits):
    """``target[i] =`` a general-path result (bits of the target's carrier)."""
    raise NotImplementedError("store_general runs inside numba kernels only")


@overload(store_general, jit_options=NUMBA_OPTIONS)
def _store_general(target, i, bits):
    if target.dtype == types.uint32:
        def store_pair(target, i, bits):
            target[2 * i + LOW_WORD] = np.uint32(np.uint64(bits) & U_LOW_32)
            target[2 * i + HIGH_WORD] = np.uint32(np.uint64(bits) >> U_32)
        return store_pair
    def store(target, i, bits):
        target[i] = bits
    return store


def _loop_signature(source_type, target_type):
    source = types.Array(source_type, 1, "C", readonly=True)  # writeable arrays convert to it
    target = types.Array(target_type, 1, "C")
    return types.void(source, target, PARAMS_TYPE, PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64)


# float32 -> float32, float64 -> float64, and float32 -> float64 (widening: the
# fast path computes in float32 with its own parameters, the general path in
# float64; the target is seen as uint32 pairs)
SIGNATURES = [
    _loop_signature(types.int32, types.int32),
    _loop_signature(types.int64, types.int64),
    _loop_signature(types.int32, types.uint32),
]


SEGMENT = np.int64(1) << np.int64(32)  # random numbers per segment key
# Elements rounded at a time by the fast path (long loops stream memory best),
# and the pieces of a block holding elements outside the fast range that the
# general loop does again (short, so that few elements are done twice); both
# measured with benchmarks/bench_round.py.
BLOCK = 4096
# Where a block held elements outside the fast range, the general loop redoes
# each piece of PIECE elements that holds more than SPARSE of them, and in the
# others only the runs of RUN elements that hold them (found from a bit per
# element): one irregular element costs a run, not a piece (data with a little
# underflow or NaN). The general loop runs over a slice, indices from 0, which
# LLVM vectorizes (over indices from the range's start it ran 1.5-4x slower).
PIECE = 128
SPARSE = 16
RUN = 8
# A block with more than MANY elements outside the fast range gives its other
# pieces to the general loop whole, uncounted, and makes the next SKIP blocks go
# to the general loop whole, without trying the fast one (data spread over the
# whole range: overflow, underflow, NaN).
MANY = 64
SKIP = 8


# One kernel per mode, each compiled (or loaded from numba's cache) on its first
# use, so that a first call compiles one loop, not nine. Each has its mode as
# a constant (a closure variable, which numba compiles in and keys its cache on):
# the loop is compiled for that mode alone. `round_general` serves the rare
# formats (min_normal below the carrier's normals, fixed-point wrap) in every
# mode (its argument), without the fast path.


UNDECIDED = np.uint32(0xFFFFFFFF)  # a high range key no magnitude of a signed format reaches
# the loops from 0 up (SPLIT_ZERO_LOOP, HALVES_ZERO_LOOP) flag steps that the high random
# word may leave undecided; with at most this many random bits it decides every one
# (``scaled_random``, ``halves``), and a flag only means an element like any other
HIGH_WORD_DECIDES = 31
# where the split loop's spacing below min_normal lies in [2**-8, 1] (float32 bits), its
# kernel from 0 up takes the formats (`round_stochastic_split_from_zero`)
SPLIT_FROM_ZERO = (0x3B800000, 0x3F800000)
# where the halves loop's spacing below min_normal is at least 2**-32 (float64 bits),
# its kernel from 0 up takes the format (`round_stochastic_halves_from_zero`)
HALVES_FROM_ZERO = 0x3DF0000000000000

# The fast loop of a kernel: `fast_round_bits` on carrier bits; float64 data in
# 32-bit words (``halves.round_block``); fixed point by scaling (``scaled_random``);
# nearest by adding a power of two (``adding``); one bit count for all (``uniform``);
# stochastic onto floating-point formats, above and below min_normal (``scaled_random``),
# for coarse formats from 0 up (`split_from_zero`); float64 data in 32-bit words from 0
# up (`halves_from_zero`).
BITS_LOOP, HALVES_LOOP, SCALED_LOOP, ADDING_LOOP, UNIFORM_LOOP, SPLIT_LOOP, SPLIT_ZERO_LOOP, HALVES_ZERO_LOOP = range(8)


@njit(**NUMBA_OPTIONS)
def loop_range(fast_params, mode, fast_loop):
    """``(low, high, zero_ok)``: the fast loop `fast_loop` rounds the elements whose
    range magnitude (`range_magnitude`, int64) lies in [`low`, `high`] in `mode`,
    and zeros too where `zero_ok` (`checked_magnitude`). `fast_bounds`' range,
    from 0 for the uniform loops of formats with ``uniform_from_zero``. The
    stochastic loops round +-0 themselves, although 0 lies below their range
    (none steps a zero up); so does the halves loop wherever one spacing is at
    least ``2**-978`` (``halves.round_block``). The split loop's variant from 0
    up (SPLIT_ZERO_LOOP) rounds every magnitude below its range's top, giving a
    block to the general loop where the high word of the random number left a
    step undecided (``scaled_random.stochastic_count``); so does the halves
    loop's (HALVES_ZERO_LOOP, ``halves.below_one_spacing``)."""
    low, high = fast_bounds(fast_params, mode, fast_loop == HALVES_LOOP or fast_loop == HALVES_ZERO_LOOP)
    if fast_loop == UNIFORM_LOOP and fast_params[P_UNIFORM_FROM_ZERO] != 0:
        low = ZERO
    if fast_loop == SPLIT_ZERO_LOOP or fast_loop == HALVES_ZERO_LOOP:
        low = ZERO
    if fast_loop == HALVES_LOOP:
        zero_ok = fast_params[P_BELOW_QUANTUM_BITS] >= ZERO_HALVES_QUANTUM
    else:
        zero_ok = mode == STOCHASTIC
    return low, high, zero_ok


def _kernel(mode_constant, general, fast_loop=BITS_LOOP):
    """The kernel for one mode (`mode_constant`; -1: the mode argument), with or
    without the rare paths of `round_bits` (`general`, no fast path), with the
    fast loop `fast_loop` (the stochastic mode only: HALVES_LOOP for float64 data,
    `halves_apply`; SCALED_LOOP for fixed point, parameter ``scaled_random``;
    nearest only: ADDING_LOOP, parameter ``nearest_by_adding``; all but
    stochastic_equal: UNIFORM_LOOP, parameters ``uniform_drop``, ``stochastic_uniform``;
    stochastic: SPLIT_LOOP, parameter ``stochastic_split``; SPLIT_ZERO_LOOP, the
    same from 0 up, `split_from_zero`; HALVES_ZERO_LOOP, HALVES_LOOP from 0 up,
    `halves_from_zero`).
    The loop is written here, in the kernel itself, rather than in a function
    inlined into each kernel: numba copies what it inlines, and copying the loop
    with its inlined `round_bits` doubled the compile time of every kernel."""
    halves = fast_loop == HALVES_LOOP or fast_loop == HALVES_ZERO_LOOP
    from_zero = fast_loop == HALVES_ZERO_LOOP  # (closure variables must be plain values: numba's
    # cache key holds them, and a dispatcher's differs in every process)

    @njit(**NUMBA_OPTIONS)
    def round_array(source, target, fast_params, params, mode_argument, key, offset, rand_bits):
        mode = mode_argument if mode_constant < 0 else mode_constant
        inverse_64 = bits_to_float64(fast_params[P_SCALE_BITS])  # SCALED_LOOP: 2**-frac_bits,
        inverse, scale = np.float32(inverse_64), np.float32(1.0 / inverse_64)  # exact (scaled_random.py)
        rebias = widening_rebias(inverse_64)
        hidden = hidden_zero(rand_bits)  # loop constants from it stay values (_bits.hidden_zero)
        multipliers, weyl_step = loop_constants(hidden)  # the fast loop's random numbers
        two_31 = loop_two_31(hidden)  # SCALED_LOOP, SPLIT_LOOP
        drop_min, drop_offset = fast_params[P_FAST_DROP_MIN], fast_params[P_FAST_DROP_OFFSET]  # ADDING_LOOP
        carrier_man_bits = fast_params[P_CARRIER_MAN_BITS]
        aligned = fast_params[P_FAST_ALIGNED_BITS]  # UNIFORM_LOOP
        half_quantum, below_tie_up = fast_params[P_HALF_QUANTUM_BITS], fast_params[P_BELOW_TIE_UP]
        quantum = fast_params[P_BELOW_QUANTUM_BITS]
        min_normal = fast_params[P_MIN_NORMAL_BITS]  # SPLIT_LOOP
        low, high, zero_ok = loop_range(fast_params, mode, fast_loop)
        if fast_loop == UNIFORM_LOOP and fast_params[P_UNIFORM_FROM_ZERO] != 0:
            aligned = ZERO  # nothing lies below
        fast_ok = False if general else low <= high
        skipped = 0  # blocks left to do with the general loop alone
        premixed = mode == STOCHASTIC and wide_random(source) and not halves  # a constant where the mode is
        mixed = BLOCK if premixed else 0
        high_words, low_words = np.empty(mixed, np.uint32), np.empty(mixed, np.uint32)
        if halves:  # the float64 data and results as 32-bit words
            source_words, target_words = source.view(np.int32), target.view(np.int32)
            mask_high, mask_low = top_bits_mask_32(rand_bits, 0), top_bits_mask_32(rand_bits, 32)
            all_ones = opaque_all_ones(rand_bits)
        zero_as = np.int32(low >> 32) if zero_ok else np.int32(0)  # halves: a zero high word counts as this
        zero_sign = np.int32(0) if fast_params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-(2**31))  # and keeps this
        start = 0
        while start < source.size:  # once, unless the random counter crosses a 2**32 boundary
            index = offset + start
            stop = min(source.size, start + SEGMENT - (index & (SEGMENT - 1)))
            keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
            first_counter = np.uint32(index & (SEGMENT - 1))
            for block in range(start, stop, BLOCK):
                source_part = source[block:min(stop, block + BLOCK)]
                words = words_per_element(target)
                target_part = target[words * block:words * min(stop, block + BLOCK)]
                block_counter = wrapping_add(first_counter, np.uint32(block - start))
                # the short loop first; the elements outside its range are done again by
                # the general loop; where a block held many, the next blocks skip the short loop
                outside = True
                tried = fast_ok and skipped == 0
                skipped = max(skipped - 1, 0)
                if tried:
                    # the smallest and largest range magnitudes tell whether any
                    # element lay outside the range (two instructions per vector,
                    # where counting them takes five); only then are they counted
                    weyl = wrapping_mul(block_counter, WEYL_32)
                    if halves:
                        block_words = slice(2 * block, 2 * (block + source_part.size))
                        block_arguments = (
                            source_words[block_words], target_words[block_words], params[P_FAST_DROP_MIN],
                            params[P_FAST_DROP_OFFSET], params[P_FAST_RANGE_MASK], zero_as, zero_sign, keys, weyl,
                            mask_high, mask_low, all_ones, np.int32(quantum >> 32))
                        if from_zero:
                            greatest_sum, greatest = round_block_from_zero(*block_arguments)
                            outside = np.uint32(greatest) > np.uint32(high >> 32)
                            # a step the high words may have left undecided (rare; with at most 31
                            # random bits they decide every step): the whole block again
                            if greatest_sum == MAGNITUDE_32 and rand_bits > HIGH_WORD_DECIDES:
                                outside, tried = True, False
                        else:
                            lowest, highest = round_block(*block_arguments)
                            outside = lowest < np.int32(low >> 32) or highest > np.int32(high >> 32)
                    else:
                        low_limit, high_limit = range_limits(source_part[0], low, high, zero_ok)
                        lowest, highest = high_limit, low_limit
                        tied = False  # SPLIT_ZERO_LOOP: a step the high word left undecided
                        if premixed:
                            fill_halves(keys, weyl, high_words[:source_part.size], low_words[:source_part.size])
                        keyed_high, keyed_low = keyed_weyl(keys, weyl)
                        for i in range(source_part.size):
                            if premixed:
                                random = shift_left(np.uint64(high_words[i]), U_32) | np.uint64(low_words[i])
                            else:  # dead code where the mode is deterministic
                                random = keyed_bits(keyed_high, keyed_low, multipliers)
                            keyed_high, keyed_low = wrapping_add(keyed_high, weyl_step), wrapping_add(keyed_low, weyl_step)
                            if fast_loop == SCALED_LOOP:
                                # the range check's magnitude (the same operation): |x|
                                # wherever x lies in the range
                                magnitude = range_magnitude(source_part[i], fast_params)
                                count, _ = stochastic_count(bits_to_float32(magnitude) * scale, random, rand_bits,
                                                            two_31)  # from 2**-8 up: the high word decides
                                store_scaled(target_part, i, count, bit_xor(source_part[i], magnitude), inverse, rebias)
                            elif fast_loop == ADDING_LOOP:
                                store_fast(target_part, i, nearest_by_adding(source_part[i], drop_min, drop_offset,
                                                                             carrier_man_bits))
                            elif fast_loop == SPLIT_LOOP or fast_loop == SPLIT_ZERO_LOOP:
                                rounded, tied = split_stochastic(source_part[i], drop_min, min_normal, quantum, random,
                                                                 rand_bits, two_31)
                                store_fast(target_part, i, rounded)
                            elif fast_loop == UNIFORM_LOOP and mode == STOCHASTIC:
                                magnitude = range_magnitude(source_part[i], fast_params)  # the range check's
                                store_fast(target_part, i, stochastic_uniform(source_part[i], drop_min, random,
                                                                              rand_bits, magnitude))
                            elif fast_loop == UNIFORM_LOOP:
                                store_fast(target_part, i, uniform_round(source_part[i], mode, drop_min, aligned,
                                                                         half_quantum, below_tie_up, quantum))
                            else:
                                store_fast(target_part, i, fast_round_bits(source_part[i], fast_params, mode, random,
                                                                           rand_bits))
                            low_key, high_key = range_keys(source_part[i], low, fast_params, zero_ok)
                            if fast_loop == SPLIT_ZERO_LOOP:  # the greatest key marks an undecided step
                                high_key = bit_or(high_key, UNDECIDED if tied else np.uint32(0))
                            lowest = min(lowest, low_key)
                            highest = max(highest, high_key)
                        outside = lowest < low_limit or highest > high_limit
                        if fast_loop == SPLIT_ZERO_LOOP and highest == UNDECIDED and rand_bits > HIGH_WORD_DECIDES:
                            outside, tried = True, False  # rare (about 2**-31 per element): the whole block again
                # what the general loop does (again): the whole block, or where the block
                # held elements outside the range, the pieces holding many of them and the
                # runs of RUN elements holding the others
                total = 0  # elements outside the range
                piece_size = PIECE if tried else BLOCK
                for piece in range(0, source_part.size if outside else 0, piece_size):
                    piece_stop = min(piece + piece_size, source_part.size)
                    count = piece_size  # untried, or past MANY outside the range: the whole piece
                    if tried and total <= MANY:
                        count = count_irregular(source_part[piece:piece_stop], low, high, fast_params, zero_ok)
                        total += count
                    if count == 0:
                        continue
                    sparse = count <= SPARSE
                    for part in range(piece, piece_stop, 64 if sparse else piece_size):  # 64: the bits of a mask
                        part_stop = min(part + 64, piece_stop) if sparse else piece_stop
                        runs = U_ONE  # a bit for each run to do
                        if sparse:  # a bit per element, then per run of 8 (the top bit of each byte)
                            flags = U_ZERO
                            for i in range(part_stop - part):
                                flags |= shift_left(np.uint64(irregular(source_part[part + i], low, high, fast_params,
                                                                        zero_ok)), np.uint64(i))
                            runs = nonzero_bytes(flags)
                        while runs != U_ZERO:
                            first = part + (lowest_set_bit(runs) & ~(RUN - 1)) if sparse else part
                            stop_at = min(first + RUN, part_stop) if sparse else part_stop
                            runs &= runs - U_ONE
                            source_range = source_part[first:stop_at]  # indices from 0: LLVM vectorizes those
                            target_range = target_part[words * first:words * stop_at]
                            range_counter = wrapping_add(block_counter, np.uint32(first))
                            for i in range(source_range.size):
                                # the random number is dead code where the mode is deterministic
                                random = counter_bits(keys, wrapping_add(range_counter, np.uint32(i)))
                                bits = widen(source_range[i], target_range)
                                store_general(target_range, i, round_bits(bits, params, mode, random, rand_bits,
                                                                          general))
                if total > MANY:
                    skipped = SKIP
            start = stop

    return round_array


MODE_KERNELS = tuple(_kernel(mode, False) for mode in range(STOCHASTIC_EQUAL + 1))  # by mode number
round_general = _kernel(-1, True)
round_stochastic_halves = _kernel(STOCHASTIC, False, HALVES_LOOP)
round_scaled_stochastic = _kernel(STOCHASTIC, False, SCALED_LOOP)
round_nearest_by_adding = _kernel(NEAREST, False, ADDING_LOOP)
# by mode number, stochastic_equal excepted (None)
UNIFORM_KERNELS = tuple(_kernel(mode, False, UNIFORM_LOOP) for mode in range(STOCHASTIC + 1)) + (None,)
round_stochastic_split = _kernel(STOCHASTIC, False, SPLIT_LOOP)
round_stochastic_split_from_zero = _kernel(STOCHASTIC, False, SPLIT_ZERO_LOOP)
round_stochastic_halves_from_zero = _kernel(STOCHASTIC, False, HALVES_ZERO_LOOP)
KERNELS = MODE_KERNELS + (round_general, round_stochastic_halves, round_scaled_stochastic, round_nearest_by_adding,
                          *UNIFORM_KERNELS[:-1], round_stochastic_split, round_stochastic_split_from_zero,
                          round_stochastic_halves_from_zero)


def split_from_zero(params):
    """Whether stochastic rounding onto the format of `params` (a ``stochastic_split``
    one) takes `round_stochastic_split_from_zero`: where its spacing below
    min_normal lies in [2**-8, 1] (float6, float4 and other coarse formats, onto
    which raw data put a share of values 2**8 times below that spacing; the tie
    check costs the loop 3-10% elsewhere)."""
    return SPLIT_FROM_ZERO[0] <= params[P_BELOW_QUANTUM_BITS] <= SPLIT_FROM_ZERO[1]


def halves_apply(params, mode):
    """Whether float64 data round in `mode` onto the format of `params` (float64
    carrier) with `round_stochastic_halves`: stochastic rounding onto formats
    that drop at least 32 bits of every float64 in the fast range
    (``halves.round_block``)."""
    return (mode == STOCHASTIC and params[P_CARRIER_MAN_BITS] == 52 and params[P_FAST_DROP_MIN] >= MIN_DROP
            and params[P_FAST_LOW_BITS] <= params[P_FAST_HIGH_BITS]  # a fast range (not deep, no wrap-around)
            and params[P_DEEP] == 0 and params[P_OVERFLOW] != OVERFLOW_WRAP)


def halves_from_zero(params):
    """Whether stochastic rounding of float64 data onto the format of `params`
    (where `halves_apply`) takes `round_stochastic_halves_from_zero`: where its
    spacing below min_normal is at least 2**-32 (float16, the float8, float6
    and float4 formats), onto which data put values below one spacing,
    depending on their scale (0.16% of N(0, 1) for e4m3; 1.2% of 1e-3 * N(0, 1)
    for e5m2), each block's few costing it a third of its time or more in the
    range check's general pass. Formats with a wider exponent range (bfloat16,
    tf32, FloatFormat(6, 9)) keep `round_stochastic_halves`, 8-11% faster on
    data without values below one spacing."""
    return params[P_BELOW_QUANTUM_BITS] >= HALVES_FROM_ZERO


def round_array_for(source_bits, target_bits, params, mode):
    """The kernel rounding int32 (float32 data) or int64 data onto the format of
    `params` in `mode`, called as ``kernel(source, target, fast_params, params,
    mode, key, offset, rand_bits)``: element ``i`` of `source` (carrier bits) goes
    to ``target[i]``, which must not overlap `source`, and draws random number
    ``offset + i`` of the stream `key`, so a slice rounded with the matching
    offset gets the bits of the whole. `fast_params` are the fast path's: `params`
    themselves, except for a widening kernel (`source_bits` int32, `target_bits`
    int64: float32 data, a float64 result, passed as its uint32 view, two words
    per element), whose fast path rounds float32 bits with float32 parameters
    (``rpfloat._params.widening_params``) and whose general path rounds the
    float64 value with `params`. Its signature is compiled, or loaded
    from numba's cache, on first use (an import loads nothing); what is returned
    is the compiled entry point itself, which skips the dispatcher's type
    matching (a microsecond per call): callers pass exactly the signature's types."""
    general = params[P_DEEP] != 0 or params[P_OVERFLOW] == OVERFLOW_WRAP
    halves = source_bits == np.int64 and target_bits == np.int64 and halves_apply(params, mode)
    from_zero = halves and halves_from_zero(params)
    key = (-1 if general else -3 if from_zero else -2 if halves else mode, source_bits, target_bits)
    entry = _ENTRY_POINTS.get(key)
    if entry is None:
        kernel = (round_general if general else round_stochastic_halves_from_zero if from_zero
                  else round_stochastic_halves if halves else MODE_KERNELS[mode])
        entry = _ENTRY_POINTS[key] = entry_point(kernel, source_bits, target_bits)
    return entry


def entry_point(kernel, source_bits, target_bits):
    """`kernel` (one of the array kernels) compiled, or loaded from numba's cache,
    for int32 or int64 `source_bits` into `target_bits`: its compiled entry point."""
    signature = SIGNATURES[_SIGNATURE_INDEX[source_bits, target_bits]]
    kernel.compile(signature)
    return kernel.overloads[signature.args].entry_point


_SIGNATURE_INDEX = {(np.int32, np.int32): 0, (np.int64, np.int64): 1, (np.int32, np.int64): 2}
_ENTRY_POINTS = {}  # (mode, -1 for round_general or -2 for round_stochastic_halves; source bits;
                   #  target bits) -> compiled entry point
