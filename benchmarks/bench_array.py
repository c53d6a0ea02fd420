#!/usr/bin/env python
"""Benchmark of RPArray elementwise operations against NumPy plus one rp.round.

For 1e6-element RPArrays of a few formats and modes, times ``a + b``, ``a * b`` and
``a / b`` (every result correctly rounded from the exact value, docs/arrays.md) and
the same operation on the carrier ndarrays followed by one ``rp.round`` of its
result onto the format (``np.add(x, y)`` + ``rp.round``, which is not correctly
rounded in every mode), and prints a markdown table: both times, their ratio and
the RPArray throughput in millions of elements per second.

    python benchmarks/bench_array.py              # 1e6 elements, 7 repeats
    python benchmarks/bench_array.py --size 1e5   # another size
    python benchmarks/bench_array.py --quick      # 1e5 elements, 3 repeats, bfloat16 only

Both columns of a row are measured alternately in the same run (best of the
repeats), so their ratio holds even when the machine is busy.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # benchmark the working tree, installed or not

import numpy as np  # noqa: E402

import rpfloat as rp  # noqa: E402

FORMATS = ["bfloat16", "float16", "e4m3"]
MODES = ["nearest", "stochastic", "up"]
OPERATIONS = [("+", np.add), ("*", np.multiply), ("/", np.divide)]


def best_of(functions, repeats: int) -> list:
    """Best wall time of each function over `repeats` rounds, the functions run
    one after the other within a round."""
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for index, function in enumerate(functions):
            start = time.perf_counter()
            function()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e6, help="elements per array (default 1e6)")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per row (best is kept)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated formats")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--quick", action="store_true", help="1e5 elements, 3 repeats, bfloat16 only")
    args = parser.parse_args(argv)
    size, repeats = int(args.size), args.repeats
    formats, modes = args.formats.split(","), args.modes.split(",")
    if args.quick:
        size, repeats, formats = 10**5, 3, ["bfloat16"]

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(size), rng.standard_normal(size)
    rows = []
    for fmt in formats:
        for mode in modes:
            a = rp.asarray(x, fmt, mode, rng=1)
            b = rp.asarray(y, fmt, mode, rng=2)
            xs, ys = np.asarray(a), np.asarray(b)
            for symbol, ufunc in OPERATIONS:
                print(f"timing {fmt} {mode} {symbol} ...", file=sys.stderr)
                ufunc(a, b)  # warm-up: compilation, plans

                def numpy_then_round(ufunc=ufunc):
                    return rp.round(ufunc(xs, ys), fmt, mode, rng=3)

                rp_seconds, np_seconds = best_of([lambda ufunc=ufunc: ufunc(a, b), numpy_then_round], repeats)
                rows.append((fmt, mode, symbol, rp_seconds, np_seconds))

    print(f"# RPArray benchmark: {size:,} elements, results correctly rounded\n")
    print(f"- {time.strftime('%Y-%m-%d %H:%M')}, {cpu_name()}, {os.cpu_count()} cores")
    print(f"- Python {platform.python_version()}, NumPy {np.__version__}, rpfloat {rp.__version__}")
    print(f"- best of {repeats} rounds; `np + rp.round`: the operation on the carrier arrays, then one "
          "rp.round of its result\n")
    print("| format | mode | op | RPArray (ms) | np + rp.round (ms) | ratio | M elements/s |")
    print("|---|---|:-:|---:|---:|---:|---:|")
    for fmt, mode, symbol, rp_seconds, np_seconds in rows:
        print(f"| {fmt} | {mode} | `{symbol}` | {rp_seconds * 1e3:.2f} | {np_seconds * 1e3:.2f} | "
              f"{rp_seconds / np_seconds:.2f} | {size / rp_seconds / 1e6:,.0f} |")


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # x / 0 in the data
        main()
