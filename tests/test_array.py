"""RPArray (docs/arrays.md): ufuncs, array functions, indexing, format combination, and
correct rounding of + - * / sqrt checked against an exact Fraction oracle."""
import copy
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import reference
from reference import fixed_wrap_oracle
import rpfloat as rp
from rpfloat.array import RPArray, asarray, format_contains
from stats_bounds import assert_binomial

DETERMINISTIC = reference.DETERMINISTIC_MODES


def bits(x):
    """float64 bit patterns, so that -0 and NaN payloads are compared too."""
    return np.asarray(x, dtype=np.float64).view(np.int64)


def assert_same(actual, expected):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    both_nan = np.isnan(actual) & np.isnan(expected)
    mismatch = (bits(actual) != bits(expected)) & ~both_nan
    assert not mismatch.any(), f"first mismatches: {actual[mismatch][:5]} != {expected[mismatch][:5]}"


# -- the exact oracle ---------------------------------------------------------------------


def exact_round(z: Fraction, fmt, mode: str) -> float:
    """Rounding (docs/rounding.md) of the exact rational `z` onto `fmt` (deterministic modes)."""
    negative = z < 0
    lo, hi, lo_odd, hi_odd = reference.neighbours(z, fmt, np.float64)
    away = lo if negative else hi
    if lo == hi:
        r = lo
    elif mode == "toward_zero":
        r = hi if negative else lo
    elif mode == "up":
        r = hi
    elif mode == "down":
        r = lo
    elif mode == "odd":
        r = away if lo_odd == hi_odd else (lo if lo_odd else hi)
    else:
        below, above = z - lo, hi - z
        if below != above:
            r = lo if below < above else hi
        elif mode == "nearest_away":
            r = away
        else:
            r = away if lo_odd == hi_odd else (lo if lo_odd == 0 else hi)
    if r > Fraction(fmt.max) or r < Fraction(getattr(fmt, "min", -fmt.max)):
        # the overflow result depends only on the sign, the mode and the policy
        beyond = 4 * max(abs(fmt.max), abs(getattr(fmt, "min", fmt.max)), 1.0)
        return reference.round_reference(-beyond if negative else beyond, fmt, mode)
    if r == 0:
        return reference.round_reference(-0.0 if negative else 0.0, fmt, mode)
    return float(r)


def sqrt_proxy(a: float) -> Fraction:
    """A rational that every rounding (to at most 1075 binary places) treats like
    sqrt(a): sqrt(a) itself when it is dyadic, else a point strictly inside the same
    interval of width 2**-1200."""
    places = 1200
    scaled = Fraction(a) * 4**places
    assert scaled.denominator == 1
    root = math.isqrt(int(scaled))
    if root * root == scaled:
        return Fraction(root, 2**places)
    return Fraction(2 * root + 1, 2 ** (places + 1))


OPERATIONS = {
    "add": (np.add, lambda a, b: Fraction(a) + Fraction(b)),
    "subtract": (np.subtract, lambda a, b: Fraction(a) - Fraction(b)),
    "multiply": (np.multiply, lambda a, b: Fraction(a) * Fraction(b)),
    "divide": (np.divide, lambda a, b: Fraction(a) / Fraction(b)),
    "sqrt": (np.sqrt, lambda a, b: sqrt_proxy(a)),
}

# (format, precision regime): p <= 25 is where fl64-then-round is already right for nearest
ORACLE_FORMATS = [
    rp.format("bfloat16"),
    rp.format("float32"),
    rp.FloatFormat(8, 25),  # p = 26: 53 >= 2p holds (+ - * / are safe), 53 >= 2p + 2 not (sqrt)
    rp.FloatFormat(8, 30),
    rp.FloatFormat(11, 51),
    rp.format("float64"),
    rp.format("e4m3"),
    rp.FloatFormat(5, 2, subnormals=False),
    rp.FixedFormat(20, 20),
    rp.FixedFormat(3, 49),
]


def operand_pairs(fmt, count=120, seed=0):
    """Values of `fmt`: random ones, and pairs whose sum lies a hair off a
    midpoint or a value (where double rounding goes wrong)."""
    rng = np.random.default_rng(seed)
    if isinstance(fmt, rp.FixedFormat):
        top = min(fmt.bits - 2, 40)
        a = rng.integers(-(2**top), 2**top, count) * fmt.eps
        b = rng.integers(-(2**top), 2**top, count) * fmt.eps
        b[::3] = rng.integers(1, 4, b[::3].size) * fmt.eps  # one or a few steps
    else:
        spread = 6 if fmt.exp_bits <= 5 else 20
        a = rng.standard_normal(count) * 2.0 ** rng.integers(-spread, spread, count)
        b = rng.standard_normal(count) * 2.0 ** rng.integers(-spread, spread, count)
        # b = +-(half a spacing of a)(1 +- 2**-(p-1)): a + b a hair off a's midpoints;
        # b = a * 2**-40: a + b a hair off a value
        frexp_exp = np.frexp(a)[1]
        half_spacing = np.ldexp(1.0, frexp_exp - 1 - fmt.precision)
        hair = 1 + rng.choice([-1, 1], count) * 2.0 ** -(fmt.precision - 1)
        b[::4] = (rng.choice([-1, 1], count) * half_spacing * hair)[::4]
        b[1::4] = a[1::4] * 2.0**-60
    a = np.asarray(rp.round(a, fmt, "nearest"), dtype=np.float64)
    b = np.asarray(rp.round(b, fmt, "nearest"), dtype=np.float64)
    keep = np.isfinite(a) & np.isfinite(b) & (b != 0)
    return a[keep], b[keep]


def oracle(name, a, b, fmt, mode):
    exact = OPERATIONS[name][1]
    results = []
    for x, y in zip(a, b):
        if name == "sqrt" and x < 0:
            results.append(math.nan)
        else:
            results.append(exact_round(exact(x, y), fmt, mode))
    return np.array(results)


