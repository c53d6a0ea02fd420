"""RPArray: NumPy arrays whose values stay in a format.

An :class:`RPArray` holds values of a format (``FloatFormat`` or ``FixedFormat``) in a
carrier ndarray (``fmt.carrier``) and rounds the result of every operation back
onto the format with its mode:

* **ufuncs** (NEP 13, every NumPy ufunc and method: ``__call__``, ``reduce``,
  ``accumulate``, ``reduceat``, ``outer``, ``at``): the operands are taken as float64
  (exactly: every carrier value is a float64), the ufunc runs in float64, and each
  floating result is rounded once onto the format. Boolean and integer results
  (comparisons, ``isnan``, the exponent of ``frexp``) are plain ndarrays. Operators,
  in-place operators (``a += 1`` keeps the object) and ``out=`` go through the same
  path; an RPArray given as ``out`` receives the result rounded onto *its* format.
  ``reduce`` and ``accumulate`` (``np.add.reduce``, ``np.cumsum``) round their final
  results once; ``a.sum(per_step=True)``, ``a.dot(b, per_step=True)`` and
  ``a.matmul(b)`` (``rp.sum`` / ``rp.dot`` / ``rp.matmul`` with the array's format,
  mode and generator) round every product and addition instead.
* **array functions** (NEP 18): the structural ones (``reshape``, ``transpose``,
  ``concatenate``, ``stack``, ``where``, ``take``, ``sort``, ...) keep the format;
  ``np.sum``, ``np.mean``, ``np.dot``, ``np.matmul`` (and ``@``) and the other
  reductions compute in float64 and round their final result once (the methods
  above with ``per_step=True`` round every step). NumPy functions
  without an RPArray implementation see the carrier values (``np.asarray``) and
  return what NumPy returns for them (``np.allclose``, ``np.argmax``, ...).
* **formats combine** into the one whose value set contains the other's (decided
  exactly from the parameters: precision and spacing in every binade, range, sign,
  inf); ``TypeError`` when neither does. Equal value sets (e.g. formats differing
  only in overflow policy or name) take the first operand's. The mode and generator
  come from the first RPArray operand of the winning format. Plain ndarrays, NumPy
  scalars and Python numbers mix in as float64 values (exact up to ``2**53`` for
  integers), taken as ``rp.round`` takes its input: ml_dtypes data as float32;
  masked arrays and ``np.longdouble`` raise its TypeError.
* **indexing** returns RPArrays -- views for basic slicing, as in NumPy -- and an
  integer index gives a 0-d RPArray rather than a NumPy scalar, so that arithmetic
  on an element stays in the format (``float(a[0])``, ``a[0].item()`` give numbers).
  Assignment rounds the assigned values onto the array's format with its mode (in
  a stochastic mode of an element format, once for every element written:
  ``a[:] = 0.1`` draws for each),
  and so do the NumPy functions that write into an array (``np.copyto``, ``np.put``,
  ``np.putmask``, ``np.place``, ``np.put_along_axis``, ``np.fill_diagonal``).
  ``np.asarray(a)`` is the carrier itself: writing through it is not rounded.
* **stochastic modes** draw fresh randomness for every operation from the array's
  ``numpy.random.Generator`` (``rng`` itself, or ``np.random.default_rng(rng)`` of a
  seed: what ``rp.round`` takes); results share it, so a program is reproducible
  from one seed.

Correct rounding
----------------
Computing in float64 and rounding once is a double rounding. For round-to-nearest
it is harmless for ``+ - * /`` and ``sqrt`` of values of a format of precision p
when ``53 >= 2p + 2`` (Figueroa 1995; ``53 >= 2p`` suffices for ``+ - * /``) --
formats up to p = 25, float32 included -- provided nothing leaves float64's normal
range. It is never harmless for the directed modes (``up`` of ``1 + 2**-60`` onto
bfloat16 is ``1 + 2**-7``, not ``fl(1 + 2**-60) = 1``), for ``odd`` or the
stochastic modes, for nearest in wider formats (``sqrt(2**26 - 1)`` at p = 26),
nor for operands that are not values of the format (``1 + (2**-8 + 2**-60)`` onto
bfloat16).

So ``add``, ``subtract``, ``multiply``, ``divide``, ``sqrt``, ``square`` and
``reciprocal`` (called without keywords other than ``out``, or with NumPy's default
values: with ``where=mask``, ``dtype=...`` and the like they round the float64
result) also compute the exact error of the float64 result with error-free
transformations (TwoSum; TwoProduct by Veltkamp splitting, as NumPy has no fma;
the remainder ``a - q b`` for division and ``a - s**2`` for sqrt by a fused
multiply-add in a numba kernel), and every
element with a nonzero error is rounded from the exact value
(``rpfloat._kernels.cpu.accumulate.round_exact``). Only the nearest
modes on formats with p <= 25, with every operand an RPArray of a contained
format, skip that step. The results are correctly rounded in every mode, with
exact stochastic probabilities, for every element format (a scaled format's
block kernels take no error term: there the float64 result is rounded), as
long as dividends and radicands stay above ``2**-969``, operands stay below
``2**995`` and results above ``2**-969`` and below float64's overflow in magnitude
(only formats whose range reaches past ``2**511``, or whose smallest values lie
below ``2**-484``, get past that; there the float64 result is rounded, so a
product beyond float64's range is inf before its rounding, and the directed modes
give inf where the exact product would give the format's max, or 0 where it would
give the format's smallest subnormal). For division
and sqrt the error's magnitude is itself rounded, which can move a stochastic
probability by a relative ``2**-53``, and a quotient onto a fixed-point format
that wraps, past about ``2**98`` of its steps, wraps from the float64 pair
rather than the exact quotient. Other ufuncs (``exp``, ``power``, ...) round
their float64 result, which is as accurate as NumPy's.

The seven take a faster route with the same bits where the operands' formats
allow (see "fast paths" below: float32 arithmetic where it is exact or, for
nearest, harmless; float32 TwoSum for sums; the exact rounding only for the
elements that need it). NaN results stay NaN, though which operand's NaN (its
sign) ``NaN + NaN`` keeps may differ from float64 arithmetic.
``FAST_PATHS = False`` turns that route off.

Examples
--------
>>> import rpfloat as rp
>>> a = rp.asarray([1.0, 2.0, 3.0], "bfloat16")
>>> a / 3
RPArray([0.33398438, 0.66796875, 1.        ], fmt=bfloat16, mode='nearest')
>>> b = rp.asarray([1.0, 1.0, 1.0], "bfloat16", mode="up")
>>> (b + 2.0 ** -60)[0].item()
1.0078125
"""
from __future__ import annotations

import copy
import functools
import inspect
import math
import mmap
import numbers
from typing import NamedTuple

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ._kernels.cpu.accumulate import divide_exactly, float32_sums, round_pairs_at, sqrt_exactly, stochastic_pairs
from .accumulate import bounded_format, rounding_setup
from .accumulate import matmul as _rounded_matmul
from .accumulate import sum as _rounded_sum
from .fixedformat import FixedFormat
from .floatformat import as_bool
from .modes import Mode, parse_mode
from .presets import format as to_format
from .scaledformat import ScaledFormat
from ._plan import random_key, unused_key
from .rounding import input_array, is_ml_dtype, round as _round_onto

__all__ = ["RPArray", "asarray", "format_contains"]

_FLOAT64 = np.dtype(np.float64)
_VELTKAMP = float.fromhex("0x1.0000002p+27")  # 2**27 + 1
_NEAREST_MODES = (Mode.NEAREST, Mode.NEAREST_AWAY)
# Operand types a ufunc may mix with RPArrays; others get NotImplemented (NEP 13).
_HANDLED_TYPES = (np.ndarray, numbers.Real, np.bool_, list, tuple)


class _Target(NamedTuple):
    """Where results go: a format, a mode and the generator for stochastic modes."""

    fmt: object
    mode: Mode
    rng: np.random.Generator | None


