"""The scaled-integer kernels for fixed point (``rpfloat._kernels.scaled``, and
stochastic rounding by scaling, ``rpfloat._kernels.scaled_random``).

It must agree bit for bit, NaN payloads included, with the bit-level kernel
(``quantize``) that every other test holds to the oracle, over sweeps of every
float16 pattern and of float32 patterns covering every exponent, and with the
exact oracle itself on the small fixed formats, enumerated.
"""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import environment, loops, table
from rpfloat._kernels.core.stream import random_bits
from rpfloat._params import kernel_params, widening_params
from fpenv import (
    DENORMALS_ARE_ZERO, FE_DOWNWARD, FE_TOWARDZERO, FE_UPWARD, FLUSH_TO_ZERO, X86_64_GLIBC, mxcsr_with,
    rounding_direction,
)
from reference import fixed_range, round_reference
from sweeps import assert_same_stochastic, float16_sweep, float32_sweep, run_kernel

SCALED_MODES = {"nearest": layout.NEAREST, "up": layout.UP, "down": layout.DOWN,
                "toward_zero": layout.TOWARD_ZERO}

FORMATS = [
    rp.FixedFormat(8, 8), rp.FixedFormat(16, 16), rp.FixedFormat(4, 4),
    rp.FixedFormat(3, 5, signed=False), rp.FixedFormat(0, 24, signed=False), rp.FixedFormat(1, 23),
    rp.FixedFormat(24, 0), rp.FixedFormat(12, 12), rp.FixedFormat(1, 0), rp.FixedFormat(-3, 8),
    rp.FixedFormat(10, 40), rp.FixedFormat(0, 53, signed=False), rp.FixedFormat(-100, 110),
]


def _run_kernel(xs: np.ndarray, fmt, mode: int, kernel_of, key=0, offset=0, rand_bits=64) -> np.ndarray:
    """`sweeps.run_kernel` with saturation, the fixed-point default."""
    return run_kernel(xs, fmt, mode, kernel_of, "saturate", key, offset, rand_bits)


def _bit_kernel_of(source_bits, target_bits, params, mode, fast_params):
    return table.bit_level_kernel(source_bits, target_bits, params, mode)


def _bit_kernel(xs: np.ndarray, fmt, mode: str) -> np.ndarray:
    """`xs` rounded by the bit-level kernel, without the scaled kernels."""
    return _run_kernel(xs, fmt, SCALED_MODES[mode], _bit_kernel_of)


def _uses_scaled(fmt, dtype) -> bool:
    params = kernel_params(fmt, np.dtype(np.result_type(dtype, fmt.carrier)), "saturate")
    return bool(table.scaled(params))


@pytest.mark.slow
@pytest.mark.parametrize("mode", SCALED_MODES)
@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_scaled_kernel_matches_bit_kernel(fmt, mode):
    with np.errstate(invalid="ignore"):  # casting signalling NaNs
        sweeps = (float32_sweep(), float16_sweep().astype(np.float32), float32_sweep().astype(np.float64))
    for xs in sweeps:
        if not _uses_scaled(fmt, xs.dtype):
            continue
        got = rp.round(xs, fmt, mode)
        want = _bit_kernel(xs, fmt, mode)
        assert got.dtype == want.dtype
        bits = np.int64 if got.dtype == np.float64 else np.int32
        bad = np.flatnonzero(got.view(bits) != want.view(bits))
        assert bad.size == 0, (f"{fmt!r} {mode} on {xs.dtype}: {bad.size} differ, e.g. "
                               f"x={xs[bad[:4]]!r} scaled={got[bad[:4]]!r} bit kernel={want[bad[:4]]!r}")


def test_the_formats_cover_every_carrier_path():
    """The sweep above reaches the scaled kernel for each signature (float32,
    float64, and float32 into float64) and leaves out what it must not take."""
    assert _uses_scaled(rp.FixedFormat(8, 8), np.float32)           # float32 -> float32
    assert _uses_scaled(rp.FixedFormat(16, 16), np.float32)         # float32 -> float64
    assert _uses_scaled(rp.FixedFormat(10, 40), np.float64)         # float64 -> float64
    assert _uses_scaled(rp.FixedFormat(-100, 110), np.float32)      # x * 2**110 may overflow: clamped
    assert not _uses_scaled(rp.FixedFormat(30, -10), np.float64)    # frac_bits < 0: x * 2**-10 may underflow
    params = kernel_params(rp.FixedFormat(8, 8), np.dtype(np.float32), "wrap")
    assert not table.scaled(params)
    params = kernel_params(rp.FloatFormat(4, 3), np.dtype(np.float32), "saturate")
    assert not table.scaled(params)


