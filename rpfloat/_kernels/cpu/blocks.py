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

The fast kernel (float32 data blocked along the last axis, power-of-two scales,
``fast_kernel``) gives the same bits on float32 bits: block by block, or, for
blocks of a power of two elements (MX: 32), in chunks of CHUNK elements, each
pass over a chunk one long vectorised loop (the comments above `chunked`). Its
rounding loops run LANES elements at a time and prefetch the data PREFETCH
elements ahead, so that the passes over memory overlap the arithmetic. In
nearest rounding onto the element formats of `rounds_by_adding` (MX's float
elements, mxint8's fixed point) each element is rounded by adding a power of
two (`_adding_element`) where the thread rounds to nearest, else by its bits.
In stochastic rounding the kernel has three compiled copies, which differ in
their element loops and give the same bits (`stochastic_loops` picks one per
element format): BIT_LOOPS (`_stochastic_element`, every format), UNIFORM_LOOPS
(elements with a wide normal range: the runs whose magnitudes all lie in it
drop the same number of bits, `_uniform_stochastic_element`) and GRID_LOOPS
(fixed point: one spacing throughout, float32 arithmetic,
`_grid_stochastic_element`). Its column form (``column_kernel``: blocks along another axis than the last,
nearest and stochastic) runs the same passes vectorised over the inner index
(the comment above `_fast_columns`).
"""
import functools

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from ..core.bits import (
    NUMBA_OPTIONS, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits, hidden_zero, shift_left,
    shift_right, wrapping_add, wrapping_mul,
)
from ..core.fast_element import FAST_BITS_MODES, fast_bounds, fast_round_bits
from ..core.layout import (
    P_BELOW_DROP_OFFSET, P_BELOW_QUANTUM_BITS, P_FAST_ALIGNED_BITS, P_FAST_DROP_MIN, P_FAST_DROP_OFFSET,
    P_FAST_HIGH_BITS, P_FAST_LOW_BITS, P_MAX_NEG_BITS, P_MAX_POS_BITS, P_NO_NEGATIVE_ZERO, P_OVERFLOW, P_WORD_BITS,
    PARAMS_TYPE, NEAREST, OVERFLOW_WRAP, STOCHASTIC,
)
from ..core.scale import (
    B_BLOCK_SIZE, B_ELEMENTS, B_EMAX, B_KIND, B_ROUNDING, B_S_MAX, B_S_MIN, B_TOP_SPACING_EXP, CEIL, EVEN,
    F_ELEMENT_MAX, F_SCALE_MAX, F_SCALE_MIN, F_TENSOR_SCALE, FRACTION_64, HIDDEN_BIT_64, N_BLOCK_PARAMS, N_FLOAT_PARAMS,
    POWER_OF_TWO, RCEIL,
    power_of_two, power_of_two_exponent, round_element, significand_scale,
)
from ..core.stream import (
    WEYL_32, keyed_bits, keyed_weyl, loop_constants, mix_high, mix_low, random_bits, segment_keys, top_bits_mask_32,
)
from .fast_nearest_float import nearest_by_adding
from .table import nearest_by_adding as nearest_by_adding_condition
from .loops import compiled

BLOCK_PARAMS_TYPE = types.UniTuple(types.int64, N_BLOCK_PARAMS)
FLOAT_PARAMS_TYPE = types.UniTuple(types.float64, N_FLOAT_PARAMS)


def _signature(data_type):
    source = types.Array(data_type, 3, "C", readonly=True)
    target = types.Array(data_type, 3, "C")
    scales = types.Array(types.float64, 3, "C")
    return types.void(source, target, scales, PARAMS_TYPE, PARAMS_TYPE, BLOCK_PARAMS_TYPE, FLOAT_PARAMS_TYPE,
                      types.int64, types.uint64, types.int64, types.int64)


SIGNATURES = [_signature(types.float32), _signature(types.float64)]


@intrinsic
def prefetch(typingctx, array, index, write):
    """Ask the CPU to bring the cache line of ``array[index]`` into its caches
    (for writing where `write`, a literal bool): LLVM's ``prefetch``, which never
    faults, so `index` may lie past the array's end."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None
    if not isinstance(write, types.BooleanLiteral):
        return None
    rw = int(write.literal_value)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), "llvm.prefetch.p0")
        pointer = builder.bitcast(builder.gep(data, [args[1]]), byte_pointer)
        builder.call(function, [pointer, int32(rw), int32(3), int32(1)])  # locality 3: keep; 1: data
        return context.get_dummy_value()

    return types.none(array, index, write), codegen


def _splat(builder, value, count):
    """An LLVM vector of `count` copies of `value`."""
    vector = ir.VectorType(value.type, count)
    single = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(single, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), count), [0] * count))


