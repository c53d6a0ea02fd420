"""Scaled formats (``rp.ScaledFormat``: MX, NVFP4, dynamic fixed point) against the
exact oracle in ``scaled_reference`` and against gfloat, plus the edge cases other
libraries got wrong, the properties of the scale rules, codes, stochastic
rounding, names and argument checking.

Results are compared bit for bit (NaN with NaN, whatever its payload: the
specification says only that a NaN block's results are NaN).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat.rounding import round_chunk
from rpfloat import scaling
from rpfloat._kernels.core.scale import significand_scale
from rpfloat._kernels.cpu import environment
from rpfloat._plan import random_key
from rpfloat.scaling import ScaledCodes
from stats_bounds import Budget, assert_binomial
from strategies import float_formats
from reference import DETERMINISTIC_MODES, STOCHASTIC_MODES, encode_reference, floor_log2
from fpenv import (
    DENORMALS_ARE_ZERO, FE_DOWNWARD, FE_TOWARDZERO, FE_UPWARD, FLUSH_TO_ZERO, X86_64_GLIBC, mxcsr_with,
    rounding_direction,
)
from scaled_reference import (
    E8M0_NAN_CODE,
    element_emax,
    element_max,
    scaled_reference,
    stochastic_reference,
    top_spacing,
)

ELEMENTS = {
    "e4m3": rp.format("float8_e4m3fn"),
    "e5m2": rp.format("float8_e5m2"),
    "e2m3": rp.format("float6_e2m3fn"),
    "e3m2": rp.format("float6_e3m2fn"),
    "e2m1": rp.format("float4_e2m1fn"),
    "int8": rp.FixedFormat(2, 6),
    "float16": rp.format("float16"),
    "bfloat16": rp.format("bfloat16"),
    "fixed_0_8": rp.FixedFormat(0, 8),  # max 127/256: emax = -2
}
SCALE_ROUNDINGS = ("floor", "ceil", "even", "rceil")
MX_PRESETS = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8")

# (shape, block_size, axis): 1-D and 2-D, along either axis, ragged last blocks
LAYOUTS = [
    ((37,), 1, -1),
    ((37,), 3, -1),
    ((50,), 16, -1),
    ((70,), 32, -1),    # 32 + 32 + 6
    ((23,), None, -1),
    ((4, 19), 3, -1),   # 6 blocks of 3 and one of 1 per row
    ((19, 4), 3, 0),
    ((35, 3), 16, 0),   # 16 + 16 + 3 down each column
    ((2, 40), 32, 1),
    ((3, 5), None, -1),  # one scale per array takes no axis
]


# -- helpers ------------------------------------------------------------------------------


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same(got, want, what=""):
    """Same dtype, shape, NaN positions and bits elsewhere."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    bad = (nan_got != nan_want) | (~nan_want & (_bits(got) != _bits(want)))
    if bad.any():
        where = np.argwhere(bad)[:6]
        examples = [(tuple(int(i) for i in w), got[tuple(w)], want[tuple(w)]) for w in where]
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} differ; (index, got, expected): {examples}")


def sample(rng, shape, dtype, exponent):
    """Random values below 2**(exponent + 1): significands of 1 to 24 (float32) or
    53 (float64) bits, half of them of at most 6 bits, so that some land on ties
    and grid points, some just below a power of two (all ones), spread over 12
    binades; a few zeros, both signs."""
    n = math.prod(shape)
    top = 53 if dtype == np.float64 else 24
    bits = np.where(rng.random(n) < 0.5, rng.integers(1, 7, n), rng.integers(1, top + 1, n))
    fraction = rng.integers(0, 2**52, n, dtype=np.int64) >> (53 - bits)  # bits - 1 random bits
    fraction = np.where(rng.random(n) < 0.1, (1 << (bits - 1)) - 1, fraction)  # 2 - 2**(1 - bits)
    significand = 1 + np.ldexp(fraction.astype(np.float64), 1 - bits)
    values = np.ldexp(significand, exponent - rng.integers(0, 12, n))
    values = np.where(rng.random(n) < 0.05, 0.0, values) * rng.choice([-1.0, 1.0], n)
    with np.errstate(under="ignore"):
        return values.astype(dtype).reshape(shape)


def exponents(dtype):
    """Binades of the data: ordinary, large and small, and (float64) far beyond
    E8M0's range; float32 ones reach the subnormals."""
    if dtype == np.float64:
        return (0, 3, -7, 40, -60, 126, -140, 1000, -1000, -1060)
    return (0, 3, -7, 40, -60, 126, -120, -140)


def fmt_for(element, rounding, block_size, axis, **kwargs):
    return rp.ScaledFormat(ELEMENTS[element], block_size=block_size, axis=axis, scale_rounding=rounding, **kwargs)


# -- against the oracle -------------------------------------------------------------------


@pytest.mark.parametrize("rounding", SCALE_ROUNDINGS)
@pytest.mark.parametrize("element", ELEMENTS)
def test_matches_oracle(element, rounding):
    """Every element format, scale rule, deterministic mode, float32 and float64
    data, 1-D and 2-D layouts with ragged blocks: the values rp.round gives equal
    the oracle's, bit for bit."""
    rng = np.random.default_rng([list(ELEMENTS).index(element), SCALE_ROUNDINGS.index(rounding)])
    for dtype in (np.float32, np.float64):
        for shape, block_size, axis in LAYOUTS:
            fmt = fmt_for(element, rounding, block_size, axis)
            for mode in DETERMINISTIC_MODES:
                for exponent in rng.choice(exponents(dtype), 2, replace=False):
                    x = sample(rng, shape, dtype, int(exponent))
                    want = scaled_reference(x, fmt, mode).values
                    assert_same(rp.round(x, fmt, mode), want, f"{fmt!r} {mode} {dtype.__name__} 2**{exponent}")


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("rounding", SCALE_ROUNDINGS)
def test_every_mode_matches_oracle(rounding, mode):
    """Each deterministic mode on each scale rule, for a few element formats,
    float32 and float16 data (float16 rounds into float32), blocks of 32."""
    rng = np.random.default_rng([SCALE_ROUNDINGS.index(rounding), DETERMINISTIC_MODES.index(mode), 7])
    for element in ("e4m3", "e2m1", "int8", "e3m2"):
        fmt = fmt_for(element, rounding, 32, -1)
        for dtype in (np.float32, np.float16):
            exponent = int(rng.integers(-10, 10)) if dtype == np.float16 else int(rng.integers(-130, 120))
            x = sample(rng, (3, 40), dtype, exponent)
            assert_same(rp.round(x, fmt, mode), scaled_reference(x, fmt, mode).values,
                        f"{fmt!r} {mode} {np.dtype(dtype).name}")


@pytest.mark.parametrize("scale_format", [(-10, 10), (-3, 40), (0, 0), (-300, 300), (-200, -140), (-1022, -1000)])
def test_exponent_range_scale_format(scale_format):
    """Power-of-two scales with an exponent range of one's own: clamped there,
    codes s - s_min."""
    rng = np.random.default_rng([bound + 2000 for bound in scale_format])
    for rounding in SCALE_ROUNDINGS:
        fmt = rp.ScaledFormat("e4m3", block_size=8, scale_format=scale_format, scale_rounding=rounding)
        for dtype in (np.float32, np.float64):
            for exponent in (-40, -2, 5, 30, 60):
                x = sample(rng, (3, 20), dtype, exponent)
                mode = DETERMINISTIC_MODES[int(rng.integers(len(DETERMINISTIC_MODES)))]
                want = scaled_reference(x, fmt, mode)
                assert_same(rp.round(x, fmt, mode), want.values, f"{fmt!r} {mode} 2**{exponent}")
                if mode == "nearest":
                    codes = rp.encode(x, fmt, mode)
                    np.testing.assert_array_equal(codes.scales, want.scale_codes.astype(np.int64))


def test_encode_matches_oracle():
    """Element codes and scale codes of rp.encode equal the oracle's (codes of the
    exact q per element, s + 127 per block), for every element and scale rule."""
    rng = np.random.default_rng(11)
    for element in ELEMENTS:
        for rounding in SCALE_ROUNDINGS:
            for shape, block_size, axis in (((3, 21), 8, -1), ((21, 2), 8, 0), ((10,), None, -1)):
                fmt = fmt_for(element, rounding, block_size, axis)
                x = sample(rng, shape, np.float32, int(rng.integers(-30, 30)))
                want = scaled_reference(x, fmt, "nearest")
                codes = rp.encode(x, fmt)
                assert codes.tensor_scale is None
                assert codes.scales.dtype == np.uint8
                np.testing.assert_array_equal(codes.scales, want.scale_codes.astype(np.int64), err_msg=repr(fmt))
                expected = np.vectorize(lambda q: encode_reference(q, fmt.element), otypes=[np.int64])(want.elements)
                np.testing.assert_array_equal(codes.elements.astype(np.int64), expected, err_msg=repr(fmt))


