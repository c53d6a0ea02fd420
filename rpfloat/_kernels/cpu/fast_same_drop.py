"""Rounding where every normal magnitude drops the same bits: the element
functions of the fast loops of kernels ``loops.UNIFORM_KERNELS`` (one per
deterministic mode, and stochastic rounding of float32 data).

Where the format has no subnormal numbers above the carrier's smallest normal
(bfloat16 and tf32 in float32, whose subnormals are the carrier's; every format
without subnormals), every magnitude ``a`` of the fast range at or above
``fast_aligned_bits`` keeps ``man_bits`` significand bits and drops ``d =
fast_drop_min`` bits, the same for all, and rounding to nearest (ties to even)
is the integer sum::

    r = (a + 2**(d - 1) - 1 + ((a >> d) & 1)) & ~(2**d - 1)

(the carry runs into the exponent field by itself), with shifts by one count
for the whole loop. The other deterministic modes add another bias (nearest
away: ``2**(d - 1)``; toward zero: 0; up and down: 0 or ``2**d - 1`` by the
sign), and round to odd sets the kept last bit where a dropped bit is set.
Below fast_aligned_bits (formats without subnormals: below min_normal) the
result is 0 or min_normal, as ``core.element.step_below`` decides. Where the
format's min_normal is the carrier's smallest normal and its spacing lies
below it (bfloat16 and tf32 in float32: parameter ``uniform_from_zero``), the
carrier's subnormals drop the same d bits, and the loops take every magnitude
from 0 up (zeros and subnormals too), with nothing below.

Stochastic rounding adds the spec's random bias instead, the top d bits of the
element's random number (as ``core.fast_element.stochastic_bias`` draws them: for
float32 data its high word, the bits beyond the top ``rand_bits`` cleared)::

    r = (a + bias) & ~(2**d - 1)

which is the bit-level fast path's rounding from fast_aligned_bits up, where
that path's stochastic range starts for these formats in float32.

With one shift count for the whole loop this takes fewer instructions than
``core.fast_element.fast_round_bits``. It works on integers only, so it does not depend
on the thread's floating-point environment.

The table's condition ``table.uniform_drop`` says where it applies:
floating-point formats with -0, ``man_bits < carrier_man_bits``, a fast range,
and the same bits dropped from fast_aligned_bits to the format's largest value;
and ``table.stochastic_uniform`` where, in addition, the carrier is float32 and the
stochastic fast range starts at fast_aligned_bits: formats whose min_normal is
float32's, 2**-126 (bfloat16, tf32, FloatFormat(8, m) for m < 23).
The kernel table (``table``) gives the kernels (not for stochastic_equal).
"""
import numpy as np
from numba import types
from numba.extending import overload

from ..core.bits import NUMBA_OPTIONS, bit_and, bit_or, bit_xor, shift_left, shift_right, wrapping_add
from ..core.layout import DOWN, NEAREST, NEAREST_AWAY, ODD, UP
from ..core.stream import top_bits_mask_32

U_32 = np.uint64(32)


def uniform_round(bits, mode, drop, aligned, half_quantum, below_tie_up, quantum):
    """Carrier bits `bits` (int32 or int64) rounded in the deterministic `mode`
    (a ``loops`` mode number, a constant of the kernel), sign included, in the
    fast range of a format with the ``uniform_drop`` parameter: `drop` bits
    dropped from magnitude `aligned` up; below it `quantum` (one spacing) or 0.
    The other arguments are the parameters fast_drop_min, fast_aligned_bits,
    half_quantum_bits, below_tie_up and below_quantum_bits."""
    raise NotImplementedError("uniform_round runs inside numba kernels only")


@overload(uniform_round, jit_options=NUMBA_OPTIONS)
def _uniform_round(bits, mode, drop, aligned, half_quantum, below_tie_up, quantum):
    if bits == types.int32:
        width = np.int32
    elif bits == types.int64:
        width = np.int64
    else:
        return None
    sign = width(-1) << width(bits.bitwidth - 1)
    magnitude_mask = width(~sign)
    one, zero = width(1), width(0)

    def uniform(bits, mode, drop, aligned, half_quantum, below_tie_up, quantum):
        # loop invariants, each cast to the lanes' width (numba widens int32 arithmetic)
        count = width(drop)
        half_less_one = width((np.int64(1) << (drop - 1)) - 1)
        low_mask = width((np.int64(1) << drop) - 1)
        kept_mask = width(~low_mask)
        magnitude = bit_and(bits, magnitude_mask)
        negative = bits < zero
        # at or above `aligned`: a bias, then the dropped bits cleared
        if mode == NEAREST:
            bias = wrapping_add(half_less_one, bit_and(shift_right(magnitude, count), one))
        elif mode == NEAREST_AWAY:
            bias = wrapping_add(half_less_one, one)
        elif mode == UP:
            bias = zero if negative else low_mask
        elif mode == DOWN:
            bias = low_mask if negative else zero
        else:  # toward zero, odd
            bias = zero
        rounded = bit_and(wrapping_add(magnitude, bias), kept_mask)
        if mode == ODD:
            inexact = bit_and(magnitude, low_mask) != zero
            rounded = bit_or(rounded, shift_left(width(inexact), count))
        # below `aligned` (formats without subnormals): 0 or one spacing
        if mode == NEAREST:
            step = magnitude > width(half_quantum - below_tie_up)
        elif mode == NEAREST_AWAY:
            step = magnitude >= width(half_quantum)
        elif mode == UP:
            step = magnitude != zero and not negative
        elif mode == DOWN:
            step = magnitude != zero and negative
        elif mode == ODD:
            step = magnitude != zero
        else:
            step = False
        below = width(quantum) if step else zero
        result = below if magnitude < width(aligned) else rounded
        return bit_or(result, bit_and(bits, sign))

    return uniform


def stochastic_uniform(bits, drop, random, rand_bits, magnitude=None):
    """float32 bits `bits` (an int32) rounded stochastically, sign included, in
    the fast range of a format with the ``stochastic_uniform`` parameter: `drop`
    bits dropped, the bias drawn from the high word of the uint64 `random`, of
    which the top `rand_bits` bits count. A loop that has the range check's
    magnitude of `bits` (|x| wherever x is in the range) passes it as
    `magnitude`; the sign is then ``bits ^ magnitude``, and the loop keeps no
    mask constant in a register (the split loop, which has its own, does not)."""
    raise NotImplementedError("stochastic_uniform runs inside numba kernels only")


@overload(stochastic_uniform, jit_options=NUMBA_OPTIONS)
def _stochastic_uniform(bits, drop, random, rand_bits, magnitude=None):
    if bits != types.int32:
        return None

    def uniform_32(bits, drop, random, rand_bits, magnitude=None):
        # loop invariants: the bias is the top `drop` bits of the word's top
        # `rand_bits` bits, a right shift by 32 - drop (1 <= drop <= 23)
        counted = top_bits_mask_32(rand_bits, 0)
        shift = np.uint32(32 - drop)
        kept_mask = np.int32(~((np.int64(1) << drop) - 1))
        if magnitude is None:
            magnitude, sign = bit_and(bits, np.int32(0x7FFFFFFF)), bit_and(bits, np.int32(-(2**31)))
        else:
            sign = bit_xor(bits, magnitude)
        bias = np.int32(shift_right(bit_and(np.uint32(random >> U_32), counted), shift))
        rounded = bit_and(wrapping_add(magnitude, bias), kept_mask)
        return bit_or(rounded, sign)

    return uniform_32