@intrinsic
def outside_mask(typingctx, array, start, threshold, ceiling):
    """Bit ``a`` (of an int64) set where ``array[start + a]``, for ``a`` in
    [0, 32), is nonzero float32 bits whose magnitude lies below `threshold`
    (int32, at least 1) or above `ceiling` (int32, at least 0): vector
    compares of the 32 (``magnitude - 1 < threshold - 1`` unsigned, so that
    zero wraps to the greatest; ``magnitude > ceiling`` signed) and their
    masks. A loop of a constant 32 reductions would be unrolled into scalar
    code (numba turns LLVM's SLP vectoriser off). LLVM may join the 8-lane
    compares into 512-bit ones, which slow every vector port while in flight:
    keep calls out of the hot rounding loops."""
    if not (isinstance(array, types.Array) and array.dtype == types.int32 and array.ndim == 1 and array.layout == "C"
            and isinstance(start, types.Integer) and isinstance(threshold, types.Integer)
            and isinstance(ceiling, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        int32, int64 = ir.IntType(32), ir.IntType(64)
        vector = ir.VectorType(int32, 8)  # 256 bits: 512-bit operations would slow the vector ports
        first = context.cast(builder, args[1], signature.args[1], types.intp)
        limit = _splat(builder, builder.add(context.cast(builder, args[2], signature.args[2], types.int32), int32(-1)),
                       8)
        top = _splat(builder, context.cast(builder, args[3], signature.args[3], types.int32), 8)
        mask = int64(0)
        for quarter in range(4):
            pointer = builder.gep(data, [builder.add(first, first.type(8 * quarter))])
            values = builder.load(builder.bitcast(pointer, vector.as_pointer()), align=4)
            magnitudes = builder.and_(values, ir.Constant(vector, [int32(0x7FFFFFFF)] * 8))
            keys = builder.add(magnitudes, ir.Constant(vector, [int32(-1)] * 8))
            outside = builder.or_(builder.icmp_unsigned("<", keys, limit), builder.icmp_signed(">", magnitudes, top))
            below = builder.zext(builder.bitcast(outside, ir.IntType(8)), int64)
            mask = builder.or_(mask, builder.shl(below, int64(8 * quarter)))
        return mask

    return types.int64(array, start, threshold, ceiling), codegen


@intrinsic
def run_extremes(typingctx, array, start):
    """``(largest, least)`` of the 32 float32 bits ``array[start:start + 32]``:
    the largest magnitude (int64 of an int32) and the least nonzero magnitude
    less 1 (`_least_key`: a uint32 in an int64; all ones: none), from four
    8-lane vectors folded into one and reduced (LLVM's vector reductions: a
    loop of 32 reductions would be unrolled into scalar code)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int32 and array.ndim == 1 and array.layout == "C"
            and isinstance(start, types.Integer)):
        return None
    result = types.UniTuple(types.int64, 2)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        int32, int64 = ir.IntType(32), ir.IntType(64)
        vector = ir.VectorType(int32, 8)
        first = context.cast(builder, args[1], signature.args[1], types.intp)
        largest = least = None
        for quarter in range(4):
            pointer = builder.gep(data, [builder.add(first, first.type(8 * quarter))])
            values = builder.load(builder.bitcast(pointer, vector.as_pointer()), align=4)
            magnitudes = builder.and_(values, ir.Constant(vector, [int32(0x7FFFFFFF)] * 8))
            keys = builder.add(magnitudes, ir.Constant(vector, [int32(-1)] * 8))
            if largest is None:
                largest, least = magnitudes, keys
            else:
                largest = builder.select(builder.icmp_signed(">", largest, magnitudes), largest, magnitudes)
                least = builder.select(builder.icmp_unsigned("<", least, keys), least, keys)
        reduce_type = ir.FunctionType(int32, [vector])
        smax = cgutils.get_or_insert_function(builder.module, reduce_type, "llvm.vector.reduce.smax.v8i32")
        umin = cgutils.get_or_insert_function(builder.module, reduce_type, "llvm.vector.reduce.umin.v8i32")
        big = builder.sext(builder.call(smax, [largest]), int64)
        small = builder.zext(builder.call(umin, [least]), int64)
        return context.make_tuple(builder, signature.return_type, [big, small])

    return result(array, start), codegen


@njit(**NUMBA_OPTIONS)
def round_blocks(source, target, scales, element_params, scale_params, block_params, float_params, mode, key,
                 offset, rand_bits):
    """Round `source` onto the scaled format into `target` and the block scales
    into `scales` (shape ``(outer, blocks, inner)``, NaN for a NaN block).
    `element_params`: the element format's kernel parameters in float64 with
    saturation; `scale_params`: the scale format's (significand scales only)."""
    outer, length, inner = source.shape
    if inner == 1:  # blocks along the last axis: loops over the rows' elements, which LLVM vectorises
        _round_rows(source.reshape(outer, length), target.reshape(outer, length),
                    scales.reshape(outer, scales.shape[1]), element_params, scale_params, block_params,
                    float_params, mode, key, offset, rand_bits)
        return
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
                    rounded = round_element(quotient, value, scale[i], element_params, mode, random, rand_bits, True)
                    target[o, a, i] = rounded if write_elements else rounded * scale[i]


@njit(**NUMBA_OPTIONS)
def _round_rows(source, target, scales, element_params, scale_params, block_params, float_params, mode, key,
                offset, rand_bits):
    """`round_blocks` for rows ``(outer, length)`` (blocks along them), scales
    ``(outer, blocks)``: the same arithmetic element by element, in loops over
    a block's elements (a loop over ``inner == 1`` around each would keep
    LLVM from vectorising them: 4-5x the time)."""
    outer, length = source.shape
    block_size = block_params[B_BLOCK_SIZE]
    by_power_of_two = block_params[B_KIND] == POWER_OF_TWO
    write_elements = block_params[B_ELEMENTS] != 0
    tensor_scale = float_params[F_TENSOR_SCALE]
    for o in range(outer):
        source_row, target_row = source[o], target[o]
        base = offset + o * length  # random number of element a: base + a
        for block, first in enumerate(range(0, length, block_size)):
            stop = min(first + block_size, length)
            largest = 0.0
            for a in range(first, stop):
                magnitude = abs(np.float64(source_row[a]))
                # NaN compares false: NaN and inf make the block's largest inf
                largest = max(largest, magnitude) if magnitude < np.inf else np.inf
            if largest == np.inf:  # a NaN block: its scale code says so (elements: 0)
                scales[o, block] = np.nan
                for a in range(first, stop):
                    target_row[a] = 0.0 if write_elements else np.nan
                continue
            if by_power_of_two:
                exponent = power_of_two_exponent(largest, block_params, float_params[F_ELEMENT_MAX])
                scale, inverse = power_of_two(exponent), power_of_two(-exponent)
            else:
                scale = significand_scale(largest, float_params, scale_params) * tensor_scale
                inverse = 1.0
            scales[o, block] = scale
            factor = 1.0 if write_elements else scale
            for a in range(first, stop):
                value = np.float64(source_row[a])
                random = random_bits(key, base + a) if mode >= STOCHASTIC else np.uint64(0)
                quotient = value * inverse if by_power_of_two else value / scale
                rounded = round_element(quotient, value, scale, element_params, mode, random, rand_bits, True)
                target_row[a] = rounded * factor


# -- the fast kernel: float32 data, power-of-two scales, blocks along the last axis --
#
# Rounding v / 2**s onto the element and multiplying by 2**s is rounding onto the
# element's grid shifted by s binades. On float32 bits: subtract s from the
# exponent field (``y = |v| - s << 23``, exact while |v| and y are normal), round y
# with the element's float32 fast path (``core.fast_element.fast_round_bits``) and add s
# back (exact while the result is normal or zero). The block's pass for its max
# also finds its least nonzero magnitude (a long block: that of each piece of
# PIECE elements), and a block or piece takes the fast loop where its results
# stay normal (and its random counters stay in one 2**32 segment), then, where
# its least nonzero magnitude lies below the range or its max above it (a two's
# complement element's block past the positive max), the elements outside it
# again in float64 (`round_blocks`' arithmetic, found 32 at a time by
# `outside_mask`); else the float64 loop rounds all of it.
# Eight float32 lanes per vector, no per-element test. Blocks of a power of two elements up to CHUNK
# (MX formats: 32) take the chunked passes below instead, with the same
# decisions element by element.

SMALLEST_NORMAL_32 = np.int32(0x00800000)
FRACTION_32 = np.int32(0x007FFFFF)
MAGNITUDE_32 = np.int32(0x7FFFFFFF)
INF_32 = np.int32(0x7F800000)
QUIET_NAN_32 = np.int32(0x7FC00000)
SEGMENT_MASK = np.int64(0xFFFFFFFF)
ALL_ONES_32 = np.uint32(0xFFFFFFFF)
PIECE = 4096  # a long block's elements rounded at a time (they stay in cache)
CARRIER_MAN_BITS_32 = np.int64(23)
LANES = 32  # the elements of a run of the fast loops, and the least block size of a chunk
PREFETCH = 4096  # how far ahead of the run it rounds a fast loop prefetches, in elements


@njit(**NUMBA_OPTIONS)
def _prefetch_run(source_row, target_row, ahead):
    """Prefetch the LANES elements from `ahead` of `source_row` (to read) and of
    `target_row` (to write): two cache lines each. A pass that finds its data
    in the caches (the extremes of the next chunk or piece) does not wait for
    memory, and the stores do not wait for their lines."""
    prefetch(source_row, ahead, False)
    prefetch(source_row, ahead + 16, False)
    prefetch(target_row, ahead, True)
    prefetch(target_row, ahead + 16, True)


@njit(**NUMBA_OPTIONS)
def _prefetch_read(source_row, ahead):
    """`_prefetch_run` without the target's lines: what the nearest loops take
    (their runs are short enough that the stores need no early lines: 4-12%
    faster without; the stochastic loops are not)."""
    prefetch(source_row, ahead, False)
    prefetch(source_row, ahead + 16, False)


@njit(**NUMBA_OPTIONS)
def round_in_float64(bits, exponent, element_params, mode, key, counter, rand_bits):
    """The float32 `bits` of one element of a block with scale ``2**exponent``
    rounded in float64 (`round_blocks`' arithmetic), with random number `counter`:
    the result's float32 bits. What the fast kernels give every element outside
    their range."""
    value = np.float64(bits_to_float32(bits))
    random = random_bits(key, counter) if mode >= STOCHASTIC else np.uint64(0)
    scale = power_of_two(exponent)
    rounded = round_element(value * power_of_two(-exponent), value, scale, element_params, mode, random, rand_bits,
                            True)
    return float32_to_bits(np.float32(rounded * scale))


@njit(**NUMBA_OPTIONS)
def _fast_element(bits, shift_32, clamp, keyed_high, keyed_low, multipliers, params, mode, rand_bits, constants):
    """The fast loop's body: float32 `bits` of a block whose exponent field
    shifts by `shift_32` rounded (the random number from `keyed_bits` of the
    two keyed Weyl words), as float32 bits."""
    if mode == STOCHASTIC:
        return _stochastic_element(bits, shift_32, clamp, keyed_high, multipliers, constants)
    magnitude = np.int32(bits & MAGNITUDE_32)
    scaled = np.int32((bits ^ magnitude) | (min(np.int32(magnitude - shift_32), clamp)
                                              if magnitude != 0 else np.int32(0)))
    random = keyed_bits(keyed_high, keyed_low, multipliers) if mode >= STOCHASTIC else np.uint64(0)
    rounded = fast_round_bits(scaled, params, mode, random, rand_bits)
    rounded_magnitude = np.int32(rounded & MAGNITUDE_32)
    return np.int32(rounded + (shift_32 if rounded_magnitude != 0 else np.int32(0)))


@njit(**NUMBA_OPTIONS)
def _adding_element(bits, shift_32, clamp, drop_min, drop_offset, zero_sign):
    """`_fast_element` in nearest rounding by adding a power of two
    (``fast_nearest_float``): the same bits in half the operations, for the
    element formats of `rounds_by_adding`, in a thread that rounds to nearest
    (the kernel's `adding` argument). The shifted magnitude is a normal float32
    in the fast range, and so is its power of two. A zero result keeps the sign
    of `bits` where `zero_sign` is -1 (0: fixed point, which has no -0)."""
    magnitude = np.int32(bits & MAGNITUDE_32)
    sign = np.int32(bits ^ magnitude)
    y = np.int32(min(np.int32(magnitude - shift_32), clamp) if magnitude != 0 else np.int32(0))
    rounded = nearest_by_adding(y, drop_min, drop_offset, CARRIER_MAN_BITS_32)
    return np.int32((rounded + shift_32) | sign) if rounded != 0 else np.int32(sign & zero_sign)


def rounds_by_adding(params):
    """Whether the fast kernel may round onto the element format of the float32
    parameters `params` to nearest by adding a power of two (`_adding_element`):
    floating-point formats with the kernel table's ``nearest_by_adding``
    condition, and fixed point (saturating) whose power of two is the same for
    every magnitude of the fast range, ``2**(carrier_man_bits - frac_bits)``
    (the field ``fast_drop_offset``, with ``fast_drop_min`` 0), above them all and
    a normal float32."""
    if params[P_WORD_BITS] == 0:
        return nearest_by_adding_condition(params)
    top_field = params[P_FAST_HIGH_BITS] >> 23
    return (params[P_OVERFLOW] != OVERFLOW_WRAP and params[P_FAST_LOW_BITS] == 0 < params[P_FAST_HIGH_BITS]
            and params[P_FAST_DROP_MIN] == 0 and top_field < params[P_FAST_DROP_OFFSET] <= 254)


@njit(**NUMBA_OPTIONS)
def stochastic_constants(params, rand_bits):
    """What `_stochastic_element` reads of `params` and `rand_bits`, as int32s
    and a uint32 worked out once outside the loops: the random word's mask,
    the least magnitude at one spacing, the least dropped bits, the offset of
    the dropped bits, one spacing's bits, and the mask of a zero result's
    sign (0 where the format has no -0)."""
    return (top_bits_mask_32(rand_bits, 0), np.int32(params[P_FAST_ALIGNED_BITS]), np.int32(params[P_FAST_DROP_MIN]),
            np.int32(params[P_FAST_DROP_OFFSET]), np.int32(params[P_BELOW_QUANTUM_BITS]),
            np.int32(0) if params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-1))


@njit(**NUMBA_OPTIONS)
def stochastic_low(params, low):
    """The least shifted magnitude of the fast range in stochastic rounding
    (`low`: `fast_bounds`'), for `_stochastic_element`: where the element
    format has no subnormals (its dropped bits below one spacing follow
    another offset), one spacing."""
    if params[P_FAST_DROP_OFFSET] != params[P_BELOW_DROP_OFFSET]:
        return max(low, params[P_FAST_ALIGNED_BITS])
    return low


@njit(inline="always", **NUMBA_OPTIONS)
def _shifted_back(bits, magnitude, rounded, shift_32, zero_sign):
    """The stochastic loops' result for float32 `bits` of `magnitude` whose
    rounded shifted magnitude is `rounded` (float32 bits): shifted back by
    `shift_32`, with the sign of `bits`; 0 stays 0, without its sign where
    `zero_sign` is 0 (formats without -0)."""
    sign = np.int32(bits ^ magnitude)
    if rounded == 0:  # formats without -0 give +0
        sign &= zero_sign
    return np.int32((np.int32(rounded + shift_32) if rounded != 0 else np.int32(0)) | sign)


@njit(inline="always", **NUMBA_OPTIONS)
def _stochastic_element(bits, shift_32, clamp, keyed_high, multipliers, constants):
    """`_fast_element` in stochastic rounding: the decisions of
    `fast_round_bits` with fewer operations (`constants`: `stochastic_constants`).
    With ``y`` the shifted magnitude and ``d`` the bits it drops
    (``max(fast_drop_min, fast_drop_offset - exponent field)``, at most 31 over
    the fast range; below one spacing, where `fast_round_bits` compares its
    threshold ``sig << (32 - below_drop)``, ``below_drop = below_drop_offset -
    exponent field``: the same where the format has subnormals; where it has
    none, `stochastic_low` keeps such magnitudes out of the fast range), ``y``
    steps up by ``2**d`` where the random word (its top `rand_bits`) plus the
    fraction of the step that ``y`` lies above its grid point carries out of 32
    bits. Its top ``d`` bits ``R`` (``word >> (32 - d)``, in two shifts so that
    ``d = 0`` gives 0) decide the same: the word carries exactly where ``R``
    plus ``y``'s low ``d`` bits reaches ``2**d``, so the result is ``y + R``
    with its low ``d`` bits cleared. Below one spacing the significand with its
    hidden bit ``sig`` stands for those low bits: the result is one spacing
    where ``(sig + R) >> d`` is not 0 (a zero stays 0). Only the high half of
    the random number is drawn."""
    word_mask, aligned, drop_min, drop_offset, quantum, zero_sign = constants
    magnitude = np.int32(bits & MAGNITUDE_32)
    nonzero = magnitude != 0
    y = np.int32(min(np.int32(magnitude - shift_32), clamp) if nonzero else np.int32(0))
    word = np.uint32(mix_high(keyed_high, multipliers) & word_mask)
    # (at most 31: only zeros and magnitudes below the range, which pass D redoes, drop more)
    drop = np.int32(min(max(drop_min, np.int32(drop_offset - np.int32(y >> np.int32(23)))), np.int32(31)))
    below = nonzero & (y < aligned)  # below one spacing: 0 or one spacing
    low_bits = np.int32((y & FRACTION_32) | SMALLEST_NORMAL_32) if below else y  # (a zero: 0, which stays 0)
    random = np.int32(shift_right(shift_right(word, np.uint32(1)), np.uint32(np.int32(31) - drop)))
    kept = np.int32(np.int32(low_bits + random) & shift_left(np.int32(-1), drop))
    rounded = (quantum if kept != 0 else np.int32(0)) if below else kept
    return _shifted_back(bits, magnitude, rounded, shift_32, zero_sign)


@njit(**NUMBA_OPTIONS)
def uniform_constants(params, rand_bits):
    """What `_uniform_stochastic_element` reads: the random word's mask, the
    right shift that keeps its top ``fast_drop_min`` bits (``32 -
    fast_drop_min``), the mask that clears that many low bits, and the mask of
    a zero result's sign (`stochastic_constants`')."""
    drop = np.int32(max(params[P_FAST_DROP_MIN], 1))
    return (top_bits_mask_32(rand_bits, 0), np.uint32(32 - drop), np.int32(np.int32(-1) << drop),
            np.int32(0) if params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-1))


