"""A slow, exact oracle for rpfloat, written straight from docs/rounding.md and docs/codes.md.

Every value is a `fractions.Fraction`, so nothing here can round by accident.  The
oracle never imports rpfloat: it reads only the public fields of a format object
(`FloatFormat`: exp_bits, man_bits, bias, subnormals, inf, nan, overflow;
`FixedFormat`: int_bits, frac_bits, signed, overflow), so any object with those
fields will do (the self-check uses its own stand-ins).

The model (docs/rounding.md): round onto the format's value set *as if its exponent range
were unbounded above*, then apply overflow.  A float format's magnitudes are

    subnormals  k * 2**(emin - man_bits)            0 <= k < 2**man_bits
    normals     (2**man_bits + s) * 2**(e - man_bits)  e >= emin, 0 <= s < 2**man_bits

and the code of a magnitude (sign excluded) is `field << man_bits | s` with
`field = e - emin + 1` (0 for subnormals), extended to unbounded fields.  Adjacent
magnitudes therefore have consecutive codes -- except 0 and min_normal in a format
without subnormals, whose codes are 0 and `1 << man_bits`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "canonical_mode",
    "resolve_overflow",
    "neighbours",
    "round_reference",
    "stochastic_probability",
    "encode_reference",
    "decode_reference",
    "is_float_format",
    "float_max",
    "floor_log2",
    "min_normal",
    "smallest_subnormal",
    "fixed_range",
    "DETERMINISTIC_MODES",
    "STOCHASTIC_MODES",
]

_MODE_ALIASES = {
    "nearest": "nearest",
    "nearest_even": "nearest",
    "rne": "nearest",
    "nearest_away": "nearest_away",
    "rna": "nearest_away",
    "toward_zero": "toward_zero",
    "truncate": "toward_zero",
    "rtz": "toward_zero",
    "up": "up",
    "toward_positive": "up",
    "down": "down",
    "toward_negative": "down",
    "odd": "odd",
    "stochastic": "stochastic",
    "sr": "stochastic",
    "stochastic_equal": "stochastic_equal",
}

DETERMINISTIC_MODES = ("nearest", "nearest_away", "toward_zero", "up", "down", "odd")
STOCHASTIC_MODES = ("stochastic", "stochastic_equal")


def canonical_mode(mode: str) -> str:
    """The canonical name of a rounding mode or alias (docs/rounding.md)."""
    try:
        return _MODE_ALIASES[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}") from None


def is_float_format(fmt) -> bool:
    return hasattr(fmt, "exp_bits")


# --------------------------------------------------------------------------------------
# Float formats: the grid
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FloatGrid:
    """Everything the oracle needs about a float format, as exact numbers."""

    man_bits: int
    emin: int
    subnormals: bool
    max: Fraction  # largest finite magnitude
    has_inf: bool
    has_nan: bool  # whether some code is NaN
    has_negzero: bool  # whether -0 exists
    nan_kind: str | None
    exp_bits: int | None
    bias: int | None
    default_overflow: str


def _pow2(n: int) -> Fraction:
    return Fraction(1 << n) if n >= 0 else Fraction(1, 1 << -n)


def _float_grid(fmt, dtype=None) -> _FloatGrid:
    if fmt.exp_bits is not None:
        dtype = None  # the grid does not depend on it
    elif dtype is not None:
        dtype = np.dtype(dtype)
    try:
        return _cached_float_grid(fmt, dtype)
    except TypeError:  # an unhashable stand-in format
        return _make_float_grid(fmt, dtype)


def _make_float_grid(fmt, dtype) -> _FloatGrid:
    m = fmt.man_bits
    if fmt.exp_bits is None:
        # docs/formats.md: the IEEE-style format of precision man_bits+1 with the result
        # dtype's emin and emax (subnormal spacing 2**(emin - man_bits)).
        if dtype is None:
            raise ValueError("exp_bits=None needs the result dtype")
        info = np.finfo(dtype)
        emin = int(info.minexp)
        emax = int(info.maxexp) - 1
        max_value = (2 - _pow2(-m)) * _pow2(emax)
        has_inf = bool(getattr(fmt, "inf", True))
        nan_kind = "ieee"
        has_nan = True
        bias = None
    else:
        e = fmt.exp_bits
        bias = fmt.bias if fmt.bias is not None else 2 ** (e - 1) - 1
        emin = 1 - bias
        nan_kind = fmt.nan
        top_field = 2**e - 1
        if nan_kind == "ieee":
            max_field, max_sig = top_field - 1, 2**m - 1
        elif nan_kind == "max":
            if m >= 1:
                max_field, max_sig = top_field, 2**m - 2
            else:  # the all-ones code is the whole top field
                max_field, max_sig = top_field - 1, 0
        elif nan_kind in ("negzero", None):
            max_field, max_sig = top_field, 2**m - 1
        else:
            raise ValueError(f"unknown nan kind {nan_kind!r}")
        if max_field >= 1:
            max_value = (2**m + max_sig) * _pow2(max_field - bias - m)
        elif max_field == 0 and fmt.subnormals:
            max_value = max_sig * _pow2(emin - m)
        else:
            max_value = Fraction(0)
        has_inf = bool(fmt.inf)
        if nan_kind == "ieee":
            # all-ones field: inf when the significand is 0 and inf=True, NaN otherwise
            has_nan = (m >= 1) or not has_inf
        else:
            has_nan = nan_kind is not None
    has_negzero = nan_kind != "negzero"
    default = "inf" if has_inf else ("nan" if has_nan else "saturate")
    if getattr(fmt, "overflow", None) is not None:
        default = fmt.overflow
    return _FloatGrid(
        man_bits=m,
        emin=emin,
        subnormals=bool(fmt.subnormals),
        max=max_value,
        has_inf=has_inf,
        has_nan=has_nan,
        has_negzero=has_negzero,
        nan_kind=nan_kind,
        exp_bits=fmt.exp_bits,
        bias=bias,
        default_overflow=default,
    )


_cached_float_grid = functools.lru_cache(maxsize=256)(_make_float_grid)


def float_max(fmt, dtype=None) -> Fraction:
    return _float_grid(fmt, dtype).max


def min_normal(fmt, dtype=None) -> Fraction:
    return _pow2(_float_grid(fmt, dtype).emin)


def smallest_subnormal(fmt, dtype=None) -> Fraction:
    g = _float_grid(fmt, dtype)
    return _pow2(g.emin - g.man_bits) if g.subnormals else _pow2(g.emin)


def floor_log2(a) -> int:
    """floor(log2(a)) for a > 0, exactly (math.log2 rounds: log2(float64 max) == 1024.0)."""
    a = Fraction(a)
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    # 2**e > n/d  <=>  n * 2**-e < d
    if (n << -e if e < 0 else n) < (d << e if e > 0 else d):
        e -= 1
    return e


def _float_code(a: Fraction, g: _FloatGrid) -> int:
    """Magnitude code of a grid value a >= 0 (exponent field unbounded above)."""
    m = g.man_bits
    if a == 0:
        return 0
    if a < _pow2(g.emin):
        k = a / _pow2(g.emin - m)
        assert k.denominator == 1 and g.subnormals
        return int(k)
    e = floor_log2(a)
    s = a / _pow2(e - m) - 2**m
    assert s.denominator == 1
    return ((e - g.emin + 1) << m) | int(s)


def _float_neighbours(a: Fraction, g: _FloatGrid):
    """(lo, hi, lo_code, hi_code) around a magnitude a >= 0; lo == hi when exact."""
    m = g.man_bits
    if a == 0:
        return a, a, 0, 0
    mn = _pow2(g.emin)
    if a >= mn:
        e = floor_log2(a)
        ulp = _pow2(e - m)
    elif g.subnormals or m == 0:
        ulp = _pow2(g.emin - m)
    else:
        return Fraction(0), mn, 0, 1 << m
    lo = math.floor(a / ulp) * ulp
    lo_code = _float_code(lo, g)
    if lo == a:
        return lo, lo, lo_code, lo_code
    hi = lo + ulp
    return lo, hi, lo_code, lo_code + 1


# --------------------------------------------------------------------------------------
# Fixed formats
# --------------------------------------------------------------------------------------


def fixed_range(fmt) -> tuple[int, int]:
    """(kmin, kmax) of the integer k in value = k * 2**-frac_bits."""
    w = fmt.int_bits + fmt.frac_bits
    if fmt.signed:
        return -(2 ** (w - 1)), 2 ** (w - 1) - 1
    return 0, 2**w - 1


def _fixed_policy(fmt, overflow):
    policy = overflow if overflow is not None else getattr(fmt, "overflow", None)
    if policy is None:
        policy = "saturate"
    if policy not in ("saturate", "wrap"):
        raise ValueError(f"overflow={policy!r} is not a fixed-point policy")
    return policy


def _fixed_overflow(k: int, fmt, policy: str) -> int:
    kmin, kmax = fixed_range(fmt)
    if policy == "saturate":
        return min(max(k, kmin), kmax)
    w = fmt.int_bits + fmt.frac_bits
    return (k - kmin) % 2**w + kmin


# --------------------------------------------------------------------------------------
# Public oracle
# --------------------------------------------------------------------------------------


def resolve_overflow(fmt, overflow=None, dtype=None) -> str:
    """The overflow policy rp.round uses: `overflow`, else the format's default.

    Raises ValueError for a policy the format cannot express (docs/rounding.md).
    """
    if not is_float_format(fmt):
        return _fixed_policy(fmt, overflow)
    g = _float_grid(fmt, dtype if dtype is not None else np.float64)
    policy = overflow if overflow is not None else g.default_overflow
    if policy == "inf" and not g.has_inf:
        raise ValueError("overflow='inf' on a format without inf")
    if policy == "nan" and not g.has_nan:
        raise ValueError("overflow='nan' on a format without NaN")
    if policy not in ("inf", "nan", "saturate"):
        raise ValueError(f"overflow={policy!r} is not a float policy")
    return policy


def neighbours(x, fmt, dtype=None):
    """Adjacent values around x in the format's value set, exponent unbounded above.

    Returns ``(lo, hi, lo_code_parity, hi_code_parity)`` with ``lo <= x <= hi``
    (Fractions; ``lo == hi == x`` when x is on the grid).  Float codes exclude the
    sign (so the parities of -v and v agree); fixed-point "codes" are k itself.
    `dtype` is the result dtype, needed only for ``exp_bits=None``.
    """
    x = Fraction(x)
    if not is_float_format(fmt):
        scale = _pow2(fmt.frac_bits)
        v = x * scale
        k = math.floor(v)
        lo = k / scale
        if lo == x:
            return lo, lo, k % 2, k % 2
        return lo, (k + 1) / scale, k % 2, (k + 1) % 2
    g = _float_grid(fmt, dtype)
    lo, hi, clo, chi = _float_neighbours(abs(x), g)
    if x >= 0:
        return lo, hi, clo % 2, chi % 2
    return -hi, -lo, chi % 2, clo % 2


def _signed_float(magnitude, negative: bool, g: _FloatGrid) -> float:
    """A non-overflowing magnitude with its sign; a zero keeps x's sign where -0 exists."""
    value = float(magnitude)
    if value == 0:
        return -0.0 if (negative and g.has_negzero) else 0.0
    return -value if negative else value