class RPArray(NDArrayOperatorsMixin):
    """An array of values of a format, held in a carrier ndarray.

    Create one with :func:`rpfloat.asarray` (or ``RPArray(x, fmt, mode, rng=...)``,
    which always copies). See the module docstring for the semantics of ufuncs,
    array functions, indexing and format combination.

    Every ufunc (operators included), ``np.sum``, ``np.dot``, ``@`` and the other
    reductions round their result **once**; :meth:`sum` and :meth:`dot` with
    ``per_step=True``, and :meth:`matmul`, round **every** product and addition
    (``rp.sum`` / ``rp.dot`` / ``rp.matmul``).

    Attributes
    ----------
    fmt : FloatFormat or FixedFormat
        The format of the values.
    mode : str
        The rounding mode of every operation (canonical name, e.g. ``"nearest"``).
    rng : numpy.random.Generator or None
        The generator of a stochastic array; None for the deterministic modes.
    shape, ndim, size, dtype, T
        As for ndarrays; ``dtype`` is the carrier's.

    Examples
    --------
    >>> import rpfloat as rp
    >>> a = rp.asarray([1.0, 2.5], "e4m3")
    >>> a * 1.1
    RPArray([1.125, 2.75 ], fmt=float8_e4m3fn, mode='nearest')
    >>> a.dtype
    dtype('float16')
    """

    def __init__(self, x, fmt, mode="nearest", *, rng=None):
        fmt = to_format(fmt)
        mode = parse_mode(mode)
        generator = None
        if mode.is_stochastic:
            generator = stochastic_generator(rng)
        elif rng is not None:
            unused_key(rng)  # refuses what rp.round refuses
        self._target = _Target(fmt, mode, generator)
        self._data = _round_values(_float64_values(x), self._target)

    @classmethod
    def _wrap(cls, data: np.ndarray, target: _Target) -> RPArray:
        """An RPArray around carrier `data` that already holds values of the format."""
        array = object.__new__(cls)
        array._target = target
        array._data = data
        return array

    # -- attributes -------------------------------------------------------------------

    @property
    def fmt(self):
        """The format of the values."""
        return self._target.fmt

    @property
    def mode(self) -> str:
        """The rounding mode (canonical name)."""
        return self._target.mode.name.lower()

    @property
    def rng(self):
        """The generator of a stochastic array (None for deterministic modes)."""
        return self._target.rng

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def dtype(self) -> np.dtype:
        """The carrier dtype (``fmt.carrier``)."""
        return self._data.dtype

    @property
    def T(self) -> RPArray:
        return self._wrap(self._data.T, self._target)

    @property
    def mT(self) -> RPArray:
        """The transpose of the last two axes (a stack of matrices), a view."""
        return self._wrap(np.swapaxes(self._data, -1, -2), self._target)

    @property
    def real(self) -> RPArray:
        """The array itself (its values are real), a view."""
        return self._wrap(self._data, self._target)

    def conj(self) -> RPArray:
        """A copy (the values are real)."""
        return self.copy()

    conjugate = conj

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    # -- conversions --------------------------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        """The carrier values (``np.asarray(a)``); honours NumPy 2's ``copy``."""
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            if copy is False:
                raise ValueError(
                    f"cannot give the values of an RPArray as {np.dtype(dtype)} without a copy; "
                    "its carrier dtype is " + str(self._data.dtype)
                )
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def astype(self, dtype, copy=True) -> np.ndarray:
        """The values as a plain ndarray of `dtype` (like ``ndarray.astype``)."""
        return self._data.astype(dtype, copy=copy)

    def copy(self) -> RPArray:
        return self._wrap(self._data.copy(), self._target)

    __copy__ = copy

    def __deepcopy__(self, memo):
        """A copy with a copy of the generator (as pickling gives): it replays the
        original's stream from here on, without drawing from it. Arrays that share
        a generator share its copy within one ``copy.deepcopy`` call."""
        target = self._target._replace(rng=copy.deepcopy(self._target.rng, memo))
        return self._wrap(self._data.copy(), target)

    def reshape(self, *shape, order="C") -> RPArray:
        return self._wrap(self._data.reshape(*shape, order=order), self._target)

    def transpose(self, *axes) -> RPArray:
        return self._wrap(self._data.transpose(*axes), self._target)

    def ravel(self, order="C") -> RPArray:
        return self._wrap(self._data.ravel(order=order), self._target)

    def flatten(self, order="C") -> RPArray:
        return self._wrap(self._data.flatten(order=order), self._target)

    def squeeze(self, axis=None) -> RPArray:
        return self._wrap(self._data.squeeze(axis=axis), self._target)

    def tolist(self):
        return self._data.tolist()

    def item(self, *args):
        return self._data.item(*args)

    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __round__(self, ndigits=None):
        """``round(a[i])`` of one element, as for NumPy's scalars: an int, or with
        `ndigits` ``np.round`` (an RPArray of the format)."""
        if self.ndim != 0:
            raise TypeError(f"round() takes one element of an RPArray, not an array of shape {self.shape}; "
                            "use np.round(a, decimals)")
        return round(self._data[()]) if ndigits is None else np.round(self, ndigits)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __format__(self, spec) -> str:
        if self.ndim == 0:
            return format(self._data[()], spec)
        return format(str(self), spec)

    def __repr__(self) -> str:
        name = self.fmt.name or repr(self.fmt)
        prefix = "RPArray("
        body = np.array2string(self._data, separator=", ", prefix=prefix)
        return f"{prefix}{body}, fmt={name}, mode={self.mode!r})"

    def __str__(self) -> str:
        return str(self._data)

    # -- reductions as methods (they dispatch to the array functions below) ---------------

    def sum(self, axis=None, *, per_step=False, acc=None, order="sequential", block_k=None, **kwargs):
        """Sum of the values: ``np.sum`` (rounded once), or with every step rounded.

        Parameters
        ----------
        axis : None, int or tuple of ints
            Axes to sum over; None sums everything.
        per_step : bool, default False
            False: ``np.sum(a, axis, **kwargs)``, the float64 sum rounded once onto
            the format. True: :func:`rpfloat.sum` with the array's mode and
            generator: every value entering the accumulator and every addition is
            rounded onto `acc`, in `order`.
        acc : FloatFormat, FixedFormat, str or None
            ``per_step=True`` only: the accumulator's format (default: the array's).
        order : {"sequential", "pairwise", "kahan"}
            ``per_step=True`` only: the order of the additions (docs/arrays.md).
        block_k : int or None
            ``per_step=True`` only: exact block sums of `block_k` terms, one rounding
            each (a tensor-core datapath).
        **kwargs
            ``np.sum``'s options (``keepdims``, ``dtype``, ``out``, ...); with
            ``per_step=True`` only ``keepdims``.

        Returns
        -------
        RPArray
            Of the array's format (``per_step=False``) or of `acc`; 0-d for a sum
            over every axis (without ``keepdims``).

        Examples
        --------
        >>> import numpy as np, rpfloat as rp
        >>> a = rp.asarray(np.ones(4096), "float16")
        >>> float(a.sum())                            # one rounding of the exact 4096
        4096.0
        >>> float(a.sum(per_step=True))               # 2048 + 1 rounds to 2048
        2048.0
        >>> a.sum(per_step=True, acc="float32").fmt.name
        'float32'
        """
        if not as_bool(per_step, "per_step"):
            _no_step_options(acc=acc, order=order, block_k=block_k)
            return np.sum(self, axis=axis, **kwargs)
        keepdims = kwargs.pop("keepdims", False)
        if kwargs:
            raise TypeError(f"sum(per_step=True) takes no NumPy options but keepdims, got {sorted(kwargs)}")
        target = self._target
        if acc is None and isinstance(target.fmt, ScaledFormat):
            raise TypeError(f"sum(per_step=True) rounds every step onto an element format, and this array's "
                            f"{_scaled_label(target.fmt)} is scaled: pass acc= an element format, or use "
                            "a.sum(), which rounds the sum once")
        fmt = target.fmt if acc is None else to_format(acc)
        # (exp_bits=None as RPArrays round it: within its carrier's range)
        result = _rounded_sum(self._data, _as_bounded(fmt), axis=axis, mode=target.mode, order=order,
                              rng=target.rng, block_k=block_k, keepdims=keepdims)
        return _per_step_result(result, fmt, target)

    def mean(self, axis=None, **kwargs):
        return np.mean(self, axis=axis, **kwargs)

    def prod(self, axis=None, **kwargs):
        return np.prod(self, axis=axis, **kwargs)

    def max(self, axis=None, **kwargs):
        return np.max(self, axis=axis, **kwargs)

    def min(self, axis=None, **kwargs):
        return np.min(self, axis=axis, **kwargs)

    # ndarray methods as the NumPy functions of the same name (which keep the format,
    # round new values once, or see the carrier values: the array functions below)
    def argmax(self, axis=None, **kwargs):
        return np.argmax(self, axis=axis, **kwargs)

    def argmin(self, axis=None, **kwargs):
        return np.argmin(self, axis=axis, **kwargs)

    def argsort(self, axis=-1, **kwargs):
        return np.argsort(self, axis=axis, **kwargs)

    def sort(self, axis=-1, **kwargs):
        """Sort in place, as ``ndarray.sort`` (the values stay those of the format)."""
        self._data.sort(axis=axis, **kwargs)

    def nonzero(self):
        return np.nonzero(self)

    def any(self, axis=None, **kwargs):
        return np.any(self, axis=axis, **kwargs)

    def all(self, axis=None, **kwargs):
        return np.all(self, axis=axis, **kwargs)

    def cumsum(self, axis=None, **kwargs):
        return np.cumsum(self, axis=axis, **kwargs)

    def cumprod(self, axis=None, **kwargs):
        return np.cumprod(self, axis=axis, **kwargs)

    def std(self, axis=None, **kwargs):
        return np.std(self, axis=axis, **kwargs)

    def var(self, axis=None, **kwargs):
        return np.var(self, axis=axis, **kwargs)

    def trace(self, *args, **kwargs):
        return np.trace(self, *args, **kwargs)

    def clip(self, min=None, max=None, **kwargs):  # noqa: A002 (ndarray.clip's names)
        return np.clip(self, min, max, **kwargs)

    def round(self, decimals=0, **kwargs):
        return np.round(self, decimals, **kwargs)

    def diagonal(self, *args, **kwargs):
        return np.diagonal(self, *args, **kwargs)

    def take(self, indices, *args, **kwargs):
        return np.take(self, indices, *args, **kwargs)

    def repeat(self, repeats, axis=None):
        return np.repeat(self, repeats, axis=axis)

    def swapaxes(self, axis1, axis2):
        return np.swapaxes(self, axis1, axis2)

    def fill(self, value):
        """Set every element to `value` rounded onto the format (``ndarray.fill``)."""
        self[...] = value

    @property
    def nbytes(self) -> int:
        """Bytes of the carrier array (the codes take ``fmt.bits`` per element)."""
        return self._data.nbytes

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    def dot(self, other, *, per_step=False, acc=None, fma=False, order="sequential", block_k=None):
        """Dot product: ``np.dot`` (rounded once), or with every step rounded.

        ``per_step=True`` is :meth:`matmul` for vectors and matrices (the same
        options, :func:`rpfloat.dot`); ``per_step=False`` takes none of them.

        Examples
        --------
        >>> import rpfloat as rp
        >>> x = rp.asarray([1.0, 2.0**-9], "bfloat16")
        >>> y = rp.asarray([1.0, 1.0], "bfloat16")
        >>> float(x.dot(y)), float(x.dot(y, per_step=True))
        (1.0, 1.0)
        >>> float(x.dot(y, per_step=True, acc="float32"))
        1.001953125
        """
        if not as_bool(per_step, "per_step"):
            _no_step_options(acc=acc, fma=fma, order=order, block_k=block_k)
            return np.dot(self, other)
        if np.ndim(self._data) > 2 or np.ndim(other) > 2:
            raise ValueError("dot(per_step=True) takes vectors and matrices; use matmul for stacks of matrices")
        return self.matmul(other, acc=acc, fma=fma, order=order, block_k=block_k)

    def matmul(self, other, *, acc=None, fma=False, order="sequential", block_k=None):
        """Matrix product with every product and addition rounded (:func:`rpfloat.matmul`).

        ``a @ b`` and ``np.matmul`` round once; this method rounds every step. The
        products are rounded onto the operands' combined format (as for ufuncs: the
        one that holds the other's values), with its mode and generator.

        Parameters
        ----------
        other : RPArray or array_like
            The right operand (values taken exactly); ``np.matmul`` shapes.
        acc : FloatFormat, FixedFormat, str or None
            The accumulator's format (default: the products' format).
        fma : bool
            True: each exact product enters the accumulator with one rounding.
        order : {"sequential", "pairwise", "kahan"}
            The order of the additions along the inner dimension.
        block_k : int or None
            Exact sums of blocks of `block_k` products, one rounding each.

        Returns
        -------
        RPArray
            Of format `acc` (default: the products' format), with the mode and
            generator of the operands' combined format; 0-d for two vectors.

        Examples
        --------
        >>> import rpfloat as rp
        >>> a = rp.asarray([[1.0, 2.0**-8, 2.0**-8]], "bfloat16")
        >>> b = rp.asarray([[1.0], [1.0], [1.0]], "bfloat16")
        >>> a @ b                                     # one rounding of 1 + 2**-7
        RPArray([[1.0078125]], fmt=bfloat16, mode='nearest')
        >>> a.matmul(b)                               # 1 + 2**-8 ties to 1, twice
        RPArray([[1.]], fmt=bfloat16, mode='nearest')
        """
        target = combine_targets([self] + ([other] if isinstance(other, RPArray) else []))
        fmt = target.fmt
        if isinstance(fmt, ScaledFormat):
            raise TypeError(f"matmul and dot(per_step=True) round every product onto the operands' format, and "
                            f"{_scaled_label(fmt)} is scaled (its scales follow whole blocks): use a @ b, "
                            "which rounds the product once")
        acc_fmt = fmt if acc is None else to_format(acc)
        result = _rounded_matmul(_unwrap(self), _unwrap(other), _as_bounded(fmt),
                                 acc=_as_bounded(acc_fmt), fma=fma, mode=target.mode,
                                 order=order, rng=target.rng, block_k=block_k)
        return _per_step_result(result, acc_fmt, target)

    # -- indexing ------------------------------------------------------------------------

    def __getitem__(self, key):
        result = self._data[_index(key)]
        if not isinstance(result, np.ndarray):
            result = np.asarray(result)  # a 0-d RPArray, not a NumPy scalar
        return self._wrap(result, self._target)

    def __setitem__(self, key, value):
        index = _index(key)
        values = _float64_values(value)
        if _draws_per_element(self._target):  # every element written draws its own rounding
            values = _spread(values, np.shape(self._data[index]))
        self._data[index] = _round_values(values, self._target)

    # -- NEP 13 ----------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        outs = out if out is not None else ()
        for destination in outs:
            if destination is not None and not isinstance(destination, (np.ndarray, RPArray)):
                raise TypeError(f"out must be an ndarray or an RPArray (a tuple of them for several "
                                f"outputs), got {type(destination).__name__}")
        for operand in inputs + outs:
            if operand is not None and not _handled(operand):
                return NotImplemented
        if method == "at":
            return _ufunc_at(ufunc, inputs, kwargs)
        operands = [_plain_operand(x) for x in inputs]
        kwargs = {key: value for key, value in kwargs.items() if not _is_default_keyword(key, value)}
        exact = method == "__call__" and ufunc in _EXACT_UFUNCS and not kwargs
        if exact and FAST_PATHS:
            result = _fast_call(ufunc, operands, outs)
            if result is not None:
                return result
        values = [_float64_operand(x, exact) for x in operands]
        residuals = None
        if exact:
            results, residuals = _exact_call(ufunc, values)
        else:
            if method == "__call__" and "where" in kwargs:
                kwargs = dict(kwargs, out=None)  # positions left out are not copied back
            results = getattr(ufunc, method)(*values, **kwargs)
            if method != "__call__":
                kwargs.pop("where", None)  # reduce's where selects inputs: every output is written
        results = results if isinstance(results, tuple) else (results,)
        residuals = residuals if residuals is not None else (None,) * len(results)
        targets = _LazyTarget(inputs)
        # all operands values of known formats: the Figueroa shortcut may apply
        operand_formats = tuple(x.fmt for x in inputs) if all(isinstance(x, RPArray) for x in inputs) else None
        finished = []
        for index, (result, residual) in enumerate(zip(results, residuals)):
            destination = outs[index] if index < len(outs) else None
            finished.append(_finish(result, residual, operand_formats, destination, targets, kwargs))
        return finished[0] if len(finished) == 1 else tuple(finished)

    # -- NEP 18 ----------------------------------------------------------------------------

    def __array_function__(self, func, types, args, kwargs):
        implementation = _FUNCTIONS.get(func)
        if implementation is not None:
            return implementation(func, *_out_as_keyword(func, args, kwargs))
        if not all(issubclass(t, (RPArray, np.ndarray)) for t in types):
            return NotImplemented
        return func(*_unwrap(args), **_unwrap(kwargs))


