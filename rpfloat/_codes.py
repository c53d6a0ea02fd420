"""Values <-> bit patterns of a format: fixed point in NumPy (exact float64
arithmetic), floating point by the numba loops of ``rpfloat._kernels.cpu.codes``.

Float codes are ``sign | exponent field | significand field``; fixed-point codes are
the two's complement word of ``k`` where value = ``k * 2**-frac_bits``.
"""
from __future__ import annotations

import functools
import numbers

import numpy as np

from ._kernels.cpu import codes as code_kernels
from .fixedformat import FixedFormat

__all__ = ["code_dtype", "code_array", "encode_values", "decode_values"]


def code_array(codes, name="codes", kinds="iu") -> np.ndarray:
    """`codes` as an ndarray of integers (a dtype kind in `kinds`), or TypeError
    naming `name`. A list of Python ints that NumPy would hold as float64 or
    objects (codes of 2**63 and up beside smaller ones) is taken as uint64 (or
    int64 with negatives), exactly (ValueError past 64 bits); an empty list as
    int64."""
    array = np.asarray(codes)
    if not isinstance(codes, np.ndarray) and array.dtype.kind in "fO":
        if array.size == 0:
            array = array.astype(np.int64)
        elif all(isinstance(item, numbers.Integral) and not isinstance(item, (bool, np.bool_))
                 for item in np.array(codes, dtype=object).flat):
            values = [int(item) for item in np.array(codes, dtype=object).flat]
            if min(values) >= 0 and max(values) < 1 << 64:
                array = np.array(values, np.uint64).reshape(array.shape)
            elif min(values) >= -(1 << 63) and max(values) < 1 << 63:
                array = np.array(values, np.int64).reshape(array.shape)
            else:
                raise ValueError(f"{name} must fit in 64 bits, got "
                                 f"{max(values, key=abs)}")
    if array.dtype.kind not in kinds:
        kind = "unsigned integers" if kinds == "u" else "integers"
        raise TypeError(f"{name} must be {kind}, got dtype {array.dtype}")
    return array


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


@functools.lru_cache(maxsize=256)
def code_fields(fmt) -> tuple:
    """The fields of a floating-point `fmt` that the code kernels read
    (``rpfloat._kernels.cpu.codes``), as plain integers."""
    kinds = {None: code_kernels.NAN_NONE, "ieee": code_kernels.NAN_IEEE, "max": code_kernels.NAN_MAX,
             "negzero": code_kernels.NAN_NEGZERO}
    fields = {
        code_kernels.F_MAN_BITS: fmt.man_bits,
        code_kernels.F_BIAS: fmt.bias,
        code_kernels.F_EXP_BITS: fmt.exp_bits,
        code_kernels.F_BITS: fmt.bits,
        code_kernels.F_MIN_NORMAL_BITS: int(np.float64(fmt.min_normal).view(np.int64)),
        code_kernels.F_NAN_CODE: _nan_code(fmt) if fmt.has_nan else 0,
        code_kernels.F_NAN_KIND: kinds[fmt.nan],
        code_kernels.F_SUBNORMALS: int(fmt.subnormals),
        code_kernels.F_HAS_INF: int(fmt.has_inf),
    }
    return tuple(int(fields[index]) for index in range(code_kernels.N_FIELDS))


def encode_values(values: np.ndarray, fmt) -> np.ndarray:
    """Codes of float64 `values` that are already values of `fmt` (or NaN/±inf where it has them)."""
    if isinstance(fmt, FixedFormat):
        if np.isnan(values).any():  # (fixed-point formats have no NaN code)
            raise ValueError(f"cannot encode NaN: {fmt!r} has no NaN code (a NaN input, or an infinite one, "
                             "which overflow='wrap' makes NaN; overflow='saturate' gives inf the code of max)")
        words = np.ldexp(values, fmt.frac_bits).astype(np.int64)
        mask = np.int64((1 << fmt.bits) - 1) if fmt.bits < 64 else np.int64(-1)
        return (words & mask).astype(code_dtype(fmt.bits))
    flat = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    codes = np.empty(flat.size, np.uint64)
    if code_kernels.encode_kernel()(flat, codes, code_fields(fmt)) and not fmt.has_nan:
        raise ValueError(f"cannot encode NaN: {fmt!r} has no NaN code")
    return codes.astype(code_dtype(fmt.bits)).reshape(np.shape(values))


def decode_values(codes: np.ndarray, fmt) -> np.ndarray:
    """float64 values of the integer `codes` of `fmt`."""
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= 1 << fmt.bits):
        packed = " (packed bytes? rp.unpack(packed, fmt) gives the codes back)" if (
            codes.dtype == np.uint8 and fmt.bits < 8) else ""
        raise ValueError(f"codes must lie in [0, 2**{fmt.bits}) for {fmt!r}{packed}")
    if isinstance(fmt, FixedFormat):
        if fmt.signed and codes.dtype.kind == "u" and codes.dtype.itemsize * 8 == fmt.bits:
            words = codes.view(codes.dtype.str.replace("u", "i"))  # two's complement as is, same byte order
        else:
            words = codes.astype(np.int64)
            if fmt.signed:  # codes from 2**(bits - 1) up are negative
                words -= (words >> (fmt.bits - 1)) << fmt.bits
        return np.ldexp(words.astype(np.float64), -fmt.frac_bits)
    codes = codes.astype(np.uint64)
    flat = np.ascontiguousarray(codes).reshape(-1)
    values = np.empty(flat.size, np.float64)
    code_kernels.decode_kernel()(flat, values, code_fields(fmt))
    return values.reshape(codes.shape)
