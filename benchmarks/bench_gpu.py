#!/usr/bin/env python
"""GPU bandwidth of ``rpfloat.cuda.round`` against device-to-device copies.

For 1e8 float32 (or ``--size``) on the first CUDA device, prints a markdown
table: per format and mode the time of ``rpfloat.cuda.round(x, fmt, mode,
out=y)``, its effective bandwidth (bytes read + bytes written per second) and
its ratio to the fastest device-to-device copy of the same array measured in
the same process (numba's ``copy_to_device``, and CuPy's ``copyto`` and torch's
``copy_`` where installed). The issue's target: at least 0.8 of the copy.

Each time is the median over ROUNDS of BATCH calls queued back to back and
then waited for, divided by BATCH: the GPU's time per call, the host's launch
overhead hidden behind it as in a real pipeline.

    python benchmarks/bench_gpu.py                 # 1e8 float32
    python benchmarks/bench_gpu.py --size 1e7

Needs a CUDA GPU and numba's CUDA target (``pip install .[cuda]``); without one it
says so and exits with status 0. It never runs under numba's simulator, whose
timings mean nothing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

ELEMENT_CASES = (("bfloat16", "nearest"), ("e4m3", "nearest"), ("float16", "nearest"), ("bfloat16", "stochastic"),
                 ("e4m3", "stochastic"), ("float16", "stochastic"))
SCALED_CASES = (("mxfp8_e4m3", "nearest"), ("mxfp8_e4m3", "stochastic"), ("mxfp4_e2m1", "nearest"),
                ("nvfp4", "nearest"), ("e4m3 per tensor", "nearest"))
ROUNDS, BATCH = 7, 20


def _timed(function, synchronize):
    function()  # warm: compilation, first touch
    synchronize()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(BATCH):
            function()
        synchronize()
        times.append((time.perf_counter() - start) / BATCH)
    return statistics.median(times)


def _copies(x, y, host):
    """``{name: copy function}``: numba's, and CuPy's and torch's where installed."""
    copies = {"numba copy_to_device": lambda: y.copy_to_device(x)}
    try:
        import cupy
    except ImportError:
        pass
    else:
        source, target = cupy.asarray(host), cupy.empty(host.shape, host.dtype)
        copies["cupy.copyto"] = lambda source=source, target=target: cupy.copyto(target, source)
    try:
        import torch
    except ImportError:
        pass
    else:
        if torch.cuda.is_available():
            source = torch.from_numpy(host).cuda()
            target = torch.empty_like(source)
            copies["torch copy_"] = lambda source=source, target=target: target.copy_(source)
    return copies


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e8, help="elements (float32), default 1e8")
    args = parser.parse_args(argv)
    try:
        from numba import config, cuda
    except ImportError as error:
        print(f"no numba CUDA target ({error}); nothing to measure")
        return 0
    if config.ENABLE_CUDASIM or not cuda.is_available():
        print("no CUDA GPU here (or NUMBA_ENABLE_CUDASIM is set); nothing to measure")
        return 0
    import numpy as np

    import rpfloat as rp
    import rpfloat.cuda

    size = int(args.size)
    device = cuda.get_current_device()
    host = np.random.default_rng(0).standard_normal(size, dtype=np.float32)
    x = cuda.to_device(host)
    y = cuda.device_array_like(x)
    moved = 2 * x.nbytes  # read once, written once
    copies = {name: _timed(copy, cuda.synchronize) for name, copy in _copies(x, y, host).items()}
    fastest = min(copies.values())
    name = device.name.decode() if isinstance(device.name, bytes) else device.name
    print(f"GPU: {name}, {size:.0e} float32 (standard normal), median of {ROUNDS} rounds of {BATCH} calls\n")
    print("| case | ms | GB/s | × fastest copy |")
    print("| --- | ---: | ---: | ---: |")
    for label, seconds in copies.items():
        print(f"| {label} | {seconds * 1e3:.3f} | {moved / seconds / 1e9:.0f} | {fastest / seconds:.2f} |")
    formats = {"e4m3 per tensor": rp.ScaledFormat("e4m3")}
    for fmt, mode in ELEMENT_CASES + SCALED_CASES:
        rng = 1 if "stochastic" in mode else None
        target = formats.get(fmt, fmt)
        seconds = _timed(lambda: rpfloat.cuda.round(x, target, mode, rng=rng, out=y), cuda.synchronize)
        print(f"| {fmt} · {mode} | {seconds * 1e3:.3f} | {moved / seconds / 1e9:.0f} | {fastest / seconds:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
