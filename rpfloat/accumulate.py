"""Sums, dot products and matrix products with every partial result rounded.

A low-precision accumulator or a hardware datapath rounds after every operation;
``np.sum`` does not. These functions do, in an order you choose:

* every product ``a_k * b_k`` is rounded onto `fmt` (``fma=False``), or not rounded
  on its own (``fma=True``: the exact product goes into the accumulator with one
  rounding, a fused multiply-add);
* every value that enters the accumulator and every addition is rounded onto
  `acc` (default: `fmt`):

  - ``order="sequential"``: ``acc = round(t_0)``, then ``acc = round(acc + t_k)``
    for ``k = 1, 2, ...`` (``t_k``: the k-th term, i.e. ``x_k`` for :func:`sum`, the
    rounded or exact product for :func:`dot` and :func:`matmul`);
  - ``order="pairwise"``: every term is rounded into the accumulator, then
    neighbours are added level by level, ``(v0 + v1), (v2 + v3), ...``, each sum
    rounded; an odd last value moves up a level as it is;
  - ``order="kahan"``: compensated summation with the compensation ``c`` held in
    `acc` too: ``acc = round(t_0)``, ``c = 0``, then for ``k = 1, 2, ...``
    ``y = round(t_k - c)``, ``s = round(acc + y)``, ``c = round(round(s - acc) - y)``,
    ``acc = s`` (with ``fma=True``, ``t_k - c`` is of the exact product).

* ``block_k=k`` (sequential order only) models a tensor-core datapath instead:
  the exact products of each block of ``k`` consecutive terms are summed exactly
  and the exact block sum is added with one rounding, ``acc = round(acc + sum)``
  (first block: ``acc = round(sum)``); no product is rounded on its own.

Each rounding is of the exact result of its operation (error-free
transformations, see :mod:`rpfloat._kernels.cpu.accumulate`), in the given mode, with
the format's default overflow policy. Inputs are used exactly as given; round
them first (``rp.round`` or ``rp.asarray``) to model data stored in a format.

Stochastic modes draw one random number per rounding from a counter-based stream
(its top `rand_bits` bits, as in ``rp.round``): with an int seed the result is a
pure function of the inputs and the seed. The counters are listed in
:mod:`rpfloat._kernels.cpu.accumulate`.

:func:`dot` and :func:`matmul` return an :class:`~rpfloat.RPArray` of format `acc`
when an operand is one (see :func:`matmul` for its generator).
"""
from __future__ import annotations

import builtins
import functools
import operator
from fractions import Fraction

import numpy as np

from ._kernels.cpu import accumulate as _kernels
from ._kernels.cpu import fast_accumulate as _fast
from ._kernels.core import layout as _layout
from ._params import kernel_params
from .fixedformat import FixedFormat
from .floatformat import FloatFormat
from .modes import parse_mode
from .presets import format as to_format
from .rounding import _prepare_out, input_array, is_dask
from .scaledformat import ScaledFormat
from ._plan import check_rand_bits, overflow_policy, random_key, result_dtype, unused_key

__all__ = ["sum", "dot", "matmul"]

_FLOAT64 = np.dtype(np.float64)
_IEEE_EXP_BITS = {np.dtype(np.float16): 5, np.dtype(np.float32): 8, np.dtype(np.float64): 11}
_ORDERS = ("sequential", "pairwise", "kahan")
_DEEP = _layout.PARAM_NAMES.index("deep")
_AXIS_ERROR = getattr(np, "exceptions", np).AxisError  # numpy.exceptions from NumPy 1.25 on


