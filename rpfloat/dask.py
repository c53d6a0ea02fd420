"""rpfloat for dask: lazy, chunked and distributed rounding with the bits of NumPy.

Needs dask's arrays (``pip install 'dask[array]'``, or the extra:
``pip install 'rpfloat[dask]'``); ``import rpfloat`` itself never imports dask.
docs/dask.md describes it.

Every function takes a ``dask.array.Array`` and returns a lazy one: building it
computes nothing and calls no kernel; each chunk is rounded when the graph runs,
on whatever scheduler runs it. The functions add no semantics: a chunk gets the
bits that ``rp.round`` of the whole NumPy array gives it.

**Flat index.** The counter-based random stream of the stochastic modes is indexed
by the *global* C-order flat index: the element at ``x[i0, ..., in]`` draws random
number ``i0 * x.shape[1] * ... * x.shape[n] + ... + in``, whatever the chunks,
their sizes (ragged or not) and the axes they split. A chunk that is not one
contiguous range of that order (chunks along a trailing axis) is rounded as the
contiguous runs it is made of, each at its own offset (``rpfloat.rounding.round_chunk``).

>>> import numpy as np, dask.array as da, rpfloat as rp, rpfloat.dask as rpd
>>> x = np.linspace(-3, 3, 12).reshape(3, 4)
>>> lazy = rpd.round(da.from_array(x, chunks=(2, 3)), "e4m3", "stochastic", rng=0)
>>> np.array_equal(lazy.compute(), rp.round(x, "e4m3", "stochastic", rng=0))
True
"""
try:
    import dask.array as _da
except ImportError as error:  # fails here, with a clear message, when dask is missing
    raise ImportError(
        "rpfloat.dask needs dask's arrays, which are not installed: pip install 'dask[array]' "
        "(or the extra: pip install 'rpfloat[dask]')"
    ) from error

import builtins
import functools
import math
import numbers

import numpy as np

from . import _codes
from . import accumulate as _accumulate
from . import faults as _faults
from . import rounding as _rounding  # looked up at call time: the tests count calls to its kernels
from . import scaling as _scaling
from ._plan import check_rand_bits, plan_for, random_key, unused_key
from .modes import parse_mode
from .presets import format as to_format
from .scaledformat import ScaledFormat

__all__ = ["round", "encode", "decode", "sum", "flip_bits"]


def round(x, fmt, mode="nearest", *, overflow=None, rng=None, rand_bits=None):  # noqa: A001
    """Round the dask array `x` onto `fmt`, lazily, chunk by chunk: ``rp.round`` for dask.

    Parameters
    ----------
    x : dask.array.Array
        Real or complex numbers, any shape and chunks.
    fmt, mode, overflow, rand_bits
        As for :func:`rpfloat.round`.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness for the stochastic modes. An int seed or a SeedSequence gives
        the bits of ``rp.round(x.compute(), fmt, mode, rng=rng)``, whatever the
        chunks. A Generator gives one 64-bit seed, drawn from it when this
        function is called (building the graph); None, one drawn from the
        operating system's entropy then. All chunks share that one stream, and
        recomputing the graph repeats its bits.

    Returns
    -------
    dask.array.Array
        Lazy; the chunks of `x` and the dtype of ``rp.round``'s result
        (``rpfloat.rounding.result_dtype(x.dtype, fmt)``). For a scaled format
        with blocks, chunks moved so that no block straddles two (docs/dask.md).

    Notes
    -----
    A scaled format with one scale per array (``block_size=None``) or a tensor
    scale takes that scale from the whole array: a reduction over `x` (its
    largest finite magnitude, and whether it holds a NaN or inf) that every
    chunk's task waits for, so that `x` is read twice when computed.

    Examples
    --------
    >>> import numpy as np, dask.array as da, rpfloat.dask as rpd
    >>> lazy = rpd.round(da.from_array(np.array([0.1, 1 / 3, 1000.0]), chunks=2), "bfloat16")
    >>> lazy.chunks, lazy.dtype
    (((2, 1),), dtype('float64'))
    >>> lazy.compute()
    array([1.00097656e-01, 3.33984375e-01, 1.00000000e+03])
    """
    x = _dask_array(x, "x")
    plan = _plan(x, fmt, mode, overflow, rand_bits)
    fmt = to_format(fmt)
    stochastic = plan.mode.is_stochastic
    if stochastic or isinstance(fmt, ScaledFormat):
        _known_chunks(x, "x", "a stochastic mode or a scaled format")
    summary = ()
    if isinstance(fmt, ScaledFormat):
        x = _scaled_chunks(x, fmt, stochastic)
        if x.npartitions > 1 and x.size > 0 and (fmt.block_size is None or fmt.tensor_scale):
            summary = _whole_array_summary(x)
    round_block = _round_block_of_whole if summary else _round_block
    block = functools.partial(round_block, fmt=fmt, mode=mode, overflow=overflow, rand_bits=rand_bits,
                              seed=_stream_seed(rng) if stochastic else _no_seed(rng), shape=x.shape,
                              dtype=plan.result_dtype)
    return _da.map_blocks(block, x, *summary, dtype=plan.result_dtype, meta=_meta(x.ndim, plan.result_dtype),
                          token="rpfloat-round")


