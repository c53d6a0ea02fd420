#!/usr/bin/env python
"""Throughput, overhead and memory benchmark of ``rp.round``.

One run prints, in markdown:

1. a header: date, CPU model, Python / NumPy / numba / ml_dtypes / rpfloat versions,
   the peers found;
2. the throughput table: per row M elements/s and the ratios to ``np.copyto`` of the
   same array and to the ``ml_dtypes`` astype round trip, measured in this process;
3. the overhead table: 16-element calls, cold start, ``out=`` allocations, peak memory.

    python benchmarks/bench_round.py            # sizes 1e3, 1e5, 1e7  (~3 min on 2 cores)
    python benchmarks/bench_round.py --quick    # 1e5 only, 3 repeats   (smoke run)
    python benchmarks/bench_round.py --large    # adds 1e8
    python benchmarks/bench_round.py --stats    # rp.round(..., stats=True) against the plain call

See benchmarks/README.md for what every column means. Progress goes to stderr, the
tables to stdout, so ``python benchmarks/bench_round.py > results.md`` works.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import textwrap
import time
import tracemalloc
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # benchmark the working tree, installed or not

import numpy as np  # noqa: E402

import numba  # noqa: E402

import rpfloat as rp  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # the table then says "-" in the ml_dtypes column
    ml_dtypes = None

perf_counter = time.perf_counter

DEFAULT_SIZES = (10**3, 10**5, 10**7)
LARGE_SIZE = 10**8
REPEATS = 7
MIN_RUN_S = 2e-3        # a timed run repeats a fast call until it lasts at least this
BUDGET_S = 2.0          # a slow call gets fewer runs (never fewer than 3) to fit this
SMALL_N = 16            # the "small array" check
MEMORY_N = 10**6        # tracemalloc checks
RSS_N = 10**7           # peak-RSS check in a subprocess
VALUE_SETS = ("normal", "relu", "gauss", "wide")
FIXED_VALUE_SETS = ("normal", "relu", "wide")  # gauss is normal there
PEER_FULL_MAX = 10**6   # above this, peers run bfloat16 nearest on "normal" values only
                        # (they take seconds per call there); --all-peers runs them all

# (label, rp.format spec, ml_dtypes type name or None). float16 is numpy's own type.
FLOAT_FORMATS = (
    ("bfloat16", "bfloat16", "bfloat16"),
    ("float16", "float16", "float16"),
    ("e4m3", "e4m3", "float8_e4m3fn"),
    ("e5m2", "e5m2", "float8_e5m2"),
    ("float6_e3m2fn", "float6_e3m2fn", "float6_e3m2fn"),
    ("FloatFormat(6, 9)", ("FloatFormat", 6, 9, True), None),
    ("FloatFormat(6, 9, subnormals=False)", ("FloatFormat", 6, 9, False), None),
)
FIXED_FORMATS = (("q8.8", "q8.8", None), ("q16.16", "q16.16", None))
# scaled formats: (label, rp.format spec or a ScaledFormat); rounded on raw N(0, 1) data
SCALED_FORMATS = (
    ("mxfp8_e4m3", "mxfp8_e4m3"),
    ("mxfp4_e2m1", "mxfp4_e2m1"),
    ("mxint8", "mxint8"),
    ("nvfp4", "nvfp4"),
    # two-level NVFP4: float64 results (the products with the float32 tensor scale)
    ("nvfp4 + tensor scale", rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)),
    ("e4m3 per tensor", rp.ScaledFormat("e4m3")),
    ("int8 per tensor", rp.ScaledFormat(rp.FixedFormat(8, 0))),
)
DTYPE_SHORT = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def make_format(spec):
    if isinstance(spec, rp.ScaledFormat):
        return spec
    if isinstance(spec, tuple):
        _, exp_bits, man_bits, subnormals = spec
        return rp.FloatFormat(exp_bits, man_bits, subnormals=subnormals)
    return rp.format(spec)


def result_dtype(dtype, fmt) -> np.dtype:
    """The dtype rp.round returns for floating input of `dtype` (docs/rounding.md)."""
    return np.result_type(np.dtype(dtype), fmt.carrier)


def ml_type(name):
    if name is None:
        return None
    if name == "float16":
        return np.dtype(np.float16)
    if ml_dtypes is None or not hasattr(ml_dtypes, name):
        return None
    return np.dtype(getattr(ml_dtypes, name))


# --------------------------------------------------------------------------- inputs

_INPUTS: dict = {}


def make_input(fmt, value_set: str, dtype, n: int) -> np.ndarray:
    """Standard normal values for `fmt` (cached).

    normal: |x| = min_normal + |z| * s with z standard normal and s = min(1, (max -
            min_normal) / 8): every value is a normal number of the format (fixed
            point: z * max / 8, inside the range). No subnormal, no overflow.
    relu:   the normal set with its negative values +0 (ReLU activations: half zeros).
    gauss:  z * s, s = min(1, max / 8): raw normal data, whose smallest magnitudes
            fall below min_normal and below the smallest spacing (weights,
            activations, gradients). Fixed point: as normal.
    wide:   log2|x| uniform over [smallest subnormal exponent - 3, emax + 3] (fixed
            point: [-frac_bits - 3, int_bits + 2]), clipped to the input dtype, random
            signs: underflow to zero, subnormals, normals and overflow all occur.
    """
    dtype = np.dtype(dtype)
    key = (fmt, value_set, dtype, n)
    if key in _INPUTS:
        return _INPUTS[key]
    rng = np.random.default_rng(20240501)
    z = rng.standard_normal(n)
    fixed = isinstance(fmt, rp.FixedFormat)
    if isinstance(fmt, rp.ScaledFormat):  # the scales follow the data: raw N(0, 1)
        x = np.maximum(z, 0.0) if value_set == "relu" else z
    elif value_set == "gauss" and not fixed:
        x = z * min(1.0, fmt.max / 8)
    elif value_set in ("normal", "relu", "gauss"):
        if fixed:
            x = z * (fmt.max / 8)
        else:
            s = min(1.0, (fmt.max - fmt.min_normal) / 8)
            x = np.copysign(fmt.min_normal + np.abs(z) * s, z)
        if value_set == "relu":
            x = np.maximum(x, 0.0)
    else:
        finfo = np.finfo(dtype)
        if fixed:
            lo, hi = -fmt.frac_bits - 3, fmt.int_bits + 2
        else:
            lo = math.log2(fmt.smallest_subnormal) - 3
            hi = fmt.emax + 3
        lo = max(lo, math.log2(float(finfo.smallest_subnormal)))
        hi = min(hi, float(finfo.maxexp) - 0.01)
        u = rng.uniform(lo, hi, n)
        x = np.copysign(np.exp2(u), z)
    x = x.astype(dtype)
    _INPUTS[key] = x
    return x


def clear_inputs():
    _INPUTS.clear()
    gc.collect()


# --------------------------------------------------------------------------- timing

def _inner_count(fn: Callable[[], object]) -> tuple[int, float]:
    """(calls per timed run, seconds of one call) after a warm-up: a run repeats a
    fast call until it lasts about MIN_RUN_S (timer resolution)."""
    fn()  # warm-up: compilation, caches, first touch of the buffers
    t0 = perf_counter()
    fn()
    single = perf_counter() - t0
    if single < MIN_RUN_S:
        return int(min(100_000, max(1, MIN_RUN_S / max(single, 1e-9)))), single
    return 1, single


def _timed(fn: Callable[[], object], inner: int) -> float:
    t0 = perf_counter()
    for _ in range(inner):
        fn()
    return (perf_counter() - t0) / inner


def bench(fn: Callable[[], object], repeats: int,
          baseline: Callable[[], object] | None = None) -> tuple[float, int, float | None]:
    """(median seconds per call of `fn`, timed runs, median of baseline / fn).

    A call slower than BUDGET_S / repeats gets fewer runs, at least 3. With a
    `baseline` (np.copyto of the same array), each timed run of `fn` is paired
    with a run of the baseline just before it and the ratio is the median of the
    pairs' ratios: these machines are shared and their speed drifts within
    seconds, so a ratio of two distant measurements would carry the drift.
    """
    inner, single = _inner_count(fn)
    base_inner = _inner_count(baseline)[0] if baseline is not None else 0
    runs = repeats
    if single * repeats > BUDGET_S:
        runs = max(3, min(repeats, int(BUDGET_S / single)))
    times, ratios = [], []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            base = _timed(baseline, base_inner) if baseline is not None else None
            times.append(_timed(fn, inner))
            if base is not None:
                ratios.append(base / times[-1])
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(times), runs, (statistics.median(ratios) if ratios else None)


def set_threads(n: int) -> bool:
    try:
        numba.set_num_threads(n)
        return True
    except ValueError:  # more than NUMBA_NUM_THREADS
        return False


# --------------------------------------------------------------------------- peers

@dataclass
class Peer:
    name: str
    version: str | None   # None: not installed
    builders: dict = field(default_factory=dict)  # (format label, mode) -> (note, make(x) -> fn)


def find_peers() -> list[Peer]:
    peers = []

    try:
        import pychop
        version = getattr(pychop, "__version__", "?")

        def chop(e, m, rmode):
            def make(x):
                # chunk_size beyond the array: pychop's plain NumPy path (its default
                # 800-element dask chunking is ~50x slower still).
                c = pychop.Chop(e, m, rmode=rmode, chunk_size=2**62, random_state=0)
                return lambda: c(x)
            return make

        builders = {
            ("bfloat16", "nearest"): ("Chop(8, 7, rmode=1)", chop(8, 7, 1)),
            ("e4m3", "nearest"): ("Chop(4, 3, rmode=1), IEEE-style: max 240", chop(4, 3, 1)),
            ("bfloat16", "stochastic"): ("Chop(8, 7, rmode=5)", chop(8, 7, 5)),
        }
        peers.append(Peer("pychop", version, builders))
    except Exception:
        peers.append(Peer("pychop", None))

    try:
        import gfloat
        from gfloat.formats import format_info_bfloat16, format_info_ocp_e4m3
        try:
            from importlib.metadata import version as dist_version
            version = dist_version("gfloat")
        except Exception:
            version = "?"

        def gf(fi, rnd=None, srnumbits=0):
            def make(x):
                if rnd is None:
                    return lambda: gfloat.round_ndarray(fi, x)
                rng = np.random.default_rng(0)
                return lambda: gfloat.round_ndarray(
                    fi, x, rnd, srbits=rng.integers(0, 2**srnumbits, x.size).reshape(x.shape),
                    srnumbits=srnumbits)
            return make

        builders = {
            ("bfloat16", "nearest"): ("round_ndarray(bfloat16)", gf(format_info_bfloat16)),
            ("e4m3", "nearest"): ("round_ndarray(ocp_e4m3)", gf(format_info_ocp_e4m3)),
            ("bfloat16", "stochastic"): (
                "round_ndarray(bfloat16, Stochastic, 16 bits, drawn per call)",
                gf(format_info_bfloat16, gfloat.RoundMode.Stochastic, 16)),
        }
        peers.append(Peer("gfloat", version, builders))
    except Exception:
        peers.append(Peer("gfloat", None))

    try:
        import apytypes as apy
        version = getattr(apy, "__version__", "?")
        try:
            apy.reset_thread_pool(1)  # single thread, like the rows it is compared to
        except Exception:
            pass

        def apf(e, m, stochastic=False):
            def make(x):
                if not stochastic:
                    return lambda: apy.APyFloatArray.from_float(x, e, m).to_numpy()
                q = apy.QuantizationMode.STOCH_WEIGHTED
                return lambda: apy.APyFloatArray.from_float(x, 8, 23).cast(
                    e, m, quantization=q).to_numpy()
            return make

        builders = {
            ("bfloat16", "nearest"): ("APyFloatArray.from_float(x, 8, 7)", apf(8, 7)),
            ("e4m3", "nearest"): ("from_float(x, 4, 3), IEEE-style: max 240", apf(4, 3)),
            ("bfloat16", "stochastic"): ("from_float(x, 8, 23).cast(8, 7, STOCH_WEIGHTED)",
                                         apf(8, 7, True)),
        }
        peers.append(Peer("apytypes", version, builders))
    except Exception:
        peers.append(Peer("apytypes", None))
    return peers


# --------------------------------------------------------------------------- rows

@dataclass
class Case:
    section: str
    label: str            # format label
    fmt: object
    mode: str
    dtype: np.dtype
    threads: int = 1
    ml_name: str | None = None
    target: str = "-"
    alloc: bool = False   # True: rp.round(x, fmt) allocating its result; False: out=
    peer: Peer | None = None
    peer_note: str = ""
    value_sets: tuple = VALUE_SETS
    copy_into: np.dtype | None = None  # a reference row: np.copyto of the input into this dtype
    rows: int | None = None  # the input as a matrix of this many rows (where they divide the size)

    def what(self) -> str:
        if self.copy_into is not None:
            return f"{self.label} · {DTYPE_SHORT[self.dtype]}→{DTYPE_SHORT[self.copy_into]} · 1T"
        if self.peer is not None:
            head = f"{self.peer.name}: {self.label} {self.mode}"
            return head + (f" [{self.peer_note}]" if self.peer_note else "")
        dt = DTYPE_SHORT[self.dtype]
        out_dtype = np.dtype(result_dtype(self.dtype, self.fmt))
        if out_dtype != self.dtype:
            dt += f"→{DTYPE_SHORT[out_dtype]}"
        text = f"{self.label} · {self.mode} · {dt} · {self.threads}T"
        return text + (" · allocating (no out=)" if self.alloc else "")


def build_cases(peers: list[Peer]) -> list[Case]:
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    fmts = {label: (make_format(spec), ml) for label, spec, ml in FLOAT_FORMATS + FIXED_FORMATS}
    cases = []
    for label, _, _ in FLOAT_FORMATS:
        fmt, ml = fmts[label]
        cases.append(Case("deterministic", label, fmt, "nearest", f32, ml_name=ml, target="≥ 0.8"))
        if label == "bfloat16":
            for mode in ("toward_zero", "up", "odd"):
                cases.append(Case("deterministic", label, fmt, mode, f32, ml_name=ml, target="≥ 0.8"))
    for label, _, _ in FLOAT_FORMATS:
        fmt, ml = fmts[label]
        cases.append(Case("stochastic", label, fmt, "stochastic", f32, ml_name=ml, target="≥ 0.6"))
    for label in ("bfloat16", "e4m3", "FloatFormat(6, 9)"):
        fmt, ml = fmts[label]
        cases.append(Case("float64 input", label, fmt, "nearest", f64, ml_name=ml, target="≥ 0.8"))
        cases.append(Case("float64 input", label, fmt, "stochastic", f64, ml_name=ml, target="≥ 0.6"))
    # float16 data (half-precision activations and weights): through the float32 carrier
    for label in ("e4m3", "bfloat16"):
        fmt, ml = fmts[label]
        for mode in ("nearest", "stochastic"):
            cases.append(Case("float16 input", label, fmt, mode, np.dtype(np.float16), ml_name=ml,
                              value_sets=("normal",)))
    # the physical bound of rows whose float32 input gives a float64 result (q16.16)
    cases.append(Case("fixed point", "np.copyto", None, "-", f32, copy_into=f64, value_sets=("normal",)))
    for label, _, _ in FIXED_FORMATS:
        fmt, _ = fmts[label]
        for mode in ("nearest", "stochastic"):
            cases.append(Case("fixed point", label, fmt, mode, f32, target="≥ 0.6", value_sets=FIXED_VALUE_SETS))
    for label, spec in SCALED_FORMATS:
        fmt = make_format(spec)
        target = "-" if label.startswith("nvfp4") else "≥ 0.5"
        for mode in ("nearest", "stochastic"):
            cases.append(Case("scaled", label, fmt, mode, f32, target=target, value_sets=("gauss",)))
    # MX blocked along the first axis of a matrix (1e7: 2500 x 4000): the column kernels
    for mode in ("nearest", "stochastic"):
        cases.append(Case("scaled", "mxfp8_e4m3 along axis 0", rp.ScaledFormat("e4m3", block_size=32, axis=0), mode,
                          f32, value_sets=("gauss",), rows=2500))
    # float64 data (NumPy's default dtype): the segments' scales and quotients, then the
    # element format's own float64 kernel (rpfloat._kernels.cpu.float64_blocks)
    for label, spec in SCALED_FORMATS:
        if label in ("mxfp8_e4m3", "mxfp4_e2m1", "mxint8", "e4m3 per tensor"):
            for mode in ("nearest", "stochastic"):
                cases.append(Case("scaled", label, make_format(spec), mode, f64, value_sets=("gauss",)))
    for mode in ("nearest", "stochastic"):
        cases.append(Case("scaled", "mxfp8_e4m3 along axis 0", rp.ScaledFormat("e4m3", block_size=32, axis=0), mode,
                          f64, value_sets=("gauss",), rows=2500))
    for label in ("bfloat16", "e4m3"):
        fmt, ml = fmts[label]
        for threads in (1, 2):
            cases.append(Case("threads", label, fmt, "nearest", f32, threads=threads, ml_name=ml,
                              target="≥ 1.0, ≥ 1T" if threads == 2 else "-"))
    for label in ("bfloat16", "e4m3"):
        fmt, ml = fmts[label]
        cases.append(Case("allocating", label, fmt, "nearest", f32, ml_name=ml, alloc=True))
    for peer in peers:
        for (label, mode), (note, _) in peer.builders.items():
            fmt, ml = fmts[label]
            cases.append(Case("peers", label, fmt, mode, f32, ml_name=ml, peer=peer, peer_note=note))
        if peer.version is None:
            cases.append(Case("peers", "-", None, "-", f32, peer=peer, value_sets=("-",)))
    return cases


@dataclass
class Row:
    what: str
    values: str
    size: str
    runs: str = "-"
    per_call: str = "-"
    mels: str = "-"
    vs_copy: str = "-"
    vs_ml: str = "-"
    same: str = "-"
    target: str = "-"
    seconds: float | None = None     # the measured figures behind the strings above
    ratio: float | None = None       # (None: not measured)
    ml_seconds: float | None = None

    def cells(self):
        return [self.what, self.values, self.size, self.runs, self.per_call, self.mels,
                self.vs_copy, self.vs_ml, self.same, self.target]


HEADERS = ["what", "values", "size", "runs", "time/call", "M elem/s", "× copyto",
           "× ml_dtypes", "= ml_dtypes", "target (× copyto, 1e7)"]


def fmt_time(s: float) -> str:
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_size(n: int) -> str:
    e = int(round(math.log10(n)))
    return f"1e{e}" if 10**e == n else str(n)


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}" if r < 100 else f"{r:.0f}"


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN where NaN, and the same sign of every non-NaN (so -0 counts)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not np.array_equal(a, b, equal_nan=True):
        return False
    ok = ~np.isnan(a)
    return bool(np.array_equal(np.signbit(a[ok]), np.signbit(b[ok])))


class Runner:
    def __init__(self, repeats: int, log):
        self.repeats = repeats
        self.log = log
        self._copy: dict = {}
        self._ml: dict = {}

    def new_round(self) -> None:
        """Measure the ml_dtypes round trips again (they are kept within a round)."""
        self._ml.clear()

    def copyto(self, n: int, dtype) -> Callable[[], object]:
        """np.copyto of an array of `n` elements of `dtype` (the arrays are kept)."""
        key = (n, np.dtype(dtype))
        if key not in self._copy:
            src = np.random.default_rng(1).standard_normal(n).astype(dtype)
            dst = np.empty_like(src)
            self._copy[key] = lambda: np.copyto(dst, src)
        return self._copy[key]

    def copy_source(self, n: int, dtype) -> np.ndarray:
        return np.random.default_rng(1).standard_normal(n).astype(dtype)

    def ml_time(self, case: Case, value_set: str, x: np.ndarray):
        """(seconds per ml_dtypes round trip, its result) or None."""
        mt = ml_type(case.ml_name)
        if mt is None:
            return None
        key = (case.ml_name, value_set, x.dtype, x.size)
        if key not in self._ml:
            fn = lambda: x.astype(mt).astype(x.dtype)  # noqa: E731
            t, _, _ = bench(fn, self.repeats)
            self._ml[key] = (t, fn())
        return self._ml[key]

    def run_case(self, case: Case, n: int, value_set: str) -> Row:
        # the targets are for "normal values": not for the wide stress set
        target = "none (stress set)" if value_set == "wide" and case.target != "-" else case.target
        row = Row(case.what(), value_set, fmt_size(n), target=target)
        if case.peer is not None and case.peer.version is None:
            row.what = f"{case.peer.name}"
            row.mels = "not installed"
            return row
        if not set_threads(case.threads):
            row.mels = f"n/a (NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS})"
            return row
        try:
            x = make_input(case.fmt, value_set, case.dtype, n) if case.fmt is not None else None
            if case.rows is not None and n % case.rows == 0:
                x = x.reshape(case.rows, -1)
            if case.copy_into is not None:
                x = self.copy_source(n, case.dtype)
                out = np.empty(n, case.copy_into)
                fn = lambda: np.copyto(out, x)  # noqa: E731
            elif case.peer is not None:
                fn = case.peer.builders[(case.label, case.mode)][1](x)
            else:
                kwargs = {"rng": 0} if case.mode == "stochastic" else {}
                if case.alloc:
                    fn = lambda: rp.round(x, case.fmt, case.mode, **kwargs)  # noqa: E731
                else:
                    out = np.empty(x.shape, result_dtype(x.dtype, case.fmt))
                    fn = lambda: rp.round(x, case.fmt, case.mode, out=out, **kwargs)  # noqa: E731
            t, runs, vs_copy = bench(fn, self.repeats, baseline=self.copyto(n, case.dtype))
            result = fn()
        except Exception as exc:  # keep going: one broken row must not hide the others
            row.mels = f"error: {type(exc).__name__}: {str(exc)[:80]}"
            return row
        finally:
            set_threads(1)
        row.runs = str(runs)
        row.seconds, row.ratio = t, vs_copy
        ml = self.ml_time(case, value_set, x)
        if ml is not None:
            row.ml_seconds = ml[0]
            # ml_dtypes casts float64 to bfloat16 through float32 (double rounding),
            # so only float32 input is a bit-exact reference.
            if case.peer is None and case.mode == "nearest" and case.dtype == np.float32:
                row.same = "yes" if same_values(result, ml[1]) else "**NO**"
        set_figures(row, n)
        return row


def set_figures(row: Row, n: int) -> None:
    """The row's time, throughput and ratio columns from its measured figures."""
    row.per_call = fmt_time(row.seconds)
    row.mels = f"{n / row.seconds / 1e6:,.1f}"
    row.vs_copy = fmt_ratio(row.ratio)
    if row.ml_seconds is not None:
        row.vs_ml = fmt_ratio(row.ml_seconds / row.seconds)