def sum(x, fmt, *, axis=None, mode=None, order="sequential", rng=None, block_k=None,  # noqa: A001
        rand_bits=None, keepdims=False, out=None):
    """Sum of `x` with every addition rounded onto `fmt`.

    Parameters
    ----------
    x : array_like
        Real numbers (an :class:`~rpfloat.RPArray` gives its values), taken exactly.
        A dask array gives a lazy sum, :func:`rpfloat.dask.sum`: each chunk summed
        in `order`, then the chunks' sums added pairwise (docs/dask.md), so its
        bits depend on the chunks and differ from the sum of the whole.
    fmt : FloatFormat, FixedFormat or str
        The accumulator's format.
    axis : None, int or tuple of ints
        Axes to sum over; None sums everything. Each result adds its values in
        C order over the summed axes taken in the order given (the first listed
        outermost; None: ``x``'s C order).
    mode : str or None
        Rounding mode of every step, as for :func:`rpfloat.round`; None (default):
        the mode of `x` where it is an :class:`~rpfloat.RPArray`, else
        ``"nearest"``.
    order : {"sequential", "pairwise", "kahan"}
        ``"sequential"``: ``acc = round(x_0)``, then ``acc = round(acc + x_k)``.
        ``"pairwise"``: every ``x_k`` is rounded, then neighbours are added level
        by level, each sum rounded. ``"kahan"``: compensated summation, every
        operation rounded (module docstring).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness for the stochastic modes (an int seed reproduces the result);
        None with an RPArray `x` that has a generator: a key drawn from it.
    block_k : None or int
        A positive int: the exact sum of each block of `block_k` consecutive
        values is added to the accumulator with one rounding (sequential order
        only); see :func:`matmul`.
    rand_bits : None or int
        The stochastic modes only: the random bits each rounding draws, as for
        :func:`rpfloat.round` (None: 64, exact probabilities); a hardware
        accumulator with an 8- or 12-bit random source, say.
    keepdims : bool
        Keep the summed axes, with length 1, as ``np.sum(..., keepdims=True)``.
    out : ndarray or RPArray, optional
        Where to write the result, which is then returned: an ndarray of the
        result's shape and dtype, or, where the result is an RPArray, an RPArray
        of its shape and format (which keeps its own mode and generator). It may
        be one of the operands.

    Returns
    -------
    numpy scalar, ndarray or RPArray
        Of dtype ``np.result_type(x.dtype, fmt.carrier)`` (ints and bools count as
        float64); an ndarray with `keepdims`. An empty sum is 0. An RPArray `x`
        gives an RPArray of `fmt` (its carrier's dtype) in the mode of the sum,
        sharing `x`'s generator, as ``x.sum(per_step=True)`` does.

    Examples
    --------
    >>> import numpy as np, rpfloat as rp
    >>> float(rp.sum(np.ones(4096), "float16"))
    2048.0
    >>> float(rp.sum(np.ones(4096), "float16", order="pairwise"))
    4096.0
    >>> float(rp.sum(np.ones(4096), "float16", order="kahan"))
    4096.0
    >>> float(rp.sum(np.ones(4096), "float16", block_k=4))   # 2048 + 4 is a float16
    4096.0
    >>> x = np.array([[1.0, -1.0], [2.0**-9, 2.0**-9]])
    >>> float(rp.sum(x, "bfloat16", axis=(0, 1))) * 2**9      # 1 - 1 + 2**-9 + 2**-9
    2.0
    >>> float(rp.sum(x, "bfloat16", axis=(1, 0))) * 2**9      # 1 + 2**-9 rounds to 1 first
    1.0
    """
    if is_dask(x):  # a lazy sum in the documented chunk order
        if out is not None:
            raise TypeError("out: a lazy sum has nowhere to write; store its result with dask.array.store "
                            "or compute it, or sum a NumPy array")
        from . import dask as dask_adapter

        return dask_adapter.sum(x, fmt, axis=axis, mode=mode, order=order, rng=rng, block_k=block_k,
                                rand_bits=rand_bits, keepdims=keepdims)
    fmt = _element_format(fmt, "fmt")
    mode = _mode_of(mode, x)
    rand_bits = check_rand_bits(rand_bits, mode)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be True or False, got {keepdims!r}")
    pairwise_order(order)
    block_k = block_size(block_k, order)
    array_result, rng = _array_result(x, None, mode, rng)
    values, dtype = exact_operand(x, "x")
    out_dtype = result_dtype(dtype, fmt)
    axes = reduced_axes(axis, values.ndim)
    kept = [d for d in range(values.ndim) if d not in axes]
    shape = tuple(values.shape[d] for d in kept)
    n = int(np.prod([values.shape[d] for d in axes], dtype=np.int64))
    count = int(np.prod(shape, dtype=np.int64))
    if keepdims:
        shape = tuple(1 if d in axes else values.shape[d] for d in range(values.ndim))
    target = _out_target(out, shape, out_dtype, fmt if array_result is not None else None)
    # the kernel reduces a (all ones) against b's columns: one column per result
    columns = np.transpose(values, list(axes) + kept).reshape(1, n, count)
    sums = np.zeros((1, 1, count))
    if n and sums.size:
        # an RPArray result rounds as RPArrays do: exp_bits=None within its carrier's range
        setup = _rounding_setup(_bounded(fmt, out_dtype if array_result is None else fmt.carrier))
        _run_kernel(np.ones((1, 1, n)), np.ascontiguousarray(columns, dtype=np.float64), sums, setup, setup,
                    int(mode), _kernels.SUM, order, True, np.uint64(_key(rng, mode)), rand_bits, block_k)
    if target is not None:  # (values of its dtype or format: no rounding)
        target[...] = sums.reshape(shape)
        return out
    if array_result is not None:
        return array_result(sums.reshape(shape), fmt)
    if keepdims:
        return sums.reshape(shape).astype(out_dtype)
    return _finish(sums.reshape(shape), out_dtype)