@st.composite
def scaled_cases(draw):
    element = draw(st.sampled_from(sorted(ELEMENTS)))
    rounding = draw(st.sampled_from(SCALE_ROUNDINGS))
    scale_format = draw(st.sampled_from(["e8m0", (-10, 10), (-150, 150)]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    ndim = draw(st.integers(1, 2))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    block_size = draw(st.sampled_from([None, 1, 2, 3, 5, 16, 32]))
    axis = draw(st.integers(-ndim, ndim - 1)) if block_size is not None else -1
    width = 32 if dtype == np.float32 else 64
    values = draw(st.lists(st.floats(width=width, allow_nan=True, allow_infinity=True),
                           min_size=math.prod(shape), max_size=math.prod(shape)))
    mode = draw(st.sampled_from(DETERMINISTIC_MODES))
    fmt = rp.ScaledFormat(ELEMENTS[element], block_size=block_size, axis=axis, scale_format=scale_format,
                          scale_rounding=rounding)
    return np.array(values, dtype).reshape(shape), fmt, mode


@given(scaled_cases())
def test_hypothesis_matches_oracle(case):
    """Arbitrary float32/float64 data (subnormals, extremes, NaN, inf) on any
    element, scale rule, exponent range, block size and axis."""
    x, fmt, mode = case
    assert_same(rp.round(x, fmt, mode), scaled_reference(x, fmt, mode).values, f"{fmt!r} {mode} x={x!r}")


# -- edge cases ---------------------------------------------------------------------------


@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8", "fixed_0_8"])
def test_even_flips_just_below_a_power_of_two(element):
    """A block max m = 2**k - tiny: "floor" puts m at the top of the element's
    range (it rounds to 2**(emax+1): saturated), "even" rounds m at the element's
    precision first, finds 2**k and takes the next scale, where m rounds to 2**k.
    At the midpoint below 2**(emax+1) (a tie, to even: up) "even" flips too, and
    one float32 step below it does not."""
    fmt_element = ELEMENTS[element]
    emax, q = element_emax(fmt_element), top_spacing(fmt_element)
    largest = element_max(fmt_element)
    k = 5
    below = np.nextafter(np.float32(2.0**k), np.float32(0))         # 2**k - tiny
    midpoint = np.float32(2.0**k - float(q) * 2.0 ** (k - emax - 1) / 2)  # 2**(emax+1) - q/2, scaled
    under_midpoint = np.nextafter(midpoint, np.float32(0))
    for m, flips in ((below, True), (midpoint, True), (under_midpoint, False)):
        x = np.array([m, -0.25, 0.1, 1.0], np.float32)
        floor_fmt = rp.ScaledFormat(fmt_element, block_size=4)
        even_fmt = rp.ScaledFormat(fmt_element, block_size=4, scale_rounding="even")
        floor_code, even_code = int(rp.encode(x, floor_fmt).scales[0]), int(rp.encode(x, even_fmt).scales[0])
        assert floor_code == k - 1 - emax + 127
        assert even_code == floor_code + flips, (element, float(m))
        floor_x, even_x = rp.round(x, floor_fmt), rp.round(x, even_fmt)
        if flips:
            # floor: m / X rounds to 2**(emax+1) > max: saturated; even: m becomes 2**k
            assert float(floor_x[0]) == float(largest * Fraction(2) ** (k - 1 - emax))
            assert float(even_x[0]) == 2.0**k
        else:
            assert float(floor_x[0]) == float(even_x[0]) < 2.0**k
        assert_same(floor_x, scaled_reference(x, floor_fmt).values, f"floor m={m!r}")
        assert_same(even_x, scaled_reference(x, even_fmt).values, f"even m={m!r}")


@pytest.mark.parametrize("rounding", SCALE_ROUNDINGS)
def test_tiny_blocks_clamp_at_e8m0_min(rounding):
    """float32 subnormals (~1e-40) want a scale below 2**-127: clamped there (code
    0), the elements rounded against 2**-127."""
    x = np.array([1e-40, -3e-41, 7e-42, 1.4e-45, 0.0, -2e-40, 5e-41, 1e-39], np.float32)
    fmt = rp.ScaledFormat("e4m3", block_size=4, scale_rounding=rounding)
    codes = rp.encode(x, fmt)
    np.testing.assert_array_equal(codes.scales, [0, 0])
    got = rp.round(x, fmt)
    assert_same(got, scaled_reference(x, fmt).values)
    # 1e-39 * 2**127 ~ 0.17: a normal e4m3 number (spacing 2**-6 there)
    assert abs(float(got[7]) - float(x[7])) <= 2.0**-127 * 2.0**-7
    assert got[3] == 0.0  # 2**-149 * 2**127 = 2**-22: below e4m3's 2**-9 / 2


@pytest.mark.parametrize("name", MX_PRESETS + ("nvfp4",))
def test_all_zero_blocks(name):
    """An all-zero block stays zero (-0 where the element has it) with the
    smallest scale (E8M0 code 0, s = -127; NVFP4 the smallest E4M3 value)."""
    fmt = rp.format(name)
    x = np.zeros((2, 40), np.float32)
    x[0, 3] = -0.0
    x[1, 35] = 1.5  # the second row's last block is not all zero
    got = rp.round(x, fmt)
    want = scaled_reference(x, fmt)
    assert_same(got, want.values)
    assert got[0, 3] == 0.0 and np.signbit(got[0, 3]) == (name != "mxint8")
    codes = rp.encode(x, fmt)
    np.testing.assert_array_equal(codes.scales, want.scale_codes.astype(np.int64))
    if name == "nvfp4":
        assert int(codes.scales[0, 0]) == 1  # e4m3's smallest subnormal, 2**-9
    else:
        assert int(codes.scales[0, 0]) == 0
        assert int(codes.scales[1, -1]) != 0


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_inf_blocks(name, dtype):
    """NaN, inf or -inf anywhere in a block makes the whole block NaN; the other
    blocks are rounded as if it were not there, along either axis."""
    fmt = rp.format(name)
    rng = np.random.default_rng(5)
    x = sample(rng, (3, 160), dtype, 2)
    x[0, 5], x[1, 40], x[2, 100], x[2, 159] = np.nan, np.inf, -np.inf, np.nan
    nan_blocks = {(0, 0), (1, 1), (2, 3), (2, 4)}
    got = rp.round(x, fmt)
    assert_same(got, scaled_reference(x, fmt).values)
    clean = x.copy()
    for row, block in nan_blocks:
        assert np.isnan(got[row, 32 * block:32 * block + 32]).all()
        clean[row, 32 * block:32 * block + 32] = 1.0
    others = ~np.isnan(got)
    assert others.sum() == 3 * 160 - 4 * 32
    assert_same(got[others], rp.round(clean, fmt)[others])
    # the same data along axis 0
    fmt0 = rp.ScaledFormat(fmt.element, block_size=32, axis=0)
    assert_same(rp.round(x.T.copy(), fmt0), got.T, "axis=0")


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8"])
def test_nan_blocks_encode(name):
    """rp.encode gives a NaN block E8M0's NaN scale code 0xFF (whatever its element
    codes, and whether or not the element format has a NaN of its own: E8M0's
    0xFF alone says the block is NaN), and decode gives NaN for the whole block."""
    fmt = rp.format(name)
    x = sample(np.random.default_rng(5), (3, 160), np.float32, 2)
    x[0, 5], x[1, 40], x[2, 100], x[2, 159] = np.nan, np.inf, -np.inf, np.nan
    nan_blocks = {(0, 0), (1, 1), (2, 3), (2, 4)}
    codes = rp.encode(x, fmt)
    for row in range(3):
        for block in range(5):
            if (row, block) in nan_blocks:
                assert int(codes.scales[row, block]) == E8M0_NAN_CODE
            else:
                assert int(codes.scales[row, block]) != E8M0_NAN_CODE
    assert_same(rp.decode(codes, fmt), rp.round(x, fmt).astype(np.float64), "decode")


@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8"])
def test_max_rounding_past_element_max(element):
    """A block max whose scaled value rounds above the element's max: "floor"
    saturates it to element.max * X; "rceil" takes the next scale and rounds it
    without saturating (to 2**(k+1) here, as the rounding leaves 2**(emax+1)/2)."""
    fmt_element = ELEMENTS[element]
    emax, q = element_emax(fmt_element), top_spacing(fmt_element)
    largest = element_max(fmt_element)
    # t = 2**(emax+1) - q/4 at the top binade: rounds (nearest) to 2**(emax+1) > max
    k = 3
    t = Fraction(2) ** (emax + 1) - q / 4
    m = float(t * Fraction(2) ** (k - emax))
    assert m < 2.0 ** (k + 1)
    x = np.array([0.5, -m / 3, m, 1.0], np.float32)
    assert float(x[2]) == m
    floor_got = rp.round(x, rp.ScaledFormat(fmt_element, block_size=4))
    assert float(floor_got[2]) == float(largest * Fraction(2) ** (k - emax))
    rceil = rp.ScaledFormat(fmt_element, block_size=4, scale_rounding="rceil")
    rceil_got = rp.round(x, rceil)
    assert float(rceil_got[2]) == 2.0 ** (k + 1)
    assert int(rp.encode(x, rceil).scales[0]) == k - emax + 1 + 127
    assert_same(rceil_got, scaled_reference(x, rceil).values)


@pytest.mark.parametrize("rounding", SCALE_ROUNDINGS)
def test_e8m0_range_limits_float64(rounding):
    """float64 data beyond E8M0's reach: ~1e300 wants s ~ 988, clamped at 127,
    and the elements saturate at element.max * 2**127; ~1e-300 wants s ~ -1005,
    clamped at -127, and the elements round to 0 (or the smallest element step
    upward)."""
    fmt = rp.ScaledFormat("e4m3", block_size=4, scale_rounding=rounding)
    huge = np.array([1e300, -3e299, 2e300, 1.0], np.float64)
    got = rp.round(huge, fmt)
    assert got.dtype == np.float64
    assert got[0] == 448 * 2.0**127 and got[1] == -448 * 2.0**127
    assert got[3] == 0.0  # 1 / 2**127: far below e4m3's smallest step
    assert int(rp.encode(huge, fmt).scales[0]) == 254
    assert_same(got, scaled_reference(huge, fmt).values)
    tiny = np.array([1e-300, -3e-301, 2e-300, 0.0], np.float64)
    assert int(rp.encode(tiny, fmt).scales[0]) == 0
    assert_same(rp.round(tiny, fmt), np.array([0.0, -0.0, 0.0, 0.0]))
    smallest_step = 2.0**-9 * 2.0**-127  # e4m3's smallest subnormal times the scale
    assert_same(rp.round(tiny, fmt, "up"), np.array([smallest_step, -0.0, smallest_step, 0.0]))
    for mode in DETERMINISTIC_MODES:
        assert_same(rp.round(tiny, fmt, mode), scaled_reference(tiny, fmt, mode).values, mode)


@pytest.mark.parametrize("mode", ["up", "down", "odd", "nearest", "toward_zero"])
def test_tiny_elements_under_a_clamped_large_scale(mode):
    """A float64 block whose max clamps the scale at 2**127 and whose other
    elements are so small that v / 2**127 lies below float64's subnormals: v / X
    is still positive, so "up" and "odd" must give the element's smallest step
    (2**-9 * 2**127 for E4M3), not zero."""
    fmt = rp.format("mxfp8_e4m3")
    x = np.array([2.0**200, 2.0**-1000, -(2.0**-1000), 1.5e-323] + [0.0] * 28, np.float64)
    step = 2.0**-9 * 2.0**127
    expected = {"up": [step, -0.0, step], "down": [0.0, -step, 0.0], "odd": [step, -step, step],
                "nearest": [0.0, -0.0, 0.0], "toward_zero": [0.0, -0.0, 0.0]}[mode]
    got = rp.round(x, fmt, mode)
    assert got[0] == 448 * 2.0**127
    assert_same(got[1:4], np.array(expected), mode)
    assert_same(got, scaled_reference(x, fmt, mode).values, mode)


# elements whose values reach below 2**-958 (float64's subnormals among them, a 16-bit one,
# one without subnormals, a deep one, fixed point down to 2**-1074)
FINE_ELEMENTS = [rp.format("float64"), rp.FloatFormat(11, 10), rp.FloatFormat(11, 4),
                 rp.FloatFormat(11, 4, subnormals=False), rp.FloatFormat(11, 2, bias=1040),
                 rp.FixedFormat(-1040, 1074), rp.FixedFormat(-990, 1000)]


def _tiny_quotient_blocks(rng, rows):
    """float64 blocks of 4: a largest value from 2**-1060 to 2**1023 and three of
    2**-1080 to 2**-1000, a third of them float64 subnormals of up to 20 bits."""
    x = rng.uniform(1, 2, (rows, 4)) * 2.0 ** rng.integers(-1080, -1000, (rows, 4)).astype(float)
    subnormal = rng.random((rows, 4)) < 0.3
    x[subnormal] = rng.integers(1, 2**20, subnormal.sum()).view(np.float64)
    x[:, 0] = rng.uniform(1, 2, rows) * 2.0 ** rng.integers(-1060, 1023, rows).astype(float)
    return x * rng.choice([-1.0, 1.0], x.shape)


@pytest.mark.parametrize("scale_format", ["e8m0", (1, 5), (-40, -20), "e4m3", rp.FloatFormat(11, 2)], ids=str)
@pytest.mark.parametrize("element", FINE_ELEMENTS, ids=repr)
def test_elements_below_float64s_normals_round_the_exact_quotient(element, scale_format):
    """Elements that reach below 2**-958 round the exact v / X where that lies
    at or below 2**-1022: exact in float64 (X = 1: the value itself) or not
    (X = 2**5, a significand scale), in every deterministic mode, along either
    axis. (A quotient below 2**-1022 was taken as +-2**-1022.)"""
    if element == rp.format("float64") and scale_format != "e8m0" and not isinstance(scale_format, tuple):
        with pytest.raises(ValueError, match="scale_format"):  # (53 bits: no significand scale fits)
            rp.ScaledFormat(element, block_size=4, scale_format=scale_format)
        return
    fmt = rp.ScaledFormat(element, block_size=4, scale_format=scale_format)
    x = _tiny_quotient_blocks(np.random.default_rng(5), 24)
    for mode in DETERMINISTIC_MODES:
        want = scaled_reference(x, fmt, mode).values
        assert_same(rp.round(x, fmt, mode), want, f"{fmt!r} {mode}")
        assert_same(rp.decode(rp.encode(x, fmt, mode), fmt), want, f"decode(encode(x)) {mode}")
        columns = fmt.replace(axis=0)
        assert_same(rp.round(x.T.copy(), columns, mode), want.T, f"axis 0 {mode}")


def test_float64_elements_keep_float64_subnormals():
    """The examples of the report: float64 elements under E8M0 scales and under
    scales 2**-40 to 2**-20 give float64 data back, subnormals included."""
    x = np.array([1.5e308, 1e-310])
    assert_same(rp.round(x, rp.ScaledFormat("float64", block_size=2)), x)
    x = np.array([1e-321, 3e-320])
    assert_same(rp.round(x, rp.ScaledFormat("float64", scale_format=(-40, -20))), x)
    assert_same(rp.round(x, rp.ScaledFormat("float64", scale_format=(-40, -20)), "toward_zero"), x)


def test_float32_data_take_the_exact_tiny_quotient_under_significand_scales():
    """float32 data under a significand scale near 2**1022 (the block max's
    quotient saturates it): 2**-100 / X lies far below the step of an element
    reaching down to 2**-1040, so stochastic rounding gives 0, not the element's
    max (the division kernel, which took such a quotient as 2**-1022, serves
    elements down to 2**-958 only)."""
    fmt = rp.ScaledFormat(rp.FixedFormat(-1030, 1040), block_size=2, scale_format=rp.FloatFormat(10, 2, bias=0))
    x = np.array([2.0**127, 2.0**-100] * 4, np.float32)
    for mode in ("stochastic", "nearest", "toward_zero"):
        got = rp.round(x, fmt, mode, rng=1)
        assert np.array_equal(got[1::2], np.zeros(4)) and (got[::2] > 0).all(), mode


def test_stochastic_rounding_of_a_tiny_inexact_quotient():
    """float64 elements under the scale 2: 3 * 2**-1074 / 2 lies halfway
    between float64's 2**-1074 and 2**-1073, which stochastic rounding takes
    with probability 1/2 each, and stochastic_equal too. The count of 2**-1073
    among 4000 draws (fixed seed) is Binomial(4000, 1/2): the Chernoff bound of
    tests/stats_bounds.py at 1e-9 per mode accepts 1794 to 2206 of 4000,
    and rejects both an implementation that always truncates the quotient
    (count 0) and one that always steps up (count 4000)."""
    fmt = rp.ScaledFormat("float64", block_size=None, scale_format=(1, 1))
    x = np.full(4000, 3 * 2.0**-1074)
    for mode in ("stochastic", "stochastic_equal"):
        got = rp.round(x, fmt, mode, rng=7) / 2  # the elements
        assert set(np.unique(got)) <= {2.0**-1074, 2.0**-1073}, mode
        assert_binomial(np.count_nonzero(got == 2.0**-1073), x.size, Fraction(1, 2), 1e-9, mode)


# -- properties of the scale rules ----------------------------------------------------------


def _blocks_of(rng, count, size, dtype=np.float32):
    """`count` blocks of `size` values at assorted magnitudes, the max of some just
    below a power of two."""
    rows = [sample(rng, (size,), dtype, int(e)) for e in rng.integers(-30, 30, count)]
    x = np.stack(rows)
    return x[np.abs(x).max(axis=1) > 0]


@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m1", "int8", "fixed_0_8", "float16"])
def test_rceil_never_saturates(element):
    """With "rceil" the block max never saturates: X is the smallest power of two
    with m <= element.max * X, and the rounded max lies within half a step of m."""
    fmt_element = ELEMENTS[element]
    largest = element_max(fmt_element)
    fmt = rp.ScaledFormat(fmt_element, block_size=16, scale_rounding="rceil")
    rng = np.random.default_rng(3)
    x = _blocks_of(rng, 200, 16)
    got = rp.round(x, fmt)
    scales = rp.encode(x, fmt).scales[:, 0].astype(np.int64) - 127
    for row in range(x.shape[0]):
        i = int(np.argmax(np.abs(x[row])))
        m, X = Fraction(abs(float(x[row, i]))), Fraction(2) ** int(scales[row])
        assert m <= largest * X and largest * X / 2 < m, (x[row], scales[row])
        r = Fraction(abs(float(got[row, i])))
        assert r <= largest * X
        t = m / X
        step = top_spacing(fmt_element) if not hasattr(fmt_element, "man_bits") else \
            Fraction(2) ** (floor_log2(t) - fmt_element.man_bits)
        assert abs(r - m) <= step * X / 2, (x[row], got[row])


@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8", "fixed_0_8"])
def test_floor_saturation_error_below_one_step(element):
    """With "floor" the block max may saturate, but it is then off by less than
    one element step of the top binade (times X) from its exact value: m / X lies
    below 2**(emax+1), and max = 2**(emax+1) - step. Except for E4M3 (fn), whose
    top significand is NaN: its max is 2**(emax+1) - 2 steps (448 = 512 - 2 * 32),
    so the bound there is two steps (m = 500 * X saturates to 448 * X)."""
    fmt_element = ELEMENTS[element]
    fmt = rp.ScaledFormat(fmt_element, block_size=8)
    rng = np.random.default_rng(4)
    x = _blocks_of(rng, 300, 8)
    got = rp.round(x, fmt)
    q = max(top_spacing(fmt_element), Fraction(2) ** (element_emax(fmt_element) + 1) - element_max(fmt_element))
    assert q == top_spacing(fmt_element) * (2 if element == "e4m3" else 1)
    saturated = 0
    for row in range(x.shape[0]):
        i = int(np.argmax(np.abs(x[row])))
        m = Fraction(abs(float(x[row, i])))
        X = Fraction(2) ** (floor_log2(m) - element_emax(fmt_element))
        r = Fraction(abs(float(got[row, i])))
        assert abs(r - m) < q * X, (x[row], got[row])
        saturated += r == element_max(fmt_element) * X and r < m
    assert saturated > 0  # the data do reach saturation


def test_per_axis_scales_differ():
    """One block per row (block_size = row length, axis=-1): rows 2**8 apart in
    magnitude get scales 8 apart, and each row is rounded as if alone; one block
    per column (axis=0) mixes the rows."""
    rng = np.random.default_rng(9)
    x = (rng.uniform(1, 2, (5, 24)) * np.exp2(8.0 * np.arange(5))[:, None]).astype(np.float32)
    x[:, 0] = np.exp2(8.0 * np.arange(5)) * 1.5  # each row's max in [2**(8i), 2**(8i+1))
    rows = rp.ScaledFormat("e4m3", block_size=24, axis=-1)
    codes = rp.encode(x, rows)
    assert codes.scales.shape == (5, 1)
    np.testing.assert_array_equal(codes.scales[:, 0].astype(int), 127 - 8 + 8 * np.arange(5))
    got = rp.round(x, rows)
    for row in range(5):
        assert_same(got[row], rp.round(x[row], rp.ScaledFormat("e4m3")), f"row {row}")
    assert_same(got, scaled_reference(x, rows).values)
    columns = rp.ScaledFormat("e4m3", block_size=5, axis=0)
    column_codes = rp.encode(x, columns).scales
    assert column_codes.shape == (1, 24)
    assert (column_codes == column_codes[0, 0]).all()  # every column's max is in the last row's binade
    assert_same(rp.round(x, columns), scaled_reference(x, columns).values)


# -- encode / decode ---------------------------------------------------------------------------

ROUND_TRIP_FORMATS = [rp.format(name) for name in rp.scaled_formats] + [
    rp.ScaledFormat("e4m3", block_size=32, scale_format=(-10, 10)),
    rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True),
    rp.ScaledFormat("e5m2", block_size=None),
    rp.ScaledFormat("e2m3", block_size=8, axis=0, scale_rounding="rceil"),
    # products of 15 + 11 and 4 + 24 significant bits: float64 results for float32 data
    rp.ScaledFormat(rp.FixedFormat(12, 4), block_size=2, scale_format="float16"),
    rp.ScaledFormat("e4m3", block_size=2, scale_format="float32"),
    # scales too small for float32 data: they saturate onto values below float32's range
    rp.ScaledFormat("e4m3", block_size=4, scale_format=(-1022, -1000)),
]


@pytest.mark.parametrize("fmt", ROUND_TRIP_FORMATS, ids=repr)
def test_encode_decode_round_trip(fmt):
    """decode(encode(x)) equals round(x) as float64, bit for bit; scale codes
    have the data's shape with the blocked axis cut to one per block, element
    codes the dtype of the element format's codes."""
    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        for exponent in (-20, 0, 12):
            x = sample(rng, (6, 50), dtype, exponent)
            for mode in ("nearest", "toward_zero", "up"):
                codes = rp.encode(x, fmt, mode)
                assert isinstance(codes, ScaledCodes)
                assert codes.elements.shape == x.shape
                assert codes.elements.dtype == rp.encode(np.zeros(1), fmt.element).dtype
                if fmt.block_size is None:
                    assert codes.scales.shape == ()
                else:
                    shape = list(x.shape)
                    shape[fmt.axis] = -(-shape[fmt.axis] // fmt.block_size)
                    assert codes.scales.shape == tuple(shape)
                if isinstance(fmt.scale_format, tuple):  # (-10, 10): codes s + 10 in [0, 20]
                    assert codes.scales.dtype.kind == "u"
                    assert (codes.scales <= fmt.scale_format[1] - fmt.scale_format[0]).all()
                elif fmt.scale_format == "e8m0":
                    assert codes.scales.dtype == np.uint8
                else:  # a float scale format's codes
                    assert codes.scales.dtype == rp.encode(np.zeros(1), fmt.scale_format).dtype
                if fmt.tensor_scale:
                    assert isinstance(codes.tensor_scale, np.float32)
                else:
                    assert codes.tensor_scale is None
                if mode == "nearest" and dtype == np.float32:
                    want = scaled_reference(x, fmt)
                    np.testing.assert_array_equal(codes.scales, want.scale_codes.astype(np.int64))
                    if fmt.tensor_scale:
                        assert codes.tensor_scale == want.tensor_scale
                decoded = rp.decode(codes, fmt)
                assert decoded.dtype == np.float64
                assert_same(decoded, rp.round(x, fmt, mode).astype(np.float64),
                            f"{fmt!r} {mode} {np.dtype(dtype).name}: decode(encode(x)) vs round(x)")


@pytest.mark.parametrize("shape, fmt", [
    ((4, 64), rp.format("mxfp8_e4m3")),                                 # whole blocks along the last axis
    ((64, 3), rp.ScaledFormat("e2m1", block_size=32, axis=0)),          # whole blocks along the first
    ((2, 32, 5), rp.ScaledFormat("e3m2", block_size=8, axis=1)),
    ((2, 30, 5), rp.ScaledFormat("e3m2", block_size=8, axis=1)),        # a ragged last block
    ((3, 0), rp.format("mxfp4_e2m1")),
], ids=str)
def test_decode_scales_whole_and_ragged_blocks(shape, fmt):
    """decode multiplies each element by its own block's scale, whether the
    blocked axis holds whole blocks or ends in a ragged one; scale codes of
    another shape are refused."""
    x = sample(np.random.default_rng(7), shape, np.float32, 3)
    codes = rp.encode(x, fmt)
    assert_same(rp.decode(codes, fmt), rp.round(x, fmt).astype(np.float64), f"{fmt!r} {shape}")
    if x.size:
        with pytest.raises(ValueError, match="scale codes must have shape"):
            rp.decode((codes.elements, codes.scales[..., :1]), fmt)


@pytest.mark.parametrize("fmt", ["mxfp4", rp.ScaledFormat("q4.4"), "nvfp4",
                                 rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)],
                         ids=str)
def test_a_scalars_codes_are_numpy_scalars(fmt):
    """A scalar or 0-d x gives NumPy scalars for its element and scale codes
    (one layout gave a NumPy scalar, the others 0-d arrays), as rp.encode gives
    for the other formats; they decode and pack as arrays do."""
    for x in (np.float32(3.0), np.array(3.0, np.float32), 3.0):
        codes = rp.encode(x, fmt)
        assert isinstance(codes.elements, np.generic) and isinstance(codes.scales, np.generic)
        assert float(rp.decode(codes, fmt)) == float(rp.round(x, fmt))
        assert float(rp.decode(rp.unpack(rp.pack(codes, fmt), fmt), fmt)) == float(rp.round(x, fmt))


def test_decode_checks_the_tensor_scale_and_the_scales_sign():
    """A two-level format's codes without their tensor scale, a tensor scale
    given to a format without one (E8M0 or E4M3 scales alike), a scale code
    with the sign bit set, and a tensor scale that is not a positive number
    are refused: each would decode to other values without a word."""
    x = np.array([1.0, -2.0, 3.0, 0.5] * 8, np.float32)
    two_level = rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)
    codes = rp.encode(x, two_level)
    assert_same(rp.decode(codes, two_level), rp.round(x, two_level), "two-level")
    for missing in ((codes.elements, codes.scales), (codes.elements, codes.scales, None)):
        with pytest.raises(ValueError, match="has a tensor scale"):
            rp.decode(missing, two_level)
    for bad in (0.0, -1.0, np.inf, np.nan, "2", np.array([codes.tensor_scale])):
        with pytest.raises(ValueError, match="tensor scale must be a positive finite number"):
            rp.decode((codes.elements, codes.scales, bad), two_level)
    # a 0-d array, as np.load gives it back from an .npz of the codes
    as_loaded = (codes.elements, codes.scales, np.asarray(codes.tensor_scale))
    assert_same(rp.decode(as_loaded, two_level), rp.round(x, two_level), "0-d tensor scale")
    for name in ("nvfp4", "mxfp4"):
        plain = rp.encode(x, name)
        with pytest.raises(ValueError, match="has no tensor scale"):
            rp.decode((plain.elements, plain.scales, 2.0), name)
    nvfp4 = rp.encode(x, "nvfp4")
    with pytest.raises(ValueError, match="sign bit"):
        rp.decode((nvfp4.elements, nvfp4.scales | 0x80), "nvfp4")


