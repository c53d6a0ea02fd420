"""Scaled formats on float64 data: the element format's own kernel does the
rounding.

``blocks.round_blocks`` rounds each element ``v`` of a block of scale ``X`` as
``q = round(v / X)`` (the quotient in float64, then the element format with
saturation) and writes ``q * X``. These kernels give the same bits in steps
over a segment of the data that stays in cache (``rpfloat.scaling`` cuts the
segments and calls them):

1. `block_scales`: each block's scale and least nonzero magnitude (for a block
   longer than a segment, over the whole block before its segments);
2. `scale_down`: every quotient ``v / X`` (exact for a power of two) into a
   buffer, clamped to the element's range (NaN for a block holding NaN or inf);
3. the element format's kernel from the backend's table (saturating), which
   rounds the buffer into the result, element ``i`` drawing the random number
   of its flat index, as ``round_blocks`` draws it;
4. `scale_up`: every result times its block's scale (NaN for a NaN block).

One case differs: a quotient of a nonzero ``v`` at or below float64's least
normal, 2**-1022, which may have lost bits and which ``core.scale.round_element``
rounds as the exact quotient. `scale_down` counts the blocks whose least
nonzero magnitude gives such a quotient, and `fix_tiny` rounds those
elements again as ``round_blocks`` does.

Data blocked along the last axis take the row form, loops along a block;
data blocked along another axis ``(outer, length, inner)`` the column form
(``column_*``), loops along the inner index with a scale per inner index.
"""
import functools

import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, float64_to_bits, wrapping_add
from ..core.layout import PARAMS_TYPE, STOCHASTIC
from ..core.scale import (
    B_KIND, F_ELEMENT_MAX, F_TENSOR_SCALE, N_BLOCK_PARAMS, N_FLOAT_PARAMS, POWER_OF_TWO,
    SMALLEST_NORMAL_64, power_of_two, power_of_two_exponent, round_element, significand_scale,
)
from ..core.stream import random_bits
from .loops import compiled

__all__ = ["block_scales", "scale_down", "scale_up", "fix_tiny", "column_scales", "column_quotients",
           "column_products", "column_fix_tiny", "kernels"]

MAGNITUDE_64 = np.int64(0x7FFFFFFFFFFFFFFF)
INF_64 = np.int64(0x7FF0000000000000)
ALL_ONES_64 = np.uint64(0xFFFFFFFFFFFFFFFF)
BLOCK_PARAMS_TYPE = types.UniTuple(types.int64, N_BLOCK_PARAMS)
FLOAT_PARAMS_TYPE = types.UniTuple(types.float64, N_FLOAT_PARAMS)


@njit(inline="always", **NUMBA_OPTIONS)
def _extremes(values):
    """``(largest, least)``: the largest magnitude of `values` (inf where they
    hold NaN or inf) and their least nonzero one (0 where all are zeros), from
    their magnitudes' bits (NaN's lie above inf's; a zero's less 1 wraps to the
    greatest unsigned key)."""
    largest = np.int64(0)
    least_key = ALL_ONES_64
    for a in range(values.size):  # (from 0: no negative indices, so LLVM loads vectors)
        magnitude = float64_to_bits(values[a]) & MAGNITUDE_64
        largest = max(largest, magnitude)
        least_key = min(least_key, wrapping_add(np.uint64(magnitude), ALL_ONES_64))
    least = bits_to_float64(np.int64(wrapping_add(least_key, np.uint64(1))))
    return (bits_to_float64(largest) if largest < INF_64 else np.inf), least


@njit(inline="always", **NUMBA_OPTIONS)
def _scale(largest, block_params, float_params, scale_params):
    """The scale of a block whose largest magnitude is `largest` (NaN for inf:
    a block with NaN or inf), as ``round_blocks`` computes it."""
    if largest == np.inf:
        return np.nan
    if block_params[B_KIND] == POWER_OF_TWO:
        exponent = power_of_two_exponent(largest, block_params, float_params[F_ELEMENT_MAX])
        return power_of_two(exponent)
    return significand_scale(largest, float_params, scale_params) * float_params[F_TENSOR_SCALE]


