#!/usr/bin/env python
"""GPU bandwidth of ``rpfloat.cuda.round`` against a device-to-device copy.

For 1e8 float32 (or ``--size``) on the first CUDA device, prints a markdown table:
per format and mode the median time of ``rpfloat.cuda.round(x, fmt, mode, out=y)``,
its effective bandwidth (bytes read + bytes written per second) and its ratio to a
device-to-device copy of the same array (``y.copy_to_device(x)``), measured in the
same process. The issue's target: at least 0.8 of the copy.

    python benchmarks/bench_gpu.py                 # 1e8 float32, 10 repeats
    python benchmarks/bench_gpu.py --size 1e7 --repeats 5

Needs a CUDA GPU and numba's CUDA target (``pip install .[cuda]``); without one it
says so and exits with status 0. It never runs under numba's simulator, whose
timings mean nothing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

CASES = (("bfloat16", "nearest"), ("e4m3", "nearest"), ("bfloat16", "stochastic"), ("e4m3", "stochastic"),
         ("float16", "stochastic"))


def _timed(function, repeats, synchronize):
    function()  # warm: compilation, first-touch
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e8, help="elements (float32), default 1e8")
    parser.add_argument("--repeats", type=int, default=10)
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

    import rpfloat.cuda

    size = int(args.size)
    device = cuda.get_current_device()
    x = cuda.to_device(np.random.default_rng(0).standard_normal(size, dtype=np.float32))
    y = cuda.device_array_like(x)
    moved = 2 * x.nbytes  # read once, written once
    copy_seconds = _timed(lambda: y.copy_to_device(x), args.repeats, cuda.synchronize)
    print(f"GPU: {device.name.decode() if isinstance(device.name, bytes) else device.name}, "
          f"{size:.0e} float32, median of {args.repeats}\n")
    print("| case | ms | GB/s | vs copy |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| device-to-device copy | {copy_seconds * 1e3:.3f} | {moved / copy_seconds / 1e9:.1f} | 1.00 |")
    for fmt, mode in CASES:
        rng = 1 if mode == "stochastic" else None
        seconds = _timed(lambda: rpfloat.cuda.round(x, fmt, mode, rng=rng, out=y), args.repeats, cuda.synchronize)
        print(f"| {fmt} · {mode} | {seconds * 1e3:.3f} | {moved / seconds / 1e9:.1f} | "
              f"{copy_seconds / seconds:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
