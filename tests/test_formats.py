"""Formats: value sets, derived constants, presets, names and validation."""

import dataclasses
import math
import pickle
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rpfloat.fixedformat import FixedFormat
from rpfloat.floatformat import FloatFormat
from rpfloat.presets import format, formats
from rpfloat.scaledformat import ScaledFormat

CANONICAL_NAMES = [
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "tf32",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e4m3b11fnuz",
    "float8_e4m3",
    "float8_e3m4",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
]
NUMPY_TYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
ML_DTYPES_NAMES = [name for name in CANONICAL_NAMES if hasattr(ml_dtypes, name)]
IEEE_CARRIERS = [np.float16, np.float32, np.float64]


def dtype_of(name):
    return NUMPY_TYPES.get(name) or getattr(ml_dtypes, name)


# -- the slow oracle: decode one code with exact rationals ----------------------


def decode_float_code(fmt, code):
    """Exact value of one code of `fmt`, or None for NaN and inf."""
    e, m = fmt.exp_bits, fmt.man_bits
    bias = 2 ** (e - 1) - 1 if fmt.bias is None else fmt.bias
    sign = code >> (e + m)
    field = (code >> m) & (2**e - 1)
    fraction = code & (2**m - 1)
    all_ones_field = field == 2**e - 1
    if fmt.nan == "ieee" and all_ones_field:
        return None
    if fmt.nan == "max" and all_ones_field and fraction == 2**m - 1:
        return None
    if fmt.nan == "negzero" and sign == 1 and field == 0 and fraction == 0:
        return None
    if field == 0:
        magnitude = Fraction(fraction, 2**m) * Fraction(2) ** (1 - bias)
        if not fmt.subnormals:
            magnitude = Fraction(0)
    else:
        magnitude = (1 + Fraction(fraction, 2**m)) * Fraction(2) ** (field - bias)
    return -magnitude if sign else magnitude


def brute_force_float_values(fmt):
    decoded = (decode_float_code(fmt, code) for code in range(2 ** fmt.bits))
    return sorted({value for value in decoded if value is not None})


def brute_force_fixed_values(fmt):
    w = fmt.int_bits + fmt.frac_bits
    values = set()
    for code in range(2**w):
        k = code - 2**w if fmt.signed and code >= 2 ** (w - 1) else code
        values.add(k * Fraction(2) ** -fmt.frac_bits)
    return sorted(values)


def exactly_floats(fractions):
    floats = np.array([float(v) for v in fractions], dtype=np.float64)
    assert all(Fraction(f) == v for f, v in zip(floats.tolist(), fractions))
    return floats


def holds_exactly(dtype, values):
    with np.errstate(all="ignore"):
        return bool(np.all(values.astype(dtype).astype(np.float64) == values))


def check_carrier(fmt, values):
    """`fmt.carrier` holds every value and is the narrowest type that does."""
    assert holds_exactly(fmt.carrier, values)
    narrower = IEEE_CARRIERS[: IEEE_CARRIERS.index(fmt.carrier)]
    assert not any(holds_exactly(t, values) for t in narrower)


def ml_dtypes_values(name):
    """Every finite value of the ml_dtypes/NumPy type `name`, sorted, +0 once."""
    dtype = dtype_of(name)
    bits = ml_dtypes.finfo(dtype).bits
    codes = np.arange(2**bits, dtype=np.uint8 if bits <= 8 else np.uint16)
    with np.errstate(invalid="ignore"):  # NaN codes
        values = codes.view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)] + 0.0)


