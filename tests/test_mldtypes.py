"""Exhaustive sweeps against ml_dtypes: every float16 and every bfloat16 bit pattern.

For float32 inputs ml_dtypes rounds correctly (nearest, ties to even), so its
``astype`` round trip is an independent oracle. Two of its behaviours are not
copied: it turns NaN into -0 for the 4- and 6-bit types (no NaN code), where
rpfloat keeps NaN; and it rounds float64 through float32 (tested elsewhere with
the exact oracle).
"""
import ml_dtypes
import numpy as np
import pytest

import rpfloat as rp

# every ml_dtypes float type but the sign-less scale type (docs/formats.md)
ML_FLOAT_TYPES = sorted(
    name
    for name in dir(ml_dtypes)
    if name.startswith(("float", "bfloat"))
    and name != "float8_e8m0fnu"
    and isinstance(getattr(ml_dtypes, name), type)
)
ML_PRESETS = [name for name in rp.formats if hasattr(ml_dtypes, name)]


def test_every_ml_dtypes_float_type_has_a_preset():
    assert len(ML_FLOAT_TYPES) >= 11
    assert sorted(ML_PRESETS) == ML_FLOAT_TYPES


def _all_patterns(kind):
    codes = np.arange(2**16, dtype=np.uint16)
    if kind == "float16":
        return codes.view(np.float16).astype(np.float32)
    return (codes.astype(np.uint32) << np.uint32(16)).view(np.float32)


@pytest.fixture(scope="module", params=["float16", "bfloat16"])
def sweep(request):
    return _all_patterns(request.param)


def _same_bits(got, expected):
    got_nan, expected_nan = np.isnan(got), np.isnan(expected)
    np.testing.assert_array_equal(got_nan, expected_nan)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    mismatch = np.flatnonzero(got[~got_nan].view(bits) != expected[~expected_nan].view(bits))
    assert mismatch.size == 0, (got[~got_nan][mismatch[:5]], expected[~expected_nan][mismatch[:5]])


@pytest.mark.slow
@pytest.mark.parametrize("name", ML_PRESETS)
def test_round_matches_ml_dtypes_on_every_pattern(name, sweep):
    ml_type = getattr(ml_dtypes, name)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = sweep.astype(ml_type).astype(np.float32)
    got = rp.round(sweep, name)
    assert got.dtype == np.float32
    if not rp.format(name).has_nan:
        # ml_dtypes maps NaN to -0 here; rpfloat keeps NaN (docs/rounding.md)
        nan = np.isnan(sweep)
        assert np.isnan(got[nan]).all()
        got, expected = got[~nan], expected[~nan]
    _same_bits(got, expected)


@pytest.mark.slow
@pytest.mark.parametrize("name", ML_PRESETS)
def test_encode_matches_ml_dtypes_codes(name, sweep):
    ml_type = getattr(ml_dtypes, name)
    fmt = rp.format(name)
    x = sweep if fmt.has_nan else sweep[~np.isnan(sweep)]
    with np.errstate(invalid="ignore", over="ignore"):
        expected = x.astype(ml_type).view(np.uint16 if fmt.bits > 8 else np.uint8)
    got = rp.encode(x, name)
    assert got.dtype == expected.dtype
    mismatch = np.flatnonzero(got != expected)
    assert mismatch.size == 0, (x[mismatch[:5]], got[mismatch[:5]], expected[mismatch[:5]])


@pytest.mark.slow
@pytest.mark.parametrize("name", ML_PRESETS)
def test_decode_matches_ml_dtypes_on_every_code(name):
    ml_type = getattr(ml_dtypes, name)
    fmt = rp.format(name)
    # ml_dtypes stores its sub-byte types one value per byte, so a byte view works for all
    codes = np.arange(2**fmt.bits, dtype=np.uint16 if fmt.bits > 8 else np.uint8)
    expected = codes.view(ml_type).astype(fmt.carrier)
    _same_bits(rp.decode(codes, name), expected)


@pytest.mark.slow
def test_float16_preset_matches_numpy_cast(sweep):
    with np.errstate(over="ignore"):
        expected = sweep.astype(np.float16)
    got = rp.round(sweep, "float16")
    _same_bits(got.astype(np.float32), expected.astype(np.float32))


@pytest.mark.slow
def test_unbounded_exponent_float32_is_bfloat16_on_float16_values():
    # every bfloat16 pattern (and more) is test_oracle.py's test_unbounded_exponent_float32_is_bfloat16;
    # float16 values as float32 have low halves that it does not sweep; FloatFormat(None, 2) on
    # float16 is test_oracle.py's test_unbounded_exponent_float16_is_e5m2
    x = _all_patterns("float16")
    got = rp.round(x, rp.FloatFormat(None, 7))
    with np.errstate(invalid="ignore"):
        expected = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    _same_bits(got, expected)