@njit(**NUMBA_OPTIONS)
def uniform_low(params, aligned):
    """The least shifted magnitude that drops ``fast_drop_min`` bits (the
    element's least normal, in its float32 bits), at least `aligned`; where the
    format drops no bits there (24 significand bits or more), above every
    magnitude: `_uniform_stochastic_element` needs one bit at least."""
    if params[P_FAST_DROP_MIN] < 1:
        return np.int64(INF_32)
    return max((params[P_FAST_DROP_OFFSET] - params[P_FAST_DROP_MIN]) << 23, aligned)


@njit(inline="always", **NUMBA_OPTIONS)
def _uniform_stochastic_element(bits, shift_32, clamp, keyed_high, multipliers, uniform):
    """`_stochastic_element` for the runs whose nonzero shifted magnitudes all
    lie in the element's normal range (at least `uniform_low`): there every
    ``y`` drops the same ``d = fast_drop_min`` bits (at least one), and no
    nonzero ``y`` rounds to 0, so the result is ``y`` plus the random word's top
    ``d`` bits with the low ``d`` bits cleared (`uniform`: `uniform_constants`).
    A zero ``y`` gives 0, as the word's top bits lie below the step."""
    word_mask, right, keep_mask, zero_sign = uniform
    magnitude = np.int32(bits & MAGNITUDE_32)
    y = np.int32(min(np.int32(magnitude - shift_32), clamp) if magnitude != 0 else np.int32(0))
    word = np.uint32(mix_high(keyed_high, multipliers) & word_mask)
    rounded = np.int32(np.int32(y + np.int32(shift_right(word, right))) & keep_mask)
    return _shifted_back(bits, magnitude, rounded, shift_32, zero_sign)


@njit(**NUMBA_OPTIONS)
def grid_constants(params, rand_bits):
    """What `_grid_stochastic_element` reads: the random word's mask, 2**32
    (float32), one over the spacing (float32: the spacing is a normal power of
    two, `has_grid_loops`) and the mask of a zero result's sign."""
    inverse = bits_to_float32(np.int32((np.int64(254) << 23) - params[P_BELOW_QUANTUM_BITS]))
    return (top_bits_mask_32(rand_bits, 0), np.float32(2.0**32), inverse,
            np.int32(0) if params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-1))


@njit(**NUMBA_OPTIONS)
def grid_back(shift_32, quantum):
    """For `_grid_stochastic_element`, in a block whose exponent field shifts by
    `shift_32`: what the float32 bits of a whole number of spacings add to go
    back (`quantum`: the spacing's bits)."""
    return np.int32(quantum - (np.int64(127) << 23) + shift_32)


@njit(inline="always", **NUMBA_OPTIONS)
def _grid_stochastic_element(bits, shift_32, clamp, back, keyed_high, multipliers, grid):
    """`_stochastic_element` for elements whose values are the multiples of
    one spacing throughout the fast range (fixed point: `has_grid_loops`), in
    float32 arithmetic: the shifted magnitude ``y`` in spacings ``s`` (exact:
    a normal float32 times a power of two, below 2**24), its whole part ``w``
    and the fraction ``s - w`` (both exact), and ``F``, the fraction times
    2**32 (exact: over the fast range the fraction has at most 32 bits)
    decide as `_stochastic_element` does: ``w`` steps up by one where the
    random word plus ``F`` carries out of 32 bits. The result is ``w``
    spacings, a float32 whose bits `back` shifts back (`grid_back`: results
    are normal float32s in a fast block; zero: 0 with the sign where the
    format has -0)."""
    word_mask, two_32, inverse, zero_sign = grid
    magnitude = np.int32(bits & MAGNITUDE_32)
    y = np.int32(min(np.int32(magnitude - shift_32), clamp) if magnitude != 0 else np.int32(0))
    # (at least 0: a magnitude below the range, which pass D redoes, may shift below 0; the
    # conversions below are defined for [0, 2**32) only)
    spacings = max(bits_to_float32(y) * inverse, np.float32(0.0))
    whole = np.float32(np.uint32(spacings))
    fraction = np.uint32((spacings - whole) * two_32)
    word = np.uint32(mix_high(keyed_high, multipliers) & word_mask)
    count = whole + np.float32(1.0) if np.uint32(word + fraction) < fraction else whole  # (exact: below 2**24)
    count_bits = float32_to_bits(count)
    return _shifted_back(bits, magnitude, count_bits, back, zero_sign)


@njit(inline="always", **NUMBA_OPTIONS)
def _stepped(bits, magnitude, y, up, step, shift_32, aligned, quantum, zero_sign):
    """The stochastic loops' result for float32 `bits` of `magnitude`, shifted
    to `y`, that steps `up` or not by `step` (a power of two: its grid's
    spacing): ``y`` plus the step where up, the low bits cleared (below one
    spacing, `aligned`: 0 or one spacing, `quantum`; a zero stays 0), shifted
    back by `shift_32`, with the sign of `bits` (not on a zero where
    `zero_sign` is 0: formats without -0)."""
    rounded = np.int32(np.int32(y + (step if up else np.int32(0))) & ~np.int32(step - np.int32(1)))
    if y < aligned:  # below one spacing: 0 or one spacing (a zero: 0)
        rounded = quantum if up and y != 0 else np.int32(0)
    return _shifted_back(bits, magnitude, rounded, shift_32, zero_sign)


@njit(**NUMBA_OPTIONS)
def wide_low(params, low):
    """The least shifted magnitude that `_wide_stochastic_element` rounds (`low`:
    `stochastic_low`'s): where the element format has subnormals (the bits
    dropped below one spacing follow `fast_drop_offset`), 2**-32 spacings (the
    least normal at least), else `low`."""
    if params[P_FAST_DROP_OFFSET] != params[P_BELOW_DROP_OFFSET]:
        return low
    return min(low, max(params[P_BELOW_QUANTUM_BITS] - (np.int64(32) << 23), np.int64(SMALLEST_NORMAL_32)))


@njit(**NUMBA_OPTIONS)
def wide_constants(params, rand_bits):
    """What `_wide_stochastic_element` reads besides `stochastic_constants`: the
    mask of the random number's low word (its top `rand_bits` bits there), the
    greatest left shift of the significand (``24 - fast_drop_min``) and the
    offset of the bits dropped less 24 (``fast_drop_offset - 24``), as a
    uint32 and int32s."""
    return (top_bits_mask_32(rand_bits, 32), np.int32(24 - params[P_FAST_DROP_MIN]),
            np.int32(params[P_FAST_DROP_OFFSET] - 24))