def bit_identical(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


# -- presets against ml_dtypes ------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in ML_DTYPES_NAMES if ml_dtypes.finfo(dtype_of(n)).bits <= 16])
def test_preset_values_match_ml_dtypes(name):
    fmt = formats[name]
    assert bit_identical(fmt.values(), ml_dtypes_values(name))


@pytest.mark.parametrize("name", ML_DTYPES_NAMES)
def test_preset_constants_match_finfo(name):
    fmt = formats[name]
    info = ml_dtypes.finfo(dtype_of(name))
    assert fmt.bits == info.bits
    assert fmt.exp_bits == info.nexp
    assert fmt.man_bits == info.nmant
    assert fmt.emin == info.minexp
    assert fmt.emax == info.maxexp - 1
    assert fmt.max == float(info.max)
    assert fmt.min_normal == float(info.smallest_normal)
    assert fmt.smallest_subnormal == float(info.smallest_subnormal)
    assert fmt.eps == float(info.eps)
    for value in (fmt.max, fmt.min_normal, fmt.smallest_subnormal, fmt.eps):
        assert type(value) is float


@pytest.mark.parametrize("name", ML_DTYPES_NAMES)
def test_preset_specials_match_ml_dtypes(name):
    fmt = formats[name]
    dtype = dtype_of(name)
    bits = fmt.bits
    codes = np.arange(2 ** min(bits, 16), dtype=np.uint64)
    if bits > 16:  # sample the top and bottom of the code space instead
        top = np.arange(2**bits - 2**12, 2**bits, dtype=np.uint64)
        codes = np.concatenate([codes[: 2**12], top, top >> np.uint64(1)])
    word = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[np.dtype(dtype).itemsize * 8]
    with np.errstate(invalid="ignore"):  # NaN codes
        values = codes.astype(word).view(dtype).astype(np.float64)
    assert fmt.has_nan == bool(np.isnan(values).any())
    assert fmt.has_inf == bool(np.isinf(values).any())
    has_negative_zero = bool(np.any((values == 0) & np.signbit(values)))
    assert fmt.has_negative_zero == has_negative_zero


@pytest.mark.parametrize("name", [n for n in ML_DTYPES_NAMES if n != "float64"])
def test_preset_default_overflow_matches_ml_dtypes(name):
    fmt = formats[name]
    with np.errstate(all="ignore"):
        beyond = np.array([4 * fmt.max, -4 * fmt.max]).astype(dtype_of(name)).astype(np.float64)
    if fmt.overflow == "nan":
        assert np.isnan(beyond).all()
    else:
        expected = {"inf": [np.inf, -np.inf], "saturate": [fmt.max, -fmt.max]}[fmt.overflow]
        assert bit_identical(beyond, expected)


def test_tf32():
    tf32 = formats.tf32
    assert (tf32.exp_bits, tf32.man_bits, tf32.bias) == (8, 10, 127)
    assert tf32.max == (2 - 2**-10) * 2.0**127
    assert tf32.min_normal == float(np.finfo(np.float32).smallest_normal)
    assert tf32.carrier is np.float32


def test_presets_have_their_names():
    assert list(formats) == CANONICAL_NAMES
    for name in CANONICAL_NAMES:
        assert formats[name].name == name
        assert getattr(formats, name) is formats[name]


# -- identities -----------------------------------------------------------------------


def check_identities(fmt):
    assert fmt.bits == 1 + fmt.exp_bits + fmt.man_bits
    assert fmt.precision == fmt.man_bits + 1
    assert fmt.emin == 1 - fmt.bias
    assert fmt.min_normal == 2.0**fmt.emin
    assert fmt.emax == math.frexp(fmt.max)[1] - 1  # floor(log2(max)), exactly
    assert fmt.eps == 2.0**-fmt.man_bits
    assert fmt.min == -fmt.max
    assert fmt.smallest_normal == fmt.min_normal
    if fmt.subnormals:
        assert fmt.smallest_subnormal == 2.0 ** (fmt.emin - fmt.man_bits)
    else:
        assert fmt.smallest_subnormal == fmt.min_normal
    if fmt.bits <= 24:
        values = fmt.values()
        assert values.dtype == np.float64
        assert np.all(np.diff(values) > 0)
        assert fmt.max == values[-1] == -values[0]
        assert fmt.min_normal in values
        assert values[values > 0][0] == fmt.smallest_subnormal
        assert not np.signbit(values[values == 0]).any()
        check_carrier(fmt, values)


@pytest.mark.parametrize("name", CANONICAL_NAMES)
def test_preset_identities(name):
    check_identities(formats[name])


def test_e4m3fn_constants():
    e4m3 = formats.float8_e4m3fn
    assert (e4m3.max, e4m3.emax, e4m3.emin, e4m3.overflow) == (448.0, 8, -6, "nan")


# -- random formats against the brute-force oracle -----------------------------------


@st.composite
def float_formats(draw):
    exp_bits = draw(st.integers(1, 8))
    man_bits = draw(st.integers(0, min(10, 11 - exp_bits)))  # at most 12 bits: a fast oracle
    encodings = [("ieee", True), ("ieee", False), ("max", False), ("negzero", False), (None, False)]
    nan, inf = draw(st.sampled_from(encodings))
    subnormals = draw(st.booleans())
    bias = draw(st.none() | st.integers(-3, 2**exp_bits + 3))
    overflow = draw(st.sampled_from([None, "inf", "saturate", "nan"]))
    try:
        return FloatFormat(
            exp_bits, man_bits, bias=bias, subnormals=subnormals, inf=inf, nan=nan, overflow=overflow
        )
    except ValueError:  # no normal numbers, or an overflow policy the format cannot express
        assume(False)


@given(float_formats())
def test_values_against_brute_force(fmt):
    expected = brute_force_float_values(fmt)
    values = fmt.values()
    assert bit_identical(values, exactly_floats(expected))
    check_identities(fmt)
    positive = [v for v in expected if v > 0]
    assert fmt.max == max(expected)
    assert fmt.smallest_subnormal == min(positive)


@given(float_formats())
def test_specials_against_brute_force(fmt):
    e, m = fmt.exp_bits, fmt.man_bits
    all_ones_field = 2**e - 1
    if fmt.nan == "ieee":
        assert fmt.has_nan == (m > 0 or not fmt.inf)
    else:
        assert fmt.has_nan == (fmt.nan is not None)
    assert fmt.has_inf == fmt.inf
    assert fmt.has_negative_zero == (decode_float_code(fmt, 1 << (e + m)) is not None)
    assert fmt.has_negative_zero == (fmt.nan != "negzero")
    infinite = 0 if not fmt.has_inf else 2  # the codes of +-inf
    sign_bit = 1 << (e + m)
    top_codes = range(all_ones_field << m, sign_bit)
    candidates = [sign_bit, *top_codes, *(sign_bit | code for code in top_codes)]  # -0 and the top field
    nan_codes = sum(decode_float_code(fmt, code) is None for code in candidates) - infinite
    assert fmt.has_nan == (nan_codes > 0)
    if fmt.has_inf:
        assert decode_float_code(fmt, all_ones_field << m) is None


@given(st.integers(1, 12), st.integers(-30, 40), st.booleans())
def test_fixed_values_against_brute_force(bits, int_bits, signed):
    frac_bits = bits - int_bits
    fmt = FixedFormat(int_bits, frac_bits, signed=signed)
    expected = brute_force_fixed_values(fmt)
    values = fmt.values()
    assert bit_identical(values, exactly_floats(expected))
    assert (fmt.min, fmt.max) == (values[0], values[-1])
    assert fmt.eps == 2.0**-frac_bits
    assert fmt.bits == int_bits + frac_bits
    check_carrier(fmt, values)


@given(st.integers(-1100, 1100), st.integers(1, 16), st.booleans())
def test_fixed_carrier_over_the_whole_range(int_bits, bits, signed):
    frac_bits = bits - int_bits
    try:
        fmt = FixedFormat(int_bits, frac_bits, signed=signed)
    except ValueError:
        assume(False)
    check_carrier(fmt, fmt.values())


@given(st.integers(1, 11), st.integers(0, 12), st.integers(-1100, 1100), st.booleans())
def test_float_carrier_over_the_whole_range(exp_bits, man_bits, bias_offset, subnormals):
    """Wide exponents (no enumeration): check the carrier on the extreme values."""
    try:
        bias = 2 ** (exp_bits - 1) - 1 + bias_offset
        fmt = FloatFormat(exp_bits, man_bits, bias=bias, subnormals=subnormals)
    except ValueError:
        assume(False)
    ulp_at_min = fmt.min_normal * fmt.eps
    below_max = fmt.max - 2.0**fmt.emax * fmt.eps
    extremes = np.array([fmt.max, fmt.smallest_subnormal, fmt.min_normal + ulp_at_min, below_max])
    check_carrier(fmt, extremes)


# -- properties of unbounded formats -------------------------------------------------------


@pytest.mark.parametrize(
    ("man_bits", "carrier"),
    [(0, np.float16), (10, np.float16), (11, np.float32), (23, np.float32), (24, np.float64), (52, np.float64)],
)
def test_unbounded_exponent(man_bits, carrier):
    fmt = FloatFormat(None, man_bits)
    assert fmt.carrier is carrier
    assert fmt.precision == man_bits + 1
    assert fmt.eps == 2.0**-man_bits
    for attribute in ("bits", "bias", "emin", "emax", "max", "min_normal", "smallest_subnormal"):
        assert getattr(fmt, attribute) is None
    assert fmt.overflow == "inf"
    assert fmt.has_inf and fmt.has_nan and fmt.has_negative_zero
    with pytest.raises(ValueError, match="exp_bits"):
        fmt.values()


def test_values_refuses_wide_formats():
    with pytest.raises(ValueError, match="24 bits"):
        formats.float32.values()
    with pytest.raises(ValueError, match="24 bits"):
        FixedFormat(30, 0).values()
    positive = 254 * 2**15 + 2**15 - 1  # normals and subnormals
    assert len(FloatFormat(8, 15).values()) == 2 * positive + 1


# -- carriers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "carrier"),
    [
        (formats.float16, np.float16),
        (formats.bfloat16, np.float32),
        (formats.tf32, np.float32),
        (formats.float32, np.float32),
        (formats.float64, np.float64),
        (formats.float8_e4m3fn, np.float16),
        (formats.float8_e5m2fnuz, np.float16),
        (FloatFormat(9, 3), np.float64),  # range beyond float32
        (FloatFormat(5, 11), np.float32),  # precision beyond float16
        (FloatFormat(5, 10, bias=16), np.float32),  # subnormals below float16's
        (FloatFormat(5, 10, bias=14), np.float32),  # max above float16's
        (FloatFormat(5, 10, bias=15, nan=None, inf=False), np.float32),
        (FloatFormat(5, 10, bias=16, nan=None, inf=False, subnormals=False), np.float32),
        (FloatFormat(8, 7, bias=128), np.float32),
        (FloatFormat(8, 7, bias=126), np.float64),
        (FixedFormat(8, 8), np.float32),
        (FixedFormat(4, 4), np.float16),
        (FixedFormat(1, 24), np.float32),
        (FixedFormat(1, 30), np.float64),
        (FixedFormat(-10, 30), np.float32),  # quantum below float16's
        (FixedFormat(16, -4, signed=False), np.float32),  # 12 significant bits
        (FixedFormat(16, -5, signed=False), np.float16),  # 65504
        (FixedFormat(17, -6, signed=False), np.float32),  # 131008
        (FixedFormat(16, -5), np.float16),  # -32768
        (FixedFormat(17, -6), np.float32),  # -65536
    ],
    ids=repr,
)
def test_carrier(fmt, carrier):
    assert fmt.carrier is carrier


