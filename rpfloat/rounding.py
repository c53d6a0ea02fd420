"""``round``, ``encode`` and ``decode``: validate, pick the kernel, view, call, view back."""
from __future__ import annotations

import concurrent.futures
import functools
import itertools
import numbers
import os
import threading

import numba
import numpy as np

from . import _codes
from ._kernels.quantize import P_CARRIER_MAN_BITS
from ._kernels.choose import kernel_for
from ._params import kernel_params, widening_params
from .fixedformat import FixedFormat
from .modes import Mode, parse_mode
from .presets import format as to_format

__all__ = ["round", "encode", "decode", "result_dtype"]

# Below this many elements one thread is faster than handing ranges to a pool
# (on a 2-core machine, where waking a pool thread takes ~100 µs; benchmarks/RESULTS.md).
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

_BITS_VIEW = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}
_FLOAT32 = np.dtype(np.float32)
_CARRIER = {23: np.dtype(np.float32), 52: np.dtype(np.float64)}  # by the kernel's carrier_man_bits
_FLOAT_POLICIES = ("inf", "saturate", "nan")
_FIXED_POLICIES = ("saturate", "wrap")


def round(x, fmt, mode="nearest", *, overflow=None, rng=None, rand_bits=None, out=None):
    """Round `x` onto the values of `fmt`, returned as floating-point numbers.

    Parameters
    ----------
    x : array_like
        Real or complex numbers (integers and bools are taken as float64). Any
        shape, strides or byte order; never modified unless it is `out`.
    fmt : FloatFormat, FixedFormat or str
        The target format or a name accepted by :func:`rpfloat.format`.
    mode : str
        ``"nearest"`` (ties to even), ``"nearest_away"``, ``"toward_zero"``,
        ``"up"``, ``"down"``, ``"odd"``, ``"stochastic"`` or ``"stochastic_equal"``,
        or one of their aliases (SPEC §2).
    overflow : {None, "inf", "saturate", "nan", "wrap"}
        What a value beyond ``fmt.max`` becomes; None takes the format's default.
        ``toward_zero`` (and ``up``/``down`` on the side they truncate) never
        overflow: they give ``±max``.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness for the stochastic modes. An int seed makes the result a pure
        function of ``(x, fmt, mode, seed)``: element ``i`` (C order) always draws
        the ``i``-th number of the seed's counter-based stream.
    rand_bits : int, optional
        Stochastic modes only: the probability of rounding up in magnitude is
        ``floor(frac * 2**rand_bits) / 2**rand_bits``. Default: 64 random bits.
    out : ndarray, optional
        A floating array of the result dtype and the shape of `x` to write into.

    Returns
    -------
    ndarray or numpy scalar
        Of dtype ``np.result_type(x.dtype, fmt.carrier)``; a numpy scalar for a
        0-d or scalar input. NaN stays NaN (a NaN input keeps its bits); exactly
        representable values, ``-0`` included, are returned unchanged, except that
        formats without ``-0`` (fnuz, fixed point) give ``+0``; ``±inf`` stay where
        the format has them, else they overflow like any value beyond ``max``.

    Examples
    --------
    >>> import rpfloat as rp
    >>> float(rp.round(1 / 3, "bfloat16"))
    0.333984375
    >>> rp.round([1000.0, 465.0], "e4m3", overflow="saturate")
    array([448., 448.])
    """
    return round_chunk(x, fmt, mode, overflow=overflow, rng=rng, rand_bits=rand_bits, out=out)


def round_chunk(x, fmt, mode="nearest", *, offset=0, overflow=None, rng=None, rand_bits=None, out=None):
    """:func:`round` for a chunk of a larger array whose first element has C-order
    flat index `offset` in the whole: with the same int seed, the chunk gets the
    bits that rounding the whole would give it (dask, GPUs, streaming)."""
    array = _input_array(x)
    dtype, params, widening, mode, rand_bits = _plan(fmt, mode, overflow, rand_bits, array.dtype)
    key = _random_key(rng) if mode.is_stochastic else 0
    result = _prepare_out(out, array.shape, dtype)
    if out is not None and _overlaps_elsewhere(array, result):
        array = array.copy()  # as NumPy's ufuncs do: read all of x before writing out
    _round_into(array, result, params, mode, key, rand_bits, _offset(offset, array), widening)
    if out is not None:
        return out
    return result[()] if result.ndim == 0 else result


