"""The fast block kernel (``rpfloat._kernels.cpu.blocks``) against the general
one (float64 arithmetic), bit for bit, on element formats, block sizes, modes,
``rand_bits`` and data drawn by hypothesis: float elements with and without
subnormals, odd biases, NaN and inf variants; fixed point elements of every
width the fast kernel takes (from one spacing of a single bit to more bits
than float32's significand, where the fast loop drops none); blocks short,
ragged, chunked and one per row; data with zeros, ties, subnormals, tiny and
huge values, NaN and inf."""
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat import scaling
from rpfloat._kernels.core import layout
from strategies import fixed_formats, float_formats, scaled_formats
from test_blocks_fast import _run_both

BLOCK_SIZES = st.one_of(st.sampled_from([1, 2, 5, 16, 32, 64, 256, None]), st.integers(1, 80))


@st.composite
def cases(draw):
    fmt = draw(scaled_formats(st.one_of(float_formats(max_exp_bits=8, max_man_bits=12), fixed_formats(max_word=30)),
                              BLOCK_SIZES))
    mode = draw(st.sampled_from(layout.ALL_MODES))
    plan = scaling.scaled_plan(fmt, rp.Mode(mode), None, None, np.float32)
    assume(plan.fast_params is not None)
    rand_bits = draw(st.sampled_from([64, 1, 2, 9, 23, 31, 32, 33])) if mode == layout.STOCHASTIC else 64
    rows = draw(st.integers(1, 3))
    length = draw(st.one_of(st.integers(1, 40), st.integers(41, 300)))
    seed = draw(st.integers(0, 2**32 - 1))
    return fmt, mode, rand_bits, rows, length, seed


def _data(fmt, rows, length, seed):
    """Normal rows at a random scale, some values snapped to the element's grid
    and its midpoints (ties), and specials (zeros, float32 subnormals, tiny
    and huge values, NaN, inf)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, length)) * 2.0 ** rng.integers(-130, 120, (rows, 1))
    x *= 2.0 ** rng.integers(-12, 2, (rows, length))
    grid = rng.random((rows, length)) < 0.2  # ties and grid points of a block whose max is 1
    x[grid] = rng.integers(-64, 64, grid.sum()) / 32.0
    picks = rng.random((rows, length)) < 0.05
    x[picks] = rng.choice([0.0, -0.0, 1e-45, -3e-41, 1e-39, 2.0**-126, 3.4e38, np.inf, -np.inf, np.nan], picks.sum())
    if rng.random() < 0.2:
        x[:, : length // 2] = 0.0
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_formats_fast_matches_general(case):
    fmt, mode, rand_bits, rows, length, seed = case
    x = _data(fmt, rows, length, seed)
    (fast, fast_scales), (general, general_scales) = _run_both(x, fmt, mode, seed % 1000, rand_bits,
                                                               offset=seed % 5000)
    bad = np.flatnonzero(fast.view(np.uint32) != general.view(np.uint32))
    assert bad.size == 0, (f"{fmt!r} mode {mode} rand_bits {rand_bits}: {bad.size} differ, e.g. "
                           f"x={x.ravel()[bad[:3]]!r} fast={fast.ravel()[bad[:3]]!r} "
                           f"general={general.ravel()[bad[:3]]!r}")
    np.testing.assert_array_equal(fast_scales, general_scales)