def test_other_modes_take_the_bit_kernel():
    params = kernel_params(rp.FixedFormat(8, 8), np.dtype(np.float32), "saturate")
    for mode in (layout.NEAREST_AWAY, layout.ODD, layout.STOCHASTIC_EQUAL):
        kernel = table.kernel_for(np.int32, np.int32, params, mode)
        assert kernel is table.bit_level_kernel(np.int32, np.int32, params, mode)
    for mode in (layout.NEAREST, layout.STOCHASTIC):
        assert table.kernel_for(np.int32, np.int32, params, mode) is not \
            table.bit_level_kernel(np.int32, np.int32, params, mode)


# Stochastic rounding by scaling (``scaled_random.py``), every fixed format above and
# the ends of its eligibility: frac_bits < 0, |frac_bits| at the carrier's limit.
STOCHASTIC_FORMATS = FORMATS + [rp.FixedFormat(30, -10), rp.FixedFormat(-120, 126), rp.FixedFormat(130, -126),
                                rp.FixedFormat(-110, 126, signed=False)]
RAND_BITS = (64, 1, 7, 23, 31, 32, 33, 50, 63)


def _scaled_random(fmt, dtype) -> bool:
    result_dtype = np.dtype(np.result_type(dtype, fmt.carrier))
    params = kernel_params(fmt, result_dtype, "saturate")
    if result_dtype != dtype:
        params = widening_params(fmt, "saturate") or params
    return bool(table.scaled_random(params))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", STOCHASTIC_FORMATS, ids=repr)
def test_scaled_stochastic_matches_bit_kernel(fmt):
    """Bit for bit the bit-level kernel's results, NaN payloads included, with the
    same random numbers: every rand_bits width that changes which random bits
    count, on float32 and float16-valued sweeps (into float64 where the format's
    carrier is), as they come and sorted by magnitude."""
    with np.errstate(invalid="ignore"):  # casting signalling NaNs
        sweeps = [float32_sweep(), float16_sweep().astype(np.float32)]
    # also in order of magnitude: the fast loop then sees whole blocks of its range
    # (a block mostly outside it goes to the general loop, and so do the next few)
    sweeps += [xs[np.argsort(np.abs(xs), kind="stable")] for xs in sweeps]
    checked = 0
    for xs in sweeps:
        if not _scaled_random(fmt, xs.dtype):
            continue
        for step, rand_bits in enumerate(RAND_BITS):
            key, offset = 0x9E3779B97F4A7C15 * (step + 1) % 2**64, 1000 * step
            got = _run_kernel(xs, fmt, layout.STOCHASTIC, table.kernel_for, key, offset, rand_bits)
            want = _run_kernel(xs, fmt, layout.STOCHASTIC, _bit_kernel_of, key, offset, rand_bits)
            bits = np.int64 if got.dtype == np.float64 else np.int32
            bad = np.flatnonzero(got.view(bits) != want.view(bits))
            assert bad.size == 0, (f"{fmt!r} rand_bits={rand_bits} on {xs.dtype}: {bad.size} differ, e.g. "
                                   f"x={xs[bad[:4]]!r} scaled={got[bad[:4]]!r} bit kernel={want[bad[:4]]!r}")
            checked += 1
    assert checked >= len(RAND_BITS)  # every format here takes the scaled loop for some input


