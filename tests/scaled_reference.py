"""A slow, exact oracle for the scaled formats (``rp.ScaledFormat``).

Written from the specification of block scaling, not from rpfloat's kernels.
Every step is exact (`fractions.Fraction`, Python ints); rounding one number onto
the element format or onto a floating-point scale format is done by
`reference.round_reference`, the exact oracle of the element formats.  Like
`reference`, it never imports rpfloat: it reads only the public fields of a scaled
format (element, block_size, axis, scale_format, scale_rounding, tensor_scale) and
of its element and scale formats.

The specification:

* Blocks are `block_size` consecutive elements along `axis` (the last block of a
  slice may be shorter), or the whole array when `block_size` is None.
* A block holding NaN or +-inf is a NaN block: all its results are NaN and so is
  its scale (E8M0 code 0xFF).
* m = max |v| over the block.  With a power-of-two scale X = 2**s and
  emax = floor(log2(element max)):

      floor   s = floor(log2 m) - emax
      ceil    s = ceil(log2 m) - emax
      even    s0 = floor(log2 m) - emax, t = m / 2**s0 (in the element's top
              binade), q = the element's spacing there; s = s0 + 1 if
              RNE(t / q) * q == 2**(emax + 1), else s0
      rceil   the smallest s with m <= element max * 2**s

  then s is clamped to [s_min, s_max] ([-127, 127] for E8M0); an all-zero block
  takes s_min.
* A floating-point scale format: S = m / (element max * g) rounded to nearest-even
  in the scale format (saturating at its max), at least its smallest positive
  value; X = S * g, with g = 1, or with two-level scaling (tensor_scale) g =
  max |x| over finite x / (scale max * element max) rounded once to float32
  (nearest even), kept within [float32's smallest subnormal, its max]
  (g = 1 where that max is 0).
* Each element: q = v / X rounded onto the element format in the given mode,
  saturating at the element's range; the result is X * q (float32 for float16 and
  float32 data, float64 for float64 data and for formats with a tensor scale).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from reference import (
    encode_reference,
    fixed_range,
    float_max,
    floor_log2,
    is_float_format,
    neighbours,
    round_reference,
    smallest_subnormal,
    stochastic_probability,
)

__all__ = [
    "E8M0_NAN_CODE",
    "ScaledReference",
    "element_max",
    "element_emax",
    "top_spacing",
    "scale_range",
    "block_indices",
    "scale_shape",
    "power_of_two_exponent",
    "round_exact",
    "scaled_reference",
    "stochastic_reference",
]

E8M0_NAN_CODE = 0xFF
E8M0_RANGE = (-127, 127)


def _pow2(n: int) -> Fraction:
    return Fraction(1 << n) if n >= 0 else Fraction(1, 1 << -n)


# --------------------------------------------------------------------------------------
# The element format
# --------------------------------------------------------------------------------------


def element_max(element) -> Fraction:
    """The element format's largest value, exactly."""
    if is_float_format(element):
        return float_max(element)
    return Fraction(fixed_range(element)[1]) * _pow2(-element.frac_bits)


def element_emax(element) -> int:
    """floor(log2(element max))."""
    return floor_log2(element_max(element))


def top_spacing(element) -> Fraction:
    """The element's spacing in its top binade [2**emax, 2**(emax + 1))."""
    if is_float_format(element):
        return _pow2(element_emax(element) - element.man_bits)
    return _pow2(-element.frac_bits)


def scale_range(fmt):
    """(s_min, s_max) of a power-of-two scale format, None for a float scale format."""
    scale = fmt.scale_format
    if isinstance(scale, str):
        assert scale.lower() in ("e8m0", "float8_e8m0fnu", "e8m0fnu"), scale
        return E8M0_RANGE
    if isinstance(scale, tuple):
        return tuple(scale)
    return None


def _has_nan_scale(fmt) -> bool:
    return scale_range(fmt) == E8M0_RANGE and isinstance(fmt.scale_format, str)


# --------------------------------------------------------------------------------------
# Exact rounding of a Fraction (reference.round_reference takes Python floats)
# --------------------------------------------------------------------------------------


