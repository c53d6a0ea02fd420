"""Scaled formats with significand scales (NVFP4: E2M1 elements in blocks of 16,
E4M3 scales) on the CPU, for float32 data blocked along the last axis and
elements with a small grid: the grid kernel, which gives the general block
kernel's bits (``blocks.round_blocks``) without dividing by the scale."""
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits
from ..core.scale import F_ELEMENT_MAX, F_SCALE_MAX, F_SCALE_MIN, F_TENSOR_SCALE
from .blocks import FLOAT_PARAMS_TYPE, INF_32, MAGNITUDE_32, power_of_two

# -- significand scales (NVFP4), nearest, elements with a small grid --
#
# The general kernel divides v by the block scale X (not a power of two: the
# quotient is rounded) and rounds the quotient. The quotient lies on the same
# side of each midpoint of the element's grid as the exact v / X, and on a
# midpoint only where v / X is one (v has 24 significant bits and X at most 28:
# an exact v / X off a midpoint m differs from it by at least 2**-32 of m, far
# more than the quotient's rounding), so comparing |v| with the products m * X
# (exact in float64) decides as the general kernel does: the element code is
# the count of midpoints below |v|, and of those equal to it whose tie rounds
# up. The scale is the general kernel's too: ``largest / (element max * g)``
# (one float64 rounding) rounded to nearest even on the scale format's grid by
# `rint` in its binade (at least its least normal exponent: formats with
# subnormals), saturated at its max and at least its least value.

GRID = 8  # element magnitudes (GRID - 1 midpoints); unused ones: +inf midpoints
TWO_52 = 2.0**52
GRID_RUN = 16  # elements rounded by a loop of a constant count


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


@njit(**NUMBA_OPTIONS)
def _threshold(midpoint, scale, up):
    """``midpoint * scale`` (exact), or where a tie rounds up the float64 just
    below it: ``|v| > threshold`` then counts a tie as above."""
    product = midpoint * scale
    return bits_to_float64(float64_to_bits(product) - 1) if up else product