def encode(x, fmt, mode="nearest", **round_kwargs):
    """The codes of the dask array `x` rounded onto `fmt`, lazily: ``rp.encode`` for dask.

    `round_kwargs` (``overflow``, ``rng``, ``rand_bits``) are those of
    :func:`round`, with the same bits. A value without a code (NaN in a format
    without NaN) raises ``ValueError`` when the chunk holding it is computed.

    Returns
    -------
    dask.array.Array or ScaledCodes
        The codes in the narrowest unsigned dtype holding ``fmt.bits``, in the chunks
        of `x`. For a :class:`~rpfloat.ScaledFormat`, a ``ScaledCodes`` of dask
        arrays: the element codes, the scale codes (chunked like the elements,
        one entry per block) and, for two-level scaling, the float32 tensor scale
        as a 0-d array (else None).

    Examples
    --------
    >>> import numpy as np, dask.array as da, rpfloat.dask as rpd
    >>> codes = rpd.encode(da.from_array(np.array([1.0, -2.0, 0.5]), chunks=2), "e4m3")
    >>> codes.dtype, codes.compute()
    (dtype('uint8'), array([ 56, 192,  48], dtype=uint8))
    """
    x = _dask_array(x, "x")
    _rounding.check_encode_keywords(round_kwargs)
    overflow, rng, rand_bits = (round_kwargs.get(name) for name in ("overflow", "rng", "rand_bits"))
    fmt = to_format(fmt)
    if not isinstance(fmt, ScaledFormat) and fmt.bits is None:  # (rp.encode's first complaint)
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns")
    plan = _plan(x, fmt, mode, overflow, rand_bits)
    seed = _stream_seed(rng) if plan.mode.is_stochastic else _no_seed(rng)
    if plan.mode.is_stochastic or isinstance(fmt, ScaledFormat):
        _known_chunks(x, "x", "a stochastic mode or a scaled format")
    if isinstance(fmt, ScaledFormat):
        return _encode_scaled(_scaled_chunks(x, fmt, plan.mode.is_stochastic), fmt, mode, seed, rand_bits)
    if plan.result_dtype.kind == "c":
        raise TypeError("encode takes real numbers; encode x.real and x.imag separately")
    code_dtype = _codes.code_dtype(fmt.bits)
    block = functools.partial(_encode_block, fmt=fmt, mode=mode, overflow=overflow, rand_bits=rand_bits, seed=seed,
                              shape=x.shape, dtype=plan.result_dtype)
    return _da.map_blocks(block, x, dtype=code_dtype, meta=_meta(x.ndim, code_dtype), token="rpfloat-encode")


def decode(codes, fmt):
    """The values of the codes `codes` of `fmt`, lazily: ``rp.decode`` for dask.

    Parameters
    ----------
    codes : dask.array.Array or ScaledCodes
        Integer codes, any chunks. For a :class:`~rpfloat.ScaledFormat`, what
        :func:`encode` returns (element codes, scale codes[, tensor scale]; the
        parts may be dask or NumPy arrays).
    fmt : FloatFormat, FixedFormat, ScaledFormat or str

    Returns
    -------
    dask.array.Array
        In the dtype ``rp.decode`` returns (``fmt.carrier`` for an element
        format, float64 for a scaled one), in the chunks of the (element) codes.

    Examples
    --------
    >>> import numpy as np, dask.array as da, rpfloat.dask as rpd
    >>> rpd.decode(da.from_array(np.array([56, 192], np.uint8), chunks=1), "e4m3").compute()
    array([ 1., -2.], dtype=float16)
    """
    fmt = to_format(fmt)
    if isinstance(fmt, ScaledFormat):
        return _decode_scaled(codes, fmt)
    if isinstance(codes, _scaling.ScaledCodes):
        raise TypeError("codes is a ScaledCodes: decode it with its ScaledFormat, or decode codes.elements "
                        "with the element format")
    codes = _dask_array(codes, "codes")
    if fmt.bits is None:
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns")
    if codes.dtype.kind not in "iu":
        raise TypeError(f"codes must be integers, got dtype {codes.dtype}")
    dtype = np.dtype(fmt.carrier)
    return _da.map_blocks(functools.partial(_decode_block, fmt=fmt), codes, dtype=dtype,
                          meta=_meta(codes.ndim, dtype), token="rpfloat-decode")


