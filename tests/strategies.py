"""Hypothesis strategies for rpfloat tests: formats, modes, overflow policies and the
inputs where rounding goes wrong (ties, boundaries of the range, specials).

Input strategies return Python floats that the requested input dtype holds exactly,
so a test can build ``np.array(xs, dtype)`` without another rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import rpfloat as rp
from reference import (
    DETERMINISTIC_MODES,
    fixed_range,
    float_max,
    floor_log2,
    is_float_format,
    min_normal,
    resolve_overflow,
)

# (nan, inf) encodings a FloatFormat accepts
NAN_INF_VARIANTS = (("ieee", True), ("ieee", False), ("max", False), ("negzero", False), (None, False))

MODE_ALIASES = {
    "nearest": ("nearest", "nearest_even", "rne"),
    "nearest_away": ("nearest_away", "rna"),
    "toward_zero": ("toward_zero", "truncate", "rtz"),
    "up": ("up", "toward_positive"),
    "down": ("down", "toward_negative"),
    "odd": ("odd",),
    "stochastic": ("stochastic", "sr"),
    "stochastic_equal": ("stochastic_equal",),
}

FLOAT_POLICIES = ("inf", "saturate", "nan")
FIXED_POLICIES = ("saturate", "wrap")


def valid_policies(fmt, dtype=np.float64):
    """The overflow policies (oracle's view) that fmt can express."""
    policies = FLOAT_POLICIES if is_float_format(fmt) else FIXED_POLICIES
    valid = []
    for policy in policies:
        try:
            resolve_overflow(fmt, policy, dtype)
        except ValueError:
            continue
        valid.append(policy)
    return valid


def float_format_or_none(exp_bits, man_bits, **kwargs):
    """rp.FloatFormat(...), or None where the library rejects the combination."""
    try:
        return rp.FloatFormat(exp_bits, man_bits, **kwargs)
    except ValueError:
        return None


@st.composite
def float_formats(draw, *, max_exp_bits=8, max_man_bits=10, unbounded=False, max_bits=None):
    """FloatFormats: exp_bits 1..8, man_bits 0..10, every valid NaN/inf/subnormal
    combination, now and then a non-default bias and a non-default overflow policy.
    With `unbounded`, sometimes exp_bits=None (precision-only)."""
    man_bits = draw(st.integers(0, max_man_bits))
    if unbounded and draw(st.integers(0, 5)) == 0:
        man_bits = draw(st.sampled_from([man_bits, 23, 30, 52]))
        fmt = float_format_or_none(None, man_bits, overflow=draw(st.sampled_from([None, "saturate", "nan"])))
        assume(fmt is not None)
        return fmt
    exp_bits = draw(st.integers(1, max_exp_bits))
    if max_bits is not None:
        assume(1 + exp_bits + man_bits <= max_bits)
    nan, inf = draw(st.sampled_from(NAN_INF_VARIANTS))
    subnormals = draw(st.booleans())
    bias = None
    if draw(st.integers(0, 3)) == 0:
        bias = 2 ** (exp_bits - 1) - 1 + draw(st.integers(-3, 3))
    fmt = float_format_or_none(exp_bits, man_bits, bias=bias, subnormals=subnormals, inf=inf, nan=nan)
    assume(fmt is not None)
    if draw(st.integers(0, 3)) == 0:
        policy = draw(st.sampled_from(valid_policies(fmt)))
        fmt = float_format_or_none(
            exp_bits, man_bits, bias=bias, subnormals=subnormals, inf=inf, nan=nan, overflow=policy
        )
        assume(fmt is not None)
    return fmt


@st.composite
def fixed_formats(draw, *, max_word=53):
    """FixedFormats: word length 1..53, int_bits and frac_bits each possibly <= 0,
    signed or unsigned, default overflow saturate or wrap."""
    word = draw(st.one_of(st.integers(1, min(12, max_word)), st.integers(1, max_word)))
    int_bits = draw(st.integers(-6, word + 6))
    frac_bits = word - int_bits
    signed = draw(st.booleans())
    overflow = draw(st.sampled_from(FIXED_POLICIES))
    try:
        return rp.FixedFormat(int_bits, frac_bits, signed=signed, overflow=overflow)
    except ValueError:
        assume(False)


@st.composite
def scaled_formats(draw, elements, block_sizes):
    """A ScaledFormat of an element drawn from `elements`, a block size from
    `block_sizes` and any power-of-two scale rounding (combinations the
    constructor refuses are skipped)."""
    element = draw(elements)
    block_size = draw(block_sizes)
    rounding = draw(st.sampled_from(["floor", "ceil", "even", "rceil"]))
    try:
        return rp.ScaledFormat(element, block_size=block_size, scale_rounding=rounding)
    except (ValueError, TypeError):
        assume(False)


def deterministic_modes(aliases=True):
    """Mode names (and, with `aliases`, their alias spellings) of the deterministic modes."""
    names = [alias for mode in DETERMINISTIC_MODES for alias in MODE_ALIASES[mode]]
    return st.sampled_from(names if aliases else list(DETERMINISTIC_MODES))


def overflow_policies(fmt, dtype=np.float64):
    """None (the format's default) or a policy that fmt can express."""
    return st.sampled_from([None, *valid_policies(fmt, dtype)])


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------

_OFFSETS = (Fraction(0), Fraction(1, 2), Fraction(3, 10), Fraction(7, 10), Fraction(1, 4), Fraction(3, 4))


def _to_dtype(value, dtype) -> float:
    """The dtype number nearest to a Fraction or float (inf beyond its range)."""
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf if value > 0 else -math.inf
    with np.errstate(over="ignore"):
        return float(np.array(as_float).astype(dtype))


def _nudge(x: float, steps: int, dtype) -> float:
    v = np.array(x, dtype)
    target = np.array(np.inf if steps > 0 else -np.inf, dtype)
    with np.errstate(over="ignore", under="ignore"):
        for _ in range(abs(steps)):
            v = np.nextafter(v, target)
    return float(v)


def _float_landmarks(fmt, result_dtype):
    """Fractions near the ends of a float format's range."""
    m = fmt.man_bits
    top = float_max(fmt, result_dtype)
    mn = min_normal(fmt, result_dtype)
    ss = mn / 2**m
    out = [mn, mn / 2, mn * 3 / 4, mn - ss / 2, mn + ss / 2, mn + mn / 2**m / 2, ss, ss / 2, ss / 4,
           ss * 3 / 2, ss * 3 / 4, ss * 2]
    if top > 0:
        emax = floor_log2(top)
        ulp = Fraction(2) ** (emax - m)
        out += [top, top + ulp / 2, top + ulp, top + ulp * 3 / 2, top - ulp / 2,
                Fraction(2) ** (emax + 1), Fraction(2) ** (emax + 1) + ulp,
                Fraction(2) ** (emax + 1) + ulp * 2, 2 * top, 4 * top]
    return out


def _fixed_landmarks(fmt):
    eps = Fraction(2) ** -fmt.frac_bits
    kmin, kmax = fixed_range(fmt)
    out = [kmax * eps, kmin * eps, (kmax + Fraction(1, 2)) * eps, (kmin - Fraction(1, 2)) * eps,
           (kmax + 1) * eps, (kmin - 1) * eps, eps / 2, eps / 4, eps * 3 / 2, 2 ** 53 * eps,
           (2**53 - 1) * eps]
    out += [Fraction(2) ** (fmt.int_bits + j) for j in (-1, 0, 1, 2, 10, 30, 52, 53, 70, 200)]
    out += [Fraction(2) ** (fmt.int_bits + 30) + eps * k for k in (1, 3, Fraction(1, 2))]
    return out


_GENERIC = [Fraction(2) ** -1074, Fraction(2) ** -1022, Fraction(1, 10) ** 300, Fraction(10) ** 300,
            Fraction(2) ** -149, Fraction(2) ** -126, Fraction(2) ** -24, Fraction(2) ** -14,
            Fraction(65504), Fraction(65520), Fraction(2) ** 128, Fraction(1, 3), Fraction(1)]


@st.composite
def interesting_inputs(draw, fmt, dtype=np.float64):
    """One input for rounding onto fmt, held exactly by `dtype`: a value of the
    format, a midpoint or a 0.3/0.7-ulp point between neighbours, one near max,
    min_normal or the smallest subnormal, something tiny or huge, ±inf, NaN or ±0
    -- then possibly moved a few dtype ulps (np.nextafter) and negated."""
    dtype = np.dtype(dtype)
    result_dtype = np.result_type(dtype, fmt.carrier)
    kind = draw(st.sampled_from(["grid", "grid", "grid", "landmark", "landmark", "generic", "special", "any"]))
    if kind == "special":
        value = draw(st.sampled_from([math.inf, math.nan, 0.0]))
    elif kind == "any":
        value = draw(st.floats(width=8 * dtype.itemsize))
    elif kind == "generic":
        value = draw(st.sampled_from(_GENERIC))
    elif kind == "landmark":
        pool = _float_landmarks(fmt, result_dtype) if is_float_format(fmt) else _fixed_landmarks(fmt)
        value = draw(st.sampled_from(pool))
    elif is_float_format(fmt):
        m = fmt.man_bits
        emin = floor_log2(min_normal(fmt, result_dtype))
        emax = floor_log2(float_max(fmt, result_dtype))
        e = draw(st.one_of(st.integers(emin - 1, emax + 1), st.integers(emin - m - 40, emax + 40)))
        if e < emin:  # subnormal spacing
            ulp = Fraction(2) ** (emin - m)
            k = draw(st.integers(0, 2**m))
        else:
            ulp = Fraction(2) ** (e - m)
            k = draw(st.integers(2**m, 2 ** (m + 1)))
        value = (k + draw(st.sampled_from(_OFFSETS))) * ulp
    else:
        eps = Fraction(2) ** -fmt.frac_bits
        kmin, kmax = fixed_range(fmt)
        k = draw(st.one_of(st.integers(-4, 4), st.integers(kmin - 4, kmax + 4), st.integers(-(2**80), 2**80)))
        value = (k + draw(st.sampled_from(_OFFSETS))) * eps
    x = _to_dtype(value, dtype)
    steps = draw(st.sampled_from([0, 0, 0, 0, 1, -1, 2, -2]))
    if steps and math.isfinite(x):
        x = _nudge(x, steps, dtype)
    if draw(st.booleans()):
        x = -x
    return x


def input_lists(fmt, dtype=np.float64, max_size=30):
    return st.lists(interesting_inputs(fmt, dtype), min_size=1, max_size=max_size)
