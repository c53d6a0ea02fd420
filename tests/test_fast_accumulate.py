"""The vectorised sequential accumulation kernel (``fast_accumulate``) against the
general kernel it replaces in the common case (``accumulate.accumulate``, kept as
the reference): the same bits for every mode, kind, pair of formats, shape and
thread split, on data that reaches each of its rare paths."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat.accumulate import bounded_format, rounding_setup
from rpfloat._kernels.cpu import accumulate as general
from rpfloat._kernels.cpu import fast_accumulate as fast
from rpfloat.modes import Mode
from rpfloat._plan import random_key
from test_accumulate import SEED as REFERENCE_SEED
from test_accumulate import assert_same
from reference import round_reference
from test_accumulate import reference_reduction

MODES = [mode.name.lower() for mode in Mode]
KINDS = {"product": general.PRODUCT, "fused": general.FUSED, "sum": general.SUM}
PAIRS = [  # (product format, accumulator format)
    ("bfloat16", "bfloat16"),
    ("bfloat16", "float32"),
    ("float16", "float16"),
    ("e4m3", "float16"),
    ("e5m2", "bfloat16"),
    ("float32", "bfloat16"),  # products finer than the accumulator: no plain sums
    ("e4m3", "e4m3"),  # saturating, no inf
    ("tf32", "float32"),
    (rp.FixedFormat(8, 8), rp.FixedFormat(12, 8)),  # fixed point: the bit-level fast path
]


def float32_data(shape, seed, spread=4, specials=0.0):
    """float32 values (so that products are exact in float64) spanning 2**±spread
    and beyond, with zeros of both signs and, at rate `specials`, huge, tiny,
    infinite and NaN values."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
    values[rng.random(shape) < 0.05] = 0.0
    values[rng.random(shape) < 0.03] = -0.0
    if specials:
        pick = rng.random(shape) < specials
        choices = np.array([np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-40, -1e-42, 2.0**100, 2.0**-100])
        values[pick] = rng.choice(choices, pick.sum())
    return values.astype(np.float32).astype(np.float64)


def both(a, b, fmt, acc, mode, kind, key=11, rand_bits=64, order="sequential"):
    """(fast, general) results of the reduction, as the API would call them."""
    fmt_bounded = bounded_format(rp.format(fmt), np.float32)
    acc_bounded = bounded_format(rp.format(acc), np.float32)
    product_params, product_midpoints, product_general = rounding_setup(fmt_bounded)
    acc_params, acc_midpoints, acc_general = rounding_setup(acc_bounded)
    assert not (product_general or acc_general)  # the fast kernel's precondition
    mode_number = int(Mode[mode.upper()])
    expected = np.zeros((a.shape[0], a.shape[1], b.shape[2]))
    general.accumulate(a, b, expected, product_params, product_midpoints, product_general, acc_params,
                       acc_midpoints, acc_general, mode_number, kind, order == "pairwise", True, np.uint64(key),
                       rand_bits)
    actual = np.full_like(expected, 12345.0)
    fast.run(a, b, actual, product_params, acc_params, acc_midpoints, mode_number, kind, key, rand_bits,
             pairwise=order == "pairwise")
    return actual, expected


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt, acc", PAIRS, ids=lambda f: getattr(f, "name", None) or str(f))
def test_products_and_sums_match_the_general_kernel(fmt, acc, mode, order):
    a = float32_data((2, 5, 37), seed=1)
    b = float32_data((2, 37, fast.TILE + 22), seed=2)  # two column tiles, the second partial
    assert_same(*both(a, b, fmt, acc, mode, general.PRODUCT, order=order))


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["fused", "sum"])
def test_fused_and_sum_kinds_match(kind, mode, order):
    a = float32_data((1, 4, 50), seed=3)
    if kind == "sum":
        a = np.ones((1, 1, 50))
    b = float32_data((1, 50, 40), seed=4)
    assert_same(*both(a, b, "bfloat16", "bfloat16", mode, KINDS[kind], order=order))
    assert_same(*both(a, b, "e4m3", "float16", mode, KINDS[kind], order=order))


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt, acc", PAIRS[:6], ids=str)
def test_rare_paths_overflow_nan_inf_subnormals(fmt, acc, mode, order):
    """Products and sums beyond the format's range, infinities and NaNs, values
    below min_normal: lanes the fast path leaves to the exact one."""
    a = float32_data((1, 6, 30), seed=5, spread=40, specials=0.05)
    b = float32_data((1, 30, 20), seed=6, spread=40, specials=0.05)
    assert_same(*both(a, b, fmt, acc, mode, general.PRODUCT, order=order))
    assert_same(*both(a, b, fmt, acc, mode, general.FUSED, order=order))


