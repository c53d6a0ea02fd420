"""Stochastic rounding of float64 data in 32-bit halves (``rpfloat._kernels.halves``).

The halves kernels (and their variant from 0 up) must give the 64-bit kernel's
bits (which every other test holds to the oracle and to the documented random
stream) for every input, every `rand_bits` and every format they take, and be
chosen exactly where they apply. The inputs sweep every sign, exponent and top
significand bits of a float64 with low words at the edges of a carry (0, 1,
2**31, 2**32 - 1, ...), the values at the ends of the narrowed range, and
random magnitudes below one spacing.
"""
from fractions import Fraction

import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import loops, table
from rpfloat._kernels.cpu.fast_stochastic_float64 import below_one_spacing
from rpfloat._kernels.core.stream import random_bits
from rpfloat._params import kernel_params

STOCHASTIC = layout.STOCHASTIC
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
    low, high = loops.fast_bounds(params, STOCHASTIC, True)
    original_low, original_high = loops.fast_bounds(params, STOCHASTIC, False)
    centres = np.array([low, high, original_low, original_high, params[layout.P_FAST_ALIGNED_BITS]],
                       dtype=np.int64)
    steps = np.array([-2**32, -2, -1, 0, 1, 2, 2**32], dtype=np.int64)
    magnitudes = (centres[:, None] + steps[None, :]).ravel()
    magnitudes = magnitudes[(magnitudes >= 0) & (magnitudes < 0x7FF0000000000000)]
    bits = np.concatenate([magnitudes, magnitudes | np.int64(-2**63)])
    return np.repeat(bits, 64).view(np.float64)  # 64 random numbers each


def _below_one_spacing(params) -> np.ndarray:
    """Random magnitudes below one spacing (random significands, 2**-1 to 2**-40
    spacings, and the few ulps below it), both signs."""
    rng = np.random.default_rng(17)
    quantum = float(np.int64(params[layout.P_BELOW_QUANTUM_BITS]).view(np.float64))
    tiny = quantum * rng.uniform(1.0, 2.0, 20_000) * 2.0 ** -rng.integers(1, 41, 20_000)
    edge = (np.int64(params[layout.P_BELOW_QUANTUM_BITS]) - np.arange(1, 200, dtype=np.int64)).view(np.float64)
    both = np.concatenate([tiny, edge])
    return np.concatenate([both, -both])


def _round(kernel_entry, xs, params, rand_bits, offset):
    out = np.empty_like(xs)
    kernel_entry(xs.view(np.int64), out.view(np.int64), params, params, STOCHASTIC, np.uint64(0x5EED), offset,
                 rand_bits)
    return out.view(np.uint64)


def _kernels():
    plain = table.entry_point_of(loops.MODE_KERNELS[STOCHASTIC], np.int64, np.int64)
    halves = table.entry_point_of(loops.round_stochastic_halves, np.int64, np.int64)
    return plain, halves


def _from_zero_kernel():
    return table.entry_point_of(loops.round_stochastic_halves_from_zero, np.int64, np.int64)


@pytest.mark.parametrize("fmt", HALVES_FORMATS, ids=repr)
def test_halves_give_the_64_bit_kernels_bits(fmt):
    """Both loops, wherever they are valid: the variant from 0 up needs one
    spacing of at least 2**-990 (tested on every format from 2**-978 up)."""
    params = _params(fmt)
    assert table.halves(params)
    plain, halves = _kernels()
    kernels = {"halves": halves}
    if params[layout.P_BELOW_QUANTUM_BITS] >= loops.ZERO_HALVES_QUANTUM:
        kernels["halves from 0"] = _from_zero_kernel()
    xs = np.concatenate([_sweep(), _edges(params), _below_one_spacing(params)])
    for rand_bits in RAND_BITS:
        expected = _round(plain, xs, params, rand_bits, 12345)
        for name, kernel in kernels.items():
            got = _round(kernel, xs, params, rand_bits, 12345)
            wrong = np.flatnonzero(got != expected)
            assert wrong.size == 0, (
                f"{fmt!r} {name} rand_bits={rand_bits}: {wrong.size} differ, first x={xs[wrong[0]]!r} "
                f"got {got[wrong[0]]:#x} expected {expected[wrong[0]]:#x}")


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", rp.FloatFormat(6, 9)], ids=repr)
def test_halves_take_most_ordinary_values(fmt):
    """The range is not empty: ordinary values lie inside it (so that the sweep
    above exercises the halves loop, not only the general one)."""
    params = _params(fmt)
    low, high = loops.fast_bounds(params, STOCHASTIC, True)
    magnitudes = np.abs(np.linspace(0.5, 3.0, 1001)).view(np.int64)
    assert low <= high
    assert np.all((magnitudes >= low) & (magnitudes <= high))


