"""Fixed point by the hardware's rounding instructions: a shorter kernel for
the common fixed-point case.

A fixed-point format with ``frac_bits >= 0``, the saturate policy and one of
the modes nearest (ties to even), up, down or toward_zero rounds x to::

    k = roundeven/ceil/floor/trunc(x * 2**frac_bits),   k clamped to [k_min, k_max]
    result = k * 2**-frac_bits, and +0 where k == 0      (no -0 in fixed point)

and every step is exact in the carrier: scaling by a power of two only moves
the exponent (x * 2**frac_bits cannot underflow, and where it overflows to
+-inf the clamp gives k_max or k_min, as saturation would), the rounding
instructions are IEEE 754's roundToIntegral in these four directions (none
depends on the thread's rounding mode), and the clamped k has at most
carrier_man_bits + 1 bits, so that k * 2**-frac_bits (a normal number: 2**-frac_bits
is one) is exact. NaN keeps its bits (those of the float64 of the float32 where
float32 data round into float64, as on the general path). The loop is a few
instructions per element, a fraction of the bit-level kernel's (``loops``).

One condition is outside the kernel's arguments: the thread's floating-point
unit must keep subnormal numbers (flush-to-zero and denormals-are-zero off, as
they are unless some library in the process turns them on). Under
denormals-are-zero a subnormal x would scale to 0 and round up or down wrongly.
The kernel table (``table``) checks that on every call, in the thread that runs
the kernel, and otherwise gives the bit-level kernel, which works on integers.

The table's condition ``table.scaled`` says where a format qualifies; the table
then gives `round_scaled` for these four modes, whose signatures are those of
the other kernels (it reads `params` only).
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ..core.bits import (
    NUMBA_OPTIONS, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits, round_half_even,
)
from ..core.layout import DOWN, NEAREST, P_SCALE_BITS, P_SIGNED, P_WORD_BITS, TOWARD_ZERO, UP

SCALED_MODES = (NEAREST, UP, DOWN, TOWARD_ZERO)


def to_carrier(bits, target):
    """The value of carrier bits `bits` (int32: float32, int64: float64) as a float
    of `target`'s carrier (int32 target: float32, int64 target: float64; float32
    values widen exactly)."""
    raise NotImplementedError("to_carrier runs inside numba kernels only")


@overload(to_carrier, jit_options=NUMBA_OPTIONS)
def _to_carrier(bits, target):
    if bits == types.int32 and target.dtype == types.int32:
        return lambda bits, target: bits_to_float32(bits)
    if bits == types.int32:
        return lambda bits, target: np.float64(bits_to_float32(bits))
    return lambda bits, target: bits_to_float64(bits)


def result_view(target):
    """`target` as carrier bits: a widening kernel's target arrives as uint32
    pairs (see ``loops.store_fast``), viewed here as the int64 bits of its
    float64 values."""
    raise NotImplementedError("result_view runs inside numba kernels only")


@overload(result_view, jit_options=NUMBA_OPTIONS)
def _result_view(target):
    if target.dtype == types.uint32:
        return lambda target: target.view(np.int64)
    return lambda target: target


def to_bits(value):
    """The bits of a float32 (as int32) or float64 (as int64)."""
    raise NotImplementedError("to_bits runs inside numba kernels only")


@overload(to_bits, jit_options=NUMBA_OPTIONS)
def _to_bits(value):
    if value == types.float32:
        return lambda value: float32_to_bits(value)
    return lambda value: float64_to_bits(value)


def carrier_float(target, value):
    """The float64 `value` as a float of `target`'s carrier (int32 target:
    float32, int64: float64); exact for the powers of two and integers it is
    used for."""
    raise NotImplementedError("carrier_float runs inside numba kernels only")


@overload(carrier_float, jit_options=NUMBA_OPTIONS)
def _carrier_float(target, value):
    if target.dtype == types.int32:
        return lambda target, value: np.float32(value)
    return lambda target, value: np.float64(value)


@njit(**NUMBA_OPTIONS)
def scaled_round(bits, target, scale, inverse, low, high, mode):
    """One element: carrier bits of `bits` rounded (see the module docstring);
    `scale`, `inverse`, `low`, `high` are floats of the target's carrier."""
    value = to_carrier(bits, target)
    scaled = value * scale
    if mode == NEAREST:
        count = round_half_even(scaled)
    elif mode == UP:
        count = np.ceil(scaled)
    elif mode == DOWN:
        count = np.floor(scaled)
    else:
        count = np.trunc(scaled)
    count = low if count < low else count  # NaN compares false and stays
    count = high if count > high else count
    result = carrier_float(target, 0.0) if count == 0 else count * inverse  # +0 for -0 too
    return to_bits(value) if value != value else to_bits(result)


@njit(**NUMBA_OPTIONS)
def round_scaled(source, target, fast_params, params, mode, key, offset, rand_bits):
    """``target[i] =`` `source[i]` rounded (carrier bits, like the other kernels'
    arguments; `fast_params`, `key`, `offset` and `rand_bits` are unused)."""
    target = result_view(target)
    inverse_64 = bits_to_float64(params[P_SCALE_BITS])  # 2**-frac_bits
    word_bits = params[P_WORD_BITS]
    if params[P_SIGNED]:
        low_64, high_64 = -np.float64(1 << (word_bits - 1)), np.float64((1 << (word_bits - 1)) - 1)
    else:
        low_64, high_64 = np.float64(0.0), np.float64((1 << word_bits) - 1)
    inverse, scale = carrier_float(target, inverse_64), carrier_float(target, 1.0 / inverse_64)
    low, high = carrier_float(target, low_64), carrier_float(target, high_64)
    # one loop per mode: the rounding direction is part of the instruction
    if mode == NEAREST:
        for i in range(source.size):
            target[i] = scaled_round(source[i], target, scale, inverse, low, high, NEAREST)
    elif mode == UP:
        for i in range(source.size):
            target[i] = scaled_round(source[i], target, scale, inverse, low, high, UP)
    elif mode == DOWN:
        for i in range(source.size):
            target[i] = scaled_round(source[i], target, scale, inverse, low, high, DOWN)
    else:
        for i in range(source.size):
            target[i] = scaled_round(source[i], target, scale, inverse, low, high, TOWARD_ZERO)
