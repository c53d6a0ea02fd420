"""rp.sum, rp.dot, rp.matmul with order="kahan" and with block_k, checked against a
plain Python loop in exact (Fraction) arithmetic that rounds every step with its
own exact rounding of Fractions (built on tests/reference.py) and the kernels'
documented random counters, so that every mode, the stochastic ones included,
must match bit for bit. APyTypes is a second oracle where its semantics coincide.

The oracle runs no rpfloat code: a step whose exact value is a float64 is rounded
as rp.round rounds that float64 (tests/reference.py's round_reference, or
stochastic_probability and the decision rule of docs/randomness.md); any other
exact value by neighbours and thresholds of Fractions; the random numbers come
from the stream re-implemented in tests/stream_reference.py. An exact value that
float64 rounds to inf is taken as inf (the kernels' documented clamp).
"""
import functools
import math
import operator
from fractions import Fraction

import apytypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat._kernels.cpu import accumulate as kernels
from rpfloat.accumulate import dot, matmul
from rpfloat.accumulate import sum as rp_sum

from reference import (fixed_range, float_max, is_float_format, neighbours, resolve_overflow, round_reference,
                       stochastic_probability)
from stream_reference import MASK_64, seed_key, stream
from test_accumulate import assert_same, bits

MODES = ("nearest", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic", "stochastic_equal")
DETERMINISTIC = MODES[:6]
SEED = 20240607
KEY = seed_key(SEED)
FLOAT64_OVERFLOW = Fraction(2) ** 1024 - Fraction(2) ** 970  # float64 rounds this and beyond to inf
FLOAT64 = rp.FloatFormat(11, 52)
WIDE = rp.FloatFormat(11, 40)  # float64's range, 41 bits: exact stochastic thresholds still


# -- exact values and their rounding ------------------------------------------------------
#
# A value is a Python float (always for inf, NaN and signed zeros) or a Fraction.


def is_float64(value) -> bool:
    if isinstance(value, float):
        return True
    if abs(value) >= FLOAT64_OVERFLOW:
        return False
    return Fraction(float(value)) == value


def exact_sum(values):
    """The exact sum, as the kernels define it: the float64 sum of the infinite and
    NaN summands if any; a zero sum is -0.0 only when every summand is -0.0."""
    specials = [v for v in values if isinstance(v, float) and not math.isfinite(v)]
    if specials:
        return functools.reduce(operator.add, specials)
    total = sum(Fraction(v) for v in values)
    if total == 0:
        negative = all(isinstance(v, float) and v == 0 and math.copysign(1, v) < 0 for v in values)
        return -0.0 if negative else 0.0
    return total


def exact_product(x, y):
    x, y = float(x), float(y)
    if not (math.isfinite(x) and math.isfinite(y)) or x == 0 or y == 0:
        return x * y
    return Fraction(x) * Fraction(y)


def round_to_odd64(z: Fraction) -> float:
    """z rounded to odd onto float64 (z finite, below float64's overflow)."""
    s = float(z)
    if Fraction(s) == z:
        return s
    other = math.nextafter(s, math.inf if Fraction(s) < z else -math.inf)
    return s if bits(s) & 1 else other


def signed_zero_like(value, z):
    return math.copysign(0.0, float(z)) if value == 0 else value


def pick(mode, z, lo, hi, lo_parity, hi_parity):
    """The neighbour (lo <= z <= hi, signed) a deterministic mode takes."""
    small, large = (lo, hi) if abs(lo) <= abs(hi) else (hi, lo)
    small_parity, large_parity = (lo_parity, hi_parity) if small == lo else (hi_parity, lo_parity)
    if mode == "toward_zero":
        return small
    if mode == "up":
        return hi
    if mode == "down":
        return lo
    if mode == "odd":
        return small if small_parity == 1 and large_parity == 0 else large
    if abs(z - small) < abs(large - z):
        return small
    if abs(z - small) > abs(large - z):
        return large
    if mode == "nearest_away":
        return large
    return small if small_parity == 0 and large_parity == 1 else large  # ties to even


def outside(value, fmt) -> bool:
    if is_float_format(fmt):
        return abs(value) > float_max(fmt)
    kmin, kmax = fixed_range(fmt)
    k = value * 2**fmt.frac_bits
    return not kmin <= k <= kmax


def overflowed(negative, mode, fmt):
    """What a deterministic rounding past the largest value gives (docs/rounding.md)."""
    if is_float_format(fmt):
        top = float(float_max(fmt))
        policy = resolve_overflow(fmt)
        if mode == "toward_zero" or mode == ("up" if negative else "down") or policy == "saturate":
            return -top if negative else top
        return math.copysign(math.inf if policy == "inf" else math.nan, -1.0 if negative else 1.0)
    kmin, kmax = fixed_range(fmt)
    return (kmin if negative else kmax) * 2.0**-fmt.frac_bits  # saturates


def round_float64(x: float, fmt, mode, counter) -> float:
    """A float64 rounded as rp.round rounds it, drawing number `counter` of the
    stream: exactly, by tests/reference.py; a stochastic step rounds the magnitude
    up iff ``2**64 - 1 - R < floor(P(hi) * 2**64)`` (R the random number; see
    tests/test_random_stream.py), stochastic_equal iff R's top bit is set."""
    if mode in DETERMINISTIC:
        return round_reference(x, fmt, mode)
    lo, hi, p = stochastic_probability(x, fmt, mode=mode)
    random = stream(KEY, counter)
    if mode == "stochastic":
        up = MASK_64 - random < math.floor(p * 2**64)
    else:
        up = p != 0 and random >> 63 == 1
    return hi if up else lo


def rounded(value, fmt, mode, counter):
    """`value` rounded onto `fmt` in `mode` as the kernels round an exact result,
    drawing random number `counter` of the stream for the stochastic modes."""
    if isinstance(value, Fraction) and abs(value) >= FLOAT64_OVERFLOW:
        # the kernels' clamp: an exact value that float64 rounds to inf is inf (module docstring)
        return round_float64(math.inf if value > 0 else -math.inf, fmt, mode, counter)
    if is_float64(value):
        return round_float64(float(value), fmt, mode, counter)
    z = value
    lo, hi, lo_parity, hi_parity = neighbours(z, fmt)
    if mode in DETERMINISTIC:
        result = pick(mode, z, lo, hi, lo_parity, hi_parity)
        if outside(result, fmt):
            return overflowed(z < 0, mode, fmt)
        return round_reference(signed_zero_like(float(result), z), fmt, mode)
    small, large = (lo, hi) if abs(lo) <= abs(hi) else (hi, lo)
    if outside(large, fmt):  # past the largest value: the kernels round z's round-to-odd value
        return round_float64(round_to_odd64(z), fmt, mode, counter)
    draw = stream(KEY, counter)  # (z is no float64 here: the rule is the exact-sum kernel's, draw < threshold)
    if mode == "stochastic_equal":
        away = draw >> 63 == 1
    else:
        threshold = math.floor((abs(z) - abs(small)) / (abs(large) - abs(small)) * 2**64)
        away = draw < threshold
    result = large if away else small
    return round_reference(signed_zero_like(float(result), z), fmt, mode="toward_zero")


# -- the reference loops --------------------------------------------------------------------


def terms_of(a_row, b_column, kind):
    if kind == "sum":
        return [float(x) for x in a_row]
    return [exact_product(x, y) for x, y in zip(a_row, b_column)]


def reference_kahan(a_row, b_column, fmt, acc, mode, kind, output):
    n = len(a_row)
    base = 5 * n * output
    total = compensation = 0.0
    for k, term in enumerate(terms_of(a_row, b_column, kind)):
        counter = base + 5 * k
        if kind == "product":
            term = rounded(term, fmt, mode, counter)
        if k == 0:
            total = rounded(term, acc, mode, counter + 1)
            continue
        y = rounded(exact_sum([term, -compensation]), acc, mode, counter + 1)
        s = rounded(exact_sum([total, y]), acc, mode, counter + 2)
        d = rounded(exact_sum([s, -total]), acc, mode, counter + 3)
        compensation = rounded(exact_sum([d, -y]), acc, mode, counter + 4)
        total = s
    return total


def reference_blocks(a_row, b_column, acc, mode, kind, output, block_k):
    n = len(a_row)
    base = 3 * n * output
    terms = terms_of(a_row, b_column, kind)
    total = 0.0
    for start in range(0, n, block_k):
        summands = ([total] if start else []) + terms[start:start + block_k]
        counter = base + (3 * start - 1 if start else 1)
        total = rounded(exact_sum(summands), acc, mode, counter)
    return total


def reference(a, b, fmt, acc, mode, kind, order=None, block_k=None):
    """rp.matmul's (kind "product" / "fused") or a row-wise rp.sum's ("sum": `b`
    unused) result for 2-D `a`, `b`."""
    cols = 1 if kind == "sum" else b.shape[1]
    out = np.empty((a.shape[0], cols))
    for i in range(a.shape[0]):
        for j in range(cols):
            column = None if kind == "sum" else b[:, j]
            if block_k is not None:
                out[i, j] = reference_blocks(a[i], column, acc, mode, kind, i * cols + j, block_k)
            else:
                out[i, j] = reference_kahan(a[i], column, fmt, acc, mode, kind, i * cols + j)
    return out if kind != "sum" else out[:, 0]


# -- data -------------------------------------------------------------------------------


def format_values(fmt, shape, seed, spread=3):
    """Values of `fmt` (magnitudes around 2**-spread .. 2**spread, some zeros)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)
    values[rng.random(shape) < 0.1] = 0.0
    return np.asarray(rp.round(values, fmt, "nearest", overflow="saturate"), dtype=np.float64)


def adversarial_rows(fmt, seed):
    """Rows for rp.sum: cancellation, ties (exact block sums on midpoints, and a hair
    off them), overflow, subnormals, huge dynamic range, signed zeros, inf and NaN."""
    rng = np.random.default_rng(seed)
    top = float(float_max(fmt)) if is_float_format(fmt) else float(fixed_range(fmt)[1] * 2.0**-fmt.frac_bits)
    tiny = 2.0**-1074
    ulp_one = 2.0 ** -(fmt.man_bits if is_float_format(fmt) else fmt.frac_bits)
    rows = [
        [1.0, ulp_one / 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # a tie
        [1.0, ulp_one / 2, 2.0**-60, 0.0, -1.0, ulp_one / 2, -(2.0**-70), 0.0],  # a hair above, cancellation
        [1.0, ulp_one / 2, -(2.0**-60), 3.0, -3.0, ulp_one / 4, ulp_one / 4, 1.0],  # a hair below
        [2.0**900, 1.0, -(2.0**900), ulp_one / 2, 2.0**-900, -(2.0**-1000), tiny, -1.0],  # dynamic range
        [2.0**1000, 2.0**1000, -(2.0**1001), 2.0**-1074, 2.0**-1073, -(2.0**-1022), 1.0, 2.0**-1000],
        [top, top, top, -top, -top, 0.5, 0.25, -top],  # overflow, then back in range
        [-top, -top, 1.0, -1.0, top, top, top, top],
        [1.7976931348623157e308, 1.7976931348623157e308, -1.7976931348623157e308, 1.0, 0.0, 0.0, 0.0, 0.0],
        [-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0],
        [-0.0, 0.0, -0.0, 1.0, -1.0, -0.0, -0.0, -0.0],
        [1.0, math.inf, 2.0, -1.0, 0.0, 0.0, 0.0, 0.0],
        [1.0, math.inf, -math.inf, 1.0, 0.0, 0.0, 0.0, 0.0],
        [math.nan, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        [5e-324, -5e-324, 1e-310, 3e-310, -1e-310, 2.0**-1030, 2.0**-1060, 2.0**-1074],  # float64 subnormals
        list(rng.standard_normal(8) * 2.0 ** rng.integers(-1070, 1000, 8)),  # any float64
        list(rng.standard_normal(8) * 2.0 ** rng.integers(-30, 30, 8)),
    ]
    if is_float_format(fmt):
        sub = 2.0 ** (2 - 2 ** (fmt.exp_bits - 1) - fmt.man_bits)  # the smallest subnormal
        rows.append([sub, sub / 2, sub / 4, -sub / 8, sub * 3, -sub, sub / 2, 0.0])  # subnormal results
    return np.array(rows)


def model_kwargs(model):
    return dict(order="kahan") if model == "kahan" else dict(block_k=model)


SUM_FORMATS = [
    rp.format("bfloat16"),
    rp.format("float16"),
    rp.format("e4m3"),  # overflows to NaN, no inf
    rp.FixedFormat(5, 4),  # saturates
    WIDE,
]
MODELS = ["kahan", 1, 3, 8]


# -- rp.sum ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", SUM_FORMATS, ids=lambda f: f.name or repr(f))
@pytest.mark.parametrize("model", MODELS, ids=str)
def test_sum_matches_the_reference_loop(fmt, model):
    random = format_values(fmt, (3, 11), seed=1)
    adversarial = adversarial_rows(fmt, seed=2)
    for mode in MODES:
        for x in (random, adversarial):
            block_k = None if model == "kahan" else model
            expected = reference(x, None, fmt, fmt, mode, "sum", block_k=block_k)
            with np.errstate(all="ignore"):
                actual = rp_sum(x, fmt, axis=1, mode=mode, rng=SEED, **model_kwargs(model))
            assert_same(actual, expected)


def test_sum_along_other_axes_counts_outputs_in_c_order():
    x = format_values(rp.format("bfloat16"), (4, 3, 5), seed=3)
    for model in ("kahan", 2):
        for mode in ("stochastic", "nearest"):
            moved = np.moveaxis(x, 1, -1).reshape(-1, 3)
            block_k = None if model == "kahan" else model
            expected = reference(moved, None, "bfloat16", rp.format("bfloat16"), mode, "sum", block_k=block_k)
            actual = rp_sum(x, "bfloat16", axis=1, mode=mode, rng=SEED, **model_kwargs(model))
            assert_same(actual, expected.reshape(4, 5))


# -- rp.matmul and rp.dot ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, acc", [
    (rp.format("bfloat16"), None),
    (rp.format("float16"), None),
    (rp.format("e4m3"), rp.format("e4m3")),
    (rp.FixedFormat(5, 4), rp.FixedFormat(8, 4)),
    (rp.format("bfloat16"), rp.format("float32")),
])
@pytest.mark.parametrize("model", MODELS, ids=str)
def test_matmul_matches_the_reference_loop(fmt, acc, model):
    a = format_values(fmt, (2, 9), seed=4)
    b = format_values(fmt, (9, 3), seed=5)
    for mode in MODES:
        for fma in ((False, True) if model == "kahan" else (False,)):
            kind = "fused" if fma else "product"
            block_k = None if model == "kahan" else model
            expected = reference(a, b, fmt, acc or fmt, mode, kind, block_k=block_k)
            kwargs = dict(acc=acc, fma=fma, mode=mode, rng=SEED, **model_kwargs(model))
            assert_same(matmul(a, b, fmt, **kwargs), expected)
            assert_same(dot(a[0], b[:, 0], fmt, **kwargs), expected[0, 0])


@pytest.mark.parametrize("model", MODELS, ids=str)
def test_inexact_products_are_summed_exactly(model):
    """float64 operands whose products float64 cannot hold (two_product's error
    terms matter), over a wide dynamic range, onto float64, a 41-bit and a float32
    accumulator; with fma the Kahan term is exact too."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 10)) * 2.0 ** rng.integers(-200, 200, (3, 10))
    b = rng.standard_normal((10, 2)) * 2.0 ** rng.integers(-200, 200, (10, 2))
    a[0, 3:6] = [2.0**100, -(2.0**100), 1.0 + 2.0**-52]  # cancellation next to inexact products
    b[3:6, 0] = [1.0 + 2.0**-30, 1.0 + 2.0**-30, 1.0 - 2.0**-52]
    for acc in (FLOAT64, WIDE, rp.format("float32")):
        for mode in (DETERMINISTIC if acc is FLOAT64 else MODES):  # FLOAT64: see exact_pair on thresholds
            for fma in ((False, True) if model == "kahan" else (True,)):
                kind = "fused" if fma else "product"
                block_k = None if model == "kahan" else model
                expected = reference(a, b, acc, acc, mode, kind, block_k=block_k)
                actual = matmul(a, b, acc, fma=fma, mode=mode, rng=SEED, **model_kwargs(model))
                assert_same(actual, expected)


def test_block_k_1_is_the_fused_sequential_order_and_block_k_n_one_rounding():
    a = format_values(rp.format("bfloat16"), (3, 12), seed=7, spread=6)
    b = format_values(rp.format("bfloat16"), (12, 4), seed=8, spread=6)
    for mode in MODES:
        fused = matmul(a, b, "bfloat16", fma=True, mode=mode, rng=SEED)
        assert_same(matmul(a, b, "bfloat16", block_k=1, mode=mode, rng=SEED), fused)
        assert_same(matmul(a, b, "bfloat16", block_k=1, fma=True, mode=mode, rng=SEED), fused)  # fma: no effect
        once = matmul(a, b, "bfloat16", block_k=12, mode=mode, rng=SEED)
        assert_same(matmul(a, b, "bfloat16", block_k=1000, mode=mode, rng=SEED), once)
        if mode in DETERMINISTIC:
            exact = [[sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], b[:, j])) for j in range(4)]
                     for i in range(3)]
            assert_same(once, [[rounded(z, rp.format("bfloat16"), mode, 0) for z in row] for row in exact])


