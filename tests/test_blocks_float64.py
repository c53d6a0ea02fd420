"""Scaled formats on float64 data (``rpfloat._kernels.cpu.float64_blocks``: the
block scales and quotients, the element format's own kernel, the products)
against the general block kernel, bit for bit: element formats, block sizes,
scale formats (powers of two, significand scales, a tensor scale), every mode
and ``rand_bits``, encode's elements, offsets, segments shorter than a block
and longer than a row, and data with zeros, subnormals, ties, NaN, inf and
values so far below their block's maximum that their quotients leave
float64's normal range."""
import contextlib
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu.blocks import general_kernel
from scaled_reference import scaled_reference
from strategies import fixed_formats, float_formats

SCALE_FORMATS = ["e8m0", (-20, 20), (-1022, 1022), "e4m3", "e5m2", rp.FloatFormat(3, 1)]


@contextlib.contextmanager
def segment_of(size):
    """`scaling.SEGMENT` set to `size` for the block."""
    saved = scaling.SEGMENT
    scaling.SEGMENT = size
    try:
        yield
    finally:
        scaling.SEGMENT = saved


def run_both(x, fmt, mode, key, rand_bits, offset, write_elements):
    """``[(values, scales) of run_blocks, (values, scales) of the general kernel]``
    for float64 data `x` ``(outer, length, inner)`` blocked along its middle axis
    (`fmt`'s axis 1; one scale per array: a block of all)."""
    if fmt.block_size is None:
        x = x.reshape(1, -1, 1)
    plan = scaling.scaled_plan(fmt, rp.Mode(mode), None, rand_bits, x.dtype)
    with np.errstate(over="ignore", divide="ignore"):  # (rp.round's: a tensor scale beyond float32)
        new_values, new_scales, tensor_scale = scaling.run_blocks(x, plan, key, offset, write_elements)
    outer, length, inner = x.shape
    block_size = fmt.block_size or length
    blocks = -(-length // block_size)
    block_params = plan.block_params[:6] + (block_size, int(write_elements))
    float_params = (plan.float_params[0], float(tensor_scale if tensor_scale is not None else 1.0),
                    *plan.float_params[2:])
    values, scales = np.empty_like(x), np.empty((outer, blocks, inner))
    general_kernel(np.float64)(x, values, scales, plan.element_params, plan.scale_params, block_params, float_params,
                               int(plan.mode), key, offset, plan.rand_bits)
    return (new_values.reshape(x.shape), np.asarray(new_scales).reshape(scales.shape)), (values, scales)


def assert_same_bits(new, general, what):
    bad = np.flatnonzero(new.view(np.uint64) != general.view(np.uint64))
    assert bad.size == 0, f"{what}: {bad.size} differ, first at {bad[0]}: {new.flat[bad[0]]!r} != {general.flat[bad[0]]!r}"


def data(rows, length, seed, spread):
    """Normal rows at random scales (within `spread` binades of 1), values on
    and between a grid of halves (ties), and specials: zeros, float64
    subnormals, values 2**900 below and above the rest, NaN, inf."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, length)) * 2.0 ** rng.integers(-spread, spread + 1, (rows, 1))
    x *= 2.0 ** rng.integers(-12, 2, (rows, length))
    grid = rng.random((rows, length)) < 0.2
    x[grid] = rng.integers(-64, 64, grid.sum()) / 32.0
    picks = rng.random((rows, length)) < 0.06
    specials = [0.0, -0.0, 5e-324, -1e-310, 2.0**-1022, 1e-300, -3e-280, 1e280, 2.0**1000, np.inf, -np.inf, np.nan]
    x[picks] = rng.choice(specials, picks.sum())
    if rng.random() < 0.2:
        x[:, : length // 2] = 0.0
    return x


@st.composite
def cases(draw):
    element = draw(st.one_of(float_formats(max_exp_bits=8, max_man_bits=12), fixed_formats(max_word=30)))
    block_size = draw(st.one_of(st.sampled_from([1, 2, 16, 32, None]), st.integers(1, 80)))
    scale_format = draw(st.sampled_from(SCALE_FORMATS))
    rounding = draw(st.sampled_from(["floor", "ceil", "even", "rceil"]))
    tensor_scale = draw(st.booleans()) if isinstance(scale_format, (str, rp.FloatFormat)) and scale_format != "e8m0" \
        else False
    try:
        fmt = rp.ScaledFormat(element, block_size=block_size, axis=1 if block_size else -1, scale_format=scale_format,
                              scale_rounding=rounding, tensor_scale=tensor_scale)
    except (ValueError, TypeError):
        assume(False)
    mode = draw(st.sampled_from(layout.ALL_MODES))
    rand_bits = draw(st.sampled_from([None, 1, 9, 23, 53])) if mode == layout.STOCHASTIC else None
    rows = draw(st.integers(1, 4))
    length = draw(st.one_of(st.integers(1, 40), st.integers(41, 300)))
    inner = draw(st.sampled_from([1, 1, 2, 7]))
    segment = draw(st.sampled_from([8, 50, 64, 1 << 15]))  # (in values; at least inner)
    write_elements = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    spread = draw(st.sampled_from([3, 130, 1000]))
    return fmt, mode, rand_bits, rows, length, inner, segment, write_elements, seed, spread


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_float64_blocks_match_the_general_kernel(case):
    fmt, mode, rand_bits, rows, length, inner, segment, write_elements, seed, spread = case
    x = data(rows * length, inner, seed, spread).reshape(rows, length, inner)
    with segment_of(segment):
        (new, new_scales), (general, general_scales) = run_both(x, fmt, mode, seed % 1000, rand_bits,
                                                                seed % 5000, write_elements)
    assert_same_bits(new_scales, general_scales, "scales")
    assert_same_bits(new, general, "values")


@pytest.mark.parametrize("mode", ["nearest", "up", "down", "odd", "stochastic_equal", "stochastic"])
def test_quotients_below_float64_normals_round_as_nonzero(mode):
    # 448 * 2**100 sets E4M3's scale 2**100; 5e-324 / 2**100 underflows to 0 in float64:
    # it rounds as a nonzero value far below the element's smallest step, 2**-9
    x = np.array([448.0 * 2.0**100, 5e-324, -5e-324, 1e-310, 0.0, -0.0])
    got = rp.round(x, rp.ScaledFormat("e4m3", block_size=6), mode, rng=3)
    step = 2.0**-9 * 2.0**100
    expected = {"nearest": [0, -0.0, 0], "up": [step, -0.0, step], "down": [0, -step, 0], "odd": [step, -step, step],
                "stochastic_equal": None, "stochastic": [0, -0.0, 0]}[mode]
    assert got[0] == x[0] and np.array_equal(np.signbit(got[4:]), [False, True])
    if expected is not None:
        assert np.array_equal(got[1:4], expected) and np.array_equal(np.signbit(got[1:4]), np.signbit(expected))
    fmt = rp.ScaledFormat("e4m3", block_size=6, axis=1)
    for data_3d in (x.reshape(1, 6, 1), np.repeat(x.reshape(1, 6, 1), 3, axis=2)):  # the row and column forms
        (new, _), (general, _) = run_both(data_3d, fmt, rp.Mode[mode.upper()], 3, None, 0, False)
        assert_same_bits(new, general, mode)


@pytest.mark.parametrize("scale_format", [(1, 5), "e4m3"], ids=str)
@pytest.mark.parametrize("element", [rp.FloatFormat(11, 10), rp.FloatFormat(11, 2, bias=1040),
                                     rp.FixedFormat(-1040, 1074)], ids=repr)
def test_tiny_quotients_of_elements_below_2_to_the_minus_958(element, scale_format):
    """Elements reaching below 2**-958 (a deep one, fixed point down to
    2**-1074): quotients at or below 2**-1022, exact and inexact in float64,
    round as the exact ones in the general kernel and in `fix_tiny`, in the row
    and column forms, the same bits in every mode and the oracle's in the
    deterministic ones."""
    fmt = rp.ScaledFormat(element, block_size=4, axis=1, scale_format=scale_format)
    rng = np.random.default_rng(8)
    x = rng.uniform(1, 2, (1, 48, 3)) * 2.0 ** rng.integers(-1080, -1000, (1, 48, 3)).astype(float)
    x[:, ::4] = rng.uniform(1, 2, (1, 12, 3)) * 2.0 ** rng.integers(-1060, 1023, (1, 12, 3)).astype(float)
    x[:, 1::8] = rng.integers(1, 2**20, (1, 6, 3)).view(np.float64)  # float64 subnormals
    x *= rng.choice([-1.0, 1.0], x.shape)
    for data_3d in (x[:, :, :1].copy(), x):  # the row and column forms
        for mode in layout.ALL_MODES:
            (new, _), (general, _) = run_both(data_3d, fmt, mode, 3, None, 0, False)
            assert_same_bits(new, general, f"{rp.Mode(mode).name}")
            if mode in layout.DETERMINISTIC_MODES:
                want = scaled_reference(data_3d.reshape(-1, data_3d.shape[2]).T.copy(),
                                        dataclasses.replace(fmt, axis=-1), rp.Mode(mode).name.lower()).values
                assert_same_bits(general.reshape(-1, data_3d.shape[2]).T.copy(), want, "general kernel")


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8", "nvfp4", rp.ScaledFormat("e4m3"),
                                 rp.ScaledFormat("bfloat16", block_size=2000)], ids=str)
@pytest.mark.parametrize("shape", [(1, 70_001, 1), (3, 33_000, 1), (40, 1000, 1), (2, 100, 400), (1, 3000, 25)])
def test_long_arrays_in_segments(fmt, shape):
    """With the default segment: rows or columns longer than a segment (pieces
    of them, whole blocks or pieces of blocks longer than a segment) and many
    short rows or columns per segment."""
    fmt = rp.format(fmt)
    fmt = dataclasses.replace(fmt, axis=1) if fmt.block_size is not None else fmt  # (one scale: no axis)
    x = data(shape[0] * shape[1], shape[2], 11, 20).reshape(shape)
    for mode, rand_bits in ((layout.NEAREST, None), (layout.STOCHASTIC, None), (layout.STOCHASTIC, 7)):
        (new, new_scales), (general, general_scales) = run_both(x, fmt, mode, 5, rand_bits, 123, False)
        assert_same_bits(new_scales, general_scales, "scales")
        assert_same_bits(new, general, "values")


@pytest.mark.parametrize("axis", [-1, 0])
def test_round_and_encode_take_the_float64_blocks(axis):
    """rp.round and rp.encode on a float64 matrix, blocked along either axis,
    agree with the general kernel through the public functions (and encode
    decodes back)."""
    x = data(96, 40, 2, 6)
    fmt = rp.ScaledFormat("e4m3", block_size=32, axis=axis)
    data_3d = x.reshape(1, 96, 40) if axis == 0 else x.reshape(96, 40, 1)
    general = run_both(data_3d, dataclasses.replace(fmt, axis=1), layout.NEAREST, 0, None, 0, False)[1][0]
    general = general.reshape(x.shape)
    assert_same_bits(rp.round(x, fmt), general, "rp.round")
    assert_same_bits(rp.decode(rp.encode(x, fmt), fmt), general, "rp.decode(rp.encode)")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["nearest", "up", "down", "toward_zero"])
def test_even_scale_rounding_of_an_element_without_fraction_bits(dtype, mode):
    """"even" rounds m to the element's precision in its top binade: without
    fraction bits the tie breaks by the binade's own bit, 1 (odd), so 12 (a tie
    between 8 and 16) moves the scale up: the oracle's."""
    fmt = rp.ScaledFormat(rp.FloatFormat(3, 0, inf=False), block_size=1, scale_format=(-3, 5), scale_rounding="even")
    x = np.array([12.0, 11.0, 13.0, 24.0, -12.0, 6.0, 3.0, 0.75], dtype)
    expected = scaled_reference(x, fmt, mode)
    got = rp.round(x, fmt, mode)
    assert_same_bits(got.astype(np.float64), expected.values.astype(np.float64), mode)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_exponents_beyond_255_on_float32_data(dtype):
    """A scale range reaching past 2**255: the float32 fast kernel keeps block
    shifts (s << 23) in int32, so such formats take the general kernel; every
    element then rounds to 0 (nearest) or one step of 2**1000 (up)."""
    fmt = rp.ScaledFormat(rp.FixedFormat(0, 6), block_size=32, scale_format=(1000, 1022))
    x = np.full(64, 11.0, dtype)
    x[32:] = -0.5
    for mode in ("nearest", "up"):
        expected = scaled_reference(x, fmt, mode)
        assert_same_bits(rp.round(x, fmt, mode).astype(np.float64), expected.values.astype(np.float64), mode)