def _scaled_label(fmt) -> str:
    return f"format {fmt.name}" if fmt.name else repr(fmt)


def _no_step_options(**options):
    """TypeError for per-step options given without ``per_step=True``."""
    defaults = {"acc": None, "fma": False, "order": "sequential", "block_k": None}
    given = sorted(name for name, value in options.items() if value is not defaults[name])
    if given:
        raise TypeError(f"{', '.join(given)} apply to per-step rounding only: pass per_step=True")


def _per_step_result(result, fmt, target: _Target) -> RPArray:
    """The values of an rp.sum / rp.matmul result (already values of `fmt`) as an
    RPArray of `fmt` with the operands' mode and generator."""
    fmt = to_format(fmt)
    data = np.asarray(np.asarray(result), dtype=np.dtype(fmt.carrier))  # values of fmt: exact
    return RPArray._wrap(data, _Target(fmt, target.mode, target.rng))


def asarray(x, fmt, mode="nearest", *, rng=None) -> RPArray:
    """Round `x` onto `fmt` and hold it in an :class:`RPArray`.

    Parameters
    ----------
    x : array_like
        Real numbers (or an RPArray; one already of `fmt` and `mode` is returned as
        it is when no `rng` is given).
    fmt : FloatFormat, FixedFormat or str
        The format.
    mode : str
        The rounding mode of this rounding and of every later operation.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        For the stochastic modes: the array's generator, or the seed of one
        (``np.random.default_rng(rng)``), which every operation draws from.

    Raises
    ------
    TypeError
        For what :func:`rpfloat.round` refuses (complex, string or object input,
        masked arrays, ``np.longdouble`` data), and for an `rng` of another type.
    ValueError
        For a negative `rng` seed.

    Examples
    --------
    >>> import rpfloat as rp
    >>> rp.asarray([0.1, 1000.0], "e4m3")  # e4m3 overflows to NaN, as in ml_dtypes
    RPArray([0.10156,     nan], fmt=float8_e4m3fn, mode='nearest')
    """
    fmt = to_format(fmt)
    mode = parse_mode(mode)
    if isinstance(x, RPArray) and x.fmt == fmt and x._target.mode == mode and rng is None:
        return x
    return RPArray(x, fmt, mode, rng=rng)


