"""Scaled formats with significand scales (NVFP4: E2M1 elements in blocks of 16,
E4M3 scales) on the CPU, for float32 data blocked along the last axis (and, in
their column forms at the end, along another): the general block kernel's bits
(``blocks.round_blocks``: the element is the float64 quotient ``v / X``
rounded, times ``X``) at a fraction of its cost.

Both kernels take a row CHUNK elements (whole blocks) at a time, in passes
whose loops LLVM vectorises: (A) every block's largest magnitude, (B) every
block's scale, in one loop over the blocks (the divisions overlap), and what
its elements need, (C) the elements, a block at a time in runs of RUN (a loop
of a constant count, vectorised whole), then (D) the blocks holding NaN or inf
NaN.

Nearest (`round_grid_blocks`), elements of a small grid (at most GRID
magnitudes): the quotient lies on the same side of each midpoint of the
element's grid as the exact ``v / X``, and on a midpoint only where ``v / X``
is one (v has 24 significant bits, a midpoint m at most 5 and X at most 35: a
scale of at most 11 times a float32 tensor scale; so an exact ``v / X`` off a
midpoint differs from it by at least about 2**-40 of m, far more than the
quotient's rounding, 2**-53), so comparing |v| with the products ``m * X`` (exact in
float64) decides as the general kernel does: the element is the grid value
above as many midpoints as lie below |v| (and those equal to it whose tie
rounds up). For float32 ``|v|``, ``|v| > t`` holds exactly where ``|v| > t32``
for ``t32`` the greatest float32 at most the float64 ``t``: so pass B turns each
block's thresholds into float32 bits (and a tie that rounds up into the
threshold just below it), and its grid values times X into the float32 results,
and pass C compares magnitudes as integers in float32 lanes and selects the
result: no division, no float64. The scale is the general kernel's too:
``largest / (element max * g)`` (one float64 rounding) rounded to nearest even
on the scale format's grid by adding 2**52 in its binade (at least its least
normal exponent: formats with subnormals and fraction bits; `scaling` picks the
scale formats), saturated at its max and at least its least value.

Stochastic (`round_division_blocks`), any element that saturates and whose
least normal is a float64 normal (``round_bits``' straight-line form leaves
the others out): pass C divides in float64 as the general kernel does and
rounds the quotient with ``core.scale.round_element`` in a vectorised loop, the
random numbers from Weyl words stepped per element (``core.stream``): the same
numbers as ``random_bits``.
"""
import functools

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..core.bits import (
    NUMBA_OPTIONS, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits, hidden_zero, wrapping_add,
    wrapping_mul,
)
from ..core.layout import PARAMS_TYPE, STOCHASTIC
from ..core.scale import F_ELEMENT_MAX, F_SCALE_MAX, F_SCALE_MIN, F_TENSOR_SCALE, round_element
from ..core.stream import WEYL_32, keyed_bits, keyed_weyl, loop_constants, random_bits, segment_keys
from .blocks import FLOAT_PARAMS_TYPE, INF_32, MAGNITUDE_32, SEGMENT_MASK, power_of_two, prefetch
from .loops import compiled

GRID = 8  # element magnitudes (GRID - 1 midpoints); unused ones: +inf midpoints
TWO_52 = 2.0**52
RUN = 16  # elements rounded by a loop of a constant count
CHUNK = 4096  # elements of a row per pass (whole blocks; at least one block)
TABLE_BLOCKS = 256  # blocks of a chunk at most (the grid kernel's table)
# entries of the table between a block's consecutive ones: more than TABLE_BLOCKS, and not a
# multiple of 1024 (a block's entries 4 KiB apart would share a set of the L1 cache: 2x slower)
TABLE_STRIDE = TABLE_BLOCKS + 16


