"""Rounding with one bit count for the whole fast range
(``rpfloat._kernels.uniform``, kernels ``loops.UNIFORM_KERNELS``): bfloat16
and tf32 in float32, and formats without subnormals, in every deterministic
mode, and stochastic rounding onto bfloat16 and tf32.

It must agree bit for bit, NaN payloads included, with the bit-level kernel that
the oracle tests hold to exact arithmetic, over sweeps of every float16 pattern
and of float32 patterns covering every exponent (also sorted by magnitude). It
works on integers, so the thread's floating-point environment must not matter.
"""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import loops, table
from rpfloat._params import kernel_params
from fpenv import DENORMALS_ARE_ZERO, FE_UPWARD, FLUSH_TO_ZERO, X86_64_GLIBC, mxcsr_with, rounding_direction
from sweeps import assert_same_stochastic, float32_sweep, sweeps

BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}

# Formats the kernel takes in float32 (and float64 unless noted below), with
# its ends: one bit dropped (22 significand bits), one significand bit, ties
# below min_normal that go up (no subnormals), and min_normal at float32's
# smallest normal.
ELIGIBLE = [
    rp.FloatFormat(6, 9, subnormals=False), rp.FloatFormat(4, 3, subnormals=False),
    rp.FloatFormat(2, 1, subnormals=False), rp.FloatFormat(8, 22, subnormals=False),
    rp.FloatFormat(5, 2, subnormals=False, inf=False, nan="max"), rp.FloatFormat(8, 4, subnormals=False),
]
FLOAT32_ONLY = [rp.format("bfloat16"), rp.format("tf32")]  # float64 takes them by adding
NOT_ELIGIBLE = {
    "subnormals above float32's normals": rp.format("e4m3"),
    "the same": rp.format("float16"),
    "no -0": rp.FloatFormat(4, 3, subnormals=False, inf=False, nan="negzero"),
    "no significand bits": rp.FloatFormat(3, 0, subnormals=False),
    "no bit dropped": rp.FloatFormat(5, 23, subnormals=False),
    "fixed point": rp.FixedFormat(8, 8),
}


def _policy(fmt) -> str:
    return "inf" if getattr(fmt, "has_inf", False) else "saturate"


def _params(fmt, dtype):
    return kernel_params(fmt, np.dtype(dtype), _policy(fmt))


MODES = {"nearest": layout.NEAREST, "nearest_away": layout.NEAREST_AWAY, "toward_zero": layout.TOWARD_ZERO,
         "up": layout.UP, "down": layout.DOWN, "odd": layout.ODD}


def _run(kernel, xs, params, mode=layout.NEAREST):
    bits = BITS[xs.dtype]
    out = np.empty_like(xs)
    kernel(xs.view(bits), out.view(bits), params, params, mode, 0, 0, 64)
    return out


def test_eligibility():
    for fmt in ELIGIBLE:
        for dtype in (np.float32, np.float64):
            assert table.uniform_drop(_params(fmt, dtype)) == 1, (fmt, dtype)
            assert table.nearest_by_adding(_params(fmt, dtype)) == 0, (fmt, dtype)
    for fmt in FLOAT32_ONLY:
        assert table.uniform_drop(_params(fmt, np.float32)) == 1, fmt
        assert table.uniform_drop(_params(fmt, np.float64)) == 0, fmt
    for why, fmt in NOT_ELIGIBLE.items():
        assert table.uniform_drop(_params(fmt, np.float32)) == 0, why


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", ELIGIBLE + FLOAT32_ONLY, ids=repr)
def test_matches_bit_kernel(fmt, mode):
    mode = MODES[mode]
    checked = 0
    for xs in sweeps():
        params = _params(fmt, xs.dtype)
        if not table.uniform_drop(params):
            continue
        bits = BITS[xs.dtype]
        uniform = table.kernel_for(bits, bits, params, mode)
        assert uniform is table.entry_point_of(loops.UNIFORM_KERNELS[mode], bits, bits)
        got = _run(uniform, xs, params, mode)
        want = _run(table.bit_level_kernel(bits, bits, params, mode), xs, params, mode)
        bad = np.flatnonzero(got.view(bits) != want.view(bits))
        assert bad.size == 0, (f"{fmt!r} on {xs.dtype}: {bad.size} differ, e.g. x={xs[bad[:4]]!r} "
                               f"uniform={got[bad[:4]]!r} bit kernel={want[bad[:4]]!r}")
        checked += 1
    assert checked >= 2


def test_stochastic_equal_takes_the_bit_kernel():
    params = _params(rp.format("bfloat16"), np.float32)
    assert table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC_EQUAL) is \
        table.bit_level_kernel(np.int32, np.int32, params, layout.STOCHASTIC_EQUAL)


def test_below_min_normal_without_subnormals():
    """Without subnormals, magnitudes below min_normal give 0 or min_normal, and a
    tie at min_normal / 2 goes up (docs/rounding.md: the spacing below min_normal is min_normal)."""
    fmt = rp.FloatFormat(4, 3, subnormals=False)
    low = fmt.min_normal
    xs = np.array([low / 2, np.nextafter(np.float32(low / 2), 0), low / 4, 0.0, -0.0, -low / 2, low * 0.75],
                  np.float32)
    got = rp.round(xs, fmt)
    want = np.array([low, 0.0, 0.0, 0.0, -0.0, -low, low], np.float32)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets MXCSR and the rounding direction through glibc's x86-64 fenv_t")
def test_environment_does_not_matter():
    xs = float32_sweep()
    for fmt in (rp.format("bfloat16"), rp.FloatFormat(4, 3, subnormals=False)):
        params = _params(fmt, np.float32)
        want = rp.round(xs, fmt)
        for context in (lambda: mxcsr_with(DENORMALS_ARE_ZERO | FLUSH_TO_ZERO),
                        lambda: rounding_direction(FE_UPWARD)):
            with context():
                kernel = table.kernel_for(np.int32, np.int32, params, layout.NEAREST)
                got = rp.round(xs, fmt)
            assert kernel is table.entry_point_of(loops.UNIFORM_KERNELS[layout.NEAREST], np.int32, np.int32)
            np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32), err_msg=repr(fmt))


STOCHASTIC_FORMATS = [rp.format("bfloat16"), rp.format("tf32"), rp.FloatFormat(8, 22), rp.FloatFormat(8, 1)]


def test_stochastic_eligibility():
    for fmt in STOCHASTIC_FORMATS:
        assert table.stochastic_uniform(_params(fmt, np.float32)) == 1, fmt
        assert table.stochastic_uniform(_params(fmt, np.float64)) == 0, fmt
    # a stochastic range that starts below min_normal (0 or min_normal drawn there)
    assert table.stochastic_uniform(_params(rp.FloatFormat(4, 3, subnormals=False), np.float32)) == 0
    assert table.stochastic_uniform(_params(rp.format("e4m3"), np.float32)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("fmt", STOCHASTIC_FORMATS, ids=repr)
def test_stochastic_matches_bit_kernel(fmt):
    """Every element draws the bits the bit-level kernel draws for it, for every
    rand_bits, key and offset (a counter that crosses a 2**32 boundary too)."""
    params = _params(fmt, np.float32)
    uniform = table.kernel_for(np.int32, np.int32, params, layout.STOCHASTIC)
    assert uniform is table.entry_point_of(loops.UNIFORM_KERNELS[layout.STOCHASTIC], np.int32, np.int32)
    bit_kernel = table.bit_level_kernel(np.int32, np.int32, params, layout.STOCHASTIC)
    assert_same_stochastic(uniform, bit_kernel, params, layout.STOCHASTIC, repr(fmt))
