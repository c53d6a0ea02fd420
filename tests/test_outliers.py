"""Elements outside a fast loop's range amid ordinary ones.

After the fast loop has rounded a block, the elements outside its range (NaN,
inf, overflow, and for stochastic rounding magnitudes far below one spacing)
are done again by the general loop: a piece of 128 elements holding more than
``loops.SPARSE`` of them whole, a piece holding fewer only in the runs of
``loops.RUN`` elements that hold them (found from a bit mask per 64
elements), and a block holding more than ``loops.MANY`` makes the next
``loops.SKIP`` blocks skip the fast loop.

Every kernel that rounds an array, as the API picks it and bit-level, must give
the general loop's bits (``loops.round_general``, which the oracle tests
hold to exact arithmetic) wherever the outliers fall: at the edges of runs,
masks, pieces and blocks, in a block's short tail, below and above each
threshold, and sprinkled at random densities.
"""
import numpy as np
import pytest
from numba import njit

import rpfloat as rp
from rpfloat._kernels.cpu import loops
from sweeps import float32_sweep, kernel_setup
from test_zeros import MODES, _policy, assert_kernels_match_general

BLOCK, PIECE, RUN, SPARSE, MANY = loops.BLOCK, loops.PIECE, loops.RUN, loops.SPARSE, loops.MANY
SIZE = 3 * BLOCK + 77  # a short last block, not a whole number of pieces or runs

# (format, dtype, an ordinary magnitude, outliers: outside every fast range of the format)
CASES = [
    ("e4m3", np.float32, 1.5, [np.nan, np.inf, -np.inf, 1e6, -1e6, 2.0**-30, -(2.0**-30)]),
    ("bfloat16", np.float32, 1.5, [np.nan, np.inf, -np.inf]),
    ("float16", np.float32, 1.5, [np.nan, 1e6, -1e6, 2.0**-50, -(2.0**-50)]),
    ("q8.8", np.float32, 1.5, [np.nan, 1e6, -1e6, 2.0**-30, -(2.0**-30)]),
    ("q16.16", np.float32, 1.5, [np.nan, 1e9, -1e9, 2.0**-40, -(2.0**-40)]),
    ("float16", np.float64, 1.5, [np.nan, np.inf, 1e6, -1e6, 2.0**-45, -(2.0**-45)]),
    ("float8_e4m3fnuz", np.float64, 1.5, [np.nan, 1e6, -1e6, 2.0**-30, -(2.0**-30)]),
]


def _layouts(size: int):
    """Index sets for the outliers: edges of runs, masks, pieces and blocks; the
    SPARSE, MANY thresholds and either side; random densities."""
    edges = [0, RUN - 1, RUN, 63, 64, PIECE - 1, PIECE, BLOCK - 1, BLOCK, size - 1]
    yield "edges", np.array(edges)
    for count in (SPARSE, SPARSE + 1):  # in one piece, spread over its runs
        yield f"{count} in a piece", PIECE + np.linspace(0, PIECE - 1, count).astype(int)
    for count in (MANY, MANY + 1):  # in one block, one or two per piece
        yield f"{count} in a block", BLOCK + np.linspace(0, BLOCK - 1, count).astype(int)
    rng = np.random.default_rng(11)
    for density in (0.002, 0.03, 0.3):
        yield f"density {density}", np.flatnonzero(rng.random(size) < density)


def _data(fmt_name, dtype, ordinary, outliers, where):
    rng = np.random.default_rng(3)
    xs = (ordinary * rng.uniform(0.5, 2.0, SIZE) * rng.choice([-1.0, 1.0], SIZE)).astype(dtype)
    xs[where] = np.resize(np.array(outliers, dtype), len(where))
    return xs


@pytest.mark.parametrize("fmt_name, dtype, ordinary, outliers", CASES,
                         ids=[f"{c[0]}-{np.dtype(c[1]).name}" for c in CASES])