@pytest.mark.parametrize("fmt", [
    rp.format("mxfp8_e4m3"), rp.format("mxfp8_e5m2"), rp.format("mxfp6_e3m2"), rp.format("mxfp4_e2m1"),
    rp.format("mxint8"), rp.ScaledFormat("e4m3", block_size=32, scale_rounding="ceil"),
    rp.ScaledFormat("e2m1", block_size=8, scale_rounding="rceil", axis=0),
    rp.ScaledFormat("e4m3", block_size=16, scale_format=(-10, 10)),
], ids=repr)
def test_encode_takes_elements_from_the_fast_values(fmt):
    """rp.encode of float32 data onto power-of-two scales divides the fast
    kernels' float32 values by their scales: the general kernel's elements and
    scales bit for bit, subnormal float32 values and NaN blocks included; where
    a value overflows float32 (ceil scales of data near its max) the general
    kernel's elements are taken."""
    rng = np.random.default_rng(11)
    for exponent in (-140, -126, 0, 100):
        x = sample(rng, (16, 64), np.float32, exponent)
        x[3, :8] = np.nan
        for mode, seed in (("nearest", None), ("toward_zero", None), ("stochastic", 5)):
            plan = scaling.scaled_plan(fmt, mode, None, None, x.dtype)
            key = random_key(seed) if seed is not None else 0
            got = scaling._elements_from_values(x, plan, key)
            assert got is not None, (fmt, exponent, mode)
            want_elements, want_scales, _ = scaling.run_blocks(x, plan, key, 0, True)
            assert_same(got[0], want_elements, f"{fmt!r} 2**{exponent} {mode}: elements")
            assert_same(got[1], want_scales, f"{fmt!r} 2**{exponent} {mode}: scales")
    # bfloat16 elements: least value 2**-133, so values q * 2**s reach below 2**-149; the gate leaves
    # them to the general kernel (it asks for every multiple of the least value times the least scale)
    tiny = sample(rng, (4, 32), np.float32, -135)
    bfloat16_blocks = rp.ScaledFormat("bfloat16", block_size=32)
    plan = scaling.scaled_plan(bfloat16_blocks, "nearest", None, None, np.float32)
    assert scaling._elements_from_values(tiny, plan, 0) is None
    decoded = rp.decode(rp.encode(tiny, bfloat16_blocks), bfloat16_blocks)
    assert_same(decoded, rp.round(tiny, bfloat16_blocks).astype(np.float64))
    # ceil: scale 2**(128 - 8), elements 3.4e38 / 2**120 -> 256, values 2**128: inf in float32
    near_max = np.full((2, 32), 3.4e38, np.float32)
    ceil_blocks = rp.ScaledFormat("e4m3", block_size=32, scale_rounding="ceil")
    plan = scaling.scaled_plan(ceil_blocks, "nearest", None, None, np.float32)
    assert np.isinf(rp.round(near_max, ceil_blocks)).all()
    assert scaling._elements_from_values(near_max, plan, 0) is None
    assert_same(rp.decode(rp.encode(near_max, ceil_blocks), ceil_blocks), np.full((2, 32), 2.0**128))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_encode_a_lone_nan_or_inf(value):
    """A 0-d NaN or inf is a NaN block: element code 0 and E8M0's NaN scale code
    (for float16 and float32 data alike); a scale format without a NaN code
    refuses it."""
    for dtype in (np.float32, np.float16, np.float64):
        for name in ("mxfp8_e4m3", "mxfp4_e2m1", "mxint8"):
            codes = rp.encode(np.array(value, dtype), name)
            assert codes.elements.shape == codes.scales.shape == ()
            assert (int(codes.elements), int(codes.scales)) == (0, 0xFF)
            assert np.isnan(rp.decode(codes, name))
    integer_scales = rp.ScaledFormat("e4m3", block_size=32, scale_format=(-10, 10))
    with pytest.raises(ValueError, match="NaN scale code"):
        rp.encode(np.float32(value), integer_scales)