@njit(**NUMBA_OPTIONS)
def block_scales(source, scales, leasts, first, stop, block_size, block_params, float_params, scale_params):
    """The scale of each block of the rows `source` that lies in columns `first`
    to `stop`, whole, into `scales`, and its least nonzero magnitude into
    `leasts` (both ``(rows, blocks)``)."""
    for row in range(source.shape[0]):
        source_row, row_scales, row_leasts = source[row], scales[row], leasts[row]
        for block in range(first // block_size, -(-stop // block_size)):
            largest, row_leasts[block] = _extremes(source_row[block * block_size:
                                                              min(block * block_size + block_size, stop)])
            row_scales[block] = _scale(largest, block_params, float_params, scale_params)


@njit(**NUMBA_OPTIONS)
def scale_down(source, quotients, scales, leasts, first, stop, block_size, low, high, block_params):
    """Step 1 for columns `first` to `stop` of the rows `source`, whose blocks'
    scales and least nonzero magnitudes are in `scales` and `leasts`
    (`block_scales`): every quotient ``v / X`` (``v`` times ``1 / X`` for a
    power of two, exact) into `quotients`, row after row, clamped to the
    element's range [`low`, `high`] (the element saturates, so every quotient
    beyond it rounds to its end in every mode, and the element's kernel keeps
    to its fast loop). Returns the number of blocks with a
    quotient of a nonzero ``v`` at or below 2**-1022, their least's
    (`fix_tiny` rounds those)."""
    if block_params[B_KIND] == POWER_OF_TWO:
        return _quotients(source, quotients, scales, leasts, first, stop, block_size, low, high, True)
    return _quotients(source, quotients, scales, leasts, first, stop, block_size, low, high, False)


@njit(inline="always", **NUMBA_OPTIONS)
def _quotients(source, quotients, scales, leasts, first, stop, block_size, low, high, by_power_of_two):
    """`scale_down` for one kind of scale (`by_power_of_two`: a literal)."""
    width = stop - first
    tiny = 0
    for row in range(source.shape[0]):
        source_row, row_scales, row_leasts = source[row], scales[row], leasts[row]
        base = row * width - first  # the quotient of column a: quotients[base + a]
        for block in range(first // block_size, -(-stop // block_size)):
            begin = max(block * block_size, first)
            end = min(block * block_size + block_size, stop)
            # (slices indexed from 0 in the loops: no negative indices, so LLVM loads vectors)
            values, block_quotients = source_row[begin:end], quotients[base + begin:base + end]
            scale = row_scales[block]  # (NaN for a NaN block: its quotients are NaN, its results `scale_up`'s)
            if by_power_of_two:
                inverse = 1.0 / scale  # exact: 2**s, s in [-1022, 1022]
                for a in range(values.size):
                    block_quotients[a] = min(max(values[a] * inverse, low), high)
                least = row_leasts[block] * inverse
            else:
                for a in range(values.size):
                    block_quotients[a] = min(max(values[a] / scale, low), high)
                least = row_leasts[block] / scale
            tiny += (row_leasts[block] != 0.0) & (least <= SMALLEST_NORMAL_64)
    return tiny


@njit(**NUMBA_OPTIONS)
def scale_up(target, scales, first, stop, block_size, write_elements):
    """Step 3 for columns `first` to `stop` of the rows `target`, which hold the
    rounded quotients: each times its block's scale (``write_elements``: left as
    they are); a NaN block's NaN (``write_elements``: 0, as its scale code says
    NaN)."""
    for row in range(target.shape[0]):
        target_row = target[row]
        for block in range(first // block_size, -(-stop // block_size)):
            begin = max(block * block_size, first)
            end = min(block * block_size + block_size, stop)
            scale = scales[row, block]
            results = target_row[begin:end]
            if scale != scale:
                results[:] = 0.0 if write_elements else np.nan
            elif not write_elements:
                for a in range(results.size):
                    results[a] *= scale


@njit(**NUMBA_OPTIONS)
def fix_tiny(source, target, scales, first, stop, block_size, block_params, element_params, mode, key, offset,
             rand_bits, write_elements):
    """Round again, as ``round_blocks`` does, the elements of columns `first` to
    `stop` of the rows `source` whose quotient ``v / X`` of a nonzero ``v``
    lies at or below 2**-1022, into `target`. Element ``(row, a)``
    draws random number ``offset + row * length + a``."""
    length = source.shape[1]
    by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
    for row in range(source.shape[0]):
        source_row, target_row = source[row], target[row]
        for block in range(first // block_size, -(-stop // block_size)):
            scale = scales[row, block]
            if scale != scale:
                continue
            inverse = 1.0 / scale
            factor = 1.0 if write_elements else scale
            for a in range(max(block * block_size, first), min(block * block_size + block_size, stop)):
                value = source_row[a]
                quotient = value * inverse if by_power_of_two else value / scale
                if abs(quotient) <= SMALLEST_NORMAL_64 and value != 0.0:
                    random = random_bits(key, offset + row * length + a) if mode >= STOCHASTIC else np.uint64(0)
                    target_row[a] = round_element(quotient, value, scale, element_params, mode, random, rand_bits,
                                                  True) * factor


# -- the column form: data ``(outer, length, inner)`` blocked along the middle axis, one
# scale per block and inner index (scales ``(outer, blocks, inner)``); the same steps
# for rows `first` to `stop` of each outer index, each loop over the inner index


@njit(**NUMBA_OPTIONS)
def column_scales(source, scales, leasts, first, stop, block_size, block_params, float_params, scale_params):
    """`block_scales` of the column form: each block (lying whole in rows
    `first` to `stop`) and inner index."""
    inner = source.shape[2]
    largest = np.empty(inner, np.int64)
    least_key = np.empty(inner, np.uint64)
    for outer in range(source.shape[0]):
        for block in range(first // block_size, -(-stop // block_size)):
            largest[:] = 0
            least_key[:] = ALL_ONES_64
            for a in range(block * block_size, min(block * block_size + block_size, stop)):
                row = source[outer, a]
                for i in range(inner):
                    magnitude = float64_to_bits(row[i]) & MAGNITUDE_64
                    largest[i] = max(largest[i], magnitude)
                    least_key[i] = min(least_key[i], wrapping_add(np.uint64(magnitude), ALL_ONES_64))
            block_scales_row, block_leasts = scales[outer, block], leasts[outer, block]
            for i in range(inner):
                block_leasts[i] = bits_to_float64(np.int64(wrapping_add(least_key[i], np.uint64(1))))
                block_largest = bits_to_float64(largest[i]) if largest[i] < INF_64 else np.inf
                block_scales_row[i] = _scale(block_largest, block_params, float_params, scale_params)


@njit(**NUMBA_OPTIONS)
def column_quotients(source, quotients, scales, leasts, first, stop, block_size, low, high, block_params):
    """`scale_down` of the column form: the quotients of rows `first` to `stop`
    of each outer index into `quotients`, in the data's order."""
    inner = source.shape[2]
    width = (stop - first) * inner
    by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
    inverses = np.empty(inner)
    tiny = 0
    for outer in range(source.shape[0]):
        for block in range(first // block_size, -(-stop // block_size)):
            block_scales_row, block_leasts = scales[outer, block], leasts[outer, block]
            for i in range(inner):  # (NaN for a NaN block: its quotients are NaN, its results the products')
                inverses[i] = 1.0 / block_scales_row[i]
                least = block_leasts[i] * inverses[i] if by_power_of_two else block_leasts[i] / block_scales_row[i]
                tiny += (block_leasts[i] != 0.0) & (least <= SMALLEST_NORMAL_64)
            for a in range(max(block * block_size, first), min(block * block_size + block_size, stop)):
                row = source[outer, a]
                start = outer * width + (a - first) * inner
                row_quotients = quotients[start:start + inner]
                if by_power_of_two:
                    for i in range(inner):
                        row_quotients[i] = min(max(row[i] * inverses[i], low), high)
                else:
                    for i in range(inner):
                        row_quotients[i] = min(max(row[i] / block_scales_row[i], low), high)
    return tiny


@njit(**NUMBA_OPTIONS)
def column_products(target, scales, first, stop, block_size, write_elements):
    """`scale_up` of the column form."""
    inner = target.shape[2]
    for outer in range(target.shape[0]):
        for block in range(first // block_size, -(-stop // block_size)):
            block_scales_row = scales[outer, block]
            for a in range(max(block * block_size, first), min(block * block_size + block_size, stop)):
                row = target[outer, a]
                if write_elements:
                    for i in range(inner):
                        row[i] = row[i] if block_scales_row[i] == block_scales_row[i] else 0.0
                else:
                    for i in range(inner):
                        row[i] = row[i] * block_scales_row[i] if block_scales_row[i] == block_scales_row[i] else np.nan


@njit(**NUMBA_OPTIONS)
def column_fix_tiny(source, target, scales, first, stop, block_size, block_params, element_params, mode, key, offset,
                    rand_bits, write_elements):
    """`fix_tiny` of the column form: element ``(outer, a, i)`` draws random
    number ``offset + (outer * length + a) * inner + i``."""
    length, inner = source.shape[1], source.shape[2]
    by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
    for outer in range(source.shape[0]):
        for a in range(first, stop):
            block_scales_row = scales[outer, a // block_size]
            for i in range(inner):
                scale = block_scales_row[i]
                value = source[outer, a, i]
                quotient = value * (1.0 / scale) if by_power_of_two else value / scale
                if scale == scale and abs(quotient) <= SMALLEST_NORMAL_64 and value != 0.0:
                    index = offset + (outer * length + a) * inner + i
                    random = random_bits(key, index) if mode >= STOCHASTIC else np.uint64(0)
                    factor = 1.0 if write_elements else scale
                    target[outer, a, i] = round_element(quotient, value, scale, element_params, mode, random,
                                                        rand_bits, True) * factor


_ROWS = types.Array(types.float64, 2, "C", readonly=True)
_TARGET = types.Array(types.float64, 2, "C")
_FLAT = types.Array(types.float64, 1, "C")
_SCALES = types.Array(types.float64, 2, "C")
_DATA_3 = types.Array(types.float64, 3, "C", readonly=True)
_TARGET_3 = types.Array(types.float64, 3, "C")
_SCALES_3 = types.Array(types.float64, 3, "C")
_SIGNATURES = {
    block_scales: types.void(_ROWS, _SCALES, _SCALES, types.int64, types.int64, types.int64, BLOCK_PARAMS_TYPE,
                             FLOAT_PARAMS_TYPE, PARAMS_TYPE),
    scale_down: types.int64(_ROWS, _FLAT, _SCALES, _SCALES, types.int64, types.int64, types.int64, types.float64,
                            types.float64, BLOCK_PARAMS_TYPE),
    scale_up: types.void(_TARGET, _SCALES, types.int64, types.int64, types.int64, types.boolean),
    fix_tiny: types.void(_ROWS, _TARGET, _SCALES, types.int64, types.int64, types.int64, BLOCK_PARAMS_TYPE,
                         PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64, types.boolean),
}
_COLUMN_SIGNATURES = {
    column_scales: types.void(_DATA_3, _SCALES_3, _SCALES_3, types.int64, types.int64, types.int64,
                              BLOCK_PARAMS_TYPE, FLOAT_PARAMS_TYPE, PARAMS_TYPE),
    column_quotients: types.int64(_DATA_3, _FLAT, _SCALES_3, _SCALES_3, types.int64, types.int64, types.int64,
                                  types.float64, types.float64, BLOCK_PARAMS_TYPE),
    column_products: types.void(_TARGET_3, _SCALES_3, types.int64, types.int64, types.int64, types.boolean),
    column_fix_tiny: types.void(_DATA_3, _TARGET_3, _SCALES_3, types.int64, types.int64, types.int64,
                                BLOCK_PARAMS_TYPE, PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64,
                                types.boolean),
}


@functools.cache
def kernels(columns=False):
    """The compiled entry points of `block_scales`, `scale_down`, `scale_up`
    and `fix_tiny` (`columns`: of their column forms), compiled, or loaded
    from numba's cache, on first use."""
    signatures = _COLUMN_SIGNATURES if columns else _SIGNATURES
    return tuple(compiled(kernel, signature) for kernel, signature in signatures.items())
