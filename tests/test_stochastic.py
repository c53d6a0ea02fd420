"""Stochastic rounding against the exact probabilities of tests/reference.py.

Each frequency check rounds N copies of one input in a single call with an int seed
and tests the count of results equal to the larger-magnitude neighbour `hi`.

Tolerance.  For a correct implementation the count K is Binomial(N, p).  The
Chernoff bound in its relative-entropy form, P(K >= k) <= exp(-N * KL(k/N || p)) for
k/N >= p (and the mirror bound below p), is rigorous for every N and p (no normal
approximation).  A check accepts K iff N * KL(K/N || p) < log(2 / DELTA), so a correct
implementation fails it with probability below DELTA.  With DELTA = 1e-6 / MAX_CHECKS
and fewer than MAX_CHECKS checks in this file (asserted by a counter), the chance
that a correct implementation fails anything here is below 1e-6 (union bound).
At N = 200_000 and p = 1/2 this accepts |K/N - p| up to about 0.0073.

Sums of many different inputs (unbiasedness) use Bernstein's inequality,
P(|S - E S| >= t) <= 2 exp(-t**2 / (2 (V + b t / 3))), with V the exact variance and
b the largest step, again at DELTA per check. Both bounds live in tests/stats_bounds.py.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

import rpfloat as rp
import stats_bounds
from reference import STOCHASTIC_MODES, neighbours, stochastic_probability

N = 200_000
MAX_CHECKS = 400
DELTA = 1e-6 / MAX_CHECKS
_checks_done = [0]

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a):
    a = np.asarray(a)
    return a.view(_UINT[a.dtype.itemsize])


def assert_binomial(count: int, n: int, p: Fraction, context: str):
    _checks_done[0] += 1
    assert _checks_done[0] <= MAX_CHECKS, "more checks than the union bound allows for"
    stats_bounds.assert_binomial(count, n, p, DELTA, f"{context}: rounded to hi")


def _same_bits(values: np.ndarray, target: float) -> np.ndarray:
    """Elementwise: values equal to target bit for bit (NaN: any NaN)."""
    if math.isnan(target):
        return np.isnan(values)
    with np.errstate(invalid="ignore"):
        return _bits(values) == _bits(np.array(target, dtype=values.dtype))


def check_stochastic(fmt, x, dtype, mode="stochastic", overflow=None, rand_bits=None, seed=0):
    """Round N copies of x; every result is one of the oracle's two results and the
    frequency of hi matches the oracle's probability."""
    fmt = rp.format(fmt)
    xs = np.full(N, x, dtype=dtype)
    x = float(xs[0])
    result_dtype = np.result_type(xs.dtype, fmt.carrier)
    lo, hi, p = stochastic_probability(x, fmt, rand_bits, mode=mode, overflow=overflow, dtype=result_dtype)
    got = rp.round(xs, fmt, mode, overflow=overflow, rng=seed, rand_bits=rand_bits)
    assert got.dtype == result_dtype
    context = f"rp.round({x!r} as {xs.dtype}, {fmt!r}, {mode!r}, overflow={overflow!r}, rand_bits={rand_bits})"
    is_lo, is_hi = _same_bits(got, lo), _same_bits(got, hi)
    stray = np.flatnonzero(~(is_lo | is_hi))
    assert stray.size == 0, f"{context}: {stray.size} results not in {{{lo!r}, {hi!r}}}, e.g. {got[stray[:5]]}"
    if is_lo.all() and is_hi.all():  # one possible result (exact input, saturation)
        return got
    assert_binomial(int(is_hi.sum()), N, p, context)
    return got


