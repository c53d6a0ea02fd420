"""Bit-flip fault injection: :func:`flip_bits` rounds data onto a format and flips
each bit of its codes independently with probability ``p`` (a binary symmetric
channel on a field of the code), reproducibly from a seed."""
from __future__ import annotations

import numbers

import numpy as np

from . import _codes
from ._plan import plan_for, random_key
from .fixedformat import FixedFormat
from .presets import format as to_format
from .rounding import encode, input_array, is_dask
from .scaledformat import ScaledFormat
from .scaling import ScaledCodes, decode_scaled

__all__ = ["flip_bits", "FIELDS", "field_mask", "flip_setup", "flipped_codes", "values_as"]

FIELDS = ("sign", "exponent", "significand", "all")
_STREAM_END = 1 << 64  # p = 1: every random number lies below it


def flip_bits(x, fmt, p, *, field="all", rng=None):
    """Round `x` onto `fmt`, flip each bit of a field of its codes with
    probability `p`, and return the values of the flipped codes.

    Parameters
    ----------
    x : array_like
        Real numbers (integers and bools are taken as float64), any shape.
        Rounded to nearest (ties to even) with the format's overflow policy, as
        :func:`rpfloat.encode` does; values of `fmt` are kept as they are. A
        dask array gives a lazy dask array with the same bits
        (:func:`rpfloat.dask.flip_bits`).
    fmt : FloatFormat, FixedFormat, ScaledFormat or str
        The format (or its name). For a :class:`~rpfloat.ScaledFormat` the bits
        of the element codes flip and the scales stay (`field` names a field of
        the element format); to corrupt scale codes, flip bits of
        ``rp.encode(x, fmt).scales`` yourself and ``rp.decode`` the result.
    p : float
        Probability, in [0, 1], that a bit of the field flips. 0 flips nothing,
        1 flips every bit of the field.
    field : {"all", "sign", "exponent", "significand"}
        The bits that may flip. Floating point: the sign bit, the ``exp_bits``
        exponent bits, the ``man_bits`` low (stored significand) bits, or all
        of them. Fixed point has no exponent: ``"significand"`` is every bit of
        the two's complement word but the sign bit of a signed format (every
        bit of an unsigned one), and ``"sign"`` the top bit of a signed format.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness, as for stochastic rounding in :func:`rpfloat.round`: an int
        seed gives the same flips on every call. Bit ``b`` (0: least
        significant) of the code of element ``i`` (C-order flat index) flips iff
        number ``i * fmt.bits + b`` of the seed's counter-based stream
        (``rpfloat._kernels.core.stream.random_bits``) is below
        ``round(p * 2**64)``, so a bit's fate depends on ``(seed, i, b, p)``
        alone, not on the field, the shape or the other elements.

    Returns
    -------
    ndarray or numpy scalar
        The decoded flipped codes, of the dtype ``rp.round(x, fmt)`` returns; a
        numpy scalar for a 0-d input. Codes that flips turn into NaN or ±inf
        codes decode to NaN or ±inf as :func:`rpfloat.decode` does (``-0`` of a
        fnuz format is its NaN; a format without subnormals reads a zero
        exponent field as zero).

    Raises
    ------
    TypeError
        For complex `x`, a `fmt` that is not a format, a `field` that is not a
        string, or a `p` that is not a real number.
    ValueError
        For `p` outside [0, 1] (or NaN), a `field` the format does not have
        (``"exponent"`` of fixed point, ``"sign"`` of an unsigned format,
        ``"significand"`` of a format with none), a format without codes
        (``exp_bits=None``), or NaN in `x` for a format without NaN.

    Examples
    --------
    >>> import rpfloat as rp
    >>> rp.flip_bits([1.0, -2.0, 0.5], "e4m3", 1.0, field="sign")
    array([-1. ,  2. , -0.5])
    >>> rp.flip_bits([1.0, 3.0], "e4m3", 1.0, field="significand")  # codes 0x38, 0x44 xor 0x07
    array([1.875, 2.75 ])
    >>> y = rp.flip_bits([0.1] * 4, "bfloat16", 0.25, rng=7)
    >>> bool((y == rp.flip_bits([0.1] * 4, "bfloat16", 0.25, rng=7)).all())
    True
    """
    if is_dask(x):  # lazily, chunk by chunk, with the same bits
        from . import dask as dask_adapter

        return dask_adapter.flip_bits(x, fmt, p, field=field, rng=rng)
    fmt, mask, threshold = flip_setup(fmt, p, field)
    array = input_array(x)
    if array.dtype.kind == "c":
        raise TypeError("flip_bits takes real numbers; flip x.real and x.imag separately")
    dtype = plan_for(fmt, "nearest", None, None, array.dtype).result_dtype
    key = random_key(rng)  # drawn whatever p, so that a Generator advances once per call
    if isinstance(fmt, ScaledFormat):
        codes = encode(array, fmt)
        flipped = flipped_codes(codes.elements, fmt.element.bits, mask, threshold, key)
        values = decode_scaled(ScaledCodes(flipped, codes.scales, codes.tensor_scale), fmt)
    else:
        flipped = flipped_codes(encode(array, fmt), fmt.bits, mask, threshold, key)
        values = _codes.decode_values(flipped, fmt)
    result = values_as(values, dtype)
    return result[()] if result.ndim == 0 else result


