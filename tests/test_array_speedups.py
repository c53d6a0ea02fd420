"""RPArray fast paths (rpfloat.array: float32 arithmetic, no residual, checked
elements) give the bits of the float64 error-free path, and the per-step methods
(sum/dot with per_step=True, matmul) are rp.sum / rp.dot / rp.matmul."""
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rpfloat as rp
import rpfloat.array as rparray
from rpfloat.array import RPArray, asarray
from reference import stochastic_probability
from stats_bounds import assert_binomial
from strategies import input_lists

MODES = ("nearest", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic", "stochastic_equal")

FORMATS = [
    rp.format("bfloat16"),
    rp.format("float16"),
    rp.format("e4m3"),
    rp.format("e5m2"),
    rp.format("tf32"),
    rp.format("float32"),
    rp.FloatFormat(8, 7, overflow="saturate", name="bfloat16_saturating"),
    rp.FloatFormat(11, 10, name="half_wide_range"),  # float64 carrier, p = 11
    rp.FixedFormat(8, 8),
]

BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide}
UNARY = {"sqrt": np.sqrt, "square": np.square, "reciprocal": np.reciprocal}


def same_bits(actual, expected):
    """Equal bit for bit (as float64), NaN equal to NaN: the sign of NaN + NaN is
    whichever operand the hardware propagates."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape
    nan = np.isnan(actual) & np.isnan(expected)
    mismatch = (actual.view(np.int64) != expected.view(np.int64)) & ~nan
    assert not mismatch.any(), f"{actual[mismatch][:5]} != {expected[mismatch][:5]}"


def both_paths(monkeypatch, compute):
    """``compute()`` with the fast paths, then with the float64 path only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = compute()
        with monkeypatch.context() as patch:
            patch.setattr(rparray, "FAST_PATHS", False)
            exact = compute()
    return fast, exact


def check(monkeypatch, compute):
    fast, exact = both_paths(monkeypatch, compute)
    assert isinstance(fast, RPArray) and fast.fmt == exact.fmt and fast.mode == exact.mode
    same_bits(fast, exact)


# -- the fast paths against the float64 path ---------------------------------------------

# monkeypatch is function-scoped, and both_paths restores it within each example; too_slow is
# what conftest.py's profile suppresses (numba compiles on first use), which these settings replace
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data(), fmt=st.sampled_from(FORMATS), mode=st.sampled_from(MODES),
       name=st.sampled_from(sorted(BINARY)))
def test_binary_operations_match_the_exact_path(monkeypatch, data, fmt, mode, name):
    xs = data.draw(input_lists(fmt, max_size=40))
    ys = data.draw(st.lists(st.sampled_from(xs) | st.floats(allow_nan=True), min_size=len(xs), max_size=len(xs)))
    seed = data.draw(st.integers(0, 2**32))

    def compute():
        a = asarray(xs, fmt, mode, rng=seed)
        b = asarray(ys, fmt, mode, rng=seed + 1)
        return BINARY[name](a, b)

    check(monkeypatch, compute)


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data(), fmt=st.sampled_from(FORMATS), mode=st.sampled_from(MODES),
       name=st.sampled_from(sorted(UNARY)))
def test_unary_operations_match_the_exact_path(monkeypatch, data, fmt, mode, name):
    xs = data.draw(input_lists(fmt, max_size=40))
    seed = data.draw(st.integers(0, 2**32))
    check(monkeypatch, lambda: UNARY[name](asarray(xs, fmt, mode, rng=seed)))


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data(), fmt=st.sampled_from(FORMATS), mode=st.sampled_from(MODES),
       name=st.sampled_from(sorted(BINARY)), scalar=st.sampled_from(
           [1.5, 3, 2.0**-20, 2.0**-140, 1e30, -0.0, 0.1, 2**60 + 1, np.float32(0.75), np.float16(-2.5)]),
       scalar_first=st.booleans())
def test_scalar_operands_match_the_exact_path(monkeypatch, data, fmt, mode, name, scalar, scalar_first):
    xs = data.draw(input_lists(fmt, max_size=30))
    seed = data.draw(st.integers(0, 2**32))

    def compute():
        a = asarray(xs, fmt, mode, rng=seed)
        return BINARY[name](scalar, a) if scalar_first else BINARY[name](a, scalar)

    check(monkeypatch, compute)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_mixed_formats_broadcasting_and_zero_d(monkeypatch, mode, name):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 40)) * 2.0 ** rng.integers(-30, 30, (3, 40))
    y = rng.standard_normal(40) * 2.0 ** rng.integers(-30, 30, 40)
    ufunc = BINARY[name]

    def compute():
        a = asarray(x, "bfloat16", mode, rng=1)
        b = asarray(y, "e4m3", mode, rng=2)       # contained in bfloat16
        c = asarray(x[0], "float32", mode, rng=3)
        return [ufunc(a, b), ufunc(b, a), ufunc(a[:, ::2], b[1::2]), ufunc(a[1, 2], b[3]), ufunc(c, a), ufunc(b, c)]

    fast, exact = both_paths(monkeypatch, compute)
    for f, e in zip(fast, exact):
        assert f.fmt == e.fmt and f.shape == e.shape
        same_bits(f, e)


