"""The CUDA kernels on a real GPU, against the CPU path bit for bit.

``tests/test_cuda_sim.py`` checks the kernels' glue under numba's simulator in
CI, on every 8th pattern; here the kernels run compiled for the device, on
every pattern of its sweep (every float16 bit pattern and midpoint as float32
data, random float32 patterns and edges, for every format and mode; float64
data onto two formats), on arrays large enough for the grid-stride loop to
take many elements per thread, on the scaled formats of the simulator's
sweep and on large MX, NVFP4 and per-tensor arrays, and on CuPy arrays and
torch CUDA tensors, which must come back as arrays of their own kind.

Skipped where there is no CUDA GPU (CI has none; docs/gpu.md says where these
ran last).
"""
import numpy as np
import pytest

import test_cuda_sim as sim


def _real_gpu() -> bool:
    try:
        from numba import config, cuda
    except ImportError:
        return False
    return not config.ENABLE_CUDASIM and cuda.is_available()


pytestmark = [
    pytest.mark.skipif(not _real_gpu(), reason="needs a CUDA GPU and numba-cuda (none in CI)"),
    # small launches on a large GPU warn of under-use; the sweep's arrays are small on purpose
    pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaPerformanceWarning"),
]


def _assert_clean(report, runs):
    assert report["failures"] == [], report["failures"]
    assert report["runs"] == runs


@pytest.mark.parametrize("name", list(sim._formats()))
def test_every_float16_pattern_float32_data(name):
    report = sim.new_report()
    sim.sweep_format(report, name, np.float32, 1)
    _assert_clean(report, 8)
    assert report["elements"] == 8 * sim._float32_data().size


@pytest.mark.parametrize("name", sim.FLOAT64_FORMATS)
def test_every_float16_pattern_float64_data(name):
    report = sim.new_report()
    sim.sweep_format(report, name, np.float64, 1)
    _assert_clean(report, 8)


def test_launch_shapes_out_and_in_place():
    report = sim.new_report()
    sim.sweep_launches(report)
    _assert_clean(report, 17)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["nearest", "stochastic", "stochastic_equal", "odd"])
def test_large_array_many_elements_per_thread(dtype, mode):
    """2**23 + 5 numbers: each thread of the grid (at most MAX_BLOCKS blocks) takes
    several, and the stochastic counter crosses 2**32 inside the array."""
    from numba import cuda

    import rpfloat.cuda
    from rpfloat._kernels.cuda.kernels import MAX_BLOCKS, THREADS_PER_BLOCK
    from rpfloat.rounding import round_chunk

    size = 2**23 + 5
    assert size > 2 * MAX_BLOCKS * THREADS_PER_BLOCK
    data = (np.random.default_rng(11).standard_normal(size) * 300.0).astype(dtype)
    offset = 2**32 - size // 2
    expected = round_chunk(data, "e4m3", mode, rng=7, offset=offset)
    got = rpfloat.cuda.round(cuda.to_device(data), "e4m3", mode, rng=7, offset=offset).copy_to_host()
    np.testing.assert_array_equal(got.view(sim._bits_of(dtype)), expected.view(sim._bits_of(dtype)))


@pytest.mark.parametrize("name", list(sim.scaled_formats()))
def test_scaled_formats(name):
    report = sim.new_report()
    sim.sweep_scaled(report, name, np.float32)
    if name in ("mxfp8_e4m3", "int8 rceil per tensor", "e4m3 blocks of 300 along axis 1"):
        sim.sweep_scaled(report, name, np.float64)
    assert report["failures"] == [], report["failures"]
    assert report["runs"] >= len(sim.SCALED_MODES)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "nvfp4 + tensor scale", "e4m3 per tensor", "int8 per row"])
@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_large_scaled_arrays(fmt, mode):
    """2**22 numbers: many blocks per thread (MX), the segments and atomics of one
    scale per tensor or per row, and NVFP4's tensor scale over the whole array."""
    from numba import cuda

    import rpfloat as rp
    import rpfloat.cuda

    formats = {
        "mxfp8_e4m3": rp.format("mxfp8_e4m3"),
        "nvfp4 + tensor scale": rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True),
        "e4m3 per tensor": rp.ScaledFormat("e4m3"),
        "int8 per row": rp.ScaledFormat(rp.FixedFormat(8, 0), block_size=2**11),
    }
    data = sim.scaled_data((2**11, 2**11), np.float32, seed=5, non_finite=False)
    expected = rp.round(data, formats[fmt], mode, rng=3)
    got = rpfloat.cuda.round(cuda.to_device(data), formats[fmt], mode, rng=3).copy_to_host()
    assert got.dtype == expected.dtype
    bits = sim._bits_of(got.dtype)
    np.testing.assert_array_equal(got.view(bits), expected.view(bits))


def test_cupy_arrays_come_back_as_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    import rpfloat as rp
    import rpfloat.cuda

    host = np.random.default_rng(5).standard_normal((300, 70)).astype(np.float32)
    x = cupy.asarray(host)
    y = rpfloat.cuda.round(x, "e4m3", "stochastic", rng=9)
    assert isinstance(y, cupy.ndarray) and y.shape == host.shape and y.dtype == host.dtype
    expected = rp.round(host, "e4m3", "stochastic", rng=9)
    np.testing.assert_array_equal(cupy.asnumpy(y).view(np.int32), expected.view(np.int32))
    assert np.array_equal(cupy.asnumpy(x), host)  # the input is not modified
    # rp.round hands a CuPy array to the device, and out= in place
    z = rp.round(x, "bfloat16")
    assert isinstance(z, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(z), rp.round(host, "bfloat16"))
    assert rpfloat.cuda.round(x, "bfloat16", out=x) is x
    np.testing.assert_array_equal(cupy.asnumpy(x), rp.round(host, "bfloat16"))
    # scaled formats; float64 results for float32 data onto a tensor scale's format
    nvfp4 = rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)
    wide = rpfloat.cuda.round(cupy.asarray(host), nvfp4)
    assert isinstance(wide, cupy.ndarray) and wide.dtype == np.float64
    np.testing.assert_array_equal(cupy.asnumpy(wide), rp.round(host, nvfp4))


def test_torch_tensors_come_back_as_torch_tensors():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch is built without CUDA")
    import rpfloat as rp
    import rpfloat.cuda

    for dtype in (torch.float32, torch.float64):
        t = torch.randn(257, 33, dtype=dtype, device="cuda")
        host = t.cpu().numpy()
        r = rpfloat.cuda.round(t, "e5m2", "stochastic", rng=4)
        assert isinstance(r, torch.Tensor) and r.device == t.device and r.dtype == dtype
        bits = sim._bits_of(host.dtype)
        np.testing.assert_array_equal(r.cpu().numpy().view(bits),
                                      rp.round(host, "e5m2", "stochastic", rng=4).view(bits))
    t = torch.randn(64, 32, device="cuda")
    r = rpfloat.cuda.round(t, "mxfp4_e2m1", "stochastic", rng=2)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32
    np.testing.assert_array_equal(r.cpu().numpy(), rp.round(t.cpu().numpy(), "mxfp4_e2m1", "stochastic", rng=2))
    with pytest.raises(TypeError, match="requires grad.*detach"):
        rpfloat.cuda.round(torch.ones(3, device="cuda", requires_grad=True), "e4m3")