# -- the exact block sum, on its own ----------------------------------------------------------

finite_float64 = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.builds(lambda m, e: math.ldexp(m, e), st.integers(-(2**53), 2**53), st.integers(-1074, 970)),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-1074, 2.0**-1022, 1.7976931348623157e308, 2.0**-53, 2.0**-54]),
)


@settings(max_examples=300)
@given(st.lists(finite_float64, min_size=1, max_size=12))
def test_the_exact_pair_is_the_nearest_float64_and_the_remainder_rounded_to_odd(values):
    """The kernels' integer sum and its ``(s, r)``: ``s = fl(z)``, ``r = RO(z - s)``."""
    digits = np.zeros(kernels.LIMBS, dtype=np.int64)
    low = kernels.LIMBS
    for value in values:
        if value != 0:
            low = min(low, kernels.exact_add(digits, value))
    s, r = kernels.exact_pair(digits, low, all(math.copysign(1, v) < 0 and v == 0 for v in values))
    assert not digits.any()  # cleared for the next sum
    z = exact_sum(values)
    if isinstance(z, float):  # zero
        expected = z, 0.0
    elif abs(z) >= FLOAT64_OVERFLOW:
        expected = math.inf if z > 0 else -math.inf, 0.0
    else:
        remainder = z - Fraction(float(z))
        expected = float(z), round_to_odd64(remainder) if remainder else 0.0
    assert_same(s, expected[0])
    assert r == expected[1]  # a zero remainder may come as -0.0
    if r:
        assert_same(r, expected[1])


