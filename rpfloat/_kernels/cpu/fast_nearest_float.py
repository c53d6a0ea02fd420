"""Rounding to nearest by adding a power of two: the element function of the fast
loop of kernel ``loops.round_nearest_by_adding``.

Where the format's spacing at a magnitude ``a`` is ``2**q``, the carrier (p =
carrier_man_bits) computes::

    P = 2**(q + p)           the power of two whose own spacing is 2**q
    s = a + P                one rounding, in the thread's rounding mode
    r = s - P                exact

If ``a <= P``, s lies in [P, 2P], where the carrier's spacing is 2**q, so the
addition rounds a to a multiple of 2**q, to nearest with ties to even (P is an
even multiple of 2**q, so s's parity is that of the result's code), and the
subtraction is exact. The format's spacing is ``2**(e - man_bits)`` for ``a`` in
a binade ``[2**e, 2**(e + 1))`` and ``2**q_min`` below min_normal, so in carrier
exponent fields (a's field ``E``, P's field ``E_P``)::

    E_P = max(E + fast_drop_min, fast_drop_offset)

the same two parameters that give the bit-level fast path the number of bits
it drops (``core.fast_element.fast_round_bits``: E_P = E + drop). ``a <= P`` holds from
``fast_drop_min >= 1`` (``man_bits < carrier_man_bits``) up, and below
min_normal, where a < 2**(q_min + man_bits).

Per element that is an AND for the exponent field, an add and a max for P, a
float add and subtract, and two operations for the sign: fewer than
``core.fast_element.fast_round_bits`` needs.

The table's condition ``table.nearest_by_adding`` says where it holds on the
whole fast range: floating-point formats with subnormals and a signed zero,
``man_bits < carrier_man_bits``, whose spacing is never below the carrier's
smallest normal (the fast range then starts at 0) and whose P stays finite up
to the format's largest value. Elsewhere (bfloat16 in float32, whose largest
values would need P beyond float32; formats without subnormals; formats
without -0) the bit-level fast path runs. The addition rounds in the thread's
rounding mode and must see subnormal inputs, so the kernel table (``table``)
gives this kernel only where the thread rounds to nearest and keeps subnormals.
"""
import numpy as np
from numba import types
from numba.extending import overload

from ..core.bits import (
    NUMBA_OPTIONS, bit_and, bit_or, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits, wrapping_add,
)


def nearest_by_adding(bits, drop_min, drop_offset, carrier_man_bits):
    """Carrier bits `bits` (int32: float32, int64: float64) rounded to nearest
    (ties to even) onto the format's grid, sign included; valid in the fast range
    of formats with the ``nearest_by_adding`` parameter (module docstring). The
    other arguments are the parameters ``fast_drop_min``, ``fast_drop_offset`` and
    ``carrier_man_bits``."""
    raise NotImplementedError("nearest_by_adding runs inside numba kernels only")


@overload(nearest_by_adding, jit_options=NUMBA_OPTIONS)
def _nearest_by_adding(bits, drop_min, drop_offset, carrier_man_bits):
    if bits == types.int32:
        width, to_float, to_bits = np.int32, bits_to_float32, float32_to_bits
    elif bits == types.int64:
        width, to_float, to_bits = np.int64, bits_to_float64, float64_to_bits
    else:
        return None
    sign = width(-1) << width(bits.bitwidth - 1)
    magnitude_mask = width(~sign)

    def by_adding(bits, drop_min, drop_offset, carrier_man_bits):
        # loop invariants, each cast to the lanes' width (numba widens int32 arithmetic)
        exponent_mask = width(magnitude_mask ^ ((np.int64(1) << carrier_man_bits) - 1))
        exponent_step = width(np.int64(drop_min) << carrier_man_bits)
        least_power = width(np.int64(drop_offset) << carrier_man_bits)
        magnitude = bit_and(bits, magnitude_mask)
        power = to_float(max(wrapping_add(bit_and(magnitude, exponent_mask), exponent_step), least_power))
        rounded = (to_float(magnitude) + power) - power
        return bit_or(to_bits(rounded), bit_and(bits, sign))

    return by_adding