def dot(a, b, fmt, *, acc=None, fma=False, mode=None, order="sequential", rng=None, block_k=None,
        rand_bits=None, out=None):
    """Dot product of vectors (or matrix product of matrices) with rounded steps.

    Each product ``a_k * b_k`` is rounded onto `fmt` (unless ``fma=True``), each
    addition onto `acc` (default `fmt`), in `order` (or in blocks of `block_k`);
    see :func:`matmul`, which this is for inputs of at most two dimensions. An
    RPArray operand gives an RPArray result, as there.

    Examples
    --------
    >>> import rpfloat as rp
    >>> float(rp.dot([1.0, 2.0 ** -9], [1.0, 1.0], "bfloat16"))
    1.0
    >>> float(rp.dot([1.0, 2.0 ** -9], [1.0, 1.0], "bfloat16", acc="float32"))
    1.001953125
    >>> float(rp.dot([1.0, 2.0 ** -8, 2.0 ** -9], [1.0, 1.0, 1.0], "bfloat16"))
    1.0
    >>> float(rp.dot([1.0, 2.0 ** -8, 2.0 ** -9], [1.0, 1.0, 1.0], "bfloat16", block_k=4))
    1.0078125
    """
    a_values, _ = exact_operand(a, "a")
    b_values, _ = exact_operand(b, "b")
    if not (1 <= a_values.ndim <= 2 and 1 <= b_values.ndim <= 2):
        hint = "round a * b for scalars" if min(a_values.ndim, b_values.ndim) == 0 else \
            "use rp.matmul for stacks of matrices"
        raise ValueError(f"rp.dot takes vectors and matrices, got ndim {a_values.ndim} and {b_values.ndim}; {hint}")
    if a_values.shape[-1] != b_values.shape[0]:
        raise ValueError(f"rp.dot: the inner dimensions differ: a has {a_values.shape}, b has {b_values.shape} "
                         f"({a_values.shape[-1]} != {b_values.shape[0]})")
    return matmul(a, b, fmt, acc=acc, fma=fma, mode=mode, order=order, rng=rng, block_k=block_k,
                  rand_bits=rand_bits, out=out)


