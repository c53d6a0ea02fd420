"""Values <-> bit patterns of a format, vectorised in NumPy (exact float64 arithmetic).

Float codes are ``sign | exponent field | significand field``; fixed-point codes are
the two's complement word of ``k`` where value = ``k * 2**-frac_bits``.
"""
from __future__ import annotations

import numpy as np

from .fixedformat import FixedFormat

__all__ = ["code_dtype", "encode_values", "decode_values"]


def code_dtype(bits: int) -> np.dtype:
    """The narrowest unsigned integer dtype holding `bits` bits."""
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if bits <= 8 * np.dtype(dtype).itemsize:
            return np.dtype(dtype)
    raise ValueError(f"no unsigned dtype holds {bits} bits")


def _nan_code(fmt) -> int:
    """The canonical NaN code without sign (the one ml_dtypes produces)."""
    all_ones_exponent = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    if fmt.nan == "ieee":
        quiet_bit = 1 << (fmt.man_bits - 1) if fmt.man_bits >= 1 else 0
        return all_ones_exponent | quiet_bit
    if fmt.nan == "max":
        return all_ones_exponent | ((1 << fmt.man_bits) - 1)
    return 1 << (fmt.bits - 1)  # "negzero": the code of -0


def encode_values(values: np.ndarray, fmt) -> np.ndarray:
    """Codes of float64 `values` that are already values of `fmt` (or NaN/±inf where it has them)."""
    nan = np.isnan(values)
    if nan.any() and not fmt.has_nan:
        raise ValueError(f"cannot encode NaN: {fmt!r} has no NaN code")
    if isinstance(fmt, FixedFormat):
        words = np.ldexp(np.where(nan, 0.0, values), fmt.frac_bits).astype(np.int64)
        mask = np.int64((1 << fmt.bits) - 1) if fmt.bits < 64 else np.int64(-1)
        return (words & mask).astype(code_dtype(fmt.bits))
    magnitude = np.abs(np.where(nan, 0.0, values))
    infinite = np.isinf(magnitude)
    finite_magnitude = np.where(infinite, 0.0, magnitude)
    fraction, exponent = np.frexp(finite_magnitude)  # magnitude = fraction * 2**exponent
    normal = finite_magnitude >= fmt.min_normal
    man_bits = fmt.man_bits
    exponent_field = np.where(normal, exponent - 1 + fmt.bias, 0).astype(np.uint64)
    significand_field = np.where(
        normal,
        np.ldexp(fraction, man_bits + 1) - 2.0**man_bits,
        np.ldexp(np.where(normal, 0.0, finite_magnitude), man_bits - fmt.emin),
    ).astype(np.uint64)
    codes = (exponent_field << np.uint64(man_bits)) | significand_field
    codes = np.where(infinite, np.uint64(((1 << fmt.exp_bits) - 1) << man_bits), codes)
    sign = np.uint64(1 << (fmt.bits - 1))
    codes = np.where(np.signbit(values) & ~nan, codes | sign, codes)
    nan_code = _nan_code(fmt)
    if fmt.nan == "negzero":
        codes = np.where(nan, np.uint64(nan_code), codes)
    else:
        codes = np.where(nan, np.where(np.signbit(values), sign, np.uint64(0)) | np.uint64(nan_code), codes)
    return codes.astype(code_dtype(fmt.bits))


def decode_values(codes: np.ndarray, fmt) -> np.ndarray:
    """float64 values of the integer `codes` of `fmt`."""
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= 1 << fmt.bits):
        raise ValueError(f"codes must lie in [0, 2**{fmt.bits}) for {fmt!r}")
    codes = codes.astype(np.uint64)
    if isinstance(fmt, FixedFormat):
        words = codes.astype(np.int64)
        if fmt.signed:
            words = np.where(words >= 1 << (fmt.bits - 1), words - (1 << fmt.bits), words)
        return np.ldexp(words.astype(np.float64), -fmt.frac_bits)
    man_bits = fmt.man_bits
    exp_all_ones = (1 << fmt.exp_bits) - 1
    sign = (codes >> np.uint64(fmt.bits - 1)) & np.uint64(1)
    field = ((codes >> np.uint64(man_bits)) & np.uint64(exp_all_ones)).astype(np.int64)
    significand = (codes & np.uint64((1 << man_bits) - 1)).astype(np.int64)
    normal = field != 0
    significand = np.where(normal, significand + (1 << man_bits), significand)
    scale = np.where(normal, field, 1) - fmt.bias - man_bits
    with np.errstate(over="ignore"):  # the all-ones field of formats that reserve it
        magnitude = np.ldexp(significand.astype(np.float64), scale.astype(np.int32))
    if not fmt.subnormals:  # field-0 codes of a format without subnormals are zeros (as in
        magnitude = np.where(normal, magnitude, 0.0)  # hardware that treats denormals as zero)
    if fmt.nan == "ieee":
        top = field == exp_all_ones
        low = codes & np.uint64((1 << man_bits) - 1)
        magnitude = np.where(top, np.where((low == 0) & fmt.has_inf, np.inf, np.nan), magnitude)
    elif fmt.nan == "max":
        magnitude = np.where((codes & np.uint64((1 << (fmt.bits - 1)) - 1)) == (1 << (fmt.bits - 1)) - 1,
                             np.nan, magnitude)
    values = np.where(sign == 1, -magnitude, magnitude)
    if fmt.nan == "negzero":
        values = np.where(codes == np.uint64(1 << (fmt.bits - 1)), np.nan, values)
    return values
