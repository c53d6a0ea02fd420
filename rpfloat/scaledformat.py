"""Scaled formats: :class:`ScaledFormat`, elements of a format times a shared scale.

A scaled format rounds each block of consecutive elements (along one axis), or
the whole array, onto an element format after dividing it by a scale chosen
from the block's largest magnitude. That is dynamic fixed point and block
floating point (one scale per tensor), OCP Microscaling (MXFP8, MXFP6, MXFP4,
MXINT8: blocks of 32 with a power-of-two E8M0 scale) and NVFP4 (E2M1 elements in
blocks of 16 with an E4M3 scale). Like the other formats it is plain, frozen,
hashable data; the rounding lives in ``rpfloat.scaling``.
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from .fixedformat import FixedFormat
from .floatformat import FloatFormat, Replaceable, as_bool, as_int, check_name, format_repr

__all__ = ["ScaledFormat", "SCALE_ROUNDINGS", "E8M0_RANGE"]

SCALE_ROUNDINGS = ("floor", "ceil", "even", "rceil")
E8M0_RANGE = (-127, 127)  # the exponents of E8M0's finite codes 0..254 (255 is NaN)
_LARGEST_SCALE_EXPONENT = 1022  # 2**s and 2**-s stay normal float64 numbers
# float32's least subnormal (the least tensor scale) times this is float64's least normal
_LEAST_SCALE_UNDER_TENSOR_SCALE = 2.0**-873


@dataclass(frozen=True, repr=False)
class ScaledFormat(Replaceable):
    """Elements of a format, each block of them times a shared scale.

    Immutable and hashable; ``==`` and ``hash`` use every field except ``name``.

    Parameters
    ----------
    element : FloatFormat, FixedFormat or str
        The format of the scaled elements (a name is looked up with
        :func:`rpfloat.format`). Its ``exp_bits`` must be bounded and its
        largest value positive.
    block_size : int, optional
        Elements per scale along `axis` (the last block of a slice may be
        shorter). ``None`` (default): one scale for the whole array.
    axis : int, default -1
        The axis along which blocks run (only -1 where ``block_size`` is None).
    scale_format : "e8m0", (int, int), FloatFormat or str, default "e8m0"
        ``"e8m0"``: power-of-two scales ``2**s`` with ``s`` in [-127, 127] and a
        NaN code (OCP MX). A pair ``(s_min, s_max)``: power-of-two scales with
        that exponent range and no NaN code. A floating-point format (or its
        name, such as ``"e4m3"``): scales with significand bits (NVFP4), whose
        precision plus the most significant bits of an element value (plus 24
        with `tensor_scale`) must be at most 53, so that the float64 quotients
        ``m / element.max`` and ``v / X`` round as the exact ones (``"float64"``
        is refused: 53 bits of its own).
    scale_rounding : {"floor", "ceil", "even", "rceil"}, default "floor"
        How a power-of-two scale exponent follows the block's largest magnitude
        ``m``, with ``emax = floor(log2(element.max))``: ``"floor"``
        ``floor(log2 m) - emax`` (OCP MX); ``"ceil"`` ``ceil(log2 m) - emax``;
        ``"even"`` as floor after rounding ``m`` to the element's precision;
        ``"rceil"`` ``ceil(log2(m / element.max))``, so that nothing saturates.
        Scales with significand bits always take ``m / element.max`` rounded to
        nearest-even.
    tensor_scale : bool, default False
        With a floating-point scale format only: a second, float32 scale per
        array, ``g = max|x| / (scale_format.max * element.max)``, that the block
        scales are relative to (NVFP4's two-level scaling). The scale format's
        smallest value must be at least ``2**-873``.
    name : str, optional
        Display name; not part of ``==`` or ``hash``.

    Attributes
    ----------
    element_emax : int
        ``floor(log2(element.max))``.
    scale_range : (int, int) or None
        The scale exponents of a power-of-two scale format, else None.
    scale_bits : int
        Bits of one scale code.
    bits : int
        Bits of one element code.
    bits_per_element : float or None
        ``bits + scale_bits / block_size`` (None for one scale per array).
    carrier : type
        The dtype ``rp.round`` returns for float16 and float32 data:
        ``np.float32``, unless the element needs float64, the format has a
        tensor scale (a block scale times a float32 tensor scale has up to 28
        significant bits), or a significand scale times an element need not be
        a float32 (more than 24 significant bits together, or a step below
        2**-149). Rounded float32 data are then float32 numbers.

    Examples
    --------
    >>> import rpfloat as rp
    >>> mx = ScaledFormat("e4m3", block_size=32)
    >>> mx.scale_range, mx.bits_per_element
    ((-127, 127), 8.25)
    >>> rp.round([1.0, 3.0, 1000.0], ScaledFormat("e2m1"))
    array([  0.,   0., 768.])
    """

    element: FloatFormat | FixedFormat
    block_size: int | None = None
    axis: int = -1
    scale_format: object = "e8m0"
    scale_rounding: str = "floor"
    tensor_scale: bool = False
    name: str | None = field(default=None, compare=False)

    def __post_init__(self):
        from .presets import format as to_format  # presets import this module

        set_field = object.__setattr__.__get__(self)
        element = self.element
        if isinstance(element, ScaledFormat):
            raise TypeError("element must be a FloatFormat or FixedFormat, not a ScaledFormat")
        if not isinstance(element, (FloatFormat, FixedFormat)):
            if not isinstance(element, str):
                raise TypeError(f"element must be a FloatFormat, FixedFormat or format name, got "
                                f"{type(element).__name__}")
            element = to_format(element)
            if isinstance(element, ScaledFormat):
                raise TypeError(f"element {self.element!r} names a scaled format; pass an element format")
        if isinstance(element, FloatFormat) and element.exp_bits is None:
            raise ValueError("element must have a bounded exponent (exp_bits=None has no largest value)")
        set_field("element", element)
        if self.block_size is not None:
            set_field("block_size", as_int(self.block_size, "block_size"))
            if not 1 <= self.block_size < 2**63:  # (the kernels count in int64)
                raise ValueError(f"block_size must be >= 1 and below 2**63, or None, got {self.block_size}")
        set_field("axis", as_int(self.axis, "axis"))
        if self.block_size is None and self.axis != -1:
            raise ValueError(
                f"axis={self.axis} has no effect with block_size=None (one scale for the whole array); for "
                f"one scale per slice along axis {self.axis}, pass block_size=x.shape[{self.axis}]")
        set_field("tensor_scale", as_bool(self.tensor_scale, "tensor_scale"))
        check_name(self.name)
        set_field("scale_format", _scale_format(self.scale_format, to_format))
        if not isinstance(self.scale_rounding, str) or self.scale_rounding not in SCALE_ROUNDINGS:
            raise ValueError(f"scale_rounding must be one of {SCALE_ROUNDINGS}, got {self.scale_rounding!r}")
        if not element.max > 0:  # (FixedFormat(1, 0) holds -1 and 0: no block scale fits a positive max)
            raise ValueError(f"element {element!r} has no positive value: the block scale follows "
                             "max|v| / element.max")
        if isinstance(self.scale_format, FloatFormat):
            if self.tensor_scale and self.scale_format.smallest_subnormal < _LEAST_SCALE_UNDER_TENSOR_SCALE:
                # a block scale times the float32 tensor scale, in float64, must stay normal: below,
                # an all-zero block's scale (the least) would multiply to 0 and its zeros divide to NaN
                raise ValueError(
                    f"tensor_scale=True needs a scale_format whose smallest value is at least 2**-873, so "
                    f"that its product with a float32 tensor scale is a normal float64; "
                    f"{self.scale_format!r} goes down to {self.scale_format.smallest_subnormal!r}")
            if self.scale_rounding != "floor":
                raise ValueError(
                    f"scale_rounding={self.scale_rounding!r} is for power-of-two scales; a scale format "
                    "with significand bits takes m / element.max rounded to nearest-even")
            _check_scale_rounds_once(self.scale_format, element, self.tensor_scale)
        elif self.tensor_scale:
            raise ValueError("tensor_scale=True needs a floating-point scale_format (NVFP4: 'e4m3')")

    # -- derived ----------------------------------------------------------------

    @property
    def element_emax(self) -> int:
        return math.frexp(self.element.max)[1] - 1

    @property
    def scale_range(self) -> tuple[int, int] | None:
        if self.scale_format == "e8m0":
            return E8M0_RANGE
        if isinstance(self.scale_format, tuple):
            return self.scale_format
        return None

    @property
    def has_nan_scale(self) -> bool:
        """Whether a scale code marks a block as NaN (E8M0's 0xFF, a float scale's NaN)."""
        if self.scale_format == "e8m0":
            return True
        if isinstance(self.scale_format, tuple):
            return False
        return self.scale_format.has_nan

    @property
    def scale_bits(self) -> int:
        if self.scale_format == "e8m0":
            return 8
        if isinstance(self.scale_format, tuple):
            low, high = self.scale_format
            return max(1, (high - low).bit_length())
        return self.scale_format.bits

    @property
    def bits(self) -> int:
        return self.element.bits

    @property
    def bits_per_element(self) -> float | None:
        if self.block_size is None:
            return None
        return self.bits + self.scale_bits / self.block_size

    @functools.cached_property
    def carrier(self) -> type:
        """(Computed once: arrays of the format ask for it on every operation.)
        float32 where every scale times every element is a float32 (float32 data
        stay within its range: the scales follow the data), else float64: an element
        of float64, a tensor scale, significand scales whose products with the
        elements have more than 24 significant bits or a finer step than 2**-149,
        or a largest power-of-two scale that makes the element's step finer than
        2**-149 (the data then saturate onto values below float32's range)."""
        if self.element.carrier is np.float64 or self.tensor_scale:
            return np.float64
        if isinstance(self.scale_format, FloatFormat):
            precision = _precision(self.element) + self.scale_format.precision
            finest_step = _quantum_exponent(self.element) + _quantum_exponent(self.scale_format)
            if precision > 24 or finest_step < -149:
                return np.float64
        elif _quantum_exponent(self.element) + self.scale_range[1] < -149:
            return np.float64  # a largest scale so small that data saturate onto steps finer than float32's
        return np.float32

    def __repr__(self) -> str:
        arguments = [("element", _named(self.element))]
        if self.block_size is not None:
            arguments.append(("block_size", self.block_size))
        if self.axis != -1:
            arguments.append(("axis", self.axis))
        if self.scale_format != "e8m0":
            scale = self.scale_format
            arguments.append(("scale_format", _named(scale) if isinstance(scale, FloatFormat) else scale))
        if self.scale_rounding != "floor":
            arguments.append(("scale_rounding", self.scale_rounding))
        if self.tensor_scale:
            arguments.append(("tensor_scale", True))
        if self.name is not None:
            arguments.append(("name", self.name))
        return format_repr(self, arguments)


def _check_scale_rounds_once(scale_format: FloatFormat, element, tensor_scale: bool) -> None:
    """ValueError unless the kernels' float64 quotients round as the exact ones:
    a significand scale, ``m / (element.max * g)`` rounded onto `scale_format`,
    and each element, ``v / X`` rounded onto `element` (``X = S * g``).

    Let p be the scale format's precision, t = 24 with a tensor scale (a
    float32) and 0 without, and e the most significant bits of an element
    value (at least those of ``element.max``); the rule is ``p + t + e <= 53``.
    Then the divisors d, ``element.max * g`` and ``X``, are exact in float64,
    and each quotient ``a / d`` is rounded once, to q' (a quotient at or below
    2**-1022, which may lose more, the kernels divide again 2**128 times
    larger). Where q' rounds onto a grid, what it decides turns on boundaries
    b, the grid's values and midpoints, of at most p + 1 bits (the scale's) or
    e + 1 (the element's): ``b * d`` has at most 54, so that with ``b`` in
    ``[2**i, 2**(i+1))`` and ``d`` in ``[2**j, 2**(j+1))`` it is a multiple
    of ``2**(i + j - 52)``, and so is every float64 ``a`` from ``2**(i + j)``
    up (below it, ``b * d`` lies at least that far above ``2**(i + j)``,
    unless b and d are powers of two, whose quotients are exact). An ``a``
    other than ``b * d`` is at least that far from it, more than ``d`` times
    half a step of b's, ``2**(i - 53)``: q' lies on the side of every boundary
    that the exact quotient does, and on one only where that is."""
    tensor_bits = 24 if tensor_scale else 0
    precision = scale_format.man_bits + 1
    element_bits = _precision(element)
    if precision + tensor_bits + element_bits <= 53:
        return
    with_tensor = " and the float32 tensor scale's 24" if tensor_scale else ""
    most_man_bits = 52 - tensor_bits - element_bits
    allowed = (f"a scale_format of at most {most_man_bits} fraction bits" if most_man_bits >= 0
               else "tensor_scale=False" if tensor_scale and most_man_bits + tensor_bits >= 0
               else "a power-of-two scale_format")
    raise ValueError(
        f"scale_format {_named(scale_format)!r} cannot round the scales of element {_named(element)!r} exactly: "
        f"its precision of {precision} bits{with_tensor} and the element's {element_bits} significant bits come "
        f"to {precision + tensor_bits + element_bits}, past float64's 53. Use {allowed} with this element, or an "
        "element of fewer significant bits")


def _precision(element) -> int:
    """The most significant bits of a value of `element`."""
    return element.precision if isinstance(element, FloatFormat) else element._precision()


def _quantum_exponent(fmt) -> int:
    """The exponent of the finest step of `fmt`: its values are multiples of 2**it."""
    return fmt._quantum_exp() if isinstance(fmt, FloatFormat) else -fmt.frac_bits


def _named(fmt):
    """`fmt`'s name where ``rp.format`` gives `fmt` back for it, else `fmt` itself
    (a user's name, or mxint8's element 'int8_mx', would not parse)."""
    from .presets import format as to_format  # (presets imports this module)

    if fmt.name is not None:
        try:
            if to_format(fmt.name) == fmt:
                return fmt.name
        except (TypeError, ValueError):
            pass
    return fmt


def _scale_format(scale_format, to_format):
    """The normalised scale format: "e8m0", a pair of ints, or a FloatFormat."""
    if isinstance(scale_format, str) and scale_format.strip().lower() in ("e8m0", "float8_e8m0fnu", "e8m0fnu"):
        return "e8m0"
    if isinstance(scale_format, (tuple, list)):
        if len(scale_format) != 2:
            raise ValueError(f"scale_format as exponents must be a pair (s_min, s_max), got {scale_format!r}")
        for value in scale_format:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise TypeError(f"scale_format as exponents must be a pair of ints (s_min, s_max), such as "
                                f"(-127, 127), got {scale_format!r}")
        low, high = (int(value) for value in scale_format)
        if not -_LARGEST_SCALE_EXPONENT <= low <= high <= _LARGEST_SCALE_EXPONENT:
            raise ValueError(f"scale_format exponents must satisfy -1022 <= s_min <= s_max <= 1022, "
                             f"got {scale_format!r}")
        return (low, high)
    if isinstance(scale_format, str):
        scale_format = to_format(scale_format)
    if isinstance(scale_format, FloatFormat):
        if scale_format.exp_bits is None:
            raise ValueError("scale_format must have a bounded exponent")
        return scale_format
    raise TypeError(f"scale_format must be 'e8m0', a pair (s_min, s_max) or a FloatFormat, got "
                    f"{type(scale_format).__name__}")