def _float_overflow(negative: bool, mode: str, policy: str, g: _FloatGrid) -> float:
    """What a magnitude above max becomes (IEEE 754 §7.4 style, docs/rounding.md)."""
    max_value = float(g.max)
    if mode == "toward_zero" or (mode == "up" and negative) or (mode == "down" and not negative):
        return -max_value if negative else max_value
    if policy == "inf":
        return -math.inf if negative else math.inf
    if policy == "saturate":
        return -max_value if negative else max_value
    return -math.nan if negative else math.nan  # keeps x's sign, as ml_dtypes does


def _pick(mode, a, lo, hi, clo, chi, negative):
    """Choose lo or hi (magnitudes, lo < a < hi) for a deterministic mode."""
    if mode == "toward_zero":
        return lo
    if mode == "up":
        return lo if negative else hi
    if mode == "down":
        return hi if negative else lo
    if mode == "odd":
        if clo % 2 == chi % 2:  # only 0 and min_normal without subnormals
            return hi
        return lo if clo % 2 else hi
    d_lo, d_hi = a - lo, hi - a
    if d_lo < d_hi:
        return lo
    if d_hi < d_lo:
        return hi
    if mode == "nearest_away":
        return hi
    if mode == "nearest":
        if clo % 2 == chi % 2:
            return hi
        return hi if chi % 2 == 0 else lo
    raise ValueError(f"mode {mode!r} is not deterministic")