def _plan(fmt, mode, overflow, rand_bits, input_dtype):
    """``(result dtype, kernel parameters, widening kernel's fast parameters or
    None, Mode, rand_bits)`` for these arguments, validated; cached, so that
    small arrays pay for validation once."""
    try:
        return _cached_plan(fmt, mode, overflow, rand_bits, input_dtype)
    except TypeError:  # an unhashable argument: validate it uncached, for a clear message
        return _cached_plan.__wrapped__(fmt, mode, overflow, rand_bits, input_dtype)


@functools.lru_cache(maxsize=1024, typed=True)  # typed: True, 1.0 and Mode(0) are not 1, 1 and 0
def _cached_plan(fmt, mode, overflow, rand_bits, input_dtype):
    fmt = to_format(fmt)
    mode = parse_mode(mode)
    policy = _overflow_policy(fmt, overflow)
    rand_bits = _rand_bits(rand_bits, mode)
    dtype = result_dtype(input_dtype, fmt)
    real_dtype = np.empty(0, dtype).real.dtype
    real_input = np.empty(0, input_dtype).real.dtype
    widening = None
    if real_input == np.float32 and real_dtype == np.float64:
        widening = widening_params(fmt, policy)
    return dtype, kernel_params(fmt, real_dtype, policy), widening, mode, rand_bits


def result_dtype(input_dtype, fmt) -> np.dtype:
    """The dtype :func:`round` returns for input of `input_dtype` (SPEC §2)."""
    return _result_dtype(np.dtype(input_dtype), fmt)


@functools.lru_cache(maxsize=1024)
def _result_dtype(input_dtype, fmt) -> np.dtype:
    if input_dtype.kind in "biu":
        input_dtype = np.dtype(np.float64)
    return np.result_type(input_dtype, fmt.carrier)


def _round_into(array, result, params, mode, key, rand_bits, offset=0, widening=None):
    """Round `array` into `result` (an array of the result dtype and the same shape)
    with the kernel parameters `params` (``rpfloat._params.kernel_params``);
    `widening`: the float32 fast-path parameters for float32 data rounded into
    float64 (``rpfloat._params.widening_params``), or None.

    `offset` is the flat C-order index of ``array``'s first element in a larger
    whole, so that chunks of an array draw the same random numbers as the whole.
    """
    if not result.flags.c_contiguous:  # a strided out=: round into a fresh array, then copy
        whole = np.empty(result.shape, result.dtype)
        _round_into(array, whole, params, mode, key, rand_bits, offset, widening)
        np.copyto(result, whole)
        return
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)  # a copy: the kernels read C order
    is_complex = result.dtype.kind == "c"
    _run_kernel(
        _flat_parts(array),
        _flat_parts(result),
        _CARRIER[params[P_CARRIER_MAN_BITS]],
        params,
        int(mode),
        key,  # a Python int: the kernel's entry point takes it as its uint64 without a NumPy scalar
        offset * (2 if is_complex else 1),
        rand_bits,
        widening,
    )


def _flat_parts(array):
    """A flat view of a C-contiguous array; complex numbers as (real, imag) pairs."""
    flat = array if array.ndim == 1 else array.reshape(-1)
    return flat.view(flat.real.dtype) if flat.dtype.kind == "c" else flat


def _run_kernel(source, target, carrier, params, mode, key, offset, rand_bits, widening):
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
        _round_range(source, target, carrier, params, mode, key, offset, rand_bits, widening, 0, size)
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
            _round_range(source, target, carrier, params, mode, key, offset, rand_bits, widening,
                         bounds[index], bounds[index + 1])

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


