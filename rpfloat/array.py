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
  results once; ``rp.sum`` / ``rp.dot`` / ``rp.matmul`` round every step instead.
* **array functions** (NEP 18): the structural ones (``reshape``, ``transpose``,
  ``concatenate``, ``stack``, ``where``, ``take``, ``sort``, ...) keep the format;
  ``np.sum``, ``np.mean``, ``np.dot``, ``np.matmul`` (and ``@``) and the other
  reductions compute in float64 and round their final result once. NumPy functions
  without an RPArray implementation see the carrier values (``np.asarray``) and
  return what NumPy returns for them (``np.allclose``, ``np.argmax``, ...).
* **formats combine** into the one whose value set contains the other's (decided
  exactly from the parameters: precision and spacing in every binade, range, sign,
  inf); ``TypeError`` when neither does. Equal value sets (e.g. formats differing
  only in overflow policy or name) take the first operand's. The mode and generator
  come from the first RPArray operand of the winning format. Plain ndarrays and
  Python numbers mix in as exact float64 values.
* **indexing** returns RPArrays -- views for basic slicing, as in NumPy -- and an
  integer index gives a 0-d RPArray rather than a NumPy scalar, so that arithmetic
  on an element stays in the format (``float(a[0])``, ``a[0].item()`` give numbers).
  Assignment rounds the assigned values onto the array's format with its mode.
* **stochastic modes** draw fresh randomness for every operation from the array's
  ``numpy.random.Generator`` (made from ``rng`` by ``np.random.default_rng``); results
  share it, so a program is reproducible from one seed.

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
``reciprocal`` (called plainly, without ``where``/``dtype``) also compute the exact
error of the float64 result with error-free transformations (TwoSum; TwoProduct by
Veltkamp splitting, as NumPy has no fma; the remainder ``a - q b`` for division
and ``a - s**2`` for sqrt), and every element with a nonzero error is rounded from
the exact value (``rpfloat._kernels.cpu.accumulate.round_exact``). Only the nearest
modes on formats with p <= 25, with every operand an RPArray of a contained
format, skip that step. The results are correctly rounded in every mode, with
exact stochastic probabilities, for every format, as long as operands stay below
``2**995`` and results above ``2**-969`` in magnitude (only formats with float64's
exponent range get past that; there the float64 result is rounded). For division
and sqrt the error's magnitude is itself rounded, which can move a stochastic
probability by a relative ``2**-53``. Other ufuncs (``exp``, ``power``, ...) round
their float64 result, which is as accurate as NumPy's.

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

import functools
import numbers
from typing import NamedTuple

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ._kernels.cpu.accumulate import round_pairs_at
from .accumulate import bounded_format, rounding_setup
from .fixedformat import FixedFormat
from .modes import Mode, parse_mode
from .presets import format as to_format
from .scaledformat import ScaledFormat
from ._plan import random_key
from .rounding import round as _round_onto

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
        generator = np.random.default_rng(rng) if mode.is_stochastic else None
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
        return self.copy()

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

    def sum(self, axis=None, **kwargs):
        return np.sum(self, axis=axis, **kwargs)

    def mean(self, axis=None, **kwargs):
        return np.mean(self, axis=axis, **kwargs)

    def prod(self, axis=None, **kwargs):
        return np.prod(self, axis=axis, **kwargs)

    def max(self, axis=None, **kwargs):
        return np.max(self, axis=axis, **kwargs)

    def min(self, axis=None, **kwargs):
        return np.min(self, axis=axis, **kwargs)

    def dot(self, other):
        return np.dot(self, other)

    # -- indexing ------------------------------------------------------------------------

    def __getitem__(self, key):
        result = self._data[_index(key)]
        if not isinstance(result, np.ndarray):
            result = np.asarray(result)  # a 0-d RPArray, not a NumPy scalar
        return self._wrap(result, self._target)

    def __setitem__(self, key, value):
        self._data[_index(key)] = _round_values(_float64_values(value), self._target)

    # -- NEP 13 ----------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        outs = out if out is not None else ()
        for operand in inputs + outs:
            if operand is not None and not _handled(operand):
                return NotImplemented
        if method == "at":
            return _ufunc_at(ufunc, inputs, kwargs)
        values = [_float64_operand(x) for x in inputs]
        residuals = None
        if method == "__call__" and ufunc in _EXACT_UFUNCS and not kwargs:
            results, residuals = _exact_call(ufunc, values)
        else:
            if method == "__call__" and "where" in kwargs:
                kwargs = dict(kwargs, out=None)  # positions left out are not copied back
            results = getattr(ufunc, method)(*values, **kwargs)
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
            return implementation(func, args, kwargs)
        if not all(issubclass(t, (RPArray, np.ndarray)) for t in types):
            return NotImplemented
        return func(*_unwrap(args), **_unwrap(kwargs))


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
        For the stochastic modes: the seed of the array's generator
        (``np.random.default_rng(rng)``), which every operation draws from.

    Raises
    ------
    TypeError
        For complex, string or object input.

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
        indices = np.flatnonzero(flat_residuals)
        if indices.size:
            params, midpoints, _ = rounding_setup(bounded)
            key = random_key(seed) if stochastic else 0
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
    quotient = a / b
    product, error = _two_product(quotient, b)
    remainder = (a - product) - error  # a - quotient * b, exactly
    return quotient, remainder / b