@pytest.mark.parametrize("fmt", ORACLE_FORMATS, ids=lambda f: f.name or repr(f))
@pytest.mark.parametrize("name", list(OPERATIONS))
def test_basic_operations_are_correctly_rounded(fmt, name):
    a, b = operand_pairs(fmt)
    if name == "sqrt":
        a = np.abs(a)
    ufunc = OPERATIONS[name][0]
    for mode in DETERMINISTIC:
        x, y = asarray(a, fmt, mode), asarray(b, fmt, mode)
        with np.errstate(all="ignore"):
            result = ufunc(x) if name == "sqrt" else ufunc(x, y)
        assert isinstance(result, RPArray) and result.fmt == fmt and result.mode == mode
        assert_same(result, oracle(name, a, b, fmt, mode))


def naive(name, a, b, fmt, mode):
    with np.errstate(all="ignore"):
        values = OPERATIONS[name][0](a) if name == "sqrt" else OPERATIONS[name][0](a, b)
    return rp.round(values, fmt, mode)


@pytest.mark.parametrize(
    "fmt, mode, harmless",
    [
        (rp.format("bfloat16"), "nearest", True),
        (rp.format("float32"), "nearest_away", True),
        (rp.FloatFormat(8, 30), "nearest", False),
        (rp.FloatFormat(11, 51), "nearest_away", False),
        (rp.format("bfloat16"), "up", False),
        (rp.format("bfloat16"), "odd", False),
    ],
)
def test_the_two_regimes_of_double_rounding(fmt, mode, harmless):
    """fl64-then-round agrees with the oracle for nearest at p <= 25, and the data
    above does catch where it does not (wider formats, directed and odd modes)."""
    a, b = operand_pairs(fmt)
    disagreements = 0
    for name in ("add", "subtract"):
        disagreements += np.count_nonzero(bits(naive(name, a, b, fmt, mode)) != bits(oracle(name, a, b, fmt, mode)))
    if harmless:
        for name in ("multiply", "divide"):
            assert_same(naive(name, a, b, fmt, mode), oracle(name, a, b, fmt, mode))
        assert disagreements == 0
    else:
        assert disagreements > 0


def test_sqrt_at_precision_26_needs_the_residual():
    """53 >= 2p + 2 fails first at p = 26, and only for sqrt: sqrt(2**26 - 1) in
    float64 is a midpoint of the 26-bit grid that the exact root is not on."""
    fmt = rp.FloatFormat(8, 25)
    value = 2.0**26 - 1
    correct = exact_round(sqrt_proxy(value), fmt, "nearest")
    assert float(rp.round(np.sqrt(value), fmt)) != correct
    assert_same(np.sqrt(asarray([value], fmt)), [correct])


def test_plain_operands_get_no_double_rounding_shortcut():
    """The p <= 25 shortcut holds for values of the format only: a float64 operand
    can put the exact sum a hair above a bfloat16 midpoint that fl64 lands on."""
    hair = 2.0**-8 + 2.0**-60  # 1 + hair: just above the midpoint of 1 and 1 + 2**-7
    one = asarray([1.0], "bfloat16")
    assert float(rp.round(1.0 + hair, "bfloat16")) == 1.0  # the tie fl64 makes
    assert_same(one + hair, [1.0078125])
    assert_same(one + np.array([hair]), [1.0078125])
    out = asarray([0.0], "bfloat16")
    np.add(asarray([1.0], "float64"), asarray([hair], "float64"), out=out)  # float64 operands, bf16 out
    assert_same(out, [1.0078125])
    assert_same(one + asarray([2.0**-8], "bfloat16"), [1.0])  # values of the format: a true tie


def test_directed_rounding_sees_what_float64_loses():
    one = asarray([1.0, -1.0], "bfloat16", mode="up")
    assert_same(one + 2.0**-60, [1.0078125, -0.99609375])
    assert_same(asarray([1.0], "bfloat16", mode="down") - 2.0**-60, [0.99609375])
    assert_same(asarray([1.0], "bfloat16", mode="toward_zero") - 2.0**-60, [0.99609375])
    assert_same(asarray([1.0], "bfloat16", mode="odd") + 2.0**-60, [1.0078125])
    wide = rp.FloatFormat(8, 30)
    assert_same(asarray([1.0], wide) + (2.0**-31 + 2.0**-61), [1 + 2.0**-30])  # fl64 is a tie


def test_stochastic_rounding_uses_the_exact_residual():
    """1 + 0.75 ulp in a 52-bit format: float64 rounds the sum to 1 + 1 ulp, a value
    of the format; the exact probability of rounding up is 0.75."""
    fmt = rp.FloatFormat(11, 51)
    count = 4000
    ones = asarray(np.ones(count), fmt, "stochastic", rng=7)
    result = np.asarray(ones + 3 * 2.0**-53)
    ups = np.count_nonzero(result == 1 + 2.0**-51)
    assert np.count_nonzero(result == 1.0) + ups == count
    assert_binomial(ups, count, Fraction(3, 4), 1e-6, "1 + 0.75 ulp rounded up")  # fails w.p. < 1e-6 if right


@pytest.mark.parametrize("fmt", [rp.format("bfloat16"), rp.FloatFormat(11, 51), rp.FixedFormat(3, 49)],
                         ids=lambda f: f.name or repr(f))