def sum(x, fmt, *, axis=None, mode="nearest", order="sequential", rng=None, block_k=None,  # noqa: A001
        rand_bits=None, keepdims=False):
    """Sum of the dask array `x` with every addition rounded onto `fmt`, lazily:
    per-chunk sums, then those combined pairwise in chunk order.

    1. Every chunk is summed with :func:`rpfloat.sum` over `axis`, in `order`
       (or in blocks of `block_k`).
    2. For every result element, the partial sums of the chunks along `axis` are
       taken in C order of the chunk grid and added level by level,
       ``(s0 + s1), (s2 + s3), ...``, each sum rounded onto `fmt` in `mode` (the
       exact sum rounded once); an odd last one moves up a level as it is.

    The result depends on the chunks (as the order of additions does), never on
    the scheduler. In the deterministic modes, for one chunk it is
    ``rp.sum(x, ...)``; with ``order="pairwise"``, where the chunks along a 1-D `x`
    hold a power of two elements each (the last may hold fewer), it is
    ``rp.sum(x, order="pairwise")`` too: the same tree. (The stochastic modes
    draw each chunk's randomness from a stream of its own, below.)

    Parameters
    ----------
    x : dask.array.Array
        Real numbers, taken exactly.
    fmt, axis, mode, order, block_k, rand_bits, keepdims
        As for :func:`rpfloat.sum` (``mode=None`` is ``"nearest"``). There is no
        ``out``: store the result with ``dask.array.store`` or compute it.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness for the stochastic modes. It gives one 64-bit key ``k``
        (``rp.sum``'s: an int seed or SeedSequence always the same, a Generator or
        None a fresh one, drawn when the graph is built); chunk ``c`` (C order in
        the chunk grid) is summed with ``rng=SeedSequence(k, spawn_key=(0, c))``,
        and level ``l`` of step 2 for result chunk ``r`` with
        ``rng=SeedSequence(k, spawn_key=(1, l, r))`` (docs/dask.md).

    Returns
    -------
    dask.array.Array
        Of ``rp.sum``'s shape and dtype; 0-d for ``axis=None`` (without `keepdims`).

    Examples
    --------
    >>> import numpy as np, dask.array as da, rpfloat as rp, rpfloat.dask as rpd
    >>> ones = da.ones(4096, chunks=1000)
    >>> float(rpd.sum(ones, "float16").compute())       # 1000 per chunk, then pairwise
    4096.0
    >>> float(rp.sum(np.ones(4096), "float16"))         # one sequential sum stalls at 2048
    2048.0
    """
    x = _dask_array(x, "x")
    fmt = _accumulate._element_format(fmt, "fmt")
    mode = "nearest" if mode is None else mode  # rp.sum's None: nearest, for arrays that are not RPArrays
    stochastic = parse_mode(mode).is_stochastic
    check_rand_bits(rand_bits, parse_mode(mode))
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be True or False, got {keepdims!r}")
    _accumulate.pairwise_order(order)  # the checks of rp.sum, without its kernel
    block_k = _accumulate.block_size(block_k, order)
    _, dtype = _accumulate.exact_operand(np.empty(0, x.dtype), "x")
    given_axes = tuple(_accumulate.reduced_axes(axis, x.ndim))  # a chunk sums them in this order, as rp.sum
    axes = sorted(given_axes)
    _known_chunks(x, "x", "summing across chunks", axes)
    out_dtype = _rounding.result_dtype(dtype, fmt)
    _accumulate.rounding_setup(_accumulate.bounded_format(fmt, out_dtype))  # rp.sum's check of fmt
    root = random_key(rng) if stochastic else _no_seed(rng)
    partial_chunks = tuple((1,) * len(sizes) if d in axes else sizes for d, sizes in enumerate(x.chunks))
    partials = _da.map_blocks(
        functools.partial(_sum_block, fmt=fmt, axes=given_axes, mode=mode, order=order, block_k=block_k,
                          root=root, dtype=out_dtype, rand_bits=rand_bits),
        x, chunks=partial_chunks, dtype=out_dtype, meta=_meta(x.ndim, out_dtype), token="rpfloat-sum-chunks")
    partials = partials.rechunk({d: -1 for d in axes})
    kept = [d for d in range(x.ndim) if d not in axes]
    total = _da.map_blocks(
        functools.partial(_combine_block, fmt=fmt, axes=tuple(axes), mode=mode, root=root, dtype=out_dtype,
                          rand_bits=rand_bits),
        partials, drop_axis=axes, chunks=tuple(x.chunks[d] for d in kept), dtype=out_dtype,
        meta=_meta(len(kept), out_dtype), token="rpfloat-sum")
    return _da.expand_dims(total, axes) if keepdims and axes else total