def _sqrt(a):
    root = np.sqrt(a)
    product, error = _two_product(root, root)
    return root, ((a - product) - error) / (2.0 * root)


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


# -- operands and targets -----------------------------------------------------------------------


def _handled(x) -> bool:
    if isinstance(x, RPArray):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "biuf"
    return isinstance(x, _HANDLED_TYPES) and not isinstance(x, (str, bytes))


def _float64_operand(x):
    """An operand for the float64 computation: RPArrays as float64 arrays (exact);
    other operands as they are, so that integer-only arguments keep their type."""
    if isinstance(x, RPArray):
        return x._data.astype(np.float64)
    if isinstance(x, (list, tuple)):
        return np.asarray(_unwrap(x))
    return x


def _float64_values(x) -> np.ndarray:
    """Real values as a float64 ndarray; TypeError for anything else."""
    if isinstance(x, RPArray):
        return x._data.astype(np.float64)
    array = np.asarray(_unwrap(x))
    if array.dtype.kind not in "biuf":
        hint = "; round the real and imaginary parts separately" if array.dtype.kind == "c" else ""
        raise TypeError(f"an RPArray holds real numbers, got an array of dtype {array.dtype}{hint}")
    with np.errstate(invalid="ignore"):
        return array.astype(np.float64)


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
        e >= big_grid.lowest_binade and big_grid.spacing_exp(e) <= small_grid.spacing_exp(e)
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

    def spacing_exp(self, e: int) -> int:
        if self._emin is None:
            return self._quantum
        return max(e, self._emin) - self._man_bits


# -- ufunc results --------------------------------------------------------------------------


def _finish(result, residual, operand_formats, destination, targets: _LazyTarget, kwargs):
    """One ufunc output: rounded into an RPArray, written into `destination`, or a
    plain ndarray for boolean and integer results."""
    scalar = not isinstance(result, np.ndarray)
    result = np.asarray(result)
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


def _check_out_shape(destination, result):
    if destination.shape != result.shape:
        raise ValueError(
            f"non-broadcastable output operand with shape {destination.shape} doesn't match "
            f"the broadcast shape {result.shape}"
        )


def _ufunc_at(ufunc, inputs, kwargs):
    """``ufunc.at(a, indices, b)``: unbuffered in float64, then `a` rounded once."""
    array, indices, *rest = inputs
    operands = [_float64_operand(x) for x in rest]
    if not isinstance(array, RPArray):
        ufunc.at(array, _index(indices), *operands, **kwargs)
        return None
    work = array._data.astype(np.float64)
    ufunc.at(work, _index(indices), *operands, **kwargs)
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


_VIEW_FUNCTIONS = (
    np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
    np.broadcast_to, np.flip, np.fliplr, np.flipud, np.rot90, np.roll, np.repeat, np.tile,
    np.take, np.sort, np.copy, np.diagonal, np.atleast_1d, np.atleast_2d, np.atleast_3d,
    np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.delete, np.resize,
    np.trim_zeros, np.partition,
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
    np.linalg.norm, np.unique, np.percentile, np.quantile,
)


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


@_implements(np.zeros_like, np.ones_like, np.empty_like, np.full_like)
def _like_function(func, args, kwargs):
    """New arrays shaped like an RPArray are RPArrays of its format (fill values
    rounded), unless a dtype is asked for."""
    prototype = args[0] if args else kwargs.get("a")
    if not isinstance(prototype, RPArray) or kwargs.get("dtype") is not None:
        return func(*_unwrap(args), **_unwrap(kwargs))
    kwargs = {key: value for key, value in kwargs.items() if key != "a"}
    result = func(prototype._data.astype(np.float64), *_as_float64(args[1:]), **_as_float64(kwargs))
    return RPArray._wrap(_round_values(result, prototype._target), prototype._target)


def _as_float64(obj):
    """`obj` with every RPArray replaced by its values as a float64 ndarray."""
    if isinstance(obj, RPArray):
        return obj._data.astype(np.float64)
    if isinstance(obj, list):
        return [_as_float64(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_as_float64(item) for item in obj)
    if isinstance(obj, dict):
        return {key: _as_float64(value) for key, value in obj.items()}
    return obj


def _wrap_results(result, target):
    """Floating results as RPArrays of the target (rounded unless already there)."""
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
