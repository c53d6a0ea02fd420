"""Bit-flip fault injection on codes: each bit of a field flips on its own with a
fixed probability, decided by the counter-based stream (``core.stream``).

Bit ``b`` of code ``i`` (C-order flat index ``offset + i`` in the whole) flips iff
number ``(offset + i) * bits + b`` of stream ``key`` is below ``threshold``: a
probability of ``threshold / 2**64``. Numbers of one segment share their keys,
which the loop derives once per segment (``2**32`` numbers), not once per bit.
"""
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS
from ..core.stream import LOW_32, U32_32, counter_bits, segment_keys

ONE = np.uint64(1)

SIGNATURE = types.void(types.Array(types.uint64, 1, "C"), types.uint64, types.uint64, types.uint64,
                       types.int64, types.int64)


@njit(SIGNATURE, **NUMBA_OPTIONS)
def flip_field_bits(codes, field_mask, threshold, key, offset, bits):
    """Flip, in place, each bit of `codes` (uint64) set in `field_mask` where its
    random number is below `threshold` (see the module docstring; `bits`: the
    code width, 1 to 64)."""
    segment = np.uint64(0)
    keys = segment_keys(key, segment)
    for i in range(codes.size):
        first = np.uint64(offset + i) * np.uint64(bits)
        flips = np.uint64(0)
        for b in range(bits):
            bit = ONE << np.uint64(b)
            if field_mask & bit == np.uint64(0):
                continue
            index = first + np.uint64(b)
            if index >> U32_32 != segment:
                segment = index >> U32_32
                keys = segment_keys(key, segment)
            if counter_bits(keys, np.uint32(index & LOW_32)) < threshold:
                flips |= bit
        codes[i] ^= flips