def merge_rounds(rounds: list[list[Row]], sizes_of: list[int]) -> list[Row]:
    """One row per measurement: the median over rounds of its time, of its
    × copyto ratio and of its ml_dtypes time (each a median of its own runs).
    A row that failed in any round keeps that round's text."""
    merged = []
    for i, row in enumerate(rounds[0]):
        same = [r[i] for r in rounds]
        if any(r.seconds is None for r in same):
            merged.append(next((r for r in same if r.seconds is None), row))
            continue
        row.seconds = statistics.median(r.seconds for r in same)
        if row.ratio is not None:
            row.ratio = statistics.median(r.ratio for r in same)
        if row.ml_seconds is not None:
            row.ml_seconds = statistics.median(r.ml_seconds for r in same)
        row.runs = f"{row.runs}×{len(rounds)}"
        if any(r.same == "**NO**" for r in same):
            row.same = "**NO**"
        set_figures(row, sizes_of[i])
        merged.append(row)
    return merged


# --------------------------------------------------------------------------- overheads

def small_call_checks(repeats: int) -> list[list[str]]:
    x = np.linspace(-3.0, 3.0, SMALL_N, dtype=np.float32)
    rows = []
    dst = np.empty_like(x)
    t_copy, _, _ = bench(lambda: np.copyto(dst, x), repeats)
    for label, spec, mode in (("bfloat16", "bfloat16", "nearest"), ("e4m3", "e4m3", "nearest"),
                              ("e4m3", "e4m3", "stochastic")):
        kwargs = {"rng": 0} if mode == "stochastic" else {}
        fmt = rp.format(spec)
        try:
            t, _, _ = bench(lambda: rp.round(x, fmt, mode, **kwargs), repeats)
            t_name, _, _ = bench(lambda: rp.round(x, spec, mode, **kwargs), repeats)
            text = (f"{t * 1e6:.1f} µs/call (format by name: {t_name * 1e6:.1f} µs; "
                    f"np.copyto: {t_copy * 1e6:.2f} µs)")
            ok = "yes" if max(t, t_name) <= 10e-6 else "no"
        except Exception as exc:
            text, ok = f"error: {type(exc).__name__}: {exc}", "no"
        rows.append([f"rp.round, {SMALL_N} × f32, {label} {mode}", text, "≤ 10 µs", ok])
    return rows


