"""The fast block kernel's chunked passes (blocks of a power of two elements,
``rpfloat._kernels.cpu.blocks``: CHUNK elements at a time) against the general
block kernel (float64 arithmetic), bit for bit, in every mode: rows longer than
a chunk and not a multiple of it, ragged last blocks, rows shorter than a
block, block sizes from 2 to CHUNK, NaN, inf and all-zero blocks, blocks whose
scale puts results outside float32's normals, elements outside the fast range
(below it in stochastic rounding, above it where a block's max rounds past the
element's max), and random counters that cross a 2**32 segment in a chunk, rows whose ragged
last block ends in a partial run of LANES elements."""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import blocks
from rpfloat._kernels.cpu.blocks import CHUNK, general_kernel

from fast_blocks import run_fast_forms

SEGMENT = 2**32


def _data(rows, length, seed, special=0.01):
    """float32 rows of varied scales, with `special` of the values from a set of
    zeros, subnormals, huge values, inf and NaN, and some all-zero and tiny blocks."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, length)) * 2.0 ** rng.integers(-140, 120, (rows, 1))
    x *= 2.0 ** rng.integers(-30, 4, (rows, length))
    picks = rng.random((rows, length)) < special
    x[picks] = rng.choice([0.0, -0.0, 1e-45, -1e-44, 1e-39, 3.4e38, np.inf, np.nan], picks.sum())
    if length >= 64:
        x[:, 32:64] = 0.0  # an all-zero block (for block sizes up to 32)
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


def _plan(fmt, mode, rand_bits):
    return scaling.scaled_plan(fmt, rp.Mode(mode), None, None if rand_bits == 64 else rand_bits, np.float32)


def _both(x, fmt, mode, key=2024, offset=7, rand_bits=64):
    """``((fast, fast scales), (general, general scales))`` of `x` (rows) in blocks
    of ``fmt.block_size`` along its last axis."""
    plan = _plan(fmt, mode, rand_bits)
    rows, length = x.shape
    block_size = fmt.block_size or length
    blocks_per_row = -(-length // block_size)
    block_params = plan.block_params[:6] + (block_size, 0)
    fast_out, fast_scales = np.empty_like(x), np.empty((rows, blocks_per_row))
    run_fast_forms(x, plan, block_params, fast_out, fast_scales, key, offset)
    general_out, general_scales = np.empty_like(x), np.empty((rows, blocks_per_row))
    general_kernel(np.float32)(x.reshape(rows, length, 1), general_out.reshape(rows, length, 1),
                               general_scales.reshape(rows, blocks_per_row, 1), plan.element_params,
                               plan.scale_params, block_params, plan.float_params, int(plan.mode), key, offset,
                               plan.rand_bits)
    return (fast_out, fast_scales), (general_out, general_scales)


def _assert_same(x, fmt, mode, **kwargs):
    (fast, fast_scales), (general, general_scales) = _both(x, fmt, mode, **kwargs)
    bad = np.flatnonzero(fast.view(np.uint32) != general.view(np.uint32))
    assert bad.size == 0, (f"{fmt!r} mode {mode} {kwargs}: {bad.size} differ, e.g. at {bad[:3]} "
                           f"x={x.ravel()[bad[:3]]!r} fast={fast.ravel()[bad[:3]]!r} "
                           f"general={general.ravel()[bad[:3]]!r}")
    np.testing.assert_array_equal(fast_scales, general_scales)
    return fast


MX = [rp.format("mxfp8_e4m3"), rp.format("mxfp6_e3m2"), rp.format("mxfp4_e2m1"), rp.format("mxint8")]


def test_chunked_block_sizes():
    """Which block sizes take the chunks: powers of two from LANES (32) to CHUNK."""
    assert [size for size in range(1, 2 * CHUNK + 1) if blocks.chunked(size)] == [2**k for k in range(5, 13)]
    assert (blocks.LANES, CHUNK) == (32, 2**12)


@pytest.mark.parametrize("fmt", MX, ids=repr)
def test_chunks_match_the_general_kernel_in_every_mode(fmt):
    # a row of two chunks and a ragged block, rows shorter than a block, a row of 3
    for seed, (rows, length) in enumerate(((2, 2 * CHUNK + 45), (5, 31), (3, 3), (1, CHUNK))):
        x = _data(rows, length, seed)
        for mode in layout.ALL_MODES:
            for rand_bits in ((64, 9) if mode == layout.STOCHASTIC else (64,)):
                _assert_same(x, fmt, mode, rand_bits=rand_bits)


@pytest.mark.parametrize("block_size", [16, 64, 128, 2048, CHUNK])
def test_power_of_two_block_sizes(block_size):
    fmt = rp.ScaledFormat("e4m3", block_size=block_size)
    x = _data(3, CHUNK + 3 * block_size // 2 + 1, block_size)
    for mode in (layout.NEAREST, layout.DOWN, layout.STOCHASTIC):
        _assert_same(x, fmt, mode)


@pytest.mark.parametrize("rounding", ["floor", "ceil", "even", "rceil"])
def test_scale_roundings(rounding):
    fmt = rp.ScaledFormat("e2m1", block_size=32, scale_rounding=rounding)
    x = _data(4, 1000, 11)
    for mode in (layout.NEAREST, layout.UP, layout.STOCHASTIC):
        _assert_same(x, fmt, mode)


def test_plain_gaussian_rows():
    """What the benchmarks round: raw normal data, few blocks outside the fast range."""
    x = np.random.default_rng(3).standard_normal((2, 3 * CHUNK)).astype(np.float32)
    for fmt in MX:
        for mode in layout.ALL_MODES:
            _assert_same(x, fmt, mode)


def test_elements_outside_the_fast_range():
    """Blocks whose elements lie partly outside the fast range: tiny elements
    next to a large one (below the range of stochastic rounding, and below
    float32's normals), block maxima just under a power of two that round past
    mxint8's largest element (above the range), and scales so extreme that the
    results could leave float32's range (the whole block in float64)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 2 * CHUNK)).astype(np.float32)
    x[0, ::32] = 1.0
    x[0, 1::32] = np.float32(2.0**-30) * rng.standard_normal(x[0, 1::32].shape).astype(np.float32)
    x[0, 2::64] = 1e-40  # float32 subnormals in blocks of normal numbers
    x[1, ::32] = np.float32(1.99)  # mxint8: 1.99 rounds to its max, 127/64, or past it
    x[1, 5::32] = np.float32(-1.999)
    x[2, :] *= np.float32(2.0**-120)  # tiny blocks: the scale goes below the results' normals
    x[3, :] *= np.float32(2.0**125)  # huge blocks: rounded up scales put results past float32's max
    x[3, ::97] = np.float32(2.0**-149)
    others = [rp.ScaledFormat("bfloat16", block_size=32), rp.ScaledFormat("e4m3", 32, scale_rounding="ceil"),
              rp.ScaledFormat(rp.FixedFormat(8, 8), 32, scale_format=(-20, 20))]
    for fmt in MX + others:
        for mode in layout.ALL_MODES:
            _assert_same(x, fmt, mode)


def test_nan_inf_and_zero_blocks():
    x = np.random.default_rng(8).standard_normal((2, CHUNK + 64)).astype(np.float32)
    x[0, 3] = np.nan
    x[0, 40] = np.inf
    x[0, 64:96] = -np.inf
    x[1, :CHUNK] = 0.0  # a whole chunk of zeros
    x[1, CHUNK + 1] = -0.0
    x[1, -1] = np.nan  # in the ragged last block
    for fmt in MX:
        for mode in (layout.NEAREST, layout.TOWARD_ZERO, layout.STOCHASTIC):
            fast = _assert_same(x, fmt, mode)
            assert np.isnan(fast[0, :96]).all() and not np.isnan(fast[0, 96:]).any()


@pytest.mark.parametrize("mode", [layout.STOCHASTIC, layout.STOCHASTIC_EQUAL])
def test_counters_crossing_a_segment(mode):
    """A chunk whose random counters cross a multiple of 2**32 (in float64), and
    the chunks next to it: the same bits as the general kernel, which draws
    every element's number on its own."""
    x = _data(2, 3 * CHUNK + 5, 13, special=0.0)
    for offset in (SEGMENT - 100, SEGMENT - CHUNK, 5 * SEGMENT - 3 * CHUNK - 1, SEGMENT - 1):
        _assert_same(x, rp.format("mxfp8_e4m3"), mode, offset=offset)
        _assert_same(x, rp.format("mxfp4_e2m1"), mode, offset=offset, key=77)


def test_stochastic_rounding_is_reproducible_and_follows_the_counters():
    """Same key, same bits; and a row rounded on its own with the offset of its
    flat index gives the bits it gets in the whole array."""
    fmt = rp.format("mxfp4_e2m1")
    x = _data(3, 2 * CHUNK + 32 * 3, 21, special=0.0)
    whole = _assert_same(x, fmt, layout.STOCHASTIC, key=99, offset=0)
    again = _assert_same(x, fmt, layout.STOCHASTIC, key=99, offset=0)
    np.testing.assert_array_equal(whole.view(np.uint32), again.view(np.uint32))
    for row in range(3):
        alone = _assert_same(x[row:row + 1].copy(), fmt, layout.STOCHASTIC, key=99, offset=row * x.shape[1])
        np.testing.assert_array_equal(alone[0].view(np.uint32), whole[row].view(np.uint32))
    other = _assert_same(x, fmt, layout.STOCHASTIC, key=100, offset=0)
    assert (other.view(np.uint32) != whole.view(np.uint32)).mean() > 0.05


def test_block_extremes_fold_to_numpys():
    """Pass A alone: each block's largest magnitude and least nonzero one less 1
    (all ones where a block has none), for every power-of-two block size the
    chunks take (LANES to CHUNK)."""
    rng = np.random.default_rng(1)
    bits = rng.standard_normal(CHUNK).astype(np.float32).view(np.int32).copy()
    bits[rng.random(CHUNK) < 0.3] = 0
    bits[:64] = 0
    bits[100] = np.float32(-np.inf).view(np.int32)
    buffers = [np.empty(CHUNK // blocks.LANES, np.int32), np.empty(CHUNK // blocks.LANES, np.uint32)]
    magnitudes = (bits & 0x7FFFFFFF).astype(np.int64)
    for size in (2**k for k in range(5, 13)):
        count = CHUNK // size
        largest, least = blocks.block_extremes(bits, count, size, *buffers)
        by_block = magnitudes.reshape(count, size)
        np.testing.assert_array_equal(largest[:count], by_block.max(axis=1))
        keys = np.where(by_block == 0, 2**32 - 1, by_block - 1).min(axis=1)
        np.testing.assert_array_equal(least[:count].astype(np.int64), keys)


def test_rp_round_mx_rows_of_several_chunks():
    """Through rp.round: float32 MX rows (the fast kernel's chunks) against float64
    data of the same values (the general kernel)."""
    x = _data(3, 2 * CHUNK + 100, 4)
    for name in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8"):
        for mode in ("nearest", "up", "stochastic"):
            got = rp.round(x, name, mode, rng=5)
            want = rp.round(x.astype(np.float64), name, mode, rng=5)
            np.testing.assert_array_equal(got.astype(np.float64).view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("rounding", ["floor", "ceil", "even", "rceil"])
def test_scale_blocks_take_power_of_two_exponent(rounding):
    """Pass B alone (one loop without branches): each block's scale and shift
    from its max as `core.scale.power_of_two_exponent` gives them, for maxima
    of every kind (zero, float32 subnormals, normals, just below and at powers
    of two, the element max's neighbours, inf and NaN) and scale ranges that
    clamp them."""
    from rpfloat._kernels.core.scale import power_of_two_exponent
    rng = np.random.default_rng(2)
    largest = np.concatenate([
        rng.integers(0, 0x7F800000, 600), rng.integers(0, 0x00800000, 100), [0, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF],
        np.exp2(np.arange(-149, 128, 7)).astype(np.float32).view(np.int32), [0x7F800000, 0x7FC00000, 0x7FFFFFFF]])
    # 2 - 2**-j: the midpoints below 2 of every element precision (ties that carry or not), and neighbours
    ties = (np.ravel((2 - np.exp2(-np.arange(1.0, 24.0)))[:, None] * np.exp2([-130.0, -3.0, 0.0, 5.0]))
            .astype(np.float32).view(np.int32).astype(np.int64))
    largest = np.concatenate([largest, ties - 1, ties, ties + 1]).astype(np.int32)
    for element, scale_range in (("e4m3", (-127, 127)), ("e2m1", (-10, 10)), ("bfloat16", (-127, 127)),
                                 (rp.FixedFormat(8, 0), (-127, 127)), (rp.FixedFormat(2, 6), (-20, 20))):
        fmt = rp.ScaledFormat(element, block_size=32, scale_rounding=rounding, scale_format=scale_range)
        plan = _plan(fmt, layout.NEAREST, 64)
        block_params = plan.block_params[:6] + (32, 0)
        element_max = plan.float_params[0]
        with np.errstate(over="ignore"):  # bfloat16's max times 8: inf
            near_max = (element_max * np.exp2(np.arange(-3, 4))).astype(np.float32).view(np.int32)
        maxima = np.concatenate([largest, near_max - 1, near_max, near_max + 1]).astype(np.int32)
        assert (maxima >= 0).all()
        count = maxima.size
        scales, shifts = np.empty(count), np.empty(count, np.int32)
        kinds = np.empty(count + 8, np.int8)
        least = np.full(count, 2**32 - 1, np.uint32)
        wide = np.empty(count, np.int8)
        blocks.scale_blocks(maxima, least, count, scales, shifts, kinds, block_params, element_max, 0, 2**31 - 1, 0, 0,
                            0, 2**31 - 1, 2**31 - 1, wide)
        for big, scale, shift in zip(maxima, scales, shifts):
            if big >= 0x7F800000:
                assert np.isnan(scale)
                continue
            exponent = power_of_two_exponent(np.float64(np.int32(big).view(np.float32)), block_params, element_max)
            assert scale == 2.0**exponent and shift == exponent << 23, (fmt, hex(big), scale, exponent)