@settings(max_examples=300)
@given(st.lists(finite_float64, min_size=1, max_size=12), st.sampled_from(DETERMINISTIC))
def test_block_sums_of_any_float64s_round_exactly_onto_float64(values, mode):
    """One block of float64 values onto float64 itself: the nearest result is fl of
    the exact sum, the directed and odd ones need the remainder's sign, exact ties
    (nearest_away) its exactness: the (s, r) pair must be right to the last bit."""
    x = np.array(values)
    expected = rounded(exact_sum(list(x)), FLOAT64, mode, 0)
    with np.errstate(all="ignore"):
        assert_same(rp_sum(x, FLOAT64, mode=mode, block_k=len(values)), expected)


@settings(max_examples=100)
@given(st.lists(finite_float64, min_size=1, max_size=10), st.sampled_from(MODES), st.integers(1, 4))
def test_block_sums_of_any_float64s_onto_a_41_bit_format(values, mode, block_k):
    x = np.array(values)[None]
    expected = reference(x, None, WIDE, WIDE, mode, "sum", block_k=block_k)
    with np.errstate(all="ignore"):
        assert_same(rp_sum(x, WIDE, axis=1, mode=mode, rng=SEED, block_k=block_k), expected)


def test_a_tail_rounded_to_odd_cannot_fake_a_midpoint():
    """z = 1 + (0.75 + 2**-53 + 2**-60): the tail rounded to odd at float64's
    precision is 0.75 + 2**-53, and 1 + that is exactly the midpoint 1.75 + 2**-53,
    which ties to 1.75 -- but z is above it: fl(z) = 1.75 + 2**-52. The block sum
    must not take that shortcut; these and neighbouring cases against Fractions."""
    cases = [
        [1.0, 0.75, 2.0**-53, 2.0**-60],
        [1.0, 0.75, 2.0**-53, -(2.0**-60)],
        [-1.0, -0.75, -(2.0**-53), -(2.0**-60)],
        [1.0, 0.75, 2.0**-53],
        [1.0 + 2.0**-52, 2.0**-53, -(2.0**-110)],
        [1.0 + 2.0**-52, 2.0**-53, 2.0**-110],
        [1.0 + 2.0**-52, 2.0**-53],
        [2.0**53, 1.0, 2.0**-60, -(2.0**-61)],
        [-(2.0**53), -1.0, -(2.0**-1074)],
        [2.0**-1022, -(2.0**-1074), 2.0**-1075 * 0],
    ]
    assert float(rp_sum(cases[0], FLOAT64, block_k=4)) == 1.75 + 2.0**-52
    for values in cases:
        for mode in DETERMINISTIC:
            expected = rounded(exact_sum(values), FLOAT64, mode, 0)
            assert_same(rp_sum(values, FLOAT64, mode=mode, block_k=len(values)), expected)


