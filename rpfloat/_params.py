"""Format + carrier -> the plain integers the rounding kernel needs (cached).

This is the only place that knows both the format objects and the kernel's
parameter layout (``rpfloat._kernels.core.layout.PARAM_NAMES``).
"""
from __future__ import annotations

import functools

import numpy as np

from ._kernels.core import layout
from .fixedformat import FixedFormat

__all__ = ["compute_dtype", "kernel_params", "widening_params"]

_POLICY_CODES = {
    "inf": layout.OVERFLOW_INF,
    "saturate": layout.OVERFLOW_SATURATE,
    "nan": layout.OVERFLOW_NAN,
    "wrap": layout.OVERFLOW_WRAP,
}
_INT_OF = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def compute_dtype(result_dtype: np.dtype) -> np.dtype:
    """The carrier the kernel computes in: float32 (also for float16 results) or float64."""
    return np.dtype(np.float64) if result_dtype == np.float64 else np.dtype(np.float32)


def _bits_of(value: float, dtype: np.dtype) -> int:
    """The carrier bits of an exactly representable `value`, as a signed Python int."""
    return int(np.array(value, dtype=dtype).view(_INT_OF[dtype]))


def _bits_at_most(value: float, dtype: np.dtype) -> int:
    """The carrier bits of the largest carrier number <= `value` (> 0)."""
    with np.errstate(over="ignore"):  # beyond the carrier's range: inf, then its max
        rounded = np.array(value, dtype=dtype)
    if float(rounded) > value:
        rounded = np.nextafter(rounded, dtype.type(0))
    return int(rounded.view(_INT_OF[dtype]))


def _half_bits(quantum_exp: int, dtype: np.dtype) -> int:
    """Carrier bits of 2**(quantum_exp-1), or 0 where the carrier cannot hold it
    (then no input lies below one spacing and the value is never used)."""
    half = 2.0 ** (quantum_exp - 1)
    return _bits_of(half, dtype) if float(np.array(half, dtype=dtype)) == half else 0


def _float_fields(fmt, result_dtype: np.dtype):
    """(man_bits, bias, subnormals, max) of `fmt`, with exp_bits=None resolved
    against the IEEE range of the result dtype."""
    if fmt.exp_bits is not None:
        return fmt.man_bits, fmt.bias, fmt.subnormals, fmt.max
    info = np.finfo(result_dtype)
    man_bits = min(fmt.man_bits, int(info.nmant))
    bias = int(info.maxexp) - 1
    largest_significand = 2 - 2.0 ** -man_bits
    return man_bits, bias, True, largest_significand * 2.0 ** bias


def _fast_range(fmt, fields: dict, policy: str) -> dict:
    """The kernel's fast path (``core.fast_element.fast_round_bits``) for magnitudes from
    fast_low_bits (fast_low_random_bits for stochastic rounding) to the format's
    largest value. From fast_aligned_bits (one spacing below min_normal, or
    min_normal without subnormals) up, the bits dropped are
    ``max(fast_drop_min, fast_drop_offset - carrier exponent field)``; below it
    the result is 0 or one spacing. Where one spacing lies below the carrier's
    normals (bfloat16 in float32) the range starts at the smallest normal. Empty
    (low > high) for formats with one-value binades (man_bits == 0), formats
    reaching below the carrier's normals (deep) and wrap-around. Negative
    numbers are in it where the format has them (not unsigned fixed point)."""
    carrier_man_bits = fields["carrier_man_bits"]
    word = 32 if carrier_man_bits == 23 else 64  # the carrier's width
    magnitude_mask = (1 << (word - 1)) - 1
    if fields["deep"] or policy == "wrap" or fields["man_bits"] == 0:
        return dict(fast_low_bits=1, fast_high_bits=0, fast_low_random_bits=1, fast_aligned_bits=0,
                    fast_drop_min=0, fast_drop_offset=0, fast_range_mask=magnitude_mask)
    smallest_normal = 1 << carrier_man_bits
    quantum = fields["below_quantum_bits"]  # one spacing below min_normal (min_normal without subnormals)
    if isinstance(fmt, FixedFormat):
        drop_min, drop_offset = 0, fields["below_drop_offset"]
    else:
        subnormals = quantum != fields["min_normal_bits"]
        drop_min = carrier_man_bits - fields["man_bits"]
        drop_offset = fields["below_drop_offset"] if subnormals else -1
    if quantum >= smallest_normal:
        low = 0
        # the fraction x / spacing has carrier_man_bits + 1 bits: they fit one
        # word from 2**(carrier_man_bits + 1 - word) spacings up
        low_random = max(quantum - ((word - carrier_man_bits - 1) << carrier_man_bits), smallest_normal)
    else:
        low = low_random = smallest_normal
    negatives = fields["max_neg_bits"] != 0
    return dict(
        fast_low_bits=low,
        fast_high_bits=min(fields["max_pos_bits"], fields["max_neg_bits"]) if negatives else fields["max_pos_bits"],
        fast_low_random_bits=low_random,
        fast_aligned_bits=max(quantum, smallest_normal),
        fast_drop_min=drop_min,
        fast_drop_offset=drop_offset,
        fast_range_mask=magnitude_mask if negatives else -1,  # -1: negatives' bits stay below the range
    )


@functools.lru_cache(maxsize=512)
def kernel_params(fmt, result_dtype: np.dtype, policy: str) -> tuple:
    """The kernel parameter tuple for rounding onto `fmt` into `result_dtype`.

    `policy` is the already validated overflow policy. The tuple is laid out as
    ``layout.PARAM_NAMES``; every entry is a Python int that fits an int64.
    """
    return _lowered(fmt, compute_dtype(result_dtype), result_dtype, policy)


