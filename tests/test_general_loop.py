"""The general loop (``round_bits``) on paths that the fast loops shadow, against
the exact oracle and the documented stream: ties that only the general loop
decides (runs with a NaN or an outlier, deep formats, wrap-around fixed point),
a tie of the random number's high words, and zeros of formats without -0."""
import math

import numpy as np
import pytest

import rpfloat as rp
from reference import round_reference
from stream_reference import MASK_64, seed_key, stream
from test_random_stream import predicted

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def check(xs, fmt, mode, dtype, overflow=None):
    """rp.round of `xs` (as `dtype`) against the oracle, bit for bit."""
    xs = np.asarray(xs, dtype)
    got = rp.round(xs, fmt, mode, overflow=overflow)
    expected = np.array([round_reference(float(x), fmt, mode, overflow, got.dtype) for x in xs], got.dtype)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    u = _UINT[got.dtype.itemsize]
    bad = np.flatnonzero(got[~nan].view(u) != expected[~nan].view(u))
    assert bad.size == 0, [(xs[~nan][i], got[~nan][i], expected[~nan][i]) for i in bad[:5]]


# the parity of a man_bits == 0 code below the carrier's normals (deep formats)
@pytest.mark.parametrize("fmt, dtype, low", [
    (rp.FloatFormat(8, 0, bias=140), np.float32, -148),
    (rp.FloatFormat(11, 0, bias=1030), np.float64, -1073),
])
@pytest.mark.parametrize("mode", ["nearest", "odd"])
def test_deep_powers_of_two_tie_to_an_even_exponent_field(fmt, dtype, low, mode):
    top = int(math.log2(np.finfo(dtype).tiny))
    xs = [s * 1.5 * 2.0**e for e in range(low, top + 2) for s in (1, -1)]
    check(xs, fmt, mode, dtype)


# float32 data on the general path, where the high words of the random number and
# the threshold tie and the low words decide (64 random bits)
def test_low_random_word_decides_a_tie_of_the_high_words():
    fmt = rp.FixedFormat(4, 4, overflow="wrap")  # the general loop (wrap-around)
    key = seed_key(0)
    hits = []
    for i in range(200000):
        d = MASK_64 - stream(key, i)  # the complement, as the decision rule reads it
        high = d >> 32
        if 2**22 <= high < 2**23:  # x = sig * 2**-37, sig = 2*high + 1 in [2**23, 2**24)
            hits.append(i)
            if len(hits) == 8:
                break
    x = np.zeros(hits[-1] + 1, np.float32)
    for i in hits:
        high = (MASK_64 - stream(key, i)) >> 32
        x[i] = np.float32((2 * high + 1) * 2.0**-37)  # threshold: high word `high`, low word 2**31
    got = rp.round(x, fmt, "stochastic", rng=0)
    expected = predicted(x, fmt, "stochastic", 0, None, 0, got.dtype)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    # both outcomes occur (the low word decided them)
    assert len({bool(got[i] != 0) for i in hits}) == 2


# formats whose min_normal lies exactly one binade below the carrier's: the
# shallowest "deep" formats (binades of the carrier's subnormals are normal binades
# of the format, with its spacing, not the carrier's drop); and, for contrast, the
# formats whose min_normal is the carrier's
@pytest.mark.parametrize("fmt, dtype", [
    (rp.FloatFormat(8, 3, bias=128), np.float32),
    (rp.FloatFormat(8, 3, bias=128, subnormals=False), np.float32),
    (rp.FloatFormat(8, 0, bias=128), np.float32),
    (rp.FloatFormat(8, 3, bias=127), np.float32),
    (rp.FloatFormat(11, 3, bias=1024), np.float64),
    (rp.FloatFormat(11, 3, bias=1024, subnormals=False), np.float64),
    (rp.FloatFormat(11, 3, bias=1023), np.float64),
])
@pytest.mark.parametrize("mode", ["nearest", "up", "toward_zero", "odd"])
def test_min_normal_one_binade_below_the_carriers(fmt, dtype, mode):
    info = np.finfo(dtype)
    tiny, least = float(info.smallest_normal), float(info.smallest_subnormal)
    assert fmt.min_normal in (tiny / 2, tiny)
    rng = np.random.default_rng(fmt.bias)
    # carrier subnormals throughout (each binade), the format's boundaries and their neighbours
    xs = list(rng.integers(1, 2**(info.nmant), 400) * least)
    for edge in (fmt.min_normal, fmt.min_normal / 2, fmt.min_normal * 3 / 4, tiny, 2 * tiny, fmt.smallest_subnormal):
        edge = dtype(edge)
        xs += [edge, np.nextafter(edge, dtype(0)), np.nextafter(edge, dtype(1))]
    xs += [-x for x in xs]
    check(xs, fmt, mode, dtype)


# without subnormals a tie between 0 and min_normal rounds up; where min_normal is
# the carrier's smallest normal (or twice it) that tie lies on the aligned path
@pytest.mark.parametrize("fmt, dtype", [
    (rp.FloatFormat(8, 7, subnormals=False), np.float32),   # bfloat16 without subnormals
    (rp.FloatFormat(8, 7, bias=126, subnormals=False), np.float32),
    (rp.FloatFormat(11, 10, subnormals=False), np.float64),
])
def test_half_min_normal_ties_up_without_subnormals(fmt, dtype):
    half = fmt.min_normal / 2
    xs = [half, -half, np.nextafter(dtype(half), dtype(0)), np.nextafter(dtype(half), dtype(1)), fmt.min_normal]
    check(xs, fmt, "nearest", dtype)  # the fast loop
    check(xs + [np.nan, np.inf], fmt, "nearest", dtype)  # a NaN in the run: the general loop (round_bits)


# float64 data onto fnuz formats in the halves loop from 0 up: results of 0 are +0
@pytest.mark.parametrize("name", ["float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"])
def test_fnuz_float64_stochastic_zeros_are_positive(name):
    fmt = rp.format(name)
    rng = np.random.default_rng(0)
    x = -np.abs(rng.standard_normal(4096)) * 2.0 ** rng.integers(-40, 2, 4096)
    x[::7] = -0.0
    x[::11] = -1e-300
    got = rp.round(x, fmt, "stochastic", rng=3)
    expected = predicted(x, fmt, "stochastic", 3, None, 0, got.dtype)
    np.testing.assert_array_equal(got.view(np.uint64), expected.view(np.uint64))