# -- rounding ------------------------------------------------------------------------------


def _round_values(values: np.ndarray, target: _Target, residuals=None, operand_formats=None) -> np.ndarray:
    """float64 `values` (plus their exact `residuals`, if any) rounded onto the
    target's format, as a carrier ndarray.

    `operand_formats`: the formats of the operands that gave `values`, when all of
    them were RPArrays; only then may the double-rounding shortcut apply (a float64
    operand outside the format can put the exact result a hair off a midpoint).
    """
    fmt = target.fmt
    carrier = np.dtype(fmt.carrier)
    stochastic = target.mode.is_stochastic
    seed = int(target.rng.integers(2**63)) if stochastic else None
    values = np.asarray(values, dtype=np.float64, order="C")  # ascontiguousarray makes 0-d 1-d
    if isinstance(fmt, ScaledFormat):  # the block scales follow the float64 result: one rounding of it
        return np.asarray(_round_onto(values, fmt, target.mode, rng=seed)).astype(carrier)
    bounded = bounded_format(fmt, carrier)
    rounded = np.asarray(_round_onto(values, bounded, target.mode, rng=seed))
    shortcut = operand_formats is not None and _double_rounding_is_harmless(bounded, target.mode) and all(
        format_contains(fmt, operand) for operand in operand_formats
    )
    if residuals is not None and not shortcut:
        flat_residuals = np.asarray(np.broadcast_to(residuals, values.shape), order="C").reshape(-1)
        params, midpoints, _ = rounding_setup(bounded)
        key = random_key(seed) if stochastic else 0
        if target.mode == Mode.STOCHASTIC:  # most pairs by integer arithmetic, the others below
            indices = np.empty(flat_residuals.size, np.int64)
            indices = indices[:stochastic_pairs(values.reshape(-1), flat_residuals, rounded.reshape(-1), params,
                                                np.uint64(key), 64, indices)]
        else:
            indices = np.flatnonzero(flat_residuals)
        if indices.size:
            round_pairs_at(values.reshape(-1), flat_residuals, indices, rounded.reshape(-1), params,
                           midpoints, int(target.mode), np.uint64(key), 64)
    return rounded.astype(carrier)


@functools.lru_cache(maxsize=256)
def _double_rounding_is_harmless(fmt, mode: Mode) -> bool:
    """Whether rounding fl(a op b) to nearest equals rounding a op b, for + - * / sqrt
    on values of `fmt`: precision p with 53 >= 2p + 2 (Figueroa), and every product,
    quotient and square root of its values inside float64's normal range."""
    if mode not in _NEAREST_MODES or isinstance(fmt, FixedFormat):
        return False
    smallest = fmt.emin - fmt.man_bits if fmt.subnormals else fmt.emin
    return 2 * fmt.precision + 2 <= 53 and smallest >= -500 and fmt.emax <= 500


def _split(a):
    c = _VELTKAMP * a
    high = c - (c - a)
    return high, a - high


def _two_product(a, b):
    """``(fl(a*b), a*b - fl(a*b))``, exact while nothing overflows or underflows."""
    product = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def _two_sum(a, b):
    total = a + b
    b_virtual = total - a
    a_virtual = total - b_virtual
    return total, (a - a_virtual) + (b - b_virtual)


def _add(a, b):
    return _two_sum(a, b)


def _subtract(a, b):
    return _two_sum(a, -b)


def _multiply(a, b):
    return _two_product(a, b)


def _divide(a, b):
    a, b = np.broadcast_arrays(a, b)
    quotient, residual = np.empty(a.shape), np.empty(a.shape)
    divide_exactly(_flat64(a), _flat64(b), quotient.reshape(-1), residual.reshape(-1))
    return quotient, residual


def _sqrt(a):
    root, residual = np.empty(np.shape(a)), np.empty(np.shape(a))
    sqrt_exactly(_flat64(a), root.reshape(-1), residual.reshape(-1))
    return root, residual


def _flat64(values):
    """`values` as a flat C-contiguous float64 array (a copy where they are not one)."""
    return np.ascontiguousarray(values, dtype=np.float64).reshape(-1)


def _square(a):
    return _two_product(a, a)


def _reciprocal(a):
    return _divide(np.ones_like(a), a)


_EXACT_UFUNCS = {
    np.add: _add,
    np.subtract: _subtract,
    np.multiply: _multiply,
    np.divide: _divide,
    np.sqrt: _sqrt,
    np.square: _square,
    np.reciprocal: _reciprocal,
}


def _exact_call(ufunc, values):
    """The ufunc's float64 results (with NumPy's warnings) and their exact errors."""
    results = ufunc(*values)
    with np.errstate(all="ignore"):
        _, residual = _EXACT_UFUNCS[ufunc](*values)
        residual = np.where(np.isfinite(residual), residual, 0.0)
    return (results,), (residual,)


# -- fast paths -----------------------------------------------------------------------------
#
# The float64 path above costs about twenty passes over float64 copies of the data.
# Where the operands' formats bound their values well enough, a ufunc of
# _EXACT_UFUNCS can instead be computed in float32 (or float64, without residual)
# and rounded once by rp.round, with the same result bit for bit:
#
# * "exact": the working precision holds every result exactly (sums of values on
#   a grid of at most `precision` bits, products of short significands), in every
#   mode; element i draws random number i of the same seed, as on the float64 path;
# * "nearest": round-to-nearest onto a format of precision p with operands of that
#   format, when the working precision has at least 2p + 2 bits (Figueroa) and no
#   result is rounded below its normal range (sums there are exact) and an overflow
#   rounds onto the format as infinity does;
# * "checked": products of short significands, exact in float32 except where they
#   leave its normal range; those elements are found and rounded exactly;
# * "bracketed": the directed modes, odd and stochastic_equal round every number
#   between two neighbouring values of the format alike, so the rounded work result
#   (float32 or float64, a superset of the format) is right unless it is a value of
#   the format itself; those elements are rounded exactly;
# * "two_sum": sums in float32 with TwoSum's exact error, in one pass of a kernel;
#   elements with an error are rounded exactly.
#
# Elements rounded "exactly" get what the float64 path gives them: the float64
# result and residual, rounded by round_pairs_at with the random number of their
# index. FAST_PATHS = False turns every fast path off (to compare against them).

FAST_PATHS = True
"""Whether ufuncs may take the fast paths (float32 arithmetic, no residual) where
they give the same bits as the float64 error-free path; False always takes the
float64 path (for checking the fast paths)."""



class _Values(NamedTuple):
    """Bounds on an operand's finite values: multiples of ``2**quantum`` with at most
    `precision` significant bits, below ``2**top`` in magnitude."""

    precision: int
    quantum: int
    top: int


class _Work(NamedTuple):
    """A working precision: its dtype and the same bounds on its values."""

    dtype: np.dtype
    precision: int
    quantum: int   # exponent of the smallest subnormal
    normal: int    # exponent of the smallest normal
    top: int       # finite values lie below 2**top


_WORK32 = _Work(np.dtype(np.float32), 24, -149, -126, 128)
_WORK64 = _Work(_FLOAT64, 53, -1074, -1022, 1024)
_SUMS = (np.add, np.subtract)
# Modes whose result depends only on the two values of the format around the exact
# result (and on whether it is one): rounding fl(z) gives the same unless fl(z) is a
# value of the format, where the work format holds every value of it.
_BRACKET_MODES = (Mode.UP, Mode.DOWN, Mode.TOWARD_ZERO, Mode.ODD, Mode.STOCHASTIC_EQUAL)
_PRODUCTS = (np.multiply, np.square)


