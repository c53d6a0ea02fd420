#!/usr/bin/env python
"""Benchmark of ``rp.matmul`` with every step rounded.

Multiplies two n x n float32 matrices with every product and every partial sum
rounded to bfloat16 (``rp.matmul(a, b, "bfloat16")``), nearest and stochastic,
on 1 and on all of numba's threads, and a few variants (other modes, a float32
accumulator, fused multiply-add, pairwise and Kahan orders, tensor-core blocks),
and prints a markdown table: the time of one product, the time per
multiply-add, the ratio to ``np.matmul`` of the same float32 matrices (BLAS, its
own threads, measured in the same run), and the error of the result against the
float64 product (what the rounding costs).

    python benchmarks/bench_matmul.py                   # 512 and 1024, 3 repeats
    python benchmarks/bench_matmul.py --sizes 256       # other sizes
    python benchmarks/bench_matmul.py --quick           # 128, 1 repeat (smoke run)

The first call compiles the kernel (or loads it from numba's cache); its time is
printed apart and never counted in the table.
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

# (label, keyword arguments of rp.matmul after fmt="bfloat16"): every size, 1 and all threads
MAIN_CASES = [
    ("bfloat16 products and sums, nearest", dict(mode="nearest")),
    ("bfloat16 products and sums, stochastic", dict(mode="stochastic", rng=0)),
]
# the first size only, all threads
VARIANTS = [
    ("bfloat16 products and sums, toward_zero", dict(mode="toward_zero")),
    ("bfloat16 products, float32 sums, nearest", dict(acc="float32")),
    ("fused (fma) into float32, nearest", dict(acc="float32", fma=True)),
    ("bfloat16, pairwise order, nearest", dict(order="pairwise")),
    ("bfloat16, Kahan order, nearest", dict(order="kahan")),
    ("exact blocks of 32 into float32 (block_k=32)", dict(acc="float32", block_k=32)),
]


# Seconds each rp.matmul case runs untimed first: OpenBLAS's threads keep spinning for
# about 0.1 s after np.matmul or np.linalg.norm returns, and the first rp.matmul
# calls on two cores run up to 1.4x slower meanwhile.
WARM_UP = 0.3


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
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024], help="matrix sizes n")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (best is kept)")
    parser.add_argument("--no-variants", action="store_true", help="nearest and stochastic only")
    parser.add_argument("--quick", action="store_true", help="128 x 128, one repeat, no variants")
    args = parser.parse_args(argv)
    sizes, repeats, variants = args.sizes, args.repeats, VARIANTS
    if args.quick:
        sizes, repeats, variants = [128], 1, []
    if args.no_variants:
        variants = []
    all_threads = numba.get_num_threads()
    thread_counts = sorted({1, all_threads})

    start = time.perf_counter()
    rp.matmul(np.ones((2, 4), np.float32), np.ones((4, 4), np.float32), "bfloat16")
    first_call = time.perf_counter() - start

    rows = []
    for size in sizes:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((size, size)).astype(np.float32)
        b = rng.standard_normal((size, size)).astype(np.float32)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        numpy_seconds = best_time(lambda: np.matmul(a, b), max(repeats, 5), min_seconds=0.2)
        rows.append((size, "BLAS", "np.matmul, float32", numpy_seconds, numpy_seconds,
                     relative_error(np.matmul(a, b), exact)))
        cases = [(label, kwargs, threads) for label, kwargs in MAIN_CASES for threads in thread_counts]
        if size == sizes[0]:
            cases += [(label, kwargs, all_threads) for label, kwargs in variants]
        for label, kwargs, threads in cases:
            print(f"timing {size}: {label}, {threads} thread(s) ...", file=sys.stderr)
            numba.set_num_threads(threads)
            try:
                error = relative_error(rp.matmul(a, b, "bfloat16", **kwargs), exact)  # compiles: untimed
                # untimed for WARM_UP seconds: BLAS's threads spin on after its calls (above) and take a core
                best_time(lambda: rp.matmul(a, b, "bfloat16", **kwargs), 1, min_seconds=WARM_UP)
                seconds = best_time(lambda: rp.matmul(a, b, "bfloat16", **kwargs), repeats)
            finally:
                numba.set_num_threads(all_threads)
            rows.append((size, str(threads), f"rp.matmul: {label}", seconds, numpy_seconds, error))

    print("# rp.matmul benchmark: n x n float32 matrices, every step rounded\n")
    print(f"- {time.strftime('%Y-%m-%d %H:%M')}, {cpu_name()}, {os.cpu_count()} cores")
    print(f"- Python {platform.python_version()}, NumPy {np.__version__}, numba {numba.__version__}, "
          f"rpfloat {rp.__version__}")
    print(f"- BLAS threads: {blas_threads()}; rp.matmul: the threads column (numba's threads)")
    print(f"- first rp.matmul call (compilation or cache load): {first_call:.2f} s, not counted below")
    print(f"- best of {repeats} runs; error: relative Frobenius norm against the float64 product\n")
    print("| n | threads | what | time (s) | ns per multiply-add | x np.matmul | relative error |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for size, threads, label, seconds, numpy_seconds, error in rows:
        print(f"| {size} | {threads} | {label} | {seconds:.4f} | {seconds / size**3 * 1e9:.2f} "
              f"| {seconds / numpy_seconds:,.1f} | {error:.2e} |")


if __name__ == "__main__":
    main()