@njit(**NUMBA_OPTIONS)
def _nearest_scale(largest, float_params, scale_man_bits, scale_min_exponent):
    """`core.scale.significand_scale` for a scale format with subnormals and
    `scale_man_bits` fraction bits whose least normal is
    ``2**scale_min_exponent``, times the tensor scale: float64 arithmetic."""
    quotient = largest / (float_params[F_ELEMENT_MAX] * float_params[F_TENSOR_SCALE])
    exponent = max(np.int64((float64_to_bits(quotient) >> 52) & 0x7FF) - 1023, scale_min_exponent)
    step = power_of_two(exponent - scale_man_bits)
    # to nearest even by adding 2**52 (the quotient over its step is below 2**(scale_man_bits + 2))
    rounded = ((quotient * power_of_two(scale_man_bits - exponent) + TWO_52) - TWO_52) * step
    value = min(max(rounded, float_params[F_SCALE_MIN]), float_params[F_SCALE_MAX])
    return value * float_params[F_TENSOR_SCALE]


@intrinsic
def run_largest(typingctx, array, start):
    """The largest magnitude (int32) of the RUN float32 bits ``array[start:start
    + RUN]``: one vector load, mask and LLVM's vector reduction (a loop of
    RUN maxima runs five times as long: its setup and reduction per call)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int32 and array.ndim == 1 and array.layout == "C"
            and isinstance(start, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        int32 = ir.IntType(32)
        vector = ir.VectorType(int32, RUN)
        pointer = builder.gep(data, [context.cast(builder, args[1], signature.args[1], types.intp)])
        values = builder.load(builder.bitcast(pointer, vector.as_pointer()), align=4)
        magnitudes = builder.and_(values, ir.Constant(vector, [int32(MAGNITUDE_32)] * RUN))
        smax = cgutils.get_or_insert_function(builder.module, ir.FunctionType(int32, [vector]),
                                              f"llvm.vector.reduce.smax.v{RUN}i32")
        return builder.call(smax, [magnitudes])

    return types.int32(array, start), codegen


@njit(**NUMBA_OPTIONS)
def _block_maxima(source_chunk, blocks, block_size, maxima):
    """Pass A: the largest magnitude of each of the `blocks` blocks of
    `source_chunk` (int32 float32 bits; NaN and inf at least INF_32) into `maxima`."""
    for block in range(blocks):
        first = block * block_size
        largest = np.int32(0)
        if block_size == RUN and first + RUN <= source_chunk.size:
            largest = run_largest(source_chunk, first)
        else:
            for a in range(first, min(first + block_size, source_chunk.size)):
                largest = max(largest, np.int32(source_chunk[a] & MAGNITUDE_32))
        maxima[block] = largest


@njit(**NUMBA_OPTIONS)
def largest_finite(bits):
    """The largest finite magnitude of the float32 `bits` (0 where there is
    none): one vectorised pass (a tensor scale's max)."""
    largest = np.int32(0)
    for a in range(bits.size):
        magnitude = np.int32(bits[a] & MAGNITUDE_32)
        largest = max(largest, magnitude if magnitude < INF_32 else np.int32(0))
    return bits_to_float32(largest)


@njit(**NUMBA_OPTIONS)
def _block_scales(maxima, blocks, scales, float_params, scale_fields):
    """Pass B's scales: of each block, from its largest magnitude, into `scales`
    (NaN for a block holding NaN or inf); one loop without branches."""
    man_bits, min_exponent = scale_fields[0], scale_fields[1]
    for block in range(blocks):
        largest = maxima[block]
        scale = _nearest_scale(np.float64(bits_to_float32(min(largest, INF_32))), float_params, man_bits,
                               min_exponent)
        scales[block] = np.nan if largest >= INF_32 else scale


@njit(**NUMBA_OPTIONS)
def _chunk_scales(source_chunk, scales_row, first, block_size, maxima, float_params, scale_fields):
    """Passes A and B's scales for the chunk `source_chunk` (float32 bits) of
    whole blocks that starts at element `first` of its row: each block's
    largest magnitude into `maxima` and its scale into `scales_row`. Returns
    the chunk's block count and its scales (a view of `scales_row`)."""
    blocks = -(-source_chunk.size // block_size)
    block0 = first // block_size
    chunk_scales = scales_row[block0:block0 + blocks]
    _block_maxima(source_chunk, blocks, block_size, maxima)
    _block_scales(maxima, blocks, chunk_scales, float_params, scale_fields)
    return blocks, chunk_scales


@njit(**NUMBA_OPTIONS)
def _float32_below(value):
    """The bits of the greatest float32 at most the float64 `value` (>= 0 or
    +inf): ``|v| > value`` exactly where ``|v| > that float32``, for float32 v."""
    nearest = np.float32(value)
    bits = float32_to_bits(nearest)
    return np.int32(bits - np.int32(1)) if np.float64(nearest) > value else bits


@njit(**NUMBA_OPTIONS)
def _nan_blocks(target_chunk, blocks, block_size, maxima, write_elements):
    """Pass D: the elements of the blocks holding NaN or inf NaN, or 0 where
    they are `write_elements` (their scale code says NaN); none, as a rule:
    one vectorised look first."""
    worst = np.int32(0)
    for block in range(blocks):
        worst = max(worst, maxima[block])
    if worst < INF_32:
        return
    for block in range(blocks):
        if maxima[block] >= INF_32:
            for a in range(block * block_size, min(block * block_size + block_size, target_chunk.size)):
                target_chunk[a] = 0.0 if write_elements else np.nan


@njit(**NUMBA_OPTIONS)
def round_grid_blocks(source, target, scales, float_params, scale_fields, midpoints, tie_up, magnitudes,
                      block_size, write_elements):
    """Float32 rows `source` (int32 bits; blocks of `block_size` along them)
    rounded to nearest onto an element grid of at most GRID magnitudes
    (`magnitudes`, the first 0, with `midpoints` between them and whether a tie
    at each rounds up, `tie_up`) with significand scales into `target`
    (float32, or float64: a tensor scale's products) and the scales into
    `scales` (NaN for a block holding NaN or inf):
    the module's docstring. `scale_fields`: the scale format's fraction bits,
    least normal exponent and whether the element keeps the sign of a zero
    result. Where `write_elements` (rp.encode), the elements themselves (the
    grid values, 0 in a NaN block), not times the scale."""
    rows, length = source.shape
    signed_zero = scale_fields[2] != 0
    chunk_blocks = min(max(CHUNK // block_size, 1), TABLE_BLOCKS)
    maxima = np.empty(chunk_blocks, np.int32)
    # pass B's tables: each block's thresholds (float32 bits) and results (the target's type),
    # entry k of block b at ``k * TABLE_STRIDE + b`` (a stride the compiler knows: one base register)
    thresholds = np.empty((GRID - 1) * TABLE_STRIDE, np.int32)
    results = np.empty(GRID * TABLE_STRIDE, target.dtype)
    for row in range(rows):
        source_row, target_row, scales_row = source[row], target[row], scales[row]
        for first in range(0, length, chunk_blocks * block_size):
            size = min(chunk_blocks * block_size, length - first)
            source_chunk, target_chunk = source_row[first:first + size], target_row[first:first + size]
            blocks, chunk_scales = _chunk_scales(source_chunk, scales_row, first, block_size, maxima, float_params,
                                                 scale_fields)
            _grid_tables(chunk_scales, blocks, midpoints, tie_up, magnitudes, thresholds, results, write_elements,
                         TABLE_STRIDE)
            runs = size // RUN if block_size == RUN else 0  # whole blocks of RUN
            _grid_runs(source_row, target_row, first, runs, thresholds, results, signed_zero)
            for block in range(runs, blocks):
                for a in range(block * block_size, min(block * block_size + block_size, size)):
                    target_chunk[a] = _grid_entry(source_chunk[a], thresholds, results, block, signed_zero)
            _nan_blocks(target_chunk, blocks, block_size, maxima, write_elements)


@njit(**NUMBA_OPTIONS)
def _grid_tables(scales, blocks, midpoints, tie_up, magnitudes, thresholds, results, write_elements, stride):
    """Pass B's tables of `round_grid_blocks`: for each of the `blocks` blocks
    with `scales`, its 7 thresholds (|v| beyond one: beyond its midpoint, or
    on it where its tie rounds up) as float32 bits and its 8 results (the grid
    values times the scale, exact in float64, or the grid values themselves
    where `write_elements`) rounded to the type of `results`; a loop over the
    blocks per entry (vectorised); entry k of block b at ``k * stride + b``."""
    for k in range(GRID - 1):
        midpoint, up = midpoints[k], tie_up[k]
        entries = thresholds[k * stride:k * stride + blocks]  # (a slice: indices from 0, never negative)
        for block in range(blocks):
            product = midpoint * scales[block]  # exact
            below = bits_to_float64(float64_to_bits(product) - 1)
            entries[block] = _float32_below(below if up else product)
    for k in range(GRID):
        magnitude = magnitudes[k]
        entries = results[k * stride:k * stride + blocks]
        for block in range(blocks):
            entries[block] = magnitude * (1.0 if write_elements else scales[block])


@njit(**NUMBA_OPTIONS)
def _grid_runs(source_row, target_row, start, blocks, thresholds, results, signed_zero):
    """Pass C of `round_grid_blocks` for the `blocks` blocks of RUN elements
    from element `start` of the rows: each a loop of a constant count,
    vectorised whole, which prefetches the elements CHUNK further on (to read
    and to write: pass A of the next chunk then finds them in the caches)."""
    source, target = source_row[start:], target_row[start:]
    for block in range(blocks):
        first = block * RUN  # (never negative: the indices need no check for negative ones)
        prefetch(source, first + CHUNK, False)
        prefetch(target, first + CHUNK, True)
        for a in range(RUN):
            target[first + a] = _grid_entry(source[first + a], thresholds, results, block, signed_zero)


@njit(inline="always", **NUMBA_OPTIONS)
def _grid_element(bits, t0, t1, t2, t3, t4, t5, t6, r0, r1, r2, r3, r4, r5, r6, r7, signed_zero):
    """`round_grid_blocks`' rounding of the float32 `bits` (int32) with its
    block's thresholds ``t`` (float32 bits) and results ``r``: the result of
    the last threshold its magnitude exceeds, with its sign (a zero grid
    value's only where the element keeps it); selects, no branches."""
    magnitude = np.int32(bits & MAGNITUDE_32)
    result = r1 if magnitude > t0 else r0
    result = r2 if magnitude > t1 else result
    result = r3 if magnitude > t2 else result
    result = r4 if magnitude > t3 else result
    result = r5 if magnitude > t4 else result
    result = r6 if magnitude > t5 else result
    result = r7 if magnitude > t6 else result
    keep_sign = magnitude > t0 or signed_zero  # a nonzero grid value (its float32 may still be 0)
    return -result if bits < 0 and keep_sign else result


@njit(inline="always", **NUMBA_OPTIONS)
def _grid_entry(bits, thresholds, results, block, signed_zero):
    """`_grid_element` with `block`'s entries of the tables, each read where
    the element loop uses it: LLVM broadcasts it from memory rather than hold
    fifteen values in registers (spilled, per block)."""
    stride = TABLE_STRIDE
    return _grid_element(bits, thresholds[block], thresholds[stride + block], thresholds[2 * stride + block],
                         thresholds[3 * stride + block], thresholds[4 * stride + block],
                         thresholds[5 * stride + block], thresholds[6 * stride + block],
                         results[block], results[stride + block], results[2 * stride + block],
                         results[3 * stride + block], results[4 * stride + block], results[5 * stride + block],
                         results[6 * stride + block], results[7 * stride + block], signed_zero)


def _grid_signature(target_type):
    return types.void(types.Array(types.int32, 2, "C", readonly=True), types.Array(target_type, 2, "C"),
                      types.Array(types.float64, 2, "C"), FLOAT_PARAMS_TYPE, types.UniTuple(types.int64, 3),
                      types.Array(types.float64, 1, "C", readonly=True),
                      types.Array(types.bool_, 1, "C", readonly=True),
                      types.Array(types.float64, 1, "C", readonly=True), types.int64, types.boolean)


def _division_signature(target_type):
    return types.void(types.Array(types.float32, 2, "C", readonly=True), types.Array(target_type, 2, "C"),
                      types.Array(types.float64, 2, "C"), PARAMS_TYPE, FLOAT_PARAMS_TYPE,
                      types.UniTuple(types.int64, 3), types.int64, types.uint64, types.int64, types.int64,
                      types.boolean)


def _column_signature(signature):
    """`signature` with 3-D data, target and scales (the column kernels')."""
    data, target, scales = signature.args[:3]
    return types.void(data.copy(ndim=3), target.copy(ndim=3), scales.copy(ndim=3), *signature.args[3:])


# by target dtype: float32 (a format's own values), float64 (a tensor scale, or scales times
# elements wider than float32: ScaledFormat.carrier)
GRID_SIGNATURES = {np.dtype(np.float32): _grid_signature(types.float32),
                   np.dtype(np.float64): _grid_signature(types.float64)}
DIVISION_SIGNATURES = {np.dtype(np.float32): _division_signature(types.float32),
                       np.dtype(np.float64): _division_signature(types.float64)}


@functools.cache  # (the dispatcher's compile() costs ~20 us a call)
def grid_kernel(target_dtype, columns=False):
    """`round_grid_blocks` for a `target_dtype` (float32 or float64) result
    (`round_grid_columns` where `columns`)."""
    signature = GRID_SIGNATURES[np.dtype(target_dtype)]
    if columns:
        return compiled(round_grid_columns, _column_signature(signature))
    return compiled(round_grid_blocks, signature)


@njit(inline="always", **NUMBA_OPTIONS)
def _divided_element(value, scale, factor, element_params, random, rand_bits):
    """The general kernel's stochastic rounding of float32 `value` in a block
    with `scale`: ``core.scale.round_element`` of the float64 quotient (its
    straight-line form: no deep elements), times `factor` (the scale,
    exactly, or 1 for the element itself)."""
    value64 = np.float64(value)
    rounded = round_element(value64 / scale, value64, scale, element_params, STOCHASTIC, random, rand_bits, False)
    return rounded * factor  # (rounded once more where the target is float32)


@njit(**NUMBA_OPTIONS)
def round_division_blocks(source, target, scales, element_params, float_params, scale_fields, block_size, key,
                          offset, rand_bits, write_elements):
    """Float32 rows `source` (blocks of `block_size` along them) rounded
    stochastically onto the element format (`element_params`: float64
    carrier, saturating) with significand scales into `target` (float32 or
    float64) and the scales into `scales`: the general kernel's arithmetic
    (the module's docstring).
    Element ``(row, a)`` draws random number ``offset + row * length + a``.
    Where `write_elements` (rp.encode), the elements themselves (0 in a NaN
    block)."""
    rows, length = source.shape
    chunk_blocks = max(CHUNK // block_size, 1)
    maxima = np.empty(chunk_blocks, np.int32)
    multipliers, weyl_step = loop_constants(hidden_zero(rand_bits))
    source_bits = source.view(np.int32)
    for row in range(rows):
        source_row, target_row, scales_row = source[row], target[row], scales[row]
        for first in range(0, length, chunk_blocks * block_size):
            size = min(chunk_blocks * block_size, length - first)
            source_chunk, target_chunk = source_row[first:first + size], target_row[first:first + size]
            blocks, chunk_scales = _chunk_scales(source_bits[row, first:first + size], scales_row, first, block_size,
                                                 maxima, float_params, scale_fields)
            index = offset + row * length + first
            if (index & SEGMENT_MASK) + size > SEGMENT_MASK + 1:
                # random counters crossing a 2**32 segment (once in 2**32 elements): drawn one by one
                for a in range(size):
                    scale = chunk_scales[a // block_size]
                    target_chunk[a] = _divided_element(source_chunk[a], scale, 1.0 if write_elements else scale,
                                                       element_params,
                                                       random_bits(key, index + a), rand_bits)
            else:
                keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
                keyed_high, keyed_low = keyed_weyl(keys, wrapping_mul(np.uint32(index & SEGMENT_MASK), WEYL_32))
                for block in range(blocks):
                    scale = chunk_scales[block]
                    factor = 1.0 if write_elements else scale
                    block_first = block * block_size
                    stop = min(block_first + block_size, size)
                    runs_stop = block_first + (stop - block_first) // RUN * RUN
                    for run_first in range(block_first, runs_stop, RUN):  # vectorised whole
                        source_run = source_chunk[run_first:run_first + RUN]
                        target_run = target_chunk[run_first:run_first + RUN]
                        for a in range(RUN):
                            target_run[a] = _divided_element(source_run[a], scale, factor, element_params,
                                                             keyed_bits(keyed_high, keyed_low, multipliers),
                                                             rand_bits)
                            keyed_high = wrapping_add(keyed_high, weyl_step)
                            keyed_low = wrapping_add(keyed_low, weyl_step)
                    for a in range(runs_stop, stop):
                        target_chunk[a] = _divided_element(source_chunk[a], scale, factor, element_params,
                                                           keyed_bits(keyed_high, keyed_low, multipliers), rand_bits)
                        keyed_high = wrapping_add(keyed_high, weyl_step)
                        keyed_low = wrapping_add(keyed_low, weyl_step)
            _nan_blocks(target_chunk, blocks, block_size, maxima, write_elements)


@functools.cache
def division_kernel(target_dtype, columns=False):
    """`round_division_blocks` for a `target_dtype` (float32 or float64) result
    (`round_division_columns` where `columns`)."""
    signature = DIVISION_SIGNATURES[np.dtype(target_dtype)]
    if columns:
        return compiled(round_division_columns, _column_signature(signature))
    return compiled(round_division_blocks, signature)


# -- blocks along another axis than the last: (outer, length, inner) data, blocks of
# block_size rows of `inner` contiguous elements, one scale per block and inner index.
# The same arithmetic, vectorised over the inner index instead: a block's maxima,
# scales and tables are vectors of `inner` entries, and each of its rows is one loop
# over them (a table entry per lane, loaded rather than broadcast).


@njit(**NUMBA_OPTIONS)
def _column_maxima(source, o, first, stop, maxima):
    """The largest magnitude over rows `first` to `stop` of ``source[o]`` (int32
    float32 bits), for each inner index, into `maxima`."""
    maxima[:] = 0
    for a in range(first, stop):
        row = source[o, a]
        for i in range(row.size):
            maxima[i] = max(maxima[i], np.int32(row[i] & MAGNITUDE_32))


@njit(**NUMBA_OPTIONS)
def _column_nans(target, o, first, stop, maxima, write_elements):
    """Pass D for a block of rows `first` to `stop` of ``target[o]``: NaN (0 for
    `write_elements`) at the inner indices whose block holds NaN or inf."""
    worst = np.int32(0)
    for i in range(maxima.size):
        worst = max(worst, maxima[i])
    if worst < INF_32:
        return
    for a in range(first, stop):
        for i in range(maxima.size):
            if maxima[i] >= INF_32:
                target[o, a, i] = 0.0 if write_elements else np.nan


@njit(**NUMBA_OPTIONS)
def round_grid_columns(source, target, scales, float_params, scale_fields, midpoints, tie_up, magnitudes,
                       block_size, write_elements):
    """`round_grid_blocks` for 3-D data ``(outer, length, inner)`` (int32 float32
    bits) blocked along the middle axis, scales ``(outer, blocks, inner)``."""
    outer, length, inner = source.shape
    signed_zero = scale_fields[2] != 0
    maxima = np.empty(inner, np.int32)
    thresholds = np.empty((GRID - 1) * inner, np.int32)
    results = np.empty(GRID * inner, target.dtype)
    for o in range(outer):
        for block, first in enumerate(range(0, length, block_size)):
            stop = min(first + block_size, length)
            _column_maxima(source, o, first, stop, maxima)
            block_scales = scales[o, block]
            _block_scales(maxima, inner, block_scales, float_params, scale_fields)
            _grid_tables(block_scales, inner, midpoints, tie_up, magnitudes, thresholds, results, write_elements,
                         inner)
            # each entry's row of the tables (slices: indices from 0, never negative)
            t0, t1, t2, t3 = thresholds[:inner], thresholds[inner:2 * inner], thresholds[2 * inner:3 * inner], \
                thresholds[3 * inner:4 * inner]
            t4, t5, t6 = thresholds[4 * inner:5 * inner], thresholds[5 * inner:6 * inner], \
                thresholds[6 * inner:7 * inner]
            r0, r1, r2, r3 = results[:inner], results[inner:2 * inner], results[2 * inner:3 * inner], \
                results[3 * inner:4 * inner]
            r4, r5, r6, r7 = results[4 * inner:5 * inner], results[5 * inner:6 * inner], \
                results[6 * inner:7 * inner], results[7 * inner:8 * inner]
            for a in range(first, stop):
                source_row, target_row = source[o, a], target[o, a]
                for i in range(inner):
                    target_row[i] = _grid_element(source_row[i], t0[i], t1[i], t2[i], t3[i], t4[i], t5[i], t6[i],
                                                  r0[i], r1[i], r2[i], r3[i], r4[i], r5[i], r6[i], r7[i], signed_zero)
            _column_nans(target, o, first, stop, maxima, write_elements)


@njit(**NUMBA_OPTIONS)
def round_division_columns(source, target, scales, element_params, float_params, scale_fields, block_size, key,
                           offset, rand_bits, write_elements):
    """`round_division_blocks` for 3-D float32 data ``(outer, length, inner)``
    blocked along the middle axis, scales ``(outer, blocks, inner)``. Element
    ``(o, a, i)`` draws random number ``offset + (o * length + a) * inner + i``:
    a row's numbers are consecutive (Weyl words stepped along it)."""
    outer, length, inner = source.shape
    maxima = np.empty(inner, np.int32)
    factors = np.empty(inner, np.float64)
    multipliers, weyl_step = loop_constants(hidden_zero(rand_bits))
    source_bits = source.view(np.int32)
    for o in range(outer):
        for block, first in enumerate(range(0, length, block_size)):
            stop = min(first + block_size, length)
            _column_maxima(source_bits, o, first, stop, maxima)
            block_scales = scales[o, block]
            _block_scales(maxima, inner, block_scales, float_params, scale_fields)
            for i in range(inner):
                factors[i] = 1.0 if write_elements else block_scales[i]
            for a in range(first, stop):
                source_row, target_row = source[o, a], target[o, a]
                index = offset + (o * length + a) * inner
                if (index & SEGMENT_MASK) + inner > SEGMENT_MASK + 1:  # crossing a 2**32 segment: one by one
                    for i in range(inner):
                        target_row[i] = _divided_element(source_row[i], block_scales[i], factors[i],
                                                         element_params, random_bits(key, index + i), rand_bits)
                    continue
                keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
                keyed_high, keyed_low = keyed_weyl(keys, wrapping_mul(np.uint32(index & SEGMENT_MASK), WEYL_32))
                for i in range(inner):  # vectorised
                    target_row[i] = _divided_element(source_row[i], block_scales[i], factors[i], element_params,
                                                     keyed_bits(keyed_high, keyed_low, multipliers), rand_bits)
                    keyed_high = wrapping_add(keyed_high, weyl_step)
                    keyed_low = wrapping_add(keyed_low, weyl_step)
            _column_nans(target, o, first, stop, maxima, write_elements)
