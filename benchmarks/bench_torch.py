#!/usr/bin/env python
"""Throughput of ``rpfloat.torch.round`` on a float32 CPU tensor, against ``torch.clone``.

Prints one markdown table: for each row the median time of one call, millions of
elements per second, and ``× clone``: the time of ``torch.clone`` of the same tensor
divided by the row's time (1.0 means as fast as copying the tensor; both allocate
their result). One thread: ``numba.set_num_threads(1)``, ``torch.set_num_threads(1)``.

    python benchmarks/bench_torch.py                # 1e7 elements, 7 runs per row
    python benchmarks/bench_torch.py --size 1e6 --repeats 3

Not part of the test run. Progress goes to stderr, the table to stdout.
"""
from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # benchmark the working tree, installed or not

import numba  # noqa: E402
import torch  # noqa: E402

import rpfloat as rp  # noqa: E402
import rpfloat.torch as rpt  # noqa: E402

perf_counter = time.perf_counter


def _paired_times(call, baseline, repeats):
    """Median seconds of `call` and median ratio baseline time / call time, each
    timed run paired with a baseline run just before it; one warm-up call first."""
    call(), baseline()
    times, ratios = [], []
    gc.disable()
    try:
        for _ in range(repeats):
            start = perf_counter()
            baseline()
            base_seconds = perf_counter() - start
            start = perf_counter()
            call()
            seconds = perf_counter() - start
            times.append(seconds)
            ratios.append(base_seconds / seconds)
    finally:
        gc.enable()
    return statistics.median(times), statistics.median(ratios)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e7, help="elements of the tensor (default 1e7)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per row (default 7)")
    args = parser.parse_args(argv)
    size = int(args.size)
    numba.set_num_threads(1)
    torch.set_num_threads(1)

    generator = torch.Generator().manual_seed(0)
    t = torch.randn(size, generator=generator)
    t_grad = t.clone().requires_grad_()
    rows = [
        ("bfloat16 · nearest", lambda: rpt.round(t, "bfloat16")),
        ("e4m3 · stochastic (rng=0)", lambda: rpt.round(t, "e4m3", "stochastic", rng=0)),
        ("e4m3 · stochastic (torch.Generator)", lambda: rpt.round(t, "e4m3", "stochastic", rng=generator)),
        ("bfloat16 · nearest · requires_grad", lambda: rpt.round(t_grad, "bfloat16")),
        ("bfloat16 · nearest · bfloat16 tensor", None),
    ]
    t_bf16 = t.to(torch.bfloat16)
    rows[-1] = (rows[-1][0], lambda: rpt.round(t_bf16, "bfloat16"))

    print(f"# rpfloat.torch.round vs torch.clone, {size:.0e} float32 elements, 1 thread\n")
    print(f"{platform.processor() or platform.machine()} · Python {platform.python_version()} · "
          f"torch {torch.__version__} · numba {numba.__version__} · rpfloat {rp.__version__}\n")
    print("| what | time/call | M elem/s | × clone |")
    print("|---|---:|---:|---:|")
    clone_seconds, _ = _paired_times(lambda: torch.clone(t), lambda: None, args.repeats)
    print(f"| torch.clone | {clone_seconds * 1e3:.2f} ms | {size / clone_seconds / 1e6:,.1f} | 1.00 |")
    for what, call in rows:
        print(f"timing {what} ...", file=sys.stderr)
        baseline = (lambda: torch.clone(t_bf16)) if "bfloat16 tensor" in what else (lambda: torch.clone(t))
        seconds, ratio = _paired_times(call, baseline, args.repeats)
        print(f"| {what} | {seconds * 1e3:.2f} ms | {size / seconds / 1e6:,.1f} | {ratio:.2f} |")
    print("\n`× clone`: the clone time of the same tensor (bfloat16 for the bfloat16 row) divided by the "
          "row's time, median over paired runs.")


if __name__ == "__main__":
    main()
