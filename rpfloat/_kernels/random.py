"""Counter-based random numbers: SplitMix64 evaluated at an element's index.

Why SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014; the mixer is Stafford's "Mix13"): its n-th output is a
pure function of the seed and n, ``mix(seed + (n + 1) * GAMMA)``, so element ``i``
of an array can draw its number without knowing any other element. That is what
makes results independent of threads, chunking and memory layout. The output
function is a bijection on 64 bits and the sequence passes BigCrush; it costs two
multiplications, so the kernels stay at memory speed. (Philox or Threefry are
sounder as cryptographic-style hashes but several times slower.)
"""
import numpy as np
from numba import njit

from ._bits import NUMBA_OPTIONS

GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX_MUL_1 = np.uint64(0xBF58476D1CE4E5B9)
MIX_MUL_2 = np.uint64(0x94D049BB133111EB)
SHIFT_30 = np.uint64(30)
SHIFT_27 = np.uint64(27)
SHIFT_31 = np.uint64(31)
ONE = np.uint64(1)


@njit(inline="always", **NUMBA_OPTIONS)
def splitmix64(key, index):
    """The `index`-th (0-based) 64-bit output of SplitMix64 seeded with `key`."""
    z = key + (np.uint64(index) + ONE) * GOLDEN_GAMMA
    z = (z ^ (z >> SHIFT_30)) * MIX_MUL_1
    z = (z ^ (z >> SHIFT_27)) * MIX_MUL_2
    return z ^ (z >> SHIFT_31)
