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
same seed and offset.
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


def _mismatches(got, expected):
    bits = np.int32 if got.dtype == np.float32 else np.int64
    return np.flatnonzero(got.view(bits) != expected.view(bits))


def sweep():
    """Run in the child: every format and mode on the simulator against the CPU.
    Returns the report: comparisons made and the mismatches found (at most 5 each)."""
    from numba import config, cuda

    import rpfloat as rp
    import rpfloat.cuda
    from rpfloat._kernels.cuda.kernels import launch
    from rpfloat._plan import plan_for, random_key
    from rpfloat.rounding import round_chunk

    assert config.ENABLE_CUDASIM, "the sweep runs under numba's CUDA simulator"
    report = {"elements": 0, "runs": 0, "failures": []}

    def check(label, got, expected):
        report["runs"] += 1
        report["elements"] += int(expected.size)
        wrong = _mismatches(got, expected)
        if wrong.size:
            report["failures"].append({"case": label, "count": int(wrong.size), "first": [
                (int(i), float(got[i]), float(expected[i])) for i in wrong[:5]]})

    formats = _formats()
    cases = ([(name, _float32_data(_stride(name))) for name in formats]
             + [(name, _float64_data(_stride(name))) for name in FLOAT64_FORMATS])
    for name, data in cases:
        fmt, overflow = formats[name]
        device = cuda.to_device(data)
        for mode in rp.Mode:
            stochastic = mode.is_stochastic
            arguments = dict(overflow=overflow, rng=SEED if stochastic else None)
            offset = OFFSET if stochastic else 0
            assert not stochastic or offset + data.size > 2**32, (name, data.size)  # crosses a segment
            expected = round_chunk(data, fmt, mode, offset=offset, **arguments)
            got = rpfloat.cuda.round(device, fmt, mode, offset=offset, **arguments).copy_to_host()
            check(f"{name} {data.dtype} {mode.name.lower()}", got, expected)
    # a grid whose threads do not divide the array, and fewer random bits
    data = _float32_data()[:5000]
    for mode, rand_bits in (("nearest", None), ("stochastic", 7), ("stochastic_equal", None)):
        plan = plan_for(rp.format("e4m3"), mode, None, rand_bits, data.dtype)
        key = random_key(SEED)
        target = cuda.device_array(data.size, np.int32)
        launch(cuda.to_device(data.view(np.int32)), target, plan.params, int(plan.mode), key, 3, plan.rand_bits,
               blocks=3, threads=7)
        expected = round_chunk(data, "e4m3", mode, offset=3, rng=SEED, rand_bits=rand_bits) if plan.mode.is_stochastic \
            else round_chunk(data, "e4m3", mode)
        check(f"e4m3 launch 3x7 {mode} rand_bits={rand_bits}", target.copy_to_host().view(np.float32), expected)
    # out= and in place
    data = _float32_data()[:3000].reshape(60, 50)
    expected = rp.round(data, "bfloat16", "nearest")
    out = cuda.device_array_like(data)
    assert rpfloat.cuda.round(cuda.to_device(data), "bfloat16", out=out) is out
    check("bfloat16 out=", out.copy_to_host(), expected)
    device = cuda.to_device(data)
    rpfloat.cuda.round(device, "bfloat16", out=device)
    check("bfloat16 in place", device.copy_to_host(), expected)
    # empty arrays (NumPy 2 gives them zero strides, which numba's to_device keeps), and a
    # wrong-dtype out= (TypeError, as on the host)
    for shape in ((0,), (0, 3)):
        empty = rpfloat.cuda.round(cuda.to_device(np.zeros(shape, np.float32)), "e4m3", "stochastic", rng=1)
        check(f"empty {shape}", empty.copy_to_host(), np.zeros(shape, np.float32))
    try:
        rpfloat.cuda.round(cuda.to_device(data), "bfloat16", out=cuda.device_array(data.shape, np.float64))
    except TypeError as error:
        named = "out must have x's dtype" in str(error)
        check("out= of another dtype", np.float32([1.0 if named else 0.0]), np.float32([1.0]))
    else:
        check("out= of another dtype", np.float32([0.0]), np.float32([1.0]))
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
    assert report["runs"] == modes * (len(_formats()) + len(FLOAT64_FORMATS)) + 8
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