# -- NVFP4 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tensor_scale", [False, True])
def test_nvfp4_matches_oracle(tensor_scale):
    """E2M1 elements, E4M3 scales S = RNE_e4m3(m / (6 g)) clamped to [2**-9, 448],
    with and without the float32 tensor scale g, every deterministic mode, on
    float32 data (blocks of 16, ragged, along either axis)."""
    rng = np.random.default_rng(int(tensor_scale))
    for case, (shape, block_size, axis) in enumerate([((4, 64), 16, -1), ((3, 37), 16, -1), ((37, 2), 16, 0),
                                                      ((40,), 5, -1), ((20,), None, -1)]):
        fmt = rp.ScaledFormat("e2m1", block_size=block_size, axis=axis, scale_format="e4m3",
                              tensor_scale=tensor_scale)
        for exponent in (-135, -15, -5, 0, 3, 11, 40):  # 2**-135: g a float32 subnormal
            x = sample(rng, shape, np.float32, exponent)
            mode = DETERMINISTIC_MODES[(case + exponent) % len(DETERMINISTIC_MODES)]
            want = scaled_reference(x, fmt, mode)
            assert_same(rp.round(x, fmt, mode), want.values, f"{fmt!r} {mode} 2**{exponent}")
            codes = rp.encode(x, fmt, mode)
            np.testing.assert_array_equal(codes.scales, want.scale_codes.astype(np.int64))


