"""Sequential rounded accumulation, vectorised: the common case of ``rp.matmul``,
``rp.dot`` and ``rp.sum`` at a useful speed.

``accumulate.accumulate`` rounds the steps of one output after another's; this
kernel gives the same bits, in the same order of additions per output, with the
loops turned so that the innermost one runs over independent outputs:

* for a tile of ``TILE`` columns of the result and one row ``i`` of it, the
  ``TILE`` accumulators advance together: for each ``k``, every product
  ``a[i, k] * b[k, j]`` of the tile is rounded onto the product format (one
  vector loop), then added to its accumulator and the sum rounded (another);
* the rounding is ``fast_bits.fast_round_bits`` (branch-free on the fast range,
  the same decisions as ``core.element.round_bits``), compiled with the mode as
  a constant, so that LLVM rounds 8 float64 lanes per instruction (AVX-512);
* every lane also reports whether its value lay outside the fast range (zero,
  overflow, a format's subnormals the fast path does not serve) or whether the
  float64 sum was inexact (``two_sum``'s residual is not 0): those few lanes are
  rounded again, exactly, by ``accumulate.round_value`` / ``accumulate.round_exact``
  before the next ``k``, as the general kernel rounds them;
* a column tile of ``b`` (``n * TILE`` float64s) stays in a core's L2 cache
  while every row of ``a`` passes over it.

It serves the sequential order with products that float64 holds exactly (the
caller checks), kinds SUM, PRODUCT and FUSED (with exact products a fused
multiply-add is the sum of the exact product), and formats without the rounding
kernel's rare paths whose fast range is not empty; every other case takes the
general kernel. Random counters are the general kernel's (``accumulate``'s
module docstring): lane ``j`` of row ``r`` is output ``o = r * cols + j``.

Rows are independent, so ``run`` hands ranges of rows to threads; each kernel
call releases the GIL.
"""
from __future__ import annotations

import concurrent.futures
import functools
import threading

import numba
import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, float64_to_bits
from ..core.layout import (
    ALL_MODES, NEAREST, P_BELOW_QUANTUM_BITS, P_CARRIER_MAN_BITS, P_MAN_BITS, P_MAX_NEG_BITS, P_MAX_POS_BITS, P_FAST_DROP_MIN, P_FAST_DROP_OFFSET, PARAMS_TYPE, STOCHASTIC,
    STOCHASTIC_EQUAL,
)
from ..core.stream import random_bits
from .accumulate import MIDPOINTS_TYPE, PRODUCT, round_exact, round_value, two_sum
from .environment import KEEPS_SUBNORMALS, ROUNDS_TO_NEAREST, environment
from .fast_bits import FAST_BITS_MODES, fast_round_bits
from .fast_nearest_float import nearest_by_adding
from .loops import checked_magnitude, fast_bounds, irregular
from .table import nearest_by_adding as nearest_by_adding_serves

__all__ = ["TILE", "fast_modes", "run"]

# Columns of the result that advance together: a tile of b (n * TILE float64s)
# stays in L2 for n up to ~1,000 (1 MiB), and a row of partial results in L1.
TILE = 128
# Below this many multiply-adds one thread is faster than waking the pool's.
PARALLEL_THRESHOLD = 1 << 22

_READ3 = types.Array(types.float64, 3, "C", readonly=True)
_SIGNATURE = types.void(_READ3, _READ3, types.Array(types.float64, 3, "C"), types.Array(types.uint8, 2, "C"),
                        PARAMS_TYPE, PARAMS_TYPE, MIDPOINTS_TYPE, types.uint64, types.int64, types.int64, types.int64)
MOST = np.int64(0x7FFFFFFFFFFFFFFF)
ABS_MASK = MOST
NEAREST_ENVIRONMENT = ROUNDS_TO_NEAREST | KEEPS_SUBNORMALS
_pool = None
_pool_lock = threading.Lock()


def fast_modes():
    """The modes this kernel serves (those of ``fast_round_bits``)."""
    return FAST_BITS_MODES


