#!/usr/bin/env python
"""Benchmark of ``rp.matmul`` with every step rounded (issue 5).

Multiplies two 512x512 float32 matrices with every product and every partial sum
rounded to bfloat16 (``rp.matmul(a, b, "bfloat16")``), and a few variants, and prints
a markdown table: the time of one product, the time per multiply-add, the slowdown
against ``np.matmul`` of the same float32 matrices (BLAS, measured in this process),
and the error of the result against the float64 product (what the rounding costs).

    python benchmarks/bench_matmul.py              # 512x512, 3 repeats
    python benchmarks/bench_matmul.py --size 256   # another size
    python benchmarks/bench_matmul.py --quick      # 128x128, 1 repeat (smoke run)

The first call compiles the kernel (or loads it from numba's cache); its time is
printed apart and never counted in the table. rp.matmul runs on one core; the
``np.matmul`` row says how many threads BLAS may use.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # benchmark the working tree, installed or not

import numba  # noqa: E402
import numpy as np  # noqa: E402

import rpfloat as rp  # noqa: E402

CASES = [
    # (label, keyword arguments of rp.matmul after fmt="bfloat16")
    ("bfloat16 products and sums, nearest", dict(mode="nearest")),
    ("bfloat16 products and sums, stochastic", dict(mode="stochastic", rng=0)),
    ("bfloat16 products and sums, toward_zero", dict(mode="toward_zero")),
    ("bfloat16 products, float32 sums, nearest", dict(acc="float32")),
    ("fused (fma) into float32, nearest", dict(acc="float32", fma=True)),
    ("bfloat16, pairwise order, nearest", dict(order="pairwise")),
]


def best_time(function, repeats: int, min_seconds: float = 0.0) -> float:
    """Best wall time of `repeats` runs; a fast call is repeated within a run until
    it lasts `min_seconds`, and timed per call."""
    best = float("inf")
    for _ in range(repeats):
        calls = 0
        start = time.perf_counter()
        while True:
            function()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = min(best, elapsed / calls)
    return best


def relative_error(result, exact) -> float:
    return float(np.linalg.norm(np.asarray(result, np.float64) - exact) / np.linalg.norm(exact))


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_threads() -> str:
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(variable):
            return f"{variable}={os.environ[variable]}"
    return f"default ({os.cpu_count()} cores)"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="matrix size n (n x n times n x n)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (best is kept)")
    parser.add_argument("--quick", action="store_true", help="128 x 128, one repeat, first two cases")
    args = parser.parse_args(argv)
    size, repeats, cases = args.size, args.repeats, CASES
    if args.quick:
        size, repeats, cases = 128, 1, CASES[:2]

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    steps = size**3

    start = time.perf_counter()
    rp.matmul(a[:2, :2], b[:2, :2], "bfloat16")
    first_call = time.perf_counter() - start

    numpy_seconds = best_time(lambda: np.matmul(a, b), max(repeats, 5), min_seconds=0.2)
    rows = [("np.matmul, float32 (BLAS)", numpy_seconds, relative_error(np.matmul(a, b), exact))]
    for label, kwargs in cases:
        print(f"timing {label} ...", file=sys.stderr)
        seconds = best_time(lambda: rp.matmul(a, b, "bfloat16", **kwargs), repeats)
        rows.append((f"rp.matmul: {label}", seconds, relative_error(rp.matmul(a, b, "bfloat16", **kwargs), exact)))

    print(f"# rp.matmul benchmark: {size} x {size} float32 matrices, every step rounded\n")
    print(f"- {time.strftime('%Y-%m-%d %H:%M')}, {cpu_name()}, {os.cpu_count()} cores")
    print(f"- Python {platform.python_version()}, NumPy {np.__version__}, numba {numba.__version__}, "
          f"rpfloat {rp.__version__}")
    print(f"- BLAS threads: {blas_threads()}; rp.matmul: one thread")
    print(f"- first rp.matmul call (compilation or cache load): {first_call:.2f} s, not counted below")
    print(f"- best of {repeats} runs; error: relative Frobenius norm against the float64 product\n")
    print("| what | time (s) | ns per multiply-add | slowdown vs np.matmul | relative error |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds, error in rows:
        print(f"| {label} | {seconds:.4f} | {seconds / steps * 1e9:.2f} | {seconds / numpy_seconds:,.0f}x "
              f"| {error:.2e} |")


if __name__ == "__main__":
    main()
