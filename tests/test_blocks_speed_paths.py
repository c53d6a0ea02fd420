"""The fast kernel of the scaled formats (``rpfloat._kernels.cpu.blocks``) where
its loops run LANES elements at a time (with prefetches ahead of them) and a
remainder, and where it checks run by run for the elements below its fast
range: those elements at every place of a run, of a piece of a long block and
of a short block, against the general kernel (float64 arithmetic), bit for bit."""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu.blocks import LANES, PIECE
from test_blocks_fast import _run_both as run_both


def _run_both(x, fmt, mode, key):
    return run_both(x, fmt, mode, key, 64, offset=3)


def _assert_same(x, fmt, modes, key=5):
    for mode in modes:
        (fast, fast_scales), (general, general_scales) = _run_both(x, fmt, mode, key)
        bad = np.flatnonzero(fast.view(np.uint32) != general.view(np.uint32))
        assert bad.size == 0, (f"{fmt!r} mode {mode}: {bad.size} differ at {bad[:5]}, e.g. "
                               f"x={x.ravel()[bad[:3]]!r} fast={fast.ravel()[bad[:3]]!r} "
                               f"general={general.ravel()[bad[:3]]!r}")
        np.testing.assert_array_equal(fast_scales, general_scales)


def _tiny_at(x, positions, seed):
    """`x` with tiny values (below any fast range: 2**-30 to 2**-20 of the
    data, some float32 subnormals) at `positions` of every row."""
    rng = np.random.default_rng(seed)
    x = x.copy()
    tiny = rng.standard_normal((x.shape[0], len(positions))) * 2.0 ** rng.integers(-30, -20, (x.shape[0], 1))
    x[:, positions] = tiny.astype(np.float32)
    x[0, positions[1]] = np.float32(-3e-41)  # a subnormal
    return x


MODES = (layout.NEAREST, layout.DOWN, layout.STOCHASTIC, layout.STOCHASTIC_EQUAL)


@pytest.mark.parametrize("fmt", [rp.ScaledFormat(rp.FixedFormat(8, 0)), rp.ScaledFormat("e4m3")], ids=repr)
def test_long_blocks_below_the_range_at_every_place_of_a_run(fmt):
    """One scale per row: pieces of PIECE elements, each in runs of LANES and a
    remainder (the row's last piece), with tiny elements first, last and inside
    a run, at the pieces' edges and in the remainder."""
    length = 2 * PIECE + 3 * LANES + 7
    x = np.random.default_rng(1).standard_normal((2, length)).astype(np.float32)
    positions = [0, 1, LANES - 1, LANES, 5 * LANES + 17, PIECE - 1, PIECE, PIECE + LANES - 1,
                 2 * PIECE + 3 * LANES - 1, 2 * PIECE + 3 * LANES, length - 1]
    _assert_same(_tiny_at(x, positions, 2), fmt, MODES)


def test_long_blocks_where_every_run_holds_elements_below_the_range():
    x = np.random.default_rng(3).standard_normal((1, PIECE + 40)).astype(np.float32)
    x = _tiny_at(x, list(range(0, x.shape[1], 29)), 4)
    _assert_same(x, rp.ScaledFormat(rp.FixedFormat(8, 0)), MODES)


@pytest.mark.parametrize("block_size", [48, 100])
def test_short_blocks_in_runs_and_a_remainder(block_size):
    """Blocks that are not a power of two: one or more runs of LANES, then the
    rest of the block, tiny elements in both."""
    fmt = rp.ScaledFormat("e4m3", block_size=block_size)
    x = np.random.default_rng(5).standard_normal((3, 7 * block_size + 11)).astype(np.float32)
    positions = [b * block_size + k for b in range(7) for k in (0, LANES - 1, LANES, block_size - 1)]
    _assert_same(_tiny_at(x, positions + [x.shape[1] - 1], 6), fmt, MODES)


def test_rows_shorter_than_the_prefetch_distance():
    """Prefetches reach past a row's and the array's end: harmless."""
    for length in (1, LANES - 1, LANES, LANES + 1, 3 * LANES + 5):
        x = np.random.default_rng(length).standard_normal((2, length)).astype(np.float32)
        for fmt in (rp.format("mxfp8_e4m3"), rp.ScaledFormat("e4m3"), rp.ScaledFormat("e2m1", block_size=40)):
            _assert_same(x, fmt, (layout.NEAREST, layout.STOCHASTIC))


@pytest.mark.parametrize("fmt", [rp.format("mxint8"), rp.format("mxfp4_e2m1"),
                                 rp.ScaledFormat(rp.FixedFormat(2, 6), block_size=64)], ids=repr)
