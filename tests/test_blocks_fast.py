"""The fast kernel of the scaled formats (float32 data, power-of-two scales, blocks
along the last axis: ``rpfloat._kernels.cpu.blocks.fast_kernel``) against the
general block kernel (float64 arithmetic, ``round_blocks``), bit for bit, in
every mode, on data that exercise both its fast blocks and the blocks it gives
to float64 (subnormals, saturation, zeros, NaN, inf, tiny and huge blocks)."""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu.blocks import general_kernel

from fast_blocks import run_fast_forms
from fpenv import FE_DOWNWARD, FE_TOWARDZERO, FE_UPWARD, X86_64_GLIBC, rounding_direction

FORMATS = [
    rp.format("mxfp8_e4m3"), rp.format("mxfp8_e5m2"), rp.format("mxfp6_e2m3"), rp.format("mxfp6_e3m2"),
    rp.format("mxfp4_e2m1"), rp.format("mxint8"),
    rp.ScaledFormat("e4m3", block_size=7, scale_rounding="ceil"),
    rp.ScaledFormat("e2m1", block_size=16, scale_rounding="even"),
    rp.ScaledFormat("e5m2", block_size=5, scale_rounding="rceil"),
    rp.ScaledFormat(rp.FixedFormat(8, 8), block_size=32, scale_format=(-20, 20)),
    rp.ScaledFormat("bfloat16", block_size=32),
    rp.ScaledFormat("float16"), rp.ScaledFormat("e4m3"), rp.ScaledFormat(rp.FixedFormat(8, 0)),
    rp.ScaledFormat(rp.FloatFormat(4, 3, subnormals=False), block_size=32),
]


def _data(rows: int, length: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, length)) * 2.0 ** rng.integers(-140, 120, (rows, 1))
    x *= 2.0 ** rng.integers(-30, 4, (rows, length))
    special = np.array([0.0, -0.0, 1e-45, -1e-44, 1e-39, 3.4e38, np.inf, np.nan])
    picks = rng.random((rows, length)) < 0.01
    x[picks] = rng.choice(special, picks.sum())
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