@functools.lru_cache(maxsize=512)
def widening_params(fmt, policy: str):
    """The fast path's parameters in float32 for float32 input rounded onto `fmt`
    into a float64 result (a widening kernel), or None where that kernel has no
    such path.

    Only fixed-point formats too wide for float32 qualify (q16.16): a float32 x
    rounds onto k * 2**-frac_bits with |k| <= 2**24 (x has 24 significant bits),
    which float32 holds, up to the largest float32 at or below ``max``; beyond it
    the fast range ends, and the general path rounds in float64 (saturating at a
    ``max`` that float32 may not hold). The two agree wherever both apply: they
    drop the same bits, and the float64 path's extra dropped bits are zeros.
    The kernel widens the fast path's results with integer operations that take
    them to be 0 or normal float32 numbers: one spacing is a normal float32, and
    the fast range ends at 2**127 at most, so that no result rounds up to 2**128.
    """
    if not isinstance(fmt, FixedFormat) or policy == "wrap" or fmt.carrier is not np.float64:
        return None
    if fmt.frac_bits > 126 or fmt.frac_bits < -127:  # one spacing is no normal float32
        return None
    params = list(_lowered(fmt, np.dtype(np.float32), np.dtype(np.float64), policy))
    high = layout.P_FAST_HIGH_BITS
    params[high] = min(params[high], _bits_of(2.0**127, np.dtype(np.float32)))
    return tuple(params)


@functools.lru_cache(maxsize=512)
def _lowered(fmt, carrier: np.dtype, result_dtype: np.dtype, policy: str) -> tuple:
    """The kernel parameters of `fmt` in `carrier` for a `result_dtype` result."""
    info = np.finfo(carrier)
    carrier_man_bits = int(info.nmant)
    carrier_bias = int(info.maxexp) - 1
    fields = dict(
        carrier_man_bits=carrier_man_bits,
        carrier_bias=carrier_bias,
        overflow=_POLICY_CODES[policy],
        deep=0,
        word_bits=0,
        signed=0,
        scale_bits=0,
    )
    inf_bits = ((2 * carrier_bias + 1) << carrier_man_bits)
    if isinstance(fmt, FixedFormat):
        quantum = 2.0 ** -fmt.frac_bits
        fields.update(
            man_bits=1,  # k's own parity is the code's
            min_normal_bits=inf_bits + 1,  # every value lies "below min_normal": one fixed spacing
            parity_offset=0,
            below_drop_offset=-fmt.frac_bits + carrier_bias + carrier_man_bits,
            below_tie_up=0,
            below_quantum_bits=_bits_of(quantum, carrier),
            # exact, except for a widening kernel's float32 parameters
            max_pos_bits=_bits_at_most(fmt.max, carrier) if fmt.max > 0 else 0,
            max_neg_bits=_bits_at_most(abs(fmt.min), carrier) if fmt.min < 0 else 0,
            keep_inf=0,
            no_negative_zero=1,
            word_bits=fmt.bits,
            signed=int(fmt.signed),
            scale_bits=_bits_of(quantum, np.dtype(np.float64)),
            bias_parity=0,
            half_quantum_bits=_half_bits(-fmt.frac_bits, carrier),
        )
    else:
        man_bits, bias, subnormals, max_value = _float_fields(fmt, result_dtype)
        emin = 1 - bias
        below_quantum_exp = emin - man_bits if subnormals else emin
        max_bits = _bits_of(max_value, carrier)
        fields.update(
            man_bits=man_bits,
            min_normal_bits=_bits_of(2.0**emin, carrier),
            parity_offset=(bias + carrier_bias) & 1,
            below_drop_offset=below_quantum_exp + carrier_bias + carrier_man_bits,
            below_tie_up=int(not subnormals and man_bits >= 1),
            below_quantum_bits=_bits_of(2.0**below_quantum_exp, carrier),
            max_pos_bits=max_bits,
            max_neg_bits=max_bits,
            keep_inf=int((fmt.exp_bits is None or fmt.has_inf) and policy != "saturate"),
            no_negative_zero=int(fmt.exp_bits is not None and not fmt.has_negative_zero),
            deep=int(emin < 1 - carrier_bias),
            bias_parity=bias & 1,
            half_quantum_bits=_half_bits(below_quantum_exp, carrier),
        )
    fields.update(_fast_range(fmt, fields, policy))
    # the uniform loops (cpu.fast_same_drop) from 0 up: where the format's min_normal
    # is the carrier's smallest normal and it has subnormals (spacing below one carrier
    # normal), the carrier's subnormals drop fast_drop_min bits as well (bfloat16, tf32
    # in float32); read only where the table gives a format those loops
    smallest_normal = 1 << carrier_man_bits
    fields["uniform_from_zero"] = int(
        fields["min_normal_bits"] == smallest_normal and fields["below_quantum_bits"] < smallest_normal
    )
    quiet_nan = inf_bits | (1 << (carrier_man_bits - 1))
    for sign in ("pos", "neg"):
        fields[f"overflow_{sign}_bits"] = {
            "inf": inf_bits, "nan": quiet_nan, "saturate": fields[f"max_{sign}_bits"], "wrap": quiet_nan,
        }[policy]
    return tuple(int(fields[name]) for name in layout.PARAM_NAMES)