def _pick_fixed(mode, v: Fraction, k_lo: int) -> int:
    """Choose k_lo or k_lo+1 (k_lo < v < k_lo+1, signed) for a deterministic mode."""
    k_hi = k_lo + 1
    if mode == "toward_zero":
        return k_lo if v > 0 else k_hi
    if mode == "up":
        return k_hi
    if mode == "down":
        return k_lo
    if mode == "odd":
        return k_lo if k_lo % 2 else k_hi
    d_lo, d_hi = v - k_lo, k_hi - v
    if d_lo < d_hi:
        return k_lo
    if d_hi < d_lo:
        return k_hi
    if mode == "nearest_away":
        return k_hi if v > 0 else k_lo
    if mode == "nearest":
        return k_lo if k_lo % 2 == 0 else k_hi
    raise ValueError(f"mode {mode!r} is not deterministic")


def round_reference(x, fmt, mode="nearest", overflow=None, dtype=np.float64) -> float:
    """The exact result (docs/rounding.md) of rounding one number x onto fmt.

    x is a Python/NumPy float (finite, ±inf, NaN, ±0).  `dtype` is the result dtype
    (`np.result_type(input dtype, fmt.carrier)`); it matters only for exp_bits=None.
    Returns a Python float (every value of a valid format is a float64).
    """
    x = float(x)
    mode = canonical_mode(mode)
    if mode in STOCHASTIC_MODES:
        raise ValueError("use stochastic_probability for stochastic modes")
    policy = resolve_overflow(fmt, overflow, dtype)
    if math.isnan(x):
        return x
    negative = math.copysign(1.0, x) < 0

    if not is_float_format(fmt):
        if math.isinf(x):
            if policy == "wrap":
                return math.nan
            kmin, kmax = fixed_range(fmt)
            k = kmin if negative else kmax
        else:
            scale = _pow2(fmt.frac_bits)
            v = Fraction(x) * scale
            k = math.floor(v)
            if k != v:
                k = _pick_fixed(mode, v, k)
            k = _fixed_overflow(k, fmt, policy)
        return float(k / _pow2(fmt.frac_bits)) + 0.0  # + 0.0: no -0 in fixed point

    g = _float_grid(fmt, dtype)
    if math.isinf(x):
        if policy == "saturate":
            return -float(g.max) if negative else float(g.max)
        if g.has_inf:
            return x
        return _float_overflow(negative, mode, policy, g)
    if x == 0:
        return _signed_float(0, negative, g)
    a = abs(Fraction(x))
    lo, hi, clo, chi = _float_neighbours(a, g)
    r = lo if lo == hi else _pick(mode, a, lo, hi, clo, chi, negative)
    if r > g.max:
        return _float_overflow(negative, mode, policy, g)
    return _signed_float(r, negative, g)