def round_exact(t: Fraction, fmt, mode: str) -> float:
    """The exact Fraction `t` (nonzero) rounded onto `fmt` (an element or scale
    format) in a deterministic `mode`, saturating; a Python float.

    `reference.round_reference` does the rounding.  It takes a float, and t need
    not be one (v / X may fall outside float64's range or need more than 53 bits),
    so t is first replaced by a float that every deterministic mode rounds the
    same way: the choice between t's neighbours lo < t < hi depends only on
    whether t lies below, on or above their midpoint, so the points halfway
    between lo and the midpoint, the midpoint itself, and halfway between the
    midpoint and hi (a few bits each, exact floats) stand for all of t's side.
    Beyond twice the format's max every mode saturates alike, so t is first
    clamped there. Where the stand-ins are no floats (neighbours 2**-1074 or
    2**-1073 apart, as float64's subnormals), `_round_between` picks.
    """
    assert t != 0, "zeros keep their sign: round the float zero itself"
    top = 2 * element_max(fmt)
    t = max(-top, min(top, t))
    value = _to_float64(t)
    if math.isinf(value):  # (twice a max near float64's): saturates as inf does
        return round_reference(value, fmt, mode, overflow="saturate")
    if value == 0 or Fraction(value) != t:
        lo, hi, _, _ = neighbours(t, fmt)
        assert lo < t < hi
        mid = (lo + hi) / 2
        stand_in = (lo + mid) / 2 if t < mid else mid if t == mid else (mid + hi) / 2
        value = float(stand_in)
        if Fraction(value) != stand_in or value == 0:
            return _round_between(t, fmt, mode)
    return round_reference(value, fmt, mode, overflow="saturate")


def _round_between(t: Fraction, fmt, mode: str) -> float:
    """The exact `t`, strictly between two neighbours of `fmt`'s grid (floats),
    rounded in a deterministic `mode`, saturating (reference.py's rules: the
    neighbour nearer zero or the one farther, by the mode, the distances and,
    for ties and "odd", the parities of their codes)."""
    lo, hi, lo_parity, hi_parity = neighbours(t, fmt)
    # (the neighbours and their codes' parities by magnitude: near zero, far from it)
    near, far, near_parity, far_parity = (hi, lo, hi_parity, lo_parity) if t < 0 else (lo, hi, lo_parity, hi_parity)
    if mode == "toward_zero":
        rounded = near
    elif mode in ("up", "down"):
        rounded = hi if mode == "up" else lo
    elif mode == "odd":  # (both even: only 0 and min_normal without subnormals)
        rounded = near if near_parity == 1 and far_parity == 0 else far
    elif abs(t - near) != abs(far - t):
        rounded = near if abs(t - near) < abs(far - t) else far
    elif mode == "nearest_away":
        rounded = far
    else:  # nearest, a tie: to the even code (both even: min_normal)
        rounded = near if near_parity == 0 and far_parity == 1 else far
    # (a grid value: round_reference keeps it, saturates it past the range, signs a zero)
    return round_reference(float(rounded) if rounded else math.copysign(0.0, t), fmt, mode, overflow="saturate")


def _times(scale: Fraction, q: float) -> Fraction | float:
    """scale * q exactly; a signed zero for q = +-0."""
    if q == 0:
        return q
    return scale * Fraction(q)


def _to_float64(value) -> float:
    """A Fraction rounded to nearest-even float64 (+-inf beyond); a float passes."""
    if isinstance(value, float):
        return value
    try:
        return float(value)  # Fraction.__float__ rounds correctly
    except OverflowError:
        return math.inf if value > 0 else -math.inf


# --------------------------------------------------------------------------------------
# Blocks and scales
# --------------------------------------------------------------------------------------


def block_indices(shape, fmt):
    """Yield ``(scale_index, element_indices)`` for every block of an array of
    `shape`: the index of the block's scale in the scale array (``()`` for one
    scale per array) and the list of the indices of its elements."""
    shape = tuple(shape)
    if fmt.block_size is None or len(shape) == 0:
        yield (), list(np.ndindex(shape))
        return
    ndim = len(shape)
    axis = fmt.axis
    if not -ndim <= axis < ndim:
        raise ValueError("axis out of range")
    axis %= ndim
    length = shape[axis]
    rest = shape[:axis] + shape[axis + 1:]
    for other in np.ndindex(rest):
        for block, first in enumerate(range(0, length, fmt.block_size)):
            indices = [other[:axis] + (a,) + other[axis:]
                       for a in range(first, min(first + fmt.block_size, length))]
            yield other[:axis] + (block,) + other[axis:], indices