# operands whose products two_product gets exactly: magnitudes 2**-480 .. 2**493, so that
# nonzero products lie in 2**-960 .. 2**986 (built in range, rather than filtered)
exact_product_operands = st.builds(math.ldexp, st.integers(-2**53, 2**53), st.integers(-480, 440))


@settings(max_examples=60)
@given(st.lists(st.tuples(exact_product_operands, exact_product_operands), min_size=1, max_size=8),
       st.sampled_from(MODES))
def test_block_k_1_matches_the_fused_sequential_order_on_any_products(pairs, mode):
    """The existing fused kernel (two_sum plus a round-to-odd step) and the exact
    block sum must agree wherever two_product is exact (products in 2**-969 ..
    2**1023, operands below 2**995), signed zeros and infinities included."""
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    with np.errstate(all="ignore"):
        for fmt in (FLOAT64, WIDE, rp.format("bfloat16")):
            fused = dot(a, b, fmt, fma=True, mode=mode, rng=SEED)
            blocks = dot(a, b, fmt, block_k=1, mode=mode, rng=SEED)
            assert_same(blocks, fused)


# -- accuracy ------------------------------------------------------------------------------


def test_kahan_is_more_accurate_than_sequential_on_long_bfloat16_sums():
    """32 independent sums of 4096 bfloat16 values (fixed seed): Kahan's error must
    beat sequential summation's in nearly every trial (a sign test: 30 of 32 has
    probability below 1e-7 if neither were better) and be far smaller on average."""
    rng = np.random.default_rng(9)
    x = format_values(rp.format("bfloat16"), (32, 4096), seed=10, spread=2)
    x = np.abs(x) + np.asarray(rp.round(rng.random((32, 4096)), "bfloat16"), np.float64)
    exact = np.array([float(sum(Fraction(v) for v in row)) for row in x])
    sequential = np.abs(rp_sum(x, "bfloat16", axis=1) - exact)
    kahan = np.abs(rp_sum(x, "bfloat16", axis=1, order="kahan") - exact)
    assert np.sum(kahan < sequential) >= 30
    assert kahan.mean() < sequential.mean() / 8
    # within a few units in the last place of bfloat16 of the exact sum
    assert np.all(kahan <= 4 * np.spacing(exact.astype(np.float32)) * 2**16)


