"""One pass over an input and its rounded result that gathers the counts and the
errors of ``rpfloat.stats`` (``rp.round(..., stats=True)``).

Every element is compared in float64 (a float32 is exactly a float64): its
error is ``|rounded - x|`` rounded once to float64, its relative error that
divided by ``|x|``, rounded once. The data go in blocks of ``LANES`` elements.

Most blocks are *ordinary*: every nonzero ``|x|`` lies in ``[x_low, x_high]``
(``bounds``, which the caller chooses inside the format's range and within
``[2**-100, 2**100]``; for an unsigned format, no x is negative either) and
every result is finite. Nothing there overflowed or
became NaN, and every error is covered; zeros, underflows and flushes are
counted element by element. The integer extrema of the magnitudes' bit
patterns and the sums' finiteness tell whether a block was ordinary after its
loop, which has no branch; a block that was not goes through the rules again
element by element (`_gather_block`), and its ordinary loop's numbers are
dropped.

The ordinary loop divides in float32 only: the relative error's share of the
sum is ``error`` times ``1 / |x|`` from a float32 division and one Newton step
in float64 (relative error below ``2**-45``, so the mean relative error is that
close to the exact mean). The largest relative error is exact: a block whose
ordinary loop finds an element with ``error > max_rel * |x|`` (a fused
multiply-add, so exactly) divides again, element by element, and keeps the
largest correctly rounded quotient. Few blocks do, past the first few.

Sums run in float64 with reassociation allowed (``fastmath={"reassoc"}``, on
the sums only: every other operation is a separate function without it), so
that LLVM keeps several partial sums in vector registers: the order is fixed
by the compiled code, so a call always gives the same sums, and they differ
from a left-to-right sum by rounding only.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from numba.extending import overload

from ..core.bits import (
    NUMBA_OPTIONS, bit_and, bits_to_float32, bits_to_float64, float32_to_bits, float64_to_bits, fused_multiply_add,
    wrapping_add,
)

__all__ = ["gather", "COUNTS", "ERRORS", "LIMITS", "BOUNDS", "LANES"]

# what gather adds to `counts`, in this order
COUNTS = ("inexact", "overflowed", "underflowed", "flushed_to_zero", "nan_produced", "error_count",
          "rel_error_count")
# what gather adds to (sums) or raises to (maxima) in `errors`, in this order
ERRORS = ("sum_abs_error", "max_abs_error", "sum_rel_error", "max_rel_error")
# what gather reads from `limits`, in this order
LIMITS = ("low", "high", "min_normal")
# what gather reads from `bounds` (bit patterns of magnitudes), in this order
BOUNDS = ("x_low", "x_high", "min_normal", "narrow_low", "narrow_high", "nonnegative")
LANES = 1024
INF = np.inf
_OPTIONS = dict(NUMBA_OPTIONS, fastmath={"reassoc", "contract"})


@intrinsic
def magnitude_bits(typingctx, value):
    """The bits of ``|value|`` (float32 or float64) as a signed integer of its
    width; they order as the magnitudes do, NaN above infinity."""
    if value not in (types.float32, types.float64):
        return None
    integer = types.int32 if value == types.float32 else types.int64

    def codegen(context, builder, signature, args):
        bits = builder.bitcast(args[0], context.get_value_type(integer))
        mask = ir.Constant(bits.type, (1 << (value.bitwidth - 1)) - 1)
        return builder.and_(bits, mask)

    return integer(value), codegen


@intrinsic
def wrapping_sub(typingctx, left, right):
    """``left - right`` of two integers of one width, in that width, wrapping."""
    if not isinstance(left, types.Integer) or left != right:
        return None

    def codegen(context, builder, signature, args):
        return builder.sub(args[0], args[1])

    return left(left, right), codegen


@intrinsic
def unsigned(typingctx, value):
    """A signed int32 or int64 as the unsigned integer of its bits."""
    if value not in (types.int32, types.int64):
        return None
    target = types.uint32 if value == types.int32 else types.uint64

    def codegen(context, builder, signature, args):
        return args[0]

    return target(value), codegen


@intrinsic
def less_one(typingctx, value, like):
    """``value - 1`` (an int64) in the width of `like` (int32 or int64), wrapping."""
    if like not in (types.int32, types.int64) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        narrow = context.cast(builder, args[0], value, like)
        return builder.sub(narrow, ir.Constant(narrow.type, 1))

    return like(value, like), codegen


@njit(**dict(NUMBA_OPTIONS, fastmath={"contract"}))
def reciprocal(magnitude, wide):
    """``1 / wide`` within ``2**-45`` relatively, where `wide` is the float64 of
    `magnitude` (float32 or float64) in ``[2**-100, 2**100]``: a float32 division
    and one Newton step."""
    estimate = np.float64(np.float32(1.0) / np.float32(magnitude))
    return estimate + estimate * (1.0 - wide * estimate)


@njit(**NUMBA_OPTIONS)
def larger_quotient(error, magnitude, largest):
    """``error / magnitude`` where it is larger than `largest`, else `largest`."""
    quotient = error / magnitude
    return quotient if quotient > largest else largest


@njit(**NUMBA_OPTIONS)
def beyond(error, magnitude, largest):
    """The bits of ``error - largest * magnitude`` rounded once: positive exactly
    where ``error / magnitude > largest``."""
    return float64_to_bits(fused_multiply_add(-largest, magnitude, error))


@njit(**NUMBA_OPTIONS)
def absolute_error(value, result):
    return abs(result - value)


@njit(**NUMBA_OPTIONS)
def negatives(x):
    """How many numbers of `x` are below zero (``-0`` and NaN are not)."""
    count = np.int32(0)
    for lane in range(x.size):
        count = wrapping_add(count, np.int32(x[lane] < 0))
    return count


@njit(**NUMBA_OPTIONS)
def _gather_block(x, rounded, limits, counts):
    """Add the counts of a block of any numbers to `counts`; return its error
    sums and maxima, as `ERRORS` orders them. Element by element: the rules."""
    low, high, min_normal = limits[0], limits[1], limits[2]
    sum_abs = sum_rel = max_abs = max_rel = 0.0
    for lane in range(x.size):
        value = np.float64(x[lane])
        result = np.float64(rounded[lane])
        magnitude = abs(value)
        result_magnitude = abs(result)
        is_number = value == value
        finite = magnitude < INF
        nonzero = finite & (magnitude != 0.0)
        both_finite = finite & (result_magnitude < INF)
        counts[0] += is_number & (result != value)
        counts[1] += finite & ((value > high) | (value < low))
        counts[2] += nonzero & (result_magnitude > 0.0) & (result_magnitude < min_normal)
        counts[3] += nonzero & (result_magnitude == 0.0)
        counts[4] += is_number & (result != result)
        if both_finite:
            error = abs(result - value)
            counts[5] += 1
            sum_abs += error
            max_abs = max(max_abs, error)
            if nonzero:
                quotient = error / magnitude
                counts[6] += 1
                sum_rel += quotient
                max_rel = max(max_rel, quotient)
    return sum_abs, max_abs, sum_rel, max_rel


@njit(**NUMBA_OPTIONS)
def _add_rules(x, rounded, limits, counts, sum_abs, sum_rel, max_abs, max_rel):
    """The sums and maxima so far with a block taken by the rules (`_gather_block`)
    added: ``(sum_abs, sum_rel, max_abs, max_rel)``."""
    sums = _gather_block(x, rounded, limits, counts)
    return sum_abs + sums[0], sum_rel + sums[2], max(max_abs, sums[1]), max(max_rel, sums[3])


# float32 bits of the narrow blocks' loop (`narrow_block`)
MAGNITUDE_32 = np.int32(0x7FFFFFFF)
ZERO_32 = np.int32(0)
ONE_32 = np.int32(1)
HALF_BINADE_32 = np.int32(1 << 23)  # |x| and 2|x| (or |x| / 2) lie this far apart in bits
BINADE_32 = np.uint32(1 << 24)
# a block's largest float32 quotient, widened, times this is at least its largest
# correctly rounded quotient (the float32 one lies within 2**-22 of it)
QUOTIENT_MARGIN = 1.0 + 2.0**-20
# after FAILS blocks in a row that were not narrow (specials, tiny values that
# stochastic rounding steps up: data that may hold them throughout), the next
# SKIP blocks go to the ordinary loop alone
FAILS = 2
SKIP = 8


def narrow_block(x, rounded, bounds, error_buffer, quotient_buffer):
    """A block of float32 numbers and their float32 results in one loop of
    32-bit lanes (the module's narrow blocks). Returns ``(narrow, inexact,
    underflowed, flushed, zeros, largest_error, largest_quotient, correction)``:
    whether the block was narrow (else the rest means nothing), its counts (x
    that are zeros among them), the bits of its largest error and of its largest
    float32 quotient (zeros and flushed elements left out), and the float32 sum
    of the quotients' corrections; its errors and float32 quotients (0 for a
    zero x) go to `error_buffer` and `quotient_buffer`. Other dtypes: never
    narrow."""
    raise NotImplementedError("narrow_block runs inside numba kernels only")


@overload(narrow_block, jit_options=_OPTIONS)
def _narrow_block(x, rounded, bounds, error_buffer, quotient_buffer):
    if x.dtype == types.float32 and rounded.dtype == types.float32:
        return _narrow_float32
    zero_bits = np.int32(0)
    zero = np.float32(0.0)

    def never(x, rounded, bounds, error_buffer, quotient_buffer):
        return False, 0, 0, 0, 0, zero_bits, zero_bits, zero
    return never


def _narrow_float32(x, rounded, bounds, error_buffer, quotient_buffer):
    low, high, min_normal = np.int32(bounds[3]), np.int32(bounds[4]), np.int32(bounds[2])
    size = x.size
    smallest, largest = np.uint32(0xFFFFFFFF), ZERO_32
    smallest_result = smallest_error = MAGNITUDE_32
    widest = np.uint32(0)
    largest_error = largest_quotient = ZERO_32
    correction = np.float32(0.0)
    for lane in range(size):
        value = x[lane]
        result = rounded[lane]
        x_bits = float32_to_bits(value)
        result_bits = float32_to_bits(result)
        x_magnitude = bit_and(x_bits, MAGNITUDE_32)
        result_magnitude = bit_and(result_bits, MAGNITUDE_32)
        smallest = min(smallest, unsigned(wrapping_sub(x_magnitude, ONE_32)))  # 0 wraps: the least nonzero
        largest = max(largest, x_magnitude)
        smallest_result = min(smallest_result, result_magnitude)
        is_zero = result_magnitude == ZERO_32  # flushed, or x itself a zero
        # within [|x| / 2, 2|x|], of x's sign (Sterbenz: result - value is exact), or a zero
        step = unsigned(wrapping_add(wrapping_sub(result_bits, x_bits), HALF_BINADE_32))
        widest = max(widest, np.uint32(0) if is_zero else step)
        error = abs(result - value)
        error_bits = float32_to_bits(error)
        smallest_error = min(smallest_error, error_bits)  # 0: an exact result (zeros among them)
        largest_error = max(largest_error, error_bits)
        magnitude = bits_to_float32(max(x_magnitude, low))  # |x|; for a zero x, whose error is 0, low
        inverse = np.float32(1.0) / magnitude
        quotient = error * inverse
        # the quotient's remainder, exact, over |x|: error / |x| = quotient + that, within 2**-45
        correction += fused_multiply_add(-quotient, magnitude, error) * inverse
        largest_quotient = max(largest_quotient, ZERO_32 if is_zero else float32_to_bits(quotient))
        error_buffer[lane] = error
        quotient_buffer[lane] = quotient
    narrow = (smallest >= unsigned(wrapping_sub(low, ONE_32))) & (largest <= high) & (widest <= BINADE_32)
    inexact, below, zero_results, zeros = size, ZERO_32, ZERO_32, ZERO_32
    # exact results (zeros among them), results below min_normal: counted where the
    # block has them, each in a loop of its own (blocks without them need no counts)
    if narrow and smallest_error == ZERO_32:
        equal = ZERO_32
        for lane in range(size):
            equal = wrapping_add(equal, np.int32(x[lane] == rounded[lane]))  # -0 and +0 alike
            zeros = wrapping_add(zeros, np.int32(bit_and(float32_to_bits(x[lane]), MAGNITUDE_32) == ZERO_32))
        inexact = size - equal
    if narrow and smallest_result < min_normal:
        for lane in range(size):
            result_magnitude = bit_and(float32_to_bits(rounded[lane]), MAGNITUDE_32)
            below = wrapping_add(below, np.int32(result_magnitude < min_normal))
            zero_results = wrapping_add(zero_results, np.int32(result_magnitude == ZERO_32))
    return (narrow, inexact, below - zero_results, zero_results - zeros, zeros, largest_error, largest_quotient,
            correction)



def _signature(input_type, result_type):
    def readonly(dtype):
        return types.Array(dtype, 1, "C", readonly=True)

    return types.void(readonly(input_type), readonly(result_type), readonly(types.float64), readonly(types.int64),
                      types.Array(types.int64, 1, "C"), types.Array(types.float64, 1, "C"))


# (input, result): a result dtype is never narrower than its input's
SIGNATURES = [_signature(types.float32, types.float32), _signature(types.float32, types.float64),
              _signature(types.float64, types.float64)]


@njit(SIGNATURES, **_OPTIONS)
def gather(x, rounded, limits, bounds, counts, errors):
    """Add the counts (`COUNTS`) and error sums of `x` rounded to `rounded` to
    `counts` and ``errors[0::2]``, and raise the maxima ``errors[1::2]`` to the
    largest errors (so a call goes on from where another left off; start from
    zeros).

    `limits` holds ``low`` and ``high`` (a finite x outside ``[low, high]``
    counts as overflowed) and ``min_normal`` (a nonzero finite x whose result's
    magnitude is positive and below it counts as underflowed; 0 counts none).
    `bounds` holds the bits (as ``magnitude_bits`` gives them) of the smallest
    and largest nonzero ``|x|`` of an ordinary block (see the module), of
    ``min_normal`` rounded up to the result dtype (1 where it is 0), and of
    those of a narrow block; then 1 where those magnitudes are in range for
    ``x >= 0`` only (unsigned formats: a block with a negative x takes the
    element rules), else 0.
    The errors cover the elements where x and its result are both finite; the
    relative errors those of them with ``x != 0``.
    """
    size = x.size
    x_low, x_high, min_normal_bits = bounds[0], bounds[1], bounds[2]
    nonnegative = bounds[5] != 0  # the bounds hold for x >= 0 only: a block with a negative x takes the rules
    counted = np.zeros(7, np.int64)
    max_abs = errors[1]
    max_rel = errors[3]
    sum_abs = 0.0
    sum_rel = 0.0
    error_buffer = np.empty(LANES, np.float32)
    quotient_buffer = np.empty(LANES, np.float32)
    skipped = 0  # blocks left to give to the ordinary loop alone
    failed = 0  # blocks in a row that were not narrow
    for start in range(0, size, LANES):
        stop = min(size, start + LANES)
        x_block = x[start:stop]
        rounded_block = rounded[start:stop]
        if nonnegative and negatives(x_block) > 0:
            sum_abs, sum_rel, max_abs, max_rel = _add_rules(x_block, rounded_block, limits, counted, sum_abs,
                                                             sum_rel, max_abs, max_rel)
            continue
        # a narrow block first (float32 only); the ordinary loop where it was not
        if skipped > 0:
            skipped -= 1
        else:
            narrow_result = narrow_block(x_block, rounded_block, bounds, error_buffer, quotient_buffer)
            narrow, narrow_inexact, narrow_underflowed, narrow_flushed, narrow_zeros = narrow_result[:5]
            error_bits, quotient_bits, correction = narrow_result[5:]
            if narrow:
                block_abs = 0.0
                block_rel = 0.0
                for lane in range(stop - start):
                    block_abs += np.float64(error_buffer[lane])
                    block_rel += np.float64(quotient_buffer[lane])
                counted[0] += narrow_inexact
                counted[2] += narrow_underflowed
                counted[3] += narrow_flushed
                counted[5] += stop - start
                counted[6] += stop - start - narrow_zeros
                sum_abs += block_abs
                sum_rel += block_rel + np.float64(correction)
                max_abs = max(max_abs, np.float64(bits_to_float32(error_bits)))
                if narrow_flushed > 0:
                    max_rel = max(max_rel, 1.0)  # |0 - x| / |x|, exactly
                if np.float64(bits_to_float32(quotient_bits)) * QUOTIENT_MARGIN >= max_rel:
                    for lane in range(stop - start):
                        magnitude = abs(np.float64(x_block[lane]))
                        if magnitude != 0.0:
                            max_rel = larger_quotient(np.float64(error_buffer[lane]), magnitude, max_rel)
                failed = 0
                continue
            failed += 1
            if failed == FAILS:
                skipped, failed = SKIP, 0
        largest_x = magnitude_bits(x_block[0])
        smallest_x = unsigned(less_one(0, largest_x))  # the largest unsigned number
        zeros = underflowed = flushed = inexact = np.int32(0)
        block_abs = 0.0
        block_rel = 0.0
        max_abs_bits = np.int64(0)  # the bits of +0.0
        candidate = np.int64(0)
        for lane in range(stop - start):
            value = x_block[lane]
            result = rounded_block[lane]
            x_bits = magnitude_bits(value)
            result_bits = magnitude_bits(result)
            largest_x = max(largest_x, x_bits)
            smallest_x = min(smallest_x, unsigned(less_one(x_bits, x_bits)))  # 0 wraps to the largest: the smallest nonzero
            is_zero = x_bits == 0
            zeros = wrapping_add(zeros, np.int32(is_zero))
            underflowed = wrapping_add(underflowed, np.int32(unsigned(less_one(result_bits, result_bits)) < unsigned(less_one(min_normal_bits, result_bits))))
            flushed = wrapping_add(flushed, np.int32((result_bits == 0) & ~is_zero))
            inexact = wrapping_add(inexact, np.int32(result != value))
            wide = np.float64(value)
            magnitude = abs(wide)
            error = absolute_error(wide, np.float64(result))
            block_abs += error
            rel_error = error * reciprocal(abs(value), magnitude)
            block_rel += 0.0 if is_zero else rel_error
            max_abs_bits = max(max_abs_bits, float64_to_bits(error))
            candidate = max(candidate, beyond(error, magnitude, max_rel))
        # a NaN or infinite result made block_abs NaN or infinite
        ordinary = (smallest_x >= unsigned(less_one(x_low, largest_x))) & (largest_x <= x_high) & (block_abs + block_rel < INF)
        if not ordinary:
            sum_abs, sum_rel, max_abs, max_rel = _add_rules(x_block, rounded_block, limits, counted, sum_abs,
                                                             sum_rel, max_abs, max_rel)
            continue
        counted[0] += inexact
        counted[2] += underflowed
        counted[3] += flushed
        counted[5] += stop - start
        counted[6] += stop - start - zeros
        sum_abs += block_abs
        sum_rel += block_rel
        max_abs = max(max_abs, bits_to_float64(max_abs_bits))
        if candidate > 0:
            for lane in range(stop - start):
                wide = np.float64(x_block[lane])
                if wide != 0.0:
                    error = absolute_error(wide, np.float64(rounded_block[lane]))
                    max_rel = larger_quotient(error, abs(wide), max_rel)
    for index in range(7):
        counts[index] += counted[index]
    errors[0] += sum_abs
    errors[1] = max_abs
    errors[2] += sum_rel
    errors[3] = max_rel