def _python_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _wall(code: str) -> float:
    t0 = perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=_python_env(), cwd=str(REPO),
                   stdout=subprocess.DEVNULL)
    return perf_counter() - t0


def cold_start_check() -> list[list[str]]:
    code = ("import numpy as np; import rpfloat as rp; "
            "x = np.linspace(-3, 3, 16, dtype=np.float32); rp.round(x, 'bf16')")
    try:
        first = _wall(code)
        second = statistics.median(_wall(code) for _ in range(3))
        base = _wall("import numpy, numba")
        # numba's first load from its cache imports scipy.linalg where scipy is
        # installed (to look for BLAS): a cost of the environment, said here
        scipy = subprocess.run([sys.executable, "-c", "import scipy"], env=_python_env(),
                               capture_output=True).returncode == 0
        text = (f"{second:.2f} s (median of 3; first run: {first:.2f} s; "
                f"`python -c 'import numpy, numba'` alone: {base:.2f} s; "
                f"scipy installed: {'yes, numba imports it on its first cache load' if scipy else 'no'})")
        ok = "yes" if second <= 1.0 else "no"
    except Exception as exc:
        text, ok = f"error: {type(exc).__name__}: {exc}", "no"
    return [["cold start: fresh `python -c` importing rpfloat, rp.round(16 × f32, 'bf16'), "
             "numba cache warm (2nd run)", text, "≤ 1.0 s", ok]]