@pytest.mark.parametrize("mode", MODES)
def test_sums_float64_cannot_hold(mode):
    """Terms 2**60 apart: the float64 sum is inexact (a residual), for the
    directed and stochastic modes a different rounding than of fl(sum)."""
    rng = np.random.default_rng(7)
    a = np.where(rng.random((1, 3, 24)) < 0.5, 2.0**60, 1.0) * rng.choice([-1.0, 1.0], (1, 3, 24))
    b = float32_data((1, 24, 10), seed=8, spread=2)
    assert_same(*both(a, b, "float32", "float32", mode, general.FUSED))
    assert_same(*both(a, b, "bfloat16", "float32", mode, general.PRODUCT))


@pytest.mark.parametrize("fmt, acc", [("bfloat16", "bfloat16"), ("bfloat16", "float32"), ("e4m3", "float16")])
def test_ties_of_plain_sums(fmt, acc):
    """Data made of few-bit values so that many sums and products are exact ties
    of the accumulator: where the kernel adds in float64 without a residual, the
    double rounding must still round like the exact sum."""
    rng = np.random.default_rng(9)
    a = rng.integers(-8, 9, (1, 16, 64)) * np.exp2(rng.integers(-12, 4, (1, 16, 64)))
    b = rng.integers(-8, 9, (1, 64, 64)) * np.exp2(rng.integers(-12, 4, (1, 64, 64)))
    for mode in ("nearest", "nearest_away", "odd"):
        assert_same(*both(a, b, fmt, acc, mode, general.PRODUCT))


def test_threads_do_not_change_the_result(monkeypatch):
    a = float32_data((3, 7, 40), seed=10, specials=0.01)
    b = float32_data((3, 40, 33), seed=11, specials=0.01)
    single = both(a, b, "bfloat16", "bfloat16", "stochastic", general.PRODUCT)[0]
    monkeypatch.setattr(fast, "PARALLEL_THRESHOLD", 0)
    threaded, expected = both(a, b, "bfloat16", "bfloat16", "stochastic", general.PRODUCT)
    assert_same(threaded, expected)
    assert_same(threaded, single)


@pytest.mark.parametrize("rand_bits", [1, 5, 13, 64])
def test_rand_bits(rand_bits):
    a = float32_data((1, 3, 20), seed=12)
    b = float32_data((1, 20, 9), seed=13)
    for mode in ("stochastic", "stochastic_equal"):
        assert_same(*both(a, b, "e5m2", "bfloat16", mode, general.PRODUCT, rand_bits=rand_bits))