def test_stochastic_threshold_is_exact(fmt):
    """round_exact(s, r) rounds s + r up iff the drawn number is below
    floor((|s + r| - lo) / (hi - lo) * 2**rand_bits), to the last unit, for
    residuals r of every size below half an ulp of s."""
    from rpfloat._kernels.cpu.accumulate import round_exact
    from rpfloat.accumulate import rounding_setup

    params, midpoints, _ = rounding_setup(fmt)
    rng = np.random.default_rng(8)
    a, _ = operand_pairs(fmt, count=80, seed=4)
    checked = 0
    for x in a:
        value = x + rng.integers(1, 2**40) * np.spacing(x)  # a float64 between values
        residual = float(rng.uniform(-0.5, 0.5) * np.spacing(value) * 2.0 ** -rng.integers(0, 60))
        exact_value = Fraction(value) + Fraction(residual)
        lo, hi, _, _ = reference.neighbours(abs(exact_value), fmt, np.float64)
        if lo == hi or value + residual != value or hi > Fraction(fmt.max) or -hi < Fraction(fmt.min):
            continue
        for rand_bits in (64, 9):
            threshold = math.floor((abs(exact_value) - lo) / (hi - lo) * 2**rand_bits)
            for drawn in {max(threshold - 1, 0), threshold, min(threshold + 1, 2**rand_bits - 1)}:
                random = np.uint64(drawn << (64 - rand_bits))
                result = round_exact(value, residual, params, midpoints, 6, random, rand_bits)
                assert abs(Fraction(result)) == (hi if drawn < threshold else lo)
                checked += 1
    assert checked > 200
    if getattr(fmt, "man_bits", None) == 51:  # a residual that vanishes when scaled: only its sign counts
        value, residual = 2.0**1000 * (1 + 3 * 2.0**-52), -(2.0**-200)
        lo = 2.0**1000 * (1 + 2 * 2.0**-52)  # the neighbours are 2 float64 ulps apart
        threshold = 2**63 - 1  # floor((ulp - tiny) / (2 ulp) * 2**64)
        for drawn, expected in ((threshold - 1, lo + 2.0**949), (threshold, lo)):
            result = round_exact(value, residual, params, midpoints, 6, np.uint64(drawn), 64)
            assert result == expected


def test_stochastic_arrays_are_reproducible_and_draw_fresh_randomness():
    def run(seed):
        a = asarray(np.full(200, 1.0), "bfloat16", "stochastic", rng=seed)
        return np.asarray(a / 3), np.asarray(a / 3)

    first, second = run(11)
    again_first, again_second = run(11)
    assert_same(first, again_first)
    assert_same(second, again_second)
    assert (bits(first) != bits(second)).any()  # a new draw for each operation
    assert set(np.unique(first)) == {0.33203125, 0.333984375}
    assert rp.asarray([1.0], "bfloat16", "stochastic", rng=np.random.default_rng(3)).rng is not None


# -- format containment ----------------------------------------------------------------------

SMALL_FORMATS = [
    rp.format(name)
    for name in (
        "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
        "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4",
        "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
    )
] + [
    rp.FloatFormat(5, 2, subnormals=False),
    rp.FloatFormat(4, 2, bias=3),
    rp.FloatFormat(3, 1, inf=False, nan=None),
    rp.FixedFormat(4, 4),
    rp.FixedFormat(8, 8),
    rp.FixedFormat(4, 4, signed=False),
    rp.FixedFormat(2, 8),
]


def brute_force_contains(big, small) -> bool:
    if small.has_inf and not big.has_inf:
        return False
    return set(small.values()) <= set(big.values())


def test_format_containment_matches_the_value_sets():
    for big in SMALL_FORMATS:
        for small in SMALL_FORMATS:
            assert format_contains(big, small) == brute_force_contains(big, small), (big, small)


def test_float_formats_contain_the_fixed_point_formats_their_values_cover():
    """A signed fixed-point format's top binade holds its min, -2**e, alone:
    bfloat16 holds every int9 (-256 included) although its spacing there is 2."""
    floats = [rp.format(name) for name in ("bfloat16", "float16", "e5m2", "e4m3", "float6_e3m2fn", "e2m1")]
    fixed = [rp.FixedFormat(i, f, signed=signed) for signed in (True, False) for i in range(-2, 11)
             for f in range(-2, 9) if 1 <= i + f - signed <= 10]
    value_sets = {fmt: set(fmt.values()) for fmt in floats + fixed}
    for big in floats:
        for small in fixed:
            assert format_contains(big, small) == (value_sets[small] <= value_sets[big]), (big, small)
    assert format_contains(rp.format("bfloat16"), rp.format("int9"))
    assert not format_contains(rp.format("bfloat16"), rp.format("int10"))
    total = asarray([1.0], "bfloat16") + asarray([-256.0], "int9")
    assert total.fmt == rp.format("bfloat16") and float(total[0]) == -255.0


def test_format_containment_of_wide_formats():
    f32, f64, bf16 = rp.format("float32"), rp.format("float64"), rp.format("bfloat16")
    assert format_contains(f32, bf16) and not format_contains(bf16, f32)
    assert format_contains(f64, f32) and format_contains(f64, rp.FixedFormat(30, 23))
    assert format_contains(f64, rp.FloatFormat(11, 30)) and not format_contains(rp.FloatFormat(11, 30), f64)
    assert not format_contains(rp.FloatFormat(8, 23, subnormals=False), f32)
    assert format_contains(f32, rp.FixedFormat(8, 8)) and not format_contains(bf16, rp.FixedFormat(8, 8))
    assert not format_contains(f32, rp.FixedFormat(30, 23))  # 53 bits do not fit in 24
    assert not format_contains(rp.FixedFormat(33, 20), bf16)  # bfloat16 has inf
    unbounded = rp.FloatFormat(None, 7)  # exp_bits=None: its carrier's (float16's) range
    assert format_contains(unbounded, rp.format("e5m2")) and not format_contains(unbounded, bf16)
    assert format_contains(bf16, rp.FloatFormat(8, 7, overflow="saturate"))