def _round_range(source, target, carrier, params, mode, key, offset, rand_bits, widening, start, stop):
    """Round ``source[start:stop]`` into ``target[start:stop]``.

    float32 data rounded into float64 with `widening` parameters go straight
    through a widening kernel (float32 in, float64 out).

    Where either is not the carrier dtype (another dtype or byte order, a float16
    result) or the rounding is in place (``out=x``), the values pass through small
    carrier buffers that stay in cache, so the kernel never runs in place (it may
    read a block again after writing its results) and memory holds no third array.
    """
    if stop <= start:
        return
    bits = _BITS_VIEW[carrier]
    target_is_carrier = target.dtype == carrier
    # in place: the kernel must not read its own results (two arrays that each
    # allocated their memory cannot share it, the common case, checked faster)
    owners = source.flags.owndata and target.flags.owndata and source is not target
    shared = not owners and np.may_share_memory(source, target)
    direct = None  # (source's bits view, fast-path parameters) where the kernel reads `source` itself
    if target_is_carrier and not shared:
        if source.dtype == carrier:
            direct = bits, params
        elif widening is not None and source.dtype == _FLOAT32:
            direct = np.int32, widening
    if direct is not None:
        source_bits, fast_params = direct
        if start != 0 or stop != source.size:
            source, target = source[start:stop], target[start:stop]
        kernel = kernel_for(source_bits, bits, params, mode, fast_params)
        # a widening kernel writes the float64 results as uint32 pairs (quantize.store_fast)
        target_bits = target.view(bits) if source_bits == bits else target.view(np.uint32)
        kernel(source.view(source_bits), target_bits, fast_params, params, mode, key, offset + start, rand_bits)
        return
    kernel = kernel_for(bits, bits, params, mode)
    source_is_carrier = source.dtype == carrier and not shared
    chunk = min(CHUNK, stop - start)
    source_buffer = _scratch(0, carrier) if not source_is_carrier else None
    target_buffer = _scratch(1, carrier) if not target_is_carrier else None
    for begin in range(start, stop, chunk):
        end = min(stop, begin + chunk)
        if source_is_carrier:
            values = source[begin:end]
        else:
            values = source_buffer[: end - begin]
            with np.errstate(invalid="ignore"):  # casting a signalling NaN is no error
                np.copyto(values, source[begin:end], casting="unsafe")
        rounded = target[begin:end] if target_is_carrier else target_buffer[: end - begin]
        kernel(values.view(bits), rounded.view(bits), params, params, mode, key, offset + begin, rand_bits)
        if not target_is_carrier:
            with np.errstate(invalid="ignore"):
                np.copyto(target[begin:end], rounded, casting="unsafe")


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


def _offset(offset, array) -> int:
    if offset.__class__ is int and offset == 0:  # the common case, without the checks' cost
        return 0
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    # the kernels count in int64, complex numbers as two
    parts = 2 if array.dtype.kind == "c" else 1
    if (int(offset) + array.size) * parts >= 2**63:
        raise ValueError(f"offset + x.size must stay below 2**63 (2**62 for complex x), got offset {offset}")
    return int(offset)


def _input_array(x) -> np.ndarray:
    """`x` as an ndarray of a numeric dtype, without copying; TypeError otherwise."""
    array = x if isinstance(x, np.ndarray) else np.asarray(x)
    if array.dtype == object and not isinstance(x, np.ndarray) and _all_ints(array):
        array = np.array(x, dtype=np.float64)  # Python ints beyond int64, taken as float64
    if array.dtype.kind not in "biufc":
        raise TypeError(
            f"x must hold real or complex numbers, got an array of dtype {array.dtype}; "
            "convert it with np.asarray(x, dtype=float) first"
        )
    if array.dtype.kind in "fc" and array.dtype.itemsize > (16 if array.dtype.kind == "c" else 8):
        raise TypeError(
            f"x has dtype {array.dtype}, wider than float64, which rpfloat does not compute in; "
            "convert it with x.astype(np.float64) (one rounding to nearest) first"
        )
    return array


def _all_ints(array) -> bool:
    return all(isinstance(item, numbers.Integral) and not isinstance(item, bool) for item in array.flat)


def _overlaps_elsewhere(array, result) -> bool:
    """Whether `result` shares memory with `array` other than element for element
    (rounding in place, ``out=x``, is safe; a shifted view is not)."""
    if not np.may_share_memory(array, result):
        return False
    same_elements = (
        array.__array_interface__["data"][0] == result.__array_interface__["data"][0]
        and array.strides == result.strides
        and array.dtype.itemsize == result.dtype.itemsize
    )
    return not same_elements


