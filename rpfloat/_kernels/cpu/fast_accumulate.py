"""Rounded accumulation, vectorised over outputs: the common case of ``rp.matmul``,
``rp.dot`` and ``rp.sum`` at a useful speed.

``accumulate.accumulate`` rounds the steps of one output after another's; this
kernel gives the same bits, in the same order of additions per output, with the
loops turned so that the innermost one runs over independent outputs:

* for a tile of ``TILE`` columns of the result and one row ``i`` of it, the
  ``TILE`` accumulators advance together: for each ``k`` one loop over the tile
  rounds every product ``a[i, k] * b[k, j]`` onto the product format, adds it to
  its accumulator and rounds the sum. Every row of ``a`` passes over the same
  column tile of ``b``.
* Lanes round branch-free, with the mode and the variant as constants of the
  kernel, so that LLVM vectorises the loop: nearest onto formats whose every
  spacing is a float64 normal by adding a power of two (``fast_nearest_float``),
  other modes onto floating-point formats by one bias and mask for normal
  magnitudes (`_round_uniform`), and anything else with a fast range by
  ``core.fast_element.fast_round_bits``. Stochastic lanes draw their random numbers in
  32-bit loops of their own, from per-lane keys drawn once per row of a tile.
* Each lane's range keys are reduced (least and greatest over the loop) and its
  float64 residual or-ed, so the loop has no branch; after it one test says
  whether every lane was served: no overflow, infinity, NaN or magnitude below
  the variant's range (zeros are in range), and no inexact float64 sum that the
  rounding would see. For the deterministic modes an inexact sum ``fl(z)`` only
  matters where it lands on what the mode decides on (a midpoint of the grid for
  nearest, a value of it otherwise), as no format value or midpoint lies strictly
  between z and fl(z); with nearest, products rounded onto a format contained in
  the accumulator's and ``53 >= 2p + 2`` (Figueroa), the float64 sum needs no
  residual at all.
* Nearest onto floating-point formats often needs no range key at all: where
  the extremes of ``|a|`` and ``|b|`` show that every product lies in the
  product format's normal range and every sum within a bound of the
  accumulator's and on a grid no finer than its min_normal (`_plain_rounding`),
  the lanes add a power of two of the value's own sign and exponent, with no
  clamp, no key and no residual (PLAIN; PLAIN_NONZERO without the sign fix of
  a -0 where no operand is zero): 11 vector instructions per 4 lanes instead of 19.
* A row of a tile with a lane that was not served (or whose random counters
  straddle a 2**32 segment of the stream) is marked and left; a second kernel,
  compiled only when first needed, redoes those rows from their first term with
  the exact rounding of ``accumulate.round_exact`` wherever the fast path does
  not serve a lane.

The pairwise order runs the same way: every output enters term k and merges
with the levels of its stack at the same steps (one merge per trailing 1 bit of
k, then the levels left at the end, smallest first), so each entry and each
merge is one loop over the tile; merges add two accumulator values, whose float64
sum needs no residual for nearest where ``53 >= 2p + 2``.

It serves both orders with products that float64 holds exactly (the caller
checks), kinds SUM, PRODUCT and FUSED (with exact products a fused multiply-add
is the sum of the exact product), and formats without the rounding kernel's rare
paths whose fast range is not empty (`serves`); every other case (Kahan's order,
``block_k``) takes the general kernels. Random counters are the general kernel's
(``accumulate``'s module docstring): lane ``j`` of row ``r`` is output ``o =
first_output + r * cols + j``.

Rows are independent, so `run` hands ranges of rows to threads; each kernel
call releases the GIL. Kernels are closures over numbers only: numba's cache key
of a closure hashes its cells, and a function in a cell pickles differently in
every process (each process would compile the kernel again).
"""
from __future__ import annotations

import concurrent.futures
import threading

import numba
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, float64_to_bits
from ..core.element import directed_bias
from ..core.fast_element import checked_magnitude, fast_bounds, fast_round_bits
from ..core.layout import (
    ALL_MODES, NEAREST, NEAREST_AWAY, ODD, P_BELOW_QUANTUM_BITS, P_CARRIER_MAN_BITS, P_FAST_DROP_MIN,
    P_FAST_DROP_OFFSET, P_FAST_HIGH_BITS, P_MAN_BITS, P_MAX_NEG_BITS, P_MAX_POS_BITS, P_MIN_NORMAL_BITS,
    P_NO_NEGATIVE_ZERO, P_WORD_BITS, PARAMS_TYPE, STOCHASTIC, STOCHASTIC_EQUAL,
)
from ..core.bits import wrapping_add, wrapping_mul
from ..core.stream import (
    MULTIPLIERS, WEYL_32, joined, keyed_weyl, mix_high, mix_low, random_bits, segment_keys, top_bits_mask_64,
)
from .accumulate import MIDPOINTS_TYPE, PRODUCT, popcount, round_exact, round_value, two_sum
from .environment import KEEPS_SUBNORMALS, ROUNDS_TO_NEAREST, environment
from .fast_nearest_float import nearest_by_adding
from .table import nearest_by_adding as nearest_by_adding_serves