def matmul(a, b, fmt, *, acc=None, fma=False, mode=None, order="sequential", rng=None, block_k=None,
           rand_bits=None, out=None):
    """Matrix product (``np.matmul`` shapes) with every product and addition rounded.

    Parameters
    ----------
    a, b : array_like
        Real arrays of at least one dimension; stacks broadcast as in
        ``np.matmul``. Taken exactly. Not dask arrays (a TypeError: compute
        them first).
    fmt : FloatFormat, FixedFormat or str
        Format every product ``a[..., i, k] * b[..., k, j]`` is rounded onto.
    acc : FloatFormat, FixedFormat, str or None
        Format of the accumulator; None uses `fmt`.
    fma : bool
        True: products are not rounded on their own; sequentially (and in
        Kahan's order, as its terms) each exact product is added to the
        accumulator with one rounding (fused multiply-add); pairwise each exact
        product is rounded into the accumulator. No effect with `block_k`.
    mode : str or None
        Rounding mode of every step; None (default): the mode of the first
        :class:`~rpfloat.RPArray` operand, else ``"nearest"``.
    order : {"sequential", "pairwise", "kahan"}
        Order of the additions along the inner dimension (module docstring).
        ``"kahan"``: compensated summation, every operation rounded onto `acc`.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness for the stochastic modes.
    block_k : None or int
        A positive int models a tensor-core style datapath (sequential order
        only): the exact products of each block of `block_k` consecutive terms
        are summed exactly, and that exact sum is added to the accumulator with
        one rounding onto `acc`, ``acc = round(acc + block_sum)`` (the first
        block: ``acc = round(block_sum)``). Products are never rounded on their
        own, so `fma` makes no difference. ``block_k=1`` is ``fma=True``
        sequentially; ``block_k >= n`` rounds the exact dot product once.
    rand_bits : None or int
        The stochastic modes only: the random bits each rounding draws, as for
        :func:`rpfloat.round` (None: 64).
    out : ndarray or RPArray, optional
        Where to write the result, which is then returned: an ndarray of the
        result's shape and dtype (0-d for two vectors), or, where the result is an
        RPArray, an RPArray of its shape and of format `acc` (which keeps its own
        mode and generator). It may be one of the operands.

    Returns
    -------
    ndarray, numpy scalar or RPArray
        Of dtype ``np.result_type(a.dtype, b.dtype, acc.carrier)``. When `a` or
        `b` is an :class:`~rpfloat.RPArray`: an RPArray of format `acc` and mode
        `mode` (0-d for two vectors), whose steps round as RPArrays do (an
        ``exp_bits=None`` format within its carrier's range). Its generator (stochastic modes) is `rng`
        when that is a Generator, else that of the first RPArray operand that has
        one, else ``np.random.default_rng(rng)``; with ``rng=None`` and an operand
        generator, the product also draws its random key from that generator, so
        that a program of RPArrays is reproducible from their seeds.

    Examples
    --------
    >>> import numpy as np, rpfloat as rp
    >>> a = np.full((2, 3), 1 / 3)
    >>> rp.matmul(a, a.T, "bfloat16", acc="float32")
    array([[0.33398438, 0.33398438],
           [0.33398438, 0.33398438]])
    >>> rp.matmul(a, a.T, "bfloat16", block_k=2)             # no product rounded
    array([[0.33398438, 0.33398438],
           [0.33398438, 0.33398438]])
    >>> b = rp.asarray([[1.0, 2.0], [3.0, 4.0]], "bfloat16")
    >>> rp.matmul(b, b, "bfloat16", acc="float32")
    RPArray([[ 7., 10.],
             [15., 22.]], fmt=float32, mode='nearest')
    """
    fmt = _element_format(fmt, "fmt")
    acc = fmt if acc is None else _element_format(acc, "acc")
    mode = _mode_of(mode, a, b)
    rand_bits = check_rand_bits(rand_bits, mode)
    pairwise_order(order)
    if not isinstance(fma, (bool, np.bool_)):
        raise TypeError(f"fma must be True or False, got {fma!r}")
    block_k = block_size(block_k, order)
    array_result, rng = _array_result(a, b, mode, rng)
    a_values, a_dtype = exact_operand(a, "a")
    b_values, b_dtype = exact_operand(b, "b")
    if a_values.ndim == 0 or b_values.ndim == 0:
        raise ValueError("rp.matmul: a and b must have at least one dimension; round a * b for scalars")
    a_matrix = a_values[None, :] if a_values.ndim == 1 else a_values
    b_matrix = b_values[:, None] if b_values.ndim == 1 else b_values
    rows, inner = a_matrix.shape[-2:]
    if b_matrix.shape[-2] != inner:
        raise ValueError(
            f"rp.matmul: the inner dimensions differ: a has {a_values.shape}, b has "
            f"{b_values.shape} ({inner} != {b_matrix.shape[-2]})"
        )
    cols = b_matrix.shape[-1]
    try:
        batch = np.broadcast_shapes(a_matrix.shape[:-2], b_matrix.shape[:-2])
    except ValueError:
        raise ValueError(f"rp.matmul: the stacks of a {a_values.shape} and b {b_values.shape} do not broadcast "
                         f"({a_matrix.shape[:-2]} against {b_matrix.shape[:-2]})") from None
    groups = int(np.prod(batch, dtype=np.int64))
    a_rows = np.broadcast_to(a_matrix, batch + (rows, inner)).reshape(groups, rows, inner)
    b_rows = np.broadcast_to(b_matrix, batch + (inner, cols)).reshape(groups, inner, cols)
    out_dtype = result_dtype(np.result_type(a_dtype, b_dtype), acc)
    shape = batch + ((rows,) if a_values.ndim > 1 else ()) + ((cols,) if b_values.ndim > 1 else ())
    target = _out_target(out, shape, out_dtype, acc if array_result is not None else None)
    products = np.zeros((groups, rows, cols))
    if inner and products.size:
        a_rows = np.ascontiguousarray(a_rows, dtype=np.float64)
        b_rows = np.ascontiguousarray(b_rows, dtype=np.float64)
        # an RPArray result rounds as RPArrays do: exp_bits=None within each carrier's range
        bounds = (out_dtype, out_dtype) if array_result is None else (fmt.carrier, acc.carrier)
        _run_kernel(a_rows, b_rows, products, _rounding_setup(_bounded(fmt, bounds[0])),
                    _rounding_setup(_bounded(acc, bounds[1])), int(mode), _kernels.FUSED if fma else _kernels.PRODUCT,
                    order, _products_are_exact(a_rows, b_rows), np.uint64(_key(rng, mode)), rand_bits, block_k)
    if target is not None:  # (values of its dtype or format: no rounding)
        target[...] = products.reshape(shape)
        return out
    if array_result is not None:
        return array_result(products.reshape(shape), acc)
    return _finish(products.reshape(shape), out_dtype)


