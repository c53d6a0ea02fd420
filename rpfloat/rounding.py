"""``round``, ``encode`` and ``decode``: validate the arguments, make a plan
(``rpfloat._plan``), and hand it to the backend with the data."""
from __future__ import annotations

import numbers

import numpy as np

from . import _codes
from ._kernels.cpu import backend
from ._plan import plan_for, random_key, result_dtype, unused_key
from .fixedformat import FixedFormat
from .floatformat import FloatFormat
from .presets import format as to_format
from .scaledformat import ScaledFormat
from .scaling import ScaledCodes, ScaledPlan, decode_scaled, encode_scaled, round_scaled

__all__ = ["round", "round_chunk", "encode", "decode", "result_dtype"]


def round(x, fmt, mode="nearest", *, overflow=None, rng=None, rand_bits=None, out=None, stats=False):
    """Round `x` onto the values of `fmt`, returned as floating-point numbers.

    Parameters
    ----------
    x : array_like
        Real or complex numbers (integers and bools are taken as float64). Any
        shape, strides or byte order; never modified unless it is `out`. A dask
        array gives a lazy dask array (``rpfloat.dask``, docs/dask.md); a CUDA
        device array is rounded on its device (``rpfloat.cuda``, docs/gpu.md).
    fmt : FloatFormat, FixedFormat, ScaledFormat or str
        The target format or a name accepted by :func:`rpfloat.format`. A
        :class:`~rpfloat.ScaledFormat` rounds blocks with shared scales
        (docs/scaled.md); its elements always saturate.
    mode : str
        ``"nearest"`` (ties to even), ``"nearest_away"``, ``"toward_zero"``,
        ``"up"``, ``"down"``, ``"odd"``, ``"stochastic"`` or ``"stochastic_equal"``,
        or one of their aliases (docs/rounding.md defines each).
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
    stats : bool, default False
        True: return ``(rounded, stats)``, with a
        :class:`rpfloat.stats.RoundingStats` of the rounding (counts of inexact,
        overflowed, underflowed, flushed and NaN results, errors, packed size;
        docs/cli.md defines them), gathered in one more pass over the data.

    Returns
    -------
    ndarray or numpy scalar
        Of dtype ``np.result_type(x.dtype, fmt.carrier)``; a numpy scalar for a
        0-d or scalar input. NaN stays NaN (a NaN input keeps its bits); exactly
        representable values, ``-0`` included, are returned unchanged, except that
        formats without ``-0`` (fnuz, fixed point) give ``+0``; ``±inf`` stay where
        the format has them, else they overflow like any value beyond ``max``.
        With ``stats=True``, the pair ``(rounded, stats)``.

    Examples
    --------
    >>> import rpfloat as rp
    >>> float(rp.round(1 / 3, "bfloat16"))
    0.333984375
    >>> rp.round([1000.0, 465.0], "e4m3", overflow="saturate")
    array([448., 448.])
    """
    if x.__class__ is not np.ndarray:
        if is_dask(x):
            if out is not None or stats is not False:
                raise TypeError("out= and stats= are for NumPy arrays; a dask array gives a lazy result")
            return _dask_adapter().round(x, fmt, mode, overflow=overflow, rng=rng, rand_bits=rand_bits)
        if _is_device_array(x):  # CUDA arrays (numba, CuPy, torch) round on their device
            if stats is not False:
                raise TypeError("stats= is for host arrays")
            from . import cuda

            return cuda.round(x, fmt, mode, overflow=overflow, rng=rng, rand_bits=rand_bits, out=out)
    return round_chunk(x, fmt, mode, overflow=overflow, rng=rng, rand_bits=rand_bits, out=out, stats=stats)


def is_dask(x) -> bool:
    """Whether `x` is a dask array (checked without importing dask)."""
    return type(x).__module__.startswith("dask.")


def _is_device_array(x) -> bool:
    """Whether `x` lives on a CUDA device: ``rpfloat.cuda.is_device_array`` (a light
    module: numba.cuda loads on the first launch)."""
    from .cuda import is_device_array

    return is_device_array(x)


def _dask_adapter():
    from . import dask as adapter  # imports dask: only for dask arrays

    return adapter


def round_chunk(x, fmt, mode="nearest", *, offset=0, overflow=None, rng=None, rand_bits=None, out=None,
                stats=False):
    """:func:`round` for a chunk of a larger array whose first element has C-order
    flat index `offset` in the whole: with the same int seed, the chunk gets the
    bits that rounding the whole would give it (dask, GPUs, streaming). For a
    scaled format that holds where the chunk is made of whole blocks (its scales
    depend on the blocks' contents), never for one scale per array. With
    ``stats=True``, ``(rounded, stats)``: the chunk's statistics, which
    ``RoundingStats.combined`` adds up over chunks."""
    if stats is not False:
        from .stats import round_with_stats  # imported on first use

        return round_with_stats(x, fmt, mode, stats=stats, offset=offset, overflow=overflow, rng=rng,
                                rand_bits=rand_bits, out=out)
    array = input_array(x)
    plan = plan_for(fmt, mode, overflow, rand_bits, array.dtype)
    if plan.__class__ is ScaledPlan:
        if out is None:
            return round_scaled(array, plan, rng, _offset(offset, array), None)
        round_scaled(array, plan, rng, _offset(offset, array), _prepare_out(out, array.shape, plan.result_dtype))
        return out
    key = random_key(rng) if plan.mode.is_stochastic else 0 if rng is None else unused_key(rng)
    result = _prepare_out(out, array.shape, plan.result_dtype)
    if out is not None and _overlaps_elsewhere(array, result):
        array = array.copy()  # as NumPy's ufuncs do: read all of x before writing out
    backend.run(plan, array, result, key, _offset(offset, array))
    if out is not None:
        return out
    return result[()] if result.ndim == 0 else result


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


