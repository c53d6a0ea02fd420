"""Zeros inside the fast loops.

ReLU activations, padding and sparse data are half zeros or more. The fast
loops round them themselves, where the range check used to send every block
holding more than a few of them to the general loop (3 to 6 times slower):

- the stochastic loops (bit-level, uniform, split, fixed point by scaling)
  count a zero as inside their range: none of them steps a zero up;
- the uniform loops take bfloat16 and tf32 in float32 from 0 up (parameter
  ``uniform_from_zero``): the carrier's subnormals drop the same bits as its
  normal numbers there;
- the float64 halves loop gives +-0 for every element whose high word is 0
  (``|x| < 2**-1042``) where one spacing is at least ``2**-978``, so that no
  rand_bits gives it a chance to step up; its variant from 0 up (coarse
  formats) rounds every magnitude below one spacing.

Each kernel that rounds an array, as the public API picks it and as the
bit-level kernel, must give bit for bit what the general loop alone
(``loops.round_general``, which the oracle tests hold to exact arithmetic)
gives, in every mode, on sweeps interleaved with +0 and -0 and sorted by
magnitude (so that most blocks lie inside the fast range but for the zeros).
"""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import loops, table
from sweeps import float32_sweep, float64_sweep, kernel_setup, run_kernel

FORMATS = [
    rp.format("bfloat16"), rp.format("tf32"), rp.format("float16"), rp.format("e4m3"), rp.format("e5m2"),
    rp.format("float8_e4m3fnuz"), rp.format("float6_e3m2fn"), rp.format("float4_e2m1fn"),
    rp.FloatFormat(6, 9), rp.FloatFormat(6, 9, subnormals=False),
    rp.FloatFormat(11, 10),  # float64's exponent range: its spacing 2**-1032 is below 2**-978
    rp.FixedFormat(8, 8), rp.FixedFormat(16, 16), rp.FixedFormat(3, 5, signed=False),
]
MODES = {"nearest": layout.NEAREST, "nearest_away": layout.NEAREST_AWAY, "toward_zero": layout.TOWARD_ZERO,
         "up": layout.UP, "down": layout.DOWN, "odd": layout.ODD, "stochastic": layout.STOCHASTIC,
         "stochastic_equal": layout.STOCHASTIC_EQUAL}
DRAWS = ((64, 0x5EED, 0), (7, 99, 3), (33, 2**40 + 1, 2**32 - 5000))  # (rand_bits, key, offset)


def _with_zeros(xs: np.ndarray) -> np.ndarray:
    """`xs` sorted by magnitude, every other element a zero, +0 and -0 in turn."""
    ordered = xs[np.argsort(np.abs(xs), kind="stable")]
    out = np.zeros(2 * ordered.size, xs.dtype)
    out[0::2] = ordered
    out[3::4] = -0.0
    return out


def _inputs(dtype):
    """The float32 sweep (every exponent, subnormals, ties, NaN payloads) or the
    float64 sweep, interleaved with zeros; and ordinary values (standard normal,
    scaled by 1, 2**-12 and 2**12) with half of them +0 (ReLU) or -0, where
    whole blocks lie in the fast ranges. float64 also gets subnormals whose high
    word is 0 among ordinary values and zeros."""
    rng = np.random.default_rng(7)
    normal = rng.standard_normal(1 << 15)
    half = rng.random(normal.size) < 0.5
    inputs = [_with_zeros(float32_sweep() if dtype == np.float32 else float64_sweep())]
    for scale in (1.0, 2.0**-12, 2.0**12):
        inputs.append(np.maximum(normal * scale, 0.0).astype(dtype))
        inputs.append(np.where(half, normal * scale, -0.0).astype(dtype))
    if dtype == np.float64:
        tiny = rng.integers(1, 2**32, normal.size).astype(np.float64) * 2.0**-1074  # high word 0
        third = rng.integers(0, 3, normal.size)
        inputs.append(np.choose(third, [normal, np.copysign(tiny, normal), np.where(half, 0.0, -0.0)]))
    return inputs


def _policy(fmt) -> str:
    return "inf" if getattr(fmt, "has_inf", False) else "nan" if getattr(fmt, "nan", None) else "saturate"


def _run(xs, fmt, mode, kernel_of, draw):
    """`xs` rounded by the kernel ``kernel_of(...)`` (``sweeps.run_kernel``) with
    the format's default overflow policy and the random `draw`."""
    rand_bits, key, offset = draw
    return run_kernel(xs, fmt, mode, kernel_of, _policy(fmt), key, offset, rand_bits)


def _general(source_bits, target_bits, params, mode, fast_params):
    return table.entry_point_of(loops.round_general, source_bits, target_bits)


def _bit_kernel(source_bits, target_bits, params, mode, fast_params):
    return table.bit_level_kernel(source_bits, target_bits, params, mode)


KERNELS = {"chosen": table.kernel_for, "bit-level": _bit_kernel}


