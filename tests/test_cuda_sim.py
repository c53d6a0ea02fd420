"""The CUDA kernels (``rpfloat.cuda``) against the CPU path, bit for bit, under
numba's CUDA simulator.

The simulator is switched on by ``NUMBA_ENABLE_CUDASIM=1`` at numba's import, and
it changes ``numba.cuda`` for the whole process: the sweep runs in a child
process (this file run as a script), and pytest only checks its report.

What the child sweeps, for every format of FORMATS and every mode: every float16
bit pattern as float32 data (zeros, subnormals, max, inf, NaN payloads, and the
ties of every coarser format), the float32 midpoints between neighbouring
float16 values (ties of float16 itself), random float32 bit patterns, and edge
values of float32 (its subnormals, max, signalling and quiet NaN payloads). The
simulator runs each GPU thread in Python (~30 us a number), so the formats take
every STRIDE-th pattern, midpoint and random number (the edges always; a format
named in FULL_SWEEP takes all of them, about a minute each): the kernels' shared
element code is checked exhaustively on the CPU, and here it is the CUDA glue
(indexing, the random counter, dispatch) that is under test.
Stochastic modes use an int seed and an offset just below 2**32, so that the
random counter crosses a segment of the stream inside the array. float64 data:
every float16 pattern and float64 edges onto two formats. The CUDA side runs
the kernels through the simulator (``rpfloat.cuda.round``, and ``launch`` on a
grid that does not divide the array); the CPU side is ``round_chunk`` with the
same seed and offset. Rounding in place is checked where the second kernel
reads what the first wrote (NaN, inf, overflow, wrap-around).

Scaled formats (`scaled_formats`): MX, NVFP4 with and without its tensor
scale, blocks along another axis, ragged blocks, every scale rounding, one
scale per tensor, and blocks beyond the one-thread-per-block kernel's size,
on small arrays of numbers over 60 binades with zeros and tiny values, with
and without NaN and inf, in SCALED_MODES and in place, against ``rp.round``
on the CPU.
``tests/test_cuda_device.py`` runs the same sweeps on a real GPU.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

SEED = 20240
OFFSET = 2**32 - 1000  # the random counter crosses 2**32 in every stochastic run (stream.segment_keys)
RANDOM_PATTERNS = 8192
SCALED_SEED = 77


def _formats():
    import rpfloat as rp

    return {
        "bfloat16": (rp.format("bfloat16"), None),
        "e4m3": (rp.format("e4m3"), None),
        "e5m2": (rp.format("e5m2"), None),
        "float16": (rp.format("float16"), None),
        "q8.8": (rp.format("q8.8"), None),
        "q8.8 wrap": (rp.format("q8.8"), "wrap"),
        "FloatFormat(6, 9, subnormals=False)": (rp.FloatFormat(6, 9, subnormals=False), None),
        "q16.16 (float64 results)": (rp.format("q16.16"), None),
    }


FLOAT64_FORMATS = ("bfloat16", "e4m3")
FULL_SWEEP = ()  # formats that take every pattern; the others every STRIDE-th
STRIDE = 8


def _stride(name):
    return 1 if name in FULL_SWEEP else STRIDE


def _float32_data(stride=1):
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    widened = halves.astype(np.float32)
    bits = widened.view(np.int32)
    finite = bits[np.isfinite(widened)]
    midpoints = finite[::stride] + np.int32(1 << 12)  # half a float16 spacing: ties onto float16
    bits = bits[::stride]
    rng = np.random.default_rng(SEED)
    random = rng.integers(-(2**31), 2**31, RANDOM_PATTERNS // stride, dtype=np.int64).astype(np.int32)
    edges = np.array([0, 1, 2, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FBFFFFF, 0x7FC00000,
                      0x7FC00001, 0x7FFFFFFF, 0x3F800000, 0x3F800001, 0x43E00000, 0x43F00000, 0x47800000],
                     dtype=np.int64)
    edges = np.concatenate([edges, edges | 0x80000000]).astype(np.uint32).view(np.int32)
    return np.concatenate([bits, midpoints, random, edges]).view(np.float32)


def _float64_data(stride=1):
    halves = np.arange(2**16, dtype=np.uint16)[::stride].view(np.float16).astype(np.float64)
    edges = np.array([0, 1, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000,
                      0x7FF0000000000001, 0x7FF8000000000001, 0x3FF0000000000001, 0x3FF0000000000000],
                     dtype=np.uint64)
    edges = np.concatenate([edges, edges | np.uint64(0x8000000000000000)]).view(np.float64)
    return np.concatenate([halves, edges])


def _bits_of(dtype):
    return np.int32 if np.dtype(dtype) == np.float32 else np.int64


def _mismatches(got, expected):
    bits = _bits_of(got.dtype)
    return np.flatnonzero(got.view(bits) != expected.view(bits))


def new_report():
    return {"elements": 0, "runs": 0, "failures": []}


def check(report, label, got, expected):
    """Count a comparison in `report`, with its first mismatches (at most 5)."""
    report["runs"] += 1
    report["elements"] += int(expected.size)
    wrong = _mismatches(got, expected)
    if wrong.size:
        report["failures"].append({"case": label, "count": int(wrong.size), "first": [
            (int(i), float(got[i]), float(expected[i])) for i in wrong[:5]]})


def sweep_format(report, name, dtype, stride):
    """Every mode of format `name` on the device against the CPU, on the float32
    (or float64) sweep data taking every `stride`-th pattern."""
    from numba import cuda

    import rpfloat as rp
    import rpfloat.cuda
    from rpfloat.rounding import round_chunk

    fmt, overflow = _formats()[name]
    data = _float32_data(stride) if np.dtype(dtype) == np.float32 else _float64_data(stride)
    device = cuda.to_device(data)
    for mode in rp.Mode:
        stochastic = mode.is_stochastic
        arguments = dict(overflow=overflow, rng=SEED if stochastic else None)
        offset = OFFSET if stochastic else 0
        assert not stochastic or offset + data.size > 2**32, (name, data.size)  # crosses a segment
        expected = round_chunk(data, fmt, mode, offset=offset, **arguments)
        got = rpfloat.cuda.round(device, fmt, mode, offset=offset, **arguments).copy_to_host()
        check(report, f"{name} {data.dtype} {mode.name.lower()}", got, expected)


def sweep_launches(report):
    """A grid whose threads do not divide the array, fewer random bits, `out=`,
    rounding in place, empty arrays, a wrong-dtype `out=`, a block past the axis and
    an axis out of range on an empty array (17 comparisons)."""
    from numba import cuda

    import rpfloat as rp
    import rpfloat.cuda
    from rpfloat._kernels.cuda.kernels import launch
    from rpfloat._plan import plan_for, random_key
    from rpfloat.rounding import round_chunk

    data = _float32_data()[:5000]
    for mode, rand_bits in (("nearest", None), ("stochastic", 7), ("stochastic_equal", None)):
        plan = plan_for(rp.format("e4m3"), mode, None, rand_bits, data.dtype)
        key = random_key(SEED)
        target = cuda.device_array(data.size, np.int32)
        launch(cuda.to_device(data.view(np.int32)), target, plan.params, int(plan.mode), key, 3, plan.rand_bits,
               blocks=3, threads=7)
        expected = round_chunk(data, "e4m3", mode, offset=3, rng=SEED, rand_bits=rand_bits) if plan.mode.is_stochastic \
            else round_chunk(data, "e4m3", mode)
        check(report, f"e4m3 launch 3x7 {mode} rand_bits={rand_bits}", target.copy_to_host().view(np.float32),
              expected)
    data = _float32_data()[:3000].reshape(60, 50)
    expected = rp.round(data, "bfloat16", "nearest")
    out = cuda.device_array_like(data)
    assert rpfloat.cuda.round(cuda.to_device(data), "bfloat16", out=out) is out
    check(report, "bfloat16 out=", out.copy_to_host(), expected)
    device = cuda.to_device(data)
    rpfloat.cuda.round(device, "bfloat16", out=device)
    check(report, "bfloat16 in place", device.copy_to_host(), expected)
    # numbers in one segment of the stream (the sweeps' offset makes them cross one), float32 and float64
    for data_one in (_float32_data()[:4000], _float64_data()[:4000]):
        for mode in ("stochastic", "stochastic_equal"):
            expected = round_chunk(data_one, "e4m3", mode, rng=SEED, offset=5)
            got = rpfloat.cuda.round(cuda.to_device(data_one), "e4m3", mode, rng=SEED, offset=5).copy_to_host()
            check(report, f"e4m3 {data_one.dtype} {mode} in one segment", got, expected)
    # a block size past the axis's length is one block of the axis (its work follows the length),
    # and an empty array still has its axis checked
    huge = rp.ScaledFormat("e4m3", block_size=2**62, axis=0)
    data_huge = scaled_data((40, 3), np.float32, non_finite=False)
    got = rpfloat.cuda.round(cuda.to_device(data_huge), huge, "nearest").copy_to_host()
    check(report, "e4m3 blocks of 2**62 along an axis of 40", got, rp.round(data_huge, huge, "nearest"))
    try:
        rpfloat.cuda.round(cuda.to_device(np.zeros((0,), np.float32)), rp.ScaledFormat("e4m3", block_size=4, axis=1))
    except ValueError as error:
        named = "axis=1 is out of range" in str(error)
        check(report, "empty, axis out of range", np.float32([1.0 if named else 0.0]), np.float32([1.0]))
    else:
        check(report, "empty, axis out of range", np.float32([0.0]), np.float32([1.0]))
    # in place where the rare pass reads what the fast pass wrote (NaN, inf, overflow, wrap-around)
    data = _float32_data(4)
    for name, mode in (("e4m3", "stochastic"), ("q8.8 wrap", "nearest"), ("float16", "odd")):
        fmt, overflow = _formats()[name]
        expected = round_chunk(data, fmt, mode, overflow=overflow, rng=SEED, offset=OFFSET)
        device = cuda.to_device(data)
        assert rpfloat.cuda.round(device, fmt, mode, overflow=overflow, rng=SEED, offset=OFFSET, out=device) is device
        check(report, f"{name} {mode} in place", device.copy_to_host(), expected)
    # empty arrays (NumPy 2 gives them zero strides, which numba's to_device keeps), and a
    # wrong-dtype out= (TypeError, as on the host)
    for shape in ((0,), (0, 3)):
        empty = rpfloat.cuda.round(cuda.to_device(np.zeros(shape, np.float32)), "e4m3", "stochastic", rng=1)
        check(report, f"empty {shape}", empty.copy_to_host(), np.zeros(shape, np.float32))
    try:
        rpfloat.cuda.round(cuda.to_device(data), "bfloat16", out=cuda.device_array(data.shape, np.float64))
    except TypeError as error:
        named = "out must have x's dtype" in str(error)
        check(report, "out= of another dtype", np.float32([1.0 if named else 0.0]), np.float32([1.0]))
    else:
        check(report, "out= of another dtype", np.float32([0.0]), np.float32([1.0]))


def scaled_formats():
    """Scaled formats for the scaled sweep: name -> (format, data shape). Blocks of
    at most SMALL_BLOCK (one thread each) and larger ones (segments, atomics),
    along the last axis and another, ragged, per tensor, every scale rounding,
    significand scales with and without a tensor scale, fixed-point elements."""
    import rpfloat as rp

    return {
        "mxfp8_e4m3": (rp.format("mxfp8_e4m3"), (6, 96)),
        "mxfp4_e2m1": (rp.format("mxfp4_e2m1"), (6, 96)),
        "mxint8": (rp.format("mxint8"), (6, 96)),
        "nvfp4": (rp.format("nvfp4"), (6, 96)),
        "nvfp4 + tensor scale": (rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True),
                                 (6, 96)),
        "e5m2 ceil, blocks of 7 along axis 0": (rp.ScaledFormat("e5m2", block_size=7, axis=0, scale_rounding="ceil"),
                                                (23, 5, 4)),
        "e2m3 even, blocks of 5": (rp.ScaledFormat("e2m3", block_size=5, scale_rounding="even"), (4, 23)),
        "int8 rceil per tensor": (rp.ScaledFormat(rp.FixedFormat(8, 0), scale_rounding="rceil"), (12, 50)),
        "e4m3 blocks of 300 along axis 1": (rp.ScaledFormat("e4m3", block_size=300, axis=1), (2, 700, 3)),
        "e3m2 blocks of 1500, e4m3 scales": (rp.ScaledFormat("e3m2", block_size=1500, scale_format="e4m3"),
                                             (2, 1600)),
    }


def scaled_data(shape, dtype, seed=SCALED_SEED, non_finite=True):
    """Normal numbers over 60 binades (a spread per slice along the first axis),
    with zeros, exact powers of two, an all-zero run and tiny values (below
    float32's normals); with `non_finite`, a few NaN (of either sign) and -inf,
    which make their blocks NaN blocks."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    data = rng.standard_normal(size) * 2.0 ** rng.integers(-30, 30, size)
    data[rng.integers(0, size, max(1, size // 50))] = 0.0
    data[rng.integers(0, size, max(1, size // 50))] = 2.0 ** rng.integers(-20, 20, max(1, size // 50))
    data[size // 3:size // 3 + 40] = 0.0
    data[size // 2:size // 2 + 20] *= 2.0**-140
    data = data.astype(dtype)
    if non_finite:
        data[rng.integers(0, size, max(1, size // 400))] = np.nan
        data[rng.integers(0, size, max(1, size // 400))] = -np.inf
        # NaN with the sign bit set (a GPU's abs may keep a NaN's sign)
        data[rng.integers(0, size, max(1, size // 800))] = -np.abs(np.array(np.nan, dtype))
    return data.reshape(shape)


SCALED_MODES = ("nearest", "stochastic", "toward_zero", "stochastic_equal")


def sweep_scaled(report, name, dtype):
    """Scaled format `name` on the device against ``rp.round`` on the CPU, in
    SCALED_MODES, and in place."""
    from numba import cuda

    import rpfloat as rp
    import rpfloat.cuda

    fmt, shape = scaled_formats()[name]
    # (without NaN and inf too: one NaN makes a whole tensor's block a NaN block)
    for non_finite in (False, True):
        data = scaled_data(shape, dtype, non_finite=non_finite)
        device = cuda.to_device(data)
        for mode in SCALED_MODES:
            expected = rp.round(data, fmt, mode, rng=SEED)
            got = rpfloat.cuda.round(device, fmt, mode, rng=SEED).copy_to_host()
            assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
            check(report, f"{name} {np.dtype(dtype)} {mode}{' with NaN and inf' * non_finite}", got, expected)
    if expected.dtype == data.dtype:  # in place
        rpfloat.cuda.round(device, fmt, "stochastic_equal", rng=SEED, out=device)
        check(report, f"{name} {np.dtype(dtype)} in place", device.copy_to_host(), expected)


def sweep():
    """Run in the child: every format and mode on the simulator against the CPU.
    Returns the report: comparisons made and the mismatches found (at most 5 each)."""
    from numba import config

    assert config.ENABLE_CUDASIM, "the sweep runs under numba's CUDA simulator"
    report = new_report()
    for name in _formats():
        sweep_format(report, name, np.float32, _stride(name))
    for name in FLOAT64_FORMATS:
        sweep_format(report, name, np.float64, _stride(name))
    sweep_launches(report)
    for name in scaled_formats():
        sweep_scaled(report, name, np.float32)
    sweep_scaled(report, "mxfp8_e4m3", np.float64)
    sweep_scaled(report, "int8 rceil per tensor", np.float64)
    return report


def _run_child():
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    completed = subprocess.run([sys.executable, __file__], env=environment, capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_cuda_kernels_match_cpu_bit_for_bit():
    report = _run_child()
    assert report["failures"] == [], json.dumps(report["failures"], indent=1)
    modes = 8
    float32_sizes = sum(_float32_data(_stride(name)).size for name in _formats())
    float64_sizes = sum(_float64_data(_stride(name)).size for name in FLOAT64_FORMATS)
    scaled_runs = 2 * len(SCALED_MODES) * (len(scaled_formats()) + 2)  # (and in place, where the dtype allows)
    assert report["runs"] >= modes * (len(_formats()) + len(FLOAT64_FORMATS)) + 17 + scaled_runs
    assert report["elements"] >= modes * (float32_sizes + float64_sizes)
    assert _float32_data().size > 2**17  # the full sweep: every float16 pattern and midpoint


def test_an_interface_that_raises_runtime_error_is_a_device_array():
    """torch's CUDA tensors that require grad raise RuntimeError (not
    AttributeError) for __cuda_array_interface__: they are device arrays, and
    rounding one says to detach it rather than passing torch's error on."""
    import rpfloat as rp
    import rpfloat.cuda

    class GradTensor:
        requires_grad = True

        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

    assert rpfloat.cuda.is_device_array(GradTensor())
    assert rp.rounding._is_device_array(GradTensor())


def test_host_array_is_refused():
    import rpfloat.cuda

    with pytest.raises(TypeError, match="array on a CUDA device.*numpy.ndarray.*rpfloat.round"):
        rpfloat.cuda.round(np.ones(4, np.float32), "e4m3")
    with pytest.raises(TypeError, match="got list"):
        rpfloat.cuda.round([1.0, 2.0], "e4m3")


if __name__ == "__main__":
    print(json.dumps(sweep()))