def scale_shape(shape, fmt):
    shape = tuple(shape)
    if fmt.block_size is None or len(shape) == 0:
        return ()
    axis = fmt.axis % len(shape)
    return shape[:axis] + (-(-shape[axis] // fmt.block_size),) + shape[axis + 1:]


def power_of_two_exponent(m: Fraction, fmt) -> int:
    """The exponent s of a block's scale 2**s for its largest magnitude m (the
    rule of ``fmt.scale_rounding``, then clamped)."""
    s_min, s_max = scale_range(fmt)
    if m == 0:
        return s_min
    element = fmt.element
    emax = element_emax(element)
    e = floor_log2(m)
    rule = fmt.scale_rounding
    if rule == "floor":
        s = e - emax
    elif rule == "ceil":
        s = (e if m == _pow2(e) else e + 1) - emax
    elif rule == "even":
        s = e - emax
        t = m / _pow2(s)
        assert _pow2(emax) <= t < _pow2(emax + 1)
        q = top_spacing(element)
        steps = t / q
        n = math.floor(steps)
        if steps - n > Fraction(1, 2) or (steps - n == Fraction(1, 2) and n % 2 == 1):
            n += 1
        if n * q == _pow2(emax + 1):
            s += 1
    elif rule == "rceil":
        largest = element_max(element)
        s = e - emax - 1  # largest * 2**s < 2**(emax + 1 + s) = 2**e <= m
        assert m > largest * _pow2(s)
        while m > largest * _pow2(s):
            s += 1
    else:
        raise ValueError(f"unknown scale_rounding {rule!r}")
    return min(max(s, s_min), s_max)


def _tensor_scale(x: np.ndarray, fmt) -> np.float32 | None:
    if not fmt.tensor_scale:
        return None
    finite = np.abs(x[np.isfinite(x)]).astype(np.float64)
    largest = Fraction(float(finite.max())) if finite.size else Fraction(0)
    if largest == 0:
        return np.float32(1)
    exact = largest / (Fraction(float(fmt.scale_format.max)) * element_max(fmt.element))
    top = Fraction(float(np.finfo(np.float32).max))
    if exact >= top:
        return np.float32(top)
    return max(_nearest_float32(exact), np.float32(2.0**-149))  # at least float32's smallest subnormal


def _nearest_float32(exact: Fraction) -> np.float32:
    """The float32 nearest to a positive `exact` below float32's max, ties to an
    even significand: the best of a first guess and its two neighbours."""
    with np.errstate(under="ignore"):
        guess = np.float32(float(exact))
    candidates = [np.nextafter(guess, np.float32(0)), guess, np.nextafter(guess, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1))


def _significand_scale(m: Fraction, fmt, g: Fraction) -> Fraction:
    """S = RNE_scale(m / (element max * g)), saturating, at least the scale
    format's smallest positive value."""
    scale_format = fmt.scale_format
    quotient = m / (element_max(fmt.element) * g)
    rounded = Fraction(round_exact(quotient, scale_format, "nearest")) if quotient != 0 else Fraction(0)
    return max(rounded, smallest_subnormal(scale_format))


class ScaledReference(NamedTuple):
    """What the oracle gives for an array.

    values: the rounded values X * q, in the result dtype (float32 for float16 and
      float32 data, float64 for float64 data); NaN for NaN blocks.
    elements: q per element (float64, NaN for NaN blocks).
    scales: X per block (float64; NaN for NaN blocks), shaped as rp.encode's scale codes.
    scale_codes: the expected scale code per block (int; E8M0 0xFF for NaN blocks).
    exponents: s per block for power-of-two scales (None for NaN blocks and for
      float scale formats), an object array.
    tensor_scale: np.float32 g, or None.
    """

    values: np.ndarray
    elements: np.ndarray
    scales: np.ndarray
    scale_codes: np.ndarray
    exponents: np.ndarray
    tensor_scale: np.float32 | None


def _block_scale(values, fmt, g):
    """(X as a Fraction or None for a NaN block, s or None, the scale's code)."""
    if any(not math.isfinite(v) for v in values):
        if scale_range(fmt) is None:
            try:
                return None, None, encode_reference(math.nan, fmt.scale_format)
            except ValueError:  # a scale format without NaN
                return None, None, None
        return None, None, (E8M0_NAN_CODE if _has_nan_scale(fmt) else None)
    m = max((abs(Fraction(v)) for v in values), default=Fraction(0))
    powers = scale_range(fmt)
    if powers is not None:
        s = power_of_two_exponent(m, fmt)
        return _pow2(s), s, s - powers[0]
    S = _significand_scale(m, fmt, g)
    return S * g, None, encode_reference(float(S), fmt.scale_format)


def _result_dtype(dtype, fmt) -> np.dtype:
    """float64 for float64 data, for a tensor scale (block scale times g has up to
    28 significant bits), for elements float32 cannot hold and for float scales
    whose products with the elements may not be float32 numbers (more than 24
    significant bits, or a step below 2**-149); else float32."""
    wide = np.dtype(dtype) == np.float64 or fmt.tensor_scale or fmt.element.carrier is np.float64
    if is_float_format(fmt.scale_format):
        bits = _most_bits(fmt.element) + fmt.scale_format.man_bits + 1
        wide = wide or bits > 24 or _least_step(fmt.element) * _least_step(fmt.scale_format) < Fraction(2) ** -149
    else:  # power-of-two scales: data past the largest scale saturate onto its steps
        wide = wide or _least_step(fmt.element) * _pow2(scale_range(fmt)[1]) < Fraction(2) ** -149
    return np.dtype(np.float64) if wide else np.dtype(np.float32)


def _most_bits(element) -> int:
    """The most significant bits of a value of `element`."""
    if is_float_format(element):
        return element.man_bits + 1
    return max((k >> ((k & -k).bit_length() - 1)).bit_length() for k in map(abs, fixed_range(element)) if k)


def _least_step(fmt) -> Fraction:
    """A bound below the spacing of every value of `fmt`."""
    if is_float_format(fmt):
        return smallest_subnormal(fmt) * (1 if fmt.subnormals else Fraction(2) ** -fmt.man_bits)
    return Fraction(2) ** -fmt.frac_bits


def scaled_reference(x, fmt, mode: str = "nearest") -> ScaledReference:
    """`x` (a float16, float32 or float64 array of any shape) rounded onto the
    scaled format `fmt` in a deterministic `mode`, exactly (module docstring)."""
    x = np.asarray(x)
    assert x.dtype in (np.float16, np.float32, np.float64), x.dtype
    result_dtype = _result_dtype(x.dtype, fmt)
    g32 = _tensor_scale(x, fmt)
    g = Fraction(float(g32)) if g32 is not None else Fraction(1)
    values = np.empty(x.shape, result_dtype)
    elements = np.empty(x.shape, np.float64)
    shape = scale_shape(x.shape, fmt)
    scales = np.empty(shape, np.float64)
    codes = np.zeros(shape, object)
    exponents = np.empty(shape, object)
    for scale_index, indices in block_indices(x.shape, fmt):
        block = [float(x[i]) for i in indices]
        X, s, code = _block_scale(block, fmt, g)
        scales[scale_index] = np.nan if X is None else _to_float64(X)
        codes[scale_index] = code
        exponents[scale_index] = s
        for i, v in zip(indices, block):
            if X is None:
                elements[i] = values[i] = np.nan
                continue
            q = round_reference(v, fmt.element, mode, overflow="saturate") if v == 0 else \
                round_exact(Fraction(v) / X, fmt.element, mode)
            elements[i] = q
            exact = _times(X, q)
            wide = _to_float64(exact)
            if result_dtype == np.float32:
                assert isinstance(exact, float) or math.isinf(wide) or Fraction(wide) == exact, \
                    "X * q is not a float64: the cast to float32 would round twice"
                with np.errstate(over="ignore"):  # X * q beyond float32's range: +-inf
                    values[i] = np.float32(wide)
            else:
                values[i] = wide
    return ScaledReference(values, elements, scales, codes, exponents, g32)


def stochastic_reference(x, fmt, mode: str = "stochastic"):
    """For stochastic rounding of `x` onto `fmt` (power-of-two scales): arrays
    ``(lo, hi, p_hi)`` of the two possible results (float64, X * the element's
    neighbours, saturation applied) and the exact probability of `hi` (an object
    array of Fractions).  NaN blocks give NaN, NaN, 0."""
    x = np.asarray(x)
    assert scale_range(fmt) is not None, "power-of-two scales only"
    lo = np.empty(x.shape, np.float64)
    hi = np.empty(x.shape, np.float64)
    p = np.empty(x.shape, object)
    for _, indices in block_indices(x.shape, fmt):
        block = [float(x[i]) for i in indices]
        X, _, _ = _block_scale(block, fmt, Fraction(1))
        for i, v in zip(indices, block):
            if X is None:
                lo[i], hi[i], p[i] = np.nan, np.nan, Fraction(0)
                continue
            t = Fraction(v) / X
            assert Fraction(float(t)) == t, "v / X must be a float64 here"
            t = float(t) if v != 0 else v  # a zero keeps its sign
            low, high, p_hi = stochastic_probability(t, fmt.element, mode=mode, overflow="saturate")
            lo[i], hi[i], p[i] = _to_float64(_times(X, low)), _to_float64(_times(X, high)), p_hi
    return lo, hi, p
