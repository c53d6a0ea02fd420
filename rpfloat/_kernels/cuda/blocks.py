"""CUDA kernels for scaled formats: each block's largest magnitude, its scale,
and its elements rounded in float64, as the CPU's general block kernel
(``cpu.blocks.round_blocks``) does them, with the same ``core.scale``
functions: the same bits for the same seed.

The data arrive flat, in the C order of ``(outer, length, inner)``, blocks of
``block_size`` along the middle axis (a ragged last one allowed), and element
``(o, a, i)`` draws number ``offset + (o * length + a) * inner + i`` of the
stream, its flat index. A block holding NaN or inf is a NaN block: its
elements are NaN. Two layouts of the work:

- ``small_blocks`` (blocks of at most SMALL_BLOCK elements: MX, NVFP4): one
  thread per block, which finds the block's largest magnitude, its scale, and
  then rounds its elements.
- ``largest_of_segments``, ``scales_of_blocks`` and ``elements`` (larger
  blocks: one scale per tensor, per channel): the threads take a segment of
  at most SEGMENT elements of a block each and merge its largest magnitude
  into the block's with an atomic maximum (over the magnitudes' float64 bits,
  which order as the magnitudes do); a kernel over the blocks makes their
  scales; one over the elements rounds them (grid-stride).

``largest_finite_keys`` and ``largest_key`` give the largest finite magnitude
of an array in two launches, for NVFP4's tensor scale. The kernels take the format's parameter
tuples of ``core.scale`` (``block_params``, ``float_params``) and the element's
and scale format's kernel parameters (``element_params``, ``scale_params``).
"""
import functools

import numpy as np
from numba import cuda, njit

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, float64_to_bits
from ..core.element import U_ZERO
from ..core.layout import ALL_MODES, STOCHASTIC
from ..core.scale import (
    B_BLOCK_SIZE, B_KIND, F_ELEMENT_MAX, F_TENSOR_SCALE, POWER_OF_TWO, power_of_two, power_of_two_exponent,
    round_element, significand_scale,
)
from ..core.stream import random_bits

__all__ = ["SMALL_BLOCK", "SEGMENT", "scaled_kernels", "fill", "largest_finite_keys", "largest_key"]

SMALL_BLOCK = 256  # blocks up to this many elements take one thread each
SEGMENT = 1024     # larger blocks: elements per thread in the search for their largest magnitude
INF_BITS = np.int64(0x7FF0000000000000)  # float64 inf: above every finite magnitude's bits
MAGNITUDE_BITS = np.int64(0x7FFFFFFFFFFFFFFF)


@njit(**NUMBA_OPTIONS)
def magnitude_key(value):
    """The float64 bits of ``|value|``, inf's for NaN and inf: a block's largest
    key is its largest magnitude's, or inf's where it holds NaN or inf. (The
    sign is cleared from the bits: ``abs`` of a NaN may keep it on a GPU.)"""
    return min(float64_to_bits(np.float64(value)) & MAGNITUDE_BITS, INF_BITS)


@njit(**NUMBA_OPTIONS)
def block_scale(largest_key, block_params, float_params, scale_params):
    """``(scale, inverse)`` of a block from its largest `magnitude_key`: NaN for a
    NaN block; power-of-two scales with their exact inverse, significand scales
    (times the tensor scale) with 1 (elements divide by them)."""
    if largest_key >= INF_BITS:
        return np.nan, np.nan
    largest = bits_to_float64(largest_key)
    if block_params[B_KIND] == POWER_OF_TWO:
        exponent = power_of_two_exponent(largest, block_params, float_params[F_ELEMENT_MAX])
        return power_of_two(exponent), power_of_two(-exponent)
    return significand_scale(largest, float_params, scale_params) * float_params[F_TENSOR_SCALE], 1.0


@njit(inline="always", **NUMBA_OPTIONS)  # as round_element, which it calls with the kernel's constant mode
def scaled_value(value, scale, inverse, by_power_of_two, element_params, mode, random, rand_bits):
    """`value` of a block of `scale` rounded: ``round(value / scale) * scale`` in
    float64 (NaN in a NaN block), as the CPU's block kernels compute it."""
    if scale != scale:
        return np.nan
    quotient = value * inverse if by_power_of_two else value / scale
    return round_element(quotient, value, scale, element_params, mode, random, rand_bits, True) * scale


@njit(**NUMBA_OPTIONS)
def block_bounds(block, length, block_size):
    """``(first, stop)`` along the axis of block number `block` (the last may be ragged)."""
    first = block * block_size
    return first, min(first + block_size, length)


