"""The stochastic fast kernel's compiled copies (``rpfloat._kernels.cpu.blocks``:
BIT_LOOPS, UNIFORM_LOOPS with `_uniform_stochastic_element`, GRID_LOOPS with
`_grid_stochastic_element`) against the general block kernel (float64
arithmetic), bit for bit, each copy on its own: the bit and uniform copies for
every element format the fast kernel takes, the grid copy where
`has_grid_loops` accepts the format. Hypothesis draws element formats (float
with and without subnormals, odd biases, one binade of normals, NaN/-0
variants; fixed point of every word and scale the fast kernel takes), block
sizes (chunked, ragged, long, one per row), scale roundings, `rand_bits` and
data; explicit cases probe the edges of each loop: the uniform loop's least
normal, the per-tensor redo of a run, the grid loop's 2**-8 spacings and its
top, extreme block scales and random counters near 2**32 segments."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import blocks
from rpfloat._kernels.cpu.blocks import BIT_LOOPS, GRID_LOOPS, UNIFORM_LOOPS, fast_kernel, general_kernel
from strategies import fixed_formats, float_formats, scaled_formats

RAND_BITS = [64, 1, 2, 8, 9, 23, 24, 25, 31, 32, 33, 63]
BOUNDARY_OFFSETS = [0, 7, 2**32 - 40, 2**32 - 4096 - 5, 2**33 - 100, 2**32 + 1]


def _plan(fmt, rand_bits):
    return scaling.scaled_plan(fmt, rp.Mode.STOCHASTIC, None, None if rand_bits == 64 else rand_bits, np.float32)


def _float(bits):
    return float(np.int32(bits).view(np.float32))


def _copies(plan):
    """The fast kernel's stochastic copies that serve the plan's element format:
    the bit and uniform ones always (the uniform one checks its runs), the grid
    one where `has_grid_loops`."""
    copies = [BIT_LOOPS, UNIFORM_LOOPS]
    if blocks.has_grid_loops(plan.fast_params):
        copies.append(GRID_LOOPS)
    return copies


def _run(x, fmt, plan, loops, key, offset):
    """``(values, scales)``: the rows `x` rounded by the copy `loops` of the fast
    kernel, or (None) by the general kernel, element ``(0, 0)`` drawing random
    number `offset`."""
    rows, length = x.shape
    block_size = fmt.block_size or length
    count = -(-length // block_size)
    block_params = plan.block_params[:6] + (block_size, 0)
    out, scales = np.empty_like(x), np.empty((rows, count))
    if loops is None:
        general_kernel(np.float32)(x.reshape(rows, length, 1), out.reshape(rows, length, 1),
                                   scales.reshape(rows, count, 1), plan.element_params, plan.scale_params,
                                   block_params, plan.float_params, int(plan.mode), key, offset, plan.rand_bits)
    else:
        fast_kernel(int(plan.mode), loops)(x.view(np.int32), out.view(np.int32), scales, plan.fast_params,
                                           plan.element_params, block_params, plan.float_params, 0, key, offset,
                                           plan.rand_bits)
    return out, scales


def _assert_same(x, fmt, rand_bits=64, key=2024, offset=7, copies=None):
    """Every copy in `copies` (default `_copies`) gives the general kernel's bits
    and scales for the float32 rows `x`."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    plan = _plan(fmt, rand_bits)
    assert plan.fast_params is not None, f"{fmt!r}: the fast kernel does not take it"
    want, want_scales = _run(x, fmt, plan, None, key, offset)
    for loops in (_copies(plan) if copies is None else copies):
        got, got_scales = _run(x, fmt, plan, loops, key, offset)
        bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        assert bad.size == 0, (f"{fmt!r} loops {loops} rand_bits {rand_bits} offset {offset}: {bad.size} differ, "
                               f"e.g. at {bad[:3]} x={x.ravel()[bad[:3]]!r} fast={got.ravel()[bad[:3]]!r} "
                               f"general={want.ravel()[bad[:3]]!r}")
        np.testing.assert_array_equal(got_scales, want_scales)