def stochastic_probability(
    x, fmt, rand_bits=None, *, mode="stochastic", overflow=None, dtype=np.float64
):
    """The two possible results of stochastic rounding of x and P(larger magnitude).

    Returns ``(lo, hi, p_hi)``: lo and hi are the results (Python floats, overflow
    and signed zero already applied) for the neighbours of smaller and larger
    magnitude; p_hi is a Fraction.  For `mode="stochastic"` p_hi is
    ``(|x|-|lo|)/(|hi|-|lo|)``; for "stochastic_equal" 1/2; with ``rand_bits=r`` it
    is ``floor(p * 2**r) / 2**r`` (docs/rounding.md).  Exact inputs, NaN and ±inf give
    ``lo == hi`` (bit for bit, or both NaN) and ``p_hi == 0``.
    """
    x = float(x)
    mode = canonical_mode(mode)
    if mode not in STOCHASTIC_MODES:
        raise ValueError(f"{mode!r} is not a stochastic mode")
    policy = resolve_overflow(fmt, overflow, dtype)
    zero = Fraction(0)
    if math.isnan(x) or math.isinf(x) or x == 0:
        r = round_reference(x, fmt, "nearest", overflow, dtype)
        return r, r, zero
    negative = x < 0
    a = abs(Fraction(x))

    if is_float_format(fmt):
        g = _float_grid(fmt, dtype)
        lo, hi, _, _ = _float_neighbours(a, g)
    else:
        scale = _pow2(fmt.frac_bits)
        k = math.floor(a * scale)
        lo = k / scale
        hi = lo if lo == a else (k + 1) / scale
    if lo == hi:
        p = zero
    else:
        p = (a - lo) / (hi - lo) if mode == "stochastic" else Fraction(1, 2)
        if rand_bits is not None:
            p = Fraction(math.floor(p * 2**rand_bits), 2**rand_bits)

    def finish(magnitude):
        if is_float_format(fmt):
            if magnitude > g.max:
                return _float_overflow(negative, mode, policy, g)
            return _signed_float(magnitude, negative, g)
        k = magnitude * _pow2(fmt.frac_bits)
        assert k.denominator == 1
        k = _fixed_overflow(-int(k) if negative else int(k), fmt, policy)
        return float(k / _pow2(fmt.frac_bits)) + 0.0

    return finish(lo), finish(hi), p


# --------------------------------------------------------------------------------------
# Codes (docs/codes.md)
# --------------------------------------------------------------------------------------


