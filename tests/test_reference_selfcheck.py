"""Checks of the oracle (tests/reference.py) itself, without rpfloat.

The oracle is compared with independent implementations where they exist
(ml_dtypes and NumPy casts for round-to-nearest-even with each type's own overflow
behaviour, ml_dtypes bit patterns for encode/decode), with a brute-force search over
decoded value lists for tiny formats, and with the worked examples of docs/rounding.md and docs/formats.md.
Formats here are local stand-ins carrying only the public fields the oracle reads.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from reference import (
    DETERMINISTIC_MODES,
    decode_reference,
    encode_reference,
    float_max,
    neighbours,
    resolve_overflow,
    round_reference,
    stochastic_probability,
)


@dataclass(frozen=True)
class Float:
    exp_bits: int | None
    man_bits: int
    bias: int | None = None
    subnormals: bool = True
    inf: bool = True
    nan: str | None = "ieee"
    overflow: str | None = None


@dataclass(frozen=True)
class Fixed:
    int_bits: int
    frac_bits: int
    signed: bool = True
    overflow: str = "saturate"


# name -> (stand-in format, ml_dtypes type, bits)
ML_FORMATS = {
    "float8_e4m3fn": (Float(4, 3, inf=False, nan="max"), ml_dtypes.float8_e4m3fn, 8),
    "float8_e5m2": (Float(5, 2), ml_dtypes.float8_e5m2, 8),
    "float8_e4m3fnuz": (Float(4, 3, bias=8, inf=False, nan="negzero"), ml_dtypes.float8_e4m3fnuz, 8),
    "float8_e5m2fnuz": (Float(5, 2, bias=16, inf=False, nan="negzero"), ml_dtypes.float8_e5m2fnuz, 8),
    "float8_e4m3b11fnuz": (
        Float(4, 3, bias=11, inf=False, nan="negzero"),
        ml_dtypes.float8_e4m3b11fnuz,
        8,
    ),
    "float8_e4m3": (Float(4, 3), ml_dtypes.float8_e4m3, 8),
    "float8_e3m4": (Float(3, 4), ml_dtypes.float8_e3m4, 8),
    "float6_e2m3fn": (Float(2, 3, inf=False, nan=None), ml_dtypes.float6_e2m3fn, 6),
    "float6_e3m2fn": (Float(3, 2, inf=False, nan=None), ml_dtypes.float6_e3m2fn, 6),
    "float4_e2m1fn": (Float(2, 1, inf=False, nan=None), ml_dtypes.float4_e2m1fn, 4),
    "bfloat16": (Float(8, 7), ml_dtypes.bfloat16, 16),
    "float16": (Float(5, 10), np.float16, 16),
}


def _astype(xs, dtype):
    """xs.astype(dtype) without the warnings that NaN payloads and overflow raise."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(xs).astype(dtype)


def _cast(xs, dtype):
    """xs.astype(dtype) then float64, quietly."""
    return _astype(_astype(xs, dtype), np.float64)


def _has_nan(fmt) -> bool:
    try:
        resolve_overflow(fmt, "nan")
    except ValueError:
        return False
    return True


def _same(a, b) -> bool:
    """Bitwise equality of float64 values, any NaN equal to any NaN."""
    a, b = np.float64(a), np.float64(b)
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b))
    return a.view(np.uint64) == b.view(np.uint64)


def _assert_matches(xs, expected, fmt, mode="nearest", overflow=None, dtype=np.float64):
    bad = []
    for x, want in zip(xs, expected):
        got = round_reference(x, fmt, mode, overflow, dtype)
        if not _same(got, want):
            bad.append((float(x), float(want), got))
    assert not bad, f"{len(bad)} mismatches, first: (x, independent, oracle) {bad[:5]}"


def _float16_sweep(fmt, bits_span=2):
    """Every positive float16 whose magnitude lies within a few binades of the
    format's range, every 7th such negative one, every 61st pattern outside that
    range, and the specials."""
    patterns = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    xs = _cast(patterns.view(np.float16), np.float64)
    mag = np.abs(xs)
    low = float(Fraction(2) ** (1 - (fmt.bias if fmt.bias is not None else 2 ** (fmt.exp_bits - 1) - 1)
                                   - fmt.man_bits - bits_span))
    high = float(float_max(fmt)) * 2**bits_span
    inside = (mag >= low) & (mag <= high) & ((xs > 0) | (np.arange(xs.size) % 7 == 0))
    keep = inside | (np.arange(xs.size) % 61 == 0) | ~np.isfinite(xs) | (xs == 0)
    return xs[keep]