# -- RPArrays ------------------------------------------------------------------------------


def test_matmul_of_rparrays_returns_an_rparray_of_the_accumulator_format():
    a = rp.asarray(format_values(rp.format("bfloat16"), (3, 4), seed=11), "bfloat16")
    b = rp.asarray(format_values(rp.format("bfloat16"), (4, 2), seed=12), "bfloat16")
    values = np.asarray(a, np.float64), np.asarray(b, np.float64)
    result = matmul(a, b, "bfloat16", acc="float32")
    assert isinstance(result, rp.RPArray)
    assert result.fmt == rp.format("float32") and result.mode == "nearest" and result.rng is None
    assert_same(np.asarray(result, np.float64), matmul(*values, "bfloat16", acc="float32"))
    assert isinstance(matmul(a, values[1], "bfloat16"), rp.RPArray)  # one RPArray operand suffices
    assert isinstance(matmul(values[0], b, "bfloat16", order="kahan"), rp.RPArray)
    vector = dot(a[0], b[:, 0], "bfloat16", block_k=2, mode="up")
    assert isinstance(vector, rp.RPArray) and vector.shape == () and vector.mode == "up"
    assert float(vector) == float(dot(values[0][0], values[1][:, 0], "bfloat16", block_k=2, mode="up"))
    assert isinstance(matmul(*values, "bfloat16"), np.ndarray)  # plain operands: plain results


