"""The counter-based random stream that rpfloat/_kernels/core/stream.py documents,
re-implemented in plain Python integers (no rpfloat code): number ``index`` of the
stream of a 64-bit ``key``, and the key of an int seed (docs/randomness.md).

Used as an independent oracle by tests/test_random_stream.py, test_faults.py and
test_accumulate_models.py.
"""

from __future__ import annotations

import numpy as np

MASK_64 = 2**64 - 1
MASK_32 = 2**32 - 1


def splitmix64(key: int, index: int) -> int:
    z = (key + (index + 1) * 0x9E3779B97F4A7C15) & MASK_64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK_64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK_64
    return z ^ (z >> 31)


def mix32(value: int, multiplier_1: int, multiplier_2: int, last_shift: int) -> int:
    value ^= value >> 16
    value = (value * multiplier_1) & MASK_32
    value ^= value >> 15
    value = (value * multiplier_2) & MASK_32
    return value ^ (value >> last_shift)


def stream(key: int, index: int) -> int:
    """Number `index` of the stream `key`, as rpfloat/_kernels/core/stream.py documents it."""
    segment_key = splitmix64(key, index >> 32)
    weyl = ((index & MASK_32) * 0x9E3779B9) & MASK_32
    high = mix32((weyl + (segment_key >> 32)) & MASK_32, 0x7FEB352D, 0x846CA68B, 16)
    low = mix32((weyl + (segment_key & MASK_32)) & MASK_32, 0x21F0AAAD, 0x735A2D97, 15)
    return (high << 32) | low


def seed_key(seed: int) -> int:
    """The key of an int seed: the first 64-bit word of its SeedSequence."""
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])
