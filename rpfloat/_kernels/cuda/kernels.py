"""CUDA kernels: round a flat array of carrier bits onto a format, one thread per
element in a grid-stride loop.

Each element goes through ``core.element.round_bits`` with the general paths on
(there is no fast path: on a GPU the loop is bound by memory, and a branch on
the format's parameters is uniform across a warp), and element ``i`` draws
number ``offset + i`` of the stream ``key`` (``core.stream.random_bits``), as
the CPU backend's elements do. Those are plain ``@njit`` functions, which
numba's CUDA target compiles as device functions.

One kernel per rounding mode, made on first use, with the mode as a constant
(as the CPU kernels have it), so that the deterministic modes compile no random
draw. Their arguments: ``source`` and ``target`` (int32 or int64 device arrays
of the same size, the carrier's bits; they may be the same array), ``params``
(``layout.PARAMS_TYPE``), ``key`` (uint64), ``offset`` (int64), ``rand_bits``
(int64, 1..64).
"""
import functools

import numpy as np
from numba import config, cuda

from ..core.element import U_ZERO, round_bits
from ..core.layout import ALL_MODES, STOCHASTIC
from ..core.stream import random_bits

__all__ = ["mode_kernel", "launch"]

THREADS_PER_BLOCK = 256
# A grid of at most this many blocks: each thread then rounds several elements
# (grid-stride), which amortizes its start without leaving a large GPU idle.
MAX_BLOCKS = 4096
# numba's simulator runs each thread of a block as a Python thread: a small grid
# (each thread then takes many elements) is what keeps it fast
SIMULATOR_GRID = (2, 32)


@functools.lru_cache(maxsize=None)
def mode_kernel(mode):
    """The kernel for `mode` (a mode number of ``layout.ALL_MODES``)."""
    if mode not in ALL_MODES:
        raise ValueError(f"no rounding mode numbered {mode}")
    stochastic = mode >= STOCHASTIC  # a constant: the deterministic kernels draw nothing

    @cuda.jit
    def round_carrier_bits(source, target, params, key, offset, rand_bits):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, source.size, stride):
            # np.uint64: a no-op on the device; in the simulator, where the njit
            # call returns a Python int, it keeps the type that round_bits expects
            random = np.uint64(random_bits(key, offset + i)) if stochastic else U_ZERO
            target[i] = round_bits(source[i], params, mode, random, rand_bits, True)

    return round_carrier_bits


def launch(source, target, params, mode, key, offset, rand_bits, blocks=None, threads=THREADS_PER_BLOCK):
    """Round the carrier bits `source` into `target` (flat device arrays) with the
    kernel of `mode`; `blocks` None sizes the grid for the array. Asynchronous on
    the default stream."""
    size = source.size
    if size == 0:
        return
    if blocks is None and config.ENABLE_CUDASIM:
        blocks, threads = SIMULATOR_GRID
    elif blocks is None:
        blocks = min(MAX_BLOCKS, -(-size // threads))
    mode_kernel(int(mode))[blocks, threads](
        source, target, tuple(params), np.uint64(key), np.int64(offset), np.int64(rand_bits))