@pytest.mark.parametrize("fmt", HALVES_FORMATS + ["bfloat16"], ids=repr)
def test_the_narrowed_range(fmt):
    """From a multiple of 2**32 to one below a multiple of 2**32, from one spacing
    up, inside the 64-bit kernel's range."""
    params = _params(fmt)
    low, high = loops.fast_bounds(params, STOCHASTIC, True)
    original_low, original_high = loops.fast_bounds(params, STOCHASTIC, False)
    assert low % 2**32 == 0 and (high + 1) % 2**32 == 0
    assert low >= max(original_low, params[layout.P_FAST_ALIGNED_BITS]) and low - 2**32 < max(
        original_low, params[layout.P_FAST_ALIGNED_BITS])
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
    assert table.halves(params) == applies
    kernel = table.bit_level_kernel(np.int64, np.int64, params, STOCHASTIC)
    halves = table.entry_point_of(loops.round_stochastic_halves, np.int64, np.int64)
    from_zero = _from_zero_kernel()
    assert (kernel in (halves, from_zero)) == applies
    assert (kernel is from_zero) == (applies and table.halves_from_zero(params))
    for mode in (layout.NEAREST, layout.STOCHASTIC_EQUAL):  # other modes never take them
        assert table.bit_level_kernel(np.int64, np.int64, params, mode) not in (halves, from_zero)
    fmt = rp.format(fmt) if isinstance(fmt, str) else fmt
    if fmt.carrier is np.float32:  # float32 data keep their own kernel
        assert table.bit_level_kernel(np.int32, np.int32, _params(fmt, policy, np.float32),
                                        STOCHASTIC) not in (halves, from_zero)


def test_halves_from_zero_takes_the_coarse_formats():
    """Spacings below min_normal from 2**-32 up take the halves loop from 0 up."""
    for name, from_zero in (("float4_e2m1fn", True), ("float6_e3m2fn", True), ("float8_e4m3fn", True),
                            ("float8_e4m3fnuz", True), ("float8_e4m3b11fnuz", True), ("float8_e5m2", True),
                            ("float16", True), ("bfloat16", False), ("tf32", False),
                            (rp.FloatFormat(6, 9), False), (rp.FloatFormat(7, 3), False)):
        assert table.halves_from_zero(_params(name)) == from_zero, name
    assert table.halves_from_zero(_params(rp.FloatFormat(6, 2)))        # spacing 2**-32
    assert not table.halves_from_zero(_params(rp.FloatFormat(6, 3)))    # 2**-33


@pytest.mark.parametrize("rand_bits", [64, 33, 32, 31])
def test_halves_from_zero_decide_next_to_the_undecided_steps(rand_bits):
    """Below one spacing q the high random word can leave the step undecided
    (G + H == 2**31 - 1, ``halves.below_one_spacing``), and only the low word
    decides. Plant magnitudes where the stream's numbers tie, or miss a tie by
    1 or 2 (which the loop decides itself, from G's every bit), amid ordinary
    values, and compare with the 64-bit kernel: blocks with a tie must have gone
    to the general loop (from 32 random bits up: with 31 or fewer, the high
    words decide every step, and the tie steps down)."""
    params = _params("float8_e4m3fn")
    assert table.halves_from_zero(params)
    quantum = 2.0**-9
    key, n = 0x5EED, 1 << 16
    highs = np.array([int(random_bits(np.uint64(key), i)) >> 33 for i in range(n)], np.int64)  # H
    rng = np.random.default_rng(3)
    planted = np.arange(5, n, 29)
    miss = np.array([0, -2, -1, 0, 1, 2])[planted % 6]  # G + H - (2**31 - 1)
    half_fraction = 2**31 - 1 - highs[planted] + miss  # G
    inside = (half_fraction >= 0) & (half_fraction < 2**31)
    planted, miss, half_fraction = planted[inside], miss[inside], half_fraction[inside]
    # |x| / q * 2**31 = G + a fraction of 20 bits (exact: 51 bits at most); at the ties 0.875 or
    # another fraction, so that the low words decide both ways where H's dropped bit is 0
    fraction = np.where(miss == 0, np.where(planted % 4 == 1, 0.875, rng.integers(1, 2**20, planted.size) * 2.0**-20),
                        rng.integers(0, 2**20, planted.size) * 2.0**-20)
    tiny = (half_fraction + fraction) * 2.0**-31 * quantum
    xs = rng.standard_normal(n)
    xs[planted] = np.where(planted % 2 == 0, tiny, -tiny)
    plain, _ = _kernels()
    expected = _round(plain, xs, params, rand_bits, 0)
    got = _round(_from_zero_kernel(), xs, params, rand_bits, 0)
    for tied in (True, False):
        group = planted[(miss == 0) == tied]
        steps = np.count_nonzero(expected[group] << np.uint64(1))
        if tied and rand_bits <= 31:
            assert steps == 0
        else:
            assert 10 < steps < group.size - 10  # both ways
    np.testing.assert_array_equal(got, expected)