def test_formats_combine_into_the_containing_one():
    a = asarray([1.0, 2.0], "bfloat16")
    b = asarray([0.1, 0.2], "float32", mode="up")
    for result in (a + b, b + a):
        assert result.fmt == rp.format("float32") and result.mode == "up"
        assert_same(result, rp.round(np.asarray(a, np.float64) + np.asarray(b, np.float64), "float32", "up"))
    with pytest.raises(TypeError, match="do not combine"):
        a + asarray([1.0, 1.0], "float16")
    assert (a == asarray([1.0, 3.0], "float16")).tolist() == [True, False]  # no rounding, no combining
    same_values = asarray([1.0, 1.0], rp.FloatFormat(8, 7, overflow="saturate"))
    assert (same_values + a).fmt == same_values.fmt  # equal value sets: the first operand's


# -- creation, attributes, conversion -------------------------------------------------------------


def test_asarray_attributes_and_repr():
    a = asarray([[0.1, 2.0], [3.0, 1e9]], "e5m2", mode="toward_zero")
    assert a.fmt == rp.format("e5m2") and a.mode == "toward_zero"
    assert a.shape == (2, 2) and a.ndim == 2 and a.size == 4 and len(a) == 2
    assert a.dtype == np.float16 and a.rng is None
    assert_same(a, rp.round([[0.1, 2.0], [3.0, 1e9]], "e5m2", "toward_zero"))
    text = repr(a)
    assert "float8_e5m2" in text and "toward_zero" in text and text.startswith("RPArray(")
    assert "FloatFormat" in repr(asarray([1.0], rp.FloatFormat(3, 3)))
    assert asarray(a, "e5m2", mode="toward_zero") is a
    assert asarray(a, "e5m2") is not a and asarray(a, "e5m2").mode == "nearest"
    assert RPArray(a, "e5m2", "toward_zero") is not a


def test_array_protocol_and_astype():
    a = asarray([1.5, 2.5], "bfloat16")
    data = np.asarray(a)
    assert data.dtype == np.float32 and np.shares_memory(data, np.asarray(a))
    assert not np.shares_memory(np.array(a, copy=True), data)
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":  # the copy keyword of NumPy 2
        with pytest.raises(ValueError):
            np.asarray(a, dtype=np.float64, copy=False)
        assert np.shares_memory(np.asarray(a, copy=False), data)
    converted = a.astype(np.float16)
    assert type(converted) is np.ndarray and converted.dtype == np.float16
    assert float(a[0]) == 1.5 and int(a[1]) == 2 and bool(a[0])
    assert f"{a[0]:.2f}" == "1.50" and a.tolist() == [1.5, 2.5] and a[1].item() == 2.5


def test_non_real_input_is_refused():
    with pytest.raises(TypeError, match="real"):
        asarray([1 + 2j], "bfloat16")
    with pytest.raises(TypeError):
        asarray(["a"], "bfloat16")
    a = asarray([1.0], "bfloat16")
    with pytest.raises(TypeError):
        a * 1j  # complex numbers are not operands (NotImplemented)
    with pytest.raises(TypeError):
        a * np.array([1j])
    with pytest.raises(TypeError):
        a + "text"


def test_exp_bits_none_takes_the_carriers_range():
    fmt = rp.FloatFormat(None, 7)  # carrier float16: e5m7
    a = asarray([1.0, 60000.0, 2.0**-21], fmt)
    assert a.dtype == np.float16
    assert_same(a, [1.0, 59904.0, 2.0**-21])  # spacing 256 there; 2**-21 a subnormal of e5m7
    assert_same(a * 2, [2.0, math.inf, 2.0**-20])


# -- ufuncs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("ufunc", [np.exp, np.sin, np.log1p, np.cbrt, np.floor, np.negative, np.abs])
def test_other_ufuncs_round_their_float64_result_once(ufunc):
    values = np.array([0.1, 0.7, 1.9, 3.3])
    a = asarray(values, "bfloat16", "down")
    expected = rp.round(ufunc(np.asarray(a, np.float64)), "bfloat16", "down")
    assert_same(ufunc(a), expected)
    assert_same(np.power(a, 1.5), rp.round(np.asarray(a, np.float64) ** 1.5, "bfloat16", "down"))


def test_boolean_and_integer_results_are_plain_arrays():
    a = asarray([1.0, math.nan, -2.0], "float16")
    for result in (a > 0, np.isnan(a), a == a, np.signbit(a)):
        assert type(result) is np.ndarray and result.dtype == bool
    mantissa, exponent = np.frexp(asarray([3.0, 0.375], "e4m3"))
    assert isinstance(mantissa, RPArray) and type(exponent) is np.ndarray
    assert_same(mantissa, [0.75, 0.75])
    assert exponent.tolist() == [2, -1]
    quotient, remainder = np.divmod(asarray([7.0], "e4m3"), 2.0)
    assert isinstance(quotient, RPArray) and isinstance(remainder, RPArray)
    assert type(a[0] > 0) is np.bool_


def test_in_place_operators_keep_the_object():
    a = asarray([1.0, 2.0], "bfloat16")
    view = a[:1]
    same = a
    a += 1 / 3
    assert a is same
    assert_same(a, rp.round([1 + 1 / 3, 2 + 1 / 3], "bfloat16"))
    assert_same(view, a[:1])  # written in place, not rebound
    before = np.asarray(a, np.float64)
    a *= asarray([3.0, 3.0], "float32")  # the result goes onto a's format
    assert a is same and a.fmt == rp.format("bfloat16")
    assert_same(a, rp.round(before * 3, "bfloat16"))