def _traced_peak(fn) -> int:
    fn()  # warm-up outside tracing (compilation, caches)
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def memory_checks() -> list[list[str]]:
    rows = []
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    checks = (
        ("bfloat16", "nearest", f32), ("e4m3", "stochastic", f32),
        ("FloatFormat(6, 9)", "nearest", f32), ("q16.16", "nearest", f32),
        ("bfloat16", "nearest", f64),
    )
    specs = {label: spec for label, spec, _ in FLOAT_FORMATS + FIXED_FORMATS}
    for label, mode, dtype in checks:
        fmt = make_format(specs[label])
        kwargs = {"rng": 0} if mode == "stochastic" else {}
        x = make_input(fmt, "wide", dtype, MEMORY_N)
        out_dtype = np.dtype(result_dtype(dtype, fmt))
        out = np.empty(x.shape, out_dtype)
        what = f"{label} {mode}, {fmt_size(MEMORY_N)} × {DTYPE_SHORT[dtype]}"
        if out_dtype != dtype:
            what += f"→{DTYPE_SHORT[out_dtype]}"
        try:
            peak = _traced_peak(lambda: rp.round(x, fmt, mode, out=out, **kwargs))
            rows.append([f"`out=` allocations (tracemalloc peak), {what}", f"{peak:,} B",
                         "≈ 0 (< 4 KiB)", "yes" if peak < 4096 else "no"])
        except Exception as exc:
            rows.append([f"`out=` allocations, {what}", f"error: {type(exc).__name__}: {exc}",
                         "≈ 0", "no"])
        try:
            peak = _traced_peak(lambda: rp.round(x, fmt, mode, **kwargs))
            out_bytes = x.size * out_dtype.itemsize
            rows.append([f"rp.round peak allocation (tracemalloc), {what}",
                         f"{peak / 2**20:.2f} MiB = {peak / x.nbytes:.2f} × input, "
                         f"{peak / out_bytes:.2f} × output",
                         "output only (peak = input + output)",
                         "yes" if peak <= out_bytes + 65536 else "no"])
        except Exception as exc:
            rows.append([f"rp.round peak allocation, {what}", f"error: {type(exc).__name__}: {exc}",
                         "-", "no"])
        del x, out
        clear_inputs()
    rows.extend(rss_check())
    return rows


