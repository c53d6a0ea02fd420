"""float16 data to and from the float32 carrier, in integer operations.

The element kernels work on float32 and float64 bits; float16 data pass through
a float32 buffer on the way in and, for float16 results, on the way out. NumPy's
casts between float16 and float32 take about 2 ns a value on a machine without
its vector dispatch for them; these loops vectorise and give the same bits:

* ``widen``: every float16 exactly as a float32, NaN payloads kept in the top
  significand bits and signalling NaNs left signalling (as NumPy casts).
* ``narrow``: float32 values that float16 holds exactly (the results of rounding
  onto a format whose values all are float16 numbers) back to float16; a NaN
  keeps the top 10 bits of its payload, and one whose kept payload would be 0
  becomes payload 1, so that it stays a NaN (as NumPy casts). Other float32
  values would be truncated: the callers never pass them.
"""
import numpy as np
from numba import njit, types

from ..core.bits import (
    NUMBA_OPTIONS, bit_and, bit_or, bits_to_float32, float32_to_bits, shift_left, shift_right, wrapping_add,
)

__all__ = ["widen", "narrow"]

_HALVES = types.Array(types.uint16, 1, "C")
_SINGLES = types.Array(types.int32, 1, "C")  # float32 bits
# float16's exponent bias 15 against float32's 127, in the exponent fields' places
_BIAS_SHIFTED = np.int32(112 << 23)
_UNBIAS_SHIFTED = np.int32(-(112 << 10))
# float16's subnormals are multiples of 2**-24 below 2**-14, float32 normals
_SUBNORMAL_SPACING = np.float32(2.0**-24)
_SUBNORMALS_PER_UNIT = np.float32(2.0**24)


@njit(types.void(_HALVES.copy(readonly=True), _SINGLES), **NUMBA_OPTIONS)
def widen(halves, singles):
    """``singles[i]`` = the float32 bits of float16 ``halves[i]`` (arrays of one size)."""
    for index in range(halves.size):
        half = np.int32(halves[index])  # (int32 lanes throughout: the loop vectorises)
        sign = shift_left(bit_and(half, np.int32(0x8000)), 16)
        exponent = bit_and(shift_right(half, 10), np.int32(0x1F))
        significand = shift_left(bit_and(half, np.int32(0x3FF)), 13)
        normal = bit_or(sign, wrapping_add(wrapping_add(shift_left(exponent, 23), significand), _BIAS_SHIFTED))
        special = bit_or(sign, bit_or(np.int32(0x7F800000), significand))  # inf, or NaN with its payload
        tiny = np.float32(bit_and(half, np.int32(0x3FF))) * _SUBNORMAL_SPACING  # (zeros too)
        subnormal = bit_or(sign, float32_to_bits(tiny))
        bits = special if exponent == np.int32(0x1F) else (subnormal if exponent == np.int32(0) else normal)
        singles[index] = bits


@njit(types.void(_SINGLES.copy(readonly=True), _HALVES), **NUMBA_OPTIONS)
def narrow(singles, halves):
    """``halves[i]`` = the float16 bits of float32 ``singles[i]``, a float16 number,
    an infinity or a NaN (arrays of one size)."""
    for index in range(singles.size):
        single = singles[index]
        sign = bit_and(shift_right(single, 16), np.int32(0x8000))
        exponent = bit_and(shift_right(single, 23), np.int32(0xFF))
        significand = bit_and(single, np.int32(0x7FFFFF))
        magnitude_bits = bit_and(single, np.int32(0x7FFFFFFF))
        normal = bit_or(sign, wrapping_add(shift_right(magnitude_bits, 13), _UNBIAS_SHIFTED))
        magnitude = bits_to_float32(magnitude_bits)
        subnormal = bit_or(sign, np.int32(magnitude * _SUBNORMALS_PER_UNIT))  # an integer below 2**10 (zeros too)
        payload = shift_right(significand, 13)
        kept = payload if (payload != np.int32(0)) | (significand == np.int32(0)) else np.int32(1)  # stays a NaN
        special = bit_or(sign, bit_or(np.int32(0x7C00), kept))
        bits = special if exponent == np.int32(0xFF) else (subnormal if exponent < np.int32(113) else normal)
        halves[index] = np.uint16(bits)
