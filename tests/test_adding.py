"""Rounding to nearest by adding a power of two (``rpfloat._kernels.adding``,
kernel ``loops.round_nearest_by_adding``).

It must agree bit for bit, NaN payloads included, with the bit-level kernel that
the oracle tests hold to exact arithmetic, over sweeps of every float16 pattern
and of float32 patterns covering every exponent (also sorted by magnitude, so
that most blocks of the fast loop hold no element outside its range), and it
must give way to the bit-level kernel wherever the thread's floating-point
environment is not the default.
"""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import environment, loops, table
from rpfloat._params import kernel_params
from sweeps import float32_sweep, sweeps
from fpenv import (
    DENORMALS_ARE_ZERO, FE_DOWNWARD, FE_TOWARDZERO, FE_UPWARD, FLUSH_TO_ZERO, X86_64_GLIBC, mxcsr_with,
    rounding_direction,
)

BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}

# Formats the kernel takes (float32 carrier, and so float64 too), with the ends
# of its range: 22 significand bits (one bit dropped), a smallest spacing of
# exactly 2**-126, and a power of two 2**(q + 23) of exactly 2**127 at the top.
ELIGIBLE = [
    rp.format("e4m3"), rp.format("e5m2"), rp.format("float16"), rp.format("float6_e3m2fn"),
    rp.format("float6_e2m3fn"), rp.format("float4_e2m1fn"), rp.format("float8_e3m4"), rp.format("float8_e4m3"),
    rp.FloatFormat(6, 9), rp.FloatFormat(5, 22), rp.FloatFormat(7, 3, bias=124), rp.FloatFormat(7, 20, bias=2),
    rp.FloatFormat(3, 1, inf=False, nan="max"), rp.FloatFormat(4, 3, nan=None, inf=False),
]
# Formats it must leave to the bit-level kernel in float32, and why.
NOT_IN_FLOAT32 = {
    "bfloat16: 2**(q + 23) overflows float32 near its largest values": rp.format("bfloat16"),
    "tf32: the same": rp.format("tf32"),
    "one spacing of 2**-127 is below float32's normals": rp.FloatFormat(7, 3, bias=125),
    "2**(q + 23) is 2**128 at the top": rp.FloatFormat(7, 20, bias=1),
    "no bit dropped": rp.FloatFormat(5, 23),
    "no subnormals": rp.FloatFormat(6, 9, subnormals=False),
    "no -0": rp.format("float8_e4m3fnuz"),
    "min_normal below float32's normals (deep)": rp.FloatFormat(8, 3, bias=200),
    "fixed point": rp.FixedFormat(8, 8),
}


def _policy(fmt) -> str:
    return "inf" if getattr(fmt, "has_inf", False) else "saturate"


def _params(fmt, dtype):
    return kernel_params(fmt, np.dtype(dtype), _policy(fmt))


def _run(kernel, xs, params):
    bits = BITS[xs.dtype]
    out = np.empty_like(xs)
    kernel(xs.view(bits), out.view(bits), params, params, layout.NEAREST, 0, 0, 64)
    return out