def test_scaled_stochastic_eligibility():
    """The formats above reach the scaled loop from float32 data, into float32 and
    float64; wrap-around, floating-point formats, scales beyond the carrier's
    normal numbers and float64 data do not."""
    assert _scaled_random(rp.FixedFormat(8, 8), np.float32)            # float32 -> float32
    assert _scaled_random(rp.FixedFormat(16, 16), np.float32)          # float32 -> float64
    assert _scaled_random(rp.FixedFormat(-120, 126), np.float32)       # 2**126 and 2**-126: normal
    assert not _scaled_random(rp.FixedFormat(-122, 127), np.float32)   # 2**-127 is subnormal
    params = kernel_params(rp.FixedFormat(16, 16), np.dtype(np.float64), "saturate")
    assert not table.scaled_random(params)  # float64 data keep the bit-level kernel
    assert table.kernel_for(np.int64, np.int64, params, layout.STOCHASTIC) is \
        table.bit_level_kernel(np.int64, np.int64, params, layout.STOCHASTIC)
    params = kernel_params(rp.FixedFormat(8, 8), np.dtype(np.float32), "wrap")
    assert not table.scaled_random(params)
    assert table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC) is \
        table.bit_level_kernel(np.int32, np.int32, params, layout.STOCHASTIC)
    params = kernel_params(rp.FloatFormat(4, 3), np.dtype(np.float32), "saturate")
    assert not table.scaled_random(params)  # floating point: the split kernel (below)
    assert table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC) is \
        table.entry_point_of(loops.round_stochastic_split, np.int32, np.int32)


def _small_fixed_formats():
    for word in range(1, 7):
        for int_bits in (0, 1, word // 2, word):
            for signed in (True, False):
                yield rp.FixedFormat(int_bits, word - int_bits, signed=signed)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scaled_kernel_matches_oracle_on_small_formats(dtype):
    """Every value of every small format, the points between them (ties and
    quarters), beyond the range, and the special values, against the exact oracle."""
    checked = 0
    for fmt in _small_fixed_formats():
        assert _uses_scaled(fmt, dtype)
        kmin, kmax = fixed_range(fmt)
        ks = np.arange(kmin - 5, kmax + 6, dtype=np.float64)
        xs = np.concatenate([ks, ks + 0.5, ks + 0.25, ks + 0.75, -ks - 0.5]) * 2.0**-fmt.frac_bits
        xs = np.concatenate([xs, [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 1e-30, -1e-30]])
        xs = xs.astype(dtype)
        for mode in SCALED_MODES:
            got = rp.round(xs, fmt, mode)
            for x, value in zip(xs, got):
                want = round_reference(float(x), fmt, mode, None)
                same = (np.isnan(want) and np.isnan(value)) or (
                    want == value and np.signbit(want) == np.signbit(value))
                assert same, f"{fmt!r} {mode} x={x!r}: expected {want!r}, got {value!r}"
                checked += 1
    assert checked > 10_000


@pytest.mark.parametrize("fmt, dtype", [(rp.FixedFormat(8, 8), np.float32),
                                        (rp.FixedFormat(16, 16), np.float32),
                                        (rp.FixedFormat(16, 16), np.float64)])
def test_scaled_kernel_on_every_memory_path(fmt, dtype, small_ranges):
    """In place, strided, byte-swapped, float16 and threaded inputs reach the
    scaled kernel through rpfloat.rounding's buffers and ranges; each must give
    what a plain contiguous call gives."""
    size = 2 * small_ranges.PARALLEL_THRESHOLD + 12_345  # above the threshold: 2 threads where numba has them
    xs = (np.random.default_rng(7).standard_normal(size) * 300).astype(dtype)
    for mode in SCALED_MODES:
        want = rp.round(xs, fmt, mode)
        assert np.array_equal(rp.round(xs[::-1].copy()[::-1], fmt, mode), want)
        assert np.array_equal(rp.round(xs.astype(xs.dtype.newbyteorder()), fmt, mode), want)
        strided = np.empty(2 * size, dtype)
        strided[::2] = xs
        assert np.array_equal(rp.round(strided[::2], fmt, mode), want)
        if want.dtype == dtype:
            inplace = xs.copy()
            assert rp.round(inplace, fmt, mode, out=inplace) is inplace
            assert np.array_equal(inplace, want)
        halves = xs[:1000].astype(np.float16)
        assert np.array_equal(rp.round(halves, fmt, mode), rp.round(halves.astype(np.float32), fmt, mode).astype(
            np.result_type(np.float16, fmt.carrier)))


# (-100, 140): a float64 carrier, into which float32 data are cast before the kernel
_ENVIRONMENT_FORMATS = [rp.FixedFormat(8, 8), rp.FixedFormat(16, 16), rp.FixedFormat(8, 0),
                        rp.FixedFormat(-102, 126), rp.FixedFormat(-100, 140)]


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets MXCSR through glibc's x86-64 fenv_t")
@pytest.mark.parametrize("bits", [DENORMALS_ARE_ZERO, FLUSH_TO_ZERO, DENORMALS_ARE_ZERO | FLUSH_TO_ZERO])
def test_results_do_not_depend_on_flushing_subnormals(bits):
    """Some libraries turn on denormals-are-zero / flush-to-zero for the whole
    process: subnormal inputs must still round up and down exactly (the scaled
    kernel is then not used, and the widening kernel's general path widens
    float32 subnormals with integers)."""
    xs = float32_sweep()
    subnormal = np.array([2.0**-149, -2.0**-149, 2.0**-130, 2.0**-127, -2.0**-127], np.float32)
    for fmt in _ENVIRONMENT_FORMATS:
        for mode in (*SCALED_MODES, "stochastic"):
            want = rp.round(xs, fmt, mode, rng=5)
            with mxcsr_with(bits):
                assert not environment.environment() & environment.KEEPS_SUBNORMALS
                got = rp.round(xs, fmt, mode, rng=5)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (fmt, mode)
        default_up = rp.round(subnormal, fmt, "up")
        with mxcsr_with(bits):
            up = rp.round(subnormal, fmt, "up")
        if fmt.frac_bits <= 126:  # a step above every subnormal: each positive one rounds up to it
            assert np.array_equal(up, np.where(subnormal > 0, 2.0**-fmt.frac_bits, 0.0).astype(up.dtype))
        assert np.array_equal(up, default_up)
    assert environment.environment() == environment.KEEPS_SUBNORMALS | environment.ROUNDS_TO_NEAREST


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets the rounding direction through glibc")
@pytest.mark.parametrize("direction", [FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO])
def test_results_do_not_depend_on_the_rounding_direction(direction):
    """Ties to even and the sign of zero stay right whatever fesetround says."""
    xs = float32_sweep()
    for fmt in _ENVIRONMENT_FORMATS:
        for mode in (*SCALED_MODES, "stochastic"):
            want = rp.round(xs, fmt, mode, rng=5)
            with rounding_direction(direction):
                got = rp.round(xs, fmt, mode, rng=5)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (fmt, mode)
    ties = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -0.25, -0.0], np.float32)
    with rounding_direction(direction):
        got = rp.round(ties, rp.FixedFormat(8, 0), "nearest")
    assert np.array_equal(got, [0.0, 2.0, 2.0, 0.0, -2.0, 0.0, 0.0])
    assert not np.signbit(got[got == 0]).any()


