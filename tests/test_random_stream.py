"""Stochastic rounding element by element: the documented stream and decision rule.

docs/rounding.md: with an int seed, the element at C-order flat index ``i`` draws the
``i``-th number of the seed's stream. ``rpfloat/_kernels/random.py`` documents
that stream; it is re-implemented here in plain Python integers, and with it the
result of every element is predicted exactly:

    R = number i of the stream (64 bits), r = rand_bits (64 when None)
    t = floor(P(hi) * 2**r), P(hi) from tests/reference.py (exact Fractions)
    stochastic:        hi  iff  floor((2**64 - 1 - R) / 2**(64 - r)) < t
    stochastic_equal:  hi  iff  R >= 2**63

so P(hi) is t / 2**r, as docs/randomness.md says. The kernel computes this in several ways
(a fast path adding random bits for ordinary magnitudes in blocks of elements, a
general path comparing with the fraction, 32-bit halves for float32 data, 64-bit
for float64); every one of them must give these bits, whatever its neighbours.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rpfloat as rp
from reference import round_reference, stochastic_probability
from rpfloat._kernels.cpu.loops import BLOCK, PIECE
from rpfloat.rounding import round_chunk
from stats_bounds import assert_binomial
from stream_reference import MASK_64, seed_key, stream  # the documented stream, in plain Python integers


def predicted(x: np.ndarray, fmt, mode: str, seed: int, rand_bits, offset: int, result_dtype) -> np.ndarray:
    key = seed_key(seed)
    r = 64 if rand_bits is None else rand_bits
    out = np.empty(x.size, result_dtype)
    for i, value in enumerate(x.ravel()):
        lo, hi, p = stochastic_probability(value, fmt, rand_bits, mode=mode, dtype=result_dtype)
        random = stream(key, offset + i)
        if mode == "stochastic":
            threshold = math.floor(p * 2**r)
            up = ((MASK_64 - random) >> (64 - r)) < threshold
        else:
            up = p != 0 and random >> 63 == 1
        out[i] = hi if up else lo
    return out


def mixed_sample(dtype, seed: int) -> np.ndarray:
    """A block of plain values (the kernel's fast path in every mode), a block of
    values down to zero (the fast path of the deterministic modes: format
    subnormals, below one spacing, signed zeros), then two blocks of every kind
    of value mixed (the general path): huge, inf, NaN, carrier subnormals."""
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], 4 * BLOCK)

    def plain_values():  # in [0.5, 3]; half of them of 2 to 14 significant bits: ties
        length = rng.integers(1, 14, BLOCK)
        short = rng.integers(2.0 ** (length - 1), 3 * 2.0 ** (length - 1), endpoint=True) / 2.0**length * 2
        return np.where(rng.random(BLOCK) < 0.5, short, rng.uniform(0.5, 3.0, BLOCK))

    plain = plain_values()
    small = plain_values() * 2.0 ** -rng.integers(0, 40, BLOCK)
    small[::9] = 0.0
    wild = rng.standard_normal(2 * BLOCK) * 2.0 ** rng.integers(-40, 40, 2 * BLOCK)
    wild[::17] = rng.choice([0.0, np.inf, np.nan, 1.0, 2.0**-20, 1e30, 2.0**-140], wild[::17].size)
    return (np.concatenate([plain, small, wild]) * signs).astype(dtype)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same(got: np.ndarray, expected: np.ndarray, context: str):
    got, expected = got.ravel(), expected.ravel()
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), context
    wrong = np.flatnonzero(bits(got[~nan]) != bits(expected[~nan]))
    assert wrong.size == 0, f"{context}: {wrong.size} elements differ, first at {wrong[0]}"


FORMATS = [
    "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float6_e3m2fn", "float4_e2m1fn",
    rp.FloatFormat(5, 0),  # no significand bits: general path only
    rp.FloatFormat(6, 9), rp.FloatFormat(6, 9, subnormals=False),
    rp.FloatFormat(None, 7),
    rp.FloatFormat(11, 10),  # below float32's normals: the general path's rare branch
    rp.FixedFormat(8, 8), rp.FixedFormat(4, 4, overflow="wrap"),
    # too wide for float32: float32 data round in float32 lanes into a float64 result
    rp.FixedFormat(16, 16), rp.FixedFormat(30, 2), rp.FixedFormat(20, 10, signed=False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_every_element_draws_its_own_number(fmt, dtype):
    fmt = rp.format(fmt)
    x = mixed_sample(dtype, seed=len(repr(fmt)))
    result_dtype = np.result_type(x.dtype, fmt.carrier)
    for rand_bits in (None, 5, 40):
        got = rp.round(x, fmt, "stochastic", rng=11, rand_bits=rand_bits)
        expected = predicted(x, fmt, "stochastic", 11, rand_bits, 0, result_dtype)
        assert_same(got, expected, f"{fmt!r} {np.dtype(dtype)} rand_bits={rand_bits}")


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", rp.FixedFormat(8, 8)], ids=repr)
def test_stochastic_equal_reads_the_top_bit(fmt):
    x = mixed_sample(np.float32, seed=3)
    got = rp.round(x, fmt, "stochastic_equal", rng=5)
    dtype = np.result_type(x.dtype, rp.format(fmt).carrier)
    assert_same(got, predicted(x, rp.format(fmt), "stochastic_equal", 5, None, 0, dtype), repr(fmt))


@pytest.mark.parametrize("offset", [2**32 - 150, 2**33 - 1, 2**40 + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_segments_of_two_to_the_32_numbers(offset, dtype):
    """Indices past 2**32 change the segment key; a chunk may straddle the boundary."""
    x = mixed_sample(dtype, seed=8)[: BLOCK + 40]
    got = round_chunk(x, "float8_e5m2", "stochastic", rng=2, offset=offset)
    expected = predicted(x, rp.format("float8_e5m2"), "stochastic", 2, None, offset, np.result_type(x.dtype, np.float16))
    assert_same(got, expected, f"offset {offset}")


def test_the_fast_path_does_not_depend_on_neighbours():
    """One unusual value in a block sends the block down the general path; the
    other elements' results must not change."""
    x = np.random.default_rng(1).uniform(-3, 3, 8 * BLOCK).astype(np.float32)
    plain = rp.round(x, "bfloat16", "stochastic", rng=4)
    spoiled = x.copy()
    spoiled[::3 * BLOCK // 2] = np.nan
    got = rp.round(spoiled, "bfloat16", "stochastic", rng=4)
    keep = ~np.isnan(spoiled)
    np.testing.assert_array_equal(bits(got[keep]), bits(plain[keep]))


def test_the_reference_stream_is_not_degenerate():
    """Sanity of this file's own oracle: distinct, balanced 64-bit numbers."""
    numbers = [stream(seed_key(0), i) for i in range(2000)]
    assert len(set(numbers)) == len(numbers)
    ones = sum(bin(n).count("1") for n in numbers)
    # five counts; were the bits fair coins, any of them fails with probability below 1e-6 (stats_bounds.py)
    delta = 1e-6 / 5
    assert_binomial(ones, 64 * len(numbers), 0.5, delta, "ones among the stream's bits")
    for bit in (0, 31, 32, 63):  # each bit position on its own, the top bit (stochastic_equal's) included
        ones = sum(n >> bit & 1 for n in numbers)
        assert_binomial(ones, len(numbers), 0.5, delta, f"bit {bit} of the stream")


@pytest.mark.parametrize("mode", ["nearest", "nearest_away", "toward_zero", "up", "down", "odd"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_deterministic_modes_on_both_paths(fmt, dtype, mode):
    """The same blocks in the deterministic modes, against the exact oracle."""
    fmt = rp.format(fmt)
    x = mixed_sample(dtype, seed=len(mode))
    result_dtype = np.result_type(x.dtype, fmt.carrier)
    expected = np.array([round_reference(value, fmt, mode, dtype=result_dtype) for value in x], result_dtype)
    assert_same(rp.round(x, fmt, mode), expected, f"{fmt!r} {np.dtype(dtype)} {mode}")


WIDE_FIXED = [
    rp.FixedFormat(16, 16), rp.FixedFormat(30, 2), rp.FixedFormat(-4, 40), rp.FixedFormat(2, 51),
    rp.FixedFormat(26, 0), rp.FixedFormat(40, -8), rp.FixedFormat(20, 10, signed=False),
    rp.FixedFormat(-120, 150),  # one spacing below float32's subnormals: no float32 fast path
    rp.FixedFormat(-110, 140), rp.FixedFormat(-100, 126),  # one spacing a float32 subnormal; normal
    rp.FixedFormat(16, 16, overflow="wrap"),
    rp.FixedFormat(131, -105), rp.FixedFormat(140, -100),  # max beyond float32's
]


@pytest.mark.parametrize("fmt", WIDE_FIXED, ids=repr)
def test_float32_into_float64_is_float64_rounding(fmt):
    """float32 data rounded onto a fixed-point format too wide for float32 (the
    widening kernel: float32 lanes where the result fits float32, float64
    elsewhere) give the bits that the same values given as float64 give, in
    every mode and both stochastic resolutions; also as complex64 parts and in
    chunks with offsets."""
    x = mixed_sample(np.float32, seed=fmt.bits)
    # the plain block into the format's range: near its top (float32 may hold the
    # grid there), and where 14-bit values tie at half a spacing
    top = min(fmt.int_bits - 3, 120)
    x[:BLOCK // 2] *= np.float32(2.0**top)
    x[BLOCK // 2:BLOCK] *= np.float32(2.0 ** min(top, 12 - fmt.frac_bits))
    # around the largest float32 at or below max, and beyond it, one per piece of
    # the fast block (a piece holding a value beyond the fast range is redone)
    with np.errstate(over="ignore"):  # a max beyond float32's: inf
        edges = np.array([fmt.max, -fmt.max, fmt.min, 2.0 * fmt.max, fmt.max * (1 - 2.0**-20), 2.0**127,
                          np.finfo(np.float32).max], np.float32)
        edges = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf)])
    x[5:BLOCK:PIECE][:edges.size] = edges
    for mode in ["nearest", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic", "stochastic_equal"]:
        for rand_bits in ([None, 13] if mode == "stochastic" else [None]):
            got = rp.round(x, fmt, mode, rng=3, rand_bits=rand_bits)
            expected = rp.round(x.astype(np.float64), fmt, mode, rng=3, rand_bits=rand_bits)
            assert got.dtype == np.float64
            assert_same(got, expected, f"{fmt!r} {mode} rand_bits={rand_bits}")
    pairs = x[: 2 * BLOCK].view(np.complex64)
    got = rp.round(pairs, fmt, "stochastic", rng=4)
    expected = rp.round(pairs.astype(np.complex128), fmt, "stochastic", rng=4)
    assert_same(got.view(np.float64), expected.view(np.float64), f"{fmt!r} complex64")
    got = np.concatenate([round_chunk(x[:777], fmt, "stochastic", rng=6),
                          round_chunk(x[777:], fmt, "stochastic", rng=6, offset=777)])
    assert_same(got, rp.round(x.astype(np.float64), fmt, "stochastic", rng=6), f"{fmt!r} chunks")


UNSIGNED = [rp.FixedFormat(8, 8, signed=False), rp.FixedFormat(20, 10, signed=False), rp.FixedFormat(2, 5, signed=False)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", UNSIGNED, ids=repr)
def test_unsigned_formats_on_both_paths(fmt, dtype):
    """Unsigned fixed point: positive values take the fast path, negative ones
    (a few per block, so that the other pieces stay on it) the general path."""
    x = np.abs(mixed_sample(dtype, seed=fmt.bits))
    x[::301] *= -1
    x[7::1001] = -0.0
    result_dtype = np.result_type(x.dtype, fmt.carrier)
    for mode in ["nearest", "nearest_away", "toward_zero", "up", "down", "odd"]:
        expected = np.array([round_reference(value, fmt, mode, dtype=result_dtype) for value in x], result_dtype)
        assert_same(rp.round(x, fmt, mode), expected, f"{fmt!r} {np.dtype(dtype)} {mode}")
    for rand_bits in (None, 5):
        got = rp.round(x, fmt, "stochastic", rng=12, rand_bits=rand_bits)
        expected = predicted(x, fmt, "stochastic", 12, rand_bits, 0, result_dtype)
        assert_same(got, expected, f"{fmt!r} {np.dtype(dtype)} stochastic rand_bits={rand_bits}")