def _picked(xs, fmt, mode, kernel_of):
    """The kernel that ``_run(xs, fmt, mode, kernel_of, ...)`` calls."""
    picked = []
    _run(xs[:1], fmt, mode, lambda *args: picked.append(kernel_of(*args)) or (lambda *call: None), DRAWS[0])
    return picked[0]


def assert_kernels_match_general(xs, fmt, mode, mode_name, draw, label) -> int:
    """The API's kernel and the bit-level kernel (where it is another) round `xs`
    to the general loop's bits; returns how many kernels were checked."""
    want = _run(xs, fmt, mode, _general, draw)
    checked = 0
    for kernel_name, kernel_of in KERNELS.items():
        if kernel_name == "bit-level" and (_picked(xs, fmt, mode, _bit_kernel)
                                           is _picked(xs, fmt, mode, table.kernel_for)):
            continue  # the API's kernel, just checked
        got = _run(xs, fmt, mode, kernel_of, draw)
        bits = np.int64 if got.dtype == np.float64 else np.int32
        bad = np.flatnonzero(got.view(bits) != want.view(bits))
        assert bad.size == 0, (
            f"{fmt!r} {mode_name} {kernel_name} {label} draw={draw}: {bad.size} differ, at {bad[:6]}, "
            f"x={xs[bad[:4]]!r} got={got[bad[:4]]!r} general={want[bad[:4]]!r}")
        checked += 1
    return checked


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_zeros_in_fast_loops_match_the_general_loop(fmt, dtype):
    """The API's kernel and the bit-level kernel give the general loop's bits."""
    checked = 0
    for xs in _inputs(dtype):
        for mode_name, mode in MODES.items():
            for draw in DRAWS if mode_name == "stochastic" else DRAWS[:1]:
                checked += assert_kernels_match_general(xs, fmt, mode, mode_name, draw, xs.dtype)
    assert checked >= len(MODES) + len(DRAWS) - 1  # every mode and draw, by one kernel at least


def _loop_kernel(loop, mode):
    return {loops.BITS_LOOP: loops.MODE_KERNELS[mode], loops.UNIFORM_LOOP: loops.UNIFORM_KERNELS[mode],
            loops.SPLIT_LOOP: loops.round_stochastic_split, loops.SCALED_LOOP: loops.round_scaled_stochastic,
            loops.HALVES_LOOP: loops.round_stochastic_halves,
            loops.HALVES_ZERO_LOOP: loops.round_stochastic_halves_from_zero}[loop]


@pytest.mark.parametrize("fmt, mode, dtype, loop", [
    ("bfloat16", "nearest", np.float32, loops.UNIFORM_LOOP),
    ("tf32", "up", np.float32, loops.UNIFORM_LOOP),
    ("bfloat16", "stochastic", np.float32, loops.UNIFORM_LOOP),
    ("e4m3", "stochastic", np.float32, loops.SPLIT_LOOP),
    ("float8_e4m3fnuz", "stochastic", np.float32, loops.BITS_LOOP),
    (rp.FloatFormat(6, 9, subnormals=False), "stochastic", np.float32, loops.SPLIT_LOOP),
    ("q8.8", "stochastic", np.float32, loops.SCALED_LOOP),
    ("q16.16", "stochastic", np.float32, loops.SCALED_LOOP),
    ("float16", "stochastic", np.float64, loops.HALVES_ZERO_LOOP),
    ("float8_e4m3fnuz", "stochastic", np.float64, loops.HALVES_ZERO_LOOP),  # from 0: the kernel picked
    ("bfloat16", "stochastic", np.float64, loops.HALVES_LOOP),
], ids=str)
def test_relu_data_stay_in_the_fast_loop(fmt, mode, dtype, loop):
    """Half zeros (ReLU activations) send no block to the general loop: by the
    loop's own range check (`loop_range`, `count_irregular`), every element of
    such data lies in the fast range of the kernel the API picks."""
    fmt = rp.format(fmt) if isinstance(fmt, str) else fmt
    mode = MODES[mode]
    x = np.random.default_rng(5).standard_normal(20_000).astype(dtype)
    x = x * dtype(fmt.max / 8) if isinstance(fmt, rp.FixedFormat) else np.where(np.abs(x) < 1 / 64, 1.0, x)
    relu = np.maximum(x, 0).astype(dtype)
    assert np.count_nonzero(relu == 0) > 9_000
    _, _, fast_params, source_bits, target_bits, _ = kernel_setup(relu.dtype, fmt, _policy(fmt))
    chosen = _picked(relu, fmt, mode, table.kernel_for)
    assert chosen is table.entry_point_of(_loop_kernel(loop, mode), source_bits, target_bits)
    low, high, zero_ok = loops.loop_range(fast_params, mode, loop)
    bits = relu.view(source_bits)
    assert loops.count_irregular(bits, low, high, fast_params, zero_ok) == 0
    # and the zeros are what needed it: below the range's low end, or the low end 0
    assert low == 0 or loops.count_irregular(bits, low, high, fast_params, False) == np.count_nonzero(relu == 0)