def flip_setup(fmt, p, field) -> tuple:
    """``(fmt, mask, threshold)`` of a :func:`flip_bits` call: the format, the
    bits of `field` in its (element) codes and ``round(p * 2**64)``; the errors
    :func:`flip_bits` raises for them."""
    fmt = to_format(fmt)
    if not isinstance(fmt, (ScaledFormat, FixedFormat)) and fmt.bits is None:
        raise ValueError("fmt has no encoding: exp_bits=None formats have no bit patterns to flip")
    element = fmt.element if isinstance(fmt, ScaledFormat) else fmt
    return fmt, field_mask(element, field), _threshold(p)


def values_as(values, dtype) -> np.ndarray:
    """Decoded `values` in `dtype` (scaled values beyond float32 become inf, as
    rp.round's would)."""
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(dtype)


def field_mask(fmt, field) -> int:
    """The bits of `field` in a code of `fmt` (FloatFormat or FixedFormat), as an int.

    Examples
    --------
    >>> import rpfloat as rp
    >>> hex(field_mask(rp.format("e4m3"), "exponent")), hex(field_mask(rp.format("q4.4"), "significand"))
    ('0x78', '0x7f')
    """
    if not isinstance(field, str):
        raise TypeError(f"field must be a string, one of {FIELDS}, got {type(field).__name__}")
    if field not in FIELDS:
        raise ValueError(f"field must be one of {FIELDS}, got {field!r}")
    bits = fmt.bits
    top_bit = 1 << (bits - 1)
    if isinstance(fmt, FixedFormat):
        masks = {"all": (1 << bits) - 1,
                 "sign": top_bit if fmt.signed else 0,
                 "exponent": 0,
                 "significand": top_bit - 1 if fmt.signed else (1 << bits) - 1}
    else:
        masks = {"all": (1 << bits) - 1,
                 "sign": top_bit,
                 "exponent": ((1 << fmt.exp_bits) - 1) << fmt.man_bits,
                 "significand": (1 << fmt.man_bits) - 1}
    if masks[field] == 0:
        raise ValueError(f"field={field!r}: {fmt!r} has no {field} bits")
    return masks[field]


def _threshold(p) -> int:
    """``round(p * 2**64)``: a stream number below it flips a bit (2**64 for p = 1)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise TypeError(f"p must be a real number in [0, 1], got {type(p).__name__}")
    probability = float(p)
    if not 0.0 <= probability <= 1.0:  # NaN fails too
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    return round(probability * 2.0**64)  # exact: scaling by a power of two


def flipped_codes(codes, bits, mask, threshold, key, offset=0) -> np.ndarray:
    """`codes` with the bits of `mask` flipped as `flip_bits` describes, in their
    dtype; code ``i`` (C order) is element ``offset + i`` of the whole."""
    if threshold == 0:
        return codes
    if threshold == _STREAM_END:
        return codes ^ codes.dtype.type(mask)
    from ._kernels.cpu.faults import flip_field_bits  # compiled (or loaded from cache) on first use

    words = codes.astype(np.uint64, order="C").reshape(-1)  # a copy, in C order
    flip_field_bits(words, np.uint64(mask), np.uint64(threshold), np.uint64(key), offset, bits)
    return words.astype(codes.dtype).reshape(codes.shape)
