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

from ..core.bits import (
    NUMBA_OPTIONS, bits_to_float32, bits_to_float64, float32_to_bits, hidden_zero, wrapping_add, wrapping_mul,
)
from ..core.layout import P_BELOW_QUANTUM_BITS, P_MAX_NEG_BITS, P_MAX_POS_BITS, PARAMS_TYPE, STOCHASTIC
from ..core.scale import (
    B_BLOCK_SIZE, B_ELEMENTS, B_KIND, F_ELEMENT_MAX, F_TENSOR_SCALE, N_BLOCK_PARAMS, N_FLOAT_PARAMS, POWER_OF_TWO,
    power_of_two_exponent, round_element, significand_scale,
)
from ..core.stream import WEYL_32, keyed_bits, keyed_weyl, loop_constants, random_bits, segment_keys
from .fast_bits import FAST_BITS_MODES, fast_round_bits
from .loops import fast_bounds

BLOCK_PARAMS_TYPE = types.UniTuple(types.int64, N_BLOCK_PARAMS)
FLOAT_PARAMS_TYPE = types.UniTuple(types.float64, N_FLOAT_PARAMS)


def _signature(data_type):
    source = types.Array(data_type, 3, "C", readonly=True)
    target = types.Array(data_type, 3, "C")
    scales = types.Array(types.float64, 3, "C")
    return types.void(source, target, scales, PARAMS_TYPE, PARAMS_TYPE, BLOCK_PARAMS_TYPE, FLOAT_PARAMS_TYPE,
                      types.int64, types.uint64, types.int64, types.int64)


SIGNATURES = [_signature(types.float32), _signature(types.float64)]


@njit(**NUMBA_OPTIONS)
def power_of_two(exponent):
    """``2.0**exponent`` for an exponent in [-1022, 1023], from its bits."""
    return bits_to_float64(np.int64(exponent + 1023) << 52)


@njit(**NUMBA_OPTIONS)
def round_blocks(source, target, scales, element_params, scale_params, block_params, float_params, mode, key,
                 offset, rand_bits):
    """Round `source` onto the scaled format into `target` and the block scales
    into `scales` (shape ``(outer, blocks, inner)``, NaN for a NaN block).
    `element_params`: the element format's kernel parameters in float64 with
    saturation; `scale_params`: the scale format's (significand scales only)."""
    outer, length, inner = source.shape
    block_size = block_params[B_BLOCK_SIZE]
    by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
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
                elif by_power_of_two:
                    exponent = power_of_two_exponent(largest[i], block_params, float_params[F_ELEMENT_MAX])
                    scale[i] = power_of_two(exponent)
                    inverse[i] = power_of_two(-exponent)
                else:
                    scale[i] = significand_scale(largest[i], float_params, scale_params) * tensor_scale
                scales[o, block, i] = scale[i]
            for a in range(first, stop):
                for i in range(inner):
                    value = np.float64(source[o, a, i])
                    if scale[i] != scale[i]:  # a NaN block: its scale code says so (elements: 0)
                        target[o, a, i] = 0.0 if write_elements else np.nan
                        continue
                    random = np.uint64(0)
                    if mode >= STOCHASTIC:
                        random = random_bits(key, offset + (o * length + a) * inner + i)
                    quotient = value * inverse[i] if by_power_of_two else value / scale[i]
                    rounded = round_element(quotient, value, element_params, mode, random, rand_bits)
                    target[o, a, i] = rounded if write_elements else rounded * scale[i]


# -- the fast kernel: float32 data, power-of-two scales, blocks along the last axis --
#
# Rounding v / 2**s onto the element and multiplying by 2**s is rounding onto the
# element's grid shifted by s binades. On float32 bits: subtract s from the
# exponent field (``y = |v| - s << 23``, exact while |v| and y are normal), round y
# with the element's float32 fast path (``fast_bits.fast_round_bits``) and add s
# back (exact while the result is normal or zero). The block's pass for its max
# also finds its least nonzero magnitude (a long block: each piece of PIECE
# elements, in a pass of its own), and a block or piece takes the fast loop where
# both ends lie in that range (and its random counters stay in one 2**32
# segment); else the float64 loop of `round_blocks` rounds it. Eight float32
# lanes per vector, no per-element test.

SMALLEST_NORMAL_32 = np.int32(0x00800000)
MAGNITUDE_32 = np.int32(0x7FFFFFFF)
INF_32 = np.int32(0x7F800000)
QUIET_NAN_32 = np.int32(0x7FC00000)
SEGMENT_MASK = np.int64(0xFFFFFFFF)
PIECE = 4096  # a long block's elements checked and rounded at a time (they stay in cache)


