"""rp.sum, rp.dot, rp.matmul: every step rounded, checked against a plain Python loop
that calls rp.round after every operation (with the kernels' random counters, so
that the stochastic modes match bit for bit too)."""
import builtins
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat.accumulate import dot, matmul
from rpfloat.accumulate import sum as rp_sum
from rpfloat.rounding import round_chunk
from reference import fixed_wrap_oracle
from stats_bounds import bernstein_tolerance

MODES = ("nearest", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic", "stochastic_equal")
SEED = 20240607


def bits(x):
    return np.asarray(x, dtype=np.float64).view(np.int64)


def assert_same(actual, expected):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape
    both_nan = np.isnan(actual) & np.isnan(expected)
    mismatch = (bits(actual) != bits(expected)) & ~both_nan
    assert not mismatch.any(), f"{actual[mismatch][:5]} != {expected[mismatch][:5]}"


# -- the reference loop ------------------------------------------------------------------


def exact(value, fraction):
    """A float64 operation's result, checked to be exact (so that rounding it once
    is rounding the exact result, as the kernels do)."""
    if math.isfinite(value):
        assert Fraction(value) == fraction, "test data must keep float64 arithmetic exact"
    return value


def add(x, y):
    if not (math.isfinite(x) and math.isfinite(y)):
        return x + y
    return exact(x + y, Fraction(x) + Fraction(y))


def multiply(x, y):
    if not (math.isfinite(x) and math.isfinite(y)):
        return x * y
    return exact(x * y, Fraction(x) * Fraction(y))


def reference_reduction(a_row, b_column, fmt, acc, mode, order, kind, output, rand_bits=None):
    """One output of rp.sum (kind "sum") or rp.dot/rp.matmul ("product", "fused"),
    straight from the documented order, rp.round after every operation."""
    n = len(a_row)
    step = 5 if order == "kahan" else 3  # counters per term
    base = step * n * output

    def rounded(value, onto, counter):
        return float(round_chunk(np.float64(value), onto, mode, offset=counter, rng=SEED, rand_bits=rand_bits))

    terms = []
    for k in range(n):
        if kind == "sum":
            terms.append(float(a_row[k]))
        else:
            product = multiply(float(a_row[k]), float(b_column[k]))
            terms.append(rounded(product, fmt, base + step * k) if kind == "product" else product)
    if n == 0:
        return 0.0
    if order == "kahan":  # the compensation held in acc too (counters: 5 per term)
        total = rounded(terms[0], acc, base + 1)
        compensation = 0.0
        for k in range(1, n):
            y = rounded(add(terms[k], -compensation), acc, base + 5 * k + 1)
            s = rounded(add(total, y), acc, base + 5 * k + 2)
            d = rounded(add(s, -total), acc, base + 5 * k + 3)
            compensation = rounded(add(d, -y), acc, base + 5 * k + 4)
            total = s
        return total
    if order == "sequential":
        total = rounded(terms[0], acc, base + 1)
        for k in range(1, n):
            total = rounded(add(total, terms[k]), acc, base + 3 * k - 1)
        return total
    # pairwise, in the kernels' streaming order: term k, then one merge per trailing 1 bit of k
    stack, additions = {}, 0
    for k in range(n):
        value = rounded(terms[k], acc, base + 3 * k + 1)
        level = 0
        while (k >> level) & 1:
            value = rounded(add(stack.pop(level), value), acc, base + 3 * additions + 2)
            additions += 1
            level += 1
        stack[level] = value
    levels = sorted(stack)
    value = stack[levels[0]]
    for level in levels[1:]:
        value = rounded(add(stack[level], value), acc, base + 3 * additions + 2)
        additions += 1
    return value


def reference_sum(x, fmt, mode, order, axis):
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    axes = tuple(a % x.ndim for a in axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape(-1, int(np.prod([x.shape[a] for a in axes])))
    results = [reference_reduction(row, None, fmt, fmt, mode, order, "sum", o) for o, row in enumerate(rows)]
    return np.array(results).reshape([x.shape[d] for d in kept])


def reference_matmul(a, b, fmt, acc, mode, order, fma, rand_bits=None):
    kind = "fused" if fma else "product"
    rows, cols = a.shape[0], b.shape[1]
    return np.array(
        [[reference_reduction(a[i], b[:, j], fmt, acc, mode, order, kind, i * cols + j, rand_bits)
          for j in range(cols)] for i in range(rows)]
    )


def format_values(fmt, shape, seed, spread=3):
    """Values of `fmt` (magnitudes around 2**-spread .. 2**spread, some zeros), so that
    products and sums of a few stay exact in float64."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)
    values[rng.random(shape) < 0.1] = 0.0
    return np.asarray(rp.round(values, fmt, "nearest", overflow="saturate"), dtype=np.float64)


FORMATS = [
    rp.format("bfloat16"),
    rp.format("float16"),
    rp.format("e4m3"),  # overflows to NaN
    rp.FloatFormat(5, 2, subnormals=False),
    rp.FixedFormat(5, 4),  # saturates
]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name or repr(f))
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_sum_matches_the_reference_loop(fmt, order):
    x = format_values(fmt, (3, 11), seed=1)
    for mode in MODES:
        for axis in (1, 0, None, (0, 1)):
            expected = reference_sum(x, fmt, mode, order, axis)
            assert_same(rp_sum(x, fmt, axis=axis, mode=mode, order=order, rng=SEED), expected)


@pytest.mark.parametrize("fmt, acc", [
    (rp.format("bfloat16"), None),
    (rp.format("e4m3"), rp.format("bfloat16")),
    (rp.format("bfloat16"), rp.format("float32")),
    (rp.FixedFormat(5, 4), rp.FixedFormat(8, 4)),
    (rp.format("float16"), rp.format("e5m2")),  # an accumulator narrower than the products
])
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("fma", [False, True])
def test_matmul_matches_the_reference_loop(fmt, acc, order, fma):
    a = format_values(fmt, (2, 7), seed=2)
    b = format_values(fmt, (7, 3), seed=3)
    for mode in MODES:
        expected = reference_matmul(a, b, fmt, acc or fmt, mode, order, fma)
        result = matmul(a, b, fmt, acc=acc, fma=fma, mode=mode, order=order, rng=SEED)
        assert_same(result, expected)
        assert_same(dot(a[0], b[:, 0], fmt, acc=acc, fma=fma, mode=mode, order=order, rng=SEED), expected[0, 0])


@pytest.mark.parametrize("rand_bits", [1, 5, 12])
@pytest.mark.parametrize("fmt, acc", [
    (rp.format("bfloat16"), None),
    (rp.format("e4m3"), rp.format("bfloat16")),
    (rp.FixedFormat(5, 4), rp.FixedFormat(8, 4)),
])
def test_rand_bits_match_the_reference_loop(fmt, acc, rand_bits):
    """rand_bits=k: every rounding of every order draws the top k bits of its
    random number, as rp.round(..., rand_bits=k) at that counter does."""
    a = format_values(fmt, (2, 9), seed=4)
    b = format_values(fmt, (9, 3), seed=5)
    for order in ("sequential", "pairwise", "kahan"):
        for fma in (False, True):
            expected = reference_matmul(a, b, fmt, acc or fmt, "stochastic", order, fma, rand_bits)
            result = matmul(a, b, fmt, acc=acc, fma=fma, mode="stochastic", order=order, rng=SEED,
                            rand_bits=rand_bits)
            assert_same(result, expected)
        sums = [reference_reduction(row, None, fmt, fmt, "stochastic", order, "sum", o, rand_bits)
                for o, row in enumerate(a)]
        assert_same(rp_sum(a, fmt, axis=1, mode="stochastic", order=order, rng=SEED, rand_bits=rand_bits), sums)


def test_one_random_bit_never_rounds_up_with_a_probability_below_one_half():
    """rand_bits=1 rounds up with probability floor(2 p) / 2: adding 0.25 to a
    float16 sum whose spacing is 1 (from 1024 on) never rounds up, so the sum of
    8192 quarters stops at 1024 exactly; two bits keep p = 1/4 and the sum.

    Tolerance of the two-bit sum (exact sum 2048): below 512 every addition is
    exact; from 512 on (at most 8192 - 2048 steps) a step's rounding error D has
    mean 0 (p = 1/2 at spacing 0.5, 1/4 at spacing 1, both exact in two bits),
    |D| <= 3/4 and variance at most 1/4 * 3/4 = 3/16, until the sum reaches 2048,
    where p = 1/8 floors to 0 and the sum stays (it ends there, exact). So the
    deviation from 2048 is at most that of the errors stopped at 2048, a
    martingale: Freedman's inequality (Bernstein's for martingales) bounds it,
    failing a correct implementation with probability below 1e-6."""
    quarters = np.full(8192, 0.25)
    assert float(rp_sum(quarters, "float16", mode="stochastic", rng=SEED, rand_bits=1)) == 1024.0
    tolerance = bernstein_tolerance((8192 - 2048) * 3 / 16, 3 / 4, 1e-6)
    assert tolerance < 200  # far from the 1024 of a sum that never rounds up
    total = float(rp_sum(quarters, "float16", mode="stochastic", rng=SEED, rand_bits=2))
    assert total <= 2048 and 2048 - total < tolerance, (total, tolerance)


def test_rand_bits_with_block_sums_and_their_errors():
    x = format_values(rp.format("bfloat16"), (3, 10), seed=6)
    block_sums = rp_sum(x, "bfloat16", axis=1, mode="stochastic", rng=SEED, block_k=4, rand_bits=3)
    for o, row in enumerate(x):  # blocks of 4 exact terms, one rounding each (counters: 1, 11, 23)
        total = 0.0
        for start in range(0, len(row), 4):
            exact_sum = add(total, float(np.sum(row[start:start + 4]))) if start else float(np.sum(row[:4]))
            counter = 3 * len(row) * o + (3 * start - 1 if start else 1)
            total = float(round_chunk(np.float64(exact_sum), "bfloat16", "stochastic", offset=counter, rng=SEED,
                                      rand_bits=3))
        assert_same(block_sums[o], total)
    with pytest.raises(ValueError, match="rand_bits is for the stochastic modes only"):
        rp_sum(x, "bfloat16", rand_bits=8)
    with pytest.raises(ValueError, match="rand_bits must be from 1 to 64"):
        matmul(x, x.T, "bfloat16", mode="stochastic", rand_bits=65)
    with pytest.raises(TypeError, match="rand_bits must be an int"):
        dot(x[0], x[1], "bfloat16", mode="stochastic", rand_bits=8.0)


def test_float16_sum_of_ones_stagnates_with_nearest_but_not_stochastic():
    """2**16 additions in float16. With round-to-nearest the sum of ones sticks at
    2048, where 1 is half a spacing and ties go to the even 2048. Stochastic
    rounding stays unbiased: summing 2**16 halves (expected 32768; 2**16 ones would
    pass float16's max, 65504) lands on average on the exact sum."""
    assert float(rp_sum(np.ones(2**16), "float16")) == 2048.0
    assert float(rp_sum(np.full(2**16, 0.5), "float16")) == 1024.0
    assert float(rp_sum(np.ones(2**15), "float16", order="pairwise")) == 32768.0
    # 128 runs, one per row (each output draws its own counters). Each step adds 0.5 to a
    # float16 value s of spacing u: below 1024 exactly; above, the result is s or s + u, so
    # the rounding error D is a martingale difference with |D| <= u <= 32 (float16's largest
    # finite spacing) and conditional variance u**2 p (1 - p) = u / 2 - 1 / 4 <= 15.75
    # (p = 0.5 / u). Freedman's inequality (Bernstein's for martingales) over all the runs'
    # steps bounds the deviation of their total from 2**16 * 0.5 * runs: a correct
    # implementation fails with probability below 1e-6 (a run reaching float16's max, where
    # the bound on D ends, needs a deviation of 32736 in that run alone: below e**-300).
    runs = 128
    totals = rp_sum(np.full((runs, 2**16), 0.5), "float16", axis=1, mode="stochastic", rng=0).astype(np.float64)
    tolerance = bernstein_tolerance(runs * 2**16 * (32 / 2 - 1 / 4), 32, 1e-6) / runs
    assert abs(totals.mean() - 32768.0) < tolerance, (totals.mean(), tolerance)
    assert tolerance < 500  # far from nearest's 1024
    assert len(set(totals)) > 1


def test_every_step_is_rounded_from_the_exact_result():
    """Float64 would lose these residuals; the kernels keep them (error-free
    transformations) and round the exact results."""
    assert float(rp_sum([1.0, 2.0**-60], "bfloat16", mode="up")) == 1.0078125
    assert float(rp_sum([1.0, 2.0**-60], "float64", mode="up")) == 1 + 2.0**-52
    assert float(rp_sum([1.0, -(2.0**-60)], "float64", mode="toward_zero")) == 1 - 2.0**-53
    assert float(rp_sum([1.0, 2.0**-60], "float64", mode="odd")) == 1 + 2.0**-52
    wide = rp.FloatFormat(8, 30)
    assert float(rp_sum([1.0, 2.0**-31 + 2.0**-61], wide)) == 1 + 2.0**-30  # fl64 would be a tie
    a = 1 + 2.0**-30
    assert float(dot([1.0, a], [-1.0, a], "float64", mode="down")) == 2.0**-29  # product rounded down
    assert float(dot([1.0, a], [-1.0, a], "float64", fma=True)) == 2.0**-29 + 2.0**-60  # fused: exact
    # acc + a*b = 1 + 2**-52 + 2**-53 - 2**-113, just below a float64 midpoint: the
    # three-term sum must not lose the last term (a round-to-odd step keeps it)
    acc, x, y = 1 + 2.0**-52, 2.0**-53 * (1 + 2.0**-30), 1 - 2.0**-30
    assert float(dot([acc, x], [1.0, y], "float64", fma=True)) == 1 + 2.0**-52
    assert float(dot([acc, x], [1.0, y], "float64", fma=True, mode="up")) == 1 + 2.0**-51
    c = 1 + 2.0**-7
    assert float(dot([c], [c], "bfloat16", acc="float32")) == 1 + 2.0**-6
    assert float(dot([c], [c], "bfloat16", acc="float32", fma=True)) == 1 + 2.0**-6 + 2.0**-14


def test_stochastic_results_are_reproducible():
    x = np.random.default_rng(0).standard_normal((4, 100))
    first = rp_sum(x, "bfloat16", axis=1, mode="stochastic", rng=5)
    assert_same(rp_sum(x, "bfloat16", axis=1, mode="stochastic", rng=5), first)
    assert (bits(rp_sum(x, "bfloat16", axis=1, mode="stochastic", rng=6)) != bits(first)).any()
    a, b = x[:, :8], x[:, :8].T
    assert_same(matmul(a, b, "e4m3", mode="stochastic", rng=3), matmul(a, b, "e4m3", mode="stochastic", rng=3))


def test_rparray_operands_lend_their_mode_and_generator():
    """mode=None (the default) takes the first RPArray operand's mode; an explicit
    mode wins, and plain arrays keep nearest. rng=None with a seeded stochastic
    RPArray draws from its generator: reproducible from the array's seed."""
    values = np.full(1000, 0.1)
    up = rp.asarray(values, "fp16", "up")
    assert rp_sum(up, "fp16") == rp_sum(values, "fp16", mode="up") == up.sum(per_step=True).item()
    assert rp_sum(up, "fp16") > rp_sum(values, "fp16")  # (nearest stagnates lower)
    assert rp_sum(up, "fp16", mode="nearest") == rp_sum(values, "fp16")
    matrix = rp.asarray(np.full((3, 40), 0.1), "bf16", "toward_zero")
    same = np.asarray(matmul(matrix, matrix.T, "bf16", mode="toward_zero"))
    np.testing.assert_array_equal(np.asarray(matmul(matrix, matrix.T, "bf16")), same)
    np.testing.assert_array_equal(np.asarray(dot(np.asarray(matrix), matrix.T, "bf16")), same)  # b's mode
    assert matmul(matrix, matrix.T, "bf16").mode == "toward_zero"
    assert not np.array_equal(same, matmul(np.asarray(matrix), np.asarray(matrix).T, "bf16"))
    draws = [rp_sum(rp.asarray(values, "fp16", "stochastic", rng=7), "fp16") for _ in range(2)]
    assert draws[0] == draws[1]


def test_shapes_follow_numpy():
    rng = np.random.default_rng(4)
    a = rng.integers(-8, 8, (2, 3, 4)).astype(np.float64)
    b = rng.integers(-8, 8, (4, 5)).astype(np.float64)
    f64 = rp.format("float64")  # small integers: every step exact, so NumPy's results
    for left, right in [(a, b), (a[0], b), (a[0, 0], b), (a, b[:, 0]), (a[0, 0], b[:, 0]), (a[:1], a[0].T[None])]:
        assert_same(matmul(left, right, f64), np.matmul(left, right))
    assert_same(dot(a[0], b, f64), np.dot(a[0], b))
    assert np.ndim(dot(a[0, 0], b[:, 0], f64)) == 0
    for axis in (None, 0, 1, 2, -1, (0, 2)):
        assert_same(rp_sum(a, f64, axis=axis), np.sum(a, axis=axis))
        kept = rp_sum(a, f64, axis=axis, keepdims=True)
        assert isinstance(kept, np.ndarray) and kept.shape == np.sum(a, axis=axis, keepdims=True).shape
        assert_same(kept, np.sum(a, axis=axis, keepdims=True))
    assert float(rp_sum([], "bfloat16")) == 0.0
    assert rp_sum(np.ones((0, 3)), "bfloat16", axis=0, keepdims=True).shape == (1, 3)
    with pytest.raises(TypeError, match="keepdims must be True or False"):
        rp_sum(a, f64, keepdims=1)
    assert_same(matmul(np.ones((2, 0)), np.ones((0, 3)), "bfloat16"), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"stacks of a \(2, 3, 4\) and b \(3, 4, 5\) do not broadcast"):
        matmul(a, np.ones((3, 4, 5)), f64)


def test_result_dtypes():
    x32 = np.ones(4, dtype=np.float32)
    assert rp_sum(x32, "bfloat16").dtype == np.float32
    assert rp_sum(x32.astype(np.float64), "bfloat16").dtype == np.float64
    assert rp_sum(np.arange(4), "e4m3").dtype == np.float64  # integers count as float64
    assert isinstance(rp_sum(x32, "bfloat16"), np.floating)
    assert matmul(x32[None], x32[:, None], "e4m3", acc="float16").dtype == np.float32
    assert rp_sum(rp.asarray([1.0, 2.0], "bfloat16"), "bfloat16") == 3.0  # RPArrays give their values


def test_exp_bits_none_takes_the_result_dtypes_range():
    x = np.float32([3e38, 3e38, -1.0])  # float32 data: FloatFormat(None, 7) is bfloat16
    assert_same(rp_sum(x, rp.FloatFormat(None, 7)), rp_sum(x, "bfloat16"))
    assert math.isinf(rp_sum(x, rp.FloatFormat(None, 7)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="order"):
        rp_sum([1.0], "bfloat16", order="tree")
    with pytest.raises(TypeError, match="real"):
        rp_sum([1j], "bfloat16")
    with pytest.raises(ValueError, match="inner"):
        matmul(np.ones((2, 3)), np.ones((2, 3)), "bfloat16")
    with pytest.raises(ValueError, match="rp.matmul: a and b must have at least one dimension"):
        matmul(1.0, np.ones(3), "bfloat16")
    with pytest.raises(ValueError, match="rp.dot takes vectors and matrices.*round a \\* b for scalars"):
        dot(np.array(2.0), np.ones(7), "bfloat16")
    with pytest.raises(ValueError, match="use rp.matmul"):
        dot(np.ones((2, 2, 2)), np.ones((2, 2)), "bfloat16")
    with pytest.raises(ValueError, match=r"rp.dot: the inner dimensions differ: a has \(2, 3\), b has \(2,\)"):
        dot(np.ones((2, 3)), np.ones(2), "bfloat16")
    with pytest.raises(TypeError, match="fma"):
        dot([1.0], [1.0], "bfloat16", fma="yes")
    with pytest.raises(getattr(np, "exceptions", np).AxisError):
        rp_sum(np.ones((2, 2)), "bfloat16", axis=2)
    for axis in (True, (0, np.True_)):  # as NumPy: a bool is no axis (True would sum axis 1)
        with pytest.raises(TypeError, match="axis must be None, an int or a tuple of ints"):
            rp_sum(np.ones((2, 2)), "bfloat16", axis=axis)
    with pytest.raises(ValueError, match="unknown rounding mode"):
        rp_sum([1.0], "bfloat16", mode="sideways")


def test_integers_beyond_float64_are_refused_not_rounded():
    # 2**53 + 1 has no float64: taken as 2**53 the sum would be 0, not 1
    with pytest.raises(ValueError, match="x holds integers"):
        rp_sum(np.array([2**53 + 1, -(2**53)]), "float64")
    with pytest.raises(ValueError, match="b holds integers"):
        dot(np.ones(2), np.array([1, 2**63 - 1], np.uint64), "float64")
    # large integers that float64 holds exactly are taken as they are
    assert rp_sum(np.array([2**60, -(2**60), 3], np.int64), "float64") == 3.0
    assert dot(np.array([2**62], np.uint64), np.array([1.0]), "float64") == 2.0**62
    # Python ints beyond int64 (objects to NumPy) alike
    assert rp_sum([2**64, -(2**64), 3], "float64") == 3.0
    with pytest.raises(ValueError, match="x holds integers"):
        rp_sum([2**64 + 1, -(2**64)], "float64")
    # beside floats in a list, where NumPy makes every item a float64 (2**53 + 1 would be 2**53)
    for items in ([2**53 + 1, 0.5], [[np.int64(2**53 + 1)], [0.5]], (np.uint64(2**64 - 1), 2.0**70)):
        with pytest.raises(ValueError, match="x holds integers"):
            rp_sum(items, "float64")
    with pytest.raises(ValueError, match="a holds integers"):
        dot([2**53 + 1, 1.0], [1.0, 0.5], "float64")
    with pytest.raises(ValueError, match="b holds integers"):
        matmul([[1.0, 0.5]], [[-(2**53) - 1], [1.0]], "float64")
    assert rp_sum([2**70, 0.5, True], "float64") == 2.0**70  # exactly float64s: taken


def test_inputs_rp_round_refuses_are_refused_and_ml_dtypes_taken():
    """Long doubles (taken as float64 they would be rounded: 1 + 2**-60 up onto
    bfloat16 is 1.0078125, not 1) and masked arrays (their masked entries
    would count) are refused as rp.round refuses them; ml_dtypes arrays are
    float32 data, exactly."""
    import ml_dtypes
    wide = np.array([np.longdouble(1) + np.longdouble(2) ** -60])
    for call in (lambda: rp_sum(wide, "bfloat16", mode="up"), lambda: dot(wide, np.ones(1), "bfloat16"),
                 lambda: rp_sum(np.ones(2, np.longdouble), rp.FloatFormat(None, 7))):
        with pytest.raises(TypeError, match="wider than float64"):
            call()
    masked = np.ma.masked_array([1.0, 1000.0, 2.0], mask=[False, True, False])
    with pytest.raises(TypeError, match="x is a masked array"):
        rp_sum(masked, "float32")
    with pytest.raises(TypeError, match="a is a masked array"):
        matmul(masked, np.ones(3), "float32")
    weights = np.array([1.5, 2.0, -0.375], ml_dtypes.bfloat16)
    as_float32 = weights.astype(np.float32)
    assert_same(rp_sum(weights, "bfloat16"), rp_sum(as_float32, "bfloat16"))
    assert_same(matmul(weights, weights, "float32"), matmul(as_float32, as_float32, "float32"))


@pytest.mark.parametrize("mode", MODES)
def test_fused_steps_keep_an_overflowed_accumulator_infinite(mode):
    """inf + a finite exact product is inf, as in the reference loop; the two_sum of
    the fused step's low parts (inf - inf) must not turn it into NaN."""
    a = np.array([[1.0, 1.0, 2.0**-7, -2.0**-6], [-1.0, -1.0, 2.0**-7, 2.0**-6]]) * 2.0**127
    b = np.ones((4, 1))
    fmt = rp.format("bfloat16")
    expected = reference_matmul(a, b, fmt, fmt, mode, "sequential", True)
    assert_same(matmul(a, b, fmt, fma=True, mode=mode, rng=1), expected)
    if mode == "nearest":
        assert list(expected[:, 0]) == [np.inf, -np.inf]


@pytest.mark.parametrize("kernel", ["general", "vectorised"])
@pytest.mark.parametrize("fma", [False, True])
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_negative_zero_sums_stay_negative(fma, order, kernel):
    """-0 + -0 is -0 (IEEE 754), with or without a fused step, in every kernel."""
    a = np.array([[-0.0, 0.0, -0.0], [0.0, 0.0, 0.0], [-1.0, 1.0, -0.0]])
    if kernel == "general":  # a value of 53 significant bits: float64 products may be inexact
        a = np.vstack([a, [1 / 3, 0.0, 0.0]])
    b = np.array([[1.0] * 5, [-1.0] * 5, [3.0] * 5])
    fmt = rp.format("bfloat16")
    expected = reference_matmul(a, b, fmt, fmt, "nearest", order, fma)
    assert_same(matmul(a, b, fmt, fma=fma, order=order), expected)
    assert np.signbit(expected[0, 0]) and not np.signbit(expected[1, 0])


@settings(max_examples=200, deadline=None)
@given(int_bits=st.integers(1, 8), frac_bits=st.integers(0, 6), signed=st.booleans(),
       mode=st.sampled_from(["nearest", "nearest_away", "toward_zero", "up", "down", "odd"]),
       a=st.floats(2.0**20, 2.0**60), b=st.floats(2.0**20, 2.0**60), signs=st.integers(0, 3),
       fma=st.booleans())
# the exact product positive, its float64 remainder modulo the word negative: toward_zero went up
@example(2, 2, True, "toward_zero", 3.6550110708070984e+16, 1552.2724371548684, 3, False)
# a tie (a whole number of steps and a half) past the range: nearest_away went to even
@example(2, 2, True, "nearest_away", 447793763965829.7, 183354256434230.0, 0, False)
def test_wrap_rounds_exact_products_past_float64_once(int_bits, frac_bits, signed, mode, a, b, signs, fma):
    """A product that float64 does not hold, far past a wrapping fixed-point
    format's range: rounded exactly onto the grid in `mode`, then wrapped, as
    the fixed-point oracle written from the definition says (the residual of
    the product spans many words; reduced with the value, it once flipped z's
    sign, and toward_zero and nearest_away decided by the wrong one)."""
    fmt = rp.FixedFormat(int_bits, frac_bits, signed=signed, overflow="wrap")
    a, b = (-a if signs & 1 else a), (-b if signs & 2 else b)
    want = fixed_wrap_oracle(Fraction(a) * Fraction(b), fmt, mode)
    assert float(dot([a], [b], fmt, mode=mode, fma=fma)) == want


@settings(max_examples=150, deadline=None)
@given(int_bits=st.integers(1, 8), frac_bits=st.integers(0, 6), signed=st.booleans(),
       mode=st.sampled_from(["nearest", "nearest_away", "toward_zero", "up", "down", "odd"]),
       terms=st.lists(st.floats(-2.0**120, 2.0**120, allow_subnormal=False).filter(lambda t: t == 0 or abs(t) > 2**-30),
                      min_size=1, max_size=5))
# a block sum far past the range whose remainder float64 does not hold: every mode gave -1
@example(4, 4, True, "nearest", [4.153837486827862e+35, -0.000457763671875, 5383208929591296.0])
@example(4, 4, True, "down", [4.153837486827862e+35, -0.000457763671875, 5383208929591296.0])
def test_wrap_rounds_exact_block_sums_once(int_bits, frac_bits, signed, mode, terms):
    """A block sum (block_k as long as the sum) into a wrapping fixed-point
    format: the exact sum of the terms, however far past the range, rounded
    once onto the grid and then wrapped, as the fixed-point oracle says."""
    fmt = rp.FixedFormat(int_bits, frac_bits, signed=signed, overflow="wrap")
    want = fixed_wrap_oracle(builtins.sum(Fraction(t) for t in terms), fmt, mode)
    assert float(rp_sum(terms, fmt, mode=mode, block_k=len(terms))) == want
    assert float(dot(terms, np.ones(len(terms)), fmt, mode=mode, block_k=len(terms))) == want


@pytest.mark.parametrize("order", ["sequential", "pairwise", "kahan"])
def test_fused_products_of_operands_past_2_995_round_the_float64_product(order):
    """Past 2**995 the products' error terms overflow their split: the float64
    product is rounded (documented), never NaN from finite operands. Here every
    product passes bfloat16's max, so the directed modes toward 0 saturate."""
    a, b = np.array([1e308, 1.5e308, 1e300]), np.array([1.0, 1.0, 0.5])
    largest = rp.format("bfloat16").max
    for mode, want in (("toward_zero", largest), ("down", largest)):
        for fma in (True, False):
            assert rp.dot(a, b, "bfloat16", fma=fma, mode=mode, order=order) == want, (mode, fma)
        assert rp.dot(-a, b, "bfloat16", fma=True, mode="toward_zero", order=order) == -largest


@pytest.mark.parametrize("kwargs", [dict(fma=True), dict(block_k=2)])
def test_products_of_27_bit_operands_are_not_taken_as_exact(kwargs):
    """(2**27 - 1)**2 = 2**54 - 2**28 + 1 needs 54 bits: float64 does not hold it,
    so the product's error must be kept (the exact sum is -2**28 + 1)."""
    x = float(2**27 - 1)
    a, b = np.array([1.0, x]), np.array([-(2.0**54), x])
    assert float(dot(a, b, "float64", **kwargs)) == -(2.0**28) + 1


@pytest.mark.parametrize("name", ["e4m3", "e2m1", "q8.8", "float16", "bfloat16", "e5m2", "float32"])
@pytest.mark.parametrize("kwargs", [dict(block_k=2), dict(fma=True), dict(block_k=2, mode="nearest_away"),
                                    dict(fma=True, mode="nearest_away")])
def test_exact_sums_just_below_the_overflow_midpoint_round_to_max(name, kwargs):
    """max + (half a step past max) * (1 - 2**-60), summed exactly (block_k) or in
    one fused step: its float64 is the midpoint past max itself, the exact sum
    lies below it, so nearest (ties even or away) gives max, as rp.round does.
    Formats with inf too: inf above max is no neighbour to tie with."""
    fmt = rp.format(name)
    step = 2.0**-fmt.frac_bits if isinstance(fmt, rp.FixedFormat) else 2.0**(fmt.emax - fmt.man_bits)
    a = np.array([1.0, 1.0 + 2.0**-30])
    b = np.array([float(fmt.max), step / 2 * (1.0 - 2.0**-30)])  # a[1] * b[1] = step / 2 * (1 - 2**-60)
    mode = kwargs.get("mode", "nearest")
    below = float(fmt.max) + step / 2 * (1.0 - 2.0**-40)
    if below < float(fmt.max) + step / 2:  # (where a float64 holds such a number)
        assert float(rp.round(np.array([below]), fmt, mode)[0]) == fmt.max
    assert float(dot(a, b, fmt, **kwargs)) == fmt.max
    if not isinstance(fmt, rp.FixedFormat):
        assert float(dot(-a, b, fmt, **kwargs)) == -fmt.max


def test_out_receives_the_result_bit_for_bit():
    """out= of rp.sum / rp.dot / rp.matmul: the same bits as the returned result
    (stochastic mode with one seed), `out` itself returned, an operand as `out`."""
    generator = np.random.default_rng(SEED)
    a = generator.standard_normal((2, 3, 40)).astype(np.float32)
    b = generator.standard_normal((40, 5)).astype(np.float32)
    options = dict(acc="float16", mode="stochastic", rng=7)
    expected = matmul(a, b, "e4m3", **options)
    out = np.full(expected.shape, np.nan, np.float32)
    assert matmul(a, b, "e4m3", out=out, **options) is out
    assert_same(out, expected)
    vector = dot(a[0, 0], b[:, 1], "e4m3", **options)
    out = np.full((), np.nan, np.float32)
    assert dot(a[0, 0], b[:, 1], "e4m3", out=out, **options) is out
    assert_same(out, vector)
    for axis, keepdims in ((None, False), (2, False), ((0, 2), True)):
        expected = rp_sum(a, "bfloat16", axis=axis, keepdims=keepdims, mode="stochastic", rng=3)
        out = np.full(np.shape(expected), np.nan, np.float32)
        assert rp_sum(a, "bfloat16", axis=axis, keepdims=keepdims, mode="stochastic", rng=3, out=out) is out
        assert_same(out, expected)
    swapped = np.full(expected.shape, np.nan, expected.dtype.newbyteorder())  # either byte order, as rp.round
    assert rp_sum(a, "bfloat16", axis=(0, 2), keepdims=True, mode="stochastic", rng=3, out=swapped) is swapped
    assert_same(swapped, expected)
    square = generator.standard_normal((33, 33))
    expected = matmul(square, square, "bfloat16", order="pairwise")
    matmul(square, square, "bfloat16", order="pairwise", out=square)  # reads done before the write
    assert_same(square, expected)


def test_out_of_rparray_operands_is_an_rparray_of_acc():
    x = rp.asarray(np.linspace(-3, 3, 12).reshape(3, 4), "bfloat16", mode="up")
    y = rp.asarray(np.linspace(1, 2, 8).reshape(4, 2), "bfloat16", mode="up")
    out = rp.asarray(np.zeros((3, 2)), "float16", mode="down")
    assert matmul(x, y, "bfloat16", acc="float16", out=out) is out
    assert_same(out, matmul(x, y, "bfloat16", acc="float16"))
    assert (out.fmt.name, out.mode) == ("float16", "down")  # out keeps its own mode
    with pytest.raises(TypeError, match="out must be an RPArray"):
        matmul(x, y, "bfloat16", out=np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="result's format bfloat16"):
        matmul(x, y, "bfloat16", out=out)


@pytest.mark.parametrize("out, error, message", [
    (np.zeros((3, 2), np.float32), TypeError, "result dtype float64, got float32"),
    (np.zeros((2, 3)), ValueError, r"result's shape \(3, 2\), got \(2, 3\)"),
    ([[0.0] * 2] * 3, TypeError, "numpy ndarray, got list"),
    (np.broadcast_to(np.zeros(2), (3, 2)), ValueError, "writeable"),
])
def test_out_of_the_wrong_kind_is_refused_before_any_work(out, error, message):
    a, b = np.ones((3, 4)), np.ones((4, 2))
    snapshot = np.array(out, copy=True)
    with pytest.raises(error, match=message):
        matmul(a, b, "bfloat16", out=out)
    with pytest.raises(error, match=message):
        rp_sum(np.ones((4, 3, 2)), "bfloat16", axis=0, out=out)
    np.testing.assert_array_equal(np.asarray(out), snapshot)