def input_array(x, name="x") -> np.ndarray:
    """`x` as an ndarray of a numeric dtype, without copying; TypeError (naming
    `name`) otherwise. Subclasses become plain ndarrays (np.matrix keeps two
    dimensions under reshape(-1), which the kernels' flat views need); masked
    arrays are refused. ml_dtypes arrays (bfloat16, float8_*, int4, ...) become
    float32 copies: float32 holds every one of their values. Python ints that
    NumPy holds as objects (beyond int64, or beside floats) become float64."""
    if type(x) is not np.ndarray:
        if isinstance(x, (str, FloatFormat, FixedFormat, ScaledFormat)) and _names_a_format(x):
            raise TypeError(f"{name} is the format {x!r}: the data come first and the format second, as in "
                            "rp.round(x, fmt)")
        if type(x).__module__.startswith("torch") and getattr(x, "requires_grad", False):
            raise TypeError(f"{name} is a torch tensor that requires grad: rpfloat.torch.round(x, fmt) rounds "
                            f"it with a gradient (or round {name}.detach())")
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{name} is a masked array, whose masked entries rpfloat would round as numbers: use "
                        f"{name}.filled(...) or {name}.data, and mask the result with "
                        f"np.ma.masked_array(..., mask={name}.mask)")
    array = x if type(x) is np.ndarray else _as_numpy(x, name)
    if array.dtype == object and not isinstance(x, np.ndarray) and _python_numbers(array):
        complex_items = any(isinstance(item, numbers.Complex) and not isinstance(item, numbers.Real)
                            for item in array.flat)
        try:  # Python ints beyond int64, taken as float64 (complex128 beside complex numbers)
            array = np.array(x, dtype=np.complex128 if complex_items else np.float64)
        except OverflowError:
            raise ValueError(f"{name} holds an integer beyond float64's range (it rounds to 2**1024 or more), "
                             "which rpfloat does not compute in") from None
    elif is_ml_dtype(array.dtype):
        array = array.astype(np.float32)
    if array.dtype.kind not in "biufc":
        raise TypeError(
            f"{name} must hold real or complex numbers, got an array of dtype {array.dtype}; "
            f"convert it with np.asarray({name}, dtype=float) first"
        )
    if array.dtype.kind in "fc" and array.dtype.itemsize > (16 if array.dtype.kind == "c" else 8):
        raise TypeError(
            f"{name} has dtype {array.dtype}, wider than float64, which rpfloat does not compute in; "
            f"convert it with {name}.astype(np.float64) (one rounding to nearest) first"
        )
    return array


def _as_numpy(x, name) -> np.ndarray:
    """``np.asarray(x)``, with NumPy's refusals of torch tensors of dtypes it has
    no type for (bfloat16, float8) and of ragged nested sequences naming `name`."""
    try:
        return np.asarray(x)
    except TypeError:
        if type(x).__module__.startswith("torch"):
            device, layout = getattr(x, "device", None), str(getattr(x, "layout", "torch.strided"))
            if device is not None and device.type not in ("cpu", "cuda"):
                raise TypeError(f"{name} is a torch tensor on device {device}, which holds no values to "
                                "round; rpfloat rounds CPU tensors (and CUDA ones with rpfloat.cuda.round)") from None
            if layout != "torch.strided":
                raise TypeError(f"{name} is a torch tensor of layout {layout}: pass {name}.to_dense(), or round "
                                f"the stored values ({name}.values() of a COO tensor)") from None
            raise TypeError(f"{name} is a torch tensor of dtype {x.dtype}, which NumPy cannot hold: "
                            f"rpfloat.torch.round({name}, fmt) rounds it as a tensor (or pass "
                            f"{name}.float())") from None
        raise
    except ValueError as error:
        raise ValueError(f"{name} is not an array of numbers: {error}") from None
    except RuntimeError:  # a torch tensor with a lazy conjugate or negative bit (t.conj())
        if type(x).__module__.startswith("torch") and hasattr(x, "resolve_conj"):
            return np.asarray(x.resolve_conj().resolve_neg())
        raise