@pytest.mark.parametrize("name", [n for n in ML_FORMATS if n not in ("bfloat16", "float16")])
def test_nearest_matches_ml_dtypes_on_float16_patterns(name):
    fmt, ml_type, _ = ML_FORMATS[name]
    xs = _float16_sweep(fmt)
    if not _has_nan(fmt):  # ml_dtypes has nothing to put a NaN into
        xs = xs[~np.isnan(xs)]
    expected = _cast(_astype(xs, np.float32), ml_type)
    _assert_matches(xs, expected, fmt)


def _float32_tie_patterns(stride=3):
    """float32 patterns whose dropped 16 bits (for bfloat16) are below, at and above
    the midpoint, over every stride-th bfloat16 pattern of both signs."""
    high = np.arange(0, 0x10000, stride, dtype=np.uint32)
    high = np.union1d(high, [0x0000, 0x0001, 0x007F, 0x0080, 0x7F7F, 0x7F80, 0x7FC0,
                             0x8000, 0x8001, 0x807F, 0x8080, 0xFF7F, 0xFF80])
    low = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    return ((high[:, None] << 16) | low[None, :]).ravel().view(np.float32)


def _float32_tie_values(stride=3):
    return _cast(_float32_tie_patterns(stride), np.float64)


def test_bfloat16_matches_ml_dtypes_on_float32_ties():
    fmt = ML_FORMATS["bfloat16"][0]
    xs = _float32_tie_values(stride=29)
    expected = _cast(_astype(xs, np.float32), ml_dtypes.bfloat16)
    _assert_matches(xs, expected, fmt)


def test_unbounded_exponent_is_bfloat16_for_float32():
    # docs/formats.md: float32 input with FloatFormat(None, 7) gives exactly bfloat16
    xs = _float32_tie_values(stride=31)
    expected = _cast(_astype(xs, np.float32), ml_dtypes.bfloat16)
    _assert_matches(xs, expected, Float(None, 7), dtype=np.float32)
    assert round_reference(2.0**-140, Float(None, 7), dtype=np.float32) == 0.0
    assert round_reference(3.4e38, Float(None, 7), dtype=np.float32) == math.inf


def test_unbounded_exponent_is_e5m2_for_float16():
    xs = _cast(np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)[::7], np.float64)
    expected = _cast(_astype(xs, np.float32), ml_dtypes.float8_e5m2)
    _assert_matches(xs, expected, Float(None, 2), dtype=np.float16)


def _grid_points(fmt, rng, count):
    """Values of an IEEE-like format, their midpoints and nearby float64s."""
    m = fmt.man_bits
    bias = fmt.bias if fmt.bias is not None else 2 ** (fmt.exp_bits - 1) - 1
    e = rng.integers(1 - bias - m - 3, 2**fmt.exp_bits - bias + 2, count)
    k = rng.integers(0, 2 ** (m + 1), count).astype(np.float64)
    offset = rng.choice([0.0, 0.5, 0.3, 0.7], count)
    xs = np.ldexp(k + offset, e - m)
    nudge = rng.choice([-1, 0, 1], count)
    xs = np.where(nudge == 0, xs, np.nextafter(xs, np.where(nudge > 0, np.inf, -np.inf)))
    return xs * rng.choice([-1.0, 1.0], count)


def test_float16_matches_numpy_cast_from_float64():
    rng = np.random.default_rng(1)
    xs = np.concatenate([_grid_points(Float(5, 10), rng, 6000), [np.inf, -np.inf, np.nan, 0.0, -0.0]])
    expected = _cast(xs, np.float16)
    _assert_matches(xs, expected, Float(5, 10))


def test_float32_matches_numpy_cast_from_float64():
    rng = np.random.default_rng(2)
    xs = _grid_points(Float(8, 23), rng, 6000)
    expected = _cast(xs, np.float32)
    _assert_matches(xs, expected, Float(8, 23))