class _FastPlan(NamedTuple):
    kind: str              # "direct", "checked", "bracketed" or "two_sum"
    work: _Work
    tiny: bool = False     # "checked": results may fall below float32's normal range
    huge: bool = False     # "checked": results may overflow float32


def _format_values(fmt) -> _Values | None:
    if isinstance(fmt, FixedFormat):
        magnitude = max(fmt.max, -fmt.min)
        top = math.frexp(magnitude)[1] if magnitude > 0 else -fmt.frac_bits
        return _Values(max(top + fmt.frac_bits, 1), -fmt.frac_bits, top)
    if isinstance(fmt, ScaledFormat) or fmt.exp_bits is None:
        return None
    return _Values(fmt.man_bits + 1, fmt.emin - fmt.man_bits, fmt.emax + 1)


def _scalar_values(value: float) -> _Values:
    if value == 0:
        return _Values(1, 0, 1)
    fraction, exponent = math.frexp(value)
    significand = int(abs(fraction) * 2**53)
    trailing = (significand & -significand).bit_length() - 1
    return _Values(53 - trailing, exponent - 53 + trailing, exponent)


def _fits(values: _Values, work: _Work) -> bool:
    return values.precision <= work.precision and values.quantum >= work.quantum and values.top <= work.top


def _result_bounds(ufunc, values) -> tuple:
    """``(low, top)``: every nonzero finite exact result is at least ``2**low`` and
    below ``2**top`` in magnitude."""
    quanta = [v.quantum for v in values]
    tops = [v.top for v in values]
    if ufunc in _SUMS:
        return min(quanta), max(tops) + 1
    if ufunc is np.multiply:
        return sum(quanta), sum(tops)
    if ufunc is np.square:
        return 2 * quanta[0], 2 * tops[0]
    if ufunc is np.divide:
        return quanta[0] - tops[1], tops[0] - quanta[1]
    if ufunc is np.reciprocal:
        return -tops[0], -quanta[0]
    return quanta[0] // 2, -(-tops[0] // 2)  # sqrt


def _exact_in(ufunc, values, work: _Work) -> bool:
    """Whether `work` holds every exact result of `ufunc` on such values."""
    if ufunc in _SUMS:
        low, top = _result_bounds(ufunc, values)
        return top - low <= work.precision and low >= work.quantum and top <= work.top
    if ufunc in _PRODUCTS:
        operands = values if ufunc is np.multiply else values * 2
        low, top = _result_bounds(np.multiply, operands)
        bits = sum(v.precision for v in operands)
        return bits <= work.precision and low >= work.quantum and top <= work.top
    return False


def _nearest_in(ufunc, values, contained: bool, fmt, mode: Mode, work: _Work) -> bool:
    """Whether rounding `ufunc`'s result in `work` to nearest, then onto `fmt`, is
    the same as rounding the exact result onto `fmt` (Figueroa: 2p + 2 bits; no
    rounding below the normal range; an overflow of `work` rounds like infinity)."""
    if mode not in _NEAREST_MODES or not contained or isinstance(fmt, FixedFormat):
        return False
    if 2 * fmt.precision + 2 > work.precision:
        return False
    low, top = _result_bounds(ufunc, values)
    if ufunc not in _SUMS and low < work.normal:  # sums below the normal range are exact
        return False
    return top <= work.top or _overflow_rounds_like_infinity(fmt, mode, work)


@functools.lru_cache(maxsize=256)
def _overflow_rounds_like_infinity(fmt, mode: Mode, work: _Work) -> bool:
    """Whether every value at least `work`'s overflow threshold rounds to nearest
    onto `fmt` as infinity does (both signs)."""
    if work.top >= 1024:
        return False  # float64 results: the float64 path decides
    threshold = (2.0 - 2.0 ** -work.precision) * 2.0 ** (work.top - 1)
    probes = np.array([threshold, -threshold, np.inf, -np.inf])
    rounded = np.asarray(_round_onto(probes, fmt, mode), dtype=np.float64)
    return bool(np.array_equal(rounded[:2], rounded[2:], equal_nan=True))


@functools.lru_cache(maxsize=1024)
def _fast_plan(ufunc, keys: tuple, fmt, mode: Mode) -> _FastPlan | None:
    """How to compute `ufunc` on operands described by `keys` (formats of RPArray
    operands, floats for scalars) onto the bounded format `fmt` in `mode`; None:
    take the float64 path."""
    if isinstance(fmt, FixedFormat) and fmt.overflow == "wrap":
        # a wrapped result keeps the exact result's low bits, which a rounded work result
        # beyond 2**53 spacings has lost (the float64 path wraps the exact one)
        return None
    values = []
    contained = True
    for key in keys:
        if isinstance(key, float):
            values.append(_scalar_values(key))
            representable = np.asarray(_round_onto(np.float64(key), fmt, "nearest"), dtype=np.float64)
            contained = contained and bool(representable == key)
        else:
            operand = _format_values(_as_bounded(key))
            if operand is None:
                return None
            values.append(operand)
            contained = contained and format_contains(fmt, key)
    for work in (_WORK32, _WORK64):
        if all(_fits(v, work) for v in values):
            if _exact_in(ufunc, values, work) or _nearest_in(ufunc, values, contained, fmt, mode, work):
                return _FastPlan("direct", work)
        if work is _WORK32 and ufunc in _PRODUCTS and all(_fits(v, work) for v in values):
            operands = values if ufunc is np.multiply else values * 2
            if sum(v.precision for v in operands) <= work.precision:
                low, top = _result_bounds(np.multiply, operands)
                return _FastPlan("checked", work, tiny=low < work.quantum, huge=top > work.top)
    target = _format_values(fmt)
    if mode in _BRACKET_MODES and ufunc not in _SUMS and target is not None:
        for work in (_WORK32, _WORK64):
            if _fits(target, work) and all(_fits(v, work) for v in values):
                return _FastPlan("bracketed", work)
    if ufunc in _SUMS and all(_fits(v, _WORK32) for v in values):
        return _FastPlan("two_sum", _WORK32)
    return None


def _fast_call(ufunc, inputs, outs):
    """`ufunc` called on `inputs` (RPArrays and real scalars) by a fast path, or None
    where none applies (other operands, ``out=`` other than one RPArray, a scaled
    format)."""
    destination = None
    if outs:
        if len(outs) != 1 or not isinstance(outs[0], RPArray):
            return None
        destination = outs[0]
    operands, keys, arrays = [], [], []
    for x in inputs:
        if isinstance(x, RPArray):
            operands.append(x._data)
            keys.append(x._target.fmt)
            arrays.append(x)
        elif isinstance(x, (float, int, np.floating, np.integer)) and not isinstance(x, bool):
            try:
                value = float(x)
            except OverflowError:
                return None
            if not math.isfinite(value) or value != x:
                return None
            operands.append(value)
            keys.append(value)
        else:
            return None
    target = destination._target if destination is not None else combine_targets(arrays)
    fmt = target.fmt
    if isinstance(fmt, ScaledFormat):
        return None
    bounded = _as_bounded(fmt)
    plan = _fast_plan(ufunc, tuple(keys), bounded, target.mode)
    if plan is None:
        return None
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    if destination is not None and destination.shape != shape:
        return None  # the float64 path raises NumPy's error
    seed = int(target.rng.integers(2**63)) if target.mode.is_stochastic else None
    carrier = np.dtype(fmt.carrier)
    if plan.kind == "two_sum":
        result, suspects = _two_sum_chunks(ufunc, operands, shape)
    else:
        result = np.empty(shape, dtype=plan.work.dtype)
        with np.errstate(over="ignore", under="ignore"):
            ufunc(*operands, out=result, dtype=plan.work.dtype)
        suspects = _checked_products(ufunc, operands, result, plan) if plan.kind == "checked" else None
    rounded = _round_work(result, bounded, target.mode, seed, carrier)
    if plan.kind == "bracketed":
        suspects = np.flatnonzero(np.equal(rounded, result))
    if suspects is not None and suspects.size:
        _round_exactly_at(ufunc, operands, shape, suspects, result, rounded, bounded, target.mode, seed)
    if destination is not None:
        np.copyto(destination._data, rounded)
        return destination
    return RPArray._wrap(rounded, target)


def _round_work(result: np.ndarray, fmt, mode: Mode, seed, carrier: np.dtype) -> np.ndarray:
    """`result` (float32 or float64) rounded onto `fmt`, as a carrier ndarray (into
    a new array: rp.round in place is slower)."""
    rounded = np.asarray(_round_onto(result, fmt, mode, rng=seed)).reshape(result.shape)
    return rounded if rounded.dtype == carrier else rounded.astype(carrier)