# (format, x, input dtype, overflow): normal, subnormal, powers of two from both sides,
# the zero/min_normal gap without subnormals, overflow, exp_bits=None, fixed point.
POINTS = [
    ("bfloat16", 1.1, np.float64, None),
    ("bfloat16", -1.1, np.float32, None),
    ("bfloat16", 1 + 2.0**-10, np.float32, None),  # just above a power of two: step 2**-7
    ("bfloat16", 1 - 2.0**-10, np.float32, None),  # just below: step 2**-8
    ("bfloat16", -(2.0**-130) * 1.3, np.float32, None),  # subnormal
    ("float16", 2.0**-24 * 0.3, np.float64, None),  # below the smallest subnormal
    ("float16", 65519.0, np.float64, None),  # between max and the overflow grid value
    ("float8_e5m2", 2.0**-16 * 1.3, np.float64, None),
    ("float8_e5m2", -(2.0**-17), np.float64, None),  # lo is -0
    ("float8_e5m2", 2.0**-14 * (1 - 2.0**-5), np.float16, None),
    ("float8_e5m2", 60000.0, np.float64, None),  # overflows to inf with P(hi)
    ("float8_e5m2", -60000.0, np.float32, "saturate"),
    ("float8_e5m2", 60000.0, np.float32, "nan"),
    ("float8_e4m3fn", 460.0, np.float64, None),  # overflows to NaN with P(hi)
    ("float8_e4m3fn", -460.0, np.float64, "saturate"),
    ("float8_e4m3fn", 1.3, np.float16, None),
    ("float8_e4m3fnuz", -(2.0**-11), np.float32, None),  # no -0: lo is +0
    ("float8_e4m3", 2.0**-9 * 1.7, np.float64, None),
    ("float4_e2m1fn", 5.0, np.float32, None),
    ("float4_e2m1fn", -7.0, np.float32, None),  # beyond max 6: saturates
    (rp.FloatFormat(5, 2, subnormals=False), 2.0**-14 * 0.3, np.float64, None),  # 0 / min_normal
    (rp.FloatFormat(5, 2, subnormals=False), -(2.0**-14) * 0.7, np.float64, None),
    (rp.FloatFormat(None, 2), 1.3, np.float16, None),
    (rp.FloatFormat(None, 7), 2.0**-140, np.float32, None),  # float32 range, bf16 spacing
    (rp.FloatFormat(None, 10), 3.0e38, np.float32, None),
    (rp.FloatFormat(9, 3), 2.0**200 * 1.1, np.float64, None),
    (rp.FixedFormat(4, 4), 0.3, np.float64, None),
    (rp.FixedFormat(4, 4), -0.3, np.float32, None),
    (rp.FixedFormat(4, 4), 7.97, np.float64, None),  # saturates at max
    (rp.FixedFormat(4, 4), 7.97, np.float64, "wrap"),  # hi wraps to -8
    (rp.FixedFormat(4, 4), -8.02, np.float64, "wrap"),
    (rp.FixedFormat(2, 3, signed=False), -0.1, np.float64, None),
    (rp.FixedFormat(2, 3, signed=False), -0.1, np.float64, "wrap"),
    (rp.FixedFormat(-3, 8), 0.01, np.float64, None),
    (rp.FixedFormat(30, -10), 1e6 + 0.5, np.float64, None),
]


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
@pytest.mark.parametrize("point", POINTS, ids=lambda p: f"{p[0]!r}-{p[1]!r}-{np.dtype(p[2])}-{p[3]}")
def test_frequency_matches_oracle(point, mode):
    fmt, x, dtype, overflow = point
    check_stochastic(fmt, x, dtype, mode, overflow, seed=zlib.crc32(f"{fmt!r} {x!r}".encode()))


def test_stochastic_equal_is_one_half():
    # the points above check it per point; here a point with a very uneven split
    lo, hi, p = stochastic_probability(1 + 2.0**-20, rp.format("bfloat16"), mode="stochastic_equal")
    assert p == Fraction(1, 2)
    check_stochastic("bfloat16", 1 + 2.0**-20, np.float64, "stochastic_equal", seed=5)


