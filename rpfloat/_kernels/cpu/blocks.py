"""Scaled formats on the CPU: each block's largest magnitude, its scale and its
elements in one pass over memory (a block stays in cache between the two loops).

The data arrive as a C-contiguous 3-D array ``(outer, axis, inner)``: blocks run
along the middle axis, ``block_size`` elements at a time, for every outer and
inner index, so that the inner loop is over contiguous memory whatever the
scaled axis. For each block the kernel finds the largest finite magnitude
(NaN or inf anywhere makes the block NaN), the scale (``core.scale``), and
rounds every element ``v / X`` onto the element format with
``core.element.round_bits`` in float64 (exact scaling for power-of-two scales),
then writes ``q * X`` (or ``q`` itself, for encode). Element ``(o, a, i)`` draws
random number ``offset + (o * axis + a) * inner + i``: its C-order flat index.
"""
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, float64_to_bits
from ..core.element import round_bits
from ..core.layout import PARAMS_TYPE, STOCHASTIC
from ..core.scale import (
    B_BLOCK_SIZE, B_ELEMENTS, B_KIND, F_ELEMENT_MAX, F_TENSOR_SCALE, N_BLOCK_PARAMS, N_FLOAT_PARAMS, POWER_OF_TWO,
    power_of_two_exponent, significand_scale,
)
from ..core.stream import random_bits

BLOCK_PARAMS_TYPE = types.UniTuple(types.int64, N_BLOCK_PARAMS)
FLOAT_PARAMS_TYPE = types.UniTuple(types.float64, N_FLOAT_PARAMS)


def _signature(data_type):
    source = types.Array(data_type, 3, "C", readonly=True)
    target = types.Array(data_type, 3, "C")
    scales = types.Array(types.float64, 3, "C")
    return types.void(source, target, scales, PARAMS_TYPE, PARAMS_TYPE, BLOCK_PARAMS_TYPE, FLOAT_PARAMS_TYPE,
                      types.int64, types.uint64, types.int64, types.int64)


SIGNATURES = [_signature(types.float32), _signature(types.float64)]


@njit(SIGNATURES, **NUMBA_OPTIONS)
def round_blocks(source, target, scales, element_params, scale_params, block_params, float_params, mode, key,
                 offset, rand_bits):
    """Round `source` onto the scaled format into `target` and the block scales
    into `scales` (shape ``(outer, blocks, inner)``, NaN for a NaN block).
    `element_params`: the element format's kernel parameters in float64 with
    saturation; `scale_params`: the scale format's (significand scales only)."""
    outer, length, inner = source.shape
    block_size = block_params[B_BLOCK_SIZE]
    power_of_two = block_params[B_KIND] == POWER_OF_TWO
    write_elements = block_params[B_ELEMENTS] != 0
    tensor_scale = float_params[F_TENSOR_SCALE]
    largest = np.empty(inner, np.float64)
    scale = np.empty(inner, np.float64)
    inverse = np.empty(inner, np.float64)
    for o in range(outer):
        for block, first in enumerate(range(0, length, block_size)):
            stop = min(first + block_size, length)
            largest[:] = 0.0
            for a in range(first, stop):
                for i in range(inner):
                    magnitude = abs(np.float64(source[o, a, i]))
                    # NaN compares false: NaN and inf make the block's largest inf
                    largest[i] = max(largest[i], magnitude) if magnitude < np.inf else np.inf
            for i in range(inner):
                if largest[i] == np.inf:
                    scale[i] = np.nan
                elif power_of_two:
                    exponent = power_of_two_exponent(largest[i], block_params, float_params[F_ELEMENT_MAX])
                    scale[i] = np.ldexp(1.0, exponent)
                    inverse[i] = np.ldexp(1.0, -exponent)
                else:
                    scale[i] = significand_scale(largest[i], float_params, scale_params) * tensor_scale
                scales[o, block, i] = scale[i]
            for a in range(first, stop):
                for i in range(inner):
                    value = np.float64(source[o, a, i])
                    if scale[i] != scale[i]:
                        target[o, a, i] = np.nan
                        continue
                    scaled = value * inverse[i] if power_of_two else value / scale[i]
                    random = np.uint64(0)
                    if mode >= STOCHASTIC:
                        random = random_bits(key, offset + (o * length + a) * inner + i)
                    rounded = bits_to_float64(round_bits(float64_to_bits(scaled), element_params, mode, random,
                                                         rand_bits, True))
                    target[o, a, i] = rounded if write_elements else rounded * scale[i]