def is_ml_dtype(dtype: np.dtype) -> bool:
    """Whether `dtype` is one of ml_dtypes' (bfloat16, float8_*, int4, ...)."""
    return dtype.kind == "V" and getattr(dtype.type, "__module__", None) == "ml_dtypes"


def _names_a_format(x) -> bool:
    """Whether `x` is a format, or a string that names one."""
    try:
        to_format(x)
    except (TypeError, ValueError):
        return False
    return True


def _python_numbers(array) -> bool:
    """Whether every item of the object array is an int, a bool, a float or a
    complex number (of Python, NumPy or ml_dtypes, at most float64 wide):
    numbers that float64 (complex128) takes, Python ints beyond int64 rounded once."""
    return all(isinstance(item, (numbers.Integral, float, complex, np.bool_))
               or (isinstance(item, np.floating) and item.dtype.itemsize <= 8)
               or (isinstance(item, np.complexfloating) and item.dtype.itemsize <= 16)
               or (isinstance(item, np.generic) and is_ml_dtype(item.dtype)) for item in array.flat)


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


def _prepare_out(out, shape, dtype, shape_name="the shape of x,") -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy ndarray, got {type(out).__name__}")
    if out.dtype != dtype and out.dtype.newbyteorder("=") != dtype:  # (either byte order)
        raise TypeError(f"out must have the result dtype {np.dtype(dtype)}, got {out.dtype}")
    if out.shape != shape:
        raise ValueError(f"out must have {shape_name} {shape}, got {out.shape}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    # a subclass (np.matrix, a masked array) is written through a plain view of its memory:
    # the kernels take ndarrays, and a matrix stays 2-D where they flatten
    return out if type(out) is np.ndarray else out.view(np.ndarray)


def encode(x, fmt, mode="nearest", **round_kwargs):
    """Round `x` onto `fmt` and return the codes (bit patterns) of the results.

    Codes are ``sign | exponent | significand`` for floating-point formats
    (bit-identical to ``ml_dtypes`` arrays viewed as unsigned integers; NaN
    becomes the format's canonical NaN code) and two's complement words for
    fixed-point formats, in the narrowest unsigned dtype holding ``fmt.bits``.
    For a :class:`~rpfloat.ScaledFormat`, a ``ScaledCodes`` tuple: the element
    codes, the scale codes (E8M0: ``s + 127``, 0xFF for a NaN block) and the
    float32 tensor scale of two-level scaling (else None).

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
    if is_dask(x):
        return _dask_adapter().encode(x, fmt, mode, **round_kwargs)
    check_encode_keywords(round_kwargs)
    fmt = to_format(fmt)
    if isinstance(fmt, ScaledFormat):
        codes = encode_scaled(input_array(x), fmt, mode, **round_kwargs)
        if np.ndim(codes.elements) == 0:  # a scalar's codes: NumPy scalars, as for the other formats
            codes = codes._replace(elements=np.asarray(codes.elements)[()], scales=np.asarray(codes.scales)[()])
        return codes
    if fmt.bits is None:
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns")
    rounded = np.asarray(round(x, fmt, mode, **round_kwargs))
    if rounded.dtype.kind == "c":
        raise TypeError("encode takes real numbers; encode x.real and x.imag separately")
    with np.errstate(invalid="ignore"):  # signalling NaNs are NaNs like any other
        values = rounded.astype(np.float64, copy=False)
    codes = _codes.encode_values(values, fmt)
    return codes[()] if codes.ndim == 0 else codes  # a scalar's code: a NumPy scalar, as rp.round gives


def check_encode_keywords(round_kwargs) -> None:
    """TypeError for a keyword of :func:`encode` other than overflow, rng and
    rand_bits (out= and stats= are rp.round's: codes are neither values nor
    statistics)."""
    unknown = set(round_kwargs) - {"overflow", "rng", "rand_bits"}
    if unknown:
        raise TypeError(f"encode got unexpected keyword arguments {sorted(unknown)}; it takes overflow, rng "
                        "and rand_bits")


def decode(codes, fmt):
    """The values (in ``fmt.carrier``) of the bit patterns `codes` of `fmt`.

    For a :class:`~rpfloat.ScaledFormat`, `codes` is what :func:`encode` returns
    (element codes, scale codes[, tensor scale]) and the values are float64.

    Examples
    --------
    >>> import rpfloat as rp
    >>> rp.decode([56, 192], "e4m3")
    array([ 1., -2.], dtype=float16)
    """
    if is_dask(codes) or (isinstance(codes, tuple) and codes and is_dask(codes[0])):  # also ScaledCodes
        return _dask_adapter().decode(codes, fmt)
    fmt = to_format(fmt)
    if isinstance(fmt, ScaledFormat):
        return decode_scaled(codes, fmt)
    if isinstance(codes, ScaledCodes):
        raise TypeError("codes is a ScaledCodes: decode it with its ScaledFormat, or decode codes.elements "
                        "with the element format")
    if fmt.bits is None:
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns")
    codes = _codes.code_array(codes)
    result = _codes.decode_values(codes, fmt).astype(fmt.carrier)
    return result[()] if result.ndim == 0 else result