# -- equality and hashing --------------------------------------------------------------


def test_equality_ignores_name_and_resolves_defaults():
    assert FixedFormat(8, 8) == format("q8.8")
    assert hash(FixedFormat(8, 8)) == hash(format("q8.8"))
    assert FloatFormat(8, 7) == formats.bfloat16
    assert FloatFormat(8, 7, bias=127, overflow="inf", name="x") == FloatFormat(8, 7, name="y")
    assert hash(FloatFormat(8, 7, bias=127, overflow="inf")) == hash(formats.bfloat16)
    assert FloatFormat(4, 3, inf=False, nan="max", overflow="nan") == formats.e4m3
    assert FloatFormat(np.int64(5), np.uint8(2)) == formats.float8_e5m2
    assert type(FloatFormat(np.int64(5), 2).exp_bits) is int
    assert FixedFormat(8, 8, overflow=None) == FixedFormat(8, 8)
    assert format("e8m7") == formats.bfloat16
    assert {formats.float16: 1}[FloatFormat(5, 10)] == 1


def test_inequality():
    assert FloatFormat(8, 7) != FloatFormat(8, 7, overflow="saturate")
    assert FloatFormat(8, 7) != FloatFormat(8, 7, subnormals=False)
    assert FloatFormat(4, 3) != formats.float8_e4m3fn
    assert FixedFormat(8, 8) != FixedFormat(8, 8, signed=False)
    assert FixedFormat(8, 8) != FixedFormat(8, 8, overflow="wrap")
    assert FixedFormat(1, 7) != FloatFormat(1, 7, inf=False, nan=None)
    assert len({FixedFormat(8, 8), FixedFormat(8, 8, name="q"), FloatFormat(8, 8)}) == 2