_RSS_SCRIPT = textwrap.dedent("""
    import json, resource, numpy as np, rpfloat as rp
    def hwm():  # peak resident set size, bytes; reset it first when the kernel lets us
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    def reset():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    n = %d
    x = np.empty(n, np.float32)
    np.random.default_rng(0).standard_normal(out=x, dtype=np.float32)
    out = np.zeros_like(x)
    rp.round(x[:1000], "bf16", out=out[:1000]); rp.round(x[:1000], "bf16")
    exact = reset(); base = rss(); rp.round(x, "bf16", out=out); grow_out = hwm() - base
    reset(); base = rss(); y = rp.round(x, "bf16"); grow_alloc = hwm() - base
    print(json.dumps(dict(out=grow_out, alloc=grow_alloc, nbytes=x.nbytes, exact=exact)))
""")


def rss_check() -> list[list[str]]:
    what = f"bfloat16 nearest, {fmt_size(RSS_N)} × f32, fresh process"
    try:
        proc = subprocess.run([sys.executable, "-c", _RSS_SCRIPT % RSS_N], check=True,
                              env=_python_env(), cwd=str(REPO), capture_output=True, text=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception as exc:
        return [[f"peak RSS growth, {what}", f"error: {type(exc).__name__}: {exc}", "-", "no"]]
    how = "VmHWM reset" if r["exact"] else "ru_maxrss, an upper bound"
    mib = 2**20
    return [
        [f"peak RSS growth with `out=` ({how}), {what}", f"{r['out'] / mib:.2f} MiB",
         "≈ 0", "yes" if r["out"] < 2 * mib else "no"],
        [f"peak RSS growth, allocating ({how}), {what}",
         f"{r['alloc'] / mib:.2f} MiB = {r['alloc'] / r['nbytes']:.2f} × input",
         "≈ 1.00 × input (the output)", "yes" if r["alloc"] <= r["nbytes"] + 2 * mib else "no"],
    ]


# --------------------------------------------------------------------------- report

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(REPO),
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "rpfloat"],
                               cwd=str(REPO), capture_output=True, text=True).stdout.strip()
        return rev + (" + uncommitted changes in rpfloat/" if dirty else "")
    except Exception:
        return "unknown"