@settings(max_examples=40, deadline=None)
@given(
    product_format=st.tuples(st.integers(2, 8), st.integers(1, 10)),
    acc_format=st.tuples(st.integers(2, 8), st.integers(1, 23)),
    mode=st.sampled_from(MODES),
    kind=st.sampled_from(["product", "fused"]),
    order=st.sampled_from(["sequential", "pairwise"]),
    shape=st.tuples(st.integers(1, 4), st.integers(1, 70), st.integers(1, 140)),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_formats_match(product_format, acc_format, mode, kind, order, shape, seed):
    rows, n, cols = shape
    a = float32_data((1, rows, n), seed, spread=6, specials=0.02)
    b = float32_data((1, n, cols), seed + 1, spread=6, specials=0.02)
    fmt = rp.FloatFormat(*product_format)
    acc = rp.FloatFormat(*acc_format)
    assert_same(*both(a, b, fmt, acc, mode, KINDS[kind], key=seed, order=order))


@pytest.mark.parametrize("mode", ["stochastic", "stochastic_equal"])
def test_counters_crossing_a_segment_of_the_stream(mode):
    """Outputs whose counters straddle a multiple of 2**32 (where the stream's
    segment key changes) draw the same numbers as the reference loop: the fast
    kernel draws each lane's keys once per row of a tile and leaves a straddling
    row to the exact kernel."""
    n, cols = 50, 9
    first_output = -(-(2**32) // (3 * n)) - 4  # outputs first_output + 3, + 4 straddle
    assert any((3 * n * o) >> 32 != (3 * n * (o + 1) - 1) >> 32 for o in range(first_output, first_output + cols))
    a = float32_data((1, 2, n), seed=16)
    b = float32_data((1, n, cols), seed=17)
    fmt = bounded_format(rp.format("bfloat16"), np.float32)
    params, midpoints, _ = rounding_setup(fmt)
    actual = np.zeros((1, 2, cols))
    fast.run(a, b, actual, params, params, midpoints, int(Mode[mode.upper()]), general.PRODUCT,
             random_key(REFERENCE_SEED), 64, first_output=first_output)
    expected = [[reference_reduction(a[0, i], b[0, :, j], fmt, fmt, mode, "sequential", "product",
                                     first_output + i * cols + j) for j in range(cols)] for i in range(2)]
    assert_same(actual[0], np.array(expected))


@pytest.mark.parametrize("mode", [mode for mode in MODES if not mode.startswith("stochastic")])
def test_float64_sums_on_a_decisive_point(mode):
    """Fused steps whose float64 sum is inexact and lands exactly on a midpoint of
    bfloat16's grid (what the nearest modes decide on) or on a value of it (the
    other modes): rounding fl(z) would differ from rounding z, so these lanes must
    take the exact path. The products (1 + 2**-25) (1 - 2**-25) = 1 - 2**-50 of
    26-bit operands are exact in float64; the sums are not."""
    factor = (1 + 2.0**-25) * 2.0**-8, 1 - 2.0**-25  # 2**-8 (1 - 2**-50)
    a = np.array([[1 + 2.0**-7, factor[0]],     # z = 1 + 3 * 2**-8 - 2**-58: fl(z) is the tie
                  [1.0, 2 * factor[0]],         # z = 1 + 2**-7 - 2**-57: fl(z) is a value
                  [-1.0, -2 * factor[0]]])
    b = np.array([[1.0] * 4, [factor[1]] * 4])
    # any float64 strictly between the same grid points and midpoints rounds like z
    stand_ins = [1 + 3 * 2.0**-8 - 2.0**-20, 1 + 2.0**-7 - 2.0**-20, -(1 + 2.0**-7 - 2.0**-20)]
    fmt = rp.format("bfloat16")
    expected = np.array([[round_reference(z, fmt, mode)] * 4 for z in stand_ins])
    assert_same(rp.matmul(a, b, fmt, fma=True, mode=mode), expected)
    if mode == "nearest":
        assert expected[0, 0] == 1 + 2.0**-7  # fl(z) would tie to 1 + 2**-6
    if mode == "toward_zero":
        assert expected[1, 0] == 1.0  # fl(z) = 1 + 2**-7 would be kept


def test_a_second_process_loads_the_kernels_from_the_cache():
    """The kernels are closures over numbers only, so numba's cache key is the same
    in every process (a function in a closure cell would pickle differently each
    time, and every process would compile again: seconds per kernel)."""
    script = (
        "import numpy as np, rpfloat as rp\n"
        "from rpfloat._kernels.cpu import fast_accumulate as fast\n"
        "a = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)\n"
        "rp.matmul(a, a, 'bfloat16')\n"
        "rp.matmul(a, a, 'e4m3', mode='stochastic', rng=1)\n"
        "a[0, 0] = np.inf\n"
        "rp.matmul(a, a, 'bfloat16', mode='toward_zero')\n"  # an exact lane: the rare-lane kernel
        "kernels = fast.compiled_kernels()\n"
        "print(len(kernels), sum(sum(k.stats.cache_misses.values()) for k in kernels))\n"
    )
    outputs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
               for _ in range(2)]
    count, misses = outputs[1].split()
    assert int(count) >= 4 and misses == "0"


# -- lanes without range keys (PLAIN, PLAIN_NONZERO) -------------------------------------


def params_of(fmt):
    return rounding_setup(bounded_format(rp.format(fmt), np.float32))[0]


def plain_range(fmt, acc, n):
    """``(least, largest)`` product magnitudes inside what `_plain_rounding` accepts
    for n terms, with a factor 2 to spare at both ends."""
    product, accumulator = rp.format(fmt), rp.format(acc)
    growth = 2 * n * (1 + 2.0**-product.man_bits) * np.exp((n + 1) * 2.0**-accumulator.man_bits)
    largest = min(float(product.max), float(accumulator.max) / growth) / 2
    least = 2 * max(float(product.min_normal), float(accumulator.min_normal) * 2.0 ** (product.man_bits + 1))
    return least, largest


def data_in(shape, seed, least, largest, zeros):
    """float32 values whose magnitudes spread log-uniformly over [least, largest]
    (random signs), some of them +-0 where `zeros`."""
    rng = np.random.default_rng(seed)
    values = np.exp2(rng.uniform(np.log2(least), np.log2(largest), shape)) * rng.choice([-1.0, 1.0], shape)
    values = values.astype(np.float32).astype(np.float64)
    values = np.clip(np.abs(values), least, largest) * np.sign(values)  # float32 rounding kept within
    if zeros:
        values[rng.random(shape) < 0.1] = 0.0
        values[rng.random(shape) < 0.1] = -0.0
    return values


@pytest.mark.parametrize("zeros", [False, True], ids=["nonzero", "zeros"])
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("fmt, acc", [("bfloat16", "bfloat16"), ("bfloat16", "float32"), ("float16", "float16"),
                                      ("e4m3", "float16"), ("e5m2", "bfloat16"), ("e4m3", "bfloat16"),
                                      ("float32", "bfloat16")], ids=str)
def test_plain_lanes_match_the_general_kernel(fmt, acc, order, zeros):
    """Operands whose products span the whole range that `_plain_rounding` admits
    (the largest and least products, the sums' bound): the lanes without range keys
    give the general kernel's bits, and they are the ones that ran."""
    n = 41
    sqrt_least, sqrt_largest = np.sqrt(plain_range(fmt, acc, n))
    a = data_in((2, 6, n), 20, sqrt_least, sqrt_largest, zeros)
    b = data_in((2, n, 70), 21, sqrt_least, sqrt_largest, zeros)
    chosen = fast._plain_rounding(a, b, params_of(fmt), params_of(acc), n)
    assert chosen == (fast.PLAIN if zeros else fast.PLAIN_NONZERO)
    assert_same(*both(a, b, fmt, acc, "nearest", general.PRODUCT, order=order))


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_plain_sums_cancelling_down_to_min_normal(order):
    """e5m2 products and sums whose least nonzero product lies just where the
    spacing G is the accumulator's min_normal: sums that cancel down to exactly
    min_normal and to zero."""
    tiny = 2.0**-14  # e5m2's min_normal
    b = np.array([5, -4, -5, 4, 6, -6, 7, -6, 0.0]) * tiny  # partial sums 5, 1, -4, 0, 6, 0, 7, 1, 1 (x tiny)
    b = np.stack([b, -b, b * 2, b[::-1]], axis=1)[None]
    a = np.ones((1, 2, b.shape[1]))
    a[0, 1] = -1.0
    params = params_of("e5m2")
    assert fast._plain_rounding(a, b, params, params, b.shape[1]) == fast.PLAIN
    actual, expected = both(a, b, "e5m2", "e5m2", "nearest", general.PRODUCT, order=order)
    assert_same(actual, expected)
    assert (np.abs(expected) == tiny).any() or order == "pairwise"


@pytest.mark.parametrize("case, fmt, acc", [
    ("nan", "bfloat16", "bfloat16"), ("inf", "bfloat16", "bfloat16"),
    ("product above the max", "e4m3", "float16"), ("product below min_normal", "e4m3", "float16"),
    ("sums could pass the max", "e4m3", "e4m3"), ("sums could reach subnormals", "bfloat16", "bfloat16"),
])
def test_plain_rounding_declines(case, fmt, acc):
    """Operands whose extremes leave the range where adding needs no clamp: the
    kernel keeps its range keys (ADDING), and its bits are the general kernel's."""
    n = 30
    a = np.full((1, 3, n), 1.5)
    b = np.full((1, n, 5), 0.75)
    if case == "nan":
        a[0, 1, 3] = np.nan
    elif case == "inf":
        b[0, 2, 1] = -np.inf
    elif case == "product above the max":
        a[0, 0, 0] = 1024.0
    elif case == "product below min_normal":
        b[0, 0, 0] = 2.0**-9
    elif case == "sums could pass the max":
        a *= 8.0  # products of 9, 30 of them: beyond 448
    elif case == "sums could reach subnormals":
        b[0, 0, 0] = 2.0**-120  # normal products, spacing 2**-127 below the min_normal
    assert fast._plain_rounding(a, b, params_of(fmt), params_of(acc), n) == fast.ADDING
    assert_same(*both(a, b, fmt, acc, "nearest", general.PRODUCT))


def test_extremes_of_the_operands():
    assert fast._extremes(np.array([1.0, -3.0, 0.25, -0.0])) == (3.0, 0.25, True)
    most, least, zeros = fast._extremes(np.array([2.0, np.nan, 5e-324]))
    assert np.isnan(most) and least == 5e-324 and not zeros
    assert fast._extremes(np.array([np.inf, -1.0])) == (np.inf, 1.0, False)
    assert fast._extremes(np.zeros((2, 3))) == (0.0, np.inf, True)


@settings(max_examples=30, deadline=None)
@given(
    product_format=st.tuples(st.integers(3, 8), st.integers(1, 10)),
    acc_format=st.tuples(st.integers(3, 8), st.integers(1, 23)),
    order=st.sampled_from(["sequential", "pairwise"]),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 90)),
    zeros=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_plain_lanes_on_random_formats(product_format, acc_format, order, shape, zeros, seed):
    """Random formats and data spread over all that `_plain_rounding` admits for
    them (where it admits anything): the lanes without range keys give the
    general kernel's bits."""
    fmt, acc = rp.FloatFormat(*product_format), rp.FloatFormat(*acc_format)
    rows, n, cols = shape
    least, largest = plain_range(fmt, acc, n)
    assume(least < largest)
    a = data_in((1, rows, n), seed, np.sqrt(least), np.sqrt(largest), zeros)
    b = data_in((1, n, cols), seed + 1, np.sqrt(least), np.sqrt(largest), zeros)
    assume(not zeros or (a == 0).any() or (b == 0).any())
    chosen = fast._plain_rounding(a, b, params_of(fmt), params_of(acc), n)
    assert chosen == (fast.PLAIN if zeros else fast.PLAIN_NONZERO)
    assert_same(*both(a, b, fmt, acc, "nearest", general.PRODUCT, key=seed, order=order))
