"""Stochastic rounding of float64 data in 32-bit halves (``rpfloat._kernels.halves``).

The halves kernel must give the 64-bit kernel's bits (which every other test
holds to the oracle and to the documented random stream) for every input, every
`rand_bits` and every format it takes, and be chosen exactly where it applies.
The inputs sweep every sign, exponent and top significand bits of a float64
with low words at the edges of a carry (0, 1, 2**31, 2**32 - 1, ...), and the
values at the ends of its narrowed range.
"""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels import quantize
from rpfloat._params import kernel_params

STOCHASTIC = quantize.STOCHASTIC
HALVES_FORMATS = [
    "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float6_e3m2fn", "float4_e2m1fn", "tf32",
    "float8_e4m3fnuz", "float8_e4m3b11fnuz", rp.FloatFormat(6, 9), rp.FloatFormat(6, 9, subnormals=False),
    rp.FloatFormat(11, 20), rp.FloatFormat(None, 7), rp.FloatFormat(3, 1, subnormals=False),
]
RAND_BITS = [64, 1, 5, 20, 31, 32, 33, 45, 52, 63]


def _params(fmt, policy=None, carrier=np.float64):
    fmt = rp.format(fmt) if isinstance(fmt, str) else fmt
    return kernel_params(fmt, np.dtype(carrier), policy or fmt.overflow)


def _sweep() -> np.ndarray:
    """Every pattern of a float64's top 16 bits (sign, exponent, 4 significand
    bits) with middle and low bits that put a carry out of the low word at
    stake: 2**16 * 12 values."""
    top = np.arange(0x10000, dtype=np.uint64) << np.uint64(48)
    middle = np.array([0, 0xFFFF, 0x8000, 0x1234], dtype=np.uint64) << np.uint64(32)
    low = np.array([0, 1, 0xFFFFFFFF], dtype=np.uint64)
    rest = (middle[:, None] | low[None, :]).ravel()
    rest = np.concatenate([rest, np.array([0x80000000, 0x7FFFFFFF, 0xDEADBEEF12345678 & 0xFFFFFFFFFFFF],
                                          dtype=np.uint64)])
    return (top[:, None] | rest[None, :]).ravel().view(np.float64)


def _edges(params) -> np.ndarray:
    """Magnitudes at and next to the ends of the halves kernel's range, and of
    the format's range, with both signs."""
    low, high = quantize.fast_bounds(params, STOCHASTIC, True)
    original_low, original_high = quantize.fast_bounds(params, STOCHASTIC, False)
    centres = np.array([low, high, original_low, original_high, params[quantize.P_FAST_ALIGNED_BITS]],
                       dtype=np.int64)
    steps = np.array([-2**32, -2, -1, 0, 1, 2, 2**32], dtype=np.int64)
    magnitudes = (centres[:, None] + steps[None, :]).ravel()
    magnitudes = magnitudes[(magnitudes >= 0) & (magnitudes < 0x7FF0000000000000)]
    bits = np.concatenate([magnitudes, magnitudes | np.int64(-2**63)])
    return np.repeat(bits, 64).view(np.float64)  # 64 random numbers each


def _round(kernel_entry, xs, params, rand_bits, offset):
    out = np.empty_like(xs)
    kernel_entry(xs.view(np.int64), out.view(np.int64), params, params, STOCHASTIC, np.uint64(0x5EED), offset,
                 rand_bits)
    return out.view(np.uint64)


def _kernels():
    plain = quantize.entry_point(quantize.MODE_KERNELS[STOCHASTIC], np.int64, np.int64)
    halves = quantize.entry_point(quantize.round_stochastic_halves, np.int64, np.int64)
    return plain, halves


