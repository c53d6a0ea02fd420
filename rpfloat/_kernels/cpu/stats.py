"""One pass over an input and its rounded result that gathers the counts and the
errors of ``rpfloat.stats`` (``rp.round(..., stats=True)``).

Every element is compared in float64 (a float32 is exactly a float64): its
error is ``|rounded - x|`` rounded once to float64. Nothing branches per element,
so that LLVM vectorizes the loop without fastmath: the counts are integer
reductions, the maxima integer maxima of the errors' bit patterns (errors are
``>= 0`` and never NaN, and such floats order as their bits do), and the sums
run in ``LANES`` separate float64 lanes, one per position in a block of
``LANES`` elements, added up at the end (a float reduction would not vectorize
without reassociating it).
"""
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, float64_to_bits

__all__ = ["gather", "COUNTS", "ERRORS", "LIMITS"]

# what gather writes into `counts`, in this order
COUNTS = ("inexact", "overflowed", "underflowed", "flushed_to_zero", "nan_produced", "error_count",
          "rel_error_count")
# what gather writes into `errors`, in this order
ERRORS = ("sum_abs_error", "max_abs_error", "sum_rel_error", "max_rel_error")
# what gather reads from `limits`, in this order
LIMITS = ("low", "high", "min_normal")
LANES = 256
INF = np.inf


def _signature(input_type, result_type):
    def readonly(dtype):
        return types.Array(dtype, 1, "C", readonly=True)

    return types.void(readonly(input_type), readonly(result_type), readonly(types.float64),
                      types.Array(types.int64, 1, "C"), types.Array(types.float64, 1, "C"))


# (input, result): a result dtype is never narrower than its input's
SIGNATURES = [_signature(types.float32, types.float32), _signature(types.float32, types.float64),
              _signature(types.float64, types.float64)]


@njit(SIGNATURES, **NUMBA_OPTIONS)
def gather(x, rounded, limits, counts, errors):
    """Write the counts (`COUNTS`) and error sums and maxima (`ERRORS`) of `x`
    rounded to `rounded` into `counts` and `errors`.

    `limits` holds ``low`` and ``high`` (a finite x outside ``[low, high]``
    counts as overflowed) and ``min_normal`` (a nonzero finite x whose result's
    magnitude is positive and below it counts as underflowed; 0 counts none).
    The errors cover the elements where x and its result are both finite; the
    relative errors those of them with ``x != 0``. Sums and maxima are 0 where
    nothing is covered.
    """
    low, high, min_normal = limits[0], limits[1], limits[2]
    size = x.size
    lane_sums = np.zeros((2, LANES))
    max_abs_bits = np.int64(0)  # the bits of +0.0
    max_rel_bits = np.int64(0)
    inexact = overflowed = underflowed = flushed_to_zero = nan_produced = np.int64(0)
    error_count = rel_error_count = np.int64(0)
    for start in range(0, size, LANES):
        stop = min(size, start + LANES)
        x_block = x[start:stop]
        rounded_block = rounded[start:stop]
        for lane in range(stop - start):
            value = np.float64(x_block[lane])
            result = np.float64(rounded_block[lane])
            magnitude = abs(value)
            result_magnitude = abs(result)
            is_number = value == value
            finite = magnitude < INF
            both_finite = finite & (result_magnitude < INF)
            nonzero = finite & (magnitude != 0.0)
            has_rel_error = both_finite & nonzero
            abs_error = abs(result - value) if both_finite else 0.0
            quotient = abs_error / magnitude  # error_model="numpy": 0/0 is NaN, not an exception
            rel_error = quotient if has_rel_error else 0.0
            lane_sums[0, lane] += abs_error
            lane_sums[1, lane] += rel_error
            abs_bits = float64_to_bits(abs_error)
            rel_bits = float64_to_bits(rel_error)
            max_abs_bits = abs_bits if abs_bits > max_abs_bits else max_abs_bits
            max_rel_bits = rel_bits if rel_bits > max_rel_bits else max_rel_bits
            inexact += is_number & (result != value)
            overflowed += finite & ((value > high) | (value < low))
            underflowed += nonzero & (result_magnitude > 0.0) & (result_magnitude < min_normal)
            flushed_to_zero += nonzero & (result_magnitude == 0.0)
            nan_produced += is_number & (result != result)
            error_count += both_finite
            rel_error_count += has_rel_error
    counts[0] = inexact
    counts[1] = overflowed
    counts[2] = underflowed
    counts[3] = flushed_to_zero
    counts[4] = nan_produced
    counts[5] = error_count
    counts[6] = rel_error_count
    errors[0] = lane_sums[0].sum()
    errors[1] = bits_to_float64(max_abs_bits)
    errors[2] = lane_sums[1].sum()
    errors[3] = bits_to_float64(max_rel_bits)