# fractions of the step at which x lies, chosen so that floor(frac * 2**r) varies with r
RAND_BITS_FRACTIONS = [Fraction(3, 10), Fraction(7, 10), Fraction(1, 2), Fraction(1, 3), Fraction(1, 1000)]


@pytest.mark.parametrize("rand_bits", [1, 2, 3, 5, 8, 16])
@pytest.mark.parametrize("frac", RAND_BITS_FRACTIONS, ids=str)
@pytest.mark.parametrize("sign", [1, -1])
def test_rand_bits_frequency(rand_bits, frac, sign):
    """P(hi) = floor(frac * 2**r) / 2**r on the magnitude (docs/rounding.md)."""
    x = sign * (1 + float(frac) * 2.0**-7)  # bfloat16 step above 1 is 2**-7
    lo, hi, p = stochastic_probability(x, rp.format("bfloat16"), rand_bits)
    assert p == Fraction(math.floor(Fraction(abs(x) - 1) * 2**7 * 2**rand_bits), 2**rand_bits)
    check_stochastic("bfloat16", x, np.float64, rand_bits=rand_bits, seed=rand_bits)


@pytest.mark.parametrize("rand_bits", [None, 1, 4])
def test_stochastic_equal_with_rand_bits(rand_bits):
    check_stochastic("float8_e4m3fn", 1.01, np.float64, "stochastic_equal", rand_bits=rand_bits, seed=3)


def _bernstein_tolerance(variance: float, step: float) -> float:
    return stats_bounds.bernstein_tolerance(variance, step, DELTA)


@pytest.mark.parametrize(
    "fmt, low, high, dtype",
    [
        ("bfloat16", 0.5, 4.0, np.float32),  # crosses powers of two
        ("float8_e5m2", 2.0**-18, 2.0**-12, np.float64),  # subnormals into normals
        ("float8_e4m3fn", -300.0, 300.0, np.float64),
        (rp.FloatFormat(4, 2, subnormals=False), 0.0, 2.0**-4, np.float64),  # the 0 / min_normal gap
        (rp.FixedFormat(3, 5), -3.0, 3.0, np.float64),
    ],
    ids=repr,
)
def test_sum_is_unbiased(fmt, low, high, dtype):
    """The sum of SR results equals the sum of the inputs within Bernstein's bound."""
    fmt = rp.format(fmt)
    rng = np.random.default_rng(11)
    distinct = rng.uniform(low, high, 2000).astype(dtype)
    xs = np.repeat(distinct, N // distinct.size)
    got = rp.round(xs, fmt, "stochastic", rng=17)
    exact_sum = Fraction(0)
    variance = Fraction(0)
    step = 0.0
    result_dtype = np.result_type(xs.dtype, fmt.carrier)
    copies = N // distinct.size
    for x in distinct:
        lo, hi, _, _ = neighbours(Fraction(float(x)), fmt, result_dtype)
        lo_r, hi_r, p = stochastic_probability(float(x), fmt, dtype=result_dtype)
        assert {lo_r, hi_r} <= {float(lo), float(hi)}  # no overflow in these ranges
        exact_sum += copies * Fraction(float(x))
        variance += copies * p * (1 - p) * (hi - lo) ** 2
        step = max(step, float(hi - lo))
    _checks_done[0] += 1
    values, counts = np.unique(got.astype(np.float64), return_counts=True)
    total = sum(Fraction(float(v)) * int(c) for v, c in zip(values, counts))
    error = abs(float(total - exact_sum))
    tolerance = _bernstein_tolerance(float(variance), step)
    assert error < tolerance, f"{fmt!r}: |sum(SR(x)) - sum(x)| = {error} >= {tolerance}"


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz", "float6_e3m2fn", "float4_e2m1fn"])
@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
def test_representable_inputs_never_move(name, mode):
    fmt = rp.format(name)
    values = fmt.values()
    xs = np.tile(np.concatenate([values, -values]), 200)
    got = rp.round(xs, fmt, mode, rng=1)
    expected = xs + 0.0 if fmt.nan == "negzero" else xs  # fnuz: -0 does not exist
    assert np.array_equal(_bits(got.astype(np.float64)), _bits(expected))


def test_specials_in_stochastic_modes():
    xs = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] * 1000)
    for name in ("float8_e5m2", "float8_e4m3fn", "float4_e2m1fn"):
        fmt = rp.format(name)
        for mode in STOCHASTIC_MODES:
            got = rp.round(xs, fmt, mode, rng=2)
            for i, x in enumerate(xs[:5]):
                lo, hi, p = stochastic_probability(x, fmt, mode=mode)
                assert p == 0
                column = got[i::5]
                assert _same_bits(column, lo).all(), (name, mode, x, column[:3], lo)


