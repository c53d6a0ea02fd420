"""Counter-based random numbers: number ``n`` of the stream ``key`` is a pure
function of ``(key, n)``, so element ``n`` of an array draws it without knowing
any other element. That is what makes results independent of threads, chunking
and memory layout.

Number ``n`` is 64 bits, two 32-bit halves made the same way with independent
keys and different mixers::

    keys  = splitmix64(key, n >> 32)            (one 64-bit key per 2**32 numbers)
    weyl  = (n mod 2**32) * 0x9E3779B9          (golden-ratio Weyl sequence)
    high  = mix_a(weyl + keys.high);  low = mix_b(weyl + keys.low)
    bits  = high << 32 | low

``mix_a`` and ``mix_b`` are xor-shift-multiply bijections of 32 bits found by
Chris Wellons' hash prospector for their low avalanche bias (two multiplies
each). Why not one 64-bit generator such as SplitMix64 for every number: x86
SIMD (AVX2) has no 64-bit multiply, so a 64-bit mixer runs at a third of memory
speed, while these 32-bit mixers fill eight lanes at once and keep stochastic
rounding at memory speed. The decisions of stochastic rounding on float32 data
almost only read the high half; each half on its own takes every 32-bit value
exactly once per 2**32 consecutive numbers.

SplitMix64 (Steele, Lea & Flood, OOPSLA 2014; Stafford's "Mix13" finaliser),
whose n-th output is ``mix(seed + (n + 1) * GAMMA)``, derives the per-segment keys.
"""
import numpy as np
from numba import njit

from .bits import NUMBA_OPTIONS, bit_xor, shift_left, shift_right, wrapping_add, wrapping_mul

GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX_MUL_1 = np.uint64(0xBF58476D1CE4E5B9)
MIX_MUL_2 = np.uint64(0x94D049BB133111EB)
SHIFT_30 = np.uint64(30)
SHIFT_27 = np.uint64(27)
SHIFT_31 = np.uint64(31)
ONE = np.uint64(1)

WEYL_32 = np.uint32(0x9E3779B9)
MIX_A = (np.uint32(0x7FEB352D), np.uint32(0x846CA68B))  # shifts 16, 15, 16
MIX_B = (np.uint32(0x21F0AAAD), np.uint32(0x735A2D97))  # shifts 16, 15, 15
MULTIPLIERS = (MIX_A, MIX_B)  # the high half's, the low half's
LOW_32 = np.uint64(0xFFFFFFFF)
U32_32 = np.uint64(32)


@njit(**NUMBA_OPTIONS)
def splitmix64(key, index):
    """The `index`-th (0-based) 64-bit output of SplitMix64 seeded with `key`."""
    z = key + (np.uint64(index) + ONE) * GOLDEN_GAMMA
    z = (z ^ (z >> SHIFT_30)) * MIX_MUL_1
    z = (z ^ (z >> SHIFT_27)) * MIX_MUL_2
    return z ^ (z >> SHIFT_31)


@njit(**NUMBA_OPTIONS)
def _mix(value, multipliers, last_shift):
    value = bit_xor(value, shift_right(value, np.uint32(16)))
    value = wrapping_mul(value, multipliers[0])
    value = bit_xor(value, shift_right(value, np.uint32(15)))
    value = wrapping_mul(value, multipliers[1])
    return bit_xor(value, shift_right(value, last_shift))


@njit(**NUMBA_OPTIONS)
def segment_keys(key, segment):
    """The two 32-bit keys of numbers ``segment * 2**32`` to ``segment * 2**32 + 2**32 - 1``."""
    mixed = splitmix64(key, segment)
    return np.uint32(mixed >> U32_32), np.uint32(mixed & LOW_32)


@njit(**NUMBA_OPTIONS)
def counter_bits(keys, counter):
    """Number ``counter`` (a uint32: the low 32 bits of n) of the segment with `keys`, as a uint64."""
    return weyl_bits(keys, wrapping_mul(counter, WEYL_32))


@njit(**NUMBA_OPTIONS)
def weyl_bits(keys, weyl):
    """`counter_bits` from ``counter * 0x9E3779B9`` (mod 2**32): loops step it by
    WEYL_32 rather than multiply."""
    high, low = weyl_halves(keys, weyl)
    return joined(high, low)