__all__ = ["TILE", "run", "serves", "compiled_kernels"]

# Columns of the result that advance together. Each step k has a fixed cost (the
# range test, the random keys, the loop's setup), so long rows pay: 512 x 512
# bfloat16 nearest took 0.95 / 0.59 / 0.50 / 0.49 ns per multiply-add with tiles of
# 32 / 128 / 512 / 1024 columns (one core, 2 MiB L2; the tile of b is then read
# from L3 for n above ~256), 2048 no better. A row of partial results stays in L1.
TILE = 1024
# Below this many multiply-adds one thread is faster than waking the pool's.
PARALLEL_THRESHOLD = 1 << 22
# Row ranges per thread, taken in turn (`_on_threads`).
CHUNKS_PER_THREAD = 8
# How the lanes round (the kernel's fast path): ``core.fast_element.fast_round_bits``
# (any format with a fast range), by adding a power of two (nearest), or by one
# bias and mask for the format's normal magnitudes (`_round_uniform`); PLAIN and
# PLAIN_NONZERO add a power of two without any range key, where the operands'
# extremes show that no product or sum leaves the formats' normal range
# (`_plain_rounding`), PLAIN_NONZERO where no product is zero either.
BITS, ADDING, UNIFORM, PLAIN, PLAIN_NONZERO = range(5)

MOST = np.int64(0x7FFFFFFFFFFFFFFF)
ABS_MASK = MOST
SIGN_BIT = np.int64(-0x8000000000000000)
SIGN_EXPONENT = np.int64(-0x0010000000000000)  # the sign and exponent fields of a float64
FLOAT64_MIN_NORMAL_BITS = 1 << 52
U64_32 = np.uint64(32)
U64_63 = np.uint64(63)
LOW_32 = np.int64(0xFFFFFFFF)
NEAREST_ENVIRONMENT = ROUNDS_TO_NEAREST | KEEPS_SUBNORMALS

_READ3 = types.Array(types.float64, 3, "C", readonly=True)
_SIGNATURE = types.void(_READ3, _READ3, types.Array(types.float64, 3, "C"), types.Array(types.uint8, 2, "C"),
                        PARAMS_TYPE, PARAMS_TYPE, MIDPOINTS_TYPE, types.uint64, types.int64, types.int64, types.int64,
                        types.boolean, types.int64, types.int64)
RUNTIME = -1  # a kernel constant given at run time instead (the exact kernel's mode and kind)
_pool = None
_pool_lock = threading.Lock()