def test_frozen_and_picklable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        formats.bfloat16.man_bits = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        FixedFormat(8, 8).frac_bits = 3
    for fmt in (formats.float8_e4m3fnuz, format("uq4.4")):
        copy = pickle.loads(pickle.dumps(fmt))
        assert copy == fmt and copy.name == fmt.name


@pytest.mark.parametrize(
    "fmt",
    [
        *formats.values(),
        FloatFormat(5, 3, bias=3, subnormals=False, overflow="saturate"),
        FloatFormat(None, 7),
        FixedFormat(-2, 10, signed=False, overflow="wrap", name="x"),
    ],
    ids=repr,
)
def test_repr_round_trips(fmt):
    namespace = {"FloatFormat": FloatFormat, "FixedFormat": FixedFormat}
    copy = eval(repr(fmt), namespace)
    assert copy == fmt and copy.name == fmt.name and repr(copy) == repr(fmt)


def test_repr_shows_only_non_defaults():
    expected = "FloatFormat(exp_bits=4, man_bits=3, inf=False, nan='max', name='float8_e4m3fn')"
    assert repr(formats.float8_e4m3fn) == expected
    assert repr(FloatFormat(8, 7)) == "FloatFormat(exp_bits=8, man_bits=7)"
    assert repr(FloatFormat(4, 3, overflow="saturate")) == "FloatFormat(exp_bits=4, man_bits=3, overflow='saturate')"
    assert repr(format("q8.8")) == "FixedFormat(int_bits=8, frac_bits=8, name='q8.8')"
    assert repr(FixedFormat(4, 4, signed=False)) == "FixedFormat(int_bits=4, frac_bits=4, signed=False)"