def test_tensor_scale_of_tiny_data():
    """Two-level scaling of float32 data whose max|x| / 2688 lies below float32's
    smallest subnormal (max|x| < 2688 * 2**-150, ~1.9e-42): g = float32(max|x|) /
    float32(448 * 6) would underflow to 0; it is float32's smallest subnormal
    instead. decode(encode(x)) equals round(x), without warnings, no finite block
    becomes NaN, and the oracle agrees."""
    fmt = rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)
    x = np.full(32, 1e-44, np.float32)
    x[1], x[20] = -3e-45, 0.0
    got = rp.round(x, fmt)
    assert not np.isnan(got).any()
    codes = rp.encode(x, fmt)
    assert codes.tensor_scale == np.float32(2.0**-149)
    assert_same(rp.decode(codes, fmt), got.astype(np.float64), "decode(encode(x)) vs round(x)")
    assert_same(got, scaled_reference(x, fmt).values, "round vs the oracle")


@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "up"])
def test_tensor_scale_of_float64_data_past_float32(mode):
    """float64 data beyond float32's range: g = max|x| / 2688 still fits float32
    (it was taken from float32(max|x|) = inf, and every result was NaN). Past
    2688 * float32's max, g stays at float32's max, as block scales clamp, and
    the elements saturate. The oracle agrees; decode(encode(x)) equals round(x)."""
    fmt = rp.ScaledFormat("e2m1", block_size=4, scale_format="e4m3", tensor_scale=True)
    rng = np.random.default_rng(5)
    for largest in (1e39, 3e41, 1e45, 1e300):
        x = rng.normal(size=12) * largest / 4
        x[[0, 5]] = largest, 0.0
        x[8:12] = 0.0  # an all-zero block stays zero
        want = scaled_reference(x, fmt, mode)
        got = rp.round(x, fmt, mode)
        assert not np.isnan(got).any(), largest
        assert_same(got, want.values, f"{largest:g} {mode}")
        codes = rp.encode(x, fmt, mode)
        assert codes.tensor_scale == want.tensor_scale
        assert_same(rp.decode(codes, fmt), got, f"decode(encode(x)) {largest:g}")
    assert rp.encode(np.array([1e300]), fmt).tensor_scale == np.finfo(np.float32).max


def test_tensor_scale_is_the_float32_of_the_exact_quotient():
    """g is max|x| / (scale max * element max) rounded once to float32: with a
    denominator past float64's range (a wide custom scale format over float32
    elements) it is not 0 (a float64 division gave 0, then 2**-149)."""
    wide = rp.ScaledFormat("float32", block_size=2, scale_format=rp.FloatFormat(10, 3, bias=100), tensor_scale=True)
    x = np.array([1e300, -2.0, 0.5, 0.0])
    g = rp.encode(x, wide).tensor_scale
    exact = Fraction(1e300) / (Fraction(float(wide.scale_format.max)) * Fraction(float(wide.element.max)))
    assert g == scaled_reference(x, wide).tensor_scale
    assert abs(Fraction(float(g)) - exact) <= exact * Fraction(1, 2**24)
    assert_same(rp.round(x, wide), scaled_reference(x, wide).values, "wide scale format")


def test_tensor_scale_needs_a_scale_format_of_normal_products():
    """A scale format reaching below 2**-873 (float64, a custom bias) would make
    an all-zero block's least scale times a tiny g underflow to 0 in float64 and
    its zeros 0 / 0 = NaN: refused, naming the argument."""
    for scale_format in ("float64", rp.FloatFormat(10, 3, bias=900)):
        with pytest.raises(ValueError, match="tensor_scale=True needs a scale_format"):
            rp.ScaledFormat("e2m1", block_size=4, scale_format=scale_format, tensor_scale=True)
    rp.ScaledFormat("e2m1", block_size=4, scale_format=rp.FloatFormat(10, 3, bias=900))  # without one: fine
    fmt = rp.ScaledFormat("e2m1", block_size=4, scale_format="float32", tensor_scale=True)
    x = np.array([0, 0, 0, 0, 1e-30, 0, 0, 0], np.float32)  # g = 2**-149, the zero block's scale 2**-149
    got = rp.round(x, fmt)
    assert_same(got, scaled_reference(x, fmt).values, "zero block under a tiny g")
    assert (got[:4] == 0).all()


_ENVIRONMENT_FORMATS = ["mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8", "nvfp4",
                        rp.ScaledFormat("e4m3", scale_format="e4m3"),
                        rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True),
                        rp.ScaledFormat("e2m3", block_size=8, axis=0, scale_rounding="even"),
                        rp.ScaledFormat(rp.FixedFormat(4, 3), block_size=32, scale_rounding="rceil")]


