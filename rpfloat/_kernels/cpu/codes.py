"""Values <-> codes of a floating-point format in one vectorised pass each
(``rpfloat._codes`` validates and lays out; these loops do the arithmetic).

A float64 value of the format (on its grid, or NaN or +-inf where it has them)
splits as its sign, its magnitude bits ``m`` (biased exponent ``b = m >> 52``,
significand ``s`` with its hidden bit, ``|v| = s * 2**(max(b, 1) - 1075)``),
and its code is::

    normal (|v| >= min_normal):  (e + bias) << man_bits  |  top man_bits of m's fraction
                                 (e = b - 1023; a float64 subnormal, in formats whose least
                                 normal is one, shifted up to a hidden bit first)
    below min_normal:            s >> (52 + emin - man_bits - (max(b, 1) - 1023))
                                 (the multiple of 2**(emin - man_bits) that |v| is)
    +-inf:                       all-ones exponent field, zero significand
    NaN:                         the format's NaN code, with the sign of the NaN
                                 (where -0's code is NaN's, it is the sign bit)

with the sign bit on top. Decoding inverts this: ``s * 2**e`` from the fields,
its power of two in two factors so that every step stays a normal float64
(exact: the product is a value the format holds, so float64 holds it too).
"""
import functools

import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS, bits_to_float64, count_leading_zeros, float64_to_bits
from .loops import compiled

# the fields of a format the loops read (rpfloat._codes.code_fields builds them), in this order
F_MAN_BITS, F_BIAS, F_EXP_BITS, F_BITS, F_MIN_NORMAL_BITS, F_NAN_CODE, F_NAN_KIND, F_SUBNORMALS, F_HAS_INF = range(9)
N_FIELDS = 9
NAN_NONE, NAN_IEEE, NAN_MAX, NAN_NEGZERO = range(4)  # F_NAN_KIND: the format's nan= (None, "ieee", ...)
FIELDS_TYPE = types.UniTuple(types.int64, N_FIELDS)

MAGNITUDE_64 = np.int64(0x7FFFFFFFFFFFFFFF)
FRACTION_64 = np.int64(0x000FFFFFFFFFFFFF)
HIDDEN_64 = np.int64(1) << 52
INF_BITS_64 = np.int64(0x7FF0000000000000)


@njit(**NUMBA_OPTIONS)
def _power_of_two(exponent):
    """``2.0**exponent`` for an exponent in [-1022, 1023], from its bits."""
    return bits_to_float64(np.int64(exponent + 1023) << 52)


@njit(**NUMBA_OPTIONS)
def encode_floats(values, codes, fields):
    """The codes of the float64 `values` (see the module) into `codes`
    (uint64); returns how many values are NaN (the caller raises where the
    format has no NaN code)."""
    man_bits, bias, exp_bits, bits = fields[F_MAN_BITS], fields[F_BIAS], fields[F_EXP_BITS], fields[F_BITS]
    min_normal_bits, nan_code = fields[F_MIN_NORMAL_BITS], fields[F_NAN_CODE]
    emin = 1 - bias
    sign_bit = np.int64(1) << (bits - 1)
    inf_code = ((np.int64(1) << exp_bits) - 1) << man_bits
    fraction_shift = 52 - man_bits
    fraction_mask = (np.int64(1) << man_bits) - 1
    nans = 0
    for i in range(values.size):
        value_bits = float64_to_bits(values[i])
        magnitude = value_bits & MAGNITUDE_64
        biased = magnitude >> 52
        # a format normal that is a float64 subnormal (formats whose least normal is below
        # 2**-1022): its significand shifted up to a hidden bit, and its true exponent
        lift = max(count_leading_zeros(magnitude) - 11, np.int64(0)) if biased == 0 else np.int64(0)
        lifted = magnitude << lift
        exponent = (biased - 1023) if biased != 0 else (-1022 - lift)
        normal = (exponent + bias) << man_bits | ((lifted >> fraction_shift) & fraction_mask)
        significand = (magnitude & FRACTION_64) | (HIDDEN_64 if biased != 0 else np.int64(0))
        shift = 52 + emin - man_bits - (max(biased, np.int64(1)) - 1023)
        below = significand >> min(max(shift, np.int64(0)), np.int64(63)) if shift < 64 else np.int64(0)
        code = normal if magnitude >= min_normal_bits else below
        code = inf_code if magnitude == INF_BITS_64 else code
        is_nan = magnitude > INF_BITS_64
        nans += is_nan
        code = nan_code if is_nan else code
        # the sign bit where v is negative (a "negzero" NaN code, -0's, has it already)
        codes[i] = np.uint64(code | (sign_bit if value_bits < 0 else np.int64(0)))
    return nans


@njit(**NUMBA_OPTIONS)
def decode_floats(codes, values, fields):
    """The float64 values of the `codes` (uint64, each below ``2**bits``)
    into `values`: the module's rules inverted."""
    man_bits, bias, exp_bits, bits = fields[F_MAN_BITS], fields[F_BIAS], fields[F_EXP_BITS], fields[F_BITS]
    nan_kind, subnormals, has_inf = fields[F_NAN_KIND], fields[F_SUBNORMALS] != 0, fields[F_HAS_INF] != 0
    exp_all_ones = (np.int64(1) << exp_bits) - 1
    fraction_mask = (np.int64(1) << man_bits) - 1
    magnitude_mask = (np.int64(1) << (bits - 1)) - 1
    negzero_code = np.int64(1) << (bits - 1)
    for i in range(codes.size):
        code = np.int64(codes[i])
        field = (code >> man_bits) & exp_all_ones
        fraction = code & fraction_mask
        normal = field != 0
        significand = fraction + ((np.int64(1) << man_bits) if normal else np.int64(0))
        exponent = (field if normal else np.int64(1)) - bias - man_bits
        # 2**exponent in two factors, each a normal float64 (a format whose values float64
        # holds has exponents in [-1074, 1024])
        half = exponent >> 1
        magnitude = np.float64(significand) * _power_of_two(half) * _power_of_two(exponent - half)
        magnitude = magnitude if normal or subnormals else 0.0
        if nan_kind == NAN_IEEE:
            top = field == exp_all_ones
            magnitude = (np.inf if fraction == 0 and has_inf else np.nan) if top else magnitude
        elif nan_kind == NAN_MAX:
            magnitude = np.nan if (code & magnitude_mask) == magnitude_mask else magnitude
        value = -magnitude if (code >> (bits - 1)) & 1 != 0 else magnitude
        if nan_kind == NAN_NEGZERO and magnitude == 0.0:  # no -0 there: a field-0 code of either sign is +0
            value = 0.0
        values[i] = np.nan if nan_kind == NAN_NEGZERO and code == negzero_code else value


ENCODE_SIGNATURE = types.int64(types.Array(types.float64, 1, "C", readonly=True), types.Array(types.uint64, 1, "C"),
                               FIELDS_TYPE)
DECODE_SIGNATURE = types.void(types.Array(types.uint64, 1, "C", readonly=True), types.Array(types.float64, 1, "C"),
                              FIELDS_TYPE)


@functools.cache  # (the dispatcher's compile() costs ~20 us a call)
def encode_kernel():
    """The compiled entry point of `encode_floats` (compiled, or loaded from
    numba's cache, on first use)."""
    return compiled(encode_floats, ENCODE_SIGNATURE)


@functools.cache
def decode_kernel():
    """The compiled entry point of `decode_floats` (as `encode_kernel`)."""
    return compiled(decode_floats, DECODE_SIGNATURE)