# -- names ------------------------------------------------------------------------------

ALIASES = {
    "binary16": "float16",
    "half": "float16",
    "fp16": "float16",
    "binary32": "float32",
    "fp32": "float32",
    "binary64": "float64",
    "fp64": "float64",
    "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
}


@pytest.mark.parametrize("name", CANONICAL_NAMES)
def test_canonical_names(name):
    fmt = format(name)
    assert fmt.name == name
    assert format(name.upper()) is fmt
    assert format(name.title()) is fmt
    assert formats[name.upper()] is fmt
    assert name in formats and name.upper() in formats


@pytest.mark.parametrize(("alias", "name"), ALIASES.items())
def test_aliases(alias, name):
    assert format(alias) is formats[name]
    assert format(alias.upper()) is formats[name]
    assert formats[alias] is formats[name]
    assert getattr(formats, alias) is formats[name]
    assert alias in formats
    assert alias not in list(formats)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("e4m7", FloatFormat(4, 7)),
        ("E8M23", FloatFormat(8, 23)),
        ("e4m3", FloatFormat(4, 3, inf=False, nan="max")),  # the alias wins
        ("e3m0", FloatFormat(3, 0)),
        ("q8.8", FixedFormat(8, 8)),
        ("Q1.15", FixedFormat(1, 15)),
        ("uq0.8", FixedFormat(0, 8, signed=False)),
        ("q-2.10", FixedFormat(-2, 10)),
        ("uq12.-4", FixedFormat(12, -4, signed=False)),
    ],
)
def test_pattern_names(name, expected):
    fmt = format(name)
    assert fmt == expected
    if name.lower() not in ALIASES:
        assert fmt.name == name.lower()


