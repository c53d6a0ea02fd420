"""The exact-rounding kernels behind RPArray's ``/``, ``sqrt`` and ``reciprocal``
(``rpfloat._kernels.cpu.accumulate``): the residuals of a quotient and a square
root against Fraction arithmetic, and stochastic rounding of (value, residual)
pairs by integer arithmetic (``stochastic_pair``) against ``round_exact``, at
the random numbers on both sides of the exact threshold."""
import math
from fractions import Fraction

import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core.layout import STOCHASTIC
from rpfloat._kernels.cpu.accumulate import (
    divide_exactly, round_exact, round_pairs_at, sqrt_exactly, stochastic_pair, stochastic_pairs,
)
from rpfloat.accumulate import bounded_format, rounding_setup

FORMATS = ["bfloat16", "float16", "e4m3", "e5m2", "e2m1", "e3m2", rp.FloatFormat(5, 3, subnormals=False), "q8.8",
           "uq4.4", rp.FloatFormat(8, 23), rp.FloatFormat(11, 30), rp.FloatFormat(None, 10),
           rp.FloatFormat(4, 3, overflow="saturate")]


def exact_remainder(a, b, quotient):
    return Fraction(float(a)) - Fraction(float(quotient)) * Fraction(float(b))


def test_quotient_residuals_hold_the_exact_remainder():
    rng = np.random.default_rng(1)
    a = rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000)
    b = rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000)
    quotient, residual = np.empty_like(a), np.empty_like(a)
    divide_exactly(a, b, quotient, residual)
    np.testing.assert_array_equal(quotient, a / b)
    for i in range(a.size):
        remainder = exact_remainder(a[i], b[i], quotient[i])
        assert float(remainder) == remainder  # a float64: the fma holds it exactly
        assert residual[i] == float(remainder) / b[i]


def test_root_residuals_hold_the_exact_remainder():
    a = np.random.default_rng(2).random(2000) * 10.0 ** np.arange(-20, 20, 0.02)
    root, residual = np.empty_like(a), np.empty_like(a)
    sqrt_exactly(a, root, residual)
    np.testing.assert_array_equal(root, np.sqrt(a))
    for i in range(a.size):
        remainder = Fraction(float(a[i])) - Fraction(float(root[i])) ** 2
        assert float(remainder) == remainder
        assert residual[i] == float(remainder) / (2.0 * root[i])


def pairs(fmt, rng):
    """(value, residual) pairs: quotients of format values (tiny ones, below one
    spacing, among them), and grid values and their float64 neighbours with
    small residuals either way."""
    def values(size, scale):
        return np.asarray(rp.round(rng.standard_normal(size) * scale, fmt), dtype=np.float64)

    a, b = values(400, 4.0), values(400, 4.0)
    b[:50] *= 1e3  # quotients below the format's smallest spacing
    keep = np.isfinite(a) & np.isfinite(b) & (b != 0)
    quotient, residual = np.empty(keep.sum()), np.empty(keep.sum())
    divide_exactly(a[keep], b[keep], quotient, residual)
    grid = values(100, 4.0)
    grid = grid[np.isfinite(grid) & (grid != 0)]
    step = np.spacing(grid)
    edge_values = np.concatenate([grid, grid, np.nextafter(grid, np.inf), np.nextafter(grid, -np.inf)])
    edge_residuals = np.concatenate([step / 4, -step / 4, -step / 2, step / 2 * 0.999])
    return np.concatenate([quotient, edge_values]), np.concatenate([residual, edge_residuals])


def same_bits(left, right):
    return np.float64(left).view(np.int64) == np.float64(right).view(np.int64)


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_stochastic_pairs_round_as_round_exact(fmt):
    fmt = rp.format(fmt)
    params, midpoints, _ = rounding_setup(bounded_format(fmt, np.float64))
    rng = np.random.default_rng(3)
    taken = 0
    for value, residual in zip(*pairs(fmt, rng)):
        if not (np.isfinite(value) and np.isfinite(residual)):
            continue
        value, residual = float(value), float(residual)
        randoms = [0, 2**64 - 1, int(rng.integers(2**63)) * 2 + 1]
        done, low = stochastic_pair(value, residual, params, np.uint64(0), 64)
        if done and residual != 0.0:
            high = stochastic_pair(value, residual, params, np.uint64(2**64 - 1), 64)[1]
            lower, upper = sorted([abs(Fraction(low)), abs(Fraction(high))])
            if lower != upper:  # the exact threshold and the number below it
                threshold = math.floor((abs(Fraction(value) + Fraction(residual)) - lower) / (upper - lower) * 2**64)
                randoms += [random for random in (threshold - 1, threshold) if 0 <= random < 2**64]
        for random in randoms:
            done, got = stochastic_pair(value, residual, params, np.uint64(random), 64)
            if done:
                taken += 1
                want = round_exact(value, residual, params, midpoints, STOCHASTIC, np.uint64(random), 64)
                assert same_bits(got, want), (value, residual, random, got, want)
    assert taken > 500  # the fast route takes most pairs


def test_stochastic_pairs_leave_the_rare_ones():
    """Below one spacing, near overflow, without a residual, and at NaN: the
    pair goes to round_exact."""
    params, _, _ = rounding_setup(rp.format("e4m3"))
    for value, residual in ((2.0**-11, 2.0**-70), (448.0, 1e-13), (1.5, 0.0), (np.nan, 1e-20), (np.inf, 0.0)):
        assert not stochastic_pair(value, residual, params, np.uint64(5), 64)[0], (value, residual)
    assert stochastic_pair(1.5 + 2.0**-40, 2.0**-95, params, np.uint64(5), 64)[0]


@pytest.mark.parametrize("fmt", ["bfloat16", "e4m3", rp.FloatFormat(5, 3, subnormals=False), "q8.8"], ids=str)
def test_stochastic_pairs_then_round_pairs_at_give_round_pairs_at(fmt):
    """The dense kernel (blocks of 256, pending pairs collected) and then the
    scalar one on the pending pairs: the bits of the scalar one on every pair
    with a residual; pairs without one keep what `out` held."""
    fmt = rp.format(fmt)
    params, midpoints, _ = rounding_setup(bounded_format(fmt, np.float64))
    values, residuals = pairs(fmt, np.random.default_rng(4))
    keep = np.isfinite(values) & np.isfinite(residuals)
    values, residuals = np.append(values[keep], 1e-300), np.append(residuals[keep], 1e-320)  # one far below
    residuals[::7] = 0.0  # some exact pairs
    held = np.asarray(rp.round(values, fmt, "stochastic", rng=9), dtype=np.float64)
    key = np.uint64(12345)
    want = held.copy()
    round_pairs_at(values, residuals, np.flatnonzero(residuals), want, params, midpoints, STOCHASTIC, key, 64)
    got = held.copy()
    pending = np.empty(values.size, np.int64)
    count = stochastic_pairs(values, residuals, got, params, key, 64, pending)
    assert 0 < count < np.count_nonzero(residuals) / 2  # some pairs pending, most done in the dense kernel
    assert np.all(residuals[pending[:count]] != 0) and np.all(np.diff(pending[:count]) > 0)
    round_pairs_at(values, residuals, pending[:count], got, params, midpoints, STOCHASTIC, key, 64)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    np.testing.assert_array_equal(got[residuals == 0], held[residuals == 0])