def run(a, b, out, product_params, acc_params, acc_midpoints, mode, kind, key, rand_bits, first_output=0,
        pairwise=False):
    """``out[g, i, j]``: the rounded reduction of ``a[g, i, :] * b[g, :, j]`` in
    sequential or `pairwise` order (arrays as for ``accumulate.accumulate``), on
    numba's thread count where the product is large. The caller has checked that
    this kernel serves the case (`serves`).

    `first_output`: the output index of ``out[0, 0, 0]`` in a larger whole (its
    random counters), 0 for a whole product."""
    mode = int(mode)
    rounding = _lane_rounding(product_params, acc_params, mode)
    plain_sums = rounding == ADDING and kind == PRODUCT and _sums_round_once(product_params, acc_params)
    # pairwise merges add two accumulator values: double rounding to nearest is harmless where 53 >= 2p + 2
    plain_merges = rounding == ADDING and 2 * (acc_params[P_MAN_BITS] + 1) + 2 <= 53
    pairwise = bool(pairwise)
    groups, rows, n = a.shape
    if rounding == ADDING and kind == PRODUCT:
        rounding = _plain_rounding(a, b, product_params, acc_params, n)
    total_rows = groups * rows
    pending = np.zeros((total_rows, -(-out.shape[2] // TILE)), dtype=np.uint8)
    arguments = (a, b, out, pending, product_params, acc_params, acc_midpoints, np.uint64(key), int(rand_bits),
                 int(first_output), mode, kind == PRODUCT)
    threads = 1 if total_rows * n * out.shape[2] < PARALLEL_THRESHOLD else min(numba.get_num_threads(), total_rows)
    fast = _kernel(mode, int(kind == PRODUCT), rounding, plain_sums and not pairwise, False, pairwise,
                   plain_merges and pairwise)
    _on_threads(fast, arguments, total_rows, threads)
    if pending.any():  # rare: some outputs need an exact rounding on the way, from their first term
        # (every variant gives the same bits: one exact kernel per order, mode and kind given at run time)
        _on_threads(_kernel(RUNTIME, RUNTIME, BITS, False, True, pairwise, False), arguments, total_rows, threads)


def serves(product_params, acc_params, kind, pairwise, exact_products, product_general, acc_general):
    """Whether `run` serves this reduction (else ``accumulate.accumulate`` does):
    products exact in float64, no rare path of the rounding kernel, and a fast
    range in both formats (either order)."""
    return (exact_products and not product_general and not acc_general
            and all(params[P_FAST_DROP_MIN] >= 0 and _has_fast_range(params) for params in (product_params, acc_params)))


def _has_fast_range(params):
    return params[P_FAST_HIGH_BITS] > 0


def _lane_rounding(product_params, acc_params, mode):
    """BITS, ADDING or UNIFORM for these formats and mode."""
    if (mode == NEAREST and nearest_by_adding_serves(product_params) and nearest_by_adding_serves(acc_params)
            and environment() & NEAREST_ENVIRONMENT == NEAREST_ENVIRONMENT):
        return ADDING
    if _uniform_serves(product_params) and _uniform_serves(acc_params):
        return UNIFORM
    return BITS


def _plain_rounding(a, b, product_params, acc_params, n):
    """PLAIN or PLAIN_NONZERO where the extremes of ``|a|`` and ``|b|`` show that
    no lane of a reduction of `n` products by adding (ADDING) leaves the range
    where adding a power of two rounds without a clamp, else ADDING:

    * the largest product at most the product format's fast high value, and the
      sums' bound ``n * P * (1 + u)**(n + 1)`` (P that product rounded up, u the
      accumulator's relative spacing) at most the accumulator format's: a rounded
      sum is at most its exact sum times ``1 + u``;
    * the least nonzero product at least the product format's min_normal, and its
      spacing G there at least the accumulator's min_normal: every product and
      every sum is then a multiple of G (each value's spacing is a multiple of G,
      or the value lies on the grid already), so a nonzero one is at least G.
    """
    a_most, a_least, a_zeros = _extremes(a)
    b_most, b_least, b_zeros = _extremes(b)
    largest = a_most * b_most  # exact: the products are; NaN where there is a NaN
    if not largest <= float64_value(product_params[P_FAST_HIGH_BITS]):
        return ADDING
    bound = n * largest * (1.0 + 2.0 ** -product_params[P_MAN_BITS]) * np.exp((n + 1) * 2.0 ** -acc_params[P_MAN_BITS])
    if not bound * 1.0001 <= float64_value(acc_params[P_FAST_HIGH_BITS]):
        return ADDING
    least = a_least * b_least  # inf where a factor has no nonzero value
    if least < np.inf:
        spacing = 2.0 ** (np.frexp(least)[1] - 1 - int(product_params[P_MAN_BITS]))
        if least < float64_value(product_params[P_MIN_NORMAL_BITS]) or spacing < float64_value(
                acc_params[P_MIN_NORMAL_BITS]):
            return ADDING
    return PLAIN if a_zeros or b_zeros else PLAIN_NONZERO


@njit(types.UniTuple(types.int64, 3)(types.Array(types.int64, 1, "C", readonly=True)), **NUMBA_OPTIONS)
def _extreme_bits(values):
    """``(greatest, least nonzero, zeros)`` of the magnitudes of the float64 bits
    `values` (integer keys, so that the loop vectorises): the bits of the greatest
    magnitude (a NaN's above inf's), those of the least nonzero one minus 1
    (``MOST`` where there is none), and the number of zeros."""
    most = np.int64(0)
    least = MOST
    zeros = np.int64(0)
    for bits in values:
        magnitude = bits & ABS_MASK
        most = max(most, magnitude)
        least = min(least, (magnitude - 1) & ABS_MASK)  # a zero's key is MOST
        zeros += magnitude == 0
    return most, least, zeros


def _extremes(values):
    """``(max |v|, least nonzero |v| (inf if none), whether some v is zero)`` of
    float64 `values`, the maximum NaN where a value is NaN."""
    most, least, zeros = _extreme_bits(np.ascontiguousarray(values).reshape(-1).view(np.int64))
    return float64_value(most), np.inf if least == MOST else float64_value(least + 1), zeros > 0


def float64_value(bits):
    return float(np.int64(bits).view(np.float64))


def _uniform_serves(params):
    """Floating point whose normal magnitudes are float64 normals, with -0, at
    least one bit dropped: every normal magnitude drops ``52 - man_bits`` bits."""
    return (params[P_WORD_BITS] == 0 and not params[P_NO_NEGATIVE_ZERO]
            and 0 <= params[P_MAN_BITS] < params[P_CARRIER_MAN_BITS]
            and params[P_MIN_NORMAL_BITS] >= FLOAT64_MIN_NORMAL_BITS
            and params[P_MIN_NORMAL_BITS] <= params[P_FAST_HIGH_BITS])


def _on_threads(kernel, arguments, total_rows, threads):
    """``kernel(*arguments, start, stop)`` over the rows: on one thread at once, or
    in `CHUNKS_PER_THREAD` ranges per thread that each thread takes in turn, so
    that a core the machine slows down (a shared VM's) holds the others back by
    one range at most."""
    if threads <= 1:
        kernel(*arguments, 0, total_rows)
        return
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads - 1:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads - 1)
    bounds = np.linspace(0, total_rows, min(total_rows, threads * CHUNKS_PER_THREAD) + 1).astype(np.int64).tolist()
    ranges = iter(list(zip(bounds[:-1], bounds[1:])))
    failed = threading.Event()

    def take_ranges():
        for start, stop in ranges:  # next() on a list iterator is atomic: each range goes to one thread
            if failed.is_set():
                return
            try:
                kernel(*arguments, start, stop)
            except BaseException:
                failed.set()
                raise

    futures = [_pool.submit(take_ranges) for _ in range(threads - 1)]
    try:
        take_ranges()
    finally:
        for future in futures:
            future.result()


def _sums_round_once(product_params, acc_params):
    """Whether rounding ``fl(acc + term)`` to nearest onto the accumulator format
    is rounding ``acc + term`` itself, for products rounded onto the product
    format and both formats rounded by adding: every product format value is an
    accumulator format value (no more significand bits, no larger magnitude, a
    spacing below min_normal no finer), and float64 has at least ``2p + 2`` bits
    for the accumulator's precision p: double rounding to nearest of a sum of two
    p-bit numbers is then harmless (Figueroa, "When is double rounding
    innocuous?", SIGNUM Newsletter 1995); sums below min_normal are exact."""
    return (product_params[P_MAN_BITS] <= acc_params[P_MAN_BITS]
            and 2 * (acc_params[P_MAN_BITS] + 1) + 2 <= 53
            and product_params[P_MAX_POS_BITS] <= acc_params[P_MAX_POS_BITS]
            and product_params[P_MAX_NEG_BITS] <= acc_params[P_MAX_NEG_BITS]
            and product_params[P_BELOW_QUANTUM_BITS] >= acc_params[P_BELOW_QUANTUM_BITS])


def compiled_kernels():
    """The kernels this process has made so far (for tests of numba's cache)."""
    return list(_KERNELS.values())


_KERNELS = {}


def _kernel(mode, product, rounding, plain_sums, exact_lanes, pairwise, plain_merges):
    """The kernel for these constants (`mode` and `product` may be RUNTIME: the
    kernel's arguments), compiled at its first use."""
    variant = (mode, product, rounding, plain_sums, exact_lanes, pairwise, plain_merges)
    if variant not in _KERNELS:
        if mode not in ALL_MODES + (RUNTIME,):
            raise ValueError(f"unknown mode number {mode}")
        _KERNELS[variant] = njit(_SIGNATURE, **NUMBA_OPTIONS)(_make_kernel(*variant))
    return _KERNELS[variant]


# -- the lanes' rounding and range check, per variant ------------------------------------


@njit(**NUMBA_OPTIONS)
def _round_by_adding(bits, params, mode, random, rand_bits):
    """``fast_nearest_float.nearest_by_adding`` with the parameters of `params`."""
    return nearest_by_adding(bits, params[P_FAST_DROP_MIN], params[P_FAST_DROP_OFFSET], params[P_CARRIER_MAN_BITS])


@njit(**NUMBA_OPTIONS)
def _round_plain_nonzero(bits, params, mode, random, rand_bits):
    """Nearest by adding ``2**(e + drop)`` of the value's sign to a nonzero normal
    magnitude of the format (at most its largest); a -0 would become +0."""
    power = bits_to_float64((bits & SIGN_EXPONENT) + (params[P_FAST_DROP_MIN] << params[P_CARRIER_MAN_BITS]))
    return float64_to_bits((bits_to_float64(bits) + power) - power)


@njit(**NUMBA_OPTIONS)
def _round_plain(bits, params, mode, random, rand_bits):
    """`_round_plain_nonzero` of a normal magnitude or a zero, the sign kept (-0)."""
    return _round_plain_nonzero(bits, params, mode, random, rand_bits) | (bits & SIGN_BIT)


@njit(**NUMBA_OPTIONS)
def _round_uniform(bits, params, mode, random, rand_bits):
    """float64 `bits` whose magnitude is 0 or a normal magnitude of the format (at
    most its largest value) rounded in `mode`: ``52 - man_bits`` bits dropped
    after adding the mode's bias, as ``core.fast_element.fast_round_bits`` decides there."""
    drop = params[P_CARRIER_MAN_BITS] - params[P_MAN_BITS]
    low_mask = (np.int64(1) << drop) - 1
    magnitude = bits & ABS_MASK
    if mode == STOCHASTIC:
        bias = np.int64((random & top_bits_mask_64(rand_bits)) >> np.uint64(64 - drop))
    elif mode == STOCHASTIC_EQUAL:
        bias = low_mask if (random >> U64_63) != 0 else np.int64(0)
    elif mode == NEAREST:
        bias = (low_mask >> 1) + ((magnitude >> drop) & 1)
    elif mode == NEAREST_AWAY:
        bias = (low_mask >> 1) + 1
    else:  # toward zero, up, down; odd adds nothing
        bias = directed_bias(low_mask, bits < 0, mode)
    rounded = (magnitude + bias) & ~low_mask
    if mode == ODD:
        rounded |= np.int64((magnitude & low_mask) != 0) << drop
    return rounded | (bits & SIGN_BIT)


@njit(**NUMBA_OPTIONS)
def _double_rounding_may_differ(bits, params, mode):
    """Whether rounding the float64 `bits` (``fl(z)``, z inexact) onto the format in
    the deterministic `mode` may differ from rounding z itself. No format value or
    midpoint lies strictly between z and fl(z) (both are float64s), so only where
    fl(z) is what the mode decides on -- for the nearest modes a midpoint of the
    format's grid, for the others a value of it, ``52 - man_bits`` bits dropped from
    normal magnitudes -- and below min_normal, where fewer bits are kept."""
    drop = params[P_CARRIER_MAN_BITS] - params[P_MAN_BITS]
    low_mask = (np.int64(1) << drop) - 1
    decisive = (low_mask >> 1) + 1 if mode == NEAREST or mode == NEAREST_AWAY else np.int64(0)
    magnitude = bits & ABS_MASK
    return ((magnitude & low_mask) == decisive) | (magnitude < params[P_MIN_NORMAL_BITS])


@njit(inline="always", **NUMBA_OPTIONS)
def _low_key(bits, params, low, zero_ok, rounding):
    """What must be at least the low limit (`_limits`): the range magnitude
    (BITS); ``|x| - 1``, and the largest key for a zero (UNIFORM: below
    ``min_normal - 1`` only for the format's subnormals); nothing (ADDING)."""
    if rounding == BITS:
        return checked_magnitude(bits, low, params, zero_ok)
    if rounding == UNIFORM:
        return ((bits & ABS_MASK) - 1) & ABS_MASK
    return MOST


@njit(inline="always", **NUMBA_OPTIONS)
def _high_key(bits, params, low, zero_ok, rounding):
    """What must be at most the high limit (`_limits`)."""
    if rounding == BITS:
        return checked_magnitude(bits, low, params, zero_ok)
    return bits & ABS_MASK


@njit(**NUMBA_OPTIONS)
def _limits(params, mode, rounding):
    """``(low, high)``: a lane is in the fast range where its low key is at least
    `low` and its high key at most `high`."""
    if rounding == BITS:
        return fast_bounds(params, mode, False)
    if rounding == UNIFORM:
        return params[P_MIN_NORMAL_BITS] - 1, params[P_FAST_HIGH_BITS]
    if rounding >= PLAIN:  # no range keys (`_plain_rounding`)
        return np.int64(0), MOST
    return np.int64(0), params[P_FAST_HIGH_BITS]


@njit(**NUMBA_OPTIONS)
def _outside(bits, params, low, high, zero_ok, rounding):
    return (_low_key(bits, params, low, zero_ok, rounding) < low
            or _high_key(bits, params, low, zero_ok, rounding) > high)


def _make_lane(rounding):
    """One lane's step on the fast path, for rounding variant `rounding`: the
    exact `term` rounded onto the product format (where `product`), then ``acc +
    term`` (``term`` alone where `first`) rounded onto the accumulator's; `seen`
    updated with the range keys and the residual's bits (see the kernel). `mode`
    and the flags after it are the kernel's constants: inlined into it, LLVM keeps
    only their branch. Made once per variant at import, so that a kernel refers to
    its variant's lane by a global name (numba's cache keys cannot hold a
    function: a kernel closure holds only numbers)."""
    round_fast = (fast_round_bits, _round_by_adding, _round_uniform, _round_plain, _round_plain_nonzero)[rounding]
    keys = rounding < PLAIN

    @njit(inline="always", **NUMBA_OPTIONS)
    def lane(acc, term, seen, first, product_params, product_low, acc_params, acc_low, key, product_random,
             sum_random, first_counter, product_step, sum_step, rand_bits, mode, product, plain_sums, keyed):
        zero_ok = mode == STOCHASTIC
        draws = (mode == STOCHASTIC or mode == STOCHASTIC_EQUAL) and not keyed
        product_least, product_most, sum_least, sum_most, residuals = seen
        if product:
            bits = float64_to_bits(term)
            if keys and rounding != ADDING:  # by adding, the range starts at 0
                product_least = min(product_least, _low_key(bits, product_params, product_low, zero_ok, rounding))
            if keys:
                product_most = max(product_most, _high_key(bits, product_params, product_low, zero_ok, rounding))
            if keyed:
                random = product_random
            elif draws:
                random = random_bits(key, first_counter + product_step)
            else:
                random = np.uint64(0)
            term = bits_to_float64(round_fast(bits, product_params, mode, random, rand_bits))
        if first:
            total = term
        elif plain_sums:
            total = acc + term  # a double rounding that changes nothing (`_sums_round_once`)
        else:
            total, residual = two_sum(acc, term)
            if mode != STOCHASTIC and mode != STOCHASTIC_EQUAL and rounding != BITS:
                may_differ = _double_rounding_may_differ(float64_to_bits(total), acc_params, mode)
                residuals |= float64_to_bits(residual) & -np.int64(may_differ)
            else:
                residuals |= float64_to_bits(residual)
        bits = float64_to_bits(total)
        if keys and rounding != ADDING:
            sum_least = min(sum_least, _low_key(bits, acc_params, acc_low, zero_ok, rounding))
        if keys:
            sum_most = max(sum_most, _high_key(bits, acc_params, acc_low, zero_ok, rounding))
        if keyed:
            random = sum_random
        elif draws:
            random = random_bits(key, first_counter + sum_step)
        else:
            random = np.uint64(0)
        rounded = bits_to_float64(round_fast(bits, acc_params, mode, random, rand_bits))
        return rounded, (product_least, product_most, sum_least, sum_most, residuals)

    return lane


def _make_step(rounding):
    lane = _make_lane(rounding)

    @njit(inline="always", **NUMBA_OPTIONS)
    def step(first, acc, updated, row, x, width, seen, product_params, product_low, acc_params, acc_low, key, halves,
             base, stride, product_step, sum_step, rand_bits, mode, product, plain_sums, keyed):
        """Step k of a row of a tile: every lane, in one loop."""
        for j in range(width):
            updated[j], seen = lane(acc[j], x * row[j], seen, first, product_params, product_low, acc_params, acc_low,
                                    key, joined(halves[0, j], halves[1, j]), joined(halves[2, j], halves[3, j]),
                                    base + stride * j, product_step, sum_step, rand_bits, mode, product, plain_sums,
                                    keyed)
        return seen

    return step


# module-level names: a kernel refers to its variant's step as a global (numba's cache
# key of a closure hashes its cells, and a function in a cell never hashes alike twice)
_STEP_BITS, _STEP_ADDING, _STEP_UNIFORM, _STEP_PLAIN, _STEP_PLAIN_NONZERO = (
    _make_step(rounding) for rounding in (BITS, ADDING, UNIFORM, PLAIN, PLAIN_NONZERO))


@njit(**NUMBA_OPTIONS)
def _exact_step(acc, updated, j, term, first, product_params, product_low, product_high, acc_params, acc_midpoints,
                acc_low, acc_high, key, first_counter, product_step, step, rand_bits, mode, product, rounding):
    """Lane `j`'s step ``k`` again where the fast path did not serve it (its range
    keys outside the limits, or a residual): the product rounded by
    ``accumulate.round_value`` (the fast path's value where it served it), the sum
    by ``accumulate.round_exact``."""
    zero_ok = mode == STOCHASTIC
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    random = np.uint64(0)
    redo = False
    if product:
        bits = float64_to_bits(term)
        redo = _outside(bits, product_params, product_low, product_high, zero_ok, rounding)
        if stochastic:
            random = random_bits(key, first_counter + product_step)
        term = bits_to_float64(round_value(bits, product_params, mode, random, rand_bits))
    if first:
        total, residual = term, 0.0
    else:
        total, residual = two_sum(acc[j], term)
    if redo or residual != 0.0 or _outside(float64_to_bits(total), acc_params, acc_low, acc_high, zero_ok, rounding):
        if stochastic:
            random = random_bits(key, first_counter + step)
        updated[j] = round_exact(total, residual, acc_params, acc_midpoints, mode, random, rand_bits)


@njit(inline="always", **NUMBA_OPTIONS)
def _fill_halves(halves, weyl_high, weyl_low, width, product_step, sum_step, product):
    """The random halves of one step's roundings (counters ``first + product_step``
    and ``first + sum_step`` of every lane), in 32-bit loops of their own (8 lanes)."""
    if product:
        product_weyl = wrapping_mul(np.uint32(product_step), WEYL_32)
        for j in range(width):
            halves[0, j] = mix_high(wrapping_add(weyl_high[j], product_weyl), MULTIPLIERS)
        for j in range(width):
            halves[1, j] = mix_low(wrapping_add(weyl_low[j], product_weyl), MULTIPLIERS)
    sum_weyl = wrapping_mul(np.uint32(sum_step), WEYL_32)
    for j in range(width):
        halves[2, j] = mix_high(wrapping_add(weyl_high[j], sum_weyl), MULTIPLIERS)
    for j in range(width):
        halves[3, j] = mix_low(wrapping_add(weyl_low[j], sum_weyl), MULTIPLIERS)


@njit(**NUMBA_OPTIONS)
def _served(seen, product_low, product_high, acc_low, acc_high):
    """Whether every lane of a step was served (`seen`: the step's reductions)."""
    return not (seen[0] < product_low or seen[1] > product_high or seen[2] < acc_low or seen[3] > acc_high
                or seen[4] != 0)


def _make_kernel(mode_constant, product_constant, rounding, plain_sums, exact_lanes, pairwise, plain_merges):
    # stochastic, fast kernel: each lane's segment keys, drawn once per row of a tile
    keyed = mode_constant in (STOCHASTIC, STOCHASTIC_EQUAL) and not exact_lanes

    def accumulate_rows(a, b, out, pending, product_params, acc_params, acc_midpoints, key, rand_bits, first_output,
                        mode_argument, product_argument, row_start, row_stop):
        # constants where the kernel has them (LLVM folds the selection), else the arguments
        mode = mode_argument if mode_constant == RUNTIME else mode_constant
        product = product_argument if product_constant == RUNTIME else product_constant == 1
        groups, rows, n = a.shape
        cols = out.shape[2]
        product_low, product_high = _limits(product_params, mode, rounding)
        acc_low, acc_high = _limits(acc_params, mode, rounding)
        acc = np.zeros(TILE, dtype=np.float64)
        updated = np.empty(TILE, dtype=np.float64)
        # stochastic: each lane's first keyed Weyl words, and each step's random halves
        weyl_high = np.zeros(TILE, dtype=np.uint32)
        weyl_low = np.zeros(TILE, dtype=np.uint32)
        halves = np.zeros((4, TILE), dtype=np.uint32)  # product high, low; sum high, low
        stack = np.zeros((64 if pairwise else 0, TILE), dtype=np.float64)  # pairwise: partial sums per level
        stride = np.int64(3) * n  # counters per output
        for tile, start in enumerate(range(0, cols, TILE)):
            width = min(TILE, cols - start)
            for r in range(row_start, row_stop):
                if exact_lanes and pending[r, tile] == 0:
                    continue
                g = r // rows
                i = r - g * rows
                base = stride * (first_output + np.int64(r) * cols + start)  # output (r, start)'s first counter
                if keyed:
                    crossing = False
                    for j in range(width):
                        counter = base + stride * j
                        segment = np.uint64(counter) >> U64_32
                        crossing |= (np.uint64(counter + stride - 1) >> U64_32) != segment
                        weyl_high[j], weyl_low[j] = keyed_weyl(segment_keys(key, segment),
                                                               wrapping_mul(np.uint32(counter & LOW_32), WEYL_32))
                    if crossing:  # an output's counters straddle two segments: left to the other kernel
                        pending[r, tile] = 1
                        continue
                if not pairwise:
                    for k in range(n):
                        x = a[g, i, k]
                        row = b[g, k, start:start + width]
                        sum_step = 1 if k == 0 else 3 * k - 1  # the counter of the sum's rounding
                        if keyed:
                            _fill_halves(halves, weyl_high, weyl_low, width, 3 * k, sum_step, product)
                        # the least low key and the greatest high key of the products and the
                        # sums, and the residuals' bits or-ed: whether every lane was served
                        seen = (MOST, np.int64(0), MOST, np.int64(0), np.int64(0))
                        # one call per variant and first step: constants, pruned before typing
                        if k == 0:
                                if rounding == PLAIN:
                                    seen = _STEP_PLAIN(
                                        True, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                elif rounding == PLAIN_NONZERO:
                                    seen = _STEP_PLAIN_NONZERO(
                                        True, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                elif rounding == ADDING:
                                    seen = _STEP_ADDING(
                                        True, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                elif rounding == UNIFORM:
                                    seen = _STEP_UNIFORM(
                                        True, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                else:
                                    seen = _STEP_BITS(
                                        True, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                        else:
                                if rounding == PLAIN:
                                    seen = _STEP_PLAIN(
                                        False, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                elif rounding == PLAIN_NONZERO:
                                    seen = _STEP_PLAIN_NONZERO(
                                        False, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                elif rounding == ADDING:
                                    seen = _STEP_ADDING(
                                        False, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                elif rounding == UNIFORM:
                                    seen = _STEP_UNIFORM(
                                        False, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                                else:
                                    seen = _STEP_BITS(
                                        False, acc, updated, row, x, width, seen, product_params, product_low,
                                        acc_params, acc_low, key, halves, base, stride, 3 * k, sum_step, rand_bits, mode,
                                        product, plain_sums, keyed)
                        if not _served(seen, product_low, product_high, acc_low, acc_high):
                            if not exact_lanes:  # left to the kernel with exact lanes
                                pending[r, tile] = 1
                                break
                            for j in range(width):
                                _exact_step(acc, updated, j, x * row[j], k == 0, product_params, product_low,
                                            product_high, acc_params, acc_midpoints, acc_low, acc_high, key,
                                            base + stride * j, 3 * k, sum_step, rand_bits, mode, product, rounding)
                        acc, updated = updated, acc
                else:  # pairwise: every lane enters and merges at the same steps
                    # each merge adds `updated` (the value) to a stack level into `acc`, then swaps
                    failed = False
                    for k in range(n + 1):
                        if k < n:  # term k is rounded into the accumulator format: the value
                            x = a[g, i, k]
                            row = b[g, k, start:start + width]
                            if keyed:
                                _fill_halves(halves, weyl_high, weyl_low, width, 3 * k, 3 * k + 1, product)
                            seen = (MOST, np.int64(0), MOST, np.int64(0), np.int64(0))
                            if rounding == PLAIN:
                                seen = _STEP_PLAIN(
                                    True, acc, updated, row, x, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 3 * k, 3 * k + 1, rand_bits, mode,
                                    product, plain_sums, keyed)
                            elif rounding == PLAIN_NONZERO:
                                seen = _STEP_PLAIN_NONZERO(
                                    True, acc, updated, row, x, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 3 * k, 3 * k + 1, rand_bits, mode,
                                    product, plain_sums, keyed)
                            elif rounding == ADDING:
                                seen = _STEP_ADDING(
                                    True, acc, updated, row, x, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 3 * k, 3 * k + 1, rand_bits, mode,
                                    product, plain_sums, keyed)
                            elif rounding == UNIFORM:
                                seen = _STEP_UNIFORM(
                                    True, acc, updated, row, x, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 3 * k, 3 * k + 1, rand_bits, mode,
                                    product, plain_sums, keyed)
                            else:
                                seen = _STEP_BITS(
                                    True, acc, updated, row, x, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 3 * k, 3 * k + 1, rand_bits, mode,
                                    product, plain_sums, keyed)
                            if not _served(seen, product_low, product_high, acc_low, acc_high):
                                if not exact_lanes:
                                    failed = True
                                    break
                                for j in range(width):
                                    _exact_step(acc, updated, j, x * row[j], True, product_params, product_low,
                                                product_high, acc_params, acc_midpoints, acc_low, acc_high, key,
                                                base + stride * j, 3 * k, 3 * k + 1, rand_bits, mode, product,
                                                rounding)
                            additions = k - popcount(k)  # merges before this term's
                            level = 0
                        else:  # the end: the value is the lowest level left, merged upward
                            additions = n - popcount(n)
                            level = 0
                            while (n >> level) & 1 == 0:
                                level += 1
                            for j in range(width):
                                updated[j] = stack[level, j]
                            level += 1
                        while level < 64:
                            if k < n and (k >> level) & 1 == 0:
                                break  # the value goes onto the stack at this level
                            if k == n and (n >> level) & 1 == 0:
                                level += 1
                                continue
                            merge_step = 3 * additions + 2
                            if keyed:
                                _fill_halves(halves, weyl_high, weyl_low, width, 0, merge_step, False)
                            seen = (MOST, np.int64(0), MOST, np.int64(0), np.int64(0))
                            level_row = stack[level]
                            if rounding == PLAIN:
                                seen = _STEP_PLAIN(
                                    False, level_row, acc, updated, 1.0, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 0, merge_step, rand_bits, mode,
                                    False, plain_merges, keyed)
                            elif rounding == PLAIN_NONZERO:
                                seen = _STEP_PLAIN_NONZERO(
                                    False, level_row, acc, updated, 1.0, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 0, merge_step, rand_bits, mode,
                                    False, plain_merges, keyed)
                            elif rounding == ADDING:
                                seen = _STEP_ADDING(
                                    False, level_row, acc, updated, 1.0, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 0, merge_step, rand_bits, mode,
                                    False, plain_merges, keyed)
                            elif rounding == UNIFORM:
                                seen = _STEP_UNIFORM(
                                    False, level_row, acc, updated, 1.0, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 0, merge_step, rand_bits, mode,
                                    False, plain_merges, keyed)
                            else:
                                seen = _STEP_BITS(
                                    False, level_row, acc, updated, 1.0, width, seen, product_params, product_low,
                                    acc_params, acc_low, key, halves, base, stride, 0, merge_step, rand_bits, mode,
                                    False, plain_merges, keyed)
                            if not _served(seen, product_low, product_high, acc_low, acc_high):
                                if not exact_lanes:
                                    failed = True
                                    break
                                for j in range(width):
                                    _exact_step(level_row, acc, j, updated[j], False, product_params, product_low,
                                                product_high, acc_params, acc_midpoints, acc_low, acc_high, key,
                                                base + stride * j, 0, merge_step, rand_bits, mode, False, rounding)
                            acc, updated = updated, acc
                            additions += 1
                            level += 1
                        if failed:
                            break
                        if k < n:
                            for j in range(width):
                                stack[level, j] = updated[j]
                    if failed:
                        pending[r, tile] = 1
                    for j in range(width):
                        acc[j] = updated[j]
                for j in range(width):
                    out[g, i, start + j] = acc[j]
                    acc[j] = 0.0

    return accumulate_rows