def flip_bits(x, fmt, p, *, field="all", rng=None):
    """The dask array `x` rounded onto `fmt` with bits of its codes flipped,
    lazily: ``rp.flip_bits`` for dask, with the same bits.

    Bit ``b`` of the code of the element at global C-order flat index ``i``
    flips as it does in ``rp.flip_bits`` of the whole array: by number
    ``i * bits + b`` of the stream of `rng` (an int seed or a SeedSequence gives
    the NumPy call's flips; a Generator or None one key, drawn when the graph is
    built), whatever the chunks.

    Parameters
    ----------
    x : dask.array.Array
        Real numbers, chunks of known size (``x.compute_chunk_sizes()``).
    fmt, p, field, rng
        As for :func:`rpfloat.flip_bits`.

    Returns
    -------
    dask.array.Array
        In the dtype ``rp.flip_bits`` returns, in the chunks of `x` (of the
        element codes, for a scaled format: its blocks whole).

    Examples
    --------
    >>> import numpy as np, dask.array as da, rpfloat as rp, rpfloat.dask as rpd
    >>> x = np.linspace(-1, 1, 10)
    >>> lazy = rpd.flip_bits(da.from_array(x, chunks=3), "e4m3", 0.1, rng=5)
    >>> np.array_equal(lazy.compute(), rp.flip_bits(x, "e4m3", 0.1, rng=5), equal_nan=True)
    True
    """
    x = _dask_array(x, "x")
    fmt, mask, threshold = _faults.flip_setup(fmt, p, field)
    plan = _plan(x, fmt, "nearest", None, None)
    if plan.result_dtype.kind == "c":
        raise TypeError("flip_bits takes real numbers; flip x.real and x.imag separately")
    _known_chunks(x, "x", "flip_bits")
    key = random_key(rng)  # as rp.flip_bits draws it, whatever p
    codes = encode(x, fmt)
    elements = codes.elements if isinstance(fmt, ScaledFormat) else codes
    bits = fmt.element.bits if isinstance(fmt, ScaledFormat) else fmt.bits
    flipped = _da.map_blocks(
        functools.partial(_flip_block, bits=bits, mask=mask, threshold=threshold, key=key, shape=x.shape),
        elements, dtype=elements.dtype, meta=_meta(x.ndim, elements.dtype), token="rpfloat-flip-bits")
    if isinstance(fmt, ScaledFormat):
        values = decode(_scaling.ScaledCodes(flipped, codes.scales, codes.tensor_scale), fmt)
    else:
        values = decode(flipped, fmt)
    return _da.map_blocks(functools.partial(_faults.values_as, dtype=plan.result_dtype), values,
                          dtype=plan.result_dtype, meta=_meta(x.ndim, plan.result_dtype), token="rpfloat-flip-cast")


# -- checks and set-up at graph build time -------------------------------------------------


def _dask_array(x, argument):
    if not isinstance(x, _da.Array):
        raise TypeError(f"{argument} must be a dask.array.Array, got {type(x).__name__}; use rpfloat's own "
                        f"functions for NumPy arrays, or da.from_array({argument}, chunks=...)")
    return x