# -- hypothesis: formats, block sizes, rand_bits, data --

NAMED = ["e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "bfloat16", "float16", rp.FixedFormat(8, 6), rp.FixedFormat(8, 0)]
# the grid loop's edges: a max of one spacing (2 bits), a top of 2**24 - 1 spacings, floats of one binade
EDGES = [rp.FixedFormat(2, 0), rp.FixedFormat(4, -2), rp.FixedFormat(3, 5), rp.FixedFormat(25, -3),
         rp.FloatFormat(1, 3, inf=False, nan="max"), rp.FloatFormat(1, 4, inf=False, nan="negzero"),
         rp.FloatFormat(2, 2, subnormals=False)]
BLOCK_SIZES = st.sampled_from([32, 64, 128, 4096, None, 33, 96, 7])


@st.composite
def cases(draw):
    fmt = draw(scaled_formats(st.one_of(float_formats(max_exp_bits=8, max_man_bits=23), fixed_formats(max_word=26),
                                        st.sampled_from(NAMED), st.sampled_from(EDGES)), BLOCK_SIZES))
    block_size = fmt.block_size
    rand_bits = draw(st.sampled_from(RAND_BITS))
    plan = _plan(fmt, rand_bits)
    assume(plan.fast_params is not None)
    rows = draw(st.integers(1, 2))
    if block_size is None or block_size == 4096:
        length = draw(st.sampled_from([40, 4096, 4096 + 37, 2 * 4096 + 5]))
    else:
        length = draw(st.one_of(st.integers(1, 70), st.integers(71, 400)))
    seed = draw(st.integers(0, 2**32 - 1))
    offset = draw(st.one_of(st.sampled_from(BOUNDARY_OFFSETS), st.integers(0, 2**40)))
    return fmt, plan, rand_bits, rows, length, seed, offset


def _data(plan, rows, length, seed):
    """Rows at a random block scale (the extremes included: an element max of
    2**127, a spacing at float32's least normal). Half of them clean: values
    from 2**-8 spacings to the max at that scale (the narrow, uniform and grid
    loops' blocks), on the element's grid and its midpoints, its max and least
    normal. The others also hold values past the max and below the loops'
    range, specials (zeros, -0, float32 subnormals, huge values, NaN, inf)
    and now and then a row of one value."""
    rng = np.random.default_rng(seed)
    params = plan.fast_params
    quantum, high = _float(params[layout.P_BELOW_QUANTUM_BITS]), _float(params[layout.P_FAST_HIGH_BITS])
    least = high  # the least magnitude that drops fast_drop_min bits (`uniform_low`; none: the max)
    if params[layout.P_FAST_DROP_MIN] >= 1:
        least = _float(max((int(params[layout.P_FAST_DROP_OFFSET]) - int(params[layout.P_FAST_DROP_MIN])) << 23,
                           int(params[layout.P_FAST_ALIGNED_BITS])))
    clean = rng.random() < 0.5
    # block scales: any, or the extremes where the element's max reaches 2**127 or its spacing float32's least normal
    top, spacing = int(np.floor(np.log2(high))), int(np.log2(quantum))
    scale = 2.0 ** rng.choice([int(rng.integers(-150, 128)), 127 - top, 126 - top, -126 - spacing, -125 - spacing],
                              (rows, 1), p=[0.4, 0.3, 0.1, 0.1, 0.1])
    # normal data at the element's max times the block scale, or (not clean) at any scale
    x = rng.uniform(-1, 1, (rows, length)) * (high * scale if clean or rng.random() < 0.5
                                              else 2.0 ** rng.integers(-140, 120, (rows, 1)))
    x *= 2.0 ** rng.integers(-6 if clean else -12, 1, (rows, length))
    picks = rng.random((rows, length)) < 0.3
    # grid points and midpoints up to the max, or at times to just past it (the wide loop's or float64's)
    spacings = min(64, int(high / quantum) + int(not clean and rng.random() < 0.3))
    grid = rng.integers(-2 * spacings, 2 * spacings + 1, (rows, length)) * 0.5 * quantum * scale
    grid = np.where(np.abs(grid) <= np.finfo(np.float32).max, grid, np.sign(grid) * high * scale)  # not inf
    x[picks] = grid[picks]
    picks = rng.random((rows, length)) < 0.1
    edges = [high, -high, least, -least, least * 0.75, quantum * 2.0**-8, quantum * (2.0**-8 + 2.0**-30)]
    edges = rng.choice(edges + ([] if clean else [quantum * 2.0**-9, quantum * 2.0**-40]), (rows, length)) * scale
    x[picks] = edges[picks]
    if clean:
        with np.errstate(over="ignore", under="ignore"):
            return x.astype(np.float32)
    picks = rng.random((rows, length)) < 0.04
    x[picks] = rng.choice([0.0, -0.0, 1e-45, -3e-41, 1e-39, 2.0**-126, 2.0**127, -2.0**127, 3.4e38, np.inf,
                           -np.inf, np.nan], picks.sum())
    if rng.random() < 0.1:
        x[:] = rng.choice([0.0, -0.0, 2.0**127, -(2.0**126), 1e-45, high * scale[0, 0], -quantum * scale[0, 0]])
    with np.errstate(over="ignore", under="ignore"):
        return x.astype(np.float32)


@settings(max_examples=1000, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_copies_match_the_general_kernel(case):
    fmt, plan, rand_bits, rows, length, seed, offset = case
    event(f"the plan's copy: {plan.stochastic_loops}")
    size = fmt.block_size
    event(f"blocks: {'one per row' if size is None else 'chunked' if blocks.chunked(size) else 'other'}")
    _assert_same(_data(plan, rows, length, seed), fmt, rand_bits, key=seed % 1000, offset=offset)


# -- which copy a format takes --

def _loops(element, block_size=32):
    return _plan(rp.ScaledFormat(element, block_size=block_size), 64).stochastic_loops


def test_the_copy_each_format_takes():
    assert _plan(rp.format("mxint8"), 64).stochastic_loops == GRID_LOOPS
    assert _loops(rp.FixedFormat(8, 0), None) == GRID_LOOPS
    assert _loops(rp.FixedFormat(25, 0)) == GRID_LOOPS  # its top: 2**24 - 1 spacings
    for name in ("e4m3", "e5m2", "bfloat16", "float16"):
        assert _loops(name) == UNIFORM_LOOPS, name
    for name in ("e2m1", "e3m2", "e2m3"):
        assert _loops(name) == BIT_LOOPS, name
    # one binade of normals after the subnormals: the values are the multiples of one spacing
    assert _loops(rp.FloatFormat(1, 3, inf=False, nan="max")) == GRID_LOOPS
    # without subnormals the smallest value is not the spacing: never the grid loop
    assert _loops(rp.FloatFormat(1, 3, inf=False, nan="max", subnormals=False)) == BIT_LOOPS
    assert _loops(rp.FloatFormat(4, 3, subnormals=False)) == UNIFORM_LOOPS
    assert _loops(rp.FloatFormat(8, 23)) == BIT_LOOPS  # drops no bits in its normals


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.one_of(float_formats(max_exp_bits=8, max_man_bits=23), fixed_formats(max_word=26)))
def test_grid_formats_are_the_multiples_of_their_spacing(element):
    """Where `has_grid_loops` accepts an element format, its values from 0 to the
    top of the fast range are exactly the multiples of the smallest positive
    value (the spacing the grid loop counts in), and the top is below 2**24 of
    them; and the uniform copy is taken only where the least normal drops bits."""
    try:
        fmt = rp.ScaledFormat(element, block_size=32)
    except (ValueError, TypeError):
        assume(False)
    plan = _plan(fmt, 64)
    assume(plan.fast_params is not None)
    params = plan.fast_params
    if plan.stochastic_loops == UNIFORM_LOOPS:
        assert params[layout.P_FAST_DROP_MIN] >= 1
    if not blocks.has_grid_loops(params):
        return
    quantum, high = _float(params[layout.P_BELOW_QUANTUM_BITS]), _float(params[layout.P_FAST_HIGH_BITS])
    count = high / quantum
    assert count == int(count) and 1 <= count < 2**24
    multiples = np.arange(int(count) + 1, dtype=np.float64)[:4097] * quantum
    np.testing.assert_array_equal(rp.round(multiples, element, "nearest").astype(np.float64), multiples)
    between = (np.arange(int(count), dtype=np.float64)[:4096] + 0.5) * quantum
    assert not np.any(rp.round(between, element, "toward_zero").astype(np.float64) == between)


# -- the uniform loop --

UNIFORM_FORMATS = [rp.ScaledFormat("e4m3", block_size=32), rp.ScaledFormat("e5m2", block_size=64),
                   rp.ScaledFormat("bfloat16", block_size=32), rp.ScaledFormat("float16", block_size=32),
                   rp.ScaledFormat("e4m3"), rp.ScaledFormat("float16"), rp.ScaledFormat("bfloat16"),
                   rp.ScaledFormat("e4m3", block_size=4096), rp.ScaledFormat("e4m3", block_size=40),
                   rp.ScaledFormat(rp.FloatFormat(4, 3, subnormals=False), block_size=32),
                   rp.ScaledFormat(rp.FloatFormat(4, 3, subnormals=False))]


def _least_normal(fmt):
    """The element's least normal and its max, where a block whose max is the
    element's max has scale 1."""
    element = fmt.element
    return float(element.min_normal), float(element.max)


@pytest.mark.parametrize("fmt", UNIFORM_FORMATS, ids=repr)
@pytest.mark.parametrize("rand_bits", [64, 1, 9, 24, 33])
def test_uniform_loop_at_the_least_normal(fmt, rand_bits):
    """Blocks of scale 1 (each holds the element's max) whose least magnitude is
    the least normal (uniform), just below it (not: one spacing fewer dropped
    bits, or a subnormal), a float32 subnormal, or zero; and long rows where a
    single value of a run lies below (the per-tensor copy rounds that run again),
    at a run's first and last lane and in the ragged end."""
    least, top = _least_normal(fmt)
    below = np.nextafter(np.float32(least), np.float32(0))
    rng = np.random.default_rng(rand_bits)
    length = 3 * 4096 + 45 if fmt.block_size in (None, 4096) else 8 * 32 * 5
    x = (rng.uniform(1.0, 2.0, (2, length)) * least * 2.0 ** rng.integers(0, 8, (2, length))).astype(np.float32)
    x *= rng.choice(np.float32([1, -1]), x.shape)
    block = fmt.block_size or length
    x[:, ::block] = top  # scale 1 throughout
    x[0, 1::97] = least
    x[0, 2::197] = -below
    x[0, 3::301] = below * np.float32(0.5)
    x[1, 31::64] = below  # a run's last lane
    x[1, 32::4099] = np.float32(1e-40)  # float32 subnormals
    x[1, 5::7] = 0.0
    x[1, 6::11] = -0.0
    x[:, -1] = below
    _assert_same(x, fmt, rand_bits)


@pytest.mark.parametrize("fmt", [rp.ScaledFormat("e4m3"), rp.ScaledFormat("float16"), rp.ScaledFormat("bfloat16"),
                                 rp.ScaledFormat("e5m2", block_size=4096)], ids=repr)
def test_uniform_runs_redone_per_tensor(fmt):
    """One scale per row from N(0, 1) data: most runs in the uniform loop, a few
    with a magnitude below the element's normals, redone by the bit loop with the
    same random numbers (the Weyl words of the run restart), over several
    pieces and pieces rounded with an earlier exponent (a growing max)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5 * 4096 + 19)).astype(np.float32)
    x[1] *= np.float32(2.0) ** np.repeat(np.arange(6, dtype=np.float32), 4096)[:x.shape[1]]  # the max grows
    for offset in (7, 2**32 - 3 * 4096):
        _assert_same(x, fmt, 64, offset=offset)
        _assert_same(x, fmt, 9, offset=offset)


# -- the grid loop --

GRID_FORMATS = [rp.format("mxint8"), rp.ScaledFormat(rp.FixedFormat(8, 0)),
                rp.ScaledFormat(rp.FixedFormat(8, 6), block_size=64),
                rp.ScaledFormat(rp.FixedFormat(3, 0), block_size=32),
                rp.ScaledFormat(rp.FixedFormat(0, 4), block_size=32),
                rp.ScaledFormat(rp.FixedFormat(25, 0), block_size=32), rp.ScaledFormat(rp.FixedFormat(24, 0)),
                rp.ScaledFormat(rp.FixedFormat(16, 4), block_size=4096),
                rp.ScaledFormat(rp.FixedFormat(-120, 125), block_size=32),
                rp.ScaledFormat(rp.FixedFormat(60, -40), block_size=32),
                rp.ScaledFormat(rp.FloatFormat(1, 3, inf=False, nan="max"), block_size=32),
                rp.ScaledFormat(rp.FloatFormat(1, 5, inf=False, nan="negzero")),
                rp.ScaledFormat(rp.FloatFormat(1, 2, inf=False, nan=None, bias=3), block_size=32)]


@pytest.mark.parametrize("fmt", GRID_FORMATS, ids=repr)
@pytest.mark.parametrize("rand_bits", [64, 1, 8, 23, 25, 32, 33])
def test_grid_loop_edges(fmt, rand_bits):
    """The grid loop's range: magnitudes from 2**-8 spacings (the least the
    narrow loop takes; its fraction then has 31 bits) with full significands,
    whole numbers of spacings up to the top, midpoints, the max and beyond it
    (a two's complement negative max), zeros and -0, at block scales from
    2**-126 to 2**127."""
    plan = _plan(fmt, rand_bits)
    assert plan.stochastic_loops == GRID_LOOPS
    params = plan.fast_params
    quantum, high = _float(params[layout.P_BELOW_QUANTUM_BITS]), _float(params[layout.P_FAST_HIGH_BITS])
    count = int(high / quantum)
    rng = np.random.default_rng(rand_bits)
    length = 4096 + 64 if fmt.block_size in (None, 4096) else 64 * 32
    s = np.empty(length)
    s[0::4] = rng.integers(0, count + 1, s[0::4].shape)  # whole spacings
    s[1::4] = rng.integers(0, count, s[1::4].shape) + 0.5  # midpoints
    s[2::4] = 2.0**-8 * (1 + rng.integers(0, 2**23, s[2::4].shape) * 2.0**-23)  # [2**-8, 2**-7) spacings, full bits
    s[3::4] = rng.uniform(0, count, s[3::4].shape)
    s[5::64] = count  # the max
    s[9::128] = count + 1  # past the positive max: the negative max of two's complement
    s[13::256] = 2.0**-8
    s[17::256] = 2.0**-8 * (1 - 2.0**-24)  # just below the range
    s *= rng.choice([1, -1], s.shape)
    s[21::100] = -0.0
    base = (s * quantum).astype(np.float32)
    block = fmt.block_size or length
    base[::block] = np.float32(high)  # the element's max: the block's scale is 1
    top = int(np.floor(np.log2(high)))
    for exponent in (0, -100, 100, 126 - top, 127 - top):  # the last two: block maxima 2**126 and 2**127
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            x = (base.astype(np.float64) * 2.0**exponent).astype(np.float32)
        if np.all(np.isfinite(x)):
            _assert_same(x[np.newaxis], fmt, rand_bits, offset=2**32 - 4096 - 31)


@pytest.mark.parametrize("fmt", [rp.ScaledFormat(rp.FixedFormat(2, 0), block_size=32),
                                 rp.ScaledFormat(rp.FixedFormat(2, 0)),
                                 rp.ScaledFormat(rp.FixedFormat(4, -2), block_size=64)], ids=repr)
def test_grid_loop_at_the_largest_block_scale(fmt):
    """A two-bit signed element (-2, -1, 0, 1 spacings, its max its spacing) and a
    block whose max is 2**127: the block's exponent field plus the spacing's is
    254, where a float32 ``2**(127 - shift - spacing)`` taking the raw magnitude
    to spacings has exponent field 0 (the grid loop once gave such blocks 0)."""
    x = np.full((1, 64), 2.0**127, np.float32)
    x[0, 1::2] = -(2.0**126)
    _assert_same(x, fmt, 64)


@pytest.mark.parametrize("fmt", [rp.ScaledFormat(rp.FixedFormat(2, 0), block_size=32),
                                 rp.ScaledFormat(rp.FixedFormat(3, 0), block_size=32)], ids=repr)
def test_small_fixed_elements_below_the_largest_block_scale(fmt):
    """The same small elements at every other block scale: the bit and uniform
    copies at 2**127 too, and the grid copy at 2**126 and below."""
    rng = np.random.default_rng(5)
    x = (rng.uniform(-2, 2, (1, 64 * 8)) * 2.0**126).astype(np.float32)
    x[0, ::32] = np.float32(2.0**127)
    _assert_same(x, fmt, copies=[BIT_LOOPS, UNIFORM_LOOPS])
    for exponent in (126, 60, 0, -60, -120):
        y = (rng.uniform(-2, 2, (1, 64 * 8)) * 2.0**exponent).astype(np.float32)
        _assert_same(y, fmt)


# -- extreme blocks and random counters --

@pytest.mark.parametrize("fmt", [rp.format("mxfp8_e4m3"), rp.format("mxint8"), rp.ScaledFormat("bfloat16"),
                                 rp.ScaledFormat(rp.FixedFormat(8, 0), block_size=4096),
                                 rp.ScaledFormat("float16", block_size=64)], ids=repr)
def test_special_blocks_and_segment_boundaries(fmt):
    """NaN and inf blocks, all-zero blocks (+0 and -0), blocks of float32
    subnormals only, saturating blocks at the largest scale, and random
    counters whose runs, chunks and pieces cross a 2**32 segment."""
    rng = np.random.default_rng(11)
    block = fmt.block_size
    x = rng.standard_normal((3, 8 * block + 7 if block else 3 * 4096 + 7)).astype(np.float32)
    if block is None:
        x[0, -1] = np.nan  # the row's one block: NaN
        x[2, 5000] = np.float32(3.4e38)  # a huge value late in the row: the pieces before it rounded again
    else:
        x[0, block:2 * block] = np.nan
        x[0, 3 * block:4 * block] = -np.inf
        x[0, 4 * block:5 * block] = -0.0
        x[0, 5 * block:6 * block] = np.float32(1e-42) * rng.choice(np.float32([1, -1]), block)
        x[0, 6 * block:7 * block] = np.float32(3.4e38) * rng.choice(np.float32([1, -1]), block)
    x[1] = x[1] * np.float32(2.0**-120)
    x[2, ::5] = 0.0
    for offset in (2**32 - 4096 - 11, 2**32 - 33, 2**32 - 32, 3 * 2**32 - 5000, 2**32):
        _assert_same(x, fmt, 64, offset=offset)
        _assert_same(x, fmt, 31, offset=offset)
