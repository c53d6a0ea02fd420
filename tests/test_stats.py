"""``rp.round(..., stats=True)`` and ``rpfloat.stats`` (docs/cli.md): every field
against a plain NumPy recomputation from the definitions, on random data and on
edge inputs (NaN, ±inf, overflow, subnormal results, zeros), for float, fixed-point
and scaled formats in several modes; hand-counted small cases pin the definitions."""
import math

import numpy as np
import pytest

import rpfloat as rp
from rpfloat import stats as stats_module
from rpfloat.rounding import round_chunk
from rpfloat.stats import RoundingStats, packed_nbytes, rounding_stats

EDGES = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 1e-3, -1e-3, 3e-3, 2.0**-8, 2.0**-10, 1e-9,
         -1e-30, 5e-324, 447.0, 449.0, 464.0, 470.0, -500.0, 1e6, -1e30, 1e300, 127.998, 128.0, -128.5, 70000.0,
         1 / 3, -np.pi]

# (format, modes): every kind of range limit and NaN/inf encoding
CASES = [
    ("e4m3", ("nearest", "toward_zero", "up", "stochastic")),  # overflow to NaN, no inf
    ("e5m2", ("nearest", "down")),                             # IEEE-style: inf
    ("bfloat16", ("nearest", "stochastic")),
    ("float16", ("nearest",)),
    ("float8_e4m3fnuz", ("nearest", "odd")),                   # no -0, NaN at its code
    ("e2m1", ("nearest", "stochastic")),                       # no NaN, no inf: saturates
    (rp.FloatFormat(5, 3, subnormals=False), ("nearest", "up")),
    (rp.FloatFormat(None, 4), ("nearest",)),                   # unbounded exponent
    ("q8.8", ("nearest", "stochastic")),
    (rp.FixedFormat(8, 8, overflow="wrap"), ("nearest",)),
    ("uq4.4", ("nearest", "down")),                            # unsigned: negatives overflow
    ("mxfp8_e4m3", ("nearest", "stochastic")),
    ("nvfp4", ("nearest",)),
    ("mxint8", ("toward_zero",)),
]
CASE_IDS = [str(fmt) for fmt, _ in CASES]


def reference_limits(fmt):
    """``(low, high, min_normal)`` from the definitions in RoundingStats' docstring."""
    if isinstance(fmt, rp.ScaledFormat):
        largest_scale = 2.0**127 if fmt.scale_format == "e8m0" else fmt.scale_format.max
        return fmt.element.min * largest_scale, fmt.element.max * largest_scale, 0.0
    if isinstance(fmt, rp.FixedFormat):
        return fmt.min, fmt.max, 0.0
    return None


def reference_stats(x, rounded, fmt):
    """The statistics recomputed with whole-array NumPy operations."""
    fmt = rp.format(fmt)
    x = np.asarray(x)
    rounded = np.asarray(rounded)
    bytes_before = x.nbytes
    if x.dtype.kind == "c":
        x = np.stack([x.real, x.imag], axis=-1)
        rounded = np.stack([rounded.real, rounded.imag], axis=-1)
    values = x.astype(np.float64).ravel()
    results = rounded.astype(np.float64).ravel()
    limits = reference_limits(fmt)
    if limits is None and fmt.exp_bits is None:
        info = np.finfo(rounded.dtype)
        limits = -float(info.max), float(info.max), float(info.smallest_normal)
    elif limits is None:
        limits = -fmt.max, fmt.max, fmt.min_normal
    low, high, min_normal = limits
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        finite = np.isfinite(values)
        nonzero = finite & (values != 0)
        covered = finite & np.isfinite(results)
        abs_errors = np.abs(results[covered] - values[covered])
        rel_covered = values[covered] != 0
        rel_errors = abs_errors[rel_covered] / np.abs(values[covered][rel_covered])
        return dict(
            count=values.size,
            inexact=int(np.sum(~np.isnan(values) & (results != values))),
            overflowed=int(np.sum(finite & ((values > high) | (values < low)))),
            underflowed=int(np.sum(nonzero & (np.abs(results) > 0) & (np.abs(results) < min_normal))),
            flushed_to_zero=int(np.sum(nonzero & (results == 0))),
            nan_produced=int(np.sum(~np.isnan(values) & np.isnan(results))),
            error_count=int(covered.sum()),
            rel_error_count=int(rel_covered.sum()),
            max_abs_error=float(abs_errors.max()) if abs_errors.size else 0.0,
            mean_abs_error=float(abs_errors.mean()) if abs_errors.size else 0.0,
            max_rel_error=float(rel_errors.max()) if rel_errors.size else 0.0,
            mean_rel_error=float(rel_errors.mean()) if rel_errors.size else 0.0,
            bytes_before=bytes_before,
        )