@njit(**NUMBA_OPTIONS)
def round_grid_blocks(source, target, scales, float_params, scale_fields, midpoints, tie_up, magnitudes,
                      block_size):
    """Float32 rows `source` (blocks of `block_size` along them) rounded to
    nearest onto an element grid of at most GRID magnitudes (`magnitudes`,
    with `midpoints` between them and whether a tie at each rounds up,
    `tie_up`) with significand scales into `target` and the scales into
    `scales` (NaN for a block holding NaN or inf): the comment above. Row by
    row: every block's largest magnitude, then every scale (one loop), then
    the elements, a block at a time in runs of GRID_RUN (loops of a constant
    count, vectorised whole). The rounded magnitude is the sum of the grid's
    steps (times the scale: exact) at the thresholds below |v|: no table, no
    branch. `scale_fields`: the scale format's fraction bits, least normal
    exponent and whether the element keeps the sign of a zero result."""
    rows, length = source.shape
    man_bits, min_exponent, signed_zero = scale_fields
    m0, m1, m2, m3, m4, m5, m6 = midpoints[0], midpoints[1], midpoints[2], midpoints[3], midpoints[4], \
        midpoints[5], midpoints[6]
    u0, u1, u2, u3, u4, u5, u6 = tie_up[0], tie_up[1], tie_up[2], tie_up[3], tie_up[4], tie_up[5], tie_up[6]
    g0, g1, g2, g3, g4, g5, g6 = (magnitudes[1] - magnitudes[0], magnitudes[2] - magnitudes[1],
                                  magnitudes[3] - magnitudes[2], magnitudes[4] - magnitudes[3],
                                  magnitudes[5] - magnitudes[4], magnitudes[6] - magnitudes[5],
                                  magnitudes[7] - magnitudes[6])
    base = magnitudes[0]
    maxima = np.empty(-(-length // block_size), np.int32)
    for row in range(rows):
        source_row, target_row, scales_row = source[row], target[row], scales[row]
        blocks = -(-length // block_size)
        # each block's largest magnitude (its bits: NaN and inf at least INF_32), then
        # every scale in one loop (vectorised: the divisions overlap)
        for block in range(blocks):
            first = block * block_size
            beyond = np.int32(0)
            if block_size == GRID_RUN and first + GRID_RUN <= length:
                source_run = source_row[first:first + GRID_RUN]
                for a in range(GRID_RUN):  # a loop of a constant count: one vector reduction
                    beyond = max(beyond, np.int32(float32_to_bits(source_run[a]) & MAGNITUDE_32))
            else:
                for a in range(first, min(first + block_size, length)):
                    beyond = max(beyond, np.int32(float32_to_bits(source_row[a]) & MAGNITUDE_32))
            maxima[block] = beyond
        for block in range(blocks):
            beyond = maxima[block]
            scale = _nearest_scale(np.float64(bits_to_float32(min(beyond, INF_32))), float_params, man_bits,
                                   min_exponent)
            scales_row[block] = np.nan if beyond >= INF_32 else scale
        for block in range(blocks):
            first = block * block_size
            stop = min(first + block_size, length)
            scale = scales_row[block]
            if maxima[block] >= INF_32:
                for a in range(first, stop):
                    target_row[a] = np.nan
                continue
            t0, t1, t2, t3 = _threshold(m0, scale, u0), _threshold(m1, scale, u1), _threshold(m2, scale, u2), \
                _threshold(m3, scale, u3)
            t4, t5, t6 = _threshold(m4, scale, u4), _threshold(m5, scale, u5), _threshold(m6, scale, u6)
            s0, s1, s2, s3, s4, s5, s6 = g0 * scale, g1 * scale, g2 * scale, g3 * scale, g4 * scale, g5 * scale, \
                g6 * scale
            start = base * scale
            thresholds = (t0, t1, t2, t3, t4, t5, t6)
            steps = (s0, s1, s2, s3, s4, s5, s6)
            runs_stop = first + (stop - first) // GRID_RUN * GRID_RUN
            for run_first in range(first, runs_stop, GRID_RUN):  # a loop of a constant count: vectorised whole
                source_run = source_row[run_first:run_first + GRID_RUN]
                target_run = target_row[run_first:run_first + GRID_RUN]
                for a in range(GRID_RUN):
                    target_run[a] = _grid_element(source_run[a], start, thresholds, steps, signed_zero)
            for a in range(runs_stop, stop):
                target_row[a] = _grid_element(source_row[a], start, thresholds, steps, signed_zero)


@njit(inline="always", **NUMBA_OPTIONS)
def _grid_element(value, start, thresholds, steps, signed_zero):
    """`round_grid_blocks`' rounding of the float32 `value`: its magnitude's
    steps summed, then its sign (a zero result's where the element keeps
    it), without branches."""
    magnitude = abs(np.float64(value))
    t0, t1, t2, t3, t4, t5, t6 = thresholds
    s0, s1, s2, s3, s4, s5, s6 = steps
    # (every partial sum is a grid value times the scale: exact in any order, so a tree)
    rounded = ((start + (s0 if magnitude > t0 else 0.0)) + ((s1 if magnitude > t1 else 0.0)
                                                            + (s2 if magnitude > t2 else 0.0))) + (
        ((s3 if magnitude > t3 else 0.0) + (s4 if magnitude > t4 else 0.0))
        + ((s5 if magnitude > t5 else 0.0) + (s6 if magnitude > t6 else 0.0)))
    negative = np.int64(float32_to_bits(value) < 0) & (np.int64(rounded != 0.0) | signed_zero)
    return np.float32(bits_to_float64(float64_to_bits(rounded) | (negative << 63)))


GRID_SIGNATURE = types.void(types.Array(types.float32, 2, "C", readonly=True), types.Array(types.float32, 2, "C"),
                            types.Array(types.float64, 2, "C"), FLOAT_PARAMS_TYPE, types.UniTuple(types.int64, 3),
                            types.Array(types.float64, 1, "C", readonly=True),
                            types.Array(types.bool_, 1, "C", readonly=True),
                            types.Array(types.float64, 1, "C", readonly=True), types.int64)


def grid_kernel():
    """The compiled entry point of `round_grid_blocks` (compiled, or loaded from
    numba's cache, on first use)."""
    round_grid_blocks.compile(GRID_SIGNATURE)
    return round_grid_blocks.overloads[GRID_SIGNATURE.args].entry_point
