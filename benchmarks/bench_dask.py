#!/usr/bin/env python
"""Throughput of ``rpfloat.dask.round`` on a 2-worker LocalCluster, against ``rp.round`` on NumPy.

Prints one markdown table: for each format and mode, the median time of rounding
N float32 elements (default 1e8) with ``rp.round`` on one NumPy array (numba's
threads, as a user gets it), with ``rpfloat.dask.round`` on dask's threaded
scheduler in this process, and on a ``LocalCluster`` of worker processes
(loopback only) where the data already live in the workers' memory
(``persist``ed), so that no time goes into moving them; million elements per
second, and ``dask / numpy``: the time of ``rp.round(x)`` divided by the row's
time (above 1: faster than the NumPy call). Each dask row checks once that its bits equal the NumPy path's.

    python benchmarks/bench_dask.py                        # 1e8 elements, 2 workers, 3 runs per row
    python benchmarks/bench_dask.py --size 1e7 --repeats 5
    python benchmarks/bench_dask.py --chunk-mib 32 --workers 2 --threads-per-worker 1

Needs about 3.5 GiB of free memory at 1e8 (input and result on this side, the same
in the workers). Not part of the test run. Progress goes to stderr, the table to stdout.
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # benchmark the working tree, installed or not

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402

import rpfloat as rp  # noqa: E402
import rpfloat.dask as rpd  # noqa: E402

ROWS = [("bfloat16", "nearest", {}), ("e4m3", "nearest", {}), ("e4m3", "stochastic", {"rng": 0})]


def _median_seconds(call, repeats):
    """Median seconds of `call` over `repeats` runs, after one warm-up run."""
    call()
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e8, help="float32 elements (default 1e8)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--threads-per-worker", type=int, default=1, help="dask threads per worker (default 1)")
    parser.add_argument("--chunk-mib", type=float, default=64, help="MiB of float32 per chunk (default 64)")
    args = parser.parse_args(argv)
    size = int(args.size)
    chunk = max(1, int(args.chunk_mib * 2**20 // 4))

    print(f"generating {size:.0e} float32 ...", file=sys.stderr)
    x = np.random.default_rng(0).standard_normal(size, dtype=np.float32)
    local = da.from_array(x, chunks=chunk)
    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=args.threads_per_worker,
                                       processes=True, host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        print("scattering the data to the workers ...", file=sys.stderr)
        remote = client.persist(local)  # from here on the chunks live in the workers
        distributed.wait(remote)

        def on_cluster(fmt, mode, kwargs):
            result = client.persist(rpd.round(remote, fmt, mode, **kwargs))
            distributed.wait(result)
            return result

        def on_threads(fmt, mode, kwargs, out):
            da.store(rpd.round(local, fmt, mode, **kwargs), out, lock=False, scheduler="threads")

        cores = os.cpu_count()
        print(f"# rpfloat.dask.round vs rp.round, {size:.0e} float32 elements, chunks of {chunk:,} "
              f"({len(local.chunks[0])} chunks)\n")
        print(f"{platform.processor() or platform.machine()} · {cores} cores · Python {platform.python_version()} · "
              f"numpy {np.__version__} · numba {numba.__version__} (threads {numba.get_num_threads()}) · "
              f"dask {dask.__version__} · rpfloat {rp.__version__}\n")
        print("| format · mode | path | time | M elem/s | dask / numpy | same bits |")
        print("|---|---|---:|---:|---:|---|")
        for fmt, mode, kwargs in ROWS:
            what = f"{fmt} · {mode}"
            print(f"timing {what} ...", file=sys.stderr)
            expected = rp.round(x, fmt, mode, **kwargs)
            out = np.empty_like(expected)
            numpy_seconds = _median_seconds(lambda: rp.round(x, fmt, mode, **kwargs), args.repeats)
            into_seconds = _median_seconds(lambda: rp.round(x, fmt, mode, out=out, **kwargs), args.repeats)
            threads_seconds = _median_seconds(lambda: on_threads(fmt, mode, kwargs, out), args.repeats)
            threads_same = np.array_equal(out.view(np.uint32), expected.view(np.uint32))
            cluster_seconds = _median_seconds(lambda: on_cluster(fmt, mode, kwargs), args.repeats)
            cluster_same = np.array_equal(on_cluster(fmt, mode, kwargs).compute().view(np.uint32),
                                          expected.view(np.uint32))
            for path, seconds, same in [("numpy: rp.round(x)", numpy_seconds, "-"),
                                        ("numpy: rp.round(x, out=)", into_seconds, "-"),
                                        ("dask, threads in this process", threads_seconds, threads_same),
                                        (f"dask, LocalCluster {args.workers}×{args.threads_per_worker}",
                                         cluster_seconds, cluster_same)]:
                ratio = f"{numpy_seconds / seconds:.2f}"
                same = same if same == "-" else ("yes" if same else "**NO**")
                print(f"| {what} | {path} | {seconds * 1e3:,.0f} ms | {size / seconds / 1e6:,.0f} | {ratio} "
                      f"| {same} |", flush=True)
        print("\n`time`: median of the timed runs after one warm-up. `numpy`: `rp.round` on the whole array, "
              "which allocates its result (the baseline of `dask / numpy`), or writes into a given one. "
              "`threads`: `da.store(rpfloat.dask.round(da.from_array(x)), out)`. `LocalCluster`: the data "
              "persisted in the workers first; the time is `persist` of the rounded array and waiting for it.")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