@njit(**NUMBA_OPTIONS)
def weyl_halves(keys, weyl):
    """`weyl_bits` as its high and low 32-bit halves (two uint32)."""
    keyed_high, keyed_low = keyed_weyl(keys, weyl)
    return mix_high(keyed_high, MULTIPLIERS), mix_low(keyed_low, MULTIPLIERS)


@njit(**NUMBA_OPTIONS)
def mix_high(keyed, multipliers):
    """The high half of a number from its keyed Weyl word (`keyed_weyl`), with
    `multipliers` (MULTIPLIERS, or `loop_constants`' copy)."""
    return _mix(keyed, multipliers[0], np.uint32(16))


@njit(**NUMBA_OPTIONS)
def mix_low(keyed, multipliers):
    """The low half, as `mix_high`."""
    return _mix(keyed, multipliers[1], np.uint32(15))


@njit(**NUMBA_OPTIONS)
def joined(high, low):
    """The uint64 of two uint32 halves."""
    return shift_left(np.uint64(high), U32_32) | np.uint64(low)


@njit(**NUMBA_OPTIONS)
def keyed_weyl(keys, weyl):
    """What `weyl_bits` mixes into its high and low halves: ``weyl`` plus each key
    (two uint32). A loop may step these itself (`keyed_bits`) and keep one
    register fewer than for ``weyl`` and the key."""
    return wrapping_add(weyl, keys[0]), wrapping_add(weyl, keys[1])


@njit(**NUMBA_OPTIONS)
def loop_constants(hidden):
    """``(multipliers, weyl_step)`` for `keyed_bits` in a loop: MULTIPLIERS and
    WEYL_32, each xor `hidden`, a zero the compiler cannot see
    (``bits.hidden_zero``), so that the loop keeps them as values."""
    return (((bit_xor(MIX_A[0], hidden), bit_xor(MIX_A[1], hidden)),
             (bit_xor(MIX_B[0], hidden), bit_xor(MIX_B[1], hidden))), bit_xor(WEYL_32, hidden))


@njit(**NUMBA_OPTIONS)
def keyed_bits(keyed_high, keyed_low, multipliers):
    """`weyl_bits` from `keyed_weyl`'s two words, with `loop_constants`' multipliers."""
    return joined(mix_high(keyed_high, multipliers), mix_low(keyed_low, multipliers))


@njit(**NUMBA_OPTIONS)
def fill_halves(keys, weyl, high, low):
    """``high[i] << 32 | low[i]`` = ``weyl_bits(keys, weyl + i * WEYL_32)`` for every
    i, in two loops: each mixes in eight 32-bit lanes, where a loop over 64-bit
    numbers (float64 data) would mix both halves in four."""
    step = weyl
    for i in range(high.size):
        high[i] = mix_high(wrapping_add(step, keys[0]), MULTIPLIERS)
        step = wrapping_add(step, WEYL_32)
    step = weyl
    for i in range(low.size):
        low[i] = mix_low(wrapping_add(step, keys[1]), MULTIPLIERS)
        step = wrapping_add(step, WEYL_32)


@njit(**NUMBA_OPTIONS)
def random_bits(key, index):
    """Number `index` (an int64 >= 0) of the stream `key` (a uint64), as a uint64."""
    index = np.uint64(index)
    return counter_bits(segment_keys(key, index >> U32_32), np.uint32(index & LOW_32))


# Which bits of a random number count: its top `rand_bits` (the r of rand_bits).


@njit(**NUMBA_OPTIONS)
def top_bits_mask_32(rand_bits, word_start):
    """The bits of the 32-bit word that starts `word_start` bits below the top of
    a 64-bit random number (0: its high half, 32: its low half) that lie among
    that number's top `rand_bits` bits, as a uint32 mask."""
    dropped = min(max(32 + word_start - rand_bits, 0), 32)
    return np.uint32(~((np.int64(1) << dropped) - np.int64(1)) & 0xFFFFFFFF)


@njit(**NUMBA_OPTIONS)
def top_bits_mask_64(rand_bits):
    """The top `rand_bits` (1..64) bits of a uint64, as a mask."""
    return ~((ONE << np.uint64(64 - rand_bits)) - ONE)