@pytest.mark.parametrize("fmt", HALVES_FORMATS, ids=repr)
def test_halves_give_the_64_bit_kernels_bits(fmt):
    params = _params(fmt)
    assert quantize.halves_apply(params, STOCHASTIC)
    plain, halves = _kernels()
    xs = np.concatenate([_sweep(), _edges(params)])
    for rand_bits in RAND_BITS:
        expected = _round(plain, xs, params, rand_bits, 12345)
        got = _round(halves, xs, params, rand_bits, 12345)
        wrong = np.flatnonzero(got != expected)
        assert wrong.size == 0, (
            f"{fmt!r} rand_bits={rand_bits}: {wrong.size} differ, first x={xs[wrong[0]]!r} "
            f"got {got[wrong[0]]:#x} expected {expected[wrong[0]]:#x}")


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", rp.FloatFormat(6, 9)], ids=repr)
def test_halves_take_most_ordinary_values(fmt):
    """The range is not empty: ordinary values lie inside it (so that the sweep
    above exercises the halves loop, not only the general one)."""
    params = _params(fmt)
    low, high = quantize.fast_bounds(params, STOCHASTIC, True)
    magnitudes = np.abs(np.linspace(0.5, 3.0, 1001)).view(np.int64)
    assert low <= high
    assert np.all((magnitudes >= low) & (magnitudes <= high))


@pytest.mark.parametrize("fmt", HALVES_FORMATS + ["bfloat16"], ids=repr)
def test_the_narrowed_range(fmt):
    """From a multiple of 2**32 to one below a multiple of 2**32, from one spacing
    up, inside the 64-bit kernel's range."""
    params = _params(fmt)
    low, high = quantize.fast_bounds(params, STOCHASTIC, True)
    original_low, original_high = quantize.fast_bounds(params, STOCHASTIC, False)
    assert low % 2**32 == 0 and (high + 1) % 2**32 == 0
    assert low >= max(original_low, params[quantize.P_FAST_ALIGNED_BITS]) and low - 2**32 < max(
        original_low, params[quantize.P_FAST_ALIGNED_BITS])
    assert high <= original_high < high + 2**32


@pytest.mark.parametrize("fmt, policy, applies", [
    ("bfloat16", None, True),
    ("float8_e4m3fn", "saturate", True),
    (rp.FloatFormat(11, 20), None, True),    # drops 32 bits: the least it can
    (rp.FloatFormat(11, 21), None, False),   # drops 31
    ("float32", None, False),
    (rp.FloatFormat(11, 10), None, True),
    (rp.FloatFormat(5, 0), None, False),     # no significand bits: no fast path
    (rp.FixedFormat(8, 8), "saturate", False),
    (rp.FixedFormat(4, 4), "wrap", False),
])
def test_where_the_halves_kernel_applies(fmt, policy, applies):
    params = _params(fmt, policy)
    assert quantize.halves_apply(params, STOCHASTIC) == applies
    kernel = quantize.round_array_for(np.int64, np.int64, params, STOCHASTIC)
    halves = quantize.entry_point(quantize.round_stochastic_halves, np.int64, np.int64)
    assert (kernel is halves) == applies
    for mode in (quantize.NEAREST, quantize.STOCHASTIC_EQUAL):  # other modes never take it
        assert quantize.round_array_for(np.int64, np.int64, params, mode) is not halves
    fmt = rp.format(fmt) if isinstance(fmt, str) else fmt
    if fmt.carrier is np.float32:  # float32 data keep their own kernel
        assert quantize.round_array_for(np.int32, np.int32, _params(fmt, policy, np.float32),
                                        STOCHASTIC) is not halves


def test_halves_through_the_public_api():
    """``rp.round`` on float64 data: the same bits as the 64-bit kernel, in
    chunks, from two threads' ranges, and with an offset crossing a 2**32 segment."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(50_003) * 2.0 ** rng.integers(-20, 20, 50_003)
    x[::101] = np.inf
    x[::103] = np.nan
    params = _params("bfloat16")
    plain, _ = _kernels()
    key = int(np.random.SeedSequence(7).generate_state(1, np.uint64)[0])
    expected = np.empty_like(x)
    plain(x.view(np.int64), expected.view(np.int64), params, params, STOCHASTIC, np.uint64(key), 0, 64)
    got = rp.round(x, "bfloat16", "stochastic", rng=7)
    assert np.array_equal(got.view(np.uint64), expected.view(np.uint64))
