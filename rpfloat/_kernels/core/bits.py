"""Bit-level intrinsics that numba does not expose for scalars.

``bitcast`` reinterprets a float as the signed integer of the same width (and back)
without going through memory; ``count_leading_zeros`` is LLVM's ``ctlz``;
``round_half_even`` is LLVM's ``roundeven``; ``fused_multiply_add`` its ``fma``.
`float64_words` widens a float32 in 32-bit integer operations (for kernels that
keep every value 32 bits wide).
"""
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

NUMBA_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")

# Where a float64's low and high 32-bit words lie in a uint32 view of float64s.
LOW_WORD, HIGH_WORD = (0, 1) if sys.byteorder == "little" else (1, 0)


def _bitcast(source_type, target_type):
    @intrinsic
    def bitcast(typingctx, value):
        if value != source_type:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target_type))

        return target_type(source_type), codegen

    return bitcast


float64_to_bits = _bitcast(types.float64, types.int64)
bits_to_float64 = _bitcast(types.int64, types.float64)
float32_to_bits = _bitcast(types.float32, types.int32)
bits_to_float32 = _bitcast(types.int32, types.float32)


@intrinsic
def count_leading_zeros(typingctx, value):
    """Leading zero bits of an int64 (64 for zero)."""
    if value != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], context.get_constant(types.boolean, False))

    return types.int64(types.int64), codegen


def _shift(kind):
    @intrinsic
    def shift(typingctx, value, count):
        """`value` shifted by `count` in `value`'s own integer width (numba would
        widen an int32 to int64 first, which keeps LLVM from using int32 lanes).
        The count must lie in [0, width); right shifts are logical."""
        if not isinstance(value, types.Integer) or not isinstance(count, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            amount = context.cast(builder, args[1], count, value)
            if kind == "left":
                return builder.shl(args[0], amount)
            return builder.lshr(args[0], amount)

        return value(value, count), codegen

    return shift


shift_left = _shift("left")
shift_right = _shift("right")


def _same_type_op(kind):
    @intrinsic
    def op(typingctx, left, right):
        """`left` op `right` in their own integer width, wrapping (numba would
        widen uint32 arithmetic to 64 bits, which keeps LLVM from using 32-bit lanes)."""
        if not isinstance(left, types.Integer) or left != right:
            return None

        def codegen(context, builder, signature, args):
            return getattr(builder, kind)(args[0], args[1])

        return left(left, right), codegen

    return op


wrapping_add = _same_type_op("add")
wrapping_mul = _same_type_op("mul")
bit_xor = _same_type_op("xor")
bit_and = _same_type_op("and_")
bit_or = _same_type_op("or_")


@intrinsic
def fused_multiply_add(typingctx, a, b, c):
    """``a * b + c`` of three float32 or three float64 numbers rounded once (LLVM's
    ``fma``: the instruction where the CPU has it, else the C library's exact ``fma``)."""
    if not (a == b == c and a in (types.float32, types.float64)):
        return None
    name = "llvm.fma.f32" if a == types.float32 else "llvm.fma.f64"

    def codegen(context, builder, signature, args):
        number = context.get_value_type(a)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(number, [number] * 3), name)
        return builder.call(function, args)

    return a(a, a, a), codegen


@intrinsic
def round_half_even(typingctx, value):
    """`value` (float32 or float64) rounded to an integer, ties to even, whatever
    the thread's rounding mode (LLVM's ``roundeven``; ``np.rint`` follows the
    mode, which other code in the process may have changed)."""
    if value not in (types.float32, types.float64):
        return None

    def codegen(context, builder, signature, args):
        function_type = ir.FunctionType(args[0].type, [args[0].type])
        function = cgutils.get_or_insert_function(builder.module, function_type,
                                                  f"llvm.roundeven.f{value.bitwidth}")
        return builder.call(function, args)

    return value(value), codegen


@njit(**NUMBA_OPTIONS)
def hidden_zero(rand_bits):
    """0 as a uint32 that the compiler cannot see: `rand_bits` (1 to 64) >> 7. A
    loop constant xor it is a value, not a constant: LLVM keeps it in a register
    (or folds it from the stack) rather than broadcast it from the constant pool
    in every iteration, which on AMD Zen 3 takes one of the two vector pipes that
    also do every shift and shuffle, the pipes the stochastic loops are short of."""
    return np.uint32(rand_bits >> 7)


REBIAS_HIGH = np.uint32((1023 - 127) << 20)  # float32 -> float64 exponent bias, in the high word


@njit(**NUMBA_OPTIONS)
def float64_words(magnitude):
    """The float64 of float32 magnitude bits `magnitude` (a uint32, 0 or a normal
    number) as its high and low 32-bit words (uint32), without the sign: the
    exponent rebiased from 127 to 1023 and the top 20 significand bits in the
    high word, the last 3 at the top of the low word."""
    high = np.uint32(shift_right(magnitude, np.uint32(3)) + REBIAS_HIGH)
    return (high if magnitude != np.uint32(0) else np.uint32(0)), shift_left(magnitude, np.uint32(29))