def _checked_products(ufunc, operands, product: np.ndarray, plan: _FastPlan) -> np.ndarray | None:
    """Flat indices of the float32 products that may be inexact: below the normal
    range though no factor is zero, or overflowed."""
    if not (plan.tiny or plan.huge) or product.size == 0:
        return None
    magnitude = np.abs(product)
    low_ok = not plan.tiny or magnitude.min() >= np.float32(2.0**-126)
    high_ok = not plan.huge or magnitude.max() <= np.finfo(np.float32).max
    if low_ok and high_ok:
        return None  # NaN fails both tests: products with NaN are looked at below
    suspect = np.zeros(product.shape, dtype=np.bool_)
    if plan.tiny:
        suspect = magnitude < np.float32(2.0**-126)
        factors = operands if ufunc is np.multiply else operands * 2
        for factor in factors:
            suspect &= np.not_equal(factor, 0)  # a zero factor: the product is exactly zero
    if plan.huge:
        suspect |= magnitude > np.finfo(np.float32).max
    return np.flatnonzero(suspect)


def _two_sum_chunks(ufunc, operands, shape) -> tuple:
    """The float32 sums (or differences) and the flat indices of those that are not
    exact (TwoSum's error is nonzero or NaN), in one pass of ``float32_sums``."""
    size = int(np.prod(shape, dtype=np.int64))
    a, b = (np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=np.float32), shape)).reshape(size)
            for x in operands)
    if ufunc is np.subtract:
        b = -b  # exact
    total = np.empty(size, dtype=np.float32)
    inexact = np.empty(size, dtype=np.int64)  # untouched pages cost nothing
    count = float32_sums(a, b, total, inexact)
    return total.reshape(shape), inexact[:count].copy()


def _round_exactly_at(ufunc, operands, shape, indices, result, rounded, fmt, mode: Mode, seed):
    """Round the elements at flat `indices` as the float64 path does: from the
    float64 result and its exact residual, with the random numbers of their index
    (elements whose work `result` turns out exact keep their rounding)."""
    gathered = []
    for x in operands:
        if not isinstance(x, np.ndarray):
            gathered.append(np.float64(x))
        elif not shape:
            gathered.append(x.astype(np.float64).reshape(1))
        else:
            gathered.append(np.broadcast_to(x, shape)[np.unravel_index(indices, shape)].astype(np.float64))
    values = ufunc(*gathered)  # with NumPy's warnings, as on the float64 path
    with np.errstate(all="ignore"):
        _, residuals = _EXACT_UFUNCS[ufunc](*gathered)
        residuals = np.where(np.isfinite(residuals), residuals, 0.0)
    params, midpoints, _ = rounding_setup(fmt)
    values = np.array(np.broadcast_to(values, indices.shape), dtype=np.float64)
    residuals = np.array(np.broadcast_to(residuals, indices.shape), dtype=np.float64)
    inexact = (residuals != 0) | ~(values == result.reshape(-1)[indices])  # NaN: round it again
    if not inexact.all():
        indices, values, residuals = indices[inexact], values[inexact], residuals[inexact]
        if not indices.size:
            return
    if mode.is_stochastic:  # element i draws number i of the seed's stream: index the whole array
        key = random_key(seed)
        positions = indices
        # only the elements at `indices` are touched: in an anonymous mapping, only
        # their pages are ever allocated (np.empty may fault in whole huge pages)
        scratch = np.frombuffer(mmap.mmap(-1, 16 * rounded.size), dtype=np.float64)
        work_values, work_residuals = scratch[:rounded.size], scratch[rounded.size:]
        work_values[indices] = values
        work_residuals[indices] = residuals
    else:
        key = 0
        positions = np.arange(indices.size)
        work_values, work_residuals = values, residuals
    round_pairs_at(work_values, work_residuals, positions, work_values, params, midpoints, int(mode),
                   np.uint64(key), 64)
    rounded.reshape(-1)[indices] = work_values[positions]


# -- operands and targets -----------------------------------------------------------------------


def _handled(x) -> bool:
    if isinstance(x, RPArray):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind in "biuf" or is_ml_dtype(x.dtype)
    if isinstance(x, numbers.Real) and not isinstance(x, (int, float)):
        return False  # Fraction and the like: no float64 value without a rounding (a TypeError)
    return isinstance(x, _HANDLED_TYPES) and not isinstance(x, (str, bytes))


def _plain_operand(x):
    """A ufunc operand other than an RPArray, checked as rp.round checks its input
    (``rounding.input_array``: TypeError for masked arrays and for dtypes wider than
    float64; ml_dtypes data as float32). Lists become arrays (an RPArray in them
    gives its carrier); Python numbers and NumPy scalars that need no conversion stay
    as they are."""
    if isinstance(x, RPArray) or not isinstance(x, (np.ndarray, np.generic, list, tuple)):
        return x
    array = input_array(_unwrap(x))
    if isinstance(x, np.generic) and array.dtype == x.dtype:
        return x
    return array


def _float64_operand(x, exact=False):
    """An operand for the float64 computation: RPArrays as float64 arrays (exact).
    With `exact` (the error-free transformations, which must not run in a narrower
    dtype nor negate an unsigned or boolean one), arrays and NumPy scalars as float64
    too: exact for floats and for integers up to ``2**53``, larger integers rounded to
    nearest. Otherwise as they are, so that integer-only arguments (``np.ldexp``'s
    exponents) keep their type."""
    if isinstance(x, RPArray):
        return x._data.astype(np.float64)
    if exact and isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x, dtype=np.float64)
    return x


def _draws_per_element(target: _Target) -> bool:
    """Whether a value written to many elements of an RPArray of `target` is
    rounded once for each (stochastic modes of element formats): so that it
    draws for every element, not once for a value that NumPy then repeats. A
    scaled format rounds the values as given, whose blocks decide its scales."""
    return target.mode.is_stochastic and not isinstance(target.fmt, ScaledFormat)


def _spread(values: np.ndarray, shape: tuple) -> np.ndarray:
    """`values` broadcast to `shape` where NumPy's assignment would broadcast
    them (leading length-1 axes beyond `shape` dropped, as it drops them);
    otherwise as they are (the assignment then says what does not fit)."""
    while values.ndim > len(shape) and values.shape[0] == 1:
        values = values[0]
    if values.shape == shape:
        return values
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        return values


def _float64_values(x) -> np.ndarray:
    """Real values as a float64 ndarray, taken as rp.round takes its input
    (``rounding.input_array``); TypeError for anything else."""
    if isinstance(x, RPArray):
        return x._data.astype(np.float64)
    array = input_array(_unwrap(x))
    if array.dtype.kind not in "biuf":
        hint = "; round the real and imaginary parts separately" if array.dtype.kind == "c" else ""
        raise TypeError(f"an RPArray holds real numbers, got an array of dtype {array.dtype}{hint}")
    with np.errstate(invalid="ignore"):
        return array.astype(np.float64)


# ufunc keywords at these values mean what leaving them out means
_DEFAULT_KEYWORDS = {"casting": "same_kind", "order": "K", "dtype": None, "subok": True, "signature": None}


def _is_default_keyword(name: str, value) -> bool:
    """Whether the ufunc keyword `name` has NumPy's default value (``where=True``,
    ``casting="same_kind"``, ...), so that a call with it is a plain call."""
    if name == "where":  # True, np.True_ or a 0-d boolean array holding True
        return (isinstance(value, (bool, np.bool_)) or (isinstance(value, np.ndarray) and value.shape == ()
                                                         and value.dtype == np.bool_)) and bool(value)
    if name not in _DEFAULT_KEYWORDS:
        return False
    default = _DEFAULT_KEYWORDS[name]
    if default is None or isinstance(default, bool):
        return value is default
    return isinstance(value, str) and value == default


def stochastic_generator(rng) -> np.random.Generator:
    """The generator of a stochastic RPArray from `rng`: a Generator as it is, None,
    an int seed or a SeedSequence through ``np.random.default_rng``. Anything else
    raises the TypeError or ValueError that rp.round gives for it."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is not None:
        random_key(rng)  # refuses what rp.round refuses (a Generator would be drawn from)
    return np.random.default_rng(rng)


def _unwrap(obj):
    """`obj` with every RPArray replaced by its carrier ndarray (in lists, tuples, dicts)."""
    if isinstance(obj, RPArray):
        return obj._data
    if isinstance(obj, list):
        return [_unwrap(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_unwrap(item) for item in obj)
    if isinstance(obj, dict):
        return {key: _unwrap(value) for key, value in obj.items()}
    return obj


def _index(key):
    """An index with RPArrays (e.g. as boolean masks of their values) unwrapped."""
    return _unwrap(key)


def _rparrays(obj):
    """Every RPArray in `obj` (lists, tuples, dicts searched), in order."""
    if isinstance(obj, RPArray):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _rparrays(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _rparrays(item)


class _LazyTarget:
    """The combined target of some operands, worked out when first needed (a
    comparison of incompatible formats must not fail)."""

    def __init__(self, operands):
        self._operands = operands
        self._target = None

    def get(self) -> _Target:
        if self._target is None:
            self._target = combine_targets(list(_rparrays(self._operands)))
        return self._target


def combine_targets(arrays) -> _Target:
    """The target of an operation on these RPArrays: the first one whose format
    contains every other's value set. TypeError when there is none."""
    if not arrays:
        raise TypeError("no RPArray operand to take a format from")
    for candidate in arrays:
        if all(format_contains(candidate.fmt, other.fmt) for other in arrays):
            return candidate._target
    names = sorted({other.fmt.name or repr(other.fmt) for other in arrays})
    raise TypeError(
        f"RPArrays of formats {', '.join(names)} do not combine: neither format holds "
        "every value of the other; convert one first, e.g. rp.asarray(x, fmt)"
    )