@njit(inline="always", **NUMBA_OPTIONS)
def _wide_stochastic_element(bits, shift_32, clamp, result_max, keyed_high, keyed_low, multipliers, constants, wide):
    """`_stochastic_element` over a wider range (`wide_low`: down to 2**-32
    spacings, where `stochastic_low`'s starts at 2**-8) with both halves of the
    random number (`wide`: `wide_constants`): for the runs of the blocks with
    magnitudes in between (few), where the other loop would leave them to
    float64. And above the range: the shifted magnitude clamped to `clamp`,
    the element's negative max, and the result (as an int32: the positive
    ones) to `result_max`, its positive max shifted back (the comment on
    `wide_clamp` in `_fast_kernel`).

    The bits dropped ``d`` reach 55 (23 at one spacing, one more per binade
    below), so
    ``T = sig * 2**(64 - d)``, the fraction above the grid point in 64 bits, is
    exact: its high word ``(sig << 8) << (24 - d)`` (``d <= 24``; ``d = 0``
    gives 0) or ``(sig << 8) >> (d - 24)`` (``d`` in [24, 55]), its low word
    ``(sig << 8) << (56 - d)`` (0 for ``d <= 32``). ``y`` steps up where the
    64-bit random number plus T, cut to its top `rand_bits`, carries out of 64
    bits: `core.element.stochastic_up`'s decision (``~R < T``), whose float64
    fraction is the same number (the float32 quotient is exact)."""
    word_mask, aligned, _, _, quantum, zero_sign = constants
    low_mask, left_max, below_offset = wide
    magnitude = np.int32(bits & MAGNITUDE_32)
    y = np.int32(min(np.int32(magnitude - shift_32), clamp) if magnitude != 0 else np.int32(0))
    high = mix_high(keyed_high, multipliers)
    low = mix_low(keyed_low, multipliers)
    field = np.int32(y >> np.int32(23))
    left = np.int32(min(left_max, np.int32(field - below_offset)))  # 24 - d
    # d - 24 in [0, 31] (31: zeros and magnitudes below the range, which pass D redoes)
    right = np.int32(min(max(np.int32(-left), np.int32(0)), np.int32(31)))
    left = np.int32(max(left, np.int32(0)))
    sig = np.uint32(shift_left(np.uint32(y), np.uint32(8)) | np.uint32(0x80000000))
    fraction_high = np.uint32(shift_right(np.uint32(shift_left(sig, np.uint32(left))), np.uint32(right)) & word_mask)
    fraction_low = np.uint32(shift_left(np.uint32(shift_left(sig, np.uint32(np.int32(31) - right))), np.uint32(1))
                             & low_mask)
    sum_low = np.uint32(low + fraction_low)
    sum_high = np.uint32(high + fraction_high)
    up = (sum_high < fraction_high) | ((sum_high == ALL_ONES_32) & (sum_low < fraction_low))
    step = np.int32(shift_right(np.int32(0x01000000), np.int32(left)))  # 2**d for d <= 24
    return min(_stepped(bits, magnitude, y, up, step, shift_32, aligned, quantum, zero_sign), result_max)


@njit(**NUMBA_OPTIONS)
def _below_threshold(shift, low):
    """For `_below_range`: the least magnitude (float32 bits) that lies in the
    fast range of a block whose exponent field shifts by `shift`, where `low` is
    the least shifted one: at least the least normal, at most MAGNITUDE_32
    (every finite magnitude below it)."""
    return np.int32(min(max(low + shift, np.int64(SMALLEST_NORMAL_32)), np.int64(MAGNITUDE_32)))


@njit(**NUMBA_OPTIONS)
def _below_range(bits, threshold):
    """Whether float32 `bits` is nonzero and below the fast range: its
    magnitude below `threshold` (`_below_threshold`), in one unsigned compare
    (zero less 1 wraps to the greatest)."""
    magnitude = np.int32(bits & MAGNITUDE_32)
    return wrapping_add(np.uint32(magnitude), ALL_ONES_32) < wrapping_add(np.uint32(threshold), ALL_ONES_32)


@njit(**NUMBA_OPTIONS)
def _round_piece(source, target, least, block_fast, ceiling, shift, exponent, low, clamp, by_adding, params,
                 element_params, mode, key, index, rand_bits, multipliers, weyl_step, constants, source_row, target_row,
                 ahead, uniform_runs, uniform, uniform_least, grid_runs, grid):
    """Round a block, or a piece of a long one, whose least nonzero magnitude is
    `least`: in the fast loop where the block allows (`block_fast`: its results
    fit), else in float64. Where `least` lies below the fast range, the elements
    below it are rounded again in float64 after the fast loop (as a rule few:
    the stochastic range of an int8 element, say, starts at 2**-8), and so are
    those above `ceiling` (float32 bits; MAGNITUDE_32: none), the block's top
    of the fast range shifted back (a two's complement element's block whose
    max lies past the positive max: int8 per tensor on about one tensor in a
    hundred, which took float64 whole, 35x the time). Element ``a``
    draws random number ``index + a``. The fast loop runs LANES elements at a
    time and, with each run, prefetches the elements ``ahead + a`` of
    `source_row` and `target_row` (PREFETCH elements further on). In nearest
    rounding, where `by_adding`, its runs round by adding (`_adding_element`).
    In stochastic rounding, where `uniform_runs` (a constant of the kernel),
    each run takes the uniform loop (`_uniform_stochastic_element`, with
    `uniform`), which also finds whether a nonzero magnitude of the run lies
    below `uniform_least` once shifted: then the run is rounded again by the
    other loop (for raw normal data onto E4M3 with one scale, about one run in
    125). Where `grid_runs` (a constant too), its runs take the grid loop
    (`_grid_stochastic_element`, with `grid`)."""
    shift_32 = np.int32(shift)
    low_fast = least == INF_32 or (least >= SMALLEST_NORMAL_32 and least - shift >= low)
    fast = block_fast and (index & SEGMENT_MASK) + source.size <= SEGMENT_MASK + 1
    if fast:
        keys = (np.uint32(0), np.uint32(0))
        if mode >= STOCHASTIC:
            keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
        # the stream's Weyl words, stepped rather than multiplied (as the block loop does)
        keyed_high, keyed_low = keyed_weyl(keys, wrapping_mul(np.uint32(index & SEGMENT_MASK), WEYL_32))
        runs = source.size // LANES
        run_step = wrapping_mul(weyl_step, np.uint32(LANES))
        uniform_threshold = _below_threshold(shift, uniform_least)
        back = grid_back(shift_32, np.int64(params[P_BELOW_QUANTUM_BITS]))
        for run in range(runs):  # a loop of a constant count per run, vectorised whole
            if mode == NEAREST:
                _prefetch_read(source_row, ahead + run * LANES)
            else:
                _prefetch_run(source_row, target_row, ahead + run * LANES)
            source_run = source[run * LANES:run * LANES + LANES]
            target_run = target[run * LANES:run * LANES + LANES]
            if mode == NEAREST and by_adding:
                for a in range(LANES):
                    target_run[a] = _adding_element(source_run[a], shift_32, clamp, params[P_FAST_DROP_MIN],
                                                    params[P_FAST_DROP_OFFSET], constants[5])
                continue
            if mode == STOCHASTIC and uniform_runs:
                below = False
                run_high = keyed_high
                for a in range(LANES):
                    target_run[a] = _uniform_stochastic_element(source_run[a], shift_32, clamp, run_high,
                                                                multipliers, uniform)
                    below |= _below_range(source_run[a], uniform_threshold)
                    run_high = wrapping_add(run_high, weyl_step)
                if not below:
                    keyed_high = run_high
                    keyed_low = wrapping_add(keyed_low, run_step)
                    continue
            if mode == STOCHASTIC and grid_runs:
                for a in range(LANES):
                    target_run[a] = _grid_stochastic_element(source_run[a], shift_32, clamp, back, keyed_high,
                                                             multipliers, grid)
                    keyed_high = wrapping_add(keyed_high, weyl_step)
                keyed_low = wrapping_add(keyed_low, run_step)
                continue
            for a in range(LANES):
                target_run[a] = _fast_element(source_run[a], shift_32, clamp, keyed_high, keyed_low, multipliers,
                                              params, mode, rand_bits, constants)
                keyed_high = wrapping_add(keyed_high, weyl_step)
                keyed_low = wrapping_add(keyed_low, weyl_step)
        for a in range(runs * LANES, source.size):
            target[a] = _fast_element(source[a], shift_32, clamp, keyed_high, keyed_low, multipliers, params, mode,
                                      rand_bits, constants)
            keyed_high = wrapping_add(keyed_high, weyl_step)
            keyed_low = wrapping_add(keyed_low, weyl_step)
        if not low_fast or ceiling != MAGNITUDE_32:
            # run by run: a vector compare, then the run's elements outside the range again
            threshold = _below_threshold(shift, low)
            for run in range(runs):
                below = outside_mask(source, run * LANES, threshold, ceiling)
                while below != 0:
                    a = run * LANES + trailing_zeros(below)
                    target[a] = round_in_float64(source[a], exponent, element_params, mode, key, index + a, rand_bits)
                    below &= below - 1
            for a in range(runs * LANES, source.size):
                if _below_range(source[a], threshold) or np.int32(source[a] & MAGNITUDE_32) > ceiling:
                    target[a] = round_in_float64(source[a], exponent, element_params, mode, key, index + a, rand_bits)
    else:  # in float64
        for a in range(source.size):
            target[a] = round_in_float64(source[a], exponent, element_params, mode, key, index + a, rand_bits)