def test_float64_is_identity():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal(500) * 2.0 ** rng.integers(-1070, 1020, 500)
    for mode in DETERMINISTIC_MODES:
        _assert_matches(xs, xs, Float(11, 52), mode)


@pytest.mark.parametrize("name", list(ML_FORMATS))
def test_codes_match_ml_dtypes(name):
    fmt, ml_type, bits = ML_FORMATS[name]
    codes = np.arange(2**bits, dtype=np.uint16 if bits == 16 else np.uint8)
    if bits == 16:
        codes = codes[::5]
    values = _cast(codes.view(ml_type), np.float64)
    for code, value in zip(codes.tolist(), values):
        decoded = decode_reference(code, fmt)
        assert _same(decoded, value), (name, hex(code), decoded, value)
        if not np.isnan(value):
            assert encode_reference(value, fmt) == code, (name, hex(code), value)
    if _has_nan(fmt):
        with np.errstate(invalid="ignore"):
            nan_codes = np.array([np.nan, -np.nan], np.float32).astype(ml_type).view(codes.dtype)
        assert [encode_reference(np.nan, fmt), encode_reference(-np.nan, fmt)] == nan_codes.tolist()
    else:
        with pytest.raises(ValueError):
            encode_reference(np.nan, fmt)


@pytest.mark.parametrize("name", [n for n in ML_FORMATS if n != "float16"])
def test_codes_of_specials_and_overflow_match_ml_dtypes(name):
    """NaN keeps its sign, overflow to NaN takes the sign of x (as ml_dtypes does)."""
    fmt, ml_type, bits = ML_FORMATS[name]
    xs = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e30, -1e30, -0.0, 0.0, 1e-30, -1e-30], np.float32)
    if not _has_nan(fmt):
        xs = xs[2:]
    with np.errstate(invalid="ignore", over="ignore"):
        want = xs.astype(ml_type).view(np.uint16 if bits == 16 else np.uint8).tolist()
    got = [encode_reference(round_reference(x, fmt), fmt) for x in xs]
    assert got == want, (name, [hex(c) for c in got], [hex(c) for c in want])


# ---------------------------------------------------------------------------------------
# Brute force over tiny formats: neighbours and code parities from decoded value lists
# ---------------------------------------------------------------------------------------


def _tiny_formats():
    for e, m in itertools.product(range(1, 4), range(0, 4)):
        for nan, inf in (("ieee", True), ("ieee", False), ("max", False), ("negzero", False), (None, False)):
            for subnormals in (True, False):
                for bias in (None, 3):
                    fmt = Float(e, m, bias=bias, subnormals=subnormals, inf=inf, nan=nan)
                    if float_max(fmt) > 0:
                        yield fmt


def _value_table(fmt):
    """{magnitude: code} over every finite non-negative value, by decoding codes."""
    table = {}
    for code in range(2 ** (fmt.exp_bits + fmt.man_bits)):
        value = decode_reference(code, fmt)
        if value is not None and math.isfinite(value):
            assert Fraction(value) not in table, (fmt, code)
            table[Fraction(value)] = code
    return table


def test_neighbours_match_brute_force_on_tiny_formats():
    checked = 0
    for fmt in _tiny_formats():
        table = _value_table(fmt)
        values = sorted(table)
        assert values[-1] == float_max(fmt)
        probes = set(values)
        for a, b in zip(values, values[1:]):
            probes.update({(a + b) / 2, a + (b - a) * Fraction(3, 10), a + (b - a) * Fraction(7, 10)})
        for x in probes:
            lo = max(v for v in values if v <= x)
            hi = min(v for v in values if v >= x)
            for sign in (1, -1):
                got = neighbours(sign * x, fmt)
                want = (lo, hi, table[lo] % 2, table[hi] % 2)
                if sign < 0:
                    want = (-hi, -lo, want[3], want[2])
                assert got == want, (fmt, sign * x, got, want)
                checked += 1
    assert checked > 10_000