def test_stochastic_rparray_results_share_a_generator():
    a = rp.asarray(format_values(rp.format("bfloat16"), (3, 40), seed=13), "bfloat16", "stochastic", rng=1)
    b = format_values(rp.format("bfloat16"), (40, 2), seed=14)
    first = matmul(a, b, "bfloat16", mode="stochastic")
    assert first.rng is a.rng  # the operand's generator
    again = rp.asarray(np.asarray(a), "bfloat16", "stochastic", rng=1)
    assert_same(np.asarray(matmul(again, b, "bfloat16", mode="stochastic")), np.asarray(first))  # reproducible
    generator = np.random.default_rng(5)
    assert matmul(a, b, "bfloat16", mode="stochastic", rng=generator).rng is generator
    seeded = matmul(np.asarray(a), rp.asarray(b, "bfloat16"), "bfloat16", mode="stochastic", rng=7)
    assert isinstance(seeded.rng, np.random.Generator)
    assert_same(np.asarray(seeded), matmul(np.asarray(a, np.float64), b, "bfloat16", mode="stochastic", rng=7))


# -- APyTypes, a second oracle -----------------------------------------------------------------

APY_MODES = {"nearest": "TIES_EVEN", "nearest_away": "TIES_AWAY", "toward_zero": "TO_ZERO", "up": "TO_POS",
             "down": "TO_NEG"}