@functools.lru_cache(maxsize=None)
def scaled_kernels(mode):
    """``(small_blocks, largest_of_segments, scales_of_blocks, elements)`` for
    `mode` (a mode number of ``layout.ALL_MODES``), the mode a constant."""
    if mode not in ALL_MODES:
        raise ValueError(f"no rounding mode numbered {mode}")
    stochastic = mode >= STOCHASTIC

    # (np.uint64 of a random number: a no-op on the device; in the simulator, where an
    # njit call returns a Python int, it keeps the type that round_bits expects)
    @cuda.jit
    def small_blocks(source, target, outer, length, inner, block_params, float_params, element_params, scale_params,
                     key, offset, rand_bits):
        block_size = block_params[B_BLOCK_SIZE]
        blocks = (length + block_size - 1) // block_size
        by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
        for column in range(cuda.grid(1), outer * blocks * inner, cuda.gridsize(1)):
            i = column % inner
            block = (column // inner) % blocks
            o = column // (inner * blocks)
            first, stop = block_bounds(block, length, block_size)
            largest = np.int64(0)
            for a in range(first, stop):
                largest = max(largest, magnitude_key(source[(o * length + a) * inner + i]))
            scale, inverse = block_scale(largest, block_params, float_params, scale_params)
            for a in range(first, stop):
                index = (o * length + a) * inner + i
                random = np.uint64(random_bits(key, offset + index)) if stochastic else U_ZERO
                target[index] = scaled_value(np.float64(source[index]), scale, inverse, by_power_of_two,
                                             element_params, mode, random, rand_bits)

    @cuda.jit
    def largest_of_segments(source, largest, outer, length, inner, block_size):
        blocks = (length + block_size - 1) // block_size
        segments = (block_size + SEGMENT - 1) // SEGMENT  # per block
        for work in range(cuda.grid(1), outer * blocks * segments * inner, cuda.gridsize(1)):
            i = work % inner
            segment = (work // inner) % segments
            block = (work // (inner * segments)) % blocks
            o = work // (inner * segments * blocks)
            first, stop = block_bounds(block, length, block_size)
            start = first + segment * SEGMENT
            key = np.int64(0)
            for a in range(start, min(start + SEGMENT, stop)):
                key = max(key, magnitude_key(source[(o * length + a) * inner + i]))
            cuda.atomic.max(largest, (o * blocks + block) * inner + i, key)

    @cuda.jit
    def scales_of_blocks(largest, scales, inverses, block_params, float_params, scale_params):
        for block in range(cuda.grid(1), largest.size, cuda.gridsize(1)):
            scale, inverse = block_scale(largest[block], block_params, float_params, scale_params)
            scales[block] = scale
            inverses[block] = inverse

    @cuda.jit
    def elements(source, target, scales, inverses, length, inner, block_params, element_params, key, offset,
                 rand_bits):
        block_size = block_params[B_BLOCK_SIZE]
        blocks = (length + block_size - 1) // block_size
        by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
        for index in range(cuda.grid(1), source.size, cuda.gridsize(1)):
            i = index % inner
            row = index // inner  # o * length + a
            block = ((row // length) * blocks + (row % length) // block_size) * inner + i
            random = np.uint64(random_bits(key, offset + index)) if stochastic else U_ZERO
            target[index] = scaled_value(np.float64(source[index]), scales[block], inverses[block], by_power_of_two,
                                         element_params, mode, random, rand_bits)

    return small_blocks, largest_of_segments, scales_of_blocks, elements


@cuda.jit
def fill(array, value):
    """Every element of the flat `array` set to `value`."""
    for index in range(cuda.grid(1), array.size, cuda.gridsize(1)):
        array[index] = value


@cuda.jit
def largest_finite_keys(source, partial):
    """``partial[t]``: the largest `magnitude_key` of a finite number among the
    elements of `source` that thread t of the grid takes (0 where none)."""
    start = cuda.grid(1)
    largest = np.int64(0)
    for index in range(start, source.size, cuda.gridsize(1)):
        key = magnitude_key(source[index])
        largest = max(largest, key if key < INF_BITS else np.int64(0))
    partial[start] = largest


@cuda.jit
def largest_key(keys, partial):
    """``partial[t]``: the largest of the int64 `keys` that thread t of the grid takes."""
    start = cuda.grid(1)
    largest = np.int64(0)
    for index in range(start, keys.size, cuda.gridsize(1)):
        largest = max(largest, keys[index])
    partial[start] = largest