# Stochastic rounding onto floating-point formats in two parts
# (``scaled_random.split_stochastic``): one bit count from min_normal up, scaling
# onto the fixed spacing below it (with subnormals: the smallest one; without:
# min_normal, between 0 and min_normal). The ends: 22 significand bits, a
# smallest spacing of exactly 2**-126, and a largest value near float32's.
SPLIT_FORMATS = [
    rp.format("e4m3"), rp.format("e5m2"), rp.format("float16"), rp.format("float6_e3m2fn"),
    rp.format("float6_e2m3fn"), rp.format("float4_e2m1fn"), rp.format("float8_e3m4"), rp.FloatFormat(6, 9),
    rp.FloatFormat(5, 22), rp.FloatFormat(7, 3, bias=124), rp.FloatFormat(7, 20, bias=2),
    rp.FloatFormat(6, 9, subnormals=False), rp.FloatFormat(4, 3, subnormals=False),
    rp.FloatFormat(2, 1, subnormals=False), rp.FloatFormat(3, 2, subnormals=False, inf=False),
    rp.FloatFormat(7, 3, bias=124, subnormals=False), rp.FloatFormat(2, 1, bias=-125, subnormals=False, inf=False),
]


def _split_params(fmt):
    return kernel_params(fmt, np.dtype(np.float32), "inf" if fmt.has_inf else "saturate")