def _run_kernel(a_rows, b_rows, out, product_setup, acc_setup, mode, kind, order, exact_products, key, rand_bits,
                block_k):
    """Every kernel call of this module: ``out[g, i, j]``, the rounded reduction over
    ``k`` of ``a_rows[g, i, k] * b_rows[g, k, j]`` (SUM: `a_rows` all ones, then
    `exact_products` is True). `product_setup`, `acc_setup`: :func:`rounding_setup`
    of the bounded product and accumulator formats; `mode`: an int; `kind`: SUM,
    PRODUCT or FUSED; `order`: a checked order name; `key`: a uint64; `block_k`:
    None or a checked positive int (sequential order)."""
    if (block_k is None and kind == _kernels.FUSED and order == "sequential" and not exact_products
            and acc_setup[0][_layout.P_OVERFLOW] == _layout.OVERFLOW_WRAP):
        # acc + a*b is three float64 terms whose low bits decide a wrapped code: the block
        # kernel sums them exactly (block_k=1 is this order, same bits and random numbers)
        block_k = 1
    if block_k is not None:
        _kernels.accumulate_blocks(a_rows, b_rows, out, *acc_setup, mode, block_k, exact_products, key, rand_bits)
    elif order == "kahan":
        _kernels.accumulate_kahan(a_rows, b_rows, out, *product_setup, *acc_setup, mode, kind, exact_products, key,
                                  rand_bits)
    elif _fast.serves(product_setup[0], acc_setup[0], kind, order == "pairwise", exact_products, product_setup[2],
                      acc_setup[2]):
        # the common case, vectorised over outputs (same bits): exact products
        _fast.run(a_rows, b_rows, out, product_setup[0], acc_setup[0], acc_setup[1], mode, kind, key, rand_bits,
                  pairwise=order == "pairwise")
    else:
        _kernels.accumulate(a_rows, b_rows, out, *product_setup, *acc_setup, mode, kind, order == "pairwise",
                            exact_products, key, rand_bits)


def _out_target(out, shape, dtype, array_format):
    """The ndarray to write a result of `shape` and `dtype` into for `out` (None
    where `out` is None); TypeError or ValueError where `out` cannot hold it (as
    for ``rp.round``), or, where `array_format` is not None (RPArray operands),
    where it is no RPArray of that format."""
    if out is None:
        return None
    if array_format is None:
        return _prepare_out(out, shape, dtype, "the result's shape")
    from .array import RPArray  # (array imports this module)

    if not isinstance(out, RPArray):
        raise TypeError(f"out must be an RPArray (of format {_label(array_format)}) where an operand is one, "
                        f"got {type(out).__name__}")
    if out.fmt != array_format:
        raise ValueError(f"out must be an RPArray of the result's format {_label(array_format)}, got one of "
                         f"{_label(out.fmt)}")
    if out.shape != shape:
        raise ValueError(f"out must have the result's shape {shape}, got {out.shape}")
    if not out._data.flags.writeable:
        raise ValueError("out must be writeable")
    return out._data