# ---------------------------------------------------------------------------------------
# Seeds and generators
# ---------------------------------------------------------------------------------------


def _sr_input():
    return np.linspace(1.0, 2.0, 10_001)


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
def test_same_int_seed_same_bits(mode):
    xs = _sr_input()
    first = rp.round(xs, "bfloat16", mode, rng=1234)
    second = rp.round(xs, "bfloat16", mode, rng=1234)
    assert np.array_equal(_bits(first), _bits(second))
    other = rp.round(xs, "bfloat16", mode, rng=1235)
    assert not np.array_equal(first, other)


def test_seed_sequence_is_reproducible():
    xs = _sr_input()
    first = rp.round(xs, "bfloat16", "stochastic", rng=np.random.SeedSequence(99))
    second = rp.round(xs, "bfloat16", "stochastic", rng=np.random.SeedSequence(99))
    assert np.array_equal(_bits(first), _bits(second))


def test_generator_advances():
    xs = _sr_input()
    gen = np.random.default_rng(5)
    first = rp.round(xs, "bfloat16", "stochastic", rng=gen)
    second = rp.round(xs, "bfloat16", "stochastic", rng=gen)
    assert not np.array_equal(first, second)
    # ... and is reproducible from the generator's seed
    gen_again = np.random.default_rng(5)
    assert np.array_equal(_bits(first), _bits(rp.round(xs, "bfloat16", "stochastic", rng=gen_again)))
    assert np.array_equal(_bits(second), _bits(rp.round(xs, "bfloat16", "stochastic", rng=gen_again)))


def test_no_rng_gives_fresh_entropy():
    xs = _sr_input()
    assert not np.array_equal(rp.round(xs, "bfloat16", "stochastic"), rp.round(xs, "bfloat16", "stochastic"))


@pytest.mark.parametrize("rand_bits", [None, 3, 8])
def test_sign_symmetry_with_same_seed(rand_bits):
    """Probability on the magnitude (docs/rounding.md): SR(-x) == -SR(x) for the same draws."""
    xs = _sr_input()
    up = rp.round(xs, "bfloat16", "stochastic", rng=77, rand_bits=rand_bits)
    down = rp.round(-xs, "bfloat16", "stochastic", rng=77, rand_bits=rand_bits)
    assert np.array_equal(_bits(-up), _bits(down))


def test_layout_does_not_change_the_draws():
    """Element i in C order draws the i-th number whatever the strides or byte order."""
    base = np.linspace(-3.0, 3.0, 60_000).reshape(200, 300)
    expected = rp.round(base, "float8_e4m3fn", "stochastic", rng=8)
    fortran = np.asfortranarray(base)
    swapped = base.astype(base.dtype.newbyteorder())
    for variant in (fortran, swapped):
        got = rp.round(variant, "float8_e4m3fn", "stochastic", rng=8)
        assert np.array_equal(_bits(np.ascontiguousarray(got, dtype=expected.dtype)), _bits(expected))
    strided = np.empty((200, 600))
    strided[:, ::2] = base
    got = rp.round(strided[:, ::2], "float8_e4m3fn", "stochastic", rng=8)
    assert np.array_equal(_bits(np.ascontiguousarray(got)), _bits(expected))