def _run_both(x, fmt, mode, key, rand_bits, offset=7):
    """``[(values, scales) of the fast kernel, (values, scales) of the general one]``
    for float32 rows `x`, element ``(0, 0)`` drawing random number `offset`."""
    plan = scaling.scaled_plan(fmt, rp.Mode(mode), None, None if rand_bits == 64 else rand_bits, x.dtype)
    rows, length = x.shape
    block_size = fmt.block_size or length
    blocks = -(-length // block_size)
    block_params = plan.block_params[:6] + (block_size, 0)
    outputs = []
    for fast in (True, False):
        out = np.empty_like(x)
        scales = np.empty((rows, blocks))
        if fast:
            run_fast_forms(x, plan, block_params, out, scales, key, offset)
        else:
            general_kernel(np.float32)(x.reshape(rows, length, 1), out.reshape(rows, length, 1),
                                       scales.reshape(rows, blocks, 1), plan.element_params, plan.scale_params,
                                       block_params, plan.float_params, int(plan.mode), key, offset, plan.rand_bits)
        outputs.append((out, scales))
    return outputs


@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_fast_kernel_matches_the_general_one(fmt):
    for seed, (rows, length) in enumerate(((64, 96), (9, 1000), (3, 31))):
        if fmt.block_size is None and rows > 3:
            continue
        x = _data(rows, length, seed)
        for mode in layout.ALL_MODES:
            for rand_bits in ((64, 9) if mode == layout.STOCHASTIC else (64,)):
                (fast, fast_scales), (general, general_scales) = _run_both(x, fmt, mode, 2024 + seed, rand_bits)
                bad = np.flatnonzero(fast.view(np.uint32) != general.view(np.uint32))
                assert bad.size == 0, (f"{fmt!r} mode {mode} rand_bits {rand_bits}: {bad.size} differ, e.g. "
                                       f"x={x.ravel()[bad[:3]]!r} fast={fast.ravel()[bad[:3]]!r} "
                                       f"general={general.ravel()[bad[:3]]!r}")
                np.testing.assert_array_equal(fast_scales, general_scales)


def test_rp_round_takes_the_fast_kernel_for_float32_rows():
    """float32 data blocked along the last axis go through the fast kernel (the
    same bits as float64 data of the same values, which take the general one)."""
    x = _data(16, 64, 5)
    for name in ("mxfp8_e4m3", "mxfp4_e2m1", "mxint8"):
        for mode in ("nearest", "down", "stochastic"):
            got = rp.round(x, name, mode, rng=3)
            want = rp.round(x.astype(np.float64), name, mode, rng=3)
            np.testing.assert_array_equal(got.astype(np.float64).view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("fmt", [rp.ScaledFormat(rp.FixedFormat(8, 0)), rp.ScaledFormat("e4m3"),
                                 rp.ScaledFormat("e2m1", block_size=7), rp.ScaledFormat("e4m3", block_size=5000)],
                         ids=repr)
def test_pieces_with_a_few_elements_below_the_fast_range(fmt):
    """Long blocks (pieces of 4096) and short ones not a power of two: the fast
    loop, then the few elements below its range (tiny or subnormal next to large
    ones, in stochastic rounding anything below about 2**-8 of the element's
    spacing) again in float64."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 3 * 4096 + 5)).astype(np.float32)
    picks = rng.random(x.shape) < 0.002
    x[picks] = (rng.standard_normal(picks.sum()) * 2.0 ** rng.integers(-40, -10, picks.sum())).astype(np.float32)
    x[1, 4100] = 1e-40
    x[1, 9000] = -0.0
    for mode in layout.ALL_MODES:
        (fast, fast_scales), (general, general_scales) = _run_both(x, fmt, mode, 11, 64)
        bad = np.flatnonzero(fast.view(np.uint32) != general.view(np.uint32))
        assert bad.size == 0, (f"{fmt!r} mode {mode}: {bad.size} differ, e.g. x={x.ravel()[bad[:3]]!r} "
                               f"fast={fast.ravel()[bad[:3]]!r} general={general.ravel()[bad[:3]]!r}")
        np.testing.assert_array_equal(fast_scales, general_scales)


@pytest.mark.parametrize("element", [rp.FixedFormat(0, 3, signed=False), rp.FixedFormat(4, 4, signed=False),
                                     rp.FloatFormat(2, 0, subnormals=False),
                                     rp.FloatFormat(3, 0)], ids=repr)
def test_elements_the_fast_kernel_does_not_take(element):
    """Unsigned elements (the fast kernel rounds magnitudes: a negative value
    must saturate at 0) and elements whose fast range is empty (no fraction bits): the general kernel,
    whose bits float32 data get as float64 data do."""
    x = _data(4, 70, 9)
    for block_size in (1, 4, 32, None):
        fmt = rp.ScaledFormat(element, block_size=block_size)
        assert scaling.scaled_plan(fmt, rp.Mode(0), None, None, np.float32).fast_params is None
        for mode in ("nearest", "stochastic"):
            got = rp.round(x, fmt, mode, rng=3)
            want = rp.round(x.astype(np.float64), fmt, mode, rng=3)
            np.testing.assert_array_equal(got.astype(np.float64).view(np.uint64), want.view(np.uint64))


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets the rounding direction through glibc")
@pytest.mark.parametrize("direction", [FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO])
def test_nearest_by_adding_gives_way_to_another_rounding_direction(direction):
    """MX nearest onto float elements rounds by adding a power of two, which
    needs the thread to round to nearest: under another fesetround direction the
    kernel rounds by bits (where rpfloat cannot set the default environment for
    the call), and the results (ties among them) stay the same."""
    x = _data(8, 256, 11)
    x[:, :64] = np.float32(1.0) + np.arange(64, dtype=np.float32) / np.float32(32)  # ties of e4m3 and e2m1
    for name in ("mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1"):
        plan = scaling.scaled_plan(rp.format(name), rp.Mode.NEAREST, None, None, np.float32)
        assert plan.by_adding and scaling._adding(plan, False) == 1 and scaling._adding(plan, True) == 1
        want = rp.round(x, name)
        with rounding_direction(direction):
            assert scaling._adding(plan, False) == 0
            got = rp.round(x, name)
            bits = scaling._run_blocks(x, plan, 0, 0, False, None, False)[0]  # without the default environment
        np.testing.assert_array_equal(bits.view(np.uint32), want.view(np.uint32))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        reference = rp.round(x.astype(np.float64), name).astype(np.float32)  # the general kernel
        np.testing.assert_array_equal(want.view(np.uint32), reference.view(np.uint32))
