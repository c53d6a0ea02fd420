"""Rounding statistics: what ``rp.round(x, fmt, stats=True)`` reports besides the
rounded array (docs/cli.md defines every field).

:class:`RoundingStats` holds counts (inexact, overflowed, underflowed, flushed to
zero, NaN produced), absolute and relative errors and the sizes before and after
packing; :func:`rounding_stats` gathers them from an input and its rounded
result with a numba kernel (``rpfloat._kernels.cpu.stats``), which is imported
on first use, so that ``import rpfloat`` does not load it.
:func:`round_with_stats` rounds a large array in chunks and gathers each chunk
while it is still in cache.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import itertools
import math
import threading
from collections.abc import Iterable

import numba
import numpy as np

from ._kernels.cpu import backend
from ._plan import Plan, plan_for, random_key, unused_key
from .fixedformat import FixedFormat
from .floatformat import as_bool
from .presets import format as to_format
from .rounding import input_array, round_chunk  # (rounding imports this module on first use)
from .scaledformat import ScaledFormat

__all__ = ["RoundingStats", "rounding_stats", "round_with_stats", "packed_nbytes"]

# Arrays of at least this many numbers are rounded and gathered on numba's thread
# count; the kernel takes ~0.6 ns a number on one core, and waking a pool thread ~0.1 ms.
PARALLEL_THRESHOLD = 1 << 20
# Numbers rounded and gathered at a time: a chunk of x and of its result (float32:
# 1 MiB together) is still in the core's L2 cache when the kernel reads it back.
CHUNK = 1 << 17
# Ordinary |x| (see rpfloat._kernels.cpu.stats) lie within [2**-100, 2**100], narrow
# blocks' within [2**-60, 2**60].
_FAST_RANGE = 2.0**100
_NARROW_RANGE = 2.0**60
_pool = None
_pool_lock = threading.Lock()
_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)


@dataclasses.dataclass(frozen=True)
class RoundingStats:
    """Counts and errors of one rounding of an array ``x`` to ``rounded``.

    Complex numbers count as two numbers, their real and imaginary parts. Errors
    are computed in float64: ``|rounded - x|`` rounded once.

    Attributes
    ----------
    count : int
        Numbers rounded.
    inexact : int
        Non-NaN ``x`` whose result differs in value (``-0`` to ``+0`` is exact;
        ``inf`` to ``max`` or NaN is not).
    overflowed : int
        Finite ``x`` beyond the format's range: ``x > fmt.max`` or ``x < fmt.min``
        (float formats: ``|x| > max``; fixed point: outside ``[min, max]``, so a
        negative ``x`` for an unsigned format), whatever they became (``±max``,
        ``±inf``, NaN, a wrapped value). ``exp_bits=None``: beyond the result
        dtype's largest value. Scaled formats: beyond ``element.max`` times the
        largest block scale (with a tensor scale, never).
    underflowed : int
        Nonzero finite ``x`` whose result is subnormal in the format,
        ``0 < |rounded| < fmt.min_normal`` (``exp_bits=None``: the result dtype's
        smallest normal). Always 0 for fixed-point and scaled formats.
    flushed_to_zero : int
        Nonzero finite ``x`` whose result is ``±0``.
    nan_produced : int
        Non-NaN ``x`` (``±inf`` included) whose result is NaN.
    error_count : int
        Numbers whose ``x`` and result are both finite: those the absolute
        errors cover.
    rel_error_count : int
        Those of them with ``x != 0``: those the relative errors cover.
    max_abs_error, mean_abs_error : float
        Largest and mean ``|rounded - x|`` (0.0 where ``error_count`` is 0).
    max_rel_error, mean_rel_error : float
        Largest and mean ``|rounded - x| / |x|`` (0.0 where ``rel_error_count`` is 0).
    bytes_before : int
        ``x.nbytes``.
    bytes_after : int
        Bytes of the results' codes packed densely, as :func:`rpfloat.pack`
        stores them: ``ceil(count * fmt.bits / 8)``, plus ``ceil(scales *
        scale_bits / 8)`` for a scaled format (a tensor scale not counted);
        ``rounded.nbytes`` for ``exp_bits=None`` formats, which have no codes.

    Examples
    --------
    >>> import rpfloat as rp
    >>> rounded, stats = rp.round([0.1, 1.0, 1000.0, 0.0], "e4m3", overflow="saturate", stats=True)
    >>> rounded
    array([1.015625e-01, 1.000000e+00, 4.480000e+02, 0.000000e+00])
    >>> stats.count, stats.inexact, stats.overflowed, stats.max_abs_error, stats.max_rel_error
    (4, 2, 1, 552.0, 0.552)
    >>> stats.bytes_before, stats.bytes_after
    (32, 4)
    """

    count: int
    inexact: int
    overflowed: int
    underflowed: int
    flushed_to_zero: int
    nan_produced: int
    error_count: int
    rel_error_count: int
    max_abs_error: float
    mean_abs_error: float
    max_rel_error: float
    mean_rel_error: float
    bytes_before: int
    bytes_after: int

    @classmethod
    def combined(cls, parts: Iterable[RoundingStats]) -> RoundingStats:
        """The statistics of the chunks whose statistics are `parts`, taken together:
        counts and bytes add, maxima are the largest, means are weighted by
        ``error_count`` (``rel_error_count``). ``bytes_after`` adds each chunk's
        padding to whole bytes; recompute it with :func:`packed_nbytes` for the whole.
        The means equal the whole's up to rounding: their sums are added in
        another order.

        Examples
        --------
        >>> import math, numpy as np, rpfloat as rp
        >>> from rpfloat.stats import RoundingStats
        >>> x = np.random.default_rng(0).standard_normal(1000)
        >>> whole = rp.round(x, "e4m3", stats=True)[1]
        >>> halves = [rp.round(part, "e4m3", stats=True)[1] for part in (x[:500], x[500:])]
        >>> combined = RoundingStats.combined(halves)
        >>> fields = ("count", "inexact", "max_rel_error")
        >>> [getattr(combined, field) for field in fields] == [getattr(whole, field) for field in fields]
        True
        >>> math.isclose(combined.mean_rel_error, whole.mean_rel_error, rel_tol=1e-14)
        True
        """
        parts = list(parts)
        if not parts:
            raise ValueError("parts must hold at least one RoundingStats")
        for part in parts:
            if not isinstance(part, RoundingStats):
                raise TypeError(f"parts must hold RoundingStats, got {type(part).__name__}")
        total = {field: sum(getattr(part, field) for part in parts) for field in _ADDED_FIELDS}

        def weighted_mean(mean_field, count_field):
            if total[count_field] == 0:
                return 0.0
            means = [(getattr(part, mean_field), getattr(part, count_field)) for part in parts]
            try:
                mean = math.fsum(value * count for value, count in means) / total[count_field]
            except OverflowError:
                mean = math.inf
            if math.isinf(mean) and all(math.isfinite(value) for value, _ in means):
                # means near float64's max: weights below 1 instead of counts
                mean = math.fsum(value * (count / total[count_field]) for value, count in means)
            return mean

        return cls(
            **total,
            max_abs_error=max(part.max_abs_error for part in parts),
            mean_abs_error=weighted_mean("mean_abs_error", "error_count"),
            max_rel_error=max(part.max_rel_error for part in parts),
            mean_rel_error=weighted_mean("mean_rel_error", "rel_error_count"),
        )

    def summary(self) -> str:
        """The statistics as a two-column text table (what ``python -m rpfloat
        round`` prints).

        Examples
        --------
        >>> import rpfloat as rp
        >>> print(rp.round([0.1, 1.0, 1000.0, 1e-9, 0.001], "e4m3", stats=True)[1].summary())
        numbers          5
        inexact          4 (80%)
        overflowed       1 (20%)
        underflowed      1 (20%)
        flushed to zero  1 (20%)
        NaN produced     1 (20%)
        max abs. error   0.0015625
        mean abs. error  0.000628906
        max rel. error   1
        mean rel. error  0.492188
        bytes before     40
        bytes after      5 (8x smaller, as packed codes)
        """

        def counted(number):
            if not number:
                return "0"
            share = f"{100 * number / self.count:.3g}"
            if number != self.count and share == "100":  # (all but a few of many)
                share = ">99.9"
            return f"{number:,} ({share}%)"

        ratio = ""
        if self.bytes_after and self.bytes_before:
            ratio = f" ({self.bytes_before / self.bytes_after:.3g}x smaller, as packed codes)"
        rows = [
            ("numbers", f"{self.count:,}"),
            ("inexact", counted(self.inexact)),
            ("overflowed", counted(self.overflowed)),
            ("underflowed", counted(self.underflowed)),
            ("flushed to zero", counted(self.flushed_to_zero)),
            ("NaN produced", counted(self.nan_produced)),
            ("max abs. error", f"{self.max_abs_error:.6g}"),
            ("mean abs. error", f"{self.mean_abs_error:.6g}"),
            ("max rel. error", f"{self.max_rel_error:.6g}"),
            ("mean rel. error", f"{self.mean_rel_error:.6g}"),
            ("bytes before", f"{self.bytes_before:,}"),
            ("bytes after", f"{self.bytes_after:,}{ratio}"),
        ]
        label_width = max(len(label) for label, _ in rows)
        return "\n".join(f"{label.ljust(label_width)}  {text}" for label, text in rows)


_ADDED_FIELDS = ("count", "inexact", "overflowed", "underflowed", "flushed_to_zero", "nan_produced", "error_count",
                 "rel_error_count", "bytes_before", "bytes_after")


def round_with_stats(x, fmt, mode="nearest", *, stats=True, offset=0, overflow=None, rng=None, rand_bits=None,
                     out=None):
    """``rpfloat.rounding.round_chunk(x, ...)`` and its :class:`RoundingStats`:
    what ``rp.round(..., stats=True)`` returns (``stats=False``: the rounded
    array alone).

    Arrays of more than `CHUNK` numbers without `out` are rounded `CHUNK` numbers
    at a time, each chunk's statistics gathered while it is still in cache
    (element ``i`` draws random number ``offset + i`` whatever the chunk, so the
    results are those of one rounding of the whole); on numba's threads from
    `PARALLEL_THRESHOLD` numbers. The statistics are those that
    :func:`rounding_stats` gives for the same input and results, bit for bit.
    """
    if not as_bool(stats, "stats"):
        return round_chunk(x, fmt, mode, offset=offset, overflow=overflow, rng=rng, rand_bits=rand_bits, out=out)
    array = input_array(x)
    bytes_before = x.nbytes if isinstance(x, np.ndarray) else array.nbytes  # (ml_dtypes data: theirs)
    if out is None:
        fused = _round_in_chunks(array, fmt, mode, offset, overflow, rng, rand_bits, bytes_before)
        if fused is not None:
            return fused
    if out is not None and isinstance(out, np.ndarray) and np.may_share_memory(array, out):
        array = array.copy()  # rounding into out overwrites x: compare with the numbers it held
    rounded = round_chunk(array, fmt, mode, offset=offset, overflow=overflow, rng=rng, rand_bits=rand_bits,
                          out=out)
    return rounded, _rounding_stats(array, rounded, to_format(fmt), bytes_before)


def _round_in_chunks(array, fmt, mode, offset, overflow, rng, rand_bits, bytes_before):
    """``(rounded, stats)`` of `array`, rounded and gathered chunk by chunk; None
    where that does not apply (small arrays, scaled formats, an offset to check),
    for the caller to round the whole and gather after."""
    parts = 2 if array.dtype.kind == "c" else 1
    numbers = array.size * parts
    if numbers <= CHUNK or offset.__class__ is not int or not 0 <= offset < 2**62 - numbers:
        return None
    plan = plan_for(fmt, mode, overflow, rand_bits, array.dtype)
    if plan.__class__ is not Plan:  # a scaled format: its blocks decide its chunks
        return None
    fmt = to_format(fmt)
    key = random_key(rng) if plan.mode.is_stochastic else unused_key(rng)
    result = np.empty(array.shape, plan.result_dtype)
    source = np.ascontiguousarray(array).reshape(-1)  # (a copy where x is strided, as the backend makes)
    target = result.reshape(-1)
    is_complex = parts == 2
    step = CHUNK // parts

    def round_chunk_at(start, stop):
        backend.run(plan, source[start:stop], target[start:stop], key, offset + start)
        return _kernel_operands(source[start:stop], target[start:stop], is_complex)

    operand_dtypes = tuple(operand.dtype for operand in _kernel_operands(source[:1], target[:1], is_complex))
    counts, errors = _gather_chunks(round_chunk_at, array.size, step, numbers, fmt, operand_dtypes,
                                    result.dtype)
    return result, _stats_of(counts, errors, numbers, array, result, fmt, is_complex, bytes_before)


def rounding_stats(x, rounded, fmt) -> RoundingStats:
    """The :class:`RoundingStats` of `x` rounded to `rounded` in `fmt`.

    Parameters
    ----------
    x : array_like
        Real or complex numbers.
    rounded : array_like
        The results of rounding `x` onto `fmt` (any rounding: another library's
        or device's results too), of the shape of `x`.
    fmt : FloatFormat, FixedFormat, ScaledFormat or str
        The format, which sets the range that overflow and underflow refer to
        and the packed size.

    Examples
    --------
    >>> import numpy as np
    >>> from rpfloat.stats import rounding_stats
    >>> stats = rounding_stats([0.3, -1e-3, np.inf], [0.5, -0.0, np.nan], "e2m1")
    >>> stats.underflowed, stats.flushed_to_zero, stats.nan_produced, stats.error_count
    (1, 1, 1, 2)
    """
    fmt = to_format(fmt)
    x_array, rounded_array = input_array(x, "x"), input_array(rounded, "rounded")
    bytes_before = x.nbytes if isinstance(x, np.ndarray) else x_array.nbytes
    return _rounding_stats(x_array, rounded_array, fmt, bytes_before, trusted=False)


def _rounding_stats(x_array, rounded_array, fmt, bytes_before, trusted=True) -> RoundingStats:
    """`rounding_stats` of checked arrays; `trusted`: results of rp.round, where a
    zero x always gives a zero (others may not: they take the rules throughout)."""
    if x_array.shape != rounded_array.shape:
        raise ValueError(f"rounded must have the shape of x, {x_array.shape}, got {rounded_array.shape}")
    is_complex = x_array.dtype.kind == "c" or rounded_array.dtype.kind == "c"
    x_numbers, rounded_numbers = _kernel_operands(x_array, rounded_array, is_complex)

    def chunk_at(start, stop):
        return x_numbers[start:stop], rounded_numbers[start:stop]

    # (the kernel's fast loops take a zero x to give a zero: elsewhere, every block takes the rules)
    rules = not trusted and bool(np.any((x_numbers == 0) & (rounded_numbers != 0)))
    counts, errors = _gather_chunks(chunk_at, x_numbers.size, CHUNK, x_numbers.size, fmt,
                                    (x_numbers.dtype, rounded_numbers.dtype), rounded_array.dtype, rules)
    return _stats_of(counts, errors, x_numbers.size, x_array, rounded_array, fmt, is_complex, bytes_before)


def _stats_of(counts, errors, count, x_array, rounded_array, fmt, is_complex, bytes_before) -> RoundingStats:
    inexact, overflowed, underflowed, flushed_to_zero, nan_produced, error_count, rel_error_count = counts.tolist()
    sum_abs_error, max_abs_error, sum_rel_error, max_rel_error = errors.tolist()
    mean_abs_error = sum_abs_error / error_count if error_count else 0.0
    mean_rel_error = sum_rel_error / rel_error_count if rel_error_count else 0.0
    if math.isinf(sum_abs_error) and math.isfinite(max_abs_error) or (
            math.isinf(sum_rel_error) and math.isfinite(max_rel_error)):
        # finite errors whose float64 sum overflowed (errors near float64's max): sums scaled down
        scaled_abs, scaled_rel = _scaled_sums(x_array, rounded_array, is_complex)
        mean_abs_error = scaled_abs / error_count / _SUM_SCALE
        mean_rel_error = scaled_rel / rel_error_count / _SUM_SCALE if rel_error_count else 0.0
    return RoundingStats(
        count=count,
        inexact=inexact,
        overflowed=overflowed,
        underflowed=underflowed,
        flushed_to_zero=flushed_to_zero,
        nan_produced=nan_produced,
        error_count=error_count,
        rel_error_count=rel_error_count,
        max_abs_error=max_abs_error,
        mean_abs_error=mean_abs_error,
        max_rel_error=max_rel_error,
        mean_rel_error=mean_rel_error,
        bytes_before=bytes_before,
        bytes_after=packed_nbytes(fmt, x_array.shape, is_complex, rounded_array.dtype),
    )


_SUM_SCALE = 2.0**-64


def _scaled_sums(x_array, rounded_array, is_complex) -> tuple:
    """``(sum of |rounded - x|, sum of |rounded - x| / |x|)`` over the numbers the
    errors cover, each term times _SUM_SCALE: for errors near float64's max,
    whose plain sum overflows (their means are these over the counts, scaled back)."""
    x_numbers, rounded_numbers = (part.astype(np.float64) for part in
                                  _kernel_operands(x_array, rounded_array, is_complex))
    covered = np.isfinite(x_numbers) & np.isfinite(rounded_numbers)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        errors = np.abs(rounded_numbers[covered] - x_numbers[covered])
        magnitudes = np.abs(x_numbers[covered])
        relative = errors[magnitudes != 0] / magnitudes[magnitudes != 0]
        return float(np.sum(errors * _SUM_SCALE)), float(np.sum(relative * _SUM_SCALE))


def packed_nbytes(fmt, shape, is_complex=False, result_dtype=np.float64) -> int:
    """Bytes that :func:`rpfloat.pack` takes for the codes of an array of `shape`
    rounded onto `fmt` (complex: two codes an element); for ``exp_bits=None``
    formats, which have no codes, the bytes of the rounded array of `result_dtype`.

    Examples
    --------
    >>> from rpfloat.stats import packed_nbytes
    >>> packed_nbytes("e2m1", (3, 5)), packed_nbytes("mxfp4", (2, 64))
    (8, 68)
    """
    fmt = to_format(fmt)
    size = math.prod(shape) * (2 if is_complex else 1)
    if isinstance(fmt, ScaledFormat):
        from .scaling import block_layout_of  # the blocks of a shape, as rounding lays them out

        outer, length, inner, block_size, axis = block_layout_of(tuple(shape), fmt)
        # (one scale per array: rp.encode gives it for an empty array too)
        scales = 1 if axis is None else outer * inner * (-(-length // block_size) if length else 0)
        return _bytes_of(size, fmt.bits) + _bytes_of(scales, fmt.scale_bits)
    if fmt.bits is None:
        return size * _real_dtype(np.dtype(result_dtype)).itemsize
    return _bytes_of(size, fmt.bits)


def _bytes_of(codes: int, bits: int) -> int:
    return -(-codes * bits // 8)


@functools.lru_cache(maxsize=256)
def kernel_limits(fmt, result_dtype) -> np.ndarray:
    """``(low, high, min_normal)`` of `fmt` for results of `result_dtype`, as the
    kernel reads them: a finite x outside ``[low, high]`` overflowed; a result
    of magnitude in ``(0, min_normal)`` is subnormal (see RoundingStats). A
    read-only float64 array, cached."""
    limits = _limits(fmt, np.dtype(result_dtype))
    limits.flags.writeable = False
    return limits


def _limits(fmt, result_dtype) -> np.ndarray:
    if isinstance(fmt, ScaledFormat):
        largest_scale = _largest_scale(fmt)
        with np.errstate(over="ignore"):  # (an unsigned element's min is 0 whatever the scale: not 0 * inf)
            low = np.float64(fmt.element.min) * largest_scale if fmt.element.min != 0 else 0.0
            high = np.float64(fmt.element.max) * largest_scale
        return np.array([low, high, 0.0])
    if isinstance(fmt, FixedFormat):
        return np.array([fmt.min, fmt.max, 0.0])
    if fmt.exp_bits is None:
        info = np.finfo(result_dtype)
        return np.array([-float(info.max), float(info.max), float(info.smallest_normal)])
    return np.array([fmt.min, fmt.max, fmt.min_normal])


def _largest_scale(fmt: ScaledFormat) -> np.float64:
    if fmt.tensor_scale:  # the tensor scale follows the data: nothing is beyond reach
        return np.float64(np.inf)
    if fmt.scale_range is not None:  # powers of two
        return np.float64(2.0) ** fmt.scale_range[1]
    return np.float64(fmt.scale_format.max)


def _kernel_operands(x_array, rounded_array, is_complex):
    """`x` and `rounded` as flat C-contiguous float32 or float64 arrays of the
    kernel's signatures (complex numbers as (real, imaginary) pairs)."""
    x_dtype, rounded_dtype = x_array.dtype, rounded_array.dtype
    if ((x_dtype == _FLOAT32 or x_dtype == _FLOAT64) and (rounded_dtype == _FLOAT64 or rounded_dtype == x_dtype)
            and x_array.flags.c_contiguous and rounded_array.flags.c_contiguous):
        return x_array.reshape(-1), rounded_array.reshape(-1)  # the common case, without copies
    if is_complex:
        x_array = x_array.astype(np.result_type(x_dtype, np.complex64), copy=False)
        rounded_array = rounded_array.astype(np.result_type(rounded_dtype, np.complex64), copy=False)
    x_real = _real_dtype(x_array.dtype)
    x_dtype = _FLOAT32 if x_real.kind == "f" and x_real.itemsize <= 4 else _FLOAT64
    rounded_real = _real_dtype(rounded_array.dtype)
    wide = x_dtype == _FLOAT64 or not (rounded_real.kind == "f" and rounded_real.itemsize <= 4)
    return _flat(x_array, x_dtype), _flat(rounded_array, _FLOAT64 if wide else _FLOAT32)


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.empty(0, dtype).real.dtype


def _flat(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if array.dtype.kind == "c":
        array = np.ascontiguousarray(array)
        array = array.reshape(-1).view(_real_dtype(array.dtype))
    with np.errstate(invalid="ignore"):  # casting a signalling NaN is no error
        return np.ascontiguousarray(array, dtype=dtype).reshape(-1)


def _gather_chunks(chunk_at, size, step, numbers, fmt, operand_dtypes, result_dtype, rules=False):
    """The kernel's counts and errors (int64 and float64 arrays) over `size`
    elements (`numbers` numbers), `step` at a time: ``chunk_at(start, stop)``
    gives the kernel's operands, of `operand_dtypes`, for elements ``start:stop``
    (rounding them first, where it rounds), the results being of `result_dtype`
    (whose range bounds an ``exp_bits=None`` format). `rules`: every block
    element by element (bounds that no block meets).
    Each chunk's counts and errors go into a row of their own, added up in chunk
    order, so that they never depend on the threads: on numba's thread count
    from `PARALLEL_THRESHOLD` numbers, each thread taking the next chunk left."""
    from ._kernels.cpu.stats import gather  # the kernel loads on the first call

    real = _real_dtype(np.dtype(result_dtype))
    limits_dtype = real if real.kind == "f" else operand_dtypes[1]
    limits = kernel_limits(fmt, limits_dtype)
    bounds = _NO_BOUNDS if rules else kernel_bounds(fmt, *operand_dtypes, limits_dtype)
    chunks = -(-size // step)
    counts = np.zeros((max(chunks, 1), 7), np.int64)
    errors = np.zeros((max(chunks, 1), 4))
    threads = 1 if numbers < PARALLEL_THRESHOLD else min(numba.get_num_threads(), chunks)
    taken = itertools.count()  # next() on it is atomic: each chunk goes to one thread
    stopped = threading.Event()  # set where a thread failed: the others stop taking

    def take_chunks():
        largest_abs = largest_rel = 0.0  # the maxima so far: fewer blocks divide again
        for index in taken:
            if index >= chunks or stopped.is_set():
                return
            start = index * step
            x_numbers, rounded_numbers = chunk_at(start, min(size, start + step))
            errors[index, 1], errors[index, 3] = largest_abs, largest_rel
            gather(x_numbers, rounded_numbers, limits, bounds, counts[index], errors[index])
            largest_abs, largest_rel = errors[index, 1], errors[index, 3]

    if threads <= 1:
        take_chunks()
    else:
        others = [_thread_pool(threads - 1).submit(take_chunks) for _ in range(threads - 1)]
        try:
            take_chunks()
        except BaseException:  # an error or KeyboardInterrupt: stop the others, then raise it
            stopped.set()
            concurrent.futures.wait(others)
            raise
        for other in others:
            other.result()
    return counts.sum(axis=0), np.array([errors[:, 0].sum(), errors[:, 1].max(), errors[:, 2].sum(),
                                         errors[:, 3].max()])


# bounds that no block meets (`_gather_chunks`' rules): the largest |x| at most -1
_NO_BOUNDS = np.array([1 << 62, -1, 1, 1 << 62, -1, 0], np.int64)
_NO_BOUNDS.flags.writeable = False


@functools.lru_cache(maxsize=256)
def kernel_bounds(fmt, input_dtype, result_dtype, limits_dtype=None) -> np.ndarray:
    """The kernel's ``bounds`` (``rpfloat._kernels.cpu.stats``): the bits (int64)
    of the smallest and largest nonzero ``|x|`` of `input_dtype` in an ordinary
    block, inside `fmt`'s range and ``[2**-100, 2**100]``, of its smallest
    normal rounded up to `result_dtype` (1 where it has none), and of the
    smallest and largest ``|x|`` of a narrow block, inside `fmt`'s range and
    ``[2**-60, 2**60]`` (``1 << 62`` and -1 where no magnitude is in range,
    so that no block is ordinary or narrow, not even one of zeros); then 1 for
    a format whose range holds no negative number (unsigned: those magnitudes
    are in range for ``x >= 0`` only), else 0.
    The limits are those of `limits_dtype` (by default `result_dtype`: see
    `_gather_chunks`). Read-only, cached."""
    low, high, min_normal = kernel_limits(fmt, limits_dtype or result_dtype).tolist()
    input_dtype, result_dtype = np.dtype(input_dtype), np.dtype(result_dtype)
    nonnegative = low == 0.0  # unsigned: a negative x overflowed, whatever its magnitude
    ranges = []
    for fast_range in (_FAST_RANGE, _NARROW_RANGE):
        x_high = min(high, fast_range) if nonnegative else min(high, -low, fast_range)
        if x_high >= 1 / fast_range:
            ranges.append((_magnitude_bits(1 / fast_range, input_dtype, up=True),
                           _magnitude_bits(x_high, input_dtype, up=False)))
        else:  # no |x| is in range (a max of 0): no block, zeros alone neither
            ranges.append(tuple(_NO_BOUNDS[:2]))
    bounds = np.array([*ranges[0], _magnitude_bits(min_normal, result_dtype, up=True) if min_normal > 0 else 1,
                       *ranges[1], int(nonnegative)], np.int64)
    bounds.flags.writeable = False
    return bounds


def _magnitude_bits(value: float, dtype: np.dtype, up: bool) -> int:
    """The bits of the `dtype` number nearest ``|value|`` on the side `up` says."""
    value = abs(value)
    with np.errstate(over="ignore"):
        nearest = dtype.type(value)
    if (up and float(nearest) < value) or (not up and float(nearest) > value):  # (float32 < float: float32's <)
        nearest = np.nextafter(nearest, dtype.type(np.inf if up else 0.0))
    return int(np.array(nearest, dtype).view(np.int32 if dtype.itemsize == 4 else np.int64))


def _thread_pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpfloat-stats")
        return _pool
