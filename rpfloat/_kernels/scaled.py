"""Fixed point by the hardware's rounding instructions: a shorter kernel for
the common fixed-point case.

A fixed-point format with ``frac_bits >= 0``, the saturate policy and one of
the modes nearest (ties to even), up, down or toward_zero rounds x to::

    k = rint/ceil/floor/trunc(x * 2**frac_bits),   k clamped to [k_min, k_max]
    result = k * 2**-frac_bits + 0.0               (+0.0: no -0 in fixed point)

and every step is exact in the carrier: scaling by a power of two only moves
the exponent (x * 2**frac_bits cannot underflow, and where it overflows to inf
the clamp gives k_max, as saturation would), the rounding instructions are
IEEE 754's roundToIntegral in these four directions, and k has at most
carrier_man_bits + 1 bits. NaN keeps its bits (those of the float64 of the
float32 in a widening kernel, as in the general path). The loop takes about
12 AVX2 instructions per 8 float32 elements (24 for float32 data into a
float64 result), where the bit-level kernel (``quantize``) takes 50 to 65:
q16.16 from float32 went from 0.58 to 0.78 x np.copyto (the float32 ->
float64 copy itself: 0.83), q8.8 from 0.87 to 1.26.

``rpfloat._params`` sets the parameter ``scaled`` where the format qualifies
(`quantize.P_SCALED`); `kernel_for` then gives `round_scaled` for these four
modes, whose signatures are those of the other kernels (it reads `params` only).
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ._bits import NUMBA_OPTIONS, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits
from .quantize import (
    DOWN, NEAREST, P_SCALE_BITS, P_SCALED, P_SIGNED, P_WORD_BITS, TOWARD_ZERO, UP, entry_point,
    round_array_for,
)

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
    pairs (see ``quantize.store_fast``), viewed here as the int64 bits of its
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
        count = np.rint(scaled)
    elif mode == UP:
        count = np.ceil(scaled)
    elif mode == DOWN:
        count = np.floor(scaled)
    else:
        count = np.trunc(scaled)
    count = low if count < low else count  # NaN compares false and stays
    count = high if count > high else count
    result = count * inverse + carrier_float(target, 0.0)
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


def kernel_for(source_bits, target_bits, params, mode):
    """The kernel for these carrier bit types, parameters and mode: `round_scaled`
    where the format and mode qualify, else ``quantize.round_array_for``'s; the
    compiled entry point, called as that function says."""
    if not (params[P_SCALED] and mode in SCALED_MODES):
        return round_array_for(source_bits, target_bits, params, mode)
    key = (source_bits, target_bits)
    entry = _ENTRY_POINTS.get(key)
    if entry is None:
        entry = _ENTRY_POINTS[key] = entry_point(round_scaled, source_bits, target_bits)
    return entry


_ENTRY_POINTS = {}  # (source bits, target bits) -> compiled entry point