@pytest.mark.parametrize("mode", MODES)
def test_in_place_and_out_into_another_format(monkeypatch, mode):
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(300) * 50, rng.standard_normal(300)

    def compute():
        a = asarray(x, "bfloat16", mode, rng=1)
        b = asarray(y, "bfloat16", mode, rng=2)
        keep = a
        a *= b
        a += 2.0**-30
        a /= b
        assert a is keep
        narrow = asarray(np.zeros(300), "e4m3", mode, rng=3)  # holds fewer values than the operands
        np.add(a, b, out=narrow)
        np.multiply(a, b, out=(narrow,))
        return rp.asarray(np.concatenate([np.asarray(a), np.asarray(narrow)]), "float32")

    check(monkeypatch, compute)


@pytest.mark.parametrize("mode", ["nearest", "up", "odd", "stochastic", "stochastic_equal"])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide"])
def test_large_arrays_with_hard_elements_across_chunks(monkeypatch, mode, name):
    """More elements than one two_sum chunk, with sums that float32 cannot hold,
    products that underflow or overflow it, and exact quotients, spread over the
    array (the exact rounding of an element must use its own random number)."""
    rng = np.random.default_rng(7)
    n = 3 * 16384 + 17
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    hard = rng.choice(n, 60, replace=False)
    x[hard[:20]] *= 2.0**40          # sums: a gap beyond float32's 24 bits
    x[hard[20:30]] = 1.0078125 * 2.0**-80   # products below float32's subnormals: 0 there
    y[hard[20:30]] = 1.5 * 2.0**-75
    x[hard[30:40]] = 2.0**100        # products beyond float32's range
    y[hard[30:40]] = -(2.0**100)
    y[hard[40:50]] = 1.0             # exact quotients: values of the format
    x[hard[50:]] = np.inf

    def compute():
        return BINARY[name](asarray(x, "bfloat16", mode, rng=11), asarray(y, "bfloat16", mode, rng=12))

    check(monkeypatch, compute)


@pytest.mark.parametrize("mode", ["nearest", "nearest_away", "up", "odd"])
@pytest.mark.parametrize("fmt", ["tf32", "bfloat16"])
def test_products_in_float32s_subnormal_range(monkeypatch, fmt, mode):
    """Products of 11-bit significands near 2**-140: float32 rounds them to its
    subnormal grid first, which can land on a midpoint of the format's grid."""
    rng = np.random.default_rng(10)
    x = rng.integers(2**10, 2**11, 20000) * 2.0**-75
    y = rng.integers(2**10, 2**11, 20000) * 2.0**-76
    check(monkeypatch, lambda: asarray(x, fmt, mode) * asarray(y, fmt, mode))


