"""Stochastic rounding onto fixed point by scaling: the element function of the
fast loop of kernel ``quantize.round_scaled_stochastic``.

For a fixed-point format with spacing ``2**-frac_bits`` the magnitude of x
scales to ``a = |x| * 2**frac_bits`` (exact: a power of two), whose integer part
``k = floor(a)`` and fraction ``a - k`` are exact in the carrier too (Sterbenz's
lemma for a >= 1). The rounded magnitude is ``k + 1`` with the spec's
probability ``floor(frac * 2**r) / 2**r`` (r = `rand_bits`), that is, with U the
complement of the element's 64-bit random number R (as ``quantize`` draws it)::

    up  iff  floor(U / 2**(64 - r)) < floor(frac * 2**r)

In the fast range the fraction's bits fit one word (W = 32 bits for float32
data, 64 for float64: ``a >= 2**(carrier_man_bits + 1 - W)``, the range's low
end for stochastic rounding), so ``frac * 2**W`` is an integer below 2**W that
the carrier computes exactly and converts to an unsigned word, and the test is
one comparison of words with the top r bits kept: for float32 data the high
half of U (the low half could only matter below that integer's last bit).
The result ``k * 2**-frac_bits`` (or ``(k + 1) * 2**-frac_bits``) is exact: k + 1
fits the significand wherever a has a fraction, and a has none from
2**carrier_man_bits up. A zero result is +0 (fixed point has no -0).

The loop uses it where ``rpfloat._params`` sets the parameter
``scaled_random``: fixed point, no wrap-around, ``2**+-frac_bits`` and the
format's largest integer ``k_max`` finite normal numbers of the carrier. The
arithmetic is on floats, so the thread must keep subnormal numbers, as for
``scaled.round_scaled`` (``scaled.kernel_for`` checks).
"""
import numpy as np
from numba import types
from numba.extending import overload

from ._bits import NUMBA_OPTIONS, bit_xor, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits

SIGN_32 = np.int32(-(2**31))
SIGN_64 = np.int64(-(2**63))
TWO_32 = np.float32(2.0**32)
TWO_64 = np.float64(2.0**64)
ALL_32 = np.uint32(0xFFFFFFFF)
ALL_64 = np.uint64(0xFFFFFFFFFFFFFFFF)
SHIFT_32 = np.uint64(32)


def scaled_stochastic_bits(bits, inverse_64, random, rand_bits):
    """Carrier bits `bits` (int32: float32, int64: float64) rounded stochastically
    onto the fixed-point spacing `inverse_64` (``2**-frac_bits`` as a float64),
    drawing the uint64 `random`; valid in the fast range (see the module
    docstring). Returns the result's carrier bits."""
    raise NotImplementedError("scaled_stochastic_bits runs inside numba kernels only")


@overload(scaled_stochastic_bits, jit_options=NUMBA_OPTIONS)
def _scaled_stochastic_bits(bits, inverse_64, random, rand_bits):
    if bits == types.int32:
        def float32_bits(bits, inverse_64, random, rand_bits):
            inverse = np.float32(inverse_64)
            scale = np.float32(1.0 / inverse_64)
            magnitude = np.abs(bits_to_float32(bits)) * scale
            count = np.floor(magnitude)
            threshold = np.uint32((magnitude - count) * TWO_32)
            dropped = np.int64(min(max(32 - rand_bits, 0), 31))  # keep the top r bits (all for r >= 32)
            mask = np.uint32(bit_xor(ALL_32, np.uint32((np.int64(1) << dropped) - 1)))
            drawn = np.uint32(bit_xor(np.uint32(random >> SHIFT_32), ALL_32) & mask)
            count = count + np.float32(1.0) if drawn < np.uint32(threshold & mask) else count
            result = float32_to_bits(count * inverse)
            return np.int32(result | (bits & SIGN_32)) if result != np.int32(0) else np.int32(0)
        return float32_bits

    def float64_bits(bits, inverse_64, random, rand_bits):
        scale = 1.0 / inverse_64
        magnitude = np.abs(bits_to_float64(bits)) * scale
        count = np.floor(magnitude)
        threshold = np.uint64((magnitude - count) * TWO_64)
        mask = ~((np.uint64(1) << np.uint64(64 - rand_bits)) - np.uint64(1))  # the top r bits
        drawn = (random ^ ALL_64) & mask
        count = count + 1.0 if drawn < (threshold & mask) else count
        result = float64_to_bits(count * inverse_64)
        return (result | (bits & SIGN_64)) if result != np.int64(0) else np.int64(0)
    return float64_bits