def _nan_code(g: _FloatGrid, sign_bit: int) -> int:
    m, e = g.man_bits, g.exp_bits
    top_field = 2**e - 1
    if g.nan_kind == "ieee":
        if m == 0:
            if g.has_inf:
                raise ValueError("the format has no NaN code")
            return sign_bit | top_field
        return sign_bit | (top_field << m) | (1 << (m - 1))
    if g.nan_kind == "max":
        return sign_bit | (top_field << m) | (2**m - 1)
    if g.nan_kind == "negzero":
        return 1 << (e + m)
    raise ValueError("the format has no NaN code")


def encode_reference(value, fmt) -> int:
    """The code (docs/codes.md) of a value of fmt: sign | exponent | significand for
    floats (the canonical NaN carries the value's sign, except "negzero" NaN),
    two's complement k for fixed point.  Raises ValueError for a value the format
    cannot hold."""
    value = float(value)
    if not is_float_format(fmt):
        if not math.isfinite(value):
            raise ValueError("fixed point holds no NaN or inf")
        k = Fraction(value) * _pow2(fmt.frac_bits)
        kmin, kmax = fixed_range(fmt)
        if k.denominator != 1 or not kmin <= k <= kmax:
            raise ValueError(f"{value!r} is not a value of the format")
        return int(k) % 2 ** (fmt.int_bits + fmt.frac_bits)
    if fmt.exp_bits is None:
        raise ValueError("exp_bits=None formats have no codes")
    g = _float_grid(fmt)
    m, e = g.man_bits, g.exp_bits
    negative = math.copysign(1.0, value) < 0
    sign_bit = (1 << (e + m)) if negative else 0
    if math.isnan(value):
        return _nan_code(g, sign_bit)
    if math.isinf(value):
        if not g.has_inf:
            raise ValueError("the format has no inf")
        return sign_bit | ((2**e - 1) << m)
    if value == 0:
        return sign_bit if g.has_negzero else 0
    a = abs(Fraction(value))
    lo, hi, code, _ = _float_neighbours(a, g)
    if lo != hi or a > g.max:
        raise ValueError(f"{value!r} is not a value of the format")
    return sign_bit | code


def decode_reference(code: int, fmt):
    """The value (Python float) of a code, or None for a code that names no value
    (a nonzero significand in the zero exponent field of a format without
    subnormals)."""
    if not is_float_format(fmt):
        w = fmt.int_bits + fmt.frac_bits
        k = code
        if fmt.signed and k >= 2 ** (w - 1):
            k -= 2**w
        return float(k / _pow2(fmt.frac_bits)) + 0.0
    g = _float_grid(fmt)
    m, e = g.man_bits, g.exp_bits
    sign_bit = 1 << (e + m)
    negative = bool(code & sign_bit)
    magnitude_code = code & (sign_bit - 1)
    field, s = magnitude_code >> m, magnitude_code & (2**m - 1)
    top_field = 2**e - 1
    if g.nan_kind == "ieee" and field == top_field:
        if s == 0 and g.has_inf:
            return -math.inf if negative else math.inf
        return math.nan
    if g.nan_kind == "max" and magnitude_code == sign_bit - 1:
        return math.nan
    if g.nan_kind == "negzero" and code == sign_bit:
        return math.nan
    if field == 0:
        if s and not g.subnormals:
            return None
        a = s * _pow2(g.emin - m)
    else:
        a = (2**m + s) * _pow2(field - g.bias - m)
    value = float(a)
    return -value if negative else value


def fixed_wrap_oracle(z: Fraction, fmt, mode: str) -> float:
    """The exact `z` rounded onto the grid of fixed-point `fmt` in `mode`, then its
    integer wrapped into the format's 2**w codes: written from the definition."""
    t = z * 2**fmt.frac_bits  # in units of the step
    floor = math.floor(t)
    if t == floor:
        k = floor
    elif mode == "toward_zero":
        k = floor if t > 0 else floor + 1
    elif mode == "up":
        k = floor + 1
    elif mode == "down":
        k = floor
    elif mode == "odd":
        k = floor if floor % 2 else floor + 1
    else:  # nearest (ties to even), nearest_away
        twice = 2 * (t - floor)
        if twice != 1:
            k = floor + (twice > 1)
        elif mode == "nearest_away":
            k = floor + 1 if t > 0 else floor
        else:
            k = floor if floor % 2 == 0 else floor + 1
    words = 2 ** (fmt.int_bits + fmt.frac_bits)
    low = -(words // 2) if fmt.signed else 0
    return float(Fraction((k - low) % words + low, 2**fmt.frac_bits))
