"""The kernels' shared numbering: the parameter tuple's layout, the overflow
policies and the rounding modes.

A format reaches a kernel as a tuple of plain int64s (built once per format and
carrier by ``rpfloat._params``), laid out as `PARAM_NAMES`, so that one compiled
kernel serves every format. Mode numbers come from ``rpfloat.modes.Mode``, the
one place that defines them.
"""
from numba import types

from ...modes import Mode

# Rounding modes, as module-level ints that numba compiles in as constants.
NEAREST, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC, STOCHASTIC_EQUAL = (
    int(Mode.NEAREST), int(Mode.NEAREST_AWAY), int(Mode.TOWARD_ZERO), int(Mode.UP), int(Mode.DOWN),
    int(Mode.ODD), int(Mode.STOCHASTIC), int(Mode.STOCHASTIC_EQUAL),
)
DETERMINISTIC_MODES = (NEAREST, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD)
ALL_MODES = tuple(int(mode) for mode in Mode)  # by mode number, from 0

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
    "uniform_from_zero",  # 1: uniform_drop, and the carrier's subnormals drop fast_drop_min bits too
                          #   (bfloat16, tf32 in float32): the uniform loops take every magnitude from 0
)
N_PARAMS = len(PARAM_NAMES)
(
    P_CARRIER_MAN_BITS, P_CARRIER_BIAS, P_MAN_BITS, P_MIN_NORMAL_BITS, P_PARITY_OFFSET, P_BELOW_DROP_OFFSET,
    P_BELOW_TIE_UP, P_BELOW_QUANTUM_BITS, P_MAX_POS_BITS, P_MAX_NEG_BITS, P_OVERFLOW, P_KEEP_INF,
    P_NO_NEGATIVE_ZERO, P_DEEP, P_WORD_BITS, P_SIGNED, P_SCALE_BITS, P_BIAS_PARITY, P_HALF_QUANTUM_BITS,
    P_OVERFLOW_POS_BITS, P_OVERFLOW_NEG_BITS, P_FAST_LOW_BITS, P_FAST_HIGH_BITS, P_FAST_LOW_RANDOM_BITS,
    P_FAST_ALIGNED_BITS, P_FAST_DROP_MIN, P_FAST_DROP_OFFSET, P_FAST_RANGE_MASK, P_UNIFORM_FROM_ZERO,
) = range(N_PARAMS)  # positions in the tuple, in PARAM_NAMES order
PARAMS_TYPE = types.UniTuple(types.int64, N_PARAMS)