def markdown_table(headers, rows) -> str:
    def esc(s):
        return str(s).replace("|", "\\|")
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def header(args, sizes, peers) -> str:
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    peer_text = ", ".join(f"{p.name} {p.version}" if p.version else f"{p.name} not installed"
                          for p in peers) or "skipped (--no-peers)"
    return "\n".join([
        "# rp.round benchmark",
        "",
        f"- date: {now}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); numba threads available: "
        f"{numba.config.NUMBA_NUM_THREADS}",
        f"- load average (1, 5, 15 min) at start: {', '.join(f'{v:.2f}' for v in LOAD_AT_START)}; "
        "other processes on the machine make timings noisy",
        f"- Python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
        f"ml_dtypes {getattr(ml_dtypes, '__version__', 'not installed')}, "
        f"rpfloat {rp.__version__} (git {git_revision()})",
        f"- peers: {peer_text}",
        f"- sizes: {', '.join(fmt_size(n) for n in sizes)}; median of {args.repeats} runs after a "
        f"warm-up (fewer, ≥ 3, for calls over {BUDGET_S / args.repeats:.2f} s: see `runs`); "
        f"× copyto: median of per-run ratios, each run paired with a copy run just before it; "
        f"rp rows write into a preallocated `out=` unless marked allocating; 1 numba thread "
        f"unless `2T`" + ("; **--quick smoke run**" if args.quick else "")
        + (f"; **{args.rounds} rounds**: the whole table was measured {args.rounds} times and "
           f"every figure is the median over the rounds (`runs`: runs per round × rounds)"
           if args.rounds > 1 else ""),
    ])