def _label(fmt) -> str:
    return fmt.name or repr(fmt)


def _mode_of(mode, *operands):
    """`mode` parsed; None: the mode of the first RPArray among `operands`, else nearest."""
    if mode is None:
        from .array import RPArray  # rpfloat.array imports this module

        mode = next((x.mode for x in operands if isinstance(x, RPArray)), "nearest")
    return parse_mode(mode)


def _array_result(a, b, mode, rng):
    """``(make, rng)``: for RPArray operands, ``make(values, acc)`` builds the
    RPArray result, and `rng` is what the kernel's key comes from; ``(None, rng)``
    for other operands."""
    from .array import RPArray, _per_step_result, _Target, stochastic_generator  # (array imports this module)

    operands = [x for x in (a, b) if isinstance(x, RPArray)]
    if not operands:
        return None, rng
    generator = None
    if mode.is_stochastic:
        if isinstance(rng, np.random.Generator):
            generator = rng
        else:
            generator = next((x.rng for x in operands if x.rng is not None), None)
            if generator is None:
                generator = stochastic_generator(rng)  # (rp.round's checks of rng)
            elif rng is None:
                rng = generator  # the key comes from the operand's generator too

    def make(values, acc):  # (values of acc already: no rounding, no draw)
        return _per_step_result(values, acc, _Target(acc, mode, generator))

    return make, rng


# -- shared with rpfloat.array ---------------------------------------------------------


def bounded_format(fmt, dtype):
    """`fmt`, with ``exp_bits=None`` resolved to the IEEE-style format of its
    precision and `dtype`'s exponent range."""
    if isinstance(fmt, FloatFormat) and fmt.exp_bits is None:
        dtype = np.dtype(dtype)
        man_bits = builtins.min(fmt.man_bits, int(np.finfo(dtype).nmant))
        return FloatFormat(_IEEE_EXP_BITS[dtype], man_bits, overflow=fmt.overflow, name=fmt.name)
    return fmt


def _element_format(fmt, argument: str):
    """`fmt` as a format object; TypeError for a scaled format, whose scales follow
    whole blocks and so cannot round one step of an accumulation."""
    fmt = to_format(fmt)
    if isinstance(fmt, ScaledFormat):
        raise TypeError(f"{argument} must be an element format (FloatFormat or FixedFormat): a scaled format's "
                        "scale follows a whole block, not one step of a sum; round the result with rp.round")
    return fmt


@functools.lru_cache(maxsize=256)
def rounding_setup(fmt):
    """``(params, midpoints, general)`` for the exact-rounding kernels (float64
    compute) onto the bounded format `fmt`, with its default overflow policy.

    `general`: whether the kernel's rare paths are needed (formats reaching below
    float64's normal range, fixed-point wrap), as the kernel table (``rpfloat._kernels.cpu.table``) decides.
    """
    policy = overflow_policy(fmt, None)
    params = kernel_params(fmt, _FLOAT64, policy)
    general = bool(params[_DEEP]) or policy == "wrap"
    if policy == "wrap":
        return params, (-1.0, -1.0), general  # wrapping continues the grid: no overflow midpoint
    if isinstance(fmt, FixedFormat):
        half = Fraction(2) ** -fmt.frac_bits / 2
        tops = (Fraction(fmt.max), -Fraction(fmt.min))
    else:
        half = Fraction(2) ** (fmt.emax - fmt.man_bits - 1)
        tops = (Fraction(fmt.max), Fraction(fmt.max))
    return params, tuple(_float_or_minus_one(top + half) for top in tops), general


_bounded = bounded_format
_rounding_setup = rounding_setup


def _float_or_minus_one(value: Fraction) -> float:
    """`value` as a float when a float64 holds it exactly, else -1.0."""
    try:
        as_float = float(value)
    except OverflowError:
        return -1.0
    return as_float if Fraction(as_float) == value else -1.0


_LOW_27_BITS = np.int64((1 << 27) - 1)


def _products_are_exact(a, b) -> bool:
    """Whether float64 holds every product ``a[..] * b[..]`` exactly: every finite
    value has at most 26 significant bits (the low 27 bits of its significand
    field are zero), and no product overflows or leaves the normal range."""
    magnitudes = []
    for values in (a, b):
        finite = np.isfinite(values)
        if ((values.view(np.int64) & _LOW_27_BITS) != 0)[finite].any():
            return False
        magnitudes.append(np.abs(values[finite & (values != 0)]))
    if any(m.size == 0 for m in magnitudes):
        return True
    smallest = float(magnitudes[0].min()) * float(magnitudes[1].min())
    largest = float(magnitudes[0].max()) * float(magnitudes[1].max())
    return smallest >= 2.0**-1022 and largest < 2.0**1023


