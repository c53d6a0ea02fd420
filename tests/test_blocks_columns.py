"""The column form of the fast kernel of the scaled formats (float32 data,
power-of-two scales, blocks along another axis than the last:
``rpfloat._kernels.cpu.blocks.column_kernel``) against the general block
kernel (float64 arithmetic, ``round_blocks``), bit for bit, in every mode it
serves: directly on ``(outer, length, inner)`` data, and through ``rp.round``
against float64 data of the same values (which always take the general kernel).
The other modes take the general kernel (checked through ``rp.round`` too).
The data exercise its fast columns and those it gives to float64: subnormals,
saturation, zeros, NaN, inf, tiny and huge blocks, ragged last blocks."""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu.blocks import COLUMN_MODES, column_kernel, general_kernel

MX_INT8 = rp.format("mxint8").element  # FixedFormat(2, 6)
ELEMENTS = ["e4m3", "e5m2", "e2m1", "e3m2", "e2m3", MX_INT8]
SCALE_ROUNDINGS = ["floor", "ceil", "even", "rceil"]
# (element, block size, scale rounding): every element and rounding, MX's 32 and ragged sizes
FORMATS = [(element, block_size, rounding)
           for n, element in enumerate(ELEMENTS)
           for block_size, rounding in ((32, SCALE_ROUNDINGS[n % 4]),
                                        ((5, 7, 16)[n % 3], SCALE_ROUNDINGS[(n + 1) % 4]))]
STOCHASTIC_MODES = [mode for mode in COLUMN_MODES if mode >= layout.STOCHASTIC]


def _data(shape, seed):
    """float32 data of `shape` ``(outer, length, inner)``: each column (outer and
    inner index) of its own magnitude, from 2**-140 to 2**120, the elements
    spread over 34 binades below it, and 2% special values."""
    rng = np.random.default_rng(seed)
    outer, length, inner = shape
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, (outer, 1, inner))
    x *= 2.0 ** rng.integers(-30, 4, shape)
    special = np.array([0.0, -0.0, 1e-45, -1e-44, 1e-39, 3.4e38, np.inf, -np.inf, np.nan])
    picks = rng.random(shape) < 0.02
    x[picks] = rng.choice(special, picks.sum())
    x[:, :, 0] = 0.0  # a zero column
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


def _run_both(x, fmt, mode, key, rand_bits, offset):
    """``[(values, scales) of the column kernel, (values, scales) of the general
    one]`` for float32 data `x` ``(outer, length, inner)`` blocked along the
    middle axis, element ``(0, 0, 0)`` drawing random number `offset`."""
    plan = scaling.scaled_plan(fmt, rp.Mode(mode), None, None if rand_bits == 64 else rand_bits, x.dtype)
    assert plan.fast_params is not None
    outer, length, inner = x.shape
    blocks = -(-length // fmt.block_size)
    block_params = plan.block_params[:6] + (fmt.block_size, 0)
    outputs = []
    for fast in (True, False):
        out = np.empty_like(x)
        scales = np.empty((outer, blocks, inner))
        if fast:
            # nearest onto float elements: rounding by adding (what rp.round takes) and by bits
            for adding in ((0, 1) if plan.by_adding else (0,)):
                out[...] = 1.0
                column_kernel(int(plan.mode))(x.view(np.int32), out.view(np.int32), scales, plan.fast_params,
                                              plan.element_params, block_params, plan.float_params, adding, key,
                                              offset, plan.rand_bits)
                if not adding:
                    by_bits = out.copy()
            np.testing.assert_array_equal(out.view(np.uint32), by_bits.view(np.uint32))
        else:
            general_kernel(np.float32)(x, out, scales, plan.element_params, plan.scale_params, block_params,
                                       plan.float_params, int(plan.mode), key, offset, plan.rand_bits)
        outputs.append((out, scales))
    return outputs


def _assert_same(x, got, expected, what):
    bad = np.flatnonzero(got.view(np.uint32) != expected.view(np.uint32))
    assert bad.size == 0, (f"{what}: {bad.size} differ, e.g. x={x.ravel()[bad[:3]]!r} "
                           f"got={got.ravel()[bad[:3]]!r} expected={expected.ravel()[bad[:3]]!r}")


@pytest.mark.parametrize("element, block_size, rounding", FORMATS, ids=str)
def test_column_kernel_matches_the_general_one(element, block_size, rounding):
    fmt = rp.ScaledFormat(element, block_size=block_size, axis=1, scale_rounding=rounding)
    for seed, shape in enumerate(((3, 70, 37), (2, 32, 8), (1, 9, 2))):
        x = _data(shape, seed)
        for mode in COLUMN_MODES:
            for rand_bits in ((64, 9) if mode in STOCHASTIC_MODES else (64,)):
                (fast, fast_scales), (general, general_scales) = _run_both(x, fmt, mode, 2024 + seed, rand_bits, 7)
                what = f"{fmt!r} shape {shape} mode {mode} rand_bits {rand_bits}"
                _assert_same(x, fast, general, what)
                np.testing.assert_array_equal(fast_scales, general_scales, err_msg=what)


@pytest.mark.parametrize("mode", STOCHASTIC_MODES)
def test_rows_crossing_a_random_segment(mode):
    """Random counters that cross a multiple of 2**32 within a row (taken in
    float64) and between rows: the same numbers as the general kernel's."""
    fmt = rp.ScaledFormat("e2m1", block_size=32, axis=1)
    x = _data((2, 40, 24), 5)
    for offset in (2**32 - 30, 2**33 - 24 * 41 - 5):
        (fast, fast_scales), (general, general_scales) = _run_both(x, fmt, mode, 99, 64, offset)
        _assert_same(x, fast, general, f"mode {mode} offset {offset}")
        np.testing.assert_array_equal(fast_scales, general_scales)


def _round_both(x, fmt, mode, seed, rand_bits=None):
    """``(float32 result, float64 result as float32)`` of ``rp.round`` of `x`."""
    got = rp.round(x, fmt, mode, rng=seed, rand_bits=rand_bits)
    expected = rp.round(x.astype(np.float64), fmt, mode, rng=seed, rand_bits=rand_bits)
    with np.errstate(over="ignore"):  # (a ceil scale may round a block past float32's range)
        expected = expected.astype(np.float32)
    assert got.dtype == np.float32 and got.shape == x.shape
    return got, expected


@pytest.mark.parametrize("preset", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1",
                                    "mxint8"])