# -- the fast kernel's chunks: blocks of a power of two elements, LANES to CHUNK --
#
# Rounding block by block runs two loops of `block_size` elements per block
# (its extremes, then its elements): for blocks of 32, their setup, remainder
# and reductions cost more than the rounding. So a row is taken CHUNK elements
# (CHUNK / block_size whole blocks) at a time, which stay in cache, in passes
# whose loops LLVM vectorises without a setup per block:
#
# A. every block's largest magnitude and least nonzero one (`block_extremes`):
#    LANES elements at a time by `run_extremes`, four 8-lane vectors folded
#    into one and reduced with LLVM's vector reductions (numba turns LLVM's SLP
#    vectoriser off, and a loop of a constant 32 reductions is unrolled into
#    scalar code before the loop vectoriser runs; folding the whole chunk four
#    elements at a time, loop by loop, took twice as long);
# B. every block's scale, shift and kind (`scale_blocks`), one loop over the
#    blocks without branches (vectorised): FAST_BLOCK where `_round_piece` takes its fast loop; SOME_ELEMENTS
#    where the block's results fit the fast loop but some of its shifted
#    magnitudes lie outside the fast range (below it: stochastic rounding's
#    range starts high; above it: a block max that rounds past the element's
#    max, as for mxint8); FLOAT64_BLOCK where the results do not fit (extreme
#    scales); NAN_BLOCK;
# C. every element of the chunk rounded (the fast loop of `_round_piece`),
#    whatever its block, in runs of LANES elements with their block's shift:
#    a loop of a constant count and a large body, which LLVM vectorises whole,
#    with no setup, remainder or runtime checks per run (one loop over the
#    chunk would need a shift per element, spread from the blocks' at about
#    the cost of the extremes). In stochastic rounding the runs of the blocks
#    with magnitudes outside the range of `_stochastic_element` (below 2**-8
#    spacings, or past a two's complement element's positive max: the flags
#    of `scale_blocks`) take a second loop, `_wide_stochastic_element`, with
#    both halves of the random number, whose range reaches 2**-32 spacings
#    and the negative max (pass B's range for these kernels: `wide_low`,
#    `chunk_top`): for raw normal data about one block in 45 of mxfp4 and one
#    in 65 of mxint8, which pass D would otherwise visit (about 150 ns a
#    block there on 1e7 values, of which the float64 rounding of its few
#    elements is a small part: the visit itself costs). In the UNIFORM_LOOPS
#    copy the runs of the blocks whose nonzero magnitudes all lie in the
#    element's normal range (UNIFORM_RUNS, also from pass B: for raw normal
#    data onto E4M3 all but about one block in 300) take a third loop,
#    `_uniform_stochastic_element`; in the GRID_LOOPS copy the narrow runs take
#    `_grid_stochastic_element`. A ragged last block's
#    elements after its last full run take `_round_piece`'s fast loop (the
#    wide one where its block's runs do). Each run prefetches the run
#    PREFETCH elements on (the next chunk's, to read and to write): pass A of
#    the next chunk then finds its data in the caches rather than wait for
#    memory, and the stores find their lines (25% faster on 1e7 float32);
# D. the blocks that are not FAST_BLOCK, again (`fix_blocks`): NaN blocks
#    NaN, every element of a FLOAT64_BLOCK and the elements outside the range
#    of a SOME_ELEMENTS block in float64 (`round_in_float64`).
#
# So every element gets the bits `_round_piece` gives it: the fast loop where
# its shifted magnitude lies in the range and its block's results fit (the
# conditions of that loop, element by element), else float64; the two agree
# wherever the fast loop may run (the tests hold them to it). A chunk whose
# random counters cross a 2**32 segment (once in 2**32 elements) is rounded in
# float64 (pass D).

CHUNK = 4096
FAST_BLOCK, SOME_ELEMENTS, FLOAT64_BLOCK, NAN_BLOCK = range(4)
NARROW_RUNS, WIDE_RUNS, UNIFORM_RUNS = range(3)  # the stochastic loop a block's runs take
BIT_LOOPS, UNIFORM_LOOPS, GRID_LOOPS = range(3)  # the stochastic kernel's copies (`stochastic_loops`)
NOT_ROUNDED = np.int64(1) << 20  # (`rounded_with`: no exponent)


@njit(**NUMBA_OPTIONS)
def chunked(block_size):
    """Whether the fast kernel rounds blocks of `block_size` in chunks."""
    return LANES <= block_size <= CHUNK and block_size & (block_size - 1) == 0


@njit(**NUMBA_OPTIONS)
def _least_key(magnitude):
    """``magnitude - 1`` as a uint32: a zero becomes the greatest key, so that
    the least key of a block is its least nonzero magnitude less 1."""
    return wrapping_add(np.uint32(magnitude), ALL_ONES_32)


@njit(**NUMBA_OPTIONS)
def block_extremes(source, blocks, block_size, largest, least):
    """Pass A: ``(largest, least)``, the largest magnitude (int32) and the least
    nonzero magnitude less 1 (`_least_key`, uint32; all ones: none) of each of
    the first `blocks` blocks of `source` (of a multiple of LANES elements), in
    their first `blocks` entries: `run_extremes` of each run of a block."""
    for b in range(blocks):
        big, small = run_extremes(source, b * block_size)
        for start in range(b * block_size + LANES, b * block_size + block_size, LANES):
            more_big, more_small = run_extremes(source, start)
            big, small = max(big, more_big), min(small, more_small)
        largest[b], least[b] = np.int32(big), np.uint32(small)
    return largest, least


@njit(**NUMBA_OPTIONS)
def scale_blocks(largest, least, blocks, scales, shifts, kinds, block_params, element_max, low, top, largest_result,
                 quantum, narrow_low, narrow_top, uniform_least, run_loops):
    """Pass B: for each of the first `blocks` blocks, from its `largest` and
    `least` (`block_extremes`), its scale into `scales` (NaN for a NaN block),
    the shift of its exponent field (``s << 23``) into `shifts` and its kind into
    `kinds` (FAST_BLOCK, SOME_ELEMENTS, FLOAT64_BLOCK, NAN_BLOCK: the comment
    above), by `_round_piece`'s conditions: the block's results fit the fast
    loop where its largest result and its least positive one (`largest_result`,
    `quantum`) stay normal float32s after the shift back; its magnitudes lie in
    the range where its largest shifted one is at most `top` and its least
    nonzero one is a normal float32 whose shifted magnitude is at least `low`.
    And into `run_loops` (None: no flags, for the modes without a wide loop) the
    loop the block's runs take: WIDE_RUNS where the block has a nonzero
    magnitude whose shifted one lies below `narrow_low` or above `narrow_top`,
    the ends of the range of `_stochastic_element` (in stochastic rounding
    `low` and `top` are those of `_wide_stochastic_element`), else UNIFORM_RUNS
    where every nonzero shifted magnitude is at least `uniform_least`
    (`uniform_low`), else NARROW_RUNS.
    Returns the greatest kind (FAST_BLOCK: every block is fast). One loop
    without branches, which LLVM vectorises: the exponent is
    `power_of_two_exponent`'s, from the float64 of the float32 max (always a
    normal float64: no subnormal to normalise), its rounding chosen by masks."""
    s_min, s_max, emax = block_params[B_S_MIN], block_params[B_S_MAX], block_params[B_EMAX]
    rounding = block_params[B_ROUNDING]
    # EVEN: the element's fraction bits in its top binade (52 or more: never a carry)
    kept = min(max(emax - block_params[B_TOP_SPACING_EXP], np.int64(0)), np.int64(52))
    dropped = 52 - kept
    half_less_1 = (np.int64(1) << max(dropped - 1, np.int64(0))) - 1 if dropped > 0 else np.int64(0)
    odd_shift = min(dropped, np.int64(63))
    max_fraction = float64_to_bits(element_max) & FRACTION_64  # RCEIL
    ceil = np.int64(rounding == CEIL)
    even = np.int64(rounding == EVEN and dropped > 0)
    rceil = np.int64(rounding == RCEIL)
    worst = np.int64(FAST_BLOCK)
    for b in range(blocks):
        big = np.int64(largest[b])
        small = np.int64(np.int32(wrapping_add(least[b], np.uint32(1))))  # 0: no nonzero magnitude
        nan = big >= INF_32
        value_bits = float64_to_bits(np.float64(bits_to_float32(np.int32(big if not nan else np.int64(0)))))
        fraction = value_bits & FRACTION_64
        s = (value_bits >> 52) - 1023 - emax  # floor(log2 m) - emax
        rounded = fraction + half_less_1 + (((fraction | HIDDEN_BIT_64) >> odd_shift) & 1)  # (hidden: no fraction kept)
        s += (ceil & np.int64(fraction != 0)) | (even & np.int64(rounded > FRACTION_64)) | (
            rceil & np.int64(fraction > max_fraction))
        exponent = s_min if big == 0 or nan else min(max(s, s_min), s_max)
        shift = exponent << 23
        scales[b] = np.nan if nan else bits_to_float64((exponent + 1023) << 52)
        shifts[b] = np.int32(shift)
        # the results of the fast loop are normal float32s (or zeros) after the shift back
        results_fast = (largest_result + shift < INF_32) & (quantum + shift >= SMALLEST_NORMAL_32)
        # and every shifted magnitude lies in its range
        range_fast = (big - shift <= top) & ((small == 0) | ((small >= SMALLEST_NORMAL_32) & (small - shift >= low)))
        kind = np.int64(NAN_BLOCK) if nan else (np.int64(FAST_BLOCK) if results_fast & range_fast else (
            np.int64(SOME_ELEMENTS) if results_fast else np.int64(FLOAT64_BLOCK)))
        kinds[b] = kind
        worst = max(worst, kind)
        if run_loops is not None:  # (None: a compiled copy without the flags)
            beyond = ((small != 0) & (small - shift < narrow_low)) | (big - shift > narrow_top)
            uniform = (small == 0) | (small - shift >= uniform_least)
            run_loops[b] = np.int8(WIDE_RUNS if beyond else (UNIFORM_RUNS if uniform else NARROW_RUNS))
    return worst