@pytest.mark.parametrize("name, exp_bits, man_bits, spread", [
    ("bfloat16", 8, 7, 3),
    ("float16", 5, 10, 3),
    ("float16", 5, 10, -11),  # subnormal products and sums
    ("float16", 5, 10, 7),  # overflow to inf
])
def test_matmul_matches_apytypes_with_an_accumulator_of_the_same_format(name, exp_bits, man_bits, spread):
    """APyTypes' matmul inside APyFloatAccumulatorContext rounds each product onto
    the accumulator's format and adds sequentially, each sum rounded: rp.matmul with
    ``acc == fmt``, sequential. (Where they differ: APyTypes has no separate product
    format -- with a float32 accumulator its products are rounded onto float32 --,
    its JAM is not round-to-odd, and its stochastic modes draw other numbers.)"""
    rng = np.random.default_rng(15)

    def values(shape):
        v = rng.standard_normal(shape) * 2.0 ** (rng.integers(-2, 3, shape) + spread)
        v[rng.random(shape) < 0.1] = 0.0
        return np.asarray(rp.round(v, name), np.float64)

    a, b = values((5, 33)), values((33, 4))
    a_apy = apytypes.APyFloatArray.from_float(a, exp_bits=exp_bits, man_bits=man_bits)
    b_apy = apytypes.APyFloatArray.from_float(b, exp_bits=exp_bits, man_bits=man_bits)
    for mode, apy_mode in APY_MODES.items():
        quantization = getattr(apytypes.QuantizationMode, apy_mode)
        with apytypes.APyFloatAccumulatorContext(exp_bits=exp_bits, man_bits=man_bits, quantization=quantization):
            expected = np.asarray((a_apy @ b_apy).to_numpy(), np.float64)
        with np.errstate(all="ignore"):
            assert_same(matmul(a, b, name, mode=mode), expected)


def test_matmul_matches_apytypes_with_a_float32_accumulator():
    rng = np.random.default_rng(16)
    a = np.asarray(rp.round(rng.standard_normal((4, 50)), "bfloat16"), np.float64)
    b = np.asarray(rp.round(rng.standard_normal((50, 3)), "bfloat16"), np.float64)
    a_apy = apytypes.APyFloatArray.from_float(a, exp_bits=8, man_bits=7)
    b_apy = apytypes.APyFloatArray.from_float(b, exp_bits=8, man_bits=7)
    with apytypes.APyFloatAccumulatorContext(exp_bits=8, man_bits=23,
                                             quantization=apytypes.QuantizationMode.TIES_EVEN):
        expected = np.asarray((a_apy @ b_apy).to_numpy(), np.float64)
    assert_same(matmul(a, b, "float32"), expected)  # bfloat16 products are exact in float32


# -- arguments -------------------------------------------------------------------------------


def test_bad_arguments():
    with pytest.raises(TypeError, match="block_k"):
        rp_sum([1.0], "bfloat16", block_k=2.0)
    with pytest.raises(TypeError, match="block_k"):
        rp_sum([1.0], "bfloat16", block_k=True)
    with pytest.raises(TypeError, match="block_k"):
        matmul(np.ones((1, 2)), np.ones((2, 1)), "bfloat16", block_k="4")
    with pytest.raises(ValueError, match="block_k"):
        rp_sum([1.0], "bfloat16", block_k=0)
    with pytest.raises(ValueError, match="block_k"):
        dot([1.0], [1.0], "bfloat16", block_k=-3)
    with pytest.raises(ValueError, match="block_k.*pairwise"):
        matmul(np.ones((1, 2)), np.ones((2, 1)), "bfloat16", block_k=2, order="pairwise")
    with pytest.raises(ValueError, match="block_k.*kahan"):
        rp_sum([1.0], "bfloat16", block_k=2, order="kahan")
    with pytest.raises(ValueError, match="order"):
        rp_sum([1.0], "bfloat16", order="Kahan")
    with pytest.raises(ValueError, match="order"):
        matmul(np.ones((1, 2)), np.ones((2, 1)), "bfloat16", order=None)
    assert float(rp_sum([1.0, 2.0], "bfloat16", block_k=np.int32(5))) == 3.0
    assert float(rp_sum([], "bfloat16", order="kahan")) == 0.0
    assert float(rp_sum([], "bfloat16", block_k=3)) == 0.0