def _environment_data():
    """float32 blocks of subnormals, of ties and near-ties, near float32's extremes,
    and of ordinary values (32 x 64, so that axis 0 blocks see them too)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((32, 64)) * 2.0 ** rng.integers(-8, 8, (32, 64))).astype(np.float32)
    x[0] = 6.250695e-39 * rng.uniform(0.1, 1.0, 64)  # subnormal blocks
    x[1, :32] = -1.2e-39
    x[2, :16] = [2.0, 2.9375] + [0.0] * 14  # nvfp4: m / 6 needs the scale's own rounding
    x[3, :32] = [1.0, 1.9375] + [0.0] * 30
    x[4] = np.float32(-3.4028235e38) * rng.uniform(0.5, 1.0, 64)
    x[5] = np.float32(3.3e38) * rng.uniform(0.9, 1.0, 64)
    return x


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets the floating-point environment through glibc")
@pytest.mark.parametrize("setting", ["denormals_are_zero", "flush_to_zero", "downward", "upward", "toward_zero"])
def test_scaled_results_do_not_depend_on_the_floating_point_environment(setting):
    """Some libraries turn on flush-to-zero and denormals-are-zero for the process,
    or change the rounding direction: scaled rounding, encode and decode still give
    the default environment's bits (they run in it and restore the thread's)."""
    enter = {"denormals_are_zero": lambda: mxcsr_with(DENORMALS_ARE_ZERO),
             "flush_to_zero": lambda: mxcsr_with(FLUSH_TO_ZERO),
             "downward": lambda: rounding_direction(FE_DOWNWARD),
             "upward": lambda: rounding_direction(FE_UPWARD),
             "toward_zero": lambda: rounding_direction(FE_TOWARDZERO)}[setting]
    x = _environment_data()
    for fmt in _ENVIRONMENT_FORMATS:
        for mode in ("nearest", "up", "odd", "stochastic"):
            want = rp.round(x, fmt, mode, rng=2)
            want_codes = rp.encode(x, fmt, mode, rng=2)
            with enter():
                before = environment.environment()
                got = rp.round(x, fmt, mode, rng=2)
                codes = rp.encode(x, fmt, mode, rng=2)
                decoded = rp.decode(want_codes, fmt)
                assert environment.environment() == before  # the thread's own, given back
            label = f"{fmt!r} {mode} {setting}"
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), label
            for part, expected in zip(codes, want_codes):
                assert np.array_equal(np.asarray(part), np.asarray(expected)), label
            assert np.array_equal(decoded, rp.decode(want_codes, fmt), equal_nan=True), label
    assert environment.environment() == environment.DEFAULT


def test_nvfp4_scale_clamps():
    """Without a tensor scale, a block of tiny values takes the smallest E4M3 scale
    (2**-9) and a block of huge ones the largest (448, elements saturating at
    6 * 448)."""
    fmt = rp.format("nvfp4")
    x = np.concatenate([np.full(16, 1e-4), np.linspace(-1e6, 1e6, 16)]).astype(np.float32)
    codes = rp.encode(x, fmt)
    assert int(codes.scales[0]) == 0x01 and int(codes.scales[1]) == 0x7E
    got = rp.round(x, fmt)
    assert got[16] == -6 * 448 and got[31] == 6 * 448
    # 1e-4 / 2**-9 = 0.0512: below e2m1's 0.5 / 2
    assert (got[:16] == 0).all()
    assert_same(got, scaled_reference(x, fmt).values)


# -- stochastic rounding --------------------------------------------------------------------------

STOCHASTIC_FORMATS = [rp.format("mxfp4_e2m1"), rp.format("mxfp8_e4m3"), rp.format("mxint8"),
                      rp.ScaledFormat("e3m2", block_size=5, axis=0, scale_rounding="even"),
                      rp.format("nvfp4")]


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
@pytest.mark.parametrize("fmt", STOCHASTIC_FORMATS, ids=repr)
def test_stochastic_reproducible_and_chunked(fmt, mode):
    """An int seed gives the same bits every time, another seed other bits; rows
    rounded as chunks with round_chunk's offset give the bits of the whole."""
    rng = np.random.default_rng(6)
    for dtype in (np.float32, np.float64):
        x = sample(rng, (8, 48), dtype, 1)
        first = rp.round(x, fmt, mode, rng=1234)
        assert_same(rp.round(x, fmt, mode, rng=1234), first, "same seed")
        assert (_bits(rp.round(x, fmt, mode, rng=1235)) != _bits(first)).any()
        if fmt.axis == 0:
            continue  # blocks run down columns: a row is not made of whole blocks
        for start, stop in ((0, 3), (3, 4), (4, 8)):
            chunk = round_chunk(x[start:stop], fmt, mode, rng=1234, offset=start * x.shape[1])
            assert_same(chunk, first[start:stop], f"rows {start}:{stop}")


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
@pytest.mark.parametrize("name", MX_PRESETS)
def test_stochastic_float32_as_float64(name, mode):
    """The result is a function of the value, its flat index and the seed: float32
    data (the float32 block kernel) and the same values as float64 (the float64
    one) round alike, also for a chunk whose random counters cross 2**32."""
    rng = np.random.default_rng(10)
    x = sample(rng, (12, 64), np.float32, int(rng.integers(-10, 10)))
    assert_same(rp.round(x, name, mode, rng=99).astype(np.float64), rp.round(x.astype(np.float64), name, mode, rng=99))
    offset = 2**32 - 5 * 64 - 17
    assert_same(round_chunk(x, name, mode, rng=99, offset=offset).astype(np.float64),
                round_chunk(x.astype(np.float64), name, mode, rng=99, offset=offset))


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
@pytest.mark.parametrize("fmt", STOCHASTIC_FORMATS[:4], ids=repr)
def test_stochastic_gives_a_neighbour(fmt, mode):
    """Every stochastic result is X times one of the two element values around
    v / X (the lower one where v / X is on the grid); NaN blocks stay NaN."""
    rng = np.random.default_rng(8)
    for dtype in (np.float32, np.float64):
        x = sample(rng, (10, 35), dtype, int(rng.integers(-20, 20)))
        x[3, 7] = np.nan
        lo, hi, p = stochastic_reference(x, fmt, mode)
        got = rp.round(x, fmt, mode, rng=77).astype(np.float64)
        nan = np.isnan(lo)
        assert (np.isnan(got) == nan).all()
        exact = np.array([pi == 0 for pi in p.ravel()]).reshape(x.shape)
        ok = (_bits(got) == _bits(lo)) | (~exact & (_bits(got) == _bits(hi))) | nan
        assert ok.all(), (x[~ok][:5], got[~ok][:5], lo[~ok][:5], hi[~ok][:5])
        assert (_bits(got) == _bits(hi))[~exact & ~nan].any() and (_bits(got) == _bits(lo))[~exact & ~nan].any()


FREQUENCY_VALUES = [0.3, 0.2, 0.01]
FREQUENCY_BUDGET = Budget(1e-6, len(FREQUENCY_VALUES) * len(STOCHASTIC_MODES))  # one check per case


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
@pytest.mark.parametrize("value", FREQUENCY_VALUES)
def test_stochastic_frequency(value, mode):
    """Blocks [1.0, x, ..., x] on MXFP4 (scale 2**-2): x rounds up with the
    oracle's exact probability; over 31 * 130 = 4030 draws (fixed seed) the count
    of rounding up passes a Chernoff bound (tests/stats_bounds.py) that a correct
    implementation fails, in any of these cases, with probability below 1e-6."""
    fmt = rp.format("mxfp4_e2m1")
    x = np.full((130, 32), value, np.float32)
    x[:, 0] = 1.0
    lo, hi, p = stochastic_reference(x[:1], fmt, mode)
    assert lo[0, 1] != hi[0, 1] and 0 < p[0, 1] < 1
    got = rp.round(x, fmt, mode, rng=2024)[:, 1:].astype(np.float64)
    assert np.isin(got, [lo[0, 1], hi[0, 1]]).all()
    n = got.size
    k = int((got == hi[0, 1]).sum())
    FREQUENCY_BUDGET.binomial(k, n, p[0, 1], f"{value} in {mode}: rounded up")


# -- gfloat, a second oracle -------------------------------------------------------------------

GFLOAT_FORMATS = {
    "mxfp8_e4m3": "format_info_mxfp8_e4m3",
    "mxfp8_e5m2": "format_info_mxfp8_e5m2",
    "mxfp6_e2m3": "format_info_mxfp6_e2m3",
    "mxfp6_e3m2": "format_info_mxfp6_e3m2",
    "mxfp4_e2m1": "format_info_mxfp4_e2m1",
    "mxint8": "format_info_mxint8",
}
GFLOAT_MODES = {"nearest": "TiesToEven", "nearest_away": "TiesToAway", "toward_zero": "TowardZero",
                "up": "TowardPositive", "down": "TowardNegative"}


@pytest.mark.parametrize("name", GFLOAT_FORMATS)
def test_matches_gfloat(name):
    """OCP MX (floor rule, scales clipped to 2**[-127, 127], saturating elements)
    as gfloat's quantize_block computes it, in each of its deterministic rounding
    modes, on random float32 blocks of 32 (some with a max just below a power of
    two, some clamped at 2**-127), including an all-zero block (gfloat gives it
    the scale 2**-127 and zeros, as rp does). Compared bit for bit, signed zeros
    included. The blocks are handed to gfloat as float64: its compute_scale_amax
    takes floor(log2(amax)) in the data's dtype, and a float32 log2 rounds the
    log of a value just below 2**k up to k."""
    import gfloat
    import gfloat.formats

    block_format = getattr(gfloat.formats, GFLOAT_FORMATS[name])
    fmt = rp.format(name)
    rng = np.random.default_rng(list(GFLOAT_FORMATS).index(name))
    x = np.concatenate([sample(rng, (1, 32), np.float32, int(e)) for e in rng.integers(-135, 120, 40)])
    x[7] = 0.0
    x[8, ::3] = -0.0
    x[8, 1::3] = 0.0
    for mode, gfloat_mode in GFLOAT_MODES.items():
        got = rp.round(x, fmt, mode).astype(np.float64)
        want = np.stack([gfloat.quantize_block(block_format, row.astype(np.float64), gfloat.compute_scale_amax,
                                               getattr(gfloat.RoundMode, gfloat_mode)) for row in x])
        assert_same(got, want, f"{name} {mode} against gfloat")


# -- names --------------------------------------------------------------------------------------


def test_names():
    assert rp.format("mxfp4") is rp.format("mxfp4_e2m1") is rp.scaled_formats["mxfp4_e2m1"]
    assert rp.format("mxfp4") == rp.ScaledFormat("float4_e2m1fn", block_size=32)
    for name, element in (("mxfp6_e2m3", "float6_e2m3fn"), ("MXFP8_E4M3", "float8_e4m3fn"),
                          ("mxfp8_float8_e4m3fn", "float8_e4m3fn"), ("mxfp6_e3m2fn", "float6_e3m2fn")):
        fmt = rp.format(name)
        assert fmt == rp.ScaledFormat(element, block_size=32), name
        assert fmt.scale_format == "e8m0" and fmt.scale_rounding == "floor" and fmt.axis == -1
    nvfp4 = rp.format("nvfp4")
    assert nvfp4 == rp.ScaledFormat("float4_e2m1fn", block_size=16, scale_format="float8_e4m3fn")
    assert rp.format("mxint8").element == rp.FixedFormat(2, 6)
    assert set(rp.scaled_formats) >= {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1",
                                      "mxint8", "nvfp4"}
    with pytest.raises(ValueError) as info:
        rp.format("mxfp8")
    assert "mxfp8_e4m3" in str(info.value) and "mxfp8_e5m2" in str(info.value)