def test_round_along_other_axes(preset):
    element = rp.format(preset).element
    x = _data((3, 45, 10), 11).reshape(3, 45, 2, 5)
    for axis, block_size in ((0, 2), (1, 32), (1, 7), (2, 32), (-2, 1)):
        for n, rounding in enumerate(SCALE_ROUNDINGS):
            fmt = rp.ScaledFormat(element, block_size=block_size, axis=axis, scale_rounding=rounding)
            for mode, rand_bits in (("nearest", None), ("toward_zero", None), ("stochastic", None),
                                    ("stochastic", 5)):
                got, expected = _round_both(x, fmt, mode, 3 + n, rand_bits)
                _assert_same(x, got, expected, f"{fmt!r} {mode} rand_bits {rand_bits}")


def test_round_normal_data_along_axis_0():
    """MX's case: float32 data of one scale, blocked along the first axis."""
    x = np.random.default_rng(4).standard_normal((96, 300)).astype(np.float32)
    x[40, 7] = 1e-40  # a subnormal in a block
    x[70, 9] = np.nan
    for preset in ("mxfp8_e4m3", "mxfp4_e2m1", "mxint8"):
        fmt = rp.ScaledFormat(rp.format(preset).element, block_size=32, axis=0)
        for mode in ("nearest", "stochastic", "up"):
            got, expected = _round_both(x, fmt, mode, 8)
            _assert_same(x, got, expected, f"{preset} {mode}")
        assert np.isnan(got[64:96, 9]).all() and not np.isnan(got[64:96, 8]).any()


@pytest.mark.parametrize("shape, axis", [((0, 5, 7), 1), ((4, 0, 7), 1), ((4, 5, 0), 1), ((40, 1), 0),
                                         ((1, 40, 1), 1), ((40, 2), 0), ((3, 1, 6), 1)])
def test_round_empty_and_narrow(shape, axis):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    fmt = rp.ScaledFormat("e4m3", block_size=32, axis=axis)
    for mode in ("nearest", "stochastic"):
        got, expected = _round_both(x, fmt, mode, 1)
        _assert_same(x, got, expected, f"{shape} {mode}")


def test_other_modes_take_the_general_kernel():
    x = _data((2, 40, 6), 9)
    fmt = rp.ScaledFormat("e4m3", block_size=32, axis=1)
    for mode in layout.ALL_MODES:
        if mode not in COLUMN_MODES:
            assert column_kernel(mode) is None
        got, expected = _round_both(x, fmt, rp.Mode(mode), 6)
        _assert_same(x, got, expected, f"mode {mode}")