def test_format_passes_formats_through():
    for fmt in (formats.bfloat16, FloatFormat(3, 3, name="mine"), FixedFormat(2, 2)):
        assert format(fmt) is fmt


@pytest.mark.parametrize(
    "name", ["fp8", "float8", "bfloat", "e4", "q8", "q8.", "uq.8", "e4m3x", "", "float8_e8m0fnu", "e\uff14m\uff13",
             "e04m3", "q8.08", "q08.8", "q-0.8"]  # (no leading zeros or -0: one name per format)
)
def test_unknown_names(name):
    with pytest.raises(ValueError, match="known names.*bfloat16.*float8_e4m3fn"):
        format(name)
    with pytest.raises(KeyError, match="bfloat16"):
        formats[name]
    assert name not in formats


@pytest.mark.parametrize("name", ["e0m3", "e12m3", "q0.0", "q40.20"])
def test_pattern_names_with_invalid_numbers(name):
    with pytest.raises(ValueError, match="exp_bits|int_bits"):
        format(name)


@pytest.mark.parametrize("bad", [8, 8.0, None, np.float16(1.0), b"bfloat16", ["bfloat16"]])
def test_format_rejects_non_names(bad):
    with pytest.raises(TypeError, match="format"):
        format(bad)


def test_registry():
    assert len(formats) == len(CANONICAL_NAMES)
    assert list(formats.keys()) == CANONICAL_NAMES
    assert formats.bfloat16 is formats["bfloat16"] is formats.get("BF16")
    assert formats.get("nope") is None
    assert 8 not in formats and formats.bfloat16 not in formats
    assert "q8.8" not in formats
    assert "bfloat16" in repr(formats) and "float4_e2m1fn" in repr(formats)
    assert "bfloat16" in dir(formats) and "e4m3" in dir(formats)
    with pytest.raises(AttributeError, match="bfloat16"):
        formats.fp8
    with pytest.raises(AttributeError, match="read-only"):
        formats.bfloat16 = FloatFormat(8, 7)
    with pytest.raises(AttributeError, match="read-only"):
        del formats.bfloat16
    with pytest.raises(TypeError):
        formats["mine"] = FloatFormat(3, 3)