def run(a, b, out, product_params, acc_params, acc_midpoints, mode, kind, key, rand_bits):
    """``out[g, i, j]``: the sequential rounded reduction of ``a[g, i, :] * b[g, :, j]``
    (arrays as for ``accumulate.accumulate``), on numba's thread count where the
    product is large. The caller has checked that this kernel serves the case."""
    by_adding = (int(mode) == NEAREST and nearest_by_adding_serves(product_params)
                 and nearest_by_adding_serves(acc_params)
                 and environment() & NEAREST_ENVIRONMENT == NEAREST_ENVIRONMENT)
    plain_sums = by_adding and kind == PRODUCT and _sums_round_once(product_params, acc_params)
    variant = (int(mode), kind == PRODUCT, by_adding, plain_sums)
    groups, rows, n = a.shape
    total_rows = groups * rows
    pending = np.zeros((total_rows, -(-out.shape[2] // TILE)), dtype=np.uint8)
    arguments = (a, b, out, pending, product_params, acc_params, acc_midpoints, np.uint64(key), int(rand_bits))
    threads = 1 if total_rows * n * out.shape[2] < PARALLEL_THRESHOLD else min(numba.get_num_threads(), total_rows)
    _on_threads(_kernel(*variant, False), arguments, total_rows, threads)
    if pending.any():  # rare: some outputs need an exact rounding on the way
        _on_threads(_kernel(*variant, True), arguments, total_rows, threads)


def _on_threads(kernel, arguments, total_rows, threads):
    """``kernel(*arguments, start, stop)`` over the rows, in `threads` ranges."""
    if threads <= 1:
        kernel(*arguments, 0, total_rows)
        return
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads - 1:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads - 1)
    bounds = np.linspace(0, total_rows, threads + 1).astype(np.int64).tolist()
    futures = [_pool.submit(kernel, *arguments, bounds[t], bounds[t + 1]) for t in range(1, threads)]
    try:
        kernel(*arguments, bounds[0], bounds[1])
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


@functools.lru_cache(maxsize=None)
def _kernel(mode, product, by_adding, plain_sums, exact_lanes):
    """The kernel for `mode` (a constant in it), compiled at its first use;
    `by_adding`: nearest rounding by adding a power of two (``fast_nearest_float``)."""
    if mode not in ALL_MODES:
        raise ValueError(f"unknown mode number {mode}")
    return njit(_SIGNATURE, **NUMBA_OPTIONS)(_make_kernel(mode, product, by_adding, plain_sums, exact_lanes))


@njit(**NUMBA_OPTIONS)
def _exact_step(acc, updated, j, term, product, k, product_params, product_low, product_high, acc_params,
                acc_midpoints, acc_low, acc_high, mode, zero_ok, stochastic, key, first_counter, step, rand_bits):
    """Lane `j`'s step ``k`` again where the fast path did not serve it: the
    product rounded by ``round_value``, the sum by ``round_exact``."""
    random = np.uint64(0)
    redo = False
    if product:
        bits = float64_to_bits(term)
        redo = irregular(bits, product_low, product_high, product_params, zero_ok) != 0
        if stochastic:
            random = random_bits(key, first_counter + 3 * k)
        term = bits_to_float64(round_value(bits, product_params, mode, random, rand_bits))  # the fast path's value
    if k == 0:
        total, residual = term, 0.0
    else:
        total, residual = two_sum(acc[j], term)
    if redo or residual != 0.0 or irregular(float64_to_bits(total), acc_low, acc_high, acc_params, zero_ok):
        if stochastic:
            random = random_bits(key, first_counter + step)
        updated[j] = round_exact(total, residual, acc_params, acc_midpoints, mode, random, rand_bits)


@njit(**NUMBA_OPTIONS)
def _round_by_adding(bits, params, mode, random, rand_bits):
    """``fast_nearest_float.nearest_by_adding`` with the parameters of `params`."""
    return nearest_by_adding(bits, params[P_FAST_DROP_MIN], params[P_FAST_DROP_OFFSET], params[P_CARRIER_MAN_BITS])


@njit(**NUMBA_OPTIONS)
def _no_random(key, counter):
    return np.uint64(0)


def _make_lane(mode, product, by_adding, plain_sums):
    """One lane's step on the fast path, for the kernel's constants: the exact
    `term` rounded onto the product format (where `product`), then ``acc + term``
    (``term`` alone where `first`) rounded onto the accumulator's; `seen` updated
    with the range magnitudes and the residual's bits (see the kernel). Only the
    functions the constants need are referenced, so that only they compile."""
    zero_ok = mode == STOCHASTIC
    round_fast = _round_by_adding if by_adding else fast_round_bits
    draw = random_bits if mode == STOCHASTIC or mode == STOCHASTIC_EQUAL else _no_random

    @njit(inline="always", **NUMBA_OPTIONS)
    def lane(acc, term, seen, first, product_params, product_low, acc_params, acc_low, key, first_counter,
             product_step, sum_step, rand_bits):
        product_least, product_most, sum_least, sum_most, residuals = seen
        if product:
            bits = float64_to_bits(term)
            if by_adding:  # the range starts at 0; the range mask is the magnitude's
                magnitude = bits & ABS_MASK
            else:
                magnitude = checked_magnitude(bits, product_low, product_params, zero_ok)
                product_least = min(product_least, magnitude)
            product_most = max(product_most, magnitude)
            random = draw(key, first_counter + product_step)
            term = bits_to_float64(round_fast(bits, product_params, mode, random, rand_bits))
        if first:
            total = term
        elif plain_sums:
            total = acc + term  # a double rounding that changes nothing (`_sums_round_once`)
        else:
            total, residual = two_sum(acc, term)
            residuals |= float64_to_bits(residual)
        bits = float64_to_bits(total)
        if by_adding:
            magnitude = bits & ABS_MASK
        else:
            magnitude = checked_magnitude(bits, acc_low, acc_params, zero_ok)
            sum_least = min(sum_least, magnitude)
        sum_most = max(sum_most, magnitude)
        random = draw(key, first_counter + sum_step)
        rounded = bits_to_float64(round_fast(bits, acc_params, mode, random, rand_bits))
        return rounded, (product_least, product_most, sum_least, sum_most, residuals)

    return lane


def _make_kernel(mode, product, by_adding, plain_sums, exact_lanes):
    stochastic = mode == STOCHASTIC or mode == STOCHASTIC_EQUAL
    zero_ok = mode == STOCHASTIC
    lane = _make_lane(mode, product, by_adding, plain_sums)

    def accumulate_rows(a, b, out, pending, product_params, acc_params, acc_midpoints, key, rand_bits, row_start,
                        row_stop):
        groups, rows, n = a.shape
        cols = out.shape[2]
        product_low, product_high = fast_bounds(product_params, mode, False)
        acc_low, acc_high = fast_bounds(acc_params, mode, False)
        acc = np.zeros(TILE, dtype=np.float64)
        updated = np.empty(TILE, dtype=np.float64)
        stride = np.int64(3) * n  # counters per output
        for tile, start in enumerate(range(0, cols, TILE)):
            width = min(TILE, cols - start)
            for r in range(row_start, row_stop):
                if exact_lanes and pending[r, tile] == 0:
                    continue
                g = r // rows
                i = r - g * rows
                base = stride * (np.int64(r) * cols + start)  # output (r, start)'s first counter
                for k in range(n):
                    x = a[g, i, k]
                    row = b[g, k, start:start + width]
                    # the least and greatest range magnitudes of the products and sums, and
                    # the residuals' bits or-ed: whether every lane lay in the fast range
                    seen = (MOST, np.int64(0), MOST, np.int64(0), np.int64(0))
                    if k == 0:
                        for j in range(width):
                            updated[j], seen = lane(0.0, x * row[j], seen, True, product_params, product_low,
                                                    acc_params, acc_low, key, base + stride * j, 3 * k, 1,
                                                    rand_bits)
                    else:
                        for j in range(width):
                            updated[j], seen = lane(acc[j], x * row[j], seen, False, product_params, product_low,
                                                    acc_params, acc_low, key, base + stride * j, 3 * k, 3 * k - 1,
                                                    rand_bits)
                    if (seen[0] < product_low or seen[1] > product_high or seen[2] < acc_low
                            or seen[3] > acc_high or seen[4] != 0):
                        if not exact_lanes:  # left to the kernel with exact lanes
                            pending[r, tile] = 1
                            break
                        # the lanes the fast path does not serve, again, exactly
                        for j in range(width):
                            _exact_step(acc, updated, j, x * row[j], product, k, product_params, product_low,
                                        product_high, acc_params, acc_midpoints, acc_low, acc_high, mode,
                                        zero_ok, stochastic, key, base + stride * j, 1 if k == 0 else 3 * k - 1,
                                        rand_bits)
                    acc, updated = updated, acc
                for j in range(width):
                    out[g, i, start + j] = acc[j]
                    acc[j] = 0.0

    return accumulate_rows
