"""The CPU backend: `run` rounds an array as a plan says, on numba's threads for
large arrays, choosing each range's kernel from the kernel table (``table``)."""
from __future__ import annotations

import concurrent.futures
import itertools
import threading

import numba
import numpy as np

from . import float16
from .environment import in_default_environment
from .table import choose, first_available

__all__ = ["run", "round_carrier"]

_FLOAT32 = np.dtype(np.float32)
_FLOAT16 = np.dtype(np.float16)  # (native byte order)
# Below this many elements one thread is faster than handing ranges to a pool
# (on a 2-core machine, where waking a pool thread takes ~100 µs; measured with benchmarks/bench_round.py).
PARALLEL_THRESHOLD = 3 << 20
# A large array is cut into RANGES_PER_THREAD ranges per thread, fewer where they
# would hold under RANGE_MIN elements (but one per thread at least), so that a
# thread that starts late takes fewer.
RANGE_MIN = 1 << 17
RANGES_PER_THREAD = 8
# Elements converted at a time where input or result is not the carrier dtype:
# two buffers of this size stay in a core's L2 cache.
CHUNK = 1 << 15
_pool = None
_pool_lock = threading.Lock()


def run(plan, array, result, key, offset=0):
    """Round `array` into `result` (an array of ``plan.result_dtype`` and the same
    shape, which must not overlap `array` other than element for element) as
    `plan` (``rpfloat._plan.Plan``) says, with the random stream `key` (a Python
    int below 2**64).

    `offset` is the flat C-order index of ``array``'s first element in a larger
    whole, so that chunks of an array draw the same random numbers as the whole.
    """
    if not result.flags.c_contiguous:  # a strided out=: round into a fresh array, then copy
        whole = np.empty(result.shape, result.dtype)
        run(plan, array, whole, key, offset)
        np.copyto(result, whole)
        return
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)  # a copy: the kernels read C order
    is_complex = result.dtype.kind == "c"
    # key: a Python int, which the kernel's entry point takes as its uint64 without a NumPy scalar
    _run_kernel(_flat_parts(array), _flat_parts(result), plan, key, offset * (2 if is_complex else 1))


def round_carrier(plan, source, target, key, offset):
    """Round `source` into `target`, flat C-contiguous arrays of the plan's carrier
    dtype that do not overlap, in the calling thread: `run` without its checks,
    copies and threads, for callers that round many pieces of an array in
    cache (``float64_blocks``)."""
    kernel = _kernel_for(plan, plan.bits, False)
    kernel(source.view(plan.bits), target.view(plan.bits), plan.params, plan.params, int(plan.mode), key, offset,
           plan.rand_bits)


def _flat_parts(array):
    """A flat view of a C-contiguous array; complex numbers as (real, imag) pairs."""
    flat = array if array.ndim == 1 else array.reshape(-1)
    return flat.view(flat.real.dtype) if flat.dtype.kind == "c" else flat