# -- bad arguments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "error", "argument"),
    [
        (dict(exp_bits=0, man_bits=3), ValueError, "exp_bits"),
        (dict(exp_bits=-1, man_bits=3), ValueError, "exp_bits"),
        (dict(exp_bits=12, man_bits=3), ValueError, "exp_bits"),
        (dict(exp_bits=4, man_bits=-1), ValueError, "man_bits"),
        (dict(exp_bits=4, man_bits=53), ValueError, "man_bits"),
        (dict(exp_bits=None, man_bits=53), ValueError, "man_bits"),
        (dict(exp_bits=4.0, man_bits=3), TypeError, "exp_bits"),
        (dict(exp_bits=4, man_bits="3"), TypeError, "man_bits"),
        (dict(exp_bits=True, man_bits=3), TypeError, "exp_bits"),
        (dict(exp_bits=4, man_bits=3, bias=7.5), TypeError, "bias"),
        (dict(exp_bits=4, man_bits=3, subnormals=1), TypeError, "subnormals"),
        (dict(exp_bits=4, man_bits=3, inf="yes"), TypeError, "inf"),
        (dict(exp_bits=4, man_bits=3, name=7), TypeError, "name"),
        (dict(exp_bits=4, man_bits=3, nan="max"), ValueError, "inf"),
        (dict(exp_bits=4, man_bits=3, nan=None), ValueError, "inf"),
        (dict(exp_bits=4, man_bits=3, nan="negzero"), ValueError, "inf"),
        (dict(exp_bits=4, man_bits=3, inf=False, nan="IEEE"), ValueError, "nan"),
        (dict(exp_bits=4, man_bits=3, inf=False, nan="quiet"), ValueError, "nan"),
        (dict(exp_bits=4, man_bits=3, overflow="clamp"), ValueError, "overflow"),
        (dict(exp_bits=4, man_bits=3, overflow=1), TypeError, "overflow must be a string or None, got int"),
        (dict(exp_bits=4, man_bits=3, overflow="wrap"), ValueError, "overflow"),
        (dict(exp_bits=4, man_bits=3, inf=False, nan="max", overflow="inf"), ValueError, "overflow"),
        (dict(exp_bits=4, man_bits=3, inf=False, nan=None, overflow="inf"), ValueError, "overflow"),
        (dict(exp_bits=4, man_bits=3, inf=False, nan=None, overflow="nan"), ValueError, "overflow"),
        (dict(exp_bits=4, man_bits=0, overflow="nan"), ValueError, "overflow"),  # IEEE e4m0: inf, no NaN
        (dict(exp_bits=1, man_bits=3), ValueError, "exp_bits"),  # IEEE: no normal numbers
        (dict(exp_bits=1, man_bits=0, inf=False, nan="max"), ValueError, "exp_bits"),
        (dict(exp_bits=4, man_bits=3, bias=1090), ValueError, "bias"),  # below float64's subnormals
        (dict(exp_bits=11, man_bits=52, bias=1022), ValueError, "bias"),  # above float64's max
        (dict(exp_bits=8, man_bits=3, bias=-1000), ValueError, "bias"),
        (dict(exp_bits=4, man_bits=3, bias=-2**40), ValueError, "bias"),  # (not 2**(2**40) computed exactly)
        (dict(exp_bits=None, man_bits=7, bias=127), ValueError, "bias"),
        (dict(exp_bits=None, man_bits=7, inf=False), ValueError, "inf"),
        (dict(exp_bits=None, man_bits=7, subnormals=False), ValueError, "subnormals"),
        (dict(exp_bits=None, man_bits=7, inf=False, nan="max"), ValueError, "nan"),
    ],
    ids=repr,
)
def test_bad_float_arguments(arguments, error, argument):
    with pytest.raises(error, match=argument):
        FloatFormat(**arguments)


@pytest.mark.parametrize(
    ("arguments", "error", "argument"),
    [
        (dict(int_bits=0, frac_bits=0), ValueError, "int_bits"),
        (dict(int_bits=-4, frac_bits=4), ValueError, "frac_bits"),
        (dict(int_bits=30, frac_bits=24), ValueError, "between 1 and 53"),
        (dict(int_bits=8.0, frac_bits=8), TypeError, "int_bits"),
        (dict(int_bits=8, frac_bits="8"), TypeError, "frac_bits"),
        (dict(int_bits=8, frac_bits=8, signed="no"), TypeError, "signed"),
        (dict(int_bits=8, frac_bits=8, overflow="inf"), ValueError, "overflow"),
        (dict(int_bits=8, frac_bits=8, overflow="nan"), ValueError, "overflow"),
        (dict(int_bits=8, frac_bits=8, overflow=b"wrap"), TypeError, "overflow must be a string or None, got bytes"),
        (dict(int_bits=8, frac_bits=8, name=b"q"), TypeError, "name"),
        (dict(int_bits=-1070, frac_bits=1080), ValueError, "frac_bits"),
        (dict(int_bits=1025, frac_bits=-1020), ValueError, "int_bits"),
        (dict(int_bits=1025, frac_bits=-1020, signed=False), ValueError, "int_bits"),
    ],
    ids=repr,
)
def test_bad_fixed_arguments(arguments, error, argument):
    with pytest.raises(error, match=argument):
        FixedFormat(**arguments)


