"""The one table that picks the CPU kernel for a call.

A kernel is chosen from the format (its kernel parameters, ``core.layout``), the
mode, the carriers (int32: float32 data, int64: float64 data; int32 into int64: a
widening kernel, float32 data into a float64 result) and the thread's
floating-point environment (``environment``). `ROWS` lists the kernels in order
of preference, each with the condition on the parameters under which its fast
path gives the bit-level kernel's results; the first row that serves the call
and whose environment the thread has wins. The last rows work on integers alone
and take every call that the rows above leave, in any environment.

Adding a fast path is a file in this package and a row here; the tests run
every row against the general loop (``tests/test_kernel_table.py``). Adding a
rounding mode is a number in ``rpfloat.modes.Mode`` (with its spellings), a name
for it in ``core.layout`` and its decision in ``core.element.round_bits``: the
last row, the general loop, serves every mode; a fast path serves a mode once
its row lists it.

Every kernel is called as ``kernel(source, target, fast_params, params, mode,
key, offset, rand_bits)``: element ``i`` of `source` (carrier bits) goes to
``target[i]``, which must not overlap `source`, and draws random number
``offset + i`` of the stream `key`, so a slice rounded with the matching offset
gets the bits of the whole. `fast_params` are `params` themselves, except for a
widening kernel, whose target is the uint32 view of its float64 results (two
words per element) and whose fast path rounds float32 bits with float32
parameters (``rpfloat._params.widening_params``).
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np

from ..core.fast_element import FAST_BITS_MODES
from ..core.layout import (
    ALL_MODES, DETERMINISTIC_MODES, NEAREST, OVERFLOW_SATURATE, OVERFLOW_WRAP, P_BELOW_QUANTUM_BITS, P_CARRIER_BIAS,
    P_CARRIER_MAN_BITS, P_DEEP, P_FAST_ALIGNED_BITS, P_FAST_DROP_MIN, P_FAST_DROP_OFFSET, P_FAST_HIGH_BITS,
    P_FAST_LOW_BITS, P_FAST_LOW_RANDOM_BITS, P_MIN_NORMAL_BITS, P_NO_NEGATIVE_ZERO, P_OVERFLOW, P_SCALE_BITS,
    P_WORD_BITS, STOCHASTIC,
)
from .environment import KEEPS_SUBNORMALS, ROUNDS_TO_NEAREST, environment
from .fast_fixed import SCALED_MODES, round_scaled
from .fast_stochastic_float64 import MIN_DROP
from .loops import (
    MODE_KERNELS, UNIFORM_KERNELS, entry_point, round_general, round_nearest_by_adding, round_scaled_stochastic,
    round_stochastic_halves, round_stochastic_halves_from_zero, round_stochastic_split,
    round_stochastic_split_from_zero,
)

__all__ = ["ROWS", "KERNELS", "choose", "kernel_for", "first_available", "bit_level_kernel"]

SAME_WIDTH = ((np.int32, np.int32), (np.int64, np.int64))
ANY_CARRIERS = SAME_WIDTH + ((np.int32, np.int64),)
FLOAT64_DATA = ((np.int64, np.int64),)

# where the split loop's spacing below min_normal lies in [2**-8, 1] (float32 bits), its
# kernel from 0 up takes the format: coarse formats (float6, float4), onto which raw
# data put a share of values 2**8 times below that spacing; the tie check costs the
# loop 3-10% elsewhere
SPLIT_FROM_ZERO = (0x3B800000, 0x3F800000)
# where the halves loop's spacing below min_normal is at least 2**-32 (float64 bits),
# its kernel from 0 up takes the format (float16, the float8, float6 and float4
# formats, onto which data put values below one spacing); formats with a wider
# exponent range (bfloat16, tf32) keep the other, which is faster where no value
# lies below one spacing
HALVES_FROM_ZERO = 0x3DF0000000000000
FLOAT32_2_TO_126 = 0x7E800000  # float32 bits of 2**126


class Row(NamedTuple):
    """One kernel of the table and the calls it serves."""

    name: str
    kernels: tuple            # the kernel for each mode number (None: not this mode)
    carriers: tuple           # the (source bits, target bits) pairs it serves
    environment: int          # the environment flags it needs (0: none)
    applies: Callable         # applies(params) -> bool, params as laid out in core.layout
    reads_fast_params: bool   # applies() sees the fast path's parameters (a widening
                              # kernel's float32 ones), else the call's


def _by_mode(kernel, modes):
    """`kernel` at the positions of `modes` in a tuple indexed by mode number."""
    return tuple(kernel if mode in modes else None for mode in ALL_MODES)


def _by_mode_number(kernels, modes):
    """``kernels[i]``, the kernel of ``modes[i]``, at the position of that mode."""
    return tuple(kernels[modes.index(mode)] if mode in modes else None for mode in ALL_MODES)


def _fixed(params):
    return params[P_WORD_BITS] != 0


def _frac_bits(params):
    """A fixed-point format's frac_bits, from the float64 bits of its spacing
    (1023 where that is a float64 subnormal: no fast path takes those)."""
    return 1023 - ((params[P_SCALE_BITS] >> 52) & 0x7FF)


def scaled(params):
    """fast_fixed: saturating fixed point whose scaling by 2**frac_bits never
    underflows, with 2**frac_bits finite and 2**-frac_bits normal in the carrier
    and every k within its significand."""
    carrier_max_exp = params[P_CARRIER_BIAS] + 1
    return (_fixed(params) and params[P_OVERFLOW] == OVERFLOW_SATURATE
            and 0 <= _frac_bits(params) < carrier_max_exp - 1
            and params[P_WORD_BITS] <= params[P_CARRIER_MAN_BITS] + 1)


def scaled_random(params):
    """fast_stochastic_float32 by scaling: fixed point (no wrap-around) in a
    float32 carrier (float32 results, and a widening kernel's fast path), with
    2**frac_bits and 2**-frac_bits normal float32 numbers."""
    return (_fixed(params) and params[P_CARRIER_MAN_BITS] == 23 and params[P_OVERFLOW] != OVERFLOW_WRAP
            and abs(_frac_bits(params)) <= params[P_CARRIER_BIAS] - 1)


def nearest_by_adding(params):
    """fast_nearest_float: floating point whose fast range starts at 0 (every
    spacing a normal number of the carrier), with subnormals and -0, at least one
    bit dropped, and the power of two 2**(q + carrier_man_bits) finite at the
    format's largest value."""
    top_power_field = (params[P_FAST_HIGH_BITS] >> params[P_CARRIER_MAN_BITS]) + params[P_FAST_DROP_MIN]
    return (not _fixed(params)
            and params[P_FAST_LOW_BITS] == 0 < params[P_FAST_HIGH_BITS]
            and params[P_FAST_DROP_MIN] >= 1
            and params[P_BELOW_QUANTUM_BITS] != params[P_MIN_NORMAL_BITS]
            and not params[P_NO_NEGATIVE_ZERO]
            and top_power_field <= 2 * params[P_CARRIER_BIAS])


def uniform_drop(params):
    """fast_same_drop: floating point that drops one bit count from
    fast_aligned_bits up (no subnormals above the carrier's normals), at least
    one bit, with -0."""
    aligned_field = params[P_FAST_ALIGNED_BITS] >> params[P_CARRIER_MAN_BITS]
    return (not _fixed(params)
            and params[P_FAST_LOW_BITS] <= params[P_FAST_HIGH_BITS]
            and params[P_FAST_DROP_MIN] >= 1
            and params[P_FAST_DROP_OFFSET] - aligned_field <= params[P_FAST_DROP_MIN]
            and not params[P_NO_NEGATIVE_ZERO])


def stochastic_uniform(params):
    """fast_same_drop in stochastic rounding: float32 data onto `uniform_drop`
    formats whose min_normal is float32's (bfloat16, tf32)."""
    return (uniform_drop(params) and params[P_CARRIER_MAN_BITS] == 23
            and params[P_FAST_LOW_RANDOM_BITS] >= params[P_FAST_ALIGNED_BITS])


def stochastic_split(params):
    """fast_stochastic_float32 in two parts: in float32, one bit count from
    min_normal up and a fixed spacing below it, that spacing and its inverse
    normal float32 numbers: the `nearest_by_adding` formats, and the
    `uniform_drop` ones without subnormals (0 and min_normal one spacing apart)."""
    quantum, min_normal = params[P_BELOW_QUANTUM_BITS], params[P_MIN_NORMAL_BITS]
    return (params[P_CARRIER_MAN_BITS] == 23
            and quantum <= FLOAT32_2_TO_126
            and (nearest_by_adding(params)
                 or (uniform_drop(params) and quantum == min_normal == params[P_FAST_ALIGNED_BITS]
                     and params[P_FAST_LOW_RANDOM_BITS] <= min_normal)))


def split_from_zero(params):
    """`stochastic_split` formats whose spacing below min_normal lies in [2**-8, 1]."""
    return stochastic_split(params) and SPLIT_FROM_ZERO[0] <= params[P_BELOW_QUANTUM_BITS] <= SPLIT_FROM_ZERO[1]


def general(params):
    """Formats whose min_normal is a carrier subnormal, and fixed-point wrap-around:
    only the loop without a fast path (the rare paths of round_bits) takes them."""
    return params[P_DEEP] != 0 or params[P_OVERFLOW] == OVERFLOW_WRAP


def halves(params):
    """fast_stochastic_float64: formats that drop at least 32 bits of every
    float64 of the fast range."""
    return (params[P_CARRIER_MAN_BITS] == 52 and params[P_FAST_DROP_MIN] >= MIN_DROP
            and params[P_FAST_LOW_BITS] <= params[P_FAST_HIGH_BITS]  # a fast range (not deep, no wrap-around)
            and params[P_DEEP] == 0 and params[P_OVERFLOW] != OVERFLOW_WRAP)


def halves_from_zero(params):
    """`halves` formats whose spacing below min_normal is at least 2**-32."""
    return halves(params) and params[P_BELOW_QUANTUM_BITS] >= HALVES_FROM_ZERO


STOCHASTIC_ONLY = (STOCHASTIC,)
ROWS = (
    # fast paths on integers (fast_same_drop): bfloat16, tf32, formats without subnormals
    Row("uniform_drop", tuple(UNIFORM_KERNELS[mode] if mode in DETERMINISTIC_MODES else None for mode in ALL_MODES),
        ANY_CARRIERS, 0, uniform_drop, False),
    # fast paths on the hardware's floating-point arithmetic
    Row("nearest_by_adding", _by_mode(round_nearest_by_adding, (NEAREST,)), ANY_CARRIERS,
        KEEPS_SUBNORMALS | ROUNDS_TO_NEAREST, nearest_by_adding, False),
    Row("stochastic_uniform", _by_mode(UNIFORM_KERNELS[STOCHASTIC], STOCHASTIC_ONLY), ANY_CARRIERS, 0,
        stochastic_uniform, False),
    Row("stochastic_split_from_zero", _by_mode(round_stochastic_split_from_zero, STOCHASTIC_ONLY), ANY_CARRIERS,
        KEEPS_SUBNORMALS, split_from_zero, False),
    Row("stochastic_split", _by_mode(round_stochastic_split, STOCHASTIC_ONLY), ANY_CARRIERS,
        KEEPS_SUBNORMALS, stochastic_split, False),
    Row("scaled_random", _by_mode(round_scaled_stochastic, STOCHASTIC_ONLY), ANY_CARRIERS,
        KEEPS_SUBNORMALS, scaled_random, True),
    Row("scaled", _by_mode(round_scaled, SCALED_MODES), ANY_CARRIERS, KEEPS_SUBNORMALS, scaled, False),
    # bit-level kernels, any environment: float64 data in 32-bit words
    # (fast_stochastic_float64), the fast path of every format (core.fast_element), and the
    # loop without a fast path, where round_bits decides every element: the rare
    # formats, and any mode that no fast path knows
    Row("stochastic_halves_from_zero", _by_mode(round_stochastic_halves_from_zero, STOCHASTIC_ONLY), FLOAT64_DATA,
        0, halves_from_zero, False),
    Row("stochastic_halves", _by_mode(round_stochastic_halves, STOCHASTIC_ONLY), FLOAT64_DATA, 0, halves, False),
    Row("bits", _by_mode_number(MODE_KERNELS, FAST_BITS_MODES), ANY_CARRIERS, 0, lambda params: not general(params),
        False),
    Row("general", (round_general,) * len(ALL_MODES), ANY_CARRIERS, 0, lambda params: True, False),
)
BIT_LEVEL = [row.name for row in ROWS].index("stochastic_halves_from_zero")  # ROWS[BIT_LEVEL:]: no environment
# every array kernel of the table, once (the cache test loads each)
KERNELS = tuple(dict.fromkeys(kernel for row in ROWS for kernel in row.kernels if kernel is not None))


@functools.lru_cache(maxsize=1024)
def choose(source_bits, target_bits, params, mode, fast_params=None):
    """The rows that may round this call, in order: those that need an environment
    the thread may lack, then the first that needs none (always one: the last
    row takes every call). As ``((row, kernel), ...)``. `fast_params` are
    `params` unless given (a widening kernel's)."""
    fast_params = params if fast_params is None else fast_params
    candidates = []
    for row in ROWS:
        kernel = row.kernels[mode]
        if kernel is None or (source_bits, target_bits) not in row.carriers:
            continue
        if not row.applies(fast_params if row.reads_fast_params else params):
            continue
        candidates.append((row, kernel))
        if row.environment == 0:
            return tuple(candidates)
    raise AssertionError("the last row takes every call")


def kernel_for(source_bits, target_bits, params, mode, fast_params=None):
    """The compiled entry point of the kernel the table gives this call (module
    docstring). Call it in the thread that runs the kernel: it checks that
    thread's floating-point environment."""
    return first_available(choose(source_bits, target_bits, params, mode, fast_params), source_bits, target_bits)


def first_available(candidates, source_bits, target_bits):
    """The entry point of the first of `choose`'s candidates whose environment
    the calling thread has."""
    for row, kernel in candidates:
        if row.environment == 0 or environment() & row.environment == row.environment:
            return entry_point_of(kernel, source_bits, target_bits)
    raise AssertionError("the last candidate needs no environment")


def bit_level_kernel(source_bits, target_bits, params, mode):
    """The entry point of the kernel the table's bit-level rows give this call:
    what runs where the thread's environment allows no other (the reference the
    tests hold every fast path to)."""
    for row in ROWS[BIT_LEVEL:]:
        kernel = row.kernels[mode]
        if kernel is not None and (source_bits, target_bits) in row.carriers and row.applies(params):
            return entry_point_of(kernel, source_bits, target_bits)
    raise AssertionError("the last row takes every call")


def entry_point_of(kernel, source_bits, target_bits):
    """`kernel` compiled (or loaded from numba's cache) for these bit types: its
    compiled entry point, which skips the dispatcher's type matching."""
    key = (kernel, source_bits, target_bits)
    entry = _ENTRY_POINTS.get(key)
    if entry is None:
        entry = _ENTRY_POINTS[key] = entry_point(kernel, source_bits, target_bits)
    return entry


_ENTRY_POINTS = {}  # (kernel, source bits, target bits) -> compiled entry point
