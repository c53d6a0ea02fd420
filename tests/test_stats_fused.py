"""``rp.round(..., stats=True)`` rounds and gathers chunk by chunk (``rpfloat.stats``):
the chunked results equal one rounding of the whole (random offsets included),
the statistics equal ``rounding_stats`` of the whole bit for bit and a NumPy
recomputation, at chunk boundaries, on threads, for every input dtype; and the
kernel's ordinary blocks agree with its element-by-element blocks."""
import numba
import numpy as np
import pytest

import rpfloat as rp
from rpfloat import stats as stats_module
from rpfloat._kernels.cpu import stats as kernel_module
from rpfloat.rounding import round_chunk
from rpfloat.stats import rounding_stats
from test_stats import assert_matches_reference, random_data, reference_stats

CHUNK = 1024  # small chunks: many boundaries in small arrays
LANES = kernel_module.LANES


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(stats_module, "CHUNK", CHUNK)


def check(x, fmt, mode, **kwargs):
    """Round x with stats: the same bits as without, the statistics of
    rounding_stats bit for bit and those of NumPy's recomputation."""
    plain = rp.round(x, fmt, mode, rng=5, **kwargs)
    rounded, stats = rp.round(x, fmt, mode, rng=5, stats=True, **kwargs)
    np.testing.assert_array_equal(np.asarray(rounded).view(np.uint8), np.asarray(plain).view(np.uint8))
    assert stats == rounding_stats(x, rounded, fmt)
    assert_matches_reference(stats, reference_stats(x, rounded, fmt))
    return rounded, stats


@pytest.mark.parametrize("fmt, mode", [("bfloat16", "nearest"), ("bfloat16", "stochastic"), ("e4m3", "nearest"),
                                       ("e4m3", "stochastic"), ("e5m2", "up"), ("float16", "toward_zero"),
                                       ("q8.8", "stochastic"), ("uq4.4", "nearest"), ("e2m1", "nearest"),
                                       (rp.FloatFormat(None, 5), "nearest")])
@pytest.mark.parametrize("size", [CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + LANES + 7])
def test_chunks_round_and_count_as_the_whole(small_chunks, fmt, mode, size):
    check(random_data(np.float32, size, seed=size), fmt, mode)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ">f4", np.int16, np.complex64, np.complex128])
def test_other_dtypes_in_chunks(small_chunks, dtype):
    x = random_data(np.float64, 3 * CHUNK + 5, seed=1)
    if np.dtype(dtype).kind == "c":
        x = x + np.complex128(1j) * 0  # complex, with the specials in the real parts
        x.imag = random_data(np.float64, x.size, seed=2)
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.nan_to_num(x, nan=0.0, posinf=7.0, neginf=-7.0).astype(dtype) if np.dtype(dtype).kind == "i" \
            else x.astype(dtype)
    for fmt, mode in (("e4m3", "nearest"), ("bfloat16", "stochastic")):
        check(x, fmt, mode)


def test_strided_and_shaped_inputs(small_chunks):
    x = random_data(np.float32, 4 * 3 * CHUNK, seed=3).reshape(4, 3 * CHUNK)
    rounded, _ = check(x[:, ::3], "e5m2", "stochastic")
    assert rounded.shape == (4, CHUNK)
    check(x.T, "bfloat16", "nearest")


def test_offsets_draw_the_numbers_of_the_whole(small_chunks):
    x = random_data(np.float32, 5 * CHUNK + 11, seed=4)
    whole = rp.round(x, "e4m3", "stochastic", rng=9)
    cut = 2 * CHUNK + 3
    for start, stop in ((0, cut), (cut, x.size)):
        part, stats = round_chunk(x[start:stop], "e4m3", "stochastic", offset=start, rng=9, stats=True)
        np.testing.assert_array_equal(part.view(np.uint32), whole[start:stop].view(np.uint32))
        assert stats == rounding_stats(x[start:stop], part, "e4m3")
    part, stats = round_chunk(x[cut:], "e4m3", "stochastic", offset=np.int64(cut), rng=9, stats=True)
    np.testing.assert_array_equal(part.view(np.uint32), whole[cut:].view(np.uint32))
    for bad in (-1, 1.0):  # checked as round_chunk checks them
        with pytest.raises((TypeError, ValueError), match="offset"):
            round_chunk(x, "e4m3", "stochastic", offset=bad, rng=9, stats=True)