def test_out_argument():
    a = asarray([1.0, 2.0], "bfloat16")
    out = asarray([0.0, 0.0], "e4m3", mode="up")
    returned = np.divide(a, 3, out=out)
    assert returned is out and out.fmt == rp.format("e4m3")
    assert_same(out, rp.round(np.array([1, 2]) / 3, "e4m3", "up"))
    plain = np.zeros(2)
    assert np.multiply(a, 1 / 3, out=plain) is plain
    assert_same(plain, rp.round(np.array([1.0, 2.0]) / 3, "bfloat16"))
    masked = asarray([5.0, 5.0], "bfloat16")
    np.add(a, 0.5, out=masked, where=np.array([True, False]))
    assert_same(masked, [1.5, 5.0])
    with pytest.raises(ValueError):
        np.add(a, 1, out=asarray(np.zeros(3), "bfloat16"))
    with pytest.raises(TypeError, match="out must be an ndarray or an RPArray .*, got list"):
        np.add(a, 1, out=[0.0, 0.0])
    # an out= that the inputs broadcast to, as NumPy takes it: every element rounded apart
    for larger in (np.zeros((3, 2)), asarray(np.zeros((3, 2)), "e4m3", "up")):
        assert np.add(a, 1 / 3, out=larger) is larger
        expected = np.broadcast_to(np.array([1, 2]) + 1 / 3, (3, 2))
        assert_same(larger, rp.round(expected, "bfloat16" if type(larger) is np.ndarray else "e4m3",
                                     "nearest" if type(larger) is np.ndarray else "up"))
    draws = asarray(np.zeros((400, 2)), "bfloat16", "stochastic", rng=4)
    np.add(asarray([1.0, 1.0], "bfloat16"), 1 / 3, out=draws)
    assert len(np.unique(np.asarray(draws))) == 2  # both neighbours of 4/3 drawn: not one draw repeated
    assert len({tuple(row) for row in np.asarray(draws).tolist()}) > 2


def test_out_and_dtype_by_position():
    """An ``out`` (and the arguments after it) or a ``dtype`` passed by position
    works as by keyword: the result is rounded into ``out`` and returned."""
    a = asarray([[1.0, 2.0], [3.0, 4.0]], "bfloat16") / 3
    x = np.asarray(a, np.float64)
    for call, keyword, expected in [
        (lambda out: np.dot(a, a, out), lambda out: np.dot(a, a, out=out), x @ x),
        (lambda out: np.mean(a, 1, None, out), lambda out: np.mean(a, 1, out=out), x.mean(1)),
        (lambda out: np.sum(a, 0, None, out, True), lambda out: np.sum(a, 0, out=out, keepdims=True),
         x.sum(0, keepdims=True)),
        (lambda out: np.clip(a, 0.4, 1.0, out), lambda out: np.clip(a, 0.4, 1.0, out=out), np.clip(x, 0.4, 1.0)),
        (lambda out: np.concatenate([a, a], 0, out), lambda out: np.concatenate([a, a], out=out),
         np.concatenate([x, x])),
    ]:
        for target in (np.zeros(expected.shape), asarray(np.zeros(expected.shape), "e4m3", "up")):
            by_keyword = target.copy()
            assert call(target) is target
            assert keyword(by_keyword) is by_keyword
            assert_same(target, by_keyword)
            if isinstance(target, RPArray):
                assert_same(target, rp.round(np.asarray(by_keyword, np.float64), "e4m3", "up"))
        assert_same(call(np.zeros(expected.shape)), rp.round(expected, "bfloat16"))
    for like in (np.zeros_like, np.ones_like, np.empty_like):
        made = like(a, np.int64)
        assert type(made) is np.ndarray and made.dtype == np.int64
    filled = np.full_like(a, 0.1, np.float64)
    assert type(filled) is np.ndarray and filled.tolist() == [[0.1, 0.1], [0.1, 0.1]]


def test_ufunc_methods():
    values = np.array([1.0, 1 / 3, 2 / 3, 2.0**-9])
    a = asarray(values, "bfloat16")
    x = np.asarray(a, np.float64)
    total = np.add.reduce(a)
    assert isinstance(total, RPArray) and total.ndim == 0
    assert_same(total, rp.round(np.add.reduce(x), "bfloat16"))
    assert_same(np.add.accumulate(a), rp.round(np.add.accumulate(x), "bfloat16"))
    assert_same(np.multiply.outer(a, a), rp.round(np.multiply.outer(x, x), "bfloat16"))
    assert_same(np.add.reduceat(a, [0, 2]), rp.round(np.add.reduceat(x, [0, 2]), "bfloat16"))
    assert type(np.logical_and.reduce(a)) is np.bool_
    b = a.copy()
    assert np.add.at(b, [0, 0, 3], 2.0**-9) is None
    expected = x.copy()
    np.add.at(expected, [0, 0, 3], 2.0**-9)
    assert_same(b, rp.round(expected, "bfloat16"))
    assert_same(a @ a, rp.round(x @ x, "bfloat16"))