# -- bad input ----------------------------------------------------------------------------------


def test_bad_arguments():
    with pytest.raises(ValueError, match="block_size"):
        rp.ScaledFormat("e4m3", block_size=0)
    with pytest.raises(ValueError, match=r"block_size must be >= 1 and below 2\*\*63"):
        rp.ScaledFormat("e4m3", block_size=2**63)  # (the kernels count in int64)
    # a block far longer than the data costs what the data costs (decode and flip_bits
    # made the scales block_size long: 8 GiB for six values)
    huge = rp.ScaledFormat("e4m3", block_size=2**62)
    x = np.array([[0.5, -3.0, 7.0], [1e-3, 2.0, -0.25]])
    assert rp.decode(rp.encode(x, huge), huge).tolist() == rp.round(x, huge).tolist()
    assert rp.flip_bits(x, huge, 0.0, rng=0).tolist() == rp.round(x, huge).tolist()
    for pair in ((-1.5, 1), (True, 2)):
        with pytest.raises(TypeError, match=r"scale_format as exponents must be a pair of ints \(s_min, s_max\)"):
            rp.ScaledFormat("e4m3", block_size=32, scale_format=pair)
    codes = rp.encode(np.ones(32, np.float32), "mxfp8_e4m3")
    assert np.isnan(rp.decode((codes.elements, np.full(codes.scales.shape, 255, np.uint16)), "mxfp8_e4m3")).all()
    with pytest.raises(ValueError, match=r"scale codes must lie in \[0, 254\], or 255 \(NaN\)"):
        rp.decode((codes.elements, np.full(codes.scales.shape, 256, np.uint16)), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="scale_rounding"):
        rp.ScaledFormat("e4m3", block_size=32, scale_rounding="nope")
    with pytest.raises(ValueError, match="tensor_scale"):
        rp.ScaledFormat("e4m3", block_size=32, tensor_scale=True)
    for scale_format in ("e4m3", "e8m0", (-4, 4)):  # {-1, 0}: no scale brings a positive max in range
        with pytest.raises(ValueError, match="no positive value"):
            rp.ScaledFormat(rp.FixedFormat(1, 0), block_size=16, scale_format=scale_format)
    with pytest.raises(ValueError, match="overflow"):
        rp.round(np.ones(32, np.float32), "mxfp8_e4m3", overflow="inf")
    with pytest.raises(TypeError):
        rp.round(np.ones(32, np.complex64), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="axis"):
        rp.round(np.ones((4, 4), np.float32), rp.ScaledFormat("e4m3", block_size=2, axis=2))
    with pytest.raises(ValueError, match="axis"):
        rp.round(np.ones(4, np.float32), rp.ScaledFormat("e4m3", block_size=2, axis=-2))
    # one scale per array has no axis: a per-channel scale needs the axis' length as block_size
    for axis in (0, 5, -2):
        with pytest.raises(ValueError, match=rf"axis={axis} has no effect with block_size=None.*block_size=x.shape"):
            rp.ScaledFormat(rp.format("int8"), axis=axis)
    assert rp.ScaledFormat("int8", axis=-1) == rp.ScaledFormat("int8")