def test_chunked_blocks_outside_the_range_at_every_place_of_a_run(fmt):
    """Chunked blocks (pass D finds the elements outside the fast range LANES
    at a time): tiny elements and elements near a block's max (which round
    past the element's max for int8 elements) first, last and inside a run,
    and in a ragged last block's runs and remainder."""
    block = fmt.block_size
    length = 5 * block + LANES + 9  # a ragged last block: a run and a remainder
    x = np.random.default_rng(7).standard_normal((3, length)).astype(np.float32)
    positions = [0, 1, LANES - 1, LANES, block - 1, 2 * block + 17, 5 * block, 5 * block + LANES - 1,
                 5 * block + LANES, length - 1]
    x = _tiny_at(x, positions, 8)
    for b in range(0, length, block):  # the block's max just below a power of two, others near it
        x[:, b + 3] = np.float32(1.999)
        if b + block + 1 < length:
            x[:, min(b + block - 1, length - 1)] = np.float32(-1.996)
    _assert_same(x, fmt, MODES)


@pytest.mark.parametrize("fmt", [rp.ScaledFormat(rp.FixedFormat(8, 0)), rp.ScaledFormat("e4m3"),
                                 rp.ScaledFormat("e2m1", block_size=3 * PIECE + 100)], ids=repr)
def test_long_blocks_whose_largest_grows_piece_by_piece(fmt):
    """A block of several pieces is rounded piece by piece in the pass for its
    largest, with the exponent of the largest so far, and rounded again where
    that exponent was not the final one: maxima that grow binade by binade
    (every earlier piece again), that grow within the final binade past the
    range of the fast loop (int8: past 127, those elements again in float64), NaN
    or inf in a late piece, tiny elements in pieces rounded early, a last
    piece of a few elements, counters crossing a 2**32 segment in a piece."""
    rng = np.random.default_rng(11)
    length = 5 * PIECE + 37
    base = rng.standard_normal((1, length)).astype(np.float32)
    rows = []
    grow = base.copy()
    for piece in range(6):  # the largest doubles piece by piece
        grow[0, piece * PIECE:(piece + 1) * PIECE] *= np.float32(2.0**piece)
    rows.append(grow)
    late = base.copy() / np.float32(4.0)
    late[0, 10] = 100.0  # the final binade from the first piece
    late[0, 4 * PIECE + 5] = 127.7  # then past int8's 127 in the same binade
    rows.append(late)
    early_max = base.copy()
    early_max[0, 3] = 1000.0  # the final exponent from the first piece: no piece again
    rows.append(early_max)
    for special in (np.nan, np.inf, -np.inf):
        row = base.copy()
        row[0, 3 * PIECE + 1] = special
        rows.append(row)
    x = np.concatenate(rows)
    x = _tiny_at(x, [1, PIECE - 1, 2 * PIECE + 3, length - 1], 12)
    _assert_same(x, fmt, MODES)
    for mode in (layout.STOCHASTIC, layout.STOCHASTIC_EQUAL):
        for offset in (2**32 - PIECE - 50, 2**32 - 3 * PIECE):
            (fast, fast_scales), (general, general_scales) = run_both(x[:2], fmt, mode, 9, 64, offset=offset)
            np.testing.assert_array_equal(fast.view(np.uint32), general.view(np.uint32))
            np.testing.assert_array_equal(fast_scales, general_scales)


@pytest.mark.parametrize("fmt", [rp.ScaledFormat(rp.FixedFormat(8, 0)),
                                 rp.ScaledFormat(rp.FixedFormat(8, 0), block_size=100),
                                 rp.format("mxint8")], ids=repr)
def test_two_complement_blocks_past_the_positive_max_at_every_place_of_a_run(fmt):
    """A two's complement element's blocks whose max lies between its positive
    and its negative max (int8: 127 and -128 spacings): long blocks take the fast
    loop and round the elements past the range again in float64; MX nearest
    (by adding) clamps them to the negative max and caps the positive results.
    Such elements of both signs, ties among them, first, last and inside a run,
    at pieces' edges and in a remainder."""
    spacing = 1.0 if fmt.block_size != 32 else 2.0**-6
    length = 2 * PIECE + 3 * LANES + 7
    x = np.random.default_rng(13).standard_normal((3, length)).astype(np.float32) * np.float32(20 * spacing)
    positions = [0, 1, LANES - 1, LANES, 5 * LANES + 17, PIECE - 1, PIECE, PIECE + LANES - 1,
                 2 * PIECE + 3 * LANES - 1, 2 * PIECE + 3 * LANES, length - 1]
    edge = np.array([127.5, -127.5, 127.2, -127.2, 127.75, -127.75, 128 - 2**-16, -(128 - 2**-16), 127.0, -127.0,
                     -128.0 + 2**-10]) * spacing
    for row in range(3):
        x[row, positions] = np.roll(edge, row).astype(np.float32) * np.float32(2.0**(3 * row - 3))
        x[row] *= np.float32(2.0**(3 * row - 3))
    if fmt.block_size is not None:  # one such element in every block
        for b in range(0, length, fmt.block_size):
            x[:, b + (b // fmt.block_size) % min(fmt.block_size, length - b)] = np.float32(
                edge[(b // fmt.block_size) % edge.size] * 2.0**-3)
    _assert_same(x, fmt, layout.ALL_MODES)