def _known_chunks(x, argument, what, axes=None):
    """ValueError where `x` has chunks of unknown size (NaN, after boolean indexing,
    say) along `axes` (None: any): `what` needs every chunk's place in the array."""
    if any(math.isnan(size) for axis, sizes in enumerate(x.chunks) if axes is None or axis in axes
           for size in sizes):
        raise ValueError(f"{argument} has chunks of unknown size, and {what} needs each chunk's place in the "
                         f"array: call {argument}.compute_chunk_sizes() first")


def _plan(x, fmt, mode, overflow, rand_bits):
    """rp.round's plan for chunks of `x` (validates every argument but rng, as rp.round does),
    for the dtype rp.round computes in (ml_dtypes data: float32)."""
    meta = getattr(x, "_meta", None)
    # rp.round's dtype checks and messages (masked chunks among them)
    computed = _rounding.input_array(meta if isinstance(meta, np.ma.MaskedArray) else np.empty(0, x.dtype))
    return plan_for(fmt, mode, overflow, rand_bits, computed.dtype)


def _no_seed(rng) -> None:
    """None, the seed of a deterministic mode, once `rng` is one that `rp.round`
    takes (a bad `rng` is an error in every mode, when the graph is built)."""
    unused_key(rng)
    return None


def _stream_seed(rng):
    """What every chunk passes as `rng` so that all draw from one stream: an int seed
    or a SeedSequence itself (rp.round's stream); for a Generator or None, one 64-bit
    seed drawn now."""
    key = random_key(rng)  # validates rng; draws from a Generator or the OS
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, numbers.Integral):
        return int(rng)
    return key


def _meta(ndim, dtype):
    """An empty array that tells dask the type of the chunks, so that it never calls a
    block function on sample data to learn it."""
    return np.empty((0,) * ndim, dtype)