def format_contains(big, small) -> bool:
    """Whether every value of format `small` is a value of format `big` (including
    ±inf; NaN is carried by every RPArray and signed zero counts as zero).

    Decided exactly from the parameters: sign, range, and in every binade of
    `small` that `big` has that binade with a spacing that divides `small`'s.

    Examples
    --------
    >>> import rpfloat as rp
    >>> format_contains(rp.format("float32"), rp.format("bfloat16"))
    True
    >>> format_contains(rp.format("bfloat16"), rp.format("float16"))
    False
    """
    return _contains(_as_bounded(big), _as_bounded(small))


def _as_bounded(fmt):
    if isinstance(fmt, ScaledFormat):
        return fmt
    return bounded_format(fmt, np.dtype(fmt.carrier))


@functools.lru_cache(maxsize=1024)
def _contains(big, small) -> bool:
    if big == small:
        return True
    if isinstance(big, ScaledFormat) or isinstance(small, ScaledFormat):
        return False  # a scaled format's values depend on the data: it holds no other format's
    if small.has_inf and not big.has_inf:
        return False
    big_grid, small_grid = _Grid(big), _Grid(small)
    if small_grid.most_negative < big_grid.most_negative or small_grid.largest > big_grid.largest:
        return False
    return all(
        e >= big_grid.lowest_binade
        and (big_grid.spacing_exp(e) <= small_grid.spacing_exp(e) or small_grid.only_power_of_two(e))
        for e in range(small_grid.lowest_binade, small_grid.highest_binade + 1)
    )


class _Grid:
    """A format's positive values binade by binade: ``2**e <= v < 2**(e+1)`` holds
    every multiple of ``2**spacing_exp(e)`` there, for ``lowest_binade <= e``, up to
    the largest magnitude."""

    def __init__(self, fmt):
        if isinstance(fmt, FixedFormat):
            self._quantum = -fmt.frac_bits
            self._emin = None
            self.lowest_binade = -fmt.frac_bits
            self.largest, self.most_negative = fmt.max, fmt.min
        else:
            self._quantum = fmt.emin - fmt.man_bits
            self._emin = fmt.emin
            self._man_bits = fmt.man_bits
            subnormal = fmt.subnormals and fmt.man_bits > 0
            self.lowest_binade = fmt.emin - fmt.man_bits if subnormal else fmt.emin
            self.largest, self.most_negative = fmt.max, -fmt.max
        magnitude = max(self.largest, -self.most_negative)
        self.highest_binade = int(np.frexp(magnitude)[1]) - 1
        # a signed fixed-point format's top binade holds one value, its min: -2**e
        self._lone_top = magnitude == 2.0**self.highest_binade and self.largest < magnitude

    def spacing_exp(self, e: int) -> int:
        if self._emin is None:
            return self._quantum
        return max(e, self._emin) - self._man_bits

    def only_power_of_two(self, e: int) -> bool:
        """Whether binade `e` holds the magnitude ``2**e`` alone (which every
        format holds from its lowest binade up to its largest magnitude)."""
        return self._lone_top and e == self.highest_binade


# -- ufunc results --------------------------------------------------------------------------


def _finish(result, residual, operand_formats, destination, targets: _LazyTarget, kwargs):
    """One ufunc output: rounded into an RPArray, written into `destination`, or a
    plain ndarray for boolean and integer results."""
    scalar = not isinstance(result, np.ndarray)
    result = np.asarray(result)
    if destination is not None and _broadcasts_into(result.shape, destination.shape):
        # an out= larger than the inputs' broadcast shape is NumPy's output shape: every
        # element of it rounded apart (its own random draw), as NumPy computes each
        result = np.array(np.broadcast_to(result, destination.shape))
        if residual is not None and np.ndim(residual):
            residual = np.array(np.broadcast_to(residual, destination.shape))
    kind = result.dtype.kind
    if kind == "c":
        raise TypeError("an RPArray holds real numbers; this operation gave complex results")
    where = kwargs.get("where", True)
    if isinstance(destination, RPArray):
        _check_out_shape(destination, result)
        rounded = _round_values(result, destination._target, residual, operand_formats)
        np.copyto(destination._data, rounded, where=where)
        return destination
    if kind != "f":
        if destination is None:
            return result[()] if scalar else result
        _check_out_shape(destination, result)
        np.copyto(destination, result, casting=kwargs.get("casting", "same_kind"), where=where)
        return destination
    target = targets.get()
    data = _round_values(result, target, residual, operand_formats)
    if destination is None:
        return RPArray._wrap(data, target)
    _check_out_shape(destination, result)
    np.copyto(destination, data, casting=kwargs.get("casting", "same_kind"), where=where)
    return destination


def _broadcasts_into(shape: tuple, out_shape: tuple) -> bool:
    """Whether a result of `shape` broadcasts to a larger `out_shape`."""
    if shape == out_shape:
        return False
    try:
        return np.broadcast_shapes(shape, out_shape) == out_shape
    except ValueError:
        return False


def _check_out_shape(destination, result):
    if destination.shape != result.shape:
        raise ValueError(
            f"non-broadcastable output operand with shape {destination.shape} doesn't match "
            f"the broadcast shape {result.shape}"
        )


def _ufunc_at(ufunc, inputs, kwargs):
    """``ufunc.at(a, indices, b)``: unbuffered in float64, then `a` rounded once."""
    array, indices, *rest = inputs
    operands = [_float64_operand(_plain_operand(x)) for x in rest]
    if not isinstance(array, RPArray):
        ufunc.at(array, _index(indices), *operands, **kwargs)
        return None
    work = array._data.astype(np.float64)
    ufunc.at(work, _index(indices), *operands, **kwargs)
    if isinstance(array.fmt, ScaledFormat):  # blocks follow their data: round the touched values alone,
        touched = np.zeros(work.shape, bool)  # as item assignment does, leaving the other blocks as they are
        touched[_index(indices)] = True
        array._data[touched] = _round_values(work[touched], array._target)
    else:
        array._data[...] = _round_values(work, array._target)  # untouched values are exact: unchanged
    return None


# -- NEP 18 implementations ---------------------------------------------------------------------

_FUNCTIONS = {}


def _implements(*functions):
    def register(implementation):
        for function in functions:
            _FUNCTIONS[function] = implementation
        return implementation

    return register


def _numpy_functions(*names):
    """The NumPy functions of `names` (``"linalg.matmul"``) that this NumPy has."""
    functions = []
    for name in names:
        owner, _, attribute = name.rpartition(".")
        function = getattr(np.linalg if owner == "linalg" else np, attribute, None)
        if function is not None:
            functions.append(function)
    return functions


_VIEW_FUNCTIONS = (
    np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
    np.broadcast_to, np.flip, np.fliplr, np.flipud, np.rot90, np.roll, np.repeat, np.tile,
    np.take, np.sort, np.copy, np.diagonal, np.atleast_1d, np.atleast_2d, np.atleast_3d,
    np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.delete, np.resize,
    np.trim_zeros, np.partition, np.triu, np.tril, np.diag, np.diagflat,
    # NumPy 2's array-API spellings (where this NumPy has them)
    *_numpy_functions("matrix_transpose", "unstack", "linalg.matrix_transpose", "linalg.diagonal"),
)


@_implements(*_VIEW_FUNCTIONS)
def _view_function(func, args, kwargs):
    """Functions that rearrange the values of one array: applied to the carrier
    (views stay views), the format kept. With other RPArrays involved, the values
    path below combines the formats."""
    first = args[0] if args else None
    others = list(_rparrays((args[1:], kwargs)))
    if not isinstance(first, RPArray) or others:
        return _values_function(func, args, kwargs)
    result = func(first._data, *args[1:], **kwargs)
    return _wrap_results(result, first._target)