def test_eligibility():
    for fmt in ELIGIBLE:
        assert table.nearest_by_adding(_params(fmt, np.float32)) == 1, fmt
        assert table.nearest_by_adding(_params(fmt, np.float64)) == 1, fmt
    for why, fmt in NOT_IN_FLOAT32.items():
        assert table.nearest_by_adding(_params(fmt, np.float32)) == 0, why
    # float64 holds bfloat16's 2**(q + 52) and FloatFormat(9, 3)'s spacings
    assert table.nearest_by_adding(_params(rp.format("bfloat16"), np.float64)) == 1
    assert table.nearest_by_adding(_params(rp.FloatFormat(9, 3), np.float64)) == 1
    # the overflow policy acts outside the fast range
    assert table.nearest_by_adding(kernel_params(rp.format("e4m3"), np.dtype(np.float32), "nan")) == 1


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ELIGIBLE + [rp.format("bfloat16"), rp.FloatFormat(9, 3)], ids=repr)
def test_matches_bit_kernel(fmt):
    checked = 0
    for xs in sweeps():
        if rp.rounding.result_dtype(xs.dtype, fmt) != xs.dtype:  # FloatFormat(9, 3) needs float64
            continue
        params = _params(fmt, xs.dtype)
        if not table.nearest_by_adding(params):
            continue
        bits = BITS[xs.dtype]
        adding = table.kernel_for(bits, bits, params, layout.NEAREST)
        assert adding is table.entry_point_of(loops.round_nearest_by_adding, bits, bits)
        got = _run(adding, xs, params)
        want = _run(table.bit_level_kernel(bits, bits, params, layout.NEAREST), xs, params)
        bad = np.flatnonzero(got.view(bits) != want.view(bits))
        assert bad.size == 0, (f"{fmt!r} on {xs.dtype}: {bad.size} differ, e.g. x={xs[bad[:4]]!r} "
                               f"adding={got[bad[:4]]!r} bit kernel={want[bad[:4]]!r}")
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("fmt", [rp.format("e4m3"), rp.format("float16"), rp.FloatFormat(7, 3, bias=124)],
                         ids=repr)
def test_ties_go_to_even_at_every_spacing(fmt):
    """Through rp.round: ties at every spacing go to even, -0 stays -0, and
    values just above and below each tie go to their nearest neighbour."""
    assert table.nearest_by_adding(_params(fmt, np.float32))
    grid = np.unique(np.abs(fmt.values()[np.isfinite(fmt.values())])).astype(np.float32)
    mid = ((grid[:-1].astype(np.float64) + grid[1:]) / 2).astype(np.float32)  # exact: few bits
    above, below = np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(0))
    xs = np.concatenate([mid, above, below, -mid, grid, -grid, [-0.0]]).astype(np.float32)
    got = rp.round(xs, fmt, overflow=_policy(fmt))
    # the code of grid[i] is i (grid holds every magnitude in order), so a tie goes
    # to the even one of i and i + 1
    want_mid = np.where(np.arange(mid.size) % 2 == 1, grid[1:], grid[:-1])
    want = np.concatenate([want_mid, grid[1:], grid[:-1], -want_mid, grid, -grid, [-0.0]]).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.skipif(not X86_64_GLIBC, reason="sets MXCSR and the rounding direction through glibc's x86-64 fenv_t")
@pytest.mark.parametrize("setting", ["daz", "ftz", "down", "up", "toward_zero"])
def test_other_environments_take_the_bit_kernel(setting):
    """Under denormals-are-zero, flush-to-zero or another rounding direction the
    addition would round differently or read subnormals as 0: the bit-level
    kernel runs instead, with the default environment's results."""
    context = {"daz": lambda: mxcsr_with(DENORMALS_ARE_ZERO), "ftz": lambda: mxcsr_with(FLUSH_TO_ZERO),
               "down": lambda: rounding_direction(FE_DOWNWARD), "up": lambda: rounding_direction(FE_UPWARD),
               "toward_zero": lambda: rounding_direction(FE_TOWARDZERO)}[setting]
    xs = float32_sweep()
    for fmt in (rp.format("e4m3"), rp.FloatFormat(7, 3, bias=124), rp.format("float16")):
        params = _params(fmt, np.float32)
        want = rp.round(xs, fmt, overflow=_policy(fmt))
        with context():
            kernel = table.kernel_for(np.int32, np.int32, params, layout.NEAREST)
            got = rp.round(xs, fmt, overflow=_policy(fmt))
        assert kernel is table.bit_level_kernel(np.int32, np.int32, params, layout.NEAREST)
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32), err_msg=f"{fmt!r} {setting}")
    assert table.kernel_for(np.int32, np.int32, params, layout.NEAREST) is \
        table.entry_point_of(loops.round_nearest_by_adding, np.int32, np.int32)


def test_environment_probe_reads_this_thread():
    assert environment.environment() == environment.KEEPS_SUBNORMALS | environment.ROUNDS_TO_NEAREST