@njit(**NUMBA_OPTIONS)
def _round_piece(source, target, least, block_fast, shift, exponent, low, clamp, params, element_params, mode, key,
                 index, rand_bits, multipliers, weyl_step):
    """Round a block, or a piece of a long one, whose least nonzero magnitude is
    `least`: in the fast loop where it and the block allow (`block_fast`), else
    in float64. Element ``a`` draws random number ``index + a``."""
    shift_32 = np.int32(shift)
    fast = (block_fast and (least == INF_32 or (least >= SMALLEST_NORMAL_32 and least - shift >= low))
            and (index & SEGMENT_MASK) + source.size <= SEGMENT_MASK + 1)
    if fast:
        keys = (np.uint32(0), np.uint32(0))
        if mode >= STOCHASTIC:
            keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
        # the stream's Weyl words, stepped rather than multiplied (as the block loop does)
        keyed_high, keyed_low = keyed_weyl(keys, wrapping_mul(np.uint32(index & SEGMENT_MASK), WEYL_32))
        for a in range(source.size):
            bits = source[a]
            magnitude = np.int32(bits & MAGNITUDE_32)
            scaled = np.int32((bits ^ magnitude) | (min(np.int32(magnitude - shift_32), clamp)
                                                      if magnitude != 0 else np.int32(0)))
            random = keyed_bits(keyed_high, keyed_low, multipliers) if mode >= STOCHASTIC else np.uint64(0)
            keyed_high = wrapping_add(keyed_high, weyl_step)
            keyed_low = wrapping_add(keyed_low, weyl_step)
            rounded = fast_round_bits(scaled, params, mode, random, rand_bits)
            rounded_magnitude = np.int32(rounded & MAGNITUDE_32)
            target[a] = np.int32(rounded + (shift_32 if rounded_magnitude != 0 else np.int32(0)))
    else:  # in float64
        scale, inverse = power_of_two(exponent), power_of_two(-exponent)
        for a in range(source.size):
            value = np.float64(bits_to_float32(source[a]))
            random = random_bits(key, index + a) if mode >= STOCHASTIC else np.uint64(0)
            rounded = round_element(value * inverse, value, element_params, mode, random, rand_bits)
            target[a] = float32_to_bits(np.float32(rounded * scale))


def _fast_kernel(mode):
    @njit(**NUMBA_OPTIONS)
    def round_blocks_float32(source, target, scales, params, element_params, block_params, float_params, mode_unused,
                             key, offset, rand_bits):
        rows, length = source.shape
        block_size = block_params[B_BLOCK_SIZE]
        low, high = fast_bounds(params, mode, False)
        low = max(low, np.int64(SMALLEST_NORMAL_32))  # y must be a normal float32
        element_max = float_params[F_ELEMENT_MAX]
        quantum = params[P_BELOW_QUANTUM_BITS]  # the element's smallest positive value
        largest_result = params[P_MAX_POS_BITS]
        multipliers, weyl_step = loop_constants(hidden_zero(rand_bits))  # kept in registers (bits.hidden_zero)
        # where both signs saturate at the same magnitude, every y beyond it rounds to
        # it in every mode: the loop clamps y to it (else such blocks take float64)
        top = np.int64(INF_32 - 1) if params[P_MAX_POS_BITS] == params[P_MAX_NEG_BITS] else high
        clamp = np.int32(high)
        for row in range(rows):
            source_row, target_row = source[row], target[row]
            for block, first in enumerate(range(0, length, block_size)):
                stop = min(first + block_size, length)
                source_block, target_block = source_row[first:stop], target_row[first:stop]
                largest = np.int32(0)
                least = INF_32  # the least nonzero magnitude (inf: none)
                for a in range(source_block.size):
                    magnitude = np.int32(source_block[a] & MAGNITUDE_32)
                    largest = max(largest, magnitude)
                    least = min(least, magnitude if magnitude != 0 else INF_32)
                if largest >= INF_32:  # NaN or inf: a NaN block
                    scales[row, block] = np.nan
                    for a in range(target_block.size):
                        target_block[a] = QUIET_NAN_32
                    continue
                exponent = power_of_two_exponent(np.float64(bits_to_float32(largest)), block_params, element_max)
                scales[row, block] = power_of_two(exponent)
                shift = np.int64(exponent) << 23
                block_fast = (largest - shift <= top and largest_result + shift < INF_32
                              and quantum + shift >= SMALLEST_NORMAL_32)
                index = offset + row * length + first
                if source_block.size <= PIECE:
                    _round_piece(source_block, target_block, least, block_fast, shift, exponent, low, clamp, params,
                                 element_params, mode, key, index, rand_bits, multipliers, weyl_step)
                    continue
                # a long block (one scale per row or array) in pieces, each checked for
                # its least magnitude, so that one tiny value sends one piece to float64
                for piece_first in range(0, source_block.size, PIECE):
                    piece_stop = min(piece_first + PIECE, source_block.size)
                    source_piece = source_block[piece_first:piece_stop]
                    least = INF_32
                    for a in range(source_piece.size):
                        magnitude = np.int32(source_piece[a] & MAGNITUDE_32)
                        least = min(least, magnitude if magnitude != 0 else INF_32)
                    _round_piece(source_piece, target_block[piece_first:piece_stop], least, block_fast, shift,
                                 exponent, low, clamp, params, element_params, mode, key, index + piece_first,
                                 rand_bits, multipliers, weyl_step)

    return round_blocks_float32


FAST_SIGNATURE = types.void(types.Array(types.int32, 2, "C", readonly=True), types.Array(types.int32, 2, "C"),
                            types.Array(types.float64, 2, "C"), PARAMS_TYPE, PARAMS_TYPE, BLOCK_PARAMS_TYPE,
                            FLOAT_PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64)
# by mode number, for the modes fast_round_bits decides; compiled on first use
FAST_KERNELS = tuple(_fast_kernel(mode) for mode in FAST_BITS_MODES)


def general_kernel(data_dtype):
    """`round_blocks` compiled (or loaded from numba's cache) for float32 or
    float64 data, on first use: its compiled entry point."""
    signature = SIGNATURES[0 if data_dtype == np.float32 else 1]
    round_blocks.compile(signature)
    return round_blocks.overloads[signature.args].entry_point


def fast_kernel(mode):
    """The compiled entry point of the fast kernel for `mode` (compiled, or loaded
    from numba's cache, on first use), or None for a mode it does not serve."""
    if mode not in FAST_BITS_MODES:
        return None
    kernel = FAST_KERNELS[FAST_BITS_MODES.index(mode)]
    kernel.compile(FAST_SIGNATURE)
    return kernel.overloads[FAST_SIGNATURE.args].entry_point