def _prepare_out(out, shape, dtype) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy ndarray, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"out must have the result dtype {dtype}, got {out.dtype}")
    if out.shape != shape:
        raise ValueError(f"out must have the shape of x, {shape}, got {out.shape}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    return out


def _overflow_policy(fmt, overflow) -> str:
    """The overflow policy to apply: `overflow`, or the format's default; validated."""
    if overflow is None:
        return fmt.overflow
    if not isinstance(overflow, str):
        raise TypeError(f"overflow must be a string or None, got {type(overflow).__name__}")
    if isinstance(fmt, FixedFormat):
        if overflow not in _FIXED_POLICIES:
            raise ValueError(f"overflow for a FixedFormat must be one of {_FIXED_POLICIES}, got {overflow!r}")
        return overflow
    if overflow not in _FLOAT_POLICIES:
        raise ValueError(f"overflow for a FloatFormat must be one of {_FLOAT_POLICIES}, got {overflow!r}")
    unbounded = fmt.exp_bits is None
    if overflow == "inf" and not (unbounded or fmt.has_inf):
        raise ValueError(f"overflow='inf' is impossible: {fmt!r} has no infinity; use 'saturate' or 'nan'")
    if overflow == "nan" and not (unbounded or fmt.has_nan):
        raise ValueError(f"overflow='nan' is impossible: {fmt!r} has no NaN; use 'saturate'")
    return overflow


def _rand_bits(rand_bits, mode: Mode) -> int:
    if rand_bits is None:
        return 64
    if not mode.is_stochastic:
        raise ValueError(f"rand_bits is for the stochastic modes only, not mode {mode.name.lower()!r}")
    if isinstance(rand_bits, bool) or not isinstance(rand_bits, numbers.Integral):
        raise TypeError(f"rand_bits must be an int from 1 to 64, got {type(rand_bits).__name__}")
    if not 1 <= rand_bits <= 64:
        raise ValueError(f"rand_bits must be from 1 to 64, got {rand_bits}")
    return int(rand_bits)


def _random_key(rng) -> int:
    """A 64-bit key for the counter-based generator from the `rng` argument."""
    if rng is None:
        return int.from_bytes(os.urandom(8), "little")  # fresh OS entropy
    if rng.__class__ is int and rng >= 0:  # the common case first: isinstance on ABCs is slow
        return _seed_key(rng)
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, 2**64, dtype=np.uint64))
    if isinstance(rng, np.random.SeedSequence):
        return int(rng.generate_state(1, np.uint64)[0])
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"rng seed must be a non-negative int, got {rng}")
        return _seed_key(int(rng))
    raise TypeError(
        "rng must be None, an int seed, a numpy.random.SeedSequence or a "
        f"numpy.random.Generator, got {type(rng).__name__}"
    )


@functools.lru_cache(maxsize=256)
def _seed_key(seed: int) -> int:
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])


def encode(x, fmt, mode="nearest", **round_kwargs):
    """Round `x` onto `fmt` and return the codes (bit patterns) of the results.

    Codes are ``sign | exponent | significand`` for floating-point formats
    (bit-identical to ``ml_dtypes`` arrays viewed as unsigned integers; NaN
    becomes the format's canonical NaN code) and two's complement words for
    fixed-point formats, in the narrowest unsigned dtype holding ``fmt.bits``.

    Raises
    ------
    ValueError
        If a result has no code in the format (NaN in a format without NaN), or
        the format has no encoding (``exp_bits=None``).

    Examples
    --------
    >>> import rpfloat as rp
    >>> rp.encode([1.0, -2.0], "e4m3")
    array([ 56, 192], dtype=uint8)
    """
    fmt = to_format(fmt)
    if fmt.bits is None:
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns")
    rounded = np.asarray(round(x, fmt, mode, **round_kwargs))
    if rounded.dtype.kind == "c":
        raise TypeError("encode takes real numbers; encode x.real and x.imag separately")
    with np.errstate(invalid="ignore"):  # signalling NaNs are NaNs like any other
        values = rounded.astype(np.float64, copy=False)
    return _codes.encode_values(values, fmt)


def decode(codes, fmt):
    """The values (in ``fmt.carrier``) of the bit patterns `codes` of `fmt`.

    Examples
    --------
    >>> import rpfloat as rp
    >>> rp.decode([56, 192], "e4m3")
    array([ 1., -2.], dtype=float16)
    """
    fmt = to_format(fmt)
    if fmt.bits is None:
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns")
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise TypeError(f"codes must be integers, got dtype {codes.dtype}")
    result = _codes.decode_values(codes, fmt).astype(fmt.carrier)
    return result[()] if result.ndim == 0 else result
