"""Bit-flip fault injection on codes: each bit of a field flips on its own with a
fixed probability, decided by the counter-based stream (``core.stream``).

Bit ``b`` of code ``i`` (C-order flat index ``offset + i`` in the whole) flips iff
number ``(offset + i) * bits + b`` of stream ``key`` is below ``threshold``: a
probability of ``threshold / 2**64``.

The codes go CHUNK at a time, and a chunk bit position by bit position (those
of the field only): the numbers of bit ``b`` of consecutive codes lie ``bits``
apart in the stream, so their Weyl words (``core.stream``) step by ``bits *
0x9E3779B9``, and one loop over the chunk's codes mixes both halves in 32-bit
lanes, compares them with the threshold's halves and sets the bit, vectorised.
A chunk whose numbers cross a 2**32 segment (their keys change there, once in
2**32 numbers) draws them one by one.
"""
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, wrapping_add, wrapping_mul
from ..core.stream import LOW_32, MULTIPLIERS, U32_32, WEYL_32, keyed_weyl, mix_high, mix_low, random_bits, \
    segment_keys

ONE = np.uint64(1)
CHUNK = 4096  # codes at a time

SIGNATURE = types.void(types.Array(types.uint64, 1, "C"), types.uint64, types.uint64, types.uint64,
                       types.int64, types.int64)


@njit(SIGNATURE, **NUMBA_OPTIONS)
def flip_field_bits(codes, field_mask, threshold, key, offset, bits):
    """Flip, in place, each bit of `codes` (uint64) set in `field_mask` where its
    random number is below `threshold` (see the module docstring; `bits`: the
    code width, 1 to 64; `threshold` below 2**64)."""
    threshold_high, threshold_low = np.uint32(threshold >> U32_32), np.uint32(threshold & LOW_32)
    for first in range(0, codes.size, CHUNK):
        chunk = codes[first:first + CHUNK]
        start = np.uint64(offset + first) * np.uint64(bits)  # the number of bit 0 of the chunk's first code
        last = start + np.uint64(chunk.size * bits - 1)
        if start >> U32_32 != last >> U32_32:  # crossing a segment: one by one
            for i in range(chunk.size):
                for b in range(bits):
                    bit = ONE << np.uint64(b)
                    if field_mask & bit != 0 and random_bits(key, start + np.uint64(i * bits + b)) < threshold:
                        chunk[i] ^= bit
            continue
        keys = segment_keys(key, start >> U32_32)
        step = wrapping_mul(np.uint32(bits), WEYL_32)  # between bit b of one code and of the next
        for b in range(bits):
            bit = ONE << np.uint64(b)
            if field_mask & bit == 0:
                continue
            weyl = wrapping_mul(np.uint32((start + np.uint64(b)) & LOW_32), WEYL_32)
            keyed_high, keyed_low = keyed_weyl(keys, weyl)
            for i in range(chunk.size):  # vectorised: 32-bit lanes for the mixing
                high = mix_high(keyed_high, MULTIPLIERS)
                low = mix_low(keyed_low, MULTIPLIERS)
                below = (high < threshold_high) | ((high == threshold_high) & (low < threshold_low))
                chunk[i] ^= bit if below else np.uint64(0)
                keyed_high = wrapping_add(keyed_high, step)
                keyed_low = wrapping_add(keyed_low, step)