def test_below_one_spacing_against_exact_arithmetic():
    """``halves.below_one_spacing`` on its own: G = floor(|x| / q * 2**31) by
    exact integer arithmetic, for magnitudes 1 to 45 binades below q, float64
    subnormals and zeros, with random high words H and ones that make G + H
    reach 2**31 - 1 or miss it by 1; q from 2**-32 (the least the kernel takes)
    to 0.5 (float4_e2m1fn)."""
    rng = np.random.default_rng(23)
    for case in range(4000):
        quantum = (2.0**-32, 2.0**-9, 0.5)[case % 3]
        quantum_high = np.int32(np.float64(quantum).view(np.int64) >> 32)
        if case % 10 == 0:
            x = float(rng.integers(1, 2**52)) * 2.0**-1074  # a float64 subnormal
        elif case % 10 == 5:
            x = 0.0
        else:
            x = quantum * float(rng.uniform(1.0, 2.0)) * 2.0 ** -int(rng.integers(1, 46))
        x = -x if rng.integers(2) else x
        bits = int(np.float64(x).view(np.int64))
        high, low = bits >> 32, bits & 0xFFFFFFFF
        magnitude = high & 0x7FFFFFFF
        half_fraction = (Fraction(abs(x)) / Fraction(quantum) * 2**31).__floor__()  # G
        for half_random in (int(rng.integers(2**31)), 2**31 - 1 - half_fraction, 2**31 - half_fraction,
                            2**31 - 2 - half_fraction):
            if not 0 <= half_random < 2**31:
                continue
            sign = high & -(2**31)
            word, total = below_one_spacing(
                np.int32(magnitude), np.uint32(low), np.int32(magnitude >> 20), np.uint32(half_random),
                quantum_high, np.int32(sign), np.int32(0x1234))
            exact = half_fraction + half_random
            assert int(total) == (exact if exact < 2**31 else exact - 2**32), (x, half_random)
            assert int(word) == ((int(quantum_high) | sign) if exact >= 2**31 else 0x1234), (x, half_random)


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
def test_halves_through_the_public_api(fmt):
    """``rp.round`` on float64 data (the halves kernel, or for e4m3 and float4
    the one from 0 up, with raw N(0, 1) values below one spacing): the same
    bits as the 64-bit kernel, with inf and NaN, in chunks, from two threads'
    ranges, and with an offset crossing a 2**32 segment."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(50_003) * 2.0 ** rng.integers(-20, 20, 50_003)
    x[::7] = rng.standard_normal(x[::7].size)
    x[::101] = np.inf
    x[::103] = np.nan
    x[::107] = -0.0
    params = _params(fmt)
    plain, _ = _kernels()
    key = int(np.random.SeedSequence(7).generate_state(1, np.uint64)[0])
    expected = np.empty_like(x)
    plain(x.view(np.int64), expected.view(np.int64), params, params, STOCHASTIC, np.uint64(key), 0, 64)
    got = rp.round(x, fmt, "stochastic", rng=7)
    assert np.array_equal(got.view(np.uint64), expected.view(np.uint64))


def test_raw_data_stay_in_the_loop_from_zero():
    """Raw N(0, 1) data, zeros and values below one spacing included, lie in the
    range of the halves loop from 0 up (by its own range check): no block of
    them goes to the general loop, unless a step is left undecided."""
    params = _params("float8_e4m3fn")
    x = np.random.default_rng(5).standard_normal(100_000)
    x[::3] = 0.0
    assert np.count_nonzero(np.abs(x) < 2.0**-9) > 50
    low, high, zero_ok = loops.loop_range(params, STOCHASTIC, loops.HALVES_ZERO_LOOP)
    assert low == 0
    assert loops.count_irregular(x.view(np.int64), low, high, params, zero_ok) == 0
    low, high, zero_ok = loops.loop_range(params, STOCHASTIC, loops.HALVES_LOOP)
    assert loops.count_irregular(x.view(np.int64), low, high, params, zero_ok) == np.count_nonzero(
        (np.abs(x) < 2.0**-9) & (x != 0))  # the other loop's range starts at one spacing