class _Foreign:
    """Another array type: RPArray must step aside (NotImplemented)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return "foreign"

    def __radd__(self, other):
        return "radd"


class _NoUfuncs:
    __array_ufunc__ = None

    def __radd__(self, other):
        return "reflected"


def test_unknown_types_get_notimplemented():
    a = asarray([1.0], "bfloat16")
    assert np.add(a, _Foreign()) == "foreign"
    assert a + _NoUfuncs() == "reflected"
    with pytest.raises(TypeError):
        np.add(a, object())
    assert a.__array_ufunc__(np.add, "__call__", a, object()) is NotImplemented


# -- indexing --------------------------------------------------------------------------------------


def test_indexing_and_assignment():
    a = asarray(np.arange(6.0).reshape(2, 3), "e4m3", mode="toward_zero")
    element = a[1, 2]
    assert isinstance(element, RPArray) and element.ndim == 0 and element.item() == 5.0
    assert_same(element + 0.3, [5.0])  # arithmetic on an element stays in the format
    row = a[0]
    assert isinstance(row, RPArray) and np.shares_memory(np.asarray(row), np.asarray(a))
    row[1] = 0.3  # views write through, rounded with the array's mode
    assert_same(a[0], [0.0, 0.28125, 2.0])
    a[a > 4] = 1000.0  # toward_zero never overflows
    assert_same(a[1], [3.0, 4.0, 448.0])
    a[:, 0] = asarray([0.1, 0.1], "float32")  # values of another format are rounded
    assert_same(a[:, 0], [0.09375, 0.09375])
    assert isinstance(a[[1, 0]], RPArray) and a[[1, 0]].shape == (2, 3)
    assert [x.item() for x in a[0]] == a[0].tolist()


# -- NEP 18 ------------------------------------------------------------------------------------------


def test_structural_functions_keep_the_format():
    a = asarray(np.arange(6.0).reshape(2, 3) / 3, "bfloat16", mode="up")
    for result in (np.reshape(a, (3, 2)), np.transpose(a), a.T, a.reshape(6), np.ravel(a),
                   np.flip(a), np.squeeze(a[None]), np.take(a, [0, 1], axis=1), np.sort(a)):
        assert isinstance(result, RPArray) and result.fmt == a.fmt and result.mode == "up"
        assert result.dtype == np.float32
    assert np.shares_memory(np.asarray(np.reshape(a, 6)), np.asarray(a))
    pieces = np.split(a, 3, axis=1)
    assert len(pieces) == 3 and all(isinstance(p, RPArray) for p in pieces)
    zeros = np.zeros_like(a)
    assert isinstance(zeros, RPArray) and zeros.fmt == a.fmt
    assert_same(np.full_like(a, 0.1), np.full((2, 3), rp.round(0.1, "bfloat16", "up")))
    # np.broadcast_arrays: each RPArray keeps its own format (views); plain arrays stay plain
    b = asarray([[0.5], [0.25]], "e4m3")
    wide, narrow, plain = np.broadcast_arrays(a, b, np.ones((2, 1)))
    assert isinstance(wide, RPArray) and wide.fmt == a.fmt and wide.mode == "up"
    assert isinstance(narrow, RPArray) and narrow.fmt == b.fmt and narrow.shape == (2, 3)
    assert type(plain) is np.ndarray and plain.shape == (2, 3)
    assert np.shares_memory(np.asarray(narrow), np.asarray(b))
    # np.unique_* (NumPy 2) keep the format; counts and indices are plain
    if hasattr(np, "unique_counts"):
        counts = np.unique_counts(asarray([2.0, -1.0, 2.0], "e4m3"))
        assert isinstance(counts.values, RPArray) and counts.values.fmt == rp.format("e4m3")
        assert counts.values.tolist() == [-1.0, 2.0] and counts.counts.tolist() == [1, 2]
        assert isinstance(np.unique_values(a), RPArray)
    # np.fix rounds its float64 result: a format without -0 gets +0 for -0.5
    fixed = np.fix(asarray([-0.5, 2.75], "e4m3fnuz"))
    assert isinstance(fixed, RPArray) and fixed.tolist() == [0.0, 2.0]
    assert not np.signbit(np.asarray(fixed)).any()


def test_joining_functions_combine_and_round():
    a = asarray([1.0, 2.0], "bfloat16")
    b = asarray([0.1], "float32")
    joined = np.concatenate([a, b])
    assert joined.fmt == rp.format("float32")
    assert_same(joined, [1.0, 2.0, np.float32(0.1)])
    mixed = np.concatenate([a, [0.1]])  # plain values are rounded onto the format
    assert mixed.fmt == a.fmt and mixed[2].item() == float(rp.round(0.1, "bfloat16"))
    stacked = np.stack([a, a])
    assert isinstance(stacked, RPArray) and stacked.shape == (2, 2)
    chosen = np.where(np.asarray(a) > 1, a, 0.1)
    assert isinstance(chosen, RPArray)
    assert_same(chosen, [float(rp.round(0.1, "bfloat16")), 2.0])
    with pytest.raises(TypeError):
        np.concatenate([a, asarray([1.0], "float16")])


def test_triangles_diagonals_padding_and_blocks_keep_the_format():
    a = asarray(np.arange(1.0, 10.0).reshape(3, 3) / 7, "bfloat16", mode="up")
    values = np.asarray(a)
    for function, expected in ((np.triu, np.triu(values)), (np.tril, np.tril(values, -1)), (np.diag, np.diag(values)),
                               (np.diagflat, np.diagflat(values[0]))):
        result = function(a, -1) if function is np.tril else function(a[0] if function is np.diagflat else a)
        assert isinstance(result, RPArray) and result.fmt == a.fmt and result.mode == "up"
        assert_same(result, expected)
    assert_same(np.triu(a)[0] / 3, rp.round(values[0].astype(np.float64) / 3, "bfloat16", "up"))
    padded = np.pad(a, 1, constant_values=0.1)  # the padding value is rounded onto the format
    assert isinstance(padded, RPArray) and padded[0, 0].item() == float(rp.round(0.1, "bfloat16", "up"))
    assert_same(padded[1:-1, 1:-1], values)
    joined = np.block([[a, a], [a, a]])
    assert isinstance(joined, RPArray) and joined.fmt == a.fmt and joined.shape == (6, 6)


@pytest.mark.parametrize("function", [np.linalg.solve, np.linalg.inv, np.linalg.det, np.linalg.qr, np.linalg.svd,
                                      np.linalg.eigh, np.linalg.cholesky, np.linalg.lstsq, np.linalg.pinv])
def test_linear_algebra_rounds_each_float64_result_once(function):
    """np.linalg on RPArrays: computed in float64 on the values, each floating
    result rounded onto the format (a named tuple keeps its fields); integer
    results (lstsq's rank) stay plain."""
    rng = np.random.default_rng(3)
    raw = rng.standard_normal((4, 4))
    a = asarray(raw @ raw.T + 4 * np.eye(4), "e5m7", mode="toward_zero")
    b = np.ones(4)
    arguments = {np.linalg.solve: (a, b), np.linalg.lstsq: (a, b)}.get(function, (a,))
    result = function(*arguments)
    expected = function(*[np.asarray(x, np.float64) for x in arguments])
    results = list(result) if isinstance(result, tuple) else [result]
    expecteds = list(expected) if isinstance(expected, tuple) else [expected]
    assert len(results) == len(expecteds) and type(result) is type(expected) or isinstance(result, RPArray)
    for got, want in zip(results, expecteds):
        if np.asarray(want).dtype.kind == "f":
            assert isinstance(got, RPArray) and got.fmt == a.fmt and got.mode == "toward_zero"
            assert_same(got, rp.round(np.asarray(want), "e5m7", "toward_zero"))
        else:
            assert not isinstance(got, RPArray) and np.array_equal(got, want)
    assert not isinstance(np.linalg.matrix_rank(a), RPArray) and np.linalg.matrix_rank(a) == 4


@pytest.mark.parametrize("name", ["linalg.matmul", "linalg.outer", "linalg.vecdot", "vecdot", "linalg.vector_norm",
                                  "linalg.matrix_norm", "linalg.trace", "linalg.tensordot", "cumulative_sum",
                                  "cumulative_prod", "trapezoid", "vander", "sinc", "polyfit", "meshgrid"])
def test_numpy_2_spellings_and_polynomials_round_each_float64_result_once(name):
    """NumPy 2's array-API functions used to fall through to the carrier: e4m3
    products computed in float16, a plain ndarray whose values are not e4m3's."""
    function = getattr(np.linalg, name[7:]) if name.startswith("linalg.") else getattr(np, name, None)
    if function is None:
        pytest.skip(f"NumPy {np.__version__} has no np.{name}")  # (the dependencies allow NumPy 1.24)
    rng = np.random.default_rng(4)
    a = asarray(rng.standard_normal((3, 3)), "e4m3", mode="up")
    arguments = {"linalg.outer": (a[0], a[1]), "vecdot": (a, a), "linalg.vecdot": (a, a), "linalg.matmul": (a, a),
                 "linalg.tensordot": (a, a), "cumulative_sum": (a[0],), "cumulative_prod": (a[0],),
                 "vander": (a[0],), "polyfit": (a[0], a[1], 1), "meshgrid": (a[0], a[1])}.get(name, (a,))
    result = function(*arguments)
    expected = function(*[np.asarray(x, np.float64) for x in arguments])
    for got, want in zip(result if isinstance(result, (list, tuple)) else [result],
                         expected if isinstance(expected, (list, tuple)) else [expected]):
        assert isinstance(got, RPArray) and got.fmt == a.fmt and got.mode == "up", name
        assert_same(got, rp.round(np.asarray(want), "e4m3", "up"))


def test_numpy_2_views_and_attributes_keep_the_format():
    a = asarray(np.arange(6.0).reshape(2, 3) / 3, "bfloat16", mode="up")
    views = [a.mT, a.real, a.conj(), a.conjugate()]
    views += [np.matrix_transpose(a), *np.unstack(a)] if hasattr(np, "unstack") else []
    for view in views:
        assert isinstance(view, RPArray) and view.fmt == a.fmt and view.mode == "up"
    assert_same(a.mT, np.asarray(a).T) and np.shares_memory(np.asarray(a.real), np.asarray(a))


def test_ndarray_methods_are_the_numpy_functions():
    a = asarray([[0.3, -2.0, 5.0], [1.0, 0.0, -0.7]], "float16", mode="down")
    values = np.asarray(a, np.float64)
    assert a.argmax() == 2 and a.argmin() == 1 and a.argmax(axis=0).tolist() == [1, 1, 0]
    assert np.array_equal(a.argsort(), np.argsort(values)) and np.array_equal(a.nonzero(), np.nonzero(values))
    assert a.any() and not a.all() and a.all(axis=0).tolist() == [True, False, True]
    for method, expected in ((a.cumsum(), np.cumsum(values)), (a.cumprod(axis=1), np.cumprod(values, axis=1)),
                             (a.std(), np.std(values)), (a.var(axis=0), np.var(values, axis=0)),
                             (a.trace(), np.trace(values)), (a.clip(-1, 1), np.clip(values, -1, 1)),
                             (a.round(), np.round(values)), (a.diagonal(), np.diagonal(values)),
                             (a.take([0, 5]), np.take(values, [0, 5])), (a.repeat(2, axis=0), values.repeat(2, 0)),
                             (a.swapaxes(0, 1), values.T)):
        assert isinstance(method, RPArray) and method.fmt == a.fmt and method.mode == "down"
        assert_same(method, rp.round(np.asarray(expected), "float16", "down"))
    b = a.copy()
    assert b.sort() is None and isinstance(b, RPArray)
    assert_same(b, np.sort(np.asarray(a), axis=-1))
    b.fill(0.1)
    assert_same(b, np.full((2, 3), rp.round(0.1, "float16", "down")))
    assert_same(a, values.astype(np.float16))  # the original untouched
    assert a.nbytes == 12 and a.itemsize == 2


def test_reductions_and_products_round_their_final_result_once():
    rng = np.random.default_rng(5)
    raw = rng.standard_normal((4, 5))
    x = asarray(raw, "bfloat16")
    y = asarray(rng.standard_normal((5, 3)), "bfloat16")
    xv, yv = np.asarray(x, np.float64), np.asarray(y, np.float64)
    checks = [
        (np.sum(x), np.sum(xv)),
        (np.sum(x, axis=0), np.sum(xv, axis=0)),
        (x.sum(axis=1), xv.sum(axis=1)),
        (np.mean(x), np.mean(xv)),
        (np.dot(x, y), np.dot(xv, yv)),
        (np.matmul(x, y), np.matmul(xv, yv)),
        (x @ y, xv @ yv),
        (np.prod(x[0]), np.prod(xv[0])),
        (np.std(x), np.std(xv)),
        (np.cumsum(x), np.cumsum(xv)),
        (np.max(x), np.max(xv)),
    ]
    for result, float64_result in checks:
        assert isinstance(result, RPArray) and result.fmt == x.fmt
        assert_same(result, rp.round(float64_result, "bfloat16"))
    assert np.sum(x).ndim == 0
    # functions without an RPArray implementation see the carrier values
    assert np.allclose(x, xv, rtol=0, atol=0) is True  # exactly the rounded values,
    assert not np.allclose(x, raw, rtol=0, atol=0)  # not the unrounded ones (they differ: asserted next)
    assert (xv != raw).all()
    close = np.isclose(x, xv + np.spacing(np.abs(xv)), rtol=0, atol=0)  # one float64 ulp off: not close
    assert type(close) is np.ndarray and close.dtype == bool and not close.any()
    assert np.argmax(x) == np.argmax(xv)


def test_copies_and_pickling():
    import pickle

    a = asarray([1.0, 2.0], "bfloat16", "stochastic", rng=1)
    for other in (copy.copy(a), copy.deepcopy(a), a.copy(), pickle.loads(pickle.dumps(a))):
        assert isinstance(other, RPArray) and other.fmt == a.fmt and other.mode == a.mode
        assert not np.shares_memory(np.asarray(other), np.asarray(a))
        assert_same(other, a)
    with pytest.raises(TypeError):
        hash(a)
    # copies share the generator; a deep copy (as pickling) copies it, one copy for the
    # arrays that share it, and replays the stream from there without drawing from it
    assert round(asarray([2.5, 1 / 3], "bfloat16")[1], 2) == rp.round(0.33, "bfloat16")  # 0.33 onto bfloat16
    assert round(asarray([2.5], "bfloat16")[0]) == 2 and type(round(asarray([2.5], "bfloat16")[0])) is int
    with pytest.raises(TypeError, match="round.. takes one element"):
        round(a)
    assert copy.copy(a).rng is a.rng and a.copy().rng is a.rng
    deep, deep_view = copy.deepcopy((a, a[:1]))
    assert deep.rng is not a.rng and deep_view.rng is deep.rng
    assert_same(deep + 1 / 3, a + 1 / 3)
    assert_same(deep_view + 1 / 3, a[:1] + 1 / 3)


@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "up", "down", "odd"])
def test_wrap_keeps_the_exact_results_low_bits(mode):
    """A 32-bit integer register wraps the exact result: (2**31 - 1)**2 =
    2**62 - 2**32 + 1 is 1 modulo 2**32, where float64's rounded product
    2**62 - 2**32 would wrap to 0 (RPArray's fast routes and float64 path, rp.dot)."""
    fmt = rp.FixedFormat(32, 0, overflow="wrap")
    a = rp.asarray([2.0**31 - 1, -(2.0**31) + 3, 1.5e9], fmt, mode)
    b = rp.asarray([2.0**31 - 1, 2.0**31 - 5, -1.75e9 + 1], fmt, mode)
    exact = [int(x) * int(y) for x, y in zip(np.asarray(a).tolist(), np.asarray(b).tolist())]
    wrapped = [(k + 2**31) % 2**32 - 2**31 for k in exact]
    assert np.asarray(a * b).tolist() == wrapped
    assert float(rp.dot(np.asarray(a)[:1], np.asarray(b)[:1], fmt, mode=mode)) == wrapped[0]
    # 2**62 - 5 rounds to the float64 2**62, a whole number of moduli, with the residual
    # -5 of the other sign: the exact sum wraps to -5, in every mode
    assert np.asarray(rp.asarray([-5.0], fmt, mode) + 2.0**62).tolist() == [-5.0]
    assert float(rp.sum([-5.0, 2.0**62], fmt, mode=mode)) == -5.0
    assert np.asarray(rp.asarray([5.0], fmt, mode) - 2.0**62).tolist() == [5.0]