def test_outliers_anywhere_match_the_general_loop(fmt_name, dtype, ordinary, outliers):
    fmt = rp.format(fmt_name)
    checked = 0
    for layout, where in _layouts(SIZE):
        xs = _data(fmt_name, dtype, ordinary, outliers, where)
        for mode_name in ("nearest", "up", "stochastic"):
            mode = MODES[mode_name]
            checked += assert_kernels_match_general(xs, fmt, mode, mode_name, (64, 0xC0FFEE, 7), layout)
    assert checked >= 3 * len(list(_layouts(SIZE)))  # every layout and mode, by one kernel at least


def test_ordinary_values_are_inside_the_ranges():
    """The ordinary values of the cases lie in the fast ranges and the outliers
    outside (so that the fast loop runs, and the general loop redoes the
    outliers alone)."""
    for fmt_name, dtype, ordinary, outliers in CASES:
        fmt = rp.format(fmt_name)
        _, _, params, bits, _, _ = kernel_setup(dtype, fmt, _policy(fmt))  # the fast path's parameters
        ordinary_bits = np.array([ordinary * 0.5, ordinary * 2.0, -ordinary * 0.5, -ordinary * 2.0], dtype).view(bits)
        outlier_bits = np.array(outliers, dtype).view(bits)
        for mode_name in ("nearest", "up", "stochastic"):
            low, high, zero_ok = loops.loop_range(params, MODES[mode_name], loops.BITS_LOOP)
            assert loops.count_irregular(ordinary_bits, low, high, params, zero_ok) == 0, (fmt_name, mode_name)
        low, high, zero_ok = loops.loop_range(params, MODES["stochastic"], loops.BITS_LOOP)
        assert loops.count_irregular(outlier_bits, low, high, params, zero_ok) == len(outliers), fmt_name


@njit  # not cached: numba would not see a change to the kernels it calls
def _verdicts_by_keys(bits, low, high, params, zero_ok, out):
    """Per element, whether the fast loop's range check (`range_keys` against
    `range_limits`, as a block of that one element) finds it outside the range."""
    low_limit, high_limit = loops.range_limits(bits[0], low, high, zero_ok)
    for i in range(bits.size):
        low_key, high_key = loops.range_keys(bits[i], low, params, zero_ok)
        out[i] = min(high_limit, low_key) < low_limit or max(low_limit, high_key) > high_limit


@pytest.mark.parametrize("fmt", [
    rp.format("e4m3"), rp.format("bfloat16"), rp.FloatFormat(6, 9, subnormals=False), rp.format("float8_e4m3fnuz"),
    rp.FixedFormat(8, 8), rp.FixedFormat(8, 8, signed=False), rp.FixedFormat(16, 16),
], ids=repr)
def test_range_keys_agree_with_irregular(fmt):
    """The float32 fast loops' range check in unsigned keys (a zero's low key
    wraps to the top; an unsigned format's negative magnitudes lie above the
    range) finds outside the range exactly the elements `irregular` counts, for
    every float32 bit pattern of the sweep with both signs, in every loop's range
    and with zeros counted in or not."""
    xs = float32_sweep()
    bits = np.concatenate([xs, -xs, np.float32([0.0, -0.0])]).view(np.int32)
    _, _, params, _, _, _ = kernel_setup(np.dtype(np.float32), fmt, _policy(fmt))
    got = np.empty(bits.size, np.bool_)
    checked = 0
    for loop in (loops.BITS_LOOP, loops.UNIFORM_LOOP, loops.SCALED_LOOP, loops.SPLIT_LOOP):
        for mode_name in ("nearest", "stochastic"):
            low, high, zero_ok = loops.loop_range(params, MODES[mode_name], loop)
            if low > high:
                continue
            edges = np.array([low - 1, low, low + 1, high - 1, high, high + 1], np.int64)
            edges = np.concatenate([edges, edges | -(2**31), [0, -(2**31), 1]]).astype(np.int32)
            sample = np.concatenate([bits[::97], edges])
            for zeros in (zero_ok, not zero_ok):
                want = np.array([loops.irregular(b, low, high, params, zeros) for b in sample], np.bool_)
                _verdicts_by_keys(sample, low, high, params, zeros, got[:want.size])
                assert np.array_equal(got[:want.size], want), (fmt, loop, mode_name, zeros)
                assert want.any() and not want.all()
                checked += 1
    assert checked >= 4
