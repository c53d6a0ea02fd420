"""rp.round hands a CUDA device array to rpfloat.cuda (under numba's CUDA
simulator, in a child process: the simulator changes numba for the whole
process)."""
import os
import subprocess
import sys

SCRIPT = """
import numpy as np
from numba import cuda
import rpfloat as rp
x = np.random.default_rng(3).standard_normal(300).astype(np.float32)
device = cuda.to_device(x)
for mode in ("nearest", "stochastic"):
    got = rp.round(device, "e4m3", mode, rng=5)
    assert getattr(got, "__cuda_ndarray__", False) or hasattr(got, "__cuda_array_interface__"), type(got)
    want = rp.round(x, "e4m3", mode, rng=5)
    assert np.array_equal(got.copy_to_host().view(np.uint32), want.astype(np.float32).view(np.uint32)), mode
try:
    rp.round(device, "e4m3", stats=True)
except TypeError as error:
    assert "stats=" in str(error)
else:
    raise AssertionError("stats=True on a device array must raise")
# numba-cuda's simulator has get_current_device, but its device has no id
import types
from rpfloat._kernels.cuda import kernels
real = kernels.cuda
kernels.cuda = types.SimpleNamespace(get_current_device=lambda: object(), to_device=real.to_device)
marks, call = kernels._Marks().take(8)
kernels.cuda = real
assert marks.size >= 8 and call == 1
print("ok")
"""


def test_rp_round_rounds_device_arrays_on_the_device():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")