@settings(max_examples=300, deadline=None)
@given(int_bits=st.integers(1, 8), frac_bits=st.integers(0, 6), signed=st.booleans(),
       mode=st.sampled_from(["nearest", "nearest_away", "toward_zero", "up", "down", "odd"]),
       k=st.integers(-600, 600), half_steps=st.integers(-1200, 1200), nudge=st.integers(-3, 3),
       large=st.booleans())
# sums that float64 rounds onto a midpoint past the range, the side in the residual
@example(4, 4, True, "nearest", 120, 33, 1, False)  # 7.5 + (1.03125 + ulp): -7.4375, not -7.5
@example(8, 2, True, "nearest", 284, 605, 1, False)  # 71 + 75.625...: -109.25
@example(7, 3, True, "nearest", -448, -451, 1, False)  # -56 - 28.1874...: 43.875
@example(4, 4, True, "nearest_away", 101, 95, 1, False)
@example(4, 2, False, "nearest", 61, 3, 1, False)  # unsigned, past the top
@example(4, 2, False, "nearest", 1, -9, -1, False)  # unsigned, below 0
def test_wrap_rounds_the_exact_sum_once(int_bits, frac_bits, signed, mode, k, half_steps, nudge, large):
    """A sum past the range of a wrapping fixed-point format: its exact value is
    rounded onto the grid and then wrapped (the neighbours taken after wrapping gave
    ties on the wrong side). RPArray's + and rp.sum of two terms against the oracle,
    with addends a few float64 ulps off the grid's midpoints; `large` takes the
    first addend at the end of the range, so that the float64 sum drops the ulps."""
    fmt = rp.FixedFormat(int_bits, frac_bits, signed=signed, overflow="wrap")
    step = 2.0**-frac_bits
    words = 2 ** (int_bits + frac_bits)
    low = -(words // 2) if signed else 0
    if large:
        k = low + words - 1 - k % 4 if half_steps >= 0 or not signed else low + k % 4
    a = ((k - low) % words + low) * step  # on the grid, in range
    b = half_steps * step / 2
    for _ in range(abs(nudge)):
        b = math.nextafter(b, math.copysign(math.inf, nudge))
    want = fixed_wrap_oracle(Fraction(a) + Fraction(b), fmt, mode)
    assert float(np.asarray(rp.asarray([a], fmt, mode) + b)[0]) == want
    assert float(rp.sum([a, b], fmt, mode=mode)) == want