@pytest.mark.parametrize("fmt", [rp.ScaledFormat("e4m3"), rp.ScaledFormat("e2m1", scale_format="e4m3"),
                                 rp.ScaledFormat("e2m1", scale_format="e4m3", tensor_scale=True)], ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_empty_array_with_one_scale(fmt, dtype):
    """One scale per array, no elements: rounding gives an empty array, and its
    scale code is an all-zero array's (the least scale); decode inverts it."""
    x = np.zeros(0, dtype)
    rounded = rp.round(x, fmt)
    assert rounded.shape == (0,) and rounded.dtype == rp.round(np.zeros(1, dtype), fmt).dtype
    codes = rp.encode(x, fmt)
    assert codes.elements.shape == (0,) and codes.scales.shape == ()
    assert codes.scales == rp.encode(np.zeros(1, dtype), fmt).scales
    assert rp.decode(codes, fmt).shape == (0,)


@given(scale_format=float_formats(max_exp_bits=11, max_man_bits=12), data=st.data())
def test_significand_scales_are_the_scale_formats_own_rounding(scale_format, data):
    """A significand scale is ``m / element_max`` rounded to nearest even by the
    scale format's own rounding (saturating), clamped to [its smallest value,
    its max]: the kernels' float64 shortcut for normal quotients against
    ``rp.round`` onto the scale format, on quotients at and beside its grid's
    points and midpoints, tiny, huge and beyond its range."""
    assume(scale_format.max > 0 and scale_format.smallest_subnormal >= 2.0**-1074)
    fmt = rp.ScaledFormat("e2m1", block_size=16, scale_format=scale_format)
    plan = scaling.scaled_plan(fmt, "nearest", None, None, np.float64)
    low, high = scale_format.smallest_subnormal, scale_format.max
    float_params = (1.0, 1.0, low, high)  # element max and tensor scale 1: the quotient is m itself
    point = float(rp.round(data.draw(st.floats(low, high)), scale_format, "nearest", overflow="saturate"))
    spacing = math.ldexp(1.0, math.frexp(point)[1] - 1 - scale_format.man_bits) if point else low
    quotients = [point, point + spacing / 2, point - spacing / 2, np.nextafter(point + spacing / 2, 0.0),
                 np.nextafter(point + spacing / 2, np.inf), low / 3, high * 1.5, np.finfo(np.float64).max,
                 data.draw(st.floats(0.0, high * 4))]
    for quotient in quotients:
        if not 0.0 <= quotient < np.inf:
            continue
        expected = float(rp.round(np.float64(quotient), scale_format, "nearest", overflow="saturate"))
        expected = min(max(expected, low), high)
        got = significand_scale(float(quotient), float_params, plan.scale_params)
        assert got == expected, (scale_format, quotient)


@pytest.mark.parametrize("fmt", [rp.format("mxint8"), rp.format("nvfp4"), rp.format("mxfp6_e2m3"),
                                 rp.ScaledFormat(rp.FixedFormat(3, 4, name="mine"), block_size=8),
                                 rp.ScaledFormat("e2m1", scale_format=rp.FloatFormat(5, 2, name="s52"))],
                         ids=str)
def test_repr_evaluates_back_to_the_format(fmt):
    """An element or scale format is named in the repr only where rp.format
    knows the name (mxint8's element 'int8_mx' is not one): the repr evaluates
    back to an equal format."""
    namespace = {"ScaledFormat": rp.ScaledFormat, "FixedFormat": rp.FixedFormat, "FloatFormat": rp.FloatFormat}
    assert eval(repr(fmt), namespace) == fmt



# -- significand scales: the quotient m / (element max * g) rounds once --------------------

# (element, scale format, tensor scale): at the limit, the scale's precision plus the divisor's bits come to 53
AT_THE_LIMIT = [(rp.FixedFormat(1, 25), "e4m3", True), (rp.FixedFormat(1, 45), "bfloat16", False)]
# one bit past it
PAST_THE_LIMIT = [(rp.FixedFormat(1, 26), "e4m3", True), (rp.FixedFormat(1, 46), "bfloat16", False)]


def _midpoint_blocks(fmt, count, seed, largest=1.0e3):
    """float64 data in blocks of 2 along the last axis whose largest magnitude m
    lies on, or one float64 step either side of, a midpoint between two scales
    times ``element.max * g`` (the first block, whose max sets g, aside): the
    quotients on which a second rounding of ``m / (element.max * g)`` would go
    the other way."""
    rng = np.random.default_rng(seed)
    x = np.zeros((count + 1, 2))
    x[0, 0] = largest
    g = Fraction(float(scaled_reference(x[:1], fmt).tensor_scale)) if fmt.tensor_scale else Fraction(1)
    divisor = element_max(fmt.element) * g
    man_bits = fmt.scale_format.man_bits
    for row in range(1, count + 1):
        while True:
            exponent = int(rng.integers(fmt.scale_format.emin, fmt.scale_format.emax + 1))
            significand = int(rng.integers(2**man_bits, 2**(man_bits + 1)))
            midpoint = Fraction(2 * significand + 1, 2**(man_bits + 1)) * Fraction(2)**exponent
            m = float(midpoint * divisor)
            if 0 < m < largest:
                break
        x[row, 0] = np.nextafter(m, (-np.inf, m, np.inf)[row % 3])
        x[row, 1] = -x[row, 0] / 3
    return x


@pytest.mark.parametrize("element, scale_format, tensor_scale", AT_THE_LIMIT, ids=repr)
def test_significand_scales_next_to_midpoints(element, scale_format, tensor_scale):
    fmt = rp.ScaledFormat(element, block_size=2, scale_format=scale_format, tensor_scale=tensor_scale)
    for seed, largest in enumerate([1.0e3, 7.1e5, 3.3e-2]):  # (each another tensor scale)
        x = _midpoint_blocks(fmt, 200, seed, largest)
        want = scaled_reference(x, fmt)
        assert_same(rp.decode(rp.encode(x, fmt), fmt), want.values.astype(np.float64), f"{fmt!r}")
        assert_same(rp.round(x, fmt), want.values, f"{fmt!r}")


@pytest.mark.parametrize("element, scale_format, tensor_scale", PAST_THE_LIMIT, ids=repr)
def test_significand_scales_past_float64s_bits_are_refused(element, scale_format, tensor_scale, monkeypatch):
    """One bit more and the float64 quotient's second rounding goes wrong for some
    such block: the format is refused, and the check is not stale."""
    with pytest.raises(ValueError, match="cannot round the scales"):
        rp.ScaledFormat(element, block_size=2, scale_format=scale_format, tensor_scale=tensor_scale)
    monkeypatch.setattr("rpfloat.scaledformat._check_scale_rounds_once", lambda *args: None)
    fmt = rp.ScaledFormat(element, block_size=2, scale_format=scale_format, tensor_scale=tensor_scale)
    wrong = 0
    for seed, largest in enumerate([1.0e3, 7.1e5, 3.3e-2]):
        x = _midpoint_blocks(fmt, 200, seed, largest)
        wrong += np.count_nonzero(rp.round(x, fmt).view(np.int64) != scaled_reference(x, fmt).values.view(np.int64))
    assert wrong > 0


# scale formats reaching float64's subnormals: to 2**-1024, 2**-1027, powers of two, a deep one, one
# without subnormals
SUBNORMAL_SCALE_FORMATS = [rp.FloatFormat(11, 2), rp.FloatFormat(11, 5), rp.FloatFormat(11, 0),
                           rp.FloatFormat(11, 2, bias=1030), rp.FloatFormat(11, 3, subnormals=False)]


@pytest.mark.parametrize("element", ["e2m1", "e4m3", rp.FixedFormat(2, 6)], ids=str)
@pytest.mark.parametrize("scale_format", SUBNORMAL_SCALE_FORMATS, ids=repr)
def test_significand_scales_below_float64s_normals_round_once(scale_format, element):
    """A scale ``m / element.max`` at or below 2**-1022 is the exact quotient
    rounded, not float64's subnormal quotient (which has lost bits and may lie
    on a midpoint of the scale's grid where the exact one does not): blocks
    whose max lies on, or one float64 step beside, each midpoint below 2**-1019
    times element.max."""
    fmt = rp.ScaledFormat(element, block_size=2, scale_format=scale_format)
    values = scale_format.values()
    values = values[(values >= 0) & (values <= 2.0**-1019)]
    divisor = element_max(fmt.element)
    maxima = []
    for low, high in zip(values[:-1], values[1:]):
        m = float((Fraction(low) + Fraction(high)) / 2 * divisor)
        maxima += [np.nextafter(m, 0.0), m, np.nextafter(m, np.inf)]
    x = np.stack([maxima, -np.array(maxima) / 3], axis=1)
    want = scaled_reference(x, fmt)
    assert np.array_equal(rp.encode(x, fmt).scales.astype(np.int64), want.scale_codes.astype(np.int64))
    assert_same(rp.round(x, fmt), want.values, f"{fmt!r}")


def test_a_scale_just_below_a_subnormal_midpoint():
    """The report's block: m / 6 lies just below 1.5 * 2**-1024, the midpoint of
    the scales 2**-1024 and 2**-1023, and float64's quotient on it (which
    rounded to the even scale 2**-1023)."""
    fmt = rp.ScaledFormat("e2m1", block_size=2, scale_format=rp.FloatFormat(11, 2))
    m = np.nextafter(9 * 2.0**-1024, 0)
    assert m / 6 == 1.5 * 2.0**-1024 and Fraction(m) / 6 < Fraction(3, 2) * Fraction(2)**-1024
    x = np.array([m, m / 3])
    assert rp.encode(x, fmt).scales.tolist() == [1]
    assert_same(rp.round(x, fmt), scaled_reference(x, fmt).values)


def test_float64_scale_format_is_refused():
    """53 bits of scale precision leave no room for any element's: each element
    was rounded from the float64 ``v / X``, which can lie on one of its values
    or midpoints where the exact one does not. E4M3's 5.0 rounded toward zero
    became 448 X (X = 5 / 448 in float64, exact 5 / X < 448), above 5."""
    for element in ("e4m3", "e2m1", rp.FixedFormat(2, 6)):
        with pytest.raises(ValueError, match="scale_format 'float64' cannot round"):
            rp.ScaledFormat(element, scale_format="float64")


# (element, scale format, tensor scale): at the limit, the scale's precision (and the tensor scale's 24)
# plus the element's 4 significant bits come to 53; e4m3's max, 448, has 3, which the check counted before
ELEMENTS_AT_THE_LIMIT = [("e4m3", rp.FloatFormat(11, 48), False), ("e4m3", rp.FloatFormat(8, 24), True)]
ELEMENTS_PAST_THE_LIMIT = [("e4m3", rp.FloatFormat(11, 49), False), ("e4m3", rp.FloatFormat(8, 25), True)]


def _element_boundary_blocks(fmt, count, seed):
    """float64 data in blocks of 2 along the last axis: a max m and a value on,
    or one float64 step beside, a value or midpoint ``b`` of the element's grid
    times the block's scale X: the quotients ``v / X`` whose float64 rounding
    may land on ``b``. With a tensor scale, the first block's max sets g, of 24
    significant bits."""
    rng = np.random.default_rng(seed)
    x = np.zeros((count + 1, 2))
    g = Fraction(2**24 - 1, 2**23) * Fraction(2)**-110
    x[0, 0] = float(g * Fraction(float(fmt.scale_format.max)) * element_max(fmt.element)) if fmt.tensor_scale \
        else 1.0e3
    x[1:, 0] = rng.uniform(1, 2, count) * 2.0 ** rng.integers(-20, 9, count).astype(float)
    scales = scaled_reference(x, fmt).scales[:, 0]
    values = fmt.element.values()
    values = values[np.isfinite(values) & (values > 0)]
    boundaries = np.concatenate([values, (values[:-1] + values[1:]) / 2])
    for row in range(1, count + 1):
        b = Fraction(float(rng.choice(boundaries[boundaries < 0.9 * x[row, 0] / scales[row]])))
        v = float(b * Fraction(float(scales[row])))
        x[row, 1] = -np.nextafter(v, (0.0, v, np.inf)[row % 3])
    return x


@pytest.mark.parametrize("element, scale_format, tensor_scale", ELEMENTS_AT_THE_LIMIT, ids=repr)
def test_elements_next_to_their_boundaries_under_significand_scales(element, scale_format, tensor_scale):
    fmt = rp.ScaledFormat(element, block_size=2, scale_format=scale_format, tensor_scale=tensor_scale)
    x = _element_boundary_blocks(fmt, 300, 1)
    for mode in ("nearest", "toward_zero", "up", "odd"):
        assert_same(rp.round(x, fmt, mode), scaled_reference(x, fmt, mode).values, f"{fmt!r} {mode}")


@pytest.mark.parametrize("element, scale_format, tensor_scale", ELEMENTS_PAST_THE_LIMIT, ids=repr)
def test_elements_past_float64s_bits_are_refused(element, scale_format, tensor_scale, monkeypatch):
    """One bit more (taken before: the check counted element.max's bits, not
    the element's) and some element rounds from a float64 ``v / X`` on one of
    its values or midpoints: refused, naming scale_format."""
    with pytest.raises(ValueError, match="scale_format .* cannot round"):
        rp.ScaledFormat(element, block_size=2, scale_format=scale_format, tensor_scale=tensor_scale)
    monkeypatch.setattr("rpfloat.scaledformat._check_scale_rounds_once", lambda *args: None)
    fmt = rp.ScaledFormat(element, block_size=2, scale_format=scale_format, tensor_scale=tensor_scale)
    x = _element_boundary_blocks(fmt, 300, 1)
    wrong = 0
    for mode in ("nearest", "toward_zero", "up", "odd"):
        wrong += np.count_nonzero(rp.round(x, fmt, mode).view(np.int64)
                                  != scaled_reference(x, fmt, mode).values.view(np.int64))
    assert wrong > 0


@pytest.mark.parametrize("scale_range", [(0, 0), (0, 1), (-3, 4), (-8, 7), (1, 4), (0, 255), (-20, 20)])
def test_scale_bits_of_exponent_ranges_count_their_codes(scale_range):
    """The high - low + 1 scale codes (0 .. high - low) of an exponent range take ceil(log2(count)) bits."""
    low, high = scale_range
    fmt = rp.ScaledFormat("e4m3", block_size=4, scale_format=scale_range)
    assert fmt.scale_bits == max(1, math.ceil(math.log2(high - low + 1)))
    x = np.array([448.0 * 2.0**s for s in range(low, high + 1) for _ in range(4)])
    codes = rp.encode(x, fmt)
    assert int(codes.scales.max()) == high - low
    packed = rp.pack(codes, fmt)
    assert packed.scales.nbytes == -(-(high - low + 1) * fmt.scale_bits // 8)
    np.testing.assert_array_equal(rp.decode(rp.unpack(packed, fmt), fmt), x)


@pytest.mark.parametrize("m, expected", [
    (1 + 2.0**-23 + 2.0**-24, 1 + 2.0**-22),      # a float32 tie: to the even neighbour, up
    (1 + 2.0**-22 + 2.0**-24, 1 + 2.0**-22),      # a tie: to the even neighbour, down
    (1 + 2.0**-23 + 2.0**-24 + 2.0**-45, 1 + 2.0**-22),
    (1 + 2.0**-23 + 2.0**-24 - 2.0**-45, 1 + 2.0**-23),
])
def test_nvfp4_tensor_scale_is_the_quotient_rounded_once_to_float32(m, expected):
    """g = max|x| / (448 * 6) rounded once to float32, nearest even; here the
    quotient is m exactly (float64 data), at or near a float32 midpoint."""
    x = np.zeros(16)
    x[3] = 2688.0 * m
    assert Fraction(x[3]) / 2688 == Fraction(m)  # exact
    codes = rp.encode(x, rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True))
    assert float(codes.tensor_scale) == expected