_VALUE_FUNCTIONS = (
    np.concatenate, np.stack, np.vstack, np.hstack, np.dstack, np.column_stack, np.append,
    np.insert, np.where, np.clip, np.select, np.choose, np.take_along_axis,
    np.sum, np.nansum, np.prod, np.nanprod, np.mean, np.nanmean, np.average, np.median,
    np.nanmedian, np.std, np.nanstd, np.var, np.nanvar, np.cumsum, np.cumprod, np.nancumsum,
    np.nancumprod, np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin, np.ptp, np.trace,
    np.dot, np.vdot, np.inner, np.outer, np.tensordot, np.kron, np.cross, np.einsum, np.diff,
    np.ediff1d, np.gradient, np.interp, np.convolve, np.correlate, np.round, np.around,
    np.linalg.norm, np.unique, np.percentile, np.quantile, np.pad, np.block, np.polyval, np.nanpercentile,
    np.nanquantile, np.cov, np.corrcoef,
    # linear algebra: computed in float64, each floating result rounded once (integer ones kept)
    np.linalg.solve, np.linalg.inv, np.linalg.pinv, np.linalg.det, np.linalg.slogdet, np.linalg.lstsq,
    np.linalg.qr, np.linalg.cholesky, np.linalg.svd, np.linalg.eig, np.linalg.eigh, np.linalg.eigvals,
    np.linalg.eigvalsh, np.linalg.matrix_power, np.linalg.multi_dot, np.linalg.tensorsolve,
    np.linalg.tensorinv, np.linalg.cond, np.linalg.matrix_rank,
    np.vander, np.sinc, np.polyfit, np.roots, np.poly, np.polyadd, np.polysub, np.polymul, np.polydiv,
    np.polyder, np.polyint, np.compress, np.extract, np.meshgrid, np.real, np.imag, np.fix,
    # NumPy 2's array-API spellings (where this NumPy has them)
    *_numpy_functions("unique_values", "unique_counts", "unique_inverse", "unique_all", "vecdot", "cumulative_sum",
                      "cumulative_prod", "trapezoid", "linalg.matmul", "linalg.outer", "linalg.vecdot",
                      "linalg.vector_norm", "linalg.matrix_norm", "linalg.trace",
                      "linalg.tensordot", "linalg.cross", "linalg.svdvals"),
)


@_implements(np.broadcast_arrays)
def _broadcast_arrays(func, args, kwargs):
    """Each array broadcast on its own: an RPArray's views keep its format (the
    formats are not combined, as nothing is computed)."""
    results = func(*(a._data if isinstance(a, RPArray) else a for a in args), **kwargs)
    return type(results)(RPArray._wrap(result, a._target) if isinstance(a, RPArray) else result
                         for result, a in zip(results, args))


@_implements(*_VALUE_FUNCTIONS)
def _values_function(func, args, kwargs):
    """Functions that compute new values: run on float64 values, every floating
    result rounded once onto the combined format."""
    arrays = list(_rparrays((args, kwargs)))
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    result = func(*_as_float64(args), **_as_float64(kwargs))
    if out is not None:
        return _write_out(result, out, arrays)
    return _wrap_results(result, _LazyTarget(arrays))


@functools.lru_cache(maxsize=None)
def _signature(func):
    """`func`'s signature (once per function: inspect is slow); None where it has none."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=None)
def _out_position(func):
    """`func`'s parameter names and the position of its ``out`` parameter, where
    ``out`` may be passed by position (``np.dot(a, b, out)``); None otherwise."""
    signature = _signature(func)
    if signature is None:
        return None
    parameters = signature.parameters
    parameter = parameters.get("out")
    if parameter is None or parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
        return None
    names = tuple(parameters)
    return names, names.index("out")


def _out_as_keyword(func, args, kwargs):
    """`args` and `kwargs` with a positional ``out``, and the positional arguments
    after it, passed by keyword, where the implementations look for them
    (``np.sum(a, 0, None, out, True)``)."""
    found = _out_position(func)
    if found is None or len(args) <= found[1]:
        return args, kwargs
    names, position = found
    return args[:position], {**kwargs, **dict(zip(names[position:], args[position:]))}


@_implements(np.zeros_like, np.ones_like, np.empty_like, np.full_like)
def _like_function(func, args, kwargs):
    """New arrays shaped like an RPArray are RPArrays of its format (fill values
    rounded), unless a dtype is asked for (by keyword or by position)."""
    prototype = args[0] if args else kwargs.get("a")
    dtype = _signature(func).bind_partial(*args, **kwargs).arguments.get("dtype")
    if not isinstance(prototype, RPArray) or dtype is not None:
        return func(*_unwrap(args), **_unwrap(kwargs))
    kwargs = {key: value for key, value in kwargs.items() if key != "a"}
    result = func(prototype._data.astype(np.float64), *_as_float64(args[1:]), **_as_float64(kwargs))
    return RPArray._wrap(_round_values(result, prototype._target), prototype._target)


# functions that write values into their first argument:
# name of that argument, position and name of the values
_WRITING_FUNCTIONS = {
    np.copyto: ("dst", 1, "src"),
    np.put: ("a", 2, "v"),
    np.putmask: ("a", 2, "values"),
    np.place: ("arr", 2, "vals"),
    np.put_along_axis: ("arr", 2, "values"),
    np.fill_diagonal: ("a", 1, "val"),
}


@_implements(*_WRITING_FUNCTIONS)
def _writing_function(func, args, kwargs):
    """Functions that write values into an array: into an RPArray they write its
    carrier, with the values rounded onto its format first (with the array's mode
    and generator): ``np.copyto`` as item assignment rounds them, once for every
    element written; the others each given value once, which NumPy may repeat."""
    destination_name, position, values_name = _WRITING_FUNCTIONS[func]
    args, kwargs = list(args), dict(kwargs)
    destination = args[0] if args else kwargs.get(destination_name)
    if isinstance(destination, RPArray):
        def rounded(values):
            values = _float64_values(values)
            if func is np.copyto and _draws_per_element(destination._target):  # as assignment
                values = _spread(values, destination.shape)
            return _round_values(values, destination._target)

        if len(args) > position:
            args[position] = rounded(args[position])
        elif values_name in kwargs:
            kwargs[values_name] = rounded(kwargs[values_name])
    return func(*_unwrap(args), **_unwrap(kwargs))


@_implements(np.nan_to_num)
def _nan_to_num(func, args, kwargs):
    """``np.nan_to_num`` sees the carrier values (a plain ndarray); it may not
    replace them in place, as its replacements need not be values of the format."""
    x = args[0] if args else kwargs.get("x")
    copy = args[1] if len(args) > 1 else kwargs.get("copy", True)
    if isinstance(x, RPArray) and not copy:
        raise TypeError(
            "np.nan_to_num(copy=False) cannot write into an RPArray: its replacements need not be values "
            "of the format; assign the result instead, a[...] = np.nan_to_num(np.asarray(a), ...)"
        )
    return func(*_unwrap(args), **_unwrap(kwargs))


def _as_float64(obj):
    """`obj` with every RPArray replaced by its values as a float64 ndarray, and
    other arrays checked as ufunc operands are (:func:`_plain_operand`)."""
    if isinstance(obj, RPArray):
        return obj._data.astype(np.float64)
    if isinstance(obj, (np.ndarray, np.generic)):
        return _plain_operand(obj)
    if isinstance(obj, list):
        return [_as_float64(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_as_float64(item) for item in obj)
    if isinstance(obj, dict):
        return {key: _as_float64(value) for key, value in obj.items()}
    return obj


def _wrap_results(result, target):
    """Floating results as RPArrays of the target (rounded unless already there)."""
    if isinstance(result, tuple) and hasattr(result, "_fields"):  # a named tuple (np.linalg.qr, svd, ...)
        return type(result)(*(_wrap_results(item, target) for item in result))
    if isinstance(result, (list, tuple)):
        return type(result)(_wrap_results(item, target) for item in result)
    if isinstance(result, np.ndarray) and result.dtype.kind != "f":
        return result
    if not isinstance(result, (np.ndarray, np.floating, float)):
        return result
    if isinstance(target, _LazyTarget):
        target = target.get()
        return RPArray._wrap(_round_values(np.asarray(result), target), target)
    if isinstance(result, np.ndarray) and result.dtype == target.fmt.carrier:
        return RPArray._wrap(result, target)  # rearranged carrier values
    return RPArray._wrap(_round_values(np.asarray(result), target), target)


def _write_out(result, out, arrays):
    destination = out[0] if isinstance(out, tuple) else out
    result = np.asarray(result)
    if isinstance(destination, RPArray):
        destination._data[...] = _round_values(result, destination._target)
    else:
        destination[...] = _round_values(result, combine_targets(arrays))
    return destination