def assert_matches_reference(stats, expected):
    for field, value in expected.items():
        got = getattr(stats, field)
        if field.startswith("mean"):
            assert got == pytest.approx(value, rel=1e-12, abs=0), field
        else:
            assert got == value, field


def edge_data(dtype):
    with np.errstate(over="ignore"):  # 1e300 is inf in float32
        return np.array(EDGES, dtype=dtype)


def random_data(dtype, size=3000, seed=0):
    """Normal numbers over many binades, with zeros and a few specials mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size) * np.exp2(rng.integers(-30, 30, size))
    x[rng.integers(0, size, size // 20)] = 0.0
    x[rng.integers(0, size, 5)] = np.nan
    x[rng.integers(0, size, 5)] = np.inf
    x[rng.integers(0, size, 5)] = -np.inf
    with np.errstate(over="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("fmt, modes", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stats_match_numpy_on_random_and_edge_inputs(fmt, modes, dtype):
    for x in (random_data(dtype), edge_data(dtype)):
        if isinstance(rp.format(fmt), rp.ScaledFormat):
            x = x[: x.size // 16 * 16].reshape(-1, 16)
        for mode in modes:
            plain = rp.round(x, fmt, mode, rng=7)
            rounded, stats = rp.round(x, fmt, mode, rng=7, stats=True)
            assert isinstance(stats, RoundingStats)
            np.testing.assert_array_equal(rounded.view(np.uint8), plain.view(np.uint8))
            assert_matches_reference(stats, reference_stats(x, rounded, fmt))


def test_hand_counted_float_case():
    # e4m3: max 448, top spacing 32, min normal 2**-6, smallest subnormal 2**-9;
    # default overflow NaN, from the first value that would round beyond 448
    x = np.array([448.0, 449.0, 463.9, 464.0, -1e6, np.inf, np.nan, 2.0**-8, 2.0**-12, 0.0, -0.0, 1.0, 0.1])
    rounded, stats = rp.round(x, "e4m3", stats=True)
    np.testing.assert_array_equal(rounded[:4], 448.0)  # 464, the midpoint to 480, still rounds to 448
    assert stats.count == 13
    assert stats.overflowed == 4              # 449, 463.9, 464, -1e6 (inf is not finite)
    assert stats.nan_produced == 2            # -1e6, inf
    assert stats.underflowed == 1             # 2**-8: a subnormal of e4m3
    assert stats.flushed_to_zero == 1         # 2**-12 < half the smallest subnormal
    assert stats.inexact == 7                 # 449, 463.9, 464, -1e6, inf, 2**-12, 0.1
    assert stats.error_count == 10            # not NaN, -1e6 and inf (NaN results)
    assert stats.rel_error_count == 8         # nor the zeros
    assert stats.max_abs_error == 16.0        # 464 -> 448
    assert stats.max_rel_error == 1.0         # 2**-12 -> 0
    assert stats.mean_abs_error == pytest.approx((1 + 15.9 + 16 + 2.0**-12 + (0.1015625 - 0.1)) / 10)
    assert (stats.bytes_before, stats.bytes_after) == (13 * 8, 13)


def test_saturation_and_inf_policies_count_the_same_overflows():
    x = np.array([500.0, -500.0, 448.0, 1.0], np.float32)
    for overflow in ("saturate", "nan"):
        stats = rp.round(x, "e4m3", overflow=overflow, stats=True)[1]
        assert stats.overflowed == 2
        assert stats.nan_produced == (2 if overflow == "nan" else 0)
    stats = rp.round(x, "e5m2", "toward_zero", stats=True)[1]
    assert (stats.overflowed, stats.nan_produced) == (0, 0)  # 500 is in e5m2's range
    stats = rp.round(np.array([1e5, -np.inf]), "e5m2", stats=True)[1]
    assert (stats.overflowed, stats.nan_produced, stats.error_count) == (1, 0, 0)  # 1e5 -> inf


def test_fixed_point_counts():
    x = np.array([-0.5, -0.01, 0.01, 0.03, 15.9, 16.0, 100.0])
    stats = rp.round(x, "uq4.4", stats=True)[1]  # [0, 15.9375] in steps of 1/16
    assert stats.overflowed == 4      # -0.5, -0.01, 16, 100
    assert stats.flushed_to_zero == 4  # -0.5 and -0.01 saturate at 0; 0.01, 0.03 < 1/32 round to 0
    assert stats.underflowed == 0      # fixed point has no subnormals
    wrapped = rp.round(np.array([128.0, -129.0, 3.0]), "q8.8", overflow="wrap", stats=True)[1]
    assert wrapped.overflowed == 2 and wrapped.max_abs_error == 256.0


def test_scaled_counts_and_packed_size():
    fmt = rp.format("mxfp4")
    x = np.linspace(-3, 3, 96, dtype=np.float32).reshape(3, 32)
    x[0, 0] = np.nan  # its block becomes NaN
    x[1, :] = 0.0
    x[2, 5] = 1e-3    # far below its block's largest element: flushed
    rounded, stats = rp.round(x, fmt, stats=True)
    assert stats.nan_produced == 31 and stats.error_count == 64
    assert stats.flushed_to_zero >= 1 and stats.underflowed == 0 and stats.overflowed == 0
    assert stats.bytes_after == rp.pack(rp.encode(np.nan_to_num(x), fmt), fmt).nbytes == 48 + 3
    big = rp.round(np.array([1e300, 1.0]), "mxfp8_e4m3", stats=True)[1]
    assert big.overflowed == 1  # beyond 448 * 2**127


@pytest.mark.parametrize("fmt", ["e2m1", "e3m2", "bfloat16", "q8.8", "uq4.4", rp.FixedFormat(3, 2), "mxfp6_e2m3",
                                 "nvfp4"])
@pytest.mark.parametrize("shape", [(5,), (3, 33), (2, 3, 40), ()])
def test_bytes_after_is_the_packed_size(fmt, shape):
    x = np.random.default_rng(1).standard_normal(shape)
    stats = rp.round(x, fmt, stats=True)[1]
    assert stats.bytes_before == x.nbytes
    assert stats.bytes_after == rp.pack(rp.encode(x, fmt), fmt).nbytes
    assert stats.bytes_after == packed_nbytes(fmt, shape)


def test_unbounded_exponent_formats_keep_their_result_bytes():
    x = np.ones(10, np.float32)
    assert rp.round(x, rp.FloatFormat(None, 7), stats=True)[1].bytes_after == 40


def test_unbounded_exponent_formats_take_the_result_dtypes_normals():
    """exp_bits=None on float16 data: the result is float16, so results below
    float16's smallest normal (2**-14) underflowed (float32's was taken)."""
    x = np.array([1e-5, 3e-6, 6e-5, 1.0], np.float16)
    rounded, stats = rp.round(x, rp.FloatFormat(None, 5), stats=True)
    assert rounded.dtype == np.float16
    assert stats.underflowed == 3
    assert rounding_stats(x, rounded, rp.FloatFormat(None, 5)).underflowed == 3


def test_ml_dtypes_data_count_their_own_bytes():
    """bytes_before is x.nbytes, not that of the float32 copy rounded; and
    rounding_stats takes ml_dtypes arrays, as rp.round does."""
    import ml_dtypes
    x = np.array([0.1, 1.0, 3.0], ml_dtypes.bfloat16)
    assert rp.round(x, "e4m3", stats=True)[1].bytes_before == x.nbytes == 6
    values = np.array([0.1, 1.0, 1000.0], np.float32)
    theirs = rounding_stats(values, values.astype(ml_dtypes.float8_e4m3fn), "e4m3")
    assert theirs == rounding_stats(values, values.astype(ml_dtypes.float8_e4m3fn).astype(np.float32), "e4m3")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_from_elsewhere_with_nonzero_results_of_zeros(dtype):
    """rounding_stats of another rounding's results, where a zero x became
    nonzero, subnormal, NaN or inf (rp.round never does that, and the kernel's
    fast loops took it for granted: negative flush counts, zeros counted as
    underflows, NaN errors in the means): the definitions hold."""
    x = np.ones(2048, dtype)
    x[[0, 1, 2, 1500]] = [0.0, -0.0, 0.0, -0.0]
    rounded = x.copy()
    rounded[[0, 1, 2, 1500]] = [1e-40, np.nan, np.inf, 0.5]
    stats = rounding_stats(x, rounded, "float32")
    assert (stats.underflowed, stats.flushed_to_zero, stats.nan_produced) == (0, 0, 1)
    assert (stats.error_count, stats.rel_error_count) == (2046, 2044)
    assert stats.inexact == 4 and stats.max_abs_error == 0.5 and stats.max_rel_error == 0.0
    assert stats.mean_abs_error == pytest.approx((1e-40 if dtype == np.float64 else float(np.float32(1e-40)))
                                                 / 2046 + 0.5 / 2046, rel=1e-12)


def test_means_of_errors_near_float64s_max_are_finite():
    """Errors near float64's max whose float64 sum overflows: their mean is
    finite (it is at most the largest error), also when chunks combine."""
    x = np.full(2, 1e308)
    stats = rp.round(x, "e4m3", "toward_zero", stats=True)[1]
    assert stats.max_abs_error == 1e308 - 448
    assert stats.mean_abs_error == pytest.approx(1e308, rel=1e-12)
    assert RoundingStats.combined([stats, stats]).mean_abs_error == pytest.approx(1e308, rel=1e-12)
    tiny = rp.round(np.full(10, 1e-310), "e4m3", "up", stats=True)[1]  # relative errors of 2e307, ten of them
    assert math.isfinite(tiny.max_rel_error)
    assert tiny.mean_rel_error == pytest.approx(tiny.max_rel_error, rel=1e-12)


def test_one_scale_per_array_counts_its_scale_for_empty_arrays():
    fmt = rp.ScaledFormat("float8_e4m3fn", None)
    x = np.zeros((0, 5))
    assert rp.round(x, fmt, stats=True)[1].bytes_after == rp.pack(rp.encode(x, fmt), fmt).nbytes == 1


def test_complex_numbers_count_twice():
    x = np.array([1 + 0.1j, np.inf - 1e6j, 0.3 + np.nan * 1j], np.complex64)
    rounded, stats = rp.round(x, "e4m3", stats=True)
    assert stats.count == 6
    assert_matches_reference(stats, reference_stats(x, rounded, "e4m3"))
    assert stats.bytes_after == 6


def test_other_input_dtypes():
    for x in (np.arange(-300, 300, 7), np.array([True, False]), np.linspace(-2, 2, 50).astype(np.float16),
              np.linspace(-2, 2, 50).astype(">f8"), [1, 2**70, 3]):
        rounded, stats = rp.round(x, "e4m3", "toward_zero", stats=True)
        np.testing.assert_array_equal(rounded, rp.round(x, "e4m3", "toward_zero"))
        assert_matches_reference(stats, reference_stats(np.asarray(x, dtype=rounded.dtype) if isinstance(x, list)
                                                        else x, rounded, "e4m3"))


def test_scalars_empty_arrays_and_out():
    rounded, stats = rp.round(0.1, "bfloat16", stats=True)
    assert isinstance(rounded, np.float64) and stats.count == 1 and stats.inexact == 1
    rounded, stats = rp.round(np.zeros((0, 3), np.float32), "e4m3", stats=True)
    assert rounded.shape == (0, 3) and stats == RoundingStats(0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0)
    x = np.array([0.1, 0.2, 1000.0])
    out = np.empty(3)
    rounded, stats = rp.round(x, "e4m3", out=out, stats=True)
    assert rounded is out and stats.inexact == 3


def test_rounding_in_place_compares_with_the_input():
    x = np.array([0.1, 0.2, 0.3, 5.0])
    expected = rp.round(x, "e2m1", stats=True)[1]
    rounded, stats = rp.round(x, "e2m1", out=x, stats=True)
    assert rounded is x and x[0] == 0.0
    assert stats == expected and stats.inexact == 4


def test_stats_argument_is_checked():
    x = np.ones(3)
    assert isinstance(rp.round(x, "e4m3", stats=np.True_), tuple)
    assert isinstance(rp.round(x, "e4m3", stats=np.False_), np.ndarray)
    for bad in (1, None, "yes"):
        with pytest.raises(TypeError, match="stats"):
            rp.round(x, "e4m3", stats=bad)
    with pytest.raises(ValueError, match="shape"):
        rounding_stats(np.ones(3), np.ones(4), "e4m3")
    with pytest.raises(TypeError, match="rounded"):
        rounding_stats(np.ones(1), np.array(["a"]), "e4m3")


def test_chunks_combine_to_the_whole():
    x = random_data(np.float32, size=10_000, seed=3)
    rounded, whole = rp.round(x, "e4m3", "stochastic", rng=11, stats=True)
    parts = []
    for start in range(0, x.size, 1234):
        chunk_rounded, part = round_chunk(x[start:start + 1234], "e4m3", "stochastic", offset=start, rng=11,
                                          stats=True)
        np.testing.assert_array_equal(chunk_rounded.view(np.uint32), rounded[start:start + 1234].view(np.uint32))
        parts.append(part)
    combined = RoundingStats.combined(parts)
    for field in ("count", "inexact", "overflowed", "underflowed", "flushed_to_zero", "nan_produced", "error_count",
                  "rel_error_count", "max_abs_error", "max_rel_error", "bytes_before", "bytes_after"):
        assert getattr(combined, field) == getattr(whole, field), field
    assert combined.mean_abs_error == pytest.approx(whole.mean_abs_error, rel=1e-12)
    assert combined.mean_rel_error == pytest.approx(whole.mean_rel_error, rel=1e-12)
    with pytest.raises(ValueError, match="parts"):
        RoundingStats.combined([])
    with pytest.raises(TypeError, match="parts"):
        RoundingStats.combined([whole, 3])


def test_threads_give_the_same_statistics(monkeypatch):
    x = random_data(np.float64, size=50_000, seed=4)
    rounded, one_thread = rp.round(x, "bfloat16", stats=True)
    monkeypatch.setattr(stats_module, "PARALLEL_THRESHOLD", 1000)
    threaded = rounding_stats(x, rounded, "bfloat16")
    assert threaded.count == one_thread.count and threaded.inexact == one_thread.inexact
    assert threaded.max_rel_error == one_thread.max_rel_error
    assert threaded.mean_abs_error == pytest.approx(one_thread.mean_abs_error, rel=1e-12)
    assert_matches_reference(threaded, reference_stats(x, rounded, "bfloat16"))


def test_summary_lists_every_count():
    stats = rp.round(np.array([0.1, 1000.0, 1e-9, np.inf]), "e4m3", stats=True)[1]
    text = stats.summary()
    for line in ("numbers          4", "overflowed       1 (25%)", "NaN produced     2 (50%)",
                 "flushed to zero  1 (25%)", "bytes after      4 (8x smaller, as packed codes)"):
        assert line in text
    assert math.isclose(float(text.splitlines()[6].split()[-1]), stats.max_abs_error, rel_tol=1e-5)


def test_narrow_blocks_keep_a_largest_quotient_their_float32_quotient_undershoots():
    """Block 1 sets max_rel = q1; block 2's exact quotient q2 is above q1, but
    its float32 quotient (the narrow loop's) lies below q1: only the margin
    QUOTIENT_MARGIN sends block 2 to the exact recheck."""
    x1, r1 = 1.5717709064483643, 1.5718801021575928
    x2, r2 = 1.6455549001693726, 1.6456692218780518
    x = np.ones(2048, np.float32)
    rounded = x.copy()
    x[0], rounded[0] = x1, r1
    x[1024], rounded[1024] = x2, r2
    q1 = abs(np.float64(np.float32(r1)) - np.float64(np.float32(x1))) / np.float64(np.float32(x1))
    q2 = abs(np.float64(np.float32(r2)) - np.float64(np.float32(x2))) / np.float64(np.float32(x2))
    assert q2 > q1
    assert np.float32(np.float32(r2) - np.float32(x2)) * (np.float32(1) / np.float32(x2)) < q1  # the premise
    stats = rounding_stats(x, rounded, "bfloat16")
    assert stats.max_rel_error == q2
    # and with the blocks the other way round
    swapped = rounding_stats(np.roll(x, 1024), np.roll(rounded, 1024), "bfloat16")
    assert swapped.max_rel_error == q2


def test_scaled_overflow_limit_is_element_max_times_the_largest_e8m0_scale():
    """mxfp8_e4m3 reaches 448 * 2**127 (e8m0's largest scale, 2**127)."""
    fmt = rp.format("mxfp8_e4m3")
    x = np.array([2.0**135, 448.0 * 2.0**127, 2.0**136, -2.0**135, -2.0**136])
    rounded = rp.round(x, fmt)
    stats = rounding_stats(x, rounded, fmt)
    assert stats.overflowed == 2
    _, stats = rp.round(x, fmt, stats=True)
    assert stats.overflowed == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_results_from_elsewhere_that_are_not_finite_from_ordinary_inputs(dtype, bad):
    """Every x is ordinary (inside the format's range), but a result from
    elsewhere is NaN or infinite: the block must take the rules."""
    x = np.linspace(0.5, 2.0, 3000).astype(dtype)
    rounded = rp.round(x, "bfloat16")
    rounded[[7, 1500, 2999]] = bad
    stats = rounding_stats(x, rounded, "bfloat16")
    assert stats.nan_produced == (3 if np.isnan(bad) else 0)
    assert stats.error_count == stats.rel_error_count == 2997
    keep = np.ones(x.size, bool)
    keep[[7, 1500, 2999]] = False
    errors = np.abs(rounded[keep].astype(np.float64) - x[keep].astype(np.float64))
    assert stats.max_abs_error == errors.max()
    assert stats.mean_abs_error == pytest.approx(errors.mean(), rel=1e-12)
    assert stats.max_rel_error == (errors / np.abs(x[keep].astype(np.float64))).max()


@pytest.mark.parametrize("fmt", ["uq4.4", "uint8", rp.FixedFormat(1, 0),
                                 rp.ScaledFormat(rp.FixedFormat(4, 4, signed=False), block_size=32)])
def test_whole_blocks_of_zeros_in_formats_without_a_symmetric_range(fmt):
    """Unsigned formats (and a max of 0) have no magnitude in range for both
    signs; a float32 block of 1024 zeros must still count as zeros, not put
    0 / 0 into the relative errors."""
    x = np.zeros(4096, np.float32)
    x[1500], x[3000], x[3001] = 0.3, -0.2, 2.0
    rounded, stats = rp.round(x, fmt, stats=True)
    assert_matches_reference(stats, reference_stats(x, rounded, fmt))
    assert math.isfinite(stats.mean_rel_error)


@pytest.mark.parametrize("fmt", ["uq4.4", "uint8", rp.ScaledFormat(rp.FixedFormat(4, 4, signed=False), block_size=32),
                                 rp.ScaledFormat(rp.FixedFormat(4, 4, signed=False), block_size=16, scale_format="e4m3",
                                                 tensor_scale=True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unsigned_formats_count_a_negative_in_any_block(fmt, dtype):
    """Unsigned formats gather blocks of x >= 0 in the fast loops (their bounds
    say so); a block holding one negative x counts it as overflowed, and -0 is
    not one."""
    bounds = stats_module.kernel_bounds(rp.format(fmt), np.dtype(dtype), np.dtype(dtype))
    assert bounds[5] == 1 and bounds[1] > bounds[0] and bounds[4] > bounds[3]
    x = np.abs(np.random.default_rng(4).standard_normal(8 * 1024)).astype(dtype)
    x[1030], x[3000], x[5000], x[7000] = -0.25, -3.0, -0.0, -1e-30
    rounded, stats = rp.round(x, fmt, stats=True)
    assert_matches_reference(stats, reference_stats(x, rounded, fmt))
    assert x.max() < 15 and stats.overflowed == 3  # the three negatives (every format here holds 15)


@pytest.mark.parametrize("fmt, past_max", [
    ("q16.16", 32768.0),                                       # max 32767.99998 has no float32
    (rp.FixedFormat(8, 24, overflow="wrap"), 128.0),           # wraps to -128
    (rp.FloatFormat(5, 30, overflow="saturate"), 65536.0),     # max 65535.99999...
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_overflow_just_past_a_max_the_input_dtype_cannot_hold(fmt, past_max, dtype):
    """The largest in-range |x| of the input dtype is the max rounded *down*
    to it: 32768.0 (float32's nearest to q16.16's max) is past the max."""
    x = np.full(3000, 1.0, dtype)
    x[[5, 2500]] = past_max
    x[7] = -past_max * 4
    rounded, stats = rp.round(x, fmt, stats=True)
    assert stats.overflowed == 3
    assert_matches_reference(stats, reference_stats(x, rounded, fmt))


@pytest.mark.parametrize("fmt", ["float64", rp.FloatFormat(9, 7), rp.FloatFormat(11, 20)])
def test_results_of_a_narrower_dtype_than_the_formats_min_normal(fmt):
    """Results from elsewhere in float32 for a format whose smallest normal is
    below float32's subnormals: no float32 result underflows, zeros of nonzero
    x are flushed, zeros of zeros are not."""
    x = np.float32([0.0, -2e-15, 8.26e-22, 1.5, 3e-20] * 500)
    rounded = np.float32([0.0, 0.0, 1e-42, 1.5, 0.0] * 500)
    stats = rounding_stats(x, rounded, fmt)
    assert (stats.underflowed, stats.flushed_to_zero) == (0, 1000)
    assert_matches_reference(stats, reference_stats(x, rounded, fmt))