LOAD_AT_START = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3


STATS_FORMATS = ("bfloat16", "float16", "e4m3", "e5m2", "q8.8")
STATS_MODES = ("nearest", "stochastic")


def stats_overhead(sizes, repeats) -> int:
    """Print the table of ``rp.round(x, fmt, mode, stats=True)`` against
    ``rp.round(x, fmt, mode)``: best of `repeats` interleaved runs each, so that
    the ratio of a row compares runs of the same moment."""
    set_threads(1)
    rows = []
    for n in sizes:
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        for fmt in STATS_FORMATS:
            for mode in STATS_MODES:
                plain_call = lambda: rp.round(x, fmt, mode, rng=1)  # noqa: E731
                stats_call = lambda: rp.round(x, fmt, mode, rng=1, stats=True)  # noqa: E731
                plain_call(), stats_call()  # compile and warm
                plain, with_stats = [], []
                for _ in range(repeats):
                    plain.append(_timed(plain_call, 1))
                    with_stats.append(_timed(stats_call, 1))
                ratio = min(with_stats) / min(plain)
                rows.append([fmt_size(n), fmt, mode, fmt_time(min(plain)), fmt_time(min(with_stats)),
                             f"{ratio:.2f}"])
                print(f"  {fmt} {mode}: x{ratio:.2f}", file=sys.stderr, flush=True)
    print(f"## rp.round(..., stats=True) against the plain call ({cpu_model()}, one thread)")
    print()
    print(markdown_table(["size", "format", "mode", "plain", "stats=True", "ratio"], rows))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1e5 only, 3 repeats")
    parser.add_argument("--large", action="store_true", help="also 1e8 elements")
    parser.add_argument("--sizes", type=lambda s: [int(float(v)) for v in s.split(",")],
                        help="comma-separated sizes, e.g. 1e4,1e6 (overrides the defaults)")
    parser.add_argument("--repeats", type=int, default=None, help=f"timed runs (default {REPEATS})")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the whole throughput table N times and report each row's "
                             "median over the rounds (steadier figures on a busy machine)")
    parser.add_argument("--filter", default=None,
                        help="regex: only throughput rows whose `what` matches (e.g. 'bfloat16')")
    parser.add_argument("--all-peers", action="store_true",
                        help=f"every peer row at every size (default: above {PEER_FULL_MAX:.0e} only "
                             "bfloat16 nearest on normal values)")
    parser.add_argument("--no-peers", action="store_true", help="skip pychop, gfloat, apytypes")
    parser.add_argument("--no-overheads", action="store_true",
                        help="skip the small-array, cold-start and memory checks")
    parser.add_argument("--stats", action="store_true",
                        help="only the cost of stats=True: its time over the plain call's, per format and "
                             "mode (float32 normal values, one thread; size 1e7 unless --sizes)")
    args = parser.parse_args(argv)
    if args.stats:
        return stats_overhead(args.sizes or [10**7], args.repeats or REPEATS)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.repeats is None:
        args.repeats = 3 if args.quick else REPEATS
    sizes = args.sizes or ([10**5] if args.quick else list(DEFAULT_SIZES))
    if args.large and LARGE_SIZE not in sizes:
        sizes.append(LARGE_SIZE)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    warnings.simplefilter("ignore")  # overflow / invalid warnings from peers and casts
    np.seterr(all="ignore")
    set_threads(1)
    started = perf_counter()
    global LOAD_AT_START
    LOAD_AT_START = os.getloadavg() if hasattr(os, "getloadavg") else LOAD_AT_START

    peers = [] if args.no_peers else find_peers()
    cases = build_cases(peers)
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.what())]
    runner = Runner(args.repeats, log)
    rounds = []
    for round_number in range(args.rounds):
        runner.new_round()
        rows, sizes_of = [], []
        for n in sizes:
            log(f"size {fmt_size(n)}" + (f", round {round_number + 1} of {args.rounds}"
                                         if args.rounds > 1 else ""))
            for case in cases:
                for value_set in case.value_sets:
                    if case.fmt is None and case.copy_into is None and n != sizes[0]:
                        continue  # "not installed" once
                    if (case.peer is not None and n > PEER_FULL_MAX and not args.all_peers
                            and (value_set != "normal" or (case.label, case.mode) != ("bfloat16", "nearest"))):
                        continue
                    row = runner.run_case(case, n, value_set)
                    rows.append(row)
                    sizes_of.append(n)
                    log(f"  {row.what} [{row.values}]: {row.mels} M elem/s, × copyto {row.vs_copy}")
            clear_inputs()
        rounds.append(rows)
    rows = merge_rounds(rounds, sizes_of) if args.rounds > 1 else rounds[0]

    overheads = []
    if not args.no_overheads:
        log("overheads: small arrays, cold start, memory")
        set_threads(1)
        overheads += small_call_checks(args.repeats)
        overheads += cold_start_check()
        overheads += memory_checks()

    print(header(args, sizes, peers))
    print()
    print("## Throughput")
    print()
    print(markdown_table(HEADERS, [r.cells() for r in rows]))
    if overheads:
        print()
        print("## Per-call overhead, start-up and memory")
        print()
        print(markdown_table(["check", "measured", "target", "met"], overheads))
    print()
    print(f"_total benchmark time: {perf_counter() - started:.0f} s_")
    return 0


if __name__ == "__main__":
    sys.exit(main())