def _run_kernel(source, target, plan, key, offset):
    """Round flat `source` into flat `target`, on numba's thread count for large
    arrays.

    The array is cut into ranges that the calling thread and the pool's threads
    take in turn until none is left: where the machine is slow to start a pool
    thread, or the pool is busy with another user thread's call, the calling
    thread rounds more of them, and it never waits for a pool task that has not
    started (it cancels it). The kernel releases the GIL, and element ``i``
    draws random number ``offset + i`` whatever the range, so threads never
    change a result.
    """
    global _pool
    size = source.size
    threads = 1 if size < PARALLEL_THRESHOLD else numba.get_num_threads()
    if threads == 1:
        _round_range(source, target, plan, key, offset, 0, size)
        return
    with _pool_lock:  # two user threads may arrive here first at once
        if _pool is None or _pool._max_workers < threads - 1:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads - 1)
    ranges = max(threads, min(RANGES_PER_THREAD * threads, size // RANGE_MIN))
    bounds = np.linspace(0, size, ranges + 1).astype(np.int64).tolist()
    taken = itertools.count()  # next() on it is atomic: each range goes to one thread
    stopped = threading.Event()  # set where the calling thread failed: the others stop taking

    def take_ranges():
        for index in taken:
            if index >= ranges or stopped.is_set():
                return
            _round_range(source, target, plan, key, offset, bounds[index], bounds[index + 1])

    futures = [_pool.submit(take_ranges) for _ in range(threads - 1)]
    try:
        take_ranges()
    except BaseException:  # an error or KeyboardInterrupt: stop the others, then raise it
        stopped.set()
        for future in futures:
            future.cancel()
        concurrent.futures.wait(futures)
        raise
    for future in futures:
        if not future.cancel():  # it started: wait for its ranges (and raise what it raised)
            future.result()


def _round_range(source, target, plan, key, offset, start, stop):
    """Round ``source[start:stop]`` into ``target[start:stop]``.

    float32 data rounded into float64 where the plan has widening parameters
    go straight through a widening kernel (float32 in, float64 out).

    Where either is not the carrier dtype (another dtype or byte order, a float16
    result) or the rounding is in place (``out=x``), the values pass through small
    carrier buffers that stay in cache, so the kernel never runs in place (it may
    read a block again after writing its results) and memory holds no third array.
    """
    if stop <= start:
        return
    carrier, bits, params, mode, rand_bits = plan.carrier, plan.bits, plan.params, int(plan.mode), plan.rand_bits
    target_is_carrier = target.dtype == carrier
    # in place: the kernel must not read its own results (two arrays that each
    # allocated their memory cannot share it, the common case, checked faster)
    owners = source.flags.owndata and target.flags.owndata and source is not target
    shared = not owners and np.may_share_memory(source, target)
    direct = None  # (source's bits view, widening) where the kernel reads `source` itself
    if target_is_carrier and not shared:
        if source.dtype == carrier:
            direct = bits, False
        elif plan.widening is not None and source.dtype == _FLOAT32:
            direct = np.int32, True
    if direct is not None:
        source_bits, widening = direct
        fast_params = plan.widening if widening else params
        if start != 0 or stop != source.size:
            source, target = source[start:stop], target[start:stop]
        kernel = _kernel_for(plan, source_bits, widening)
        # a widening kernel writes the float64 results as uint32 pairs (loops.store_fast)
        target_bits = target.view(bits) if source_bits == bits else target.view(np.uint32)
        kernel(source.view(source_bits), target_bits, fast_params, params, mode, key, offset + start, rand_bits)
        return
    kernel = _kernel_for(plan, bits, False)
    source_is_carrier = source.dtype == carrier and not shared
    chunk = min(CHUNK, stop - start)
    source_buffer = _scratch(0, carrier) if not source_is_carrier else None
    target_buffer = _scratch(1, carrier) if not target_is_carrier else None
    # float16 data and results go through the float32 carrier by integer loops (NumPy's
    # bits, ~10x faster than its casts); the results are float16 numbers, NaN or inf
    widen_halves = source.dtype == _FLOAT16 and carrier == _FLOAT32
    narrow_halves = target.dtype == _FLOAT16 and carrier == _FLOAT32
    for begin in range(start, stop, chunk):
        end = min(stop, begin + chunk)
        if source_is_carrier:
            values = source[begin:end]
        elif widen_halves:
            values = source_buffer[: end - begin]
            float16.widen(source[begin:end].view(np.uint16), values.view(np.int32))
        else:
            values = source_buffer[: end - begin]
            _cast_into(values, source[begin:end])
        rounded = target[begin:end] if target_is_carrier else target_buffer[: end - begin]
        kernel(values.view(bits), rounded.view(bits), params, params, mode, key, offset + begin, rand_bits)
        if narrow_halves:
            float16.narrow(rounded.view(np.int32), target[begin:end].view(np.uint16))
        elif not target_is_carrier:
            with np.errstate(invalid="ignore"):
                np.copyto(target[begin:end], rounded, casting="unsafe")


@in_default_environment
def _cast_into(target, source):
    """``np.copyto(target, source, casting="unsafe")``, exact where it widens, in
    any environment: under denormals-are-zero the hardware's float32-to-float64
    conversion reads subnormals as 0. (Casting a signalling NaN is no error.)"""
    with np.errstate(invalid="ignore"):
        np.copyto(target, source, casting="unsafe")


def _kernel_for(plan, source_bits, widening):
    """The entry point of the table's kernel for `plan` and `source_bits` data into
    its carrier (a widening kernel where `widening`). The candidates are chosen
    once per plan; where the first needs no floating-point environment its entry
    point is kept, else the environment is checked on every call, in this thread."""
    memo = (source_bits, widening)
    chosen = plan.kernels.get(memo)
    if chosen is None:
        candidates = choose(source_bits, plan.bits, plan.params, int(plan.mode), plan.widening if widening else None)
        chosen = plan.kernels[memo] = (first_available(candidates, source_bits, plan.bits)
                                       if candidates[0][0].environment == 0 else candidates)
    if chosen.__class__ is tuple:
        return first_available(chosen, source_bits, plan.bits)
    return chosen


def _scratch(slot: int, dtype: np.dtype) -> np.ndarray:
    """A buffer of CHUNK elements of `dtype`, kept per thread and reused by every
    later call (so that ``out=`` allocates nothing once warm); slot 0 holds
    inputs, slot 1 results."""
    buffers = getattr(_buffers, "by_slot", None)
    if buffers is None:
        buffers = _buffers.by_slot = {}
    buffer = buffers.get((slot, dtype))
    if buffer is None:
        buffer = buffers[slot, dtype] = np.empty(CHUNK, dtype)
    return buffer


_buffers = threading.local()


