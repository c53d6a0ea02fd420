"""Stochastic rounding of float64 data in 32-bit halves: the fast loop for
formats whose significand has at most 20 bits (bfloat16, float16, the float8
and float6 formats, FloatFormat(6, 9)).

Those formats keep none of a float64's low 32-bit word: from one spacing up
the bits dropped are ``drop = max(drop_min, drop_offset - exponent field)`` with
``32 <= drop <= 52``, so the rounded magnitude is ``(a + B) & ~(2**drop - 1)``
(``core.fast_element.fast_round_bits``: a the magnitude, B the random bias, the top
`drop` bits of the 64-bit random number R with those beyond its top
`rand_bits` cleared) and its low word is 0. Its high word comes from the
halves alone, with ``d = drop - 32`` and R' = R so masked::

    B_high = R'_high >> (32 - d)
    B_low  = (R'_high << d | R'_low >> (32 - d)) mod 2**32
    carry  = B_low + a_low >= 2**32
    result_high = (a_high + B_high + carry) & ~(2**d - 1)

Every value in the loop is 32 bits wide, so that AVX-512 rounds sixteen
elements per vector (eight for the 64-bit loop), and both halves of R are
mixed in the loop itself, in the same lanes (``stream.weyl_halves``), where the
64-bit loop mixes them a block ahead. The results are the 64-bit loop's, bit
for bit, and the tests hold both to each other and to the documented stream.

The loop covers magnitudes from one spacing (the 64-bit fast path also takes
some below it) to the format's largest value, narrowed to what the high words
alone can tell: from a multiple of 2**32 to one below a multiple of 2**32
(``core.fast_element.fast_bounds``). In that range no result is 0 (the smallest is one
spacing), none overflows, and no input is inf or NaN (the variant below widens
it down to 0).

Its variant from 0 up (`round_block_from_zero`, kernel
``loops.round_stochastic_halves_from_zero``: formats whose spacing q below
min_normal is at least 2**-32, ``table.halves_from_zero``) rounds the
magnitudes below one spacing too, onto 0 or q, as the split loop does for
float32 data (``fast_stochastic_float32``): with F = ``floor(|x| / q * 2**32)`` and X the
high random word (masked), the step is up iff ``F + X >= 2**32`` wherever the
sum is not ``2**32 - 1``, the one case the low words decide. In 31 bits, as
signed words (``G = F >> 1``, ``H = X >> 1``): up iff the int32 sum G + H is
negative, its sign bit selecting the result, and undecided where it is
0x7FFFFFFF (about once in 2**31 elements; never with at most 31 random bits,
where X is even), which sends the block to the general loop. The variant is
valid wherever q is at least 2**-990 (`below_one_spacing`); the kernel takes it
from 2**-32 up: onto coarse formats ordinary data put values below one
spacing (0.16% of N(0, 1) below e4m3's 2**-9), enough to send nearly every
block of the other loop through the range check's general pass. The variant
takes a few more instructions per element, so formats whose spacing lies below
ordinary data's magnitudes (bfloat16, tf32, FloatFormat(6, 9): 2**-133,
2**-136, 2**-39) keep the other.
"""
import numpy as np
from numba import njit

from ..core.bits import HIGH_WORD, LOW_WORD, NUMBA_OPTIONS, bit_xor, hidden_zero, shift_left, shift_right, wrapping_add
from ..core.stream import WEYL_32, weyl_halves

MAGNITUDE_32 = np.int32(0x7FFFFFFF)
SIGN_32 = np.int32(-(2**31))
MIN_DROP = 32  # the loop needs drop >= 32 everywhere in its range: drop_min at least this
# the float64 bits of 2**-978: from this spacing up, round_block's zeros (|x| < 2**-1042) are in range
ZERO_HALVES_QUANTUM = np.int64(1023 - 978) << np.int64(52)