def test_fixed_neighbours_brute_force():
    for fmt in (Fixed(3, 2), Fixed(2, -1), Fixed(-1, 3, signed=False)):
        step = Fraction(2) ** -fmt.frac_bits
        for k in range(-20, 20):
            for offset in (0, Fraction(1, 2), Fraction(3, 10)):
                x = (k + offset) * step
                want = (k * step, (k + (offset != 0)) * step, k % 2, (k + (offset != 0)) % 2)
                assert neighbours(x, fmt) == want


# ---------------------------------------------------------------------------------------
# Properties of the deterministic modes and the documented worked examples
# ---------------------------------------------------------------------------------------


def test_mode_properties_on_tiny_formats():
    for fmt in _tiny_formats():
        if fmt.bias != 3 or fmt.exp_bits == 1:
            continue
        values = sorted(_value_table(fmt))
        maxv = float(values[-1])
        probes = []
        for a, b in zip(values, values[1:]):
            probes += [float((a + b) / 2), float(a + (b - a) / 3), float(a + 2 * (b - a) / 3)]
        for x in probes + [-p for p in probes]:
            r = {mode: round_reference(x, fmt, mode, "saturate") for mode in DETERMINISTIC_MODES}
            assert r["down"] < x < r["up"], (fmt, x, r)
            assert r["toward_zero"] == (r["down"] if x > 0 else r["up"])
            for mode in ("nearest", "nearest_away", "odd"):
                assert r[mode] in (r["down"], r["up"]), (fmt, x, mode, r)
            assert abs(r["nearest"] - x) <= abs(r["up"] - r["down"]) / 2
            if fmt.nan != "negzero":
                assert math.copysign(1, r["toward_zero"]) == math.copysign(1, x)
        # one step past max overflows in nearest, stays max toward zero
        above = maxv * 2
        assert round_reference(above, fmt, "toward_zero", "saturate") == maxv
        assert round_reference(-above, fmt, "up", "saturate") == -maxv
        assert round_reference(-above, fmt, "down", "saturate") == -maxv


def test_spec_examples():
    e4m3fn = ML_FORMATS["float8_e4m3fn"][0]
    e5m2 = ML_FORMATS["float8_e5m2"][0]
    # odd: everything above 448 overflows in e4m3fn (max has an even code) ...
    assert math.isnan(round_reference(449.0, e4m3fn, "odd"))
    assert round_reference(449.0, e4m3fn, "odd", "saturate") == 448.0
    # ... and 447 lies between 416 (code 0x7D, odd) and 448 (0x7E, even)
    assert round_reference(447.0, e4m3fn, "odd") == 416.0
    # ... in IEEE-style formats odd overflows from the next power of two on
    assert round_reference(65535.0, e5m2, "odd") == 57344.0
    assert round_reference(65536.0, e5m2, "odd") == math.inf
    assert round_reference(-65536.0, e5m2, "odd") == -math.inf
    # nearest ties to even at the overflow threshold
    assert round_reference(61440.0, e5m2) == math.inf
    assert round_reference(np.nextafter(61440.0, 0), e5m2) == 57344.0
    # directed modes
    assert round_reference(1e9, e5m2, "toward_zero") == 57344.0
    assert round_reference(-1e9, e5m2, "up") == -57344.0
    assert round_reference(1e9, e5m2, "up") == math.inf
    assert round_reference(-1e9, e5m2, "down") == -math.inf
    assert round_reference(1e9, e5m2, "down") == 57344.0
    assert round_reference(1e9, e5m2, "up", "saturate") == 57344.0
    assert math.isnan(round_reference(1e9, e5m2, "up", "nan"))
    # inf into a format without inf behaves like a value beyond max
    assert math.isnan(round_reference(math.inf, e4m3fn))
    assert round_reference(math.inf, e4m3fn, overflow="saturate") == 448.0
    assert round_reference(math.inf, e4m3fn, "toward_zero") == 448.0
    assert round_reference(-math.inf, e4m3fn, "up") == -448.0
    assert math.isnan(round_reference(-math.inf, e4m3fn, "down"))
    assert round_reference(-math.inf, e5m2, overflow="saturate") == -57344.0
    assert round_reference(-math.inf, e5m2, "toward_zero") == -math.inf
    # signed zeros
    tiny = 2.0**-30
    assert math.copysign(1, round_reference(-tiny, e5m2)) == -1
    assert math.copysign(1, round_reference(-tiny, e5m2, "up")) == -1
    assert round_reference(-tiny, e5m2, "down") == -(2.0**-16)
    fnuz = ML_FORMATS["float8_e4m3fnuz"][0]
    assert math.copysign(1, round_reference(-0.0, fnuz)) == 1
    assert math.copysign(1, round_reference(-tiny, fnuz)) == 1
    assert math.copysign(1, round_reference(-0.0, e5m2)) == -1
    # no subnormals: 0 and min_normal both have even codes
    flush = Float(5, 2, subnormals=False)
    assert round_reference(2.0**-15, flush) == 2.0**-14
    assert round_reference(2.0**-15, flush, "odd") == 2.0**-14
    assert round_reference(2.0**-15 - 2.0**-30, flush) == 0.0
    assert round_reference(-(2.0**-15), flush, "nearest_away") == -(2.0**-14)
    assert round_reference(2.0**-15, Float(5, 0, subnormals=False)) == 0.0  # codes 0 and 1
    # policies that the format cannot express
    with pytest.raises(ValueError):
        round_reference(1.0, e4m3fn, overflow="inf")
    with pytest.raises(ValueError):
        round_reference(1.0, ML_FORMATS["float4_e2m1fn"][0], overflow="nan")
    assert resolve_overflow(ML_FORMATS["float4_e2m1fn"][0]) == "saturate"
    assert resolve_overflow(e4m3fn) == "nan"
    assert resolve_overflow(e5m2) == "inf"


