"""Bit-level intrinsics that numba does not expose for scalars.

``bitcast`` reinterprets a float as the signed integer of the same width (and back)
without going through memory; ``count_leading_zeros`` is LLVM's ``ctlz``.
"""
from numba import types
from numba.extending import intrinsic

NUMBA_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


@intrinsic
def float64_to_bits(typingctx, value):
    """Bits of a float64 as int64."""
    if value != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


@intrinsic
def bits_to_float64(typingctx, bits):
    """The float64 whose bits are the int64 `bits`."""
    if bits != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@intrinsic
def float32_to_bits(typingctx, value):
    """Bits of a float32 as int32."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int32))

    return types.int32(types.float32), codegen


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
            width_type = context.get_value_type(value)
            amount = context.cast(builder, args[1], count, value)
            if kind == "left":
                return builder.shl(args[0], amount)
            return builder.lshr(args[0], amount)

        return value(value, count), codegen

    return shift


shift_left = _shift("left")
shift_right = _shift("right")