def _key(rng, mode) -> int:
    return random_key(rng) if mode.is_stochastic else unused_key(rng)


def pairwise_order(order) -> bool:
    """Whether `order` is "pairwise"; ValueError for an unknown order."""
    if not isinstance(order, str) or order not in _ORDERS:
        raise ValueError(f"order must be one of {_ORDERS}, got {order!r}")
    return order == "pairwise"


def block_size(block_k, order):
    """`block_k` checked: None, or a positive int with sequential `order`."""
    if block_k is None:
        return None
    if isinstance(block_k, (bool, np.bool_)):
        raise TypeError(f"block_k must be None or a positive int, got {block_k!r}")
    try:
        block_k = operator.index(block_k)
    except TypeError:
        raise TypeError(f"block_k must be None or a positive int, got {block_k!r}") from None
    if block_k < 1:
        raise ValueError(f"block_k must be a positive int, got {block_k}")
    if order != "sequential":
        raise ValueError(f"block_k sums blocks in sequential order; it does not combine with order={order!r}")
    return builtins.min(block_k, 2**62)


def exact_operand(x, argument):
    """``(float64 values, dtype for the result)`` of an input; TypeError for
    non-real input (and what ``rp.round`` refuses: masked arrays, long
    doubles), ValueError for integers float64 does not hold exactly. ml_dtypes
    arrays are float32 data, as for ``rp.round``. A dask array (which would be
    computed whole, in memory) is a TypeError: only rp.sum takes it lazily."""
    if is_dask(x):
        raise TypeError(f"{argument} is a dask array, which rp.dot and rp.matmul do not take lazily (only rp.sum "
                        f"does): compute it ({argument}.compute()) to multiply in memory")
    array = input_array(x, argument)
    if array.dtype.kind == "f" and isinstance(x, (list, tuple)) and _holds_inexact_integers(x):
        # ints beside floats in a list: NumPy made them floats before any check could see them
        raise ValueError(f"{argument} holds integers that float64 cannot hold exactly (beyond 2**53); "
                         "the computation takes its inputs exactly: pass them as floats to round them first")
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{argument} must hold real numbers, got dtype {array.dtype}"
            + ("; round the real and imaginary parts separately" if array.dtype.kind == "c" else "")
        )
    dtype = array.dtype if array.dtype.kind == "f" else _FLOAT64
    with np.errstate(invalid="ignore"):
        values = array.astype(np.float64, copy=False)
    if array.dtype.kind in "iu" and array.dtype.itemsize >= 8:  # 64-bit integers: exact up to 2**53
        beyond = (array > 2**53) | (array < -(2**53))
        if beyond.any() and any(int(v) != int(w) for v, w in zip(array[beyond].tolist(), values[beyond].tolist())):
            raise ValueError(f"{argument} holds integers that float64 cannot hold exactly (beyond 2**53); "
                             "the computation takes its inputs exactly: pass them as floats to round them first")
    return values, dtype


def _holds_inexact_integers(items) -> bool:
    """Whether the (nested) list or tuple `items` holds an integer (Python or
    NumPy, bools aside) that float64 does not hold exactly."""
    for item in np.array(items, dtype=object).reshape(-1):
        if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)) \
                and not -2**53 <= item <= 2**53 and int(float(item)) != int(item):
            return True
    return False


def reduced_axes(axis, ndim) -> list:
    if axis is None:
        return list(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    normalized = []
    for a in axes:
        try:
            if isinstance(a, (bool, np.bool_)):  # as NumPy: True is no axis
                raise TypeError
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"axis must be None, an int or a tuple of ints, got {axis!r}") from None
        if not -ndim <= a < ndim:
            raise _AXIS_ERROR(a, ndim)
        a %= ndim
        if a in normalized:
            raise ValueError(f"axis {axis!r} repeats an axis")
        normalized.append(a)
    return normalized


def _finish(values, dtype):
    result = values.astype(dtype)
    return result[()] if result.ndim == 0 else result