@njit(**NUMBA_OPTIONS)
def round_high_word(high, low, drop_min, drop_offset, random_high, random_low, mask_high, mask_low, all_ones,
                    zero_sign, from_zero, quantum_high):
    """``(word, total)``: the high word (int32) of float64 halves `high` (int32)
    and `low` (uint32) rounded stochastically (see the module docstring); the
    low word is 0. `mask_high` and `mask_low` keep the top `rand_bits` bits of
    the random number; `all_ones` is 0xFFFFFFFF, given at run time (see
    `round_block`). Magnitudes below one spacing (`quantum_high`: its high word)
    round by `below_one_spacing` where `from_zero` (a constant in each loop:
    the branch goes when LLVM inlines this function into it), whose `total`
    (else 0) is 0x7FFFFFFF where it may have left the step undecided;
    else a high word of magnitude 0 gives 0 with its sign bit kept by
    `zero_sign` (an int32: the sign bit, or 0 for formats without -0)."""
    magnitude = np.int32(high & MAGNITUDE_32)
    exponent_field = shift_right(magnitude, np.int32(20))
    # drop - 32, in 0..20 (the mask only tells LLVM that the shifts stay in the word)
    drop = max(drop_min, np.int32(drop_offset - exponent_field))
    kept_drop = np.int32(np.int32(drop - np.int32(32)) & np.int32(31))
    random_high = np.uint32(random_high & mask_high)
    random_low = np.uint32(random_low & mask_low)
    half_random = shift_right(random_high, np.uint32(1))
    # x >> (32 - d) as (x >> 1) >> (31 - d): d == 0 gives 0, with shift counts below 32
    right = np.uint32(np.int32(31) - kept_drop)
    bias_high = shift_right(half_random, right)
    bias_low = np.uint32(shift_left(random_high, np.uint32(kept_drop))
                         | shift_right(shift_right(random_low, np.uint32(1)), right))
    carry = np.int32(bias_low > bit_xor(low, all_ones))  # B_low + a_low >= 2**32
    total = np.int32(wrapping_add(wrapping_add(magnitude, np.int32(bias_high)), carry))
    rounded = np.int32(total & shift_left(np.int32(-1), kept_drop))
    sign = np.int32(high & SIGN_32)
    signed = np.int32(rounded | sign)
    if from_zero:
        below, total = below_one_spacing(magnitude, low, exponent_field, half_random, quantum_high, sign,
                                         np.int32(high & zero_sign))
        return (below if magnitude < quantum_high else signed), total
    return (np.int32(high & zero_sign) if magnitude == np.int32(0) else signed), np.int32(0)  # |x| < 2**-1042: 0


@njit(**NUMBA_OPTIONS)
def below_one_spacing(magnitude, low, exponent_field, half_random, quantum_high, sign, zero):
    """``(word, total)`` for a float64 magnitude below one spacing q (`magnitude`
    and `low`: its high word, int32, and low word, uint32; `exponent_field`: the
    high word's): the high word of the result, q (`quantum_high`: q's high word)
    with the sign bit `sign`, or `zero`, whichever the step gives; `total`, the
    int32 sum G + H: 0x7FFFFFFF where the high random word may leave the step
    undecided (module docstring). At or above q, G is 0 and `total` is H, which
    may read 0x7FFFFFFF too (once in 2**31): the caller then only does the
    block again.
    `half_random` is the high random word, masked to `rand_bits`, shifted right
    by 1. Valid where q is at least 2**-990: there a high word of magnitude 0
    (|x| < 2**-1042, zeros included) shifts out entirely."""
    shift = np.uint32(np.int32(shift_right(quantum_high, np.int32(20)) - exponent_field))  # >= 1 below q
    # the 53-bit significand >> 21: 32 bits, the hidden bit on top; x / q * 2**31 is this >> shift
    significand = np.uint32(shift_left(np.uint32(magnitude), np.uint32(11)) | np.uint32(0x80000000)
                            | shift_right(low, np.uint32(21)))
    half_fraction = shift_right(significand, shift & np.uint32(31)) if shift < np.uint32(32) else np.uint32(0)
    total = np.int32(wrapping_add(half_fraction, half_random))
    word = np.int32(quantum_high | sign) if total < np.int32(0) else zero  # the sum reached 2**31
    return word, total


