"""The fast block kernel's wide stochastic loop (``rpfloat._kernels.cpu.blocks``:
`_wide_stochastic_element`, the runs of MX blocks with magnitudes from 2**-32
to 2**-8 of the element's smallest spacing) against the general block kernel
(float64 arithmetic), bit for bit: every element of every block in that band,
random words whose high half ties with the fraction's high word (where the
low half decides), the band's edges, and `rand_bits` that cut the random
number inside either half."""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from rpfloat._kernels.core.stream import random_bits
from rpfloat._kernels.cpu.blocks import BIT_LOOPS, CHUNK, UNIFORM_LOOPS, fast_kernel, general_kernel

MX = [rp.format("mxint8"), rp.format("mxfp4_e2m1"), rp.format("mxfp6_e3m2"), rp.format("mxfp8_e4m3")]
KEY, OFFSET = 99, 5


def _plan(fmt, rand_bits):
    return scaling.scaled_plan(fmt, rp.Mode.STOCHASTIC, None, None if rand_bits == 64 else rand_bits, np.float32)


def _assert_same(x, fmt, rand_bits=64):
    """The fast kernel's and the general kernel's stochastic rounding of the rows
    `x` in blocks of ``fmt.block_size``, bit for bit."""
    plan = _plan(fmt, rand_bits)
    rows, length = x.shape
    blocks_per_row = -(-length // fmt.block_size)
    block_params = plan.block_params[:6] + (fmt.block_size, 0)
    mode = int(plan.mode)
    fast, fast_scales = np.empty_like(x), np.empty((rows, blocks_per_row))
    fast_kernel(mode)(x.view(np.int32), fast.view(np.int32), fast_scales, plan.fast_params, plan.element_params,
                      block_params, plan.float_params, 0, KEY, OFFSET, plan.rand_bits)
    # the kernel's copies with other loops (the uniform one whatever the format): the same bits
    other = np.empty_like(x)
    for loops in {UNIFORM_LOOPS, plan.stochastic_loops} - {BIT_LOOPS}:
        fast_kernel(mode, loops)(x.view(np.int32), other.view(np.int32), fast_scales, plan.fast_params,
                                 plan.element_params, block_params, plan.float_params, 0, KEY, OFFSET, plan.rand_bits)
        np.testing.assert_array_equal(other.view(np.uint32), fast.view(np.uint32))
    general, general_scales = np.empty_like(x), np.empty((rows, blocks_per_row))
    general_kernel(np.float32)(x.reshape(rows, length, 1), general.reshape(rows, length, 1),
                               general_scales.reshape(rows, blocks_per_row, 1), plan.element_params,
                               plan.scale_params, block_params, plan.float_params, mode, KEY, OFFSET, plan.rand_bits)
    bad = np.flatnonzero(fast.view(np.uint32) != general.view(np.uint32))
    assert bad.size == 0, (f"{fmt!r} rand_bits {rand_bits}: {bad.size} differ, e.g. at {bad[:3]} "
                           f"x={x.ravel()[bad[:3]]!r} fast={fast.ravel()[bad[:3]]!r} "
                           f"general={general.ravel()[bad[:3]]!r}")
    np.testing.assert_array_equal(fast_scales, general_scales)
    return fast


def _quantum(fmt):
    """The element's smallest positive value, and its largest: with a block max in
    [2**emax, 2**(emax + 1)) the scale is 1 and the shifted magnitudes are the
    values themselves."""
    plan = _plan(fmt, 64)
    bits = plan.fast_params[layout.P_BELOW_QUANTUM_BITS]
    return float(np.int32(bits).view(np.float32)), plan.block_params[4]


@pytest.mark.parametrize("fmt", MX, ids=repr)
def test_every_element_in_the_band(fmt):
    """Blocks of scale 1 whose other 31 elements lie from 2**-33 to 2**-7 spacings
    (log-uniform, random signs): most in the wide loop's band, some just outside
    it on either side, and the runs of blocks without any next to them."""
    quantum, emax = _quantum(fmt)
    rng = np.random.default_rng(21)
    rows, length = 3, 2 * CHUNK + 32 * 5  # two chunks and part of a third
    x = quantum * 2.0 ** rng.uniform(-33.0, -7.0, (rows, length))
    x *= rng.choice([-1.0, 1.0], x.shape)
    x[:, ::32] = 1.5 * 2.0**emax  # the block max: scale 1
    x[1, 64:128] = rng.standard_normal(64)  # ordinary blocks between
    x[2, 32::64] = 2.0 ** rng.uniform(-33.0, -7.0, x[2, 32::64].shape) * quantum
    x = x.astype(np.float32)
    for rand_bits in (64, 48, 33, 32, 20, 1):
        _assert_same(x, fmt, rand_bits)


@pytest.mark.parametrize("fmt", MX, ids=repr)
def test_random_words_that_tie(fmt):
    """Elements whose fraction's high word is the complement of their random
    number's high half, so that only its low half decides (2**-32 of the cases
    otherwise): in blocks of scale 1, each element ``a`` of the band built from
    the high half of its own random number, with random bits below."""
    quantum, emax = _quantum(fmt)
    plan = _plan(fmt, 64)
    below_offset = plan.fast_params[layout.P_FAST_DROP_OFFSET] - 24  # d - 24 = below_offset - exponent field
    rng = np.random.default_rng(34)
    length = 48 * CHUNK  # 2**-9 of the random numbers have a high half that can tie
    x = np.zeros(length, np.float32)
    ties = 0
    for a in range(length):
        if a % 32 == 0:
            x[a] = 1.5 * 2.0**emax
            continue
        complement = ~np.uint32(int(random_bits(np.uint64(KEY), OFFSET + a)) >> 32) & np.uint32(0xFFFFFFFF)
        right = 32 - int(complement).bit_length()  # the high word is (sig << 8) >> right
        if not 9 <= right <= 31:  # only below 2**-8 spacings does the low half count
            x[a] = rng.standard_normal() * quantum * 2.0**-12
            continue
        below = int(rng.integers(0, 1 << right)) & ~0xFF
        sig8 = (int(complement) << right) | below
        field = below_offset - right
        bits = (field << 23) | ((sig8 >> 8) & 0x7FFFFF)
        x[a] = np.int32(bits).view(np.float32) * rng.choice([-1.0, 1.0])
        ties += 1
    assert ties > 200
    x = x.reshape(1, length)
    fast = _assert_same(x, fmt)
    tied = (np.abs(x) < quantum) & (np.arange(length) % 32 != 0)
    assert 0 < np.count_nonzero(fast[tied]) < np.count_nonzero(tied)  # the low halves went either way


@pytest.mark.parametrize("fmt", MX + [rp.ScaledFormat("bfloat16", block_size=32)], ids=repr)
def test_the_band_ends_where_the_fraction_fits_64_bits(fmt):
    """The wide loop's range starts at 2**-32 spacings (the least float32 normal
    at least; formats without subnormals: the narrow loop's start): below it the
    bits dropped exceed 55 and ``sig * 2**(64 - d)`` would lose bits, which
    random tests find only with odds of 2**-31 per element."""
    from rpfloat._kernels.cpu import blocks, loops
    plan = _plan(fmt, 64)
    params = plan.fast_params
    low = blocks.stochastic_low(params, max(loops.fast_bounds(params, layout.STOCHASTIC, False)[0], 1 << 23))
    quantum = params[layout.P_BELOW_QUANTUM_BITS]
    subnormals = params[layout.P_FAST_DROP_OFFSET] == params[layout.P_BELOW_DROP_OFFSET]
    expected = min(low, max(quantum - (32 << 23), 1 << 23)) if subnormals else low
    assert blocks.wide_low(params, low) == expected
    if fmt in MX:
        assert expected == quantum - (32 << 23) < low == quantum - (8 << 23)


@pytest.mark.parametrize("fmt", [rp.format("mxint8"), rp.ScaledFormat(rp.FixedFormat(4, 3), block_size=64)], ids=repr)
def test_blocks_above_the_range_of_a_twos_complement_element(fmt):
    """Two's complement elements (mxint8: 127/64 and -2) whose blocks hold
    magnitudes past the positive max: the wide loop clamps them to the negative
    max and the positive results to the positive max. Block maxima just under
    the next power of two (scale 1), of either sign, elements of both signs
    between the two maxima and beyond them, next to ordinary blocks."""
    plan = _plan(fmt, 64)
    top = float(np.int32(plan.fast_params[layout.P_MAX_POS_BITS]).view(np.float32))
    bottom = float(np.int32(plan.fast_params[layout.P_MAX_NEG_BITS]).view(np.float32))
    assert top < bottom
    rng = np.random.default_rng(55)
    rows, length = 2, 2 * CHUNK + 3 * fmt.block_size
    x = rng.standard_normal((rows, length))
    x[0] = rng.uniform(top - (bottom - top), bottom, length) * rng.choice([-1.0, 1.0], length)
    x[0, ::fmt.block_size] = np.nextafter(np.float32(bottom), np.float32(0))  # the scale stays 1
    x[1, ::3 * fmt.block_size] = np.float32(0.999 * bottom) * rng.choice([-1.0, 1.0], x[1, ::3 * fmt.block_size].shape)
    x[1, 1::4 * fmt.block_size] = 1e-9  # and below the narrow range in the same blocks
    x = x.astype(np.float32)
    for rand_bits in (64, 32, 5):
        fast = _assert_same(x, fmt, rand_bits)
        assert np.any(fast[0] == np.float32(top)) and np.any(fast[0] == np.float32(-bottom))