@njit(**NUMBA_OPTIONS)
def fix_blocks(source, target, blocks, block_size, kinds, shifts, low, top, element_params, mode, key, index,
               rand_bits):
    """Pass D: the blocks of the chunk `source` (its `blocks` blocks) that pass C
    may have rounded wrongly, by their `kinds`: a NaN block's elements NaN, a
    FLOAT64_BLOCK's elements in float64 (`round_in_float64`), and of a
    SOME_ELEMENTS block the nonzero elements below the float32 normals or whose
    shifted magnitude lies outside [`low`, `top`], in float64 too: found LANES
    at a time by `outside_mask` (a ragged block's last elements one by one).
    Element ``a`` draws random number ``index + a``. The kinds are read eight at
    a time (`kinds` holds a multiple of eight), and eight FAST_BLOCKs (zeros)
    skipped at once."""
    words = kinds.view(np.int64)
    for word in range(-(-blocks // 8)):
        if words[word] == 0:
            continue
        for b in range(8 * word, min(8 * word + 8, blocks)):
            kind = kinds[b]
            if kind != FAST_BLOCK:
                _fix_block(source, target, b * block_size, min(b * block_size + block_size, source.size), kind,
                           np.int64(shifts[b]), low, top, element_params, mode, key, index, rand_bits)


@njit(**NUMBA_OPTIONS)
def _fix_block(source, target, first, stop, kind, shift, low, top, element_params, mode, key, index, rand_bits):
    """`fix_blocks` for the block of elements `first` to `stop` of `kind`
    whose exponent field shifts by `shift`."""
    if kind == NAN_BLOCK:
        for a in range(first, stop):
            target[a] = QUIET_NAN_32
        return
    exponent = shift >> 23
    runs_stop = first if kind == FLOAT64_BLOCK else first + (stop - first) // LANES * LANES
    threshold = _below_threshold(shift, low)
    ceiling = np.int32(max(min(top + shift, np.int64(MAGNITUDE_32)), np.int64(0)))
    for run_first in range(first, runs_stop, LANES):
        outside = outside_mask(source, run_first, threshold, ceiling)
        while outside != 0:
            a = run_first + trailing_zeros(outside)
            target[a] = round_in_float64(source[a], exponent, element_params, mode, key, index + a, rand_bits)
            outside &= outside - 1
    for a in range(runs_stop, stop):
        magnitude = np.int64(source[a] & MAGNITUDE_32)
        if kind == FLOAT64_BLOCK or (magnitude != 0 and (magnitude < SMALLEST_NORMAL_32 or magnitude - shift < low
                                                          or magnitude - shift > top)):
            target[a] = round_in_float64(source[a], exponent, element_params, mode, key, index + a, rand_bits)


@njit(**NUMBA_OPTIONS)
def fast_range(params, mode):
    """``(low, high, top, clamp)`` of the fast kernels (rows and columns alike):
    the least shifted magnitude of the fast loop (`fast_bounds`' low, at least
    float32's least normal: y must be a normal float32; in stochastic rounding
    `stochastic_low`'s), the top of the element's fast range `high`, the largest
    shifted magnitude a fast block may hold `top` (where both signs saturate at
    the same magnitude every y beyond it rounds to it in every mode, so any:
    the loop clamps y to it; else `high`, and such blocks take float64), and
    that clamp as an int32."""
    low, high = fast_bounds(params, mode, False)
    low = max(low, np.int64(SMALLEST_NORMAL_32))
    if mode == STOCHASTIC:
        low = stochastic_low(params, low)
    top = np.int64(INF_32 - 1) if params[P_MAX_POS_BITS] == params[P_MAX_NEG_BITS] else high
    return low, high, top, np.int32(high)


def _fast_kernel(mode, loops=BIT_LOOPS):
    uniform_runs, grid_runs = loops == UNIFORM_LOOPS, loops == GRID_LOOPS

    @njit(**NUMBA_OPTIONS)
    def round_blocks_float32(source, target, scales, params, element_params, block_params, float_params, adding,
                             key, offset, rand_bits):
        rows, length = source.shape
        block_size = block_params[B_BLOCK_SIZE]
        by_adding = adding != 0  # nearest by adding a power of two (`_adding_element`)
        drop_min, drop_offset = params[P_FAST_DROP_MIN], params[P_FAST_DROP_OFFSET]
        zero_sign = np.int32(0) if params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-1)
        low, high, top, clamp = fast_range(params, mode)
        element_max = float_params[F_ELEMENT_MAX]
        quantum = params[P_BELOW_QUANTUM_BITS]  # the element's smallest positive value
        largest_result = params[P_MAX_POS_BITS]
        multipliers, weyl_step = loop_constants(hidden_zero(rand_bits))  # kept in registers (bits.hidden_zero)
        constants = stochastic_constants(params, rand_bits)
        wide = wide_constants(params, rand_bits)
        uniform = uniform_constants(params, rand_bits)
        grid = grid_constants(params, rand_bits)
        uniform_least = uniform_low(params, np.int64(params[P_FAST_ALIGNED_BITS])) if uniform_runs else np.int64(
            INF_32)
        # where the positive max is the lesser (two's complement: mxint8's 127/64 and -2),
        # the wide loop clamps y to the negative max and the positive results to theirs
        # (`result_max`: one signed minimum of the result's bits, which leaves the negative
        # ones alone): every y beyond the max of its sign rounds to it. So in stochastic
        # rounding the chunks' blocks above the range take the wide loop (the minimum
        # in the other loop would cost every block more than pass D costs these)
        wide_clamp = np.int32(params[P_MAX_NEG_BITS] if params[P_MAX_POS_BITS] < params[P_MAX_NEG_BITS] else high)
        chunk_top = np.int64(INF_32 - 1) if mode == STOCHASTIC and params[P_MAX_POS_BITS] <= params[
            P_MAX_NEG_BITS] else top
        # nearest by adding onto such an element: the chunks' runs clamp y to the negative
        # max and cap the positive results at theirs (`result_max`, as the wide loop does),
        # so that the blocks whose max lies between the two (mxint8: about one in 80 of raw
        # normal data, in four chunks of five) stay fast rather than visit pass D
        capped = mode == NEAREST and by_adding and params[P_MAX_POS_BITS] < params[P_MAX_NEG_BITS]
        if capped:
            chunk_top = np.int64(params[P_MAX_NEG_BITS])
        if chunked(block_size):  # passes A to D over each chunk (the comment above `chunked`)
            largest_a, least_a = np.empty(CHUNK // LANES, np.int32), np.empty(CHUNK // LANES, np.uint32)
            block_shifts, kinds = np.empty(CHUNK // 2, np.int32), np.empty(CHUNK // 2, np.int8)
            run_loops = np.zeros(CHUNK // LANES, np.int8)  # per block: the loop its runs take
            # stochastic rounding: passes B and D with the wide loop's range (from 2**-32
            # spacings, to the negative max), which rounds the blocks with magnitudes
            # outside [`low`, `top`] (`_wide_stochastic_element`)
            chunk_low = wide_low(params, low) if mode == STOCHASTIC else low
            per_block = 0  # log2 of the lanes per block
            while LANES << per_block < block_size:
                per_block += 1
            for row in range(rows):
                source_row, target_row, scales_row = source[row], target[row], scales[row]
                for first in range(0, length, CHUNK):
                    size = min(CHUNK, length - first)
                    source_chunk, target_chunk = source_row[first:first + size], target_row[first:first + size]
                    whole = size // block_size  # the blocks but a ragged last one
                    blocks = -(-size // block_size)
                    largest, least = block_extremes(source_chunk, whole, block_size, largest_a, least_a)
                    if whole < blocks:  # the row's ragged last block
                        big, small = np.int32(0), ALL_ONES_32
                        for a in range(whole * block_size, size):
                            magnitude = np.int32(source_chunk[a] & MAGNITUDE_32)
                            big, small = max(big, magnitude), min(small, _least_key(magnitude))
                        largest[whole], least[whole] = big, small
                    block0 = first // block_size
                    if mode == STOCHASTIC:
                        worst = scale_blocks(largest, least, blocks, scales_row[block0:block0 + blocks],
                                             block_shifts, kinds, block_params, element_max, chunk_low, chunk_top,
                                             largest_result, quantum, low, top, uniform_least, run_loops)
                    else:
                        worst = scale_blocks(largest, least, blocks, scales_row[block0:block0 + blocks],
                                             block_shifts, kinds, block_params, element_max, chunk_low, chunk_top,
                                             largest_result, quantum, low, top, uniform_least, None)
                    index = offset + row * length + first
                    if (index & SEGMENT_MASK) + size > SEGMENT_MASK + 1:
                        # random counters crossing a 2**32 segment (once in 2**32 elements): all in float64
                        for b in range(blocks):
                            if kinds[b] != NAN_BLOCK:
                                kinds[b] = FLOAT64_BLOCK
                                worst = max(worst, np.int64(FLOAT64_BLOCK))
                    else:
                        keys = (np.uint32(0), np.uint32(0))
                        if mode >= STOCHASTIC:
                            keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
                        keyed_high, keyed_low = keyed_weyl(keys, wrapping_mul(np.uint32(index & SEGMENT_MASK),
                                                                              WEYL_32))
                        # LANES elements at a time, each run with its block's shift: a loop of a
                        # constant count, which LLVM vectorises without setup or remainder
                        for run in range(size // LANES):
                            shift_32 = block_shifts[run >> per_block]
                            if mode == NEAREST:
                                _prefetch_read(source_row, first + run * LANES + PREFETCH)
                            else:
                                _prefetch_run(source_row, target_row, first + run * LANES + PREFETCH)
                            source_run = source_chunk[run * LANES:run * LANES + LANES]
                            target_run = target_chunk[run * LANES:run * LANES + LANES]
                            if mode == STOCHASTIC:  # (a branch numba drops in the other kernels)
                                run_loop = run_loops[run >> per_block]
                                if uniform_runs and run_loop == UNIFORM_RUNS:
                                    for a in range(LANES):
                                        target_run[a] = _uniform_stochastic_element(source_run[a], shift_32, clamp,
                                                                                    keyed_high, multipliers, uniform)
                                        keyed_high = wrapping_add(keyed_high, weyl_step)
                                        keyed_low = wrapping_add(keyed_low, weyl_step)
                                    continue
                                if run_loop == WIDE_RUNS:
                                    result_max = np.int32(largest_result + shift_32)  # (wraps: not a fast block)
                                    for a in range(LANES):
                                        target_run[a] = _wide_stochastic_element(source_run[a], shift_32,
                                                                                 wide_clamp, result_max, keyed_high,
                                                                                 keyed_low, multipliers, constants,
                                                                                 wide)
                                        keyed_high = wrapping_add(keyed_high, weyl_step)
                                        keyed_low = wrapping_add(keyed_low, weyl_step)
                                    continue
                            if mode == NEAREST and by_adding:
                                if capped:
                                    result_max = np.int32(largest_result + shift_32)
                                    for a in range(LANES):
                                        target_run[a] = min(_adding_element(source_run[a], shift_32, wide_clamp,
                                                                            drop_min, drop_offset, zero_sign),
                                                            result_max)
                                    continue
                                for a in range(LANES):
                                    target_run[a] = _adding_element(source_run[a], shift_32, clamp, drop_min,
                                                                    drop_offset, zero_sign)
                                continue
                            if mode == STOCHASTIC and grid_runs:
                                back = grid_back(shift_32, quantum)
                                for a in range(LANES):
                                    target_run[a] = _grid_stochastic_element(source_run[a], shift_32, clamp, back,
                                                                             keyed_high, multipliers, grid)
                                    keyed_high = wrapping_add(keyed_high, weyl_step)
                                    keyed_low = wrapping_add(keyed_low, weyl_step)
                                continue
                            for a in range(LANES):
                                if mode == STOCHASTIC:  # inlined here (in numba's IR): 10% faster
                                    target_run[a] = _stochastic_element(source_run[a], shift_32, clamp, keyed_high,
                                                                        multipliers, constants)
                                else:
                                    target_run[a] = _fast_element(source_run[a], shift_32, clamp, keyed_high,
                                                                  keyed_low, multipliers, params, mode, rand_bits,
                                                                  constants)
                                keyed_high = wrapping_add(keyed_high, weyl_step)
                                keyed_low = wrapping_add(keyed_low, weyl_step)
                        # the ragged block's elements after its last run: the fast loop too (pass D
                        # rounds those outside the range again, as in the runs), a loop of its own
                        # (`_round_piece` here would be a second copy of it to compile)
                        shift_32 = block_shifts[blocks - 1]
                        last_wide = run_loops[blocks - 1] == WIDE_RUNS
                        for a in range(size - size % LANES, size):
                            if mode == NEAREST and capped:
                                target_chunk[a] = min(_adding_element(source_chunk[a], shift_32, wide_clamp, drop_min,
                                                                      drop_offset, zero_sign),
                                                      np.int32(largest_result + shift_32))
                            elif mode == STOCHASTIC and last_wide:
                                target_chunk[a] = _wide_stochastic_element(source_chunk[a], shift_32, wide_clamp,
                                                                           np.int32(largest_result + shift_32),
                                                                           keyed_high, keyed_low, multipliers,
                                                                           constants, wide)
                            else:
                                target_chunk[a] = _fast_element(source_chunk[a], shift_32, clamp, keyed_high,
                                                                keyed_low, multipliers, params, mode, rand_bits,
                                                                constants)
                            keyed_high = wrapping_add(keyed_high, weyl_step)
                            keyed_low = wrapping_add(keyed_low, weyl_step)
                    if worst != FAST_BLOCK:
                        fix_blocks(source_chunk, target_chunk, blocks, block_size, kinds, block_shifts, chunk_low,
                                   chunk_top, element_params, mode, key, index, rand_bits)
            return
        # the least nonzero magnitude of each piece of PIECE elements of a block (a long
        # block: one scale per row or array), found in the pass for its largest, which
        # memory bounds; so that one tiny value sends one piece, not the block, to the
        # float64 check. A block of several pieces is rounded in that pass too, each
        # piece with the exponent of the largest magnitude so far (`rounded_with`),
        # while the piece is in cache: once the largest has reached its final binade
        # (soon, for most data) the pieces need no second pass over memory; those
        # rounded with another exponent, or all where the final largest makes the
        # block leave the fast loop (`block_fast`), are rounded again after it.
        pieces_max = -(-min(block_size, max(length, 1)) // PIECE)
        piece_least = np.empty(pieces_max, np.int32)
        rounded_with = np.empty(pieces_max, np.int64)
        for row in range(rows):
            source_row, target_row = source[row], target[row]
            for block, first in enumerate(range(0, length, block_size)):
                stop = min(first + block_size, length)
                source_block, target_block = source_row[first:stop], target_row[first:stop]
                index = offset + row * length + first
                pieces = -(-source_block.size // PIECE)
                several = pieces > 1
                largest = np.int32(0)
                exponent = np.int64(0)
                shift = np.int64(0)
                block_fast = False
                # steps 0 to pieces - 1: each piece's extremes, and where the largest so far
                # allows, the piece rounded; steps pieces to 2 pieces - 1: the pieces left
                # (one call site of _round_piece: LLVM inlines its loops once per kernel)
                for step in range(2 * pieces):
                    piece = step if step < pieces else step - pieces
                    piece_first = piece * PIECE
                    piece_stop = min(piece_first + PIECE, source_block.size)
                    if step < pieces:
                        source_piece = source_block[piece_first:piece_stop]
                        least = INF_32  # (inf: none)
                        for a in range(source_piece.size):
                            magnitude = np.int32(source_piece[a] & MAGNITUDE_32)
                            largest = max(largest, magnitude)
                            least = min(least, magnitude if magnitude != 0 else INF_32)
                        piece_least[piece] = least
                        rounded_with[piece] = NOT_ROUNDED
                        if not several or largest >= INF_32:
                            continue
                        exponent = power_of_two_exponent(np.float64(bits_to_float32(largest)), block_params,
                                                         element_max)
                    elif step == pieces:  # the block's scale, from its largest
                        if largest >= INF_32:  # NaN or inf: a NaN block
                            scales[row, block] = np.nan
                            for a in range(target_block.size):
                                target_block[a] = QUIET_NAN_32
                            break
                        exponent = power_of_two_exponent(np.float64(bits_to_float32(largest)), block_params,
                                                         element_max)
                        scales[row, block] = power_of_two(exponent)
                    shift = np.int64(exponent) << 23
                    # the results fit the fast loop; magnitudes above the range (`ceiling`) are
                    # rounded again in float64 (`_round_piece`)
                    block_fast = largest_result + shift < INF_32 and quantum + shift >= SMALLEST_NORMAL_32
                    ceiling = MAGNITUDE_32 if largest - shift <= top else np.int32(
                        max(min(top + shift, np.int64(MAGNITUDE_32)), np.int64(0)))
                    if step < pieces and not block_fast:  # not yet
                        continue
                    if step >= pieces and block_fast and rounded_with[piece] == exponent:  # done so
                        continue
                    _round_piece(source_block[piece_first:piece_stop], target_block[piece_first:piece_stop],
                                 piece_least[piece], block_fast, ceiling, shift, exponent, low, clamp, by_adding, params,
                                 element_params, mode, key, index + piece_first, rand_bits, multipliers, weyl_step,
                                 constants, source_row, target_row, first + piece_first + PREFETCH, uniform_runs,
                                 uniform, uniform_least, grid_runs, grid)
                    if step < pieces:
                        rounded_with[piece] = exponent

    return round_blocks_float32


FAST_SIGNATURE = types.void(types.Array(types.int32, 2, "C", readonly=True), types.Array(types.int32, 2, "C"),
                            types.Array(types.float64, 2, "C"), PARAMS_TYPE, PARAMS_TYPE, BLOCK_PARAMS_TYPE,
                            FLOAT_PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64)
# by mode number, for the modes fast_round_bits decides; compiled on first use
FAST_KERNELS = tuple(_fast_kernel(mode) for mode in FAST_BITS_MODES)
# stochastic rounding with other loops: by variant (UNIFORM_LOOPS, GRID_LOOPS), compiled on first use
STOCHASTIC_KERNELS = {loops: _fast_kernel(STOCHASTIC, loops) for loops in (UNIFORM_LOOPS, GRID_LOOPS)}


@functools.cache  # (the dispatcher's compile() costs ~20 us a call)
def general_kernel(data_dtype):
    """`round_blocks` compiled (or loaded from numba's cache) for float32 or
    float64 data, on first use: its compiled entry point."""
    return compiled(round_blocks, SIGNATURES[0 if data_dtype == np.float32 else 1])


@functools.cache
def fast_kernel(mode, loops=BIT_LOOPS):
    """The compiled entry point of the fast kernel for `mode` (compiled, or loaded
    from numba's cache, on first use), or None for a mode it does not serve;
    in stochastic rounding the copy with the element loops `loops`: those
    `stochastic_loops` gives for the format (GRID_LOOPS gives wrong bits for
    a format that `has_grid_loops` refuses; UNIFORM_LOOPS and BIT_LOOPS serve
    every format)."""
    if mode not in FAST_BITS_MODES:
        return None
    if mode == STOCHASTIC and loops != BIT_LOOPS:
        return compiled(STOCHASTIC_KERNELS[loops], FAST_SIGNATURE)
    return compiled(FAST_KERNELS[FAST_BITS_MODES.index(mode)], FAST_SIGNATURE)


# Binades of the element's normal range from which the stochastic kernel takes the
# copy with the uniform loop: over 10 binades, few blocks of 32 ordinary numbers have
# one that falls below the element's normals (about 0.3% for E4M3, with 14), while over
# 2 to 6 (FP4, FP6) most do, and there the third loop costs the other two ~5%.
UNIFORM_BINADES = 10


def stochastic_loops(params):
    """The element loops of the stochastic kernel's copy for the element format
    of `params` (`fast_kernel`): GRID_LOOPS where its values are the multiples
    of one spacing throughout the fast range (`has_grid_loops`: fixed point),
    UNIFORM_LOOPS where it drops bits throughout a normal range of at least
    UNIFORM_BINADES binades below the top of its fast range, else BIT_LOOPS."""
    if has_grid_loops(params):
        return GRID_LOOPS
    if params[P_FAST_DROP_MIN] < 1:
        return BIT_LOOPS
    least = max((int(params[P_FAST_DROP_OFFSET]) - int(params[P_FAST_DROP_MIN])) << 23,
                int(params[P_FAST_ALIGNED_BITS]))
    binades = (int(params[P_FAST_HIGH_BITS]) >> 23) - (least >> 23)
    return UNIFORM_LOOPS if binades >= UNIFORM_BINADES else BIT_LOOPS


def has_grid_loops(params):
    """Whether `_grid_stochastic_element` serves the element format of `params`:
    every magnitude up to the top of its fast range drops at least
    ``fast_drop_min`` bits (its values there are the multiples of one
    spacing), the spacing is a normal float32 and the top is below 2**24
    spacings."""
    high, quantum = int(params[P_FAST_HIGH_BITS]), int(params[P_BELOW_QUANTUM_BITS])
    return (int(params[P_FAST_DROP_OFFSET]) - (high >> 23) >= int(params[P_FAST_DROP_MIN])
            and quantum >= 1 << 23 and (high >> 23) - (quantum >> 23) < 24)


# -- the fast kernel's column form: float32 data, power-of-two scales, blocks along
# another axis than the last --
#
# The data arrive as ``(outer, length, inner)`` with inner > 1: a block is
# `block_size` rows of `inner` contiguous elements, one scale per block and inner
# index. The chunked passes above, vectorised over the inner index instead of
# over a block's elements: for each outer index and block of rows,
#
# A. every column's largest magnitude and least nonzero one (`_column_extremes`),
#    one loop over the inner index per four rows;
# B. every column's scale, shift and kind (`scale_blocks`, its blocks being the
#    columns), with `_round_piece`'s fast range (no wide stochastic loop);
# C. every element rounded by the fast loop (`_adding_element` or
#    `_fast_element`), row by row, one loop over the inner index with each
#    column's shift (a row's random numbers are consecutive: the Weyl words
#    stepped along it);
# D. the columns that are not FAST_BLOCK, again (`_fix_columns`): found once per
#    block, so that a row visits only those.
#
# Element ``(o, a, i)`` draws random number ``offset + (o * length + a) * inner + i``
# (`round_blocks`'); a row whose counters cross a 2**32 segment is rounded in
# float64 (pass C). Neither prefetching the next block's rows nor passes over
# tiles of 1024 inner indices (a block of 32 rows of 4096 is 512 KiB) made it
# faster on (2048, 4096) data blocked along the first axis.


@njit(**NUMBA_OPTIONS)
def _column_extremes(source, o, first, stop, largest, least):
    """Pass A of the column kernel: the largest magnitude (int32) and the least
    nonzero magnitude less 1 (`_least_key`, uint32; all ones: none) over rows
    `first` to `stop` of ``source[o]`` (int32 float32 bits), for each inner
    index, into `largest` and `least`. Four rows at a time: a loop over one row
    loads and stores the two extremes per element, which took twice the time of
    the loads of the data (the extremes of 4096 columns fill the L1 cache)."""
    largest[:] = 0
    least[:] = ALL_ONES_32
    a = first
    while a + 4 <= stop:
        row_0, row_1, row_2, row_3 = source[o, a], source[o, a + 1], source[o, a + 2], source[o, a + 3]
        for i in range(row_0.size):  # vectorised
            magnitude_0, magnitude_1 = np.int32(row_0[i] & MAGNITUDE_32), np.int32(row_1[i] & MAGNITUDE_32)
            magnitude_2, magnitude_3 = np.int32(row_2[i] & MAGNITUDE_32), np.int32(row_3[i] & MAGNITUDE_32)
            big = max(max(magnitude_0, magnitude_1), max(magnitude_2, magnitude_3))
            small = min(min(_least_key(magnitude_0), _least_key(magnitude_1)),
                        min(_least_key(magnitude_2), _least_key(magnitude_3)))
            largest[i] = max(largest[i], big)
            least[i] = min(least[i], small)
        a += 4
    for a in range(a, stop):  # the last rows of a block of other than a multiple of 4
        row = source[o, a]
        for i in range(row.size):  # vectorised
            magnitude = np.int32(row[i] & MAGNITUDE_32)
            largest[i] = max(largest[i], magnitude)
            least[i] = min(least[i], _least_key(magnitude))


@njit(**NUMBA_OPTIONS)
def _slow_columns(kinds, columns):
    """The inner indices whose `kinds` are not FAST_BLOCK, into the first
    entries of `columns`: their count."""
    count = 0
    for i in range(kinds.size):
        if kinds[i] != FAST_BLOCK:
            columns[count] = i
            count += 1
    return count


@njit(**NUMBA_OPTIONS)
def _fix_columns(source, target, o, first, stop, columns, count, kinds, shifts, low, top, element_params, mode, key,
                 offset, rand_bits):
    """Pass D of the column kernel for the block of rows `first` to `stop` of
    ``source[o]``: at the `count` inner indices `columns` (those not FAST_BLOCK),
    by their `kinds`, a NaN block's elements NaN, a FLOAT64_BLOCK's elements in
    float64 (`round_in_float64`) and of a SOME_ELEMENTS block the nonzero
    elements below the float32 normals or whose shifted magnitude lies outside
    [`low`, `top`] in float64 too: `_fix_block`'s decisions. Element
    ``(o, a, i)`` draws random number ``offset + (o * length + a) * inner + i``."""
    length, inner = source.shape[1], source.shape[2]
    for a in range(first, stop):
        source_row, target_row = source[o, a], target[o, a]
        index = offset + (o * length + a) * inner
        for j in range(count):
            i = columns[j]
            kind = kinds[i]
            if kind == NAN_BLOCK:
                target_row[i] = QUIET_NAN_32
                continue
            shift = np.int64(shifts[i])
            magnitude = np.int64(source_row[i] & MAGNITUDE_32)
            if kind == FLOAT64_BLOCK or (magnitude != 0 and (magnitude < SMALLEST_NORMAL_32 or magnitude - shift < low
                                                              or magnitude - shift > top)):
                target_row[i] = round_in_float64(source_row[i], shift >> 23, element_params, mode, key, index + i,
                                                 rand_bits)


def _fast_columns(mode):
    @njit(**NUMBA_OPTIONS)
    def round_columns_float32(source, target, scales, params, element_params, block_params, float_params, adding,
                              key, offset, rand_bits):
        """The fast kernel for 3-D float32 data ``(outer, length, inner)`` (int32
        bits) blocked along the middle axis, scales ``(outer, blocks, inner)``:
        passes A to D of the comment above, per outer index and block of rows,
        with `_round_piece`'s range and decisions."""
        outer, length, inner = source.shape
        block_size = block_params[B_BLOCK_SIZE]
        by_adding = adding != 0  # nearest by adding a power of two (`_adding_element`)
        drop_min, drop_offset = params[P_FAST_DROP_MIN], params[P_FAST_DROP_OFFSET]
        zero_sign = np.int32(0) if params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-1)
        low, high, top, clamp = fast_range(params, mode)
        element_max = float_params[F_ELEMENT_MAX]
        quantum = params[P_BELOW_QUANTUM_BITS]  # the element's smallest positive value
        largest_result = params[P_MAX_POS_BITS]
        multipliers, weyl_step = loop_constants(hidden_zero(rand_bits))
        constants = stochastic_constants(params, rand_bits)
        largest = np.empty(inner, np.int32)
        least = np.empty(inner, np.uint32)
        shifts = np.empty(inner, np.int32)
        kinds = np.empty(inner, np.int8)
        columns = np.empty(inner, np.int64)
        for o in range(outer):
            for block, first in enumerate(range(0, length, block_size)):
                stop = min(first + block_size, length)
                _column_extremes(source, o, first, stop, largest, least)
                worst = scale_blocks(largest, least, inner, scales[o, block], shifts, kinds, block_params,
                                     element_max, low, top, largest_result, quantum, low, top, INF_32, None)
                for a in range(first, stop):
                    source_row, target_row = source[o, a], target[o, a]
                    index = offset + (o * length + a) * inner
                    if mode >= STOCHASTIC and (index & SEGMENT_MASK) + inner > SEGMENT_MASK + 1:
                        # random counters crossing a 2**32 segment (once in 2**32 elements): in
                        # float64 (pass D makes the NaN blocks' elements NaN)
                        for i in range(inner):
                            target_row[i] = round_in_float64(source_row[i], np.int64(shifts[i]) >> 23,
                                                             element_params, mode, key, index + i, rand_bits)
                        continue
                    if mode == NEAREST and by_adding:
                        for i in range(inner):  # vectorised
                            target_row[i] = _adding_element(source_row[i], shifts[i], clamp, drop_min, drop_offset,
                                                            zero_sign)
                        continue
                    keys = (np.uint32(0), np.uint32(0))
                    if mode >= STOCHASTIC:
                        keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
                    keyed_high, keyed_low = keyed_weyl(keys, wrapping_mul(np.uint32(index & SEGMENT_MASK), WEYL_32))
                    for i in range(inner):  # vectorised
                        target_row[i] = _fast_element(source_row[i], shifts[i], clamp, keyed_high, keyed_low,
                                                      multipliers, params, mode, rand_bits, constants)
                        keyed_high = wrapping_add(keyed_high, weyl_step)
                        keyed_low = wrapping_add(keyed_low, weyl_step)
                if worst != FAST_BLOCK:
                    count = _slow_columns(kinds, columns)
                    _fix_columns(source, target, o, first, stop, columns, count, kinds, shifts, low, top,
                                 element_params, mode, key, offset, rand_bits)

    return round_columns_float32


COLUMN_SIGNATURE = types.void(types.Array(types.int32, 3, "C", readonly=True), types.Array(types.int32, 3, "C"),
                              types.Array(types.float64, 3, "C"), *FAST_SIGNATURE.args[3:])
# the modes of the column form: MX's (nearest to cast, stochastic for gradients). Each
# mode is a kernel of its own, 3.5 s to compile from scratch, and the tests compile
# every one; the other modes of FAST_BITS_MODES would take it as they are (add them here)
COLUMN_MODES = (NEAREST, STOCHASTIC)
# by mode, as COLUMN_MODES; compiled on first use
COLUMN_KERNELS = tuple(_fast_columns(mode) for mode in COLUMN_MODES)


@functools.cache
def column_kernel(mode):
    """The compiled entry point of the fast kernel's column form for `mode`
    (3-D data blocked along the middle axis; compiled, or loaded from numba's
    cache, on first use), or None for a mode it does not serve (the general
    kernel rounds those)."""
    if mode not in COLUMN_MODES:
        return None
    return compiled(COLUMN_KERNELS[COLUMN_MODES.index(mode)], COLUMN_SIGNATURE)