def test_threads_give_the_same_statistics(small_chunks, monkeypatch):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread")
    x = random_data(np.float32, 9 * CHUNK + 100, seed=6)
    one = rp.round(x, "e4m3", "stochastic", rng=2, stats=True)
    monkeypatch.setattr(stats_module, "PARALLEL_THRESHOLD", 2 * CHUNK)
    previous = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        threaded = rp.round(x, "e4m3", "stochastic", rng=2, stats=True)
        gathered = rounding_stats(x, one[0], "e4m3")
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(threaded[0].view(np.uint32), one[0].view(np.uint32))
    assert threaded[1] == one[1] == gathered


def test_small_arrays_scalars_and_out_take_the_whole(small_chunks):
    assert rp.round(np.float32(0.1), "bfloat16", stats=True)[1].count == 1
    x = random_data(np.float32, 2 * CHUNK, seed=8)
    out = np.empty_like(x)
    rounded, stats = rp.round(x, "e4m3", out=out, stats=True)
    assert rounded is out and stats == rp.round(x, "e4m3", stats=True)[1]


def gather_with(x, rounded, fmt, bounds):
    limits = stats_module.kernel_limits(rp.format(fmt), rounded.dtype)
    counts, errors = np.zeros(7, np.int64), np.zeros(4)
    kernel_module.gather(x, rounded, limits, bounds, counts, errors)
    return counts, errors