def _scaled_chunks(x, fmt: ScaledFormat, stochastic):
    """`x` rechunked, where needed, so that no block of `fmt` straddles two chunks
    (chunk boundaries along the blocked axis on multiples of block_size) and, for the
    stochastic modes, every chunk's runs of global C order hold whole blocks (axes
    after the blocked one in one chunk). One scale per array: any chunks (its scale
    comes from `_whole_array_summary`)."""
    if fmt.block_size is None or x.ndim == 0:
        return x
    axis = _scaling.block_layout_of(x.shape, fmt)[4]  # validates the format's axis for x
    chunks = list(x.chunks)
    chunks[axis] = _aligned(chunks[axis], fmt.block_size)
    if stochastic and axis + 1 < x.ndim:
        largest = _largest_chunk(x.chunks)
        chunks[axis + 1:] = [(size,) for size in x.shape[axis + 1:]]
        if _largest_chunk(chunks) > largest and x.shape[axis] > 0:
            # whole trailing axes: fewer whole blocks along the blocked axis, so that a
            # chunk holds no more elements than x's largest did (or one row of blocks)
            step_size = _largest_chunk(chunks[:axis]) * math.prod(x.shape[axis + 1:])
            steps = max(fmt.block_size, largest // max(step_size, 1) // fmt.block_size * fmt.block_size)
            if steps < max(chunks[axis]):
                whole, rest = divmod(x.shape[axis], steps)
                chunks[axis] = (steps,) * whole + ((rest,) if rest else ())
    chunks = tuple(chunks)
    return x if chunks == x.chunks else x.rechunk(chunks)


def _largest_chunk(chunks) -> int:
    """Elements of the largest chunk that chunk sizes `chunks` (one tuple per axis) allow."""
    return math.prod(max(sizes) for sizes in chunks)


def _whole_array_summary(x):
    """Lazy 0-d arrays: the largest finite magnitude of `x` (0 where none) and
    whether it holds a NaN or an infinity; all that a scale of the whole array
    depends on."""
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    if any(0 in sizes for sizes in x.chunks):  # (dask's max fails on chunks of size 0; x itself is not empty)
        x = x.rechunk(tuple(tuple(size for size in sizes if size) for sizes in x.chunks))
    finite = _da.isfinite(x)
    return _da.max(_da.where(finite, abs(x), 0)), ~_da.all(finite)


def _aligned(sizes, block_size):
    """Chunk sizes along an axis with each boundary moved up to a multiple of block_size."""
    length = int(np.sum(sizes))
    if length == 0:
        return tuple(sizes)
    ends = sorted({min(length, -(-int(end) // block_size) * block_size) for end in np.cumsum(sizes)})
    return tuple(int(size) for size in np.diff([0, *ends]))


# -- what runs per chunk -----------------------------------------------------------------


def _runs(location, shape):
    """``(index, offset)`` of each run of a chunk that is contiguous in the global C
    order of an array of `shape`: `location` is the chunk's ``[(start, stop), ...]``,
    `index` a tuple of slices of the chunk (keeping its dimensions), `offset` the
    global flat index of the run's first element. A run spans the chunk's extent
    along its last partial axis and the whole of every later axis; the whole chunk is
    one run where it has extent 1 before that axis (chunks along axis 0 only, say)."""
    starts = [start for start, _ in location]
    sizes = [stop - start for start, stop in location]
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    base = builtins.sum(start * stride for start, stride in zip(starts, strides))
    partial = [d for d in range(len(shape)) if sizes[d] != shape[d]]
    last = partial[-1] if partial else 0
    if math.prod(sizes[:last]) <= 1:
        return [((), base)]
    return [
        (tuple(slice(i, i + 1) for i in index), base + builtins.sum(i * s for i, s in zip(index, strides)))
        for index in np.ndindex(*sizes[:last])
    ]



def _round_block(block, *, fmt, mode, overflow, rand_bits, seed, shape, dtype, block_info=None):
    """One chunk rounded as rp.round rounds it within the whole array of `shape`."""
    if seed is None:  # a deterministic mode: the offset changes nothing
        return _rounding.round_chunk(block, fmt, mode, overflow=overflow, rand_bits=rand_bits)
    runs = _runs(block_info[0]["array-location"], shape)
    if len(runs) == 1:
        return _rounding.round_chunk(block, fmt, mode, offset=runs[0][1], overflow=overflow, rng=seed,
                                     rand_bits=rand_bits)
    result = np.empty(block.shape, dtype)
    for index, offset in runs:
        _rounding.round_chunk(block[index], fmt, mode, offset=offset, overflow=overflow, rng=seed,
                              rand_bits=rand_bits, out=result[index])
    return result


def _round_block_of_whole(block, largest, special, *, fmt, mode, overflow, rand_bits, seed, shape, dtype,
                          block_info=None):
    """One chunk rounded onto a format whose scale (one per array) or tensor scale
    (NVFP4's second level) is the whole array's, which follows its largest finite
    magnitude `largest` and whether it holds a NaN or an inf (`special`): each
    contiguous run rounded as rp.round rounds it within the whole
    (`rpfloat.scaling.run_blocks_of_whole`)."""
    runs = _runs(block_info[0]["array-location"], shape) if seed is not None else [((), 0)]
    key = random_key(seed) if seed is not None else 0
    tensor_scale = _scaling.tensor_scale_of(float(largest), fmt) if fmt.tensor_scale else None
    array = _float_input(block)
    plan = plan_for(fmt, mode, overflow, rand_bits, array.dtype)
    result = np.empty(block.shape, dtype)
    for index, offset in runs:
        result[index] = _scaling.run_blocks_of_whole(array[index], plan, key, offset, False, largest, special,
                                                     tensor_scale)[0]
    return result


def _float_input(block):
    """A chunk as rp.round takes it, integers as float64 (so that NaN can join them)."""
    return _scaling.whole_input(_rounding.input_array(block))


def _encode_block(block, *, fmt, mode, overflow, rand_bits, seed, shape, dtype, block_info=None):
    rounded = np.asarray(_round_block(block, fmt=fmt, mode=mode, overflow=overflow, rand_bits=rand_bits, seed=seed,
                                      shape=shape, dtype=dtype, block_info=block_info))
    with np.errstate(invalid="ignore"):  # signalling NaNs are NaNs like any other
        return _codes.encode_values(rounded.astype(np.float64, copy=False), fmt)


def _flip_block(codes, *, bits, mask, threshold, key, shape, block_info=None):
    """One chunk of codes flipped as rp.flip_bits flips them within the whole
    array of `shape`: each contiguous run at its own global offset."""
    runs = _runs(block_info[0]["array-location"], shape)
    if len(runs) == 1:
        return _faults.flipped_codes(codes, bits, mask, threshold, key, runs[0][1])
    result = np.empty_like(codes)
    for index, offset in runs:
        result[index] = _faults.flipped_codes(codes[index], bits, mask, threshold, key, offset)
    return result


def _decode_block(block, *, fmt):
    return _rounding.decode(block, fmt)


def _encode_scaled_chunk(block, largest=None, special=False, *, fmt, mode, rand_bits, seed, location, shape):
    """``(element codes, scale codes, tensor scale)`` of one chunk of whole blocks
    (`largest`, `special`: those of the whole array, where its scale or tensor
    scale is the whole's and it has several chunks)."""
    array = _rounding.input_array(block) if largest is None else _float_input(block)
    plan = plan_for(fmt, mode, None, rand_bits, array.dtype)
    key = random_key(seed) if seed is not None else 0
    runs = _runs(location, shape) if seed is not None else [((), 0)]
    given = _scaling.tensor_scale_of(float(largest), fmt) if largest is not None and fmt.tensor_scale else None
    if len(runs) == 1:
        elements, scales, tensor_scale = _scaling.run_blocks_of_whole(array, plan, key, runs[0][1], True, largest,
                                                                      special, given)
    else:
        elements, scales, tensor_scale = np.empty(array.shape), np.empty(_scaling.scale_shape(array.shape, fmt)), given
        for index, offset in runs:
            run = _scaling.run_blocks_of_whole(array[index], plan, key, offset, True, largest, special, given)
            elements[index] = run[0]
            if fmt.block_size is None:
                scales = run[1]  # (one scale: the whole's, in every run)
            else:
                scales[index] = run[1]
    return (_codes.encode_values(elements, fmt.element), _scaling.scale_codes(scales, fmt, tensor_scale),
            tensor_scale)


def _sum_block(block, *, fmt, axes, mode, order, root, dtype, block_k=None, rand_bits=None, block_info=None):
    """Step 1 of :func:`sum`: the chunk's rp.sum, with the reduced axes kept (length 1)."""
    rng = None
    if root is not None:
        chunk = int(np.ravel_multi_index(block_info[0]["chunk-location"], block_info[0]["num-chunks"]))
        rng = np.random.SeedSequence(root, spawn_key=(0, chunk))
    total = _accumulate.sum(block, fmt, axis=axes, mode=mode, order=order, rng=rng, block_k=block_k,
                            rand_bits=rand_bits)
    return np.expand_dims(np.asarray(total, dtype), sorted(axes))


def _combine_block(partials, *, fmt, axes, mode, root, dtype, rand_bits=None, block_info=None):
    """Step 2 of :func:`sum`: the partial sums along `axes` added pairwise, level by level."""
    kept = [d for d in range(partials.ndim) if d not in axes]
    values = np.transpose(partials, list(axes) + kept)
    values = values.reshape((math.prod(values.shape[:len(axes)]),) + values.shape[len(axes):])
    result_chunk = 0
    if root is not None and kept:
        location = block_info[None]
        result_chunk = int(np.ravel_multi_index(location["chunk-location"], location["num-chunks"]))
    level = 0
    while len(values) > 1:
        pairs = len(values) // 2
        rng = None if root is None else np.random.SeedSequence(root, spawn_key=(1, level, result_chunk))
        sums = _accumulate.sum(np.stack([values[0:2 * pairs:2], values[1:2 * pairs:2]]), fmt, axis=0, mode=mode,
                               rng=rng, rand_bits=rand_bits)
        sums = np.asarray(sums, dtype)
        values = np.concatenate([sums, values[2 * pairs:]]) if len(values) % 2 else sums
        level += 1
    total = np.asarray(values[0], dtype)
    return total[()] if total.ndim == 0 else total  # a NumPy scalar, as rp.sum returns


# -- scaled formats: encode and decode -------------------------------------------------------


def _encode_scaled(x, fmt: ScaledFormat, mode, seed, rand_bits):
    """ScaledCodes of dask arrays: one task per chunk makes its element and scale
    codes (`_encode_scaled_block`), one more per chunk and part takes each out."""
    code_dtype = _codes.code_dtype(fmt.bits)
    scale_dtype = _codes.code_dtype(fmt.scale_bits)
    encode = functools.partial(_encode_scaled_block, fmt=fmt, mode=mode, rand_bits=rand_bits, seed=seed,
                               shape=x.shape)
    summary = ()
    if x.npartitions > 1 and x.size > 0 and (fmt.block_size is None or fmt.tensor_scale):
        summary = _whole_array_summary(x)  # (each chunk then has the whole's scale or tensor scale)
    parts = _da.map_blocks(encode, x, *summary, dtype=object, chunks=tuple((1,) * count for count in x.numblocks),
                           meta=_meta(x.ndim, object), token="rpfloat-encode-scaled")
    first = parts.blocks[(0,) * x.ndim] if x.ndim else parts  # (.blocks of a 0-d array gives a broken key)
    elements = _da.map_blocks(_part, parts, 0, dtype=code_dtype, chunks=x.chunks, meta=_meta(x.ndim, code_dtype),
                              token="rpfloat-element-codes")
    every_axis = tuple(range(x.ndim))
    if _scaling.scale_shape(x.shape, fmt) == ():  # one scale: the whole's, in every chunk
        scales = _da.map_blocks(_part, first, 1, dtype=scale_dtype, drop_axis=every_axis, chunks=(),
                                meta=_meta(0, scale_dtype), token="rpfloat-scale-codes")
    else:
        axis = _scaling.block_layout_of(x.shape, fmt)[4]
        chunks = list(x.chunks)
        chunks[axis] = tuple(-(-size // fmt.block_size) for size in chunks[axis])  # (x's are whole blocks)
        scales = _da.map_blocks(_part, parts, 1, dtype=scale_dtype, chunks=tuple(chunks),
                                meta=_meta(x.ndim, scale_dtype), token="rpfloat-scale-codes")
    tensor_scale = None
    if fmt.tensor_scale:  # the whole's, in every chunk
        tensor_scale = _da.map_blocks(_part, first, 2, dtype=np.float32, drop_axis=every_axis, chunks=(),
                                      meta=_meta(0, np.float32), token="rpfloat-tensor-scale")
    return _scaling.ScaledCodes(elements, scales, tensor_scale)


def _encode_scaled_block(block, *summary, fmt, mode, rand_bits, seed, shape, block_info=None):
    """`_encode_scaled_chunk` of one chunk, in an object array of ones."""
    codes = np.empty((1,) * block.ndim, object)
    codes[(0,) * block.ndim] = _encode_scaled_chunk(block, *summary, fmt=fmt, mode=mode, rand_bits=rand_bits,
                                                    seed=seed, location=block_info[0]["array-location"],
                                                    shape=shape)
    return codes


def _part(codes, index):
    """Part `index` of the codes that `_encode_scaled_block` holds (the tensor scale as a 0-d array)."""
    part = codes[(0,) * codes.ndim][index]
    return np.asarray(part, np.float32) if index == 2 else part


def _decode_scaled(codes, fmt: ScaledFormat):
    if not isinstance(codes, tuple) or len(codes) not in (2, 3):
        raise TypeError("codes of a scaled format are (element codes, scale codes[, tensor scale]), as "
                        "rpfloat.dask.encode returns them")
    elements, scales = (_da.asarray(part) for part in codes[:2])
    tensor_scale = codes[2] if len(codes) == 3 else None
    _scaling.check_tensor_scale_given(fmt, tensor_scale)
    for name, array in (("element codes", elements), ("scale codes", scales)):
        if array.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integers, got dtype {array.dtype}")
    expected = _scaling.scale_shape(elements.shape, fmt)
    if scales.shape != expected:
        raise ValueError(f"scale codes must have shape {expected} for element codes of shape {elements.shape}, "
                         f"got {scales.shape}")
    index = "abcdefghijklmnopqrstuvwxyz"[:elements.ndim]
    if expected == ():  # one scale for the whole array: every chunk of elements takes it
        arguments = [elements, index, scales, ""]
    else:
        axis = _scaling.block_layout_of(elements.shape, fmt)[4]
        chunks = list(elements.chunks)
        chunks[axis] = _aligned(chunks[axis], fmt.block_size)
        elements = elements.rechunk(tuple(chunks))
        chunks[axis] = tuple(-(-size // fmt.block_size) for size in chunks[axis])
        arguments = [elements, index, scales.rechunk(tuple(chunks)), index]
    if tensor_scale is not None:
        arguments += [_da.asarray(tensor_scale), ""]
    return _da.blockwise(functools.partial(_decode_scaled_block, fmt=fmt), index, *arguments,
                         align_arrays=False, dtype=np.float64, meta=_meta(elements.ndim, np.float64),
                         token="rpfloat-decode")


def _decode_scaled_block(elements, scales, tensor_scale=None, *, fmt):
    parts = (elements, scales) if tensor_scale is None else (elements, scales, tensor_scale[()])
    return _rounding.decode(parts, fmt)