def _block_loop(from_zero):
    """`round_block`, or with `from_zero` `round_block_from_zero`: the flag is a
    constant in each (numba compiles closure variables in)."""

    @njit(**NUMBA_OPTIONS)
    def round_block(source_words, target_words, drop_min, drop_offset, range_mask, zero_as, zero_sign, keys, weyl,
                    mask_high, mask_low, all_ones, quantum_high):
        """Round float64 elements given and written as 32-bit words (`source_words`,
        `target_words`: int32 views of float64 arrays, two words per element), the
        first drawing random number `weyl` (``stream.weyl_bits``), the next ones the
        numbers after it. Returns the smallest and largest range magnitude (the high
        words, masked with the high word of `range_mask`) for the caller's range
        check, a zero range magnitude counted as `zero_as` (an int32).

        An element whose high word's magnitude is 0 (``|x| < 2**-1042``, zeros
        included) gives ``+-0`` (+0 where `zero_sign` is 0: formats without -0).
        That is its stochastic rounding wherever one spacing is at least
        ``2**-978``: ``|x|`` is then below ``2**-64`` spacings, and no `rand_bits`
        (at most 64) gives it a chance to step up (`ZERO_HALVES_QUANTUM`).
        The caller makes `zero_as` a magnitude of its range there, else 0.

        From 0 up (`round_block_from_zero`, valid for formats whose spacing
        below min_normal is at least 2**-990) magnitudes below one spacing
        (`quantum_high`: its high word) round in the loop too
        (`below_one_spacing`), and the pair returned is the greatest of their
        sums (0x7FFFFFFF where a step may have been left undecided: the caller
        gives the block to the general loop) and the greatest range magnitude
        as a uint32, in which an unsigned format's negative values (the sign
        bit kept) would lie above the range: one maximum each, where a minimum
        and a maximum were (`zero_as` is unused).

        `all_ones` must be 0xFFFFFFFF, computed by the caller from a run-time value
        (`opaque_all_ones`): were it a constant, LLVM would turn the carry test
        ``B_low > ~a_low`` into an add-with-overflow, which it does not vectorize."""
        range_mask_high = np.int32(range_mask >> 32)
        lowest = np.int32(2**31 - 1)
        highest = np.int32(-(2**31))
        greatest_sum = np.int32(-(2**31))
        greatest = np.uint32(0)
        drop_min = np.int32(drop_min)
        drop_offset = np.int32(drop_offset)
        quantum_high = np.int32(quantum_high)
        for i in range(source_words.size // 2):  # indices counted from 0 vectorize; from `first` they did not
            high = source_words[2 * i + HIGH_WORD]
            random_high, random_low = weyl_halves(keys, weyl)
            weyl = wrapping_add(weyl, WEYL_32)
            word, total = round_high_word(
                high, np.uint32(source_words[2 * i + LOW_WORD]), drop_min, drop_offset, random_high, random_low,
                mask_high, mask_low, all_ones, zero_sign, from_zero, quantum_high)
            target_words[2 * i + HIGH_WORD] = word
            target_words[2 * i + LOW_WORD] = np.int32(0)
            magnitude = np.int32(high & range_mask_high)
            if from_zero:
                greatest_sum = max(greatest_sum, total)
                greatest = max(greatest, np.uint32(magnitude))
            else:
                magnitude = zero_as if magnitude == np.int32(0) else magnitude
                lowest = min(lowest, magnitude)
                highest = max(highest, magnitude)
        if from_zero:
            return greatest_sum, np.int32(greatest)
        return lowest, highest

    return round_block


round_block = _block_loop(False)
round_block_from_zero = _block_loop(True)


@njit(**NUMBA_OPTIONS)
def opaque_all_ones(rand_bits):
    """0xFFFFFFFF as a uint32, from `rand_bits` (1 to 64) so that the compiler cannot
    see its value (``bits.hidden_zero``)."""
    return bit_xor(np.uint32(0xFFFFFFFF), hidden_zero(rand_bits))