def test_fixed_examples():
    q = Fixed(4, 2)  # k in [-32, 31], step 1/4
    assert round_reference(0.125, q) == 0.0
    assert round_reference(0.375, q) == 0.5
    assert round_reference(-0.375, q, "nearest_away") == -0.5
    assert round_reference(-0.125, q, "toward_zero") == 0.0
    assert math.copysign(1, round_reference(-0.125, q, "toward_zero")) == 1
    assert round_reference(-0.1, q, "down") == -0.25
    assert round_reference(0.3, q, "odd") == 0.25
    assert round_reference(100.0, q) == 7.75
    assert round_reference(-100.0, q) == -8.0
    assert round_reference(math.inf, q) == 7.75
    assert math.isnan(round_reference(math.inf, q, overflow="wrap"))
    assert round_reference(8.0, q, overflow="wrap") == -8.0
    assert round_reference(7.9, q, "up", overflow="wrap") == -8.0
    assert round_reference(2.0**50 + 0.25, Fixed(4, 2), overflow="wrap") == 0.25
    u = Fixed(2, 1, signed=False)  # k in [0, 7]
    assert round_reference(-0.3, u, "down") == 0.0
    assert round_reference(-0.3, u, "down", overflow="wrap") == 3.5
    assert encode_reference(-8.0, q) == 0b100000
    assert encode_reference(7.75, q) == 0b011111
    assert decode_reference(0b100000, q) == -8.0


def test_stochastic_probabilities():
    e5m2 = ML_FORMATS["float8_e5m2"][0]
    assert stochastic_probability(1.1, e5m2) == (1.0, 1.25, Fraction(1.1) * 4 - 4)
    lo, hi, p = stochastic_probability(-1.1, e5m2, rand_bits=3)
    assert (lo, hi, p) == (-1.0, -1.25, Fraction(3, 8))
    assert stochastic_probability(1.1, e5m2, mode="stochastic_equal") == (1.0, 1.25, Fraction(1, 2))
    assert stochastic_probability(1.25, e5m2) == (1.25, 1.25, 0)
    lo, hi, p = stochastic_probability(60000.0, e5m2)
    assert (lo, hi) == (57344.0, math.inf) and p == Fraction(60000 - 57344, 8192)
    lo, hi, p = stochastic_probability(-(2.0**-17), e5m2)
    assert math.copysign(1, lo) == -1 and hi == -(2.0**-16) and p == Fraction(1, 2)
    lo, hi, p = stochastic_probability(-0.1, Fixed(4, 2))
    assert (lo, hi, p) == (0.0, -0.25, Fraction(-0.1) * -4)
    assert math.copysign(1, lo) == 1