@pytest.mark.parametrize("mode", ["nearest", "nearest_away", "toward_zero", "up"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_float32_overflow_under_a_saturating_policy(monkeypatch, mode, name):
    """bfloat16 values whose sum, product or quotient overflows float32: float32
    gives inf, which the format keeps, but the exact result saturates."""
    fmt = rp.FloatFormat(8, 7, overflow="saturate")
    big, small = fmt.max, 2.0**-120
    x = np.array([big, -big, big, 1.0, big, 3.0])
    y = np.array([big, -big, -big, 2.0, small, big])
    check(monkeypatch, lambda: BINARY[name](asarray(x, fmt, mode), asarray(y, fmt, mode)))

    def into_a_wider_range():  # the exact results are values of the destination's format
        wide = asarray(np.zeros(6), rp.FloatFormat(11, 10), mode)
        return BINARY[name](asarray(x, "bfloat16", mode), asarray(y, "bfloat16", mode), out=wide)

    check(monkeypatch, into_a_wider_range)


def test_stochastic_results_draw_the_same_random_numbers(monkeypatch):
    """The fast path rounds element i with random number i of the operation's seed,
    and draws one seed from the generator per operation, as the float64 path does."""
    x = np.full(1000, 1.0)
    y = np.full(1000, 2.0**-10)  # 1 + 2**-10: an eighth of a bfloat16 ulp (2**-7)

    def compute():
        a = asarray(x, "bfloat16", "stochastic", rng=4)
        b = asarray(y, "bfloat16", "stochastic", rng=5)
        first = a + b
        second = a + b  # the generator moved on: other random numbers
        return rp.asarray(np.concatenate([np.asarray(first), np.asarray(second)]), "float32")

    fast, exact = both_paths(monkeypatch, compute)
    same_bits(fast, exact)
    up = np.asarray(fast) > 1
    # each operation rounds 1 + 2**-10 up with the oracle's probability (1/8): Chernoff
    # bounds (tests/stats_bounds.py) that a correct implementation fails with
    # probability below 1e-9 each (they accept 63 to 198 of 1000)
    _, _, p = stochastic_probability(1 + 2.0**-10, rp.format("bfloat16"))
    assert p == Fraction(1, 8)
    assert_binomial(int(up[:1000].sum()), 1000, p, 1e-9, "first sum rounded up")
    assert_binomial(int(up[1000:].sum()), 1000, p, 1e-9, "second sum rounded up")
    assert not np.array_equal(up[:1000], up[1000:])


def test_fast_paths_can_be_turned_off():
    assert rparray.FAST_PATHS is True


# -- per-step accumulation -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "stochastic"])
@pytest.mark.parametrize("order", ["sequential", "pairwise", "kahan"])
@pytest.mark.parametrize("acc", [None, "float32", "e5m2"])
def test_sum_per_step_is_rp_sum(mode, order, acc):
    x = np.random.default_rng(8).standard_normal((30, 7)) * 10
    for axis in (None, 0, 1, (0, 1)):
        a = asarray(x, "bfloat16", mode, rng=21)
        twin = asarray(x, "bfloat16", mode, rng=21)
        result = a.sum(axis, per_step=True, acc=acc, order=order)
        expected = rp.sum(np.asarray(twin), acc or "bfloat16", axis=axis, mode=mode, order=order, rng=twin.rng)
        fmt = rp.format(acc or "bfloat16")
        assert isinstance(result, RPArray) and result.fmt == fmt and result.mode == mode
        assert result.dtype == fmt.carrier and result.shape == np.shape(expected)
        same_bits(result, expected)
        if mode == "stochastic":
            assert result.rng is a.rng  # results share the generator, as ufunc results do


@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_rp_sum_of_an_rparray_is_an_rparray(mode):
    """As rp.dot and rp.matmul of RPArrays: rp.sum gives what the method gives,
    an RPArray of the accumulator's format, drawing from the array's generator."""
    x = np.random.default_rng(3).standard_normal((6, 5)) * 100
    for axis, keepdims in ((None, False), (0, False), (1, True)):
        a, twin = asarray(x, "bfloat16", mode, rng=5), asarray(x, "bfloat16", mode, rng=5)
        result = rp.sum(a, "e5m2", axis=axis, keepdims=keepdims)
        expected = twin.sum(axis, per_step=True, acc="e5m2", keepdims=keepdims)
        assert isinstance(result, RPArray) and result.fmt == rp.format("e5m2") and result.mode == mode
        assert result.dtype == np.float16 and result.shape == expected.shape
        same_bits(result, expected)
        if mode == "stochastic":  # the same generator, drawn from as often as the method draws
            assert result.rng is a.rng
            assert a.rng.bit_generator.state == twin.rng.bit_generator.state
    precision_only = rp.FloatFormat(None, 7)  # within float16's range, as the array rounds
    column = asarray([6e4, 6e4, -6e4], "bfloat16")
    same_bits(rp.sum(column, precision_only), rp.sum(np.asarray(column), rp.FloatFormat(5, 7)))


@pytest.mark.parametrize("mode", ["nearest", "up", "stochastic"])
@pytest.mark.parametrize("options", [{}, {"acc": "float32"}, {"fma": True, "acc": "float32"},
                                     {"order": "pairwise"}, {"order": "kahan"}, {"block_k": 4}])
def test_matmul_and_dot_per_step_are_rp_matmul(mode, options):
    rng = np.random.default_rng(9)
    x, y, v = rng.standard_normal((2, 5, 9)), rng.standard_normal((9, 3)), rng.standard_normal(9)
    a, b, u = (asarray(t, "bfloat16", mode, rng=31) for t in (x, y, v))
    twins = [asarray(t, "bfloat16", mode, rng=31) for t in (x, y, v)]
    acc = rp.format(options.get("acc", "bfloat16"))
    pairs = [(a.matmul(b, **options), rp.matmul(np.asarray(twins[0]), np.asarray(twins[1]), "bfloat16",
                                                  mode=mode, rng=twins[0].rng, **options)),
             (u.dot(b, per_step=True, **options), rp.dot(np.asarray(twins[2]), np.asarray(twins[1]), "bfloat16",
                                                          mode=mode, rng=twins[2].rng, **options)),
             (u.matmul(v, **options), rp.matmul(np.asarray(twins[2]), v, "bfloat16",
                                                mode=mode, rng=twins[2].rng, **options))]
    for result, expected in pairs:
        assert isinstance(result, RPArray) and result.fmt == acc and result.mode == mode
        assert result.dtype == acc.carrier
        same_bits(result, expected)
    # rp.matmul of RPArrays draws once from their generator, as the methods do
    a_twin, b_twin = asarray(x, "bfloat16", mode, rng=32), asarray(y, "bfloat16", mode, rng=32)
    by_function = rp.matmul(a_twin, b_twin, "bfloat16", **options)
    by_method = asarray(x, "bfloat16", mode, rng=32).matmul(asarray(y, "bfloat16", mode, rng=32), **options)
    same_bits(by_function, by_method)
    if mode == "stochastic":
        assert a_twin.rng.bit_generator.state == by_method.rng.bit_generator.state


@pytest.mark.parametrize("mode", ["nearest", "toward_zero"])
def test_precision_only_accumulators_keep_their_carriers_range(mode):
    """FloatFormat(None, 7) in an RPArray has float16's range (its carrier's), as
    the array's own rounding gives it: per-step results round within it, not
    within the operands' float32 range and then overflow in the cast."""
    precision_only, in_float16_range = rp.FloatFormat(None, 7), rp.FloatFormat(5, 7)
    assert float(asarray([1e6], precision_only, "toward_zero")[0]) == in_float16_range.max
    a = asarray([[1000.0, 300.0]], "bfloat16", mode)
    values = np.asarray(a)
    products_in_bfloat16 = rp.matmul(values, values.T, "bfloat16", acc=in_float16_range, mode=mode)
    cases = [(a.matmul(a.T, acc=precision_only), products_in_bfloat16),
             (rp.matmul(a, a.T, "bfloat16", acc=precision_only), products_in_bfloat16),
             (rp.matmul(a, a.T, precision_only), rp.matmul(values, values.T, in_float16_range, mode=mode))]
    for result, expected in cases:
        assert result.fmt == precision_only and result.dtype == np.float16
        same_bits(result, expected)
    column = asarray([6e4, 6e4, -6e4], "bfloat16", mode)
    same_bits(column.sum(per_step=True, acc=precision_only),
              rp.sum(np.asarray(column), in_float16_range, mode=mode))


def test_per_step_rounding_differs_from_one_rounding():
    a = asarray(np.ones(4096), "float16")
    assert float(a.sum()) == 4096.0 and float(np.sum(a)) == 4096.0
    assert float(a.sum(per_step=True)) == 2048.0
    assert float(a.sum(per_step=True, order="pairwise")) == 4096.0
    x = asarray([[1.0, 2.0**-8, 2.0**-8]], "bfloat16")
    y = asarray([[1.0], [1.0], [1.0]], "bfloat16")
    assert float((x @ y)[0, 0]) == float(np.matmul(x, y)[0, 0]) == 1.0078125
    assert float(x.matmul(y)[0, 0]) == 1.0
    assert float(x[0].dot(y[:, 0])) == 1.0078125
    assert float(x[0].dot(y[:, 0], per_step=True)) == 1.0


def test_matmul_takes_the_combined_format_and_plain_operands():
    wide = asarray([[1.0, 2.0**-9]], "bfloat16", "up")
    narrow = asarray([[1.0], [1.0]], "e4m3", "nearest")
    result = narrow.T.matmul(wide.T)  # bfloat16 holds every e4m3 value: its format and mode
    assert result.fmt == rp.format("bfloat16") and result.mode == "up"
    plain = wide.matmul(np.array([[1.0], [1.0]]))
    assert plain.fmt == rp.format("bfloat16") and float(plain[0, 0]) == 1.0078125  # up from 1 + 2**-9


def test_step_options_need_per_step():
    a = asarray([1.0, 2.0], "bfloat16")
    with pytest.raises(TypeError, match="per_step=True"):
        a.sum(acc="float32")
    with pytest.raises(TypeError, match="per_step=True"):
        a.dot(a, order="pairwise")
    with pytest.raises(TypeError, match="NumPy options"):
        a.sum(per_step=True, dtype=np.float64)
    with pytest.raises(TypeError, match="per_step must be True or False, got 'yes'"):
        a.sum(per_step="yes")
    with pytest.raises(TypeError, match="per_step must be True or False, got 1"):
        a.dot(a, per_step=1)
    kept = asarray([[1.0, 2.0]], "bfloat16").sum(axis=1, per_step=True, keepdims=True)
    assert isinstance(kept, RPArray) and kept.shape == (1, 1) and float(kept[0, 0]) == 3.0
    with pytest.raises(ValueError, match="matmul"):
        asarray(np.ones((2, 2, 2)), "bfloat16").dot(a, per_step=True)