# -- fixed-point wrap: the low bits of exact sums far past the range ----------------------------


def _wrapped(z, fmt, mode):
    """The exact `z` rounded onto the steps of the fixed-point `fmt` in a deterministic
    `mode`, the integer of steps wrapped modulo 2**w in two's complement."""
    step = Fraction(2) ** -fmt.frac_bits
    steps = z / step
    def away(s):  # nearest, ties away from zero
        return math.floor(abs(s) + Fraction(1, 2)) * (-1 if s < 0 else 1)

    def odd(s):  # s where it is a step, else its neighbour of odd steps
        return int(s) if s.denominator == 1 else math.floor(s) | 1

    k = {"down": math.floor, "up": math.ceil, "toward_zero": int, "nearest": round, "nearest_away": away,
         "odd": odd}[mode](steps)
    modulus, low = 2**fmt.bits, 2 ** (fmt.bits - 1) if fmt.signed else 0
    return float(((k + low) % modulus - low) * step)


def _sequential_reference(a, b, fmt, mode, fma):
    """Sequential order: each product (rounded first unless `fma`) added to the
    accumulator, one rounding per addition."""
    acc = None
    for x, y in zip(a, b):
        product = Fraction(x) * Fraction(y)
        if not fma:
            product = Fraction(_wrapped(product, fmt, mode))
        acc = _wrapped(product if acc is None else Fraction(acc) + product, fmt, mode)
    return acc


@pytest.mark.parametrize("fmt", [rp.FixedFormat(21, 32, overflow="wrap"), rp.FixedFormat(53, 0, overflow="wrap"),
                                 rp.FixedFormat(8, 45, signed=False, overflow="wrap"),
                                 rp.FixedFormat(8, 8, overflow="wrap"), rp.FixedFormat(30, 20, overflow="wrap")],
                         ids=repr)
def test_wrapped_fused_and_block_sums_keep_the_low_bits(fmt):
    """53-bit words (whose moduli float64 holds only to the step) and products far past
    the range beside an accumulator's low bits: rounded products, fma=True, block_k=1
    and block_k=n against exact wrapping, in the deterministic modes."""
    rng = np.random.default_rng(fmt.bits * 100 + fmt.frac_bits)
    step = 2.0**-fmt.frac_bits
    cases = [([2.0**-32], [1.0]), ([-1.0], [1.0]), ([3.0], [1.0]), ([-0.25], [1.0]),
             ([0.25, float.fromhex("0x1.947d55045483ep-4")], [1.0, float.fromhex("0x1.85dce89af805cp+110")])]
    # ties 2**52 steps and more out, where a float64 ulp is a step: the tie is the even
    # grid point plus half a step (nearest_away went to the even one)
    for big in (-(2.0**52), 3 * 2.0**52, 2.0**52 + 1, -(2.0**53) + 2, 2.0**60):
        for half in (0.5, -0.5):
            cases.append(([big * step, half * step], [1.0, 1.0]))
    for _ in range(40):
        n = int(rng.integers(1, 4))
        cases.append(((rng.standard_normal(n) * np.exp2(rng.integers(-30, 70, n))).tolist(),
                      (rng.standard_normal(n) * np.exp2(rng.integers(-30, 70, n))).tolist()))
    for a, b in cases:
        for mode in ("nearest", "nearest_away", "up", "down", "toward_zero", "odd"):
            want = _sequential_reference(a, b, fmt, mode, fma=True)
            once = _wrapped(sum((Fraction(x) * Fraction(y) for x, y in zip(a, b)), Fraction(0)), fmt, mode)
            assert float(dot(a, b, fmt, mode=mode)) == _sequential_reference(a, b, fmt, mode, fma=False)
            assert float(dot(a, b, fmt, fma=True, mode=mode)) == want, (a, b, mode)
            assert float(dot(a, b, fmt, block_k=1, mode=mode)) == want, (a, b, mode)
            assert float(dot(a, b, fmt, block_k=len(a), mode=mode)) == once, (a, b, mode)