def test_split_eligibility():
    for fmt in SPLIT_FORMATS:
        assert table.stochastic_split(_split_params(fmt)) == 1, fmt
        assert table.stochastic_split(kernel_params(fmt, np.dtype(np.float64), "saturate")) == 0, fmt
    for fmt in (rp.format("bfloat16"), rp.format("float8_e4m3fnuz"), rp.FloatFormat(7, 3, bias=125),
                rp.FixedFormat(8, 8)):
        assert table.stochastic_split(_split_params(fmt)) == 0, fmt


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SPLIT_FORMATS, ids=repr)
def test_split_stochastic_matches_bit_kernel(fmt):
    """Every element draws the bits the bit-level kernel draws for it, for every
    rand_bits, key and offset (a counter crossing 2**32 too)."""
    params = _split_params(fmt)
    split = table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC)
    from_zero = table.split_from_zero(params)
    assert split is table.entry_point_of(
        loops.round_stochastic_split_from_zero if from_zero else loops.round_stochastic_split, np.int32, np.int32)
    bit_kernel = table.bit_level_kernel(np.int32, np.int32, params, layout.STOCHASTIC)
    assert_same_stochastic(split, bit_kernel, params, layout.STOCHASTIC, repr(fmt))


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets MXCSR through glibc's x86-64 fenv_t")
def test_split_stochastic_gives_way_under_flushing():
    params = _split_params(rp.format("e4m3"))
    xs = float32_sweep()
    want = rp.round(xs, "e4m3", "stochastic", rng=4, overflow="saturate")
    with mxcsr_with(DENORMALS_ARE_ZERO | FLUSH_TO_ZERO):
        kernel = table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC)
        got = rp.round(xs, "e4m3", "stochastic", rng=4, overflow="saturate")
    assert kernel is table.bit_level_kernel(np.int32, np.int32, params, layout.STOCHASTIC)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_split_from_zero_takes_the_coarse_formats():
    """Spacings below min_normal from 2**-8 to 1 take the split kernel from 0 up."""
    for name, from_zero in (("float4_e2m1fn", True), ("float6_e3m2fn", True), ("float6_e2m3fn", True),
                            ("float8_e3m4", True), ("e4m3", False), ("e5m2", False), ("float16", False)):
        assert table.split_from_zero(_split_params(rp.format(name))) == from_zero, name
    assert table.split_from_zero(_split_params(rp.FloatFormat(2, 1, subnormals=False)))       # spacing 1
    assert not table.split_from_zero(_split_params(rp.FloatFormat(2, 1, bias=0, subnormals=False)))  # 2


@pytest.mark.parametrize("name, rand_bits", [("float4_e2m1fn", 64), ("float6_e3m2fn", 64), ("float6_e3m2fn", 32),
                                             ("float6_e3m2fn", 31)])
def test_split_from_zero_gives_undecided_steps_to_the_general_loop(name, rand_bits):
    """Below one spacing * 2**-8 the high random word can tie with the fraction
    (``D >> 1 == X``), and only the low word decides. Plant such magnitudes where
    the stream's numbers tie, amid ordinary values, and compare with the
    bit-level kernel: the block must have gone to the general loop (from 32
    random bits up: with 31 or fewer the high word decides, and a tie steps
    down, as the loop has it)."""
    fmt = rp.format(name)
    params = _split_params(fmt)
    assert table.split_from_zero(params)
    quantum = fmt.smallest_subnormal
    key, n = 0x5DEECE66D, 1 << 17
    highs = np.array([int(random_bits(np.uint64(key), i)) >> 33 for i in range(n)], np.int64)
    ties = 2**31 - 1 - highs  # X with H + X == 2**31 - 1
    planted = np.flatnonzero(ties < 2**21)  # a = (X + 0.75) * 2**-31 fits float32's 24 bits
    assert planted.size > 50
    xs = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    tiny = (ties[planted] + 0.75) * 2.0**-31 * quantum
    xs[planted] = np.where(planted % 2 == 0, tiny, -tiny).astype(np.float32)
    assert np.array_equal(xs[planted].astype(np.float64), np.where(planted % 2 == 0, tiny, -tiny))  # exact
    kernel = table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC)
    assert kernel is table.entry_point_of(loops.round_stochastic_split_from_zero, np.int32, np.int32)
    got = _run_kernel(xs, fmt, layout.STOCHASTIC, table.kernel_for, key, rand_bits=rand_bits)
    want = _run_kernel(xs, fmt, layout.STOCHASTIC, _bit_kernel_of, key, rand_bits=rand_bits)
    if rand_bits > 31:
        assert np.count_nonzero(want[planted]) > 10  # the low word stepped some of them up
    else:
        assert np.count_nonzero(want[planted]) == 0
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