def test_extreme_but_valid_formats():
    assert FloatFormat(11, 0, bias=1075, inf=False, nan=None).smallest_subnormal == 2.0**-1074
    widest = FloatFormat(11, 51, bias=1024, inf=False, nan=None)
    assert (widest.smallest_subnormal, widest.emax) == (2.0**-1074, 1023)
    assert FixedFormat(-1021, 1074).eps == 2.0**-1074
    assert FixedFormat(1024, -1000).min == -(2.0**1023)
    assert FixedFormat(1024, -1000, signed=False).max == (2**24 - 1) * 2.0**1000


# -- fixed-point properties -------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "minimum", "maximum", "eps"),
    [
        (FixedFormat(8, 8), -128.0, 128 - 2**-8, 2**-8),
        (FixedFormat(8, 8, signed=False), 0.0, 256 - 2**-8, 2**-8),
        (FixedFormat(1, 15), -1.0, 1 - 2**-15, 2**-15),
        (FixedFormat(1, 0), -1.0, 0.0, 1.0),
        (FixedFormat(-2, 10), -(2.0**-3), 2**-3 - 2**-10, 2**-10),
        (FixedFormat(12, -4, signed=False), 0.0, (2**8 - 1) * 16.0, 16.0),
        (FixedFormat(32, 21), -(2.0**31), 2**31 - 2**-21, 2**-21),
    ],
    ids=repr,
)
def test_fixed_constants(fmt, minimum, maximum, eps):
    assert (fmt.min, fmt.max, fmt.eps) == (minimum, maximum, eps)
    assert not (fmt.has_inf or fmt.has_nan or fmt.has_negative_zero)
    for value in (fmt.min, fmt.max, fmt.eps):
        assert type(value) is float


# -- the demo -----------------------------------------------------------------------------


def test_demo_runs(capsys):
    from rpfloat.__main__ import main

    assert main([]) == 0
    output = capsys.readouterr().out
    for name in [*CANONICAL_NAMES, "q8.8", "max rel. error"]:
        assert name in output


def test_values_of_a_format_at_float64s_bottom_are_exact():
    """A format whose values lie at float64's smallest subnormal: values() takes
    each significand times its power of two in one step (2**-1075 alone is 0)."""
    fmt = FloatFormat(1, 1, bias=1075, subnormals=False, inf=False, nan="max")
    assert fmt.values().tolist() == [-(2.0**-1074), 0.0, 2.0**-1074]
    assert not np.signbit(fmt.values()[1])



def test_replace_changes_one_setting_and_drops_the_name():
    """fmt.replace(**changes): dataclasses.replace without the old name (which
    named the format before the change), validated as the constructor is."""
    no_subnormals = format("bfloat16").replace(subnormals=False)
    assert no_subnormals == FloatFormat(8, 7, subnormals=False) and no_subnormals.name is None
    assert format("float16").replace(overflow="saturate", name="fp16_sat").name == "fp16_sat"
    assert format("q8.8").replace(signed=False) == FixedFormat(8, 8, signed=False)
    columns = format("mxfp8_e4m3").replace(axis=0)
    assert columns == ScaledFormat("e4m3", block_size=32, axis=0) and columns.name is None
    assert "mxfp8" not in repr(columns)
    with pytest.raises(ValueError):
        format("e4m3").replace(overflow="inf")  # no inf to overflow to
    with pytest.raises(ValueError, match="axis=0 has no effect"):
        format("mxfp8_e4m3").replace(block_size=None, axis=0)
    with pytest.raises(TypeError, match="bogus"):
        format("e4m3").replace(bogus=1)
    # another exponent width takes its default bias, unless the bias was another or is given
    assert format("bfloat16").replace(exp_bits=9) == FloatFormat(9, 7) and FloatFormat(9, 7).bias == 255
    assert format("bfloat16").replace(exp_bits=None) == FloatFormat(None, 7)
    assert FloatFormat(5, 2, bias=3).replace(exp_bits=6).bias == 3
    assert format("float16").replace(exp_bits=6, bias=20).bias == 20
