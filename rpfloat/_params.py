"""Format + carrier -> the plain integers the rounding kernel needs (cached).

This is the only place that knows both the format objects and the kernel's
parameter layout (``rpfloat._kernels.quantize.PARAM_NAMES``).
"""
from __future__ import annotations

import functools

import numpy as np

from ._kernels import quantize
from .fixedformat import FixedFormat

__all__ = ["compute_dtype", "kernel_params", "widening_params"]

_POLICY_CODES = {
    "inf": quantize.OVERFLOW_INF,
    "saturate": quantize.OVERFLOW_SATURATE,
    "nan": quantize.OVERFLOW_NAN,
    "wrap": quantize.OVERFLOW_WRAP,
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
    """The kernel's fast path (``quantize.fast_round_bits``) for magnitudes from
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
    ``quantize.PARAM_NAMES``; every entry is a Python int that fits an int64.
    """
    return _lower(fmt, compute_dtype(result_dtype), result_dtype, policy)


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
    params = list(_lower(fmt, np.dtype(np.float32), np.dtype(np.float64), policy))
    high = quantize.P_FAST_HIGH_BITS
    params[high] = min(params[high], _bits_of(2.0**127, np.dtype(np.float32)))
    return tuple(params)


def _lower(fmt, carrier: np.dtype, result_dtype: np.dtype, policy: str) -> tuple:
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
        scaled=0,
        scaled_random=0,
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
            # scaled.round_scaled: x * 2**frac_bits never underflows, 2**frac_bits is
            # finite and 2**-frac_bits normal in the carrier, and every k fits its significand
            scaled=int(policy == "saturate" and 0 <= fmt.frac_bits < info.maxexp - 1
                       and fmt.bits <= carrier_man_bits + 1),
            # scaled_random.py: float32 data (a float32 carrier: float32 results, and the
            # widening kernel's fast path), 2**frac_bits and 2**-frac_bits normal numbers
            # of it (every k is one: a word has at most 53 bits)
            scaled_random=int(carrier_man_bits == 23 and policy != "wrap"
                              and abs(fmt.frac_bits) <= info.maxexp - 2),
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
    # adding.py: the fast range from 0 up (every spacing a normal number of the
    # carrier), subnormals, -0, and the power of two finite at the format's largest value
    top_power_field = (fields["fast_high_bits"] >> carrier_man_bits) + fields["fast_drop_min"]
    fields["nearest_by_adding"] = int(
        not isinstance(fmt, FixedFormat)
        and fields["fast_low_bits"] == 0 < fields["fast_high_bits"]
        and fields["fast_drop_min"] >= 1
        and fields["below_quantum_bits"] != fields["min_normal_bits"]
        and not fields["no_negative_zero"]
        and top_power_field <= 2 * carrier_bias
    )
    # uniform.py: one bit count from fast_aligned_bits up (no subnormals above the
    # carrier's normals), -0, and at least one bit dropped
    aligned_field = fields["fast_aligned_bits"] >> carrier_man_bits
    fields["uniform_drop"] = int(
        not isinstance(fmt, FixedFormat)
        and fields["fast_low_bits"] <= fields["fast_high_bits"]
        and fields["fast_drop_min"] >= 1
        and fields["fast_drop_offset"] - aligned_field <= fields["fast_drop_min"]
        and not fields["no_negative_zero"]
    )
    # scaled_random.split_stochastic: in float32, one bit count from min_normal up
    # and a fixed spacing below it, that spacing and its inverse normal float32
    # numbers: the formats of adding.py, and those of uniform.py without
    # subnormals (0 and min_normal one spacing apart), -0 included
    fields["stochastic_split"] = int(
        carrier_man_bits == 23
        and fields["below_quantum_bits"] <= _bits_of(2.0**126, carrier)
        and (fields["nearest_by_adding"] == 1
             or (fields["uniform_drop"] == 1 and fields["below_quantum_bits"] == fields["min_normal_bits"]
                 == fields["fast_aligned_bits"] and fields["fast_low_random_bits"] <= fields["min_normal_bits"]))
    )
    # uniform.py from 0 up: where the format's min_normal is the carrier's smallest
    # normal and it has subnormals (spacing below one carrier normal), the
    # carrier's subnormals drop fast_drop_min bits as well (bfloat16, tf32 in float32)
    smallest_normal = 1 << carrier_man_bits
    fields["uniform_from_zero"] = int(
        fields["uniform_drop"] == 1
        and fields["min_normal_bits"] == smallest_normal
        and fields["below_quantum_bits"] < smallest_normal
    )
    fields["stochastic_uniform"] = int(
        fields["uniform_drop"] == 1
        and carrier_man_bits == 23
        and fields["fast_low_random_bits"] >= fields["fast_aligned_bits"]
    )
    quiet_nan = inf_bits | (1 << (carrier_man_bits - 1))
    for sign in ("pos", "neg"):
        fields[f"overflow_{sign}_bits"] = {
            "inf": inf_bits, "nan": quiet_nan, "saturate": fields[f"max_{sign}_bits"], "wrap": quiet_nan,
        }[policy]
    return tuple(int(fields[name]) for name in quantize.PARAM_NAMES)