@pytest.mark.parametrize("fmt", ["e4m3", "bfloat16", "q8.8", "e2m1", "uq4.4"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ordinary_blocks_agree_with_the_rules(fmt, dtype):
    """Bounds that make no block ordinary send every block element by element:
    the counts and maxima agree exactly, the sums within rounding."""
    x = random_data(dtype, 40 * LANES + 3, seed=11)
    x[: 20 * LANES] = np.abs(x[: 20 * LANES]) + 0.5  # ordinary blocks, with no specials
    x[5 * LANES: 6 * LANES] = 0.0                    # zeros
    x[6 * LANES: 7 * LANES] = 2.0**-12               # flushed or underflowing
    rounded = np.asarray(rp.round(x, fmt, "stochastic", rng=1))
    bounds = stats_module.kernel_bounds(rp.format(fmt), x.dtype, rounded.dtype)
    none_ordinary = np.array([bounds[0], 0, bounds[2], bounds[3], 0, bounds[5]], np.int64)
    fast_counts, fast_errors = gather_with(x, rounded, fmt, bounds)
    slow_counts, slow_errors = gather_with(x, rounded, fmt, none_ordinary)
    np.testing.assert_array_equal(fast_counts, slow_counts)
    assert fast_errors[1] == slow_errors[1] and fast_errors[3] == slow_errors[3]
    np.testing.assert_allclose(fast_errors[[0, 2]], slow_errors[[0, 2]], rtol=1e-13)


def test_gather_goes_on_from_its_maxima():
    x = np.array([1.0, 2.0, 3.0] * 100, np.float32)
    rounded = np.asarray(rp.round(x, "e2m1"))
    bounds = stats_module.kernel_bounds(rp.format("e2m1"), x.dtype, rounded.dtype)
    limits = stats_module.kernel_limits(rp.format("e2m1"), rounded.dtype)
    counts, errors = np.zeros(7, np.int64), np.array([0.0, 5.0, 0.0, 7.0])
    kernel_module.gather(x, rounded, limits, bounds, counts, errors)
    assert errors[1] == 5.0 and errors[3] == 7.0 and counts[5] == 300  # raised to, never lowered
    kernel_module.gather(x, rounded, limits, bounds, counts, errors)
    assert counts[5] == 600


# every mode, on formats that test_stats rounds in it already (few new kernels to
# compile): the statistics kernel does not depend on the mode, the data it sees do
MODE_CASES = [("e4m3", "nearest"), ("e4m3", "nearest_away"), ("e4m3", "toward_zero"), ("e4m3", "up"),
              ("e4m3", "stochastic"), ("e5m2", "down"), ("float8_e4m3fnuz", "odd"), ("bfloat16", "nearest"),
              ("bfloat16", "stochastic"), ("float16", "nearest"), ("q8.8", "nearest"), ("q8.8", "stochastic"),
              ("e2m1", "nearest"), ("e2m1", "stochastic"), ("uq4.4", "down"),
              (rp.FloatFormat(5, 3, subnormals=False), "up")]


def narrow_data(size, seed):
    """float32 blocks of every kind: narrow ones (normal N(0, 1) data), ones with
    flushes, underflows and tiny values that stochastic rounding steps up
    (Sterbenz fails), zeros, exact values, and specials (NaN, inf, overflow,
    float32 subnormals, |x| beyond 2**60)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size).astype(np.float32)
    blocks = size // LANES
    x[1 * LANES: 2 * LANES] *= np.float32(2.0**-12)          # underflows and flushes
    x[2 * LANES: 3 * LANES] *= np.float32(2.0**-20)          # steps up by far more than |x|
    x[3 * LANES: 4 * LANES] = np.round(x[3 * LANES: 4 * LANES])  # exact in every format here
    x[4 * LANES + 3] = 0.0
    x[5 * LANES + 7] = np.nan
    x[6 * LANES + 1] = -np.inf
    x[7 * LANES + 2] = 1e30                                  # overflow, and beyond 2**60
    x[8 * LANES + 5] = np.float32(1e-40)                     # a float32 subnormal
    x[9 * LANES + 9] = np.float32(2.0**-70)                  # below the narrow range only
    x[10 * LANES: 11 * LANES] = -np.abs(x[10 * LANES: 11 * LANES])
    assert blocks > 12
    return x


@pytest.mark.parametrize("fmt, mode", MODE_CASES)
def test_narrow_blocks_agree_with_the_ordinary_loop(fmt, mode):
    """The narrow loop (float32 data and results) against the ordinary loop alone
    (narrow range emptied) and the element rules alone (both emptied): the counts
    and maxima agree exactly, the sums within rounding."""
    x = narrow_data(40 * LANES + 3, seed=21)
    rounded = np.asarray(rp.round(x, fmt, mode, rng=3))
    assert rounded.dtype == np.float32  # MODE_CASES hold formats with a float32 carrier: narrow blocks
    bounds = stats_module.kernel_bounds(rp.format(fmt), x.dtype, rounded.dtype)
    no_narrow = np.array([bounds[0], bounds[1], bounds[2], bounds[3], 0, bounds[5]], np.int64)
    no_fast = np.array([bounds[0], 0, bounds[2], bounds[3], 0, bounds[5]], np.int64)
    narrow_counts, narrow_errors = gather_with(x, rounded, fmt, bounds)
    for other in (no_narrow, no_fast):
        counts, errors = gather_with(x, rounded, fmt, other)
        np.testing.assert_array_equal(narrow_counts, counts)
        assert narrow_errors[1] == errors[1] and narrow_errors[3] == errors[3]
        np.testing.assert_allclose(narrow_errors[[0, 2]], errors[[0, 2]], rtol=1e-13)
    stats = rounding_stats(x, rounded, fmt)
    assert_matches_reference(stats, reference_stats(x, rounded, fmt))


@pytest.mark.parametrize("fmt, mode", MODE_CASES[:7] + MODE_CASES[8:9] + MODE_CASES[10:12])
def test_chunked_statistics_equal_the_gathered_ones(small_chunks, fmt, mode):
    """rp.round(..., stats=True), chunk by chunk, gives the RoundingStats that
    rounding_stats gives for its result, field for field, on random data with
    specials, in every mode."""
    x = narrow_data(13 * LANES + 100, seed=22)  # many chunks of CHUNK, blocks of every kind
    check(x, fmt, mode)


def test_narrow_blocks_see_every_edge():
    """Each special in a block of narrow numbers sends that block to the
    ordinary loop (a zero keeps it narrow, and counts there); each count is right."""
    base = np.linspace(0.75, 1.5, LANES, dtype=np.float32)
    for special in (0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, 1e-40, 2.0**-61, 2.0**61, 1e-4, 449.0, -500.0):
        x = np.tile(base, 3)
        x[LANES + 17] = special
        for mode in ("nearest", "stochastic", "up"):
            rounded = np.asarray(rp.round(x, "e4m3", mode, rng=4))
            stats = rounding_stats(x, rounded, "e4m3")
            assert_matches_reference(stats, reference_stats(x, rounded, "e4m3"))
