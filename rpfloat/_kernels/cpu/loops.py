"""The CPU block loop: every array kernel but fixed point's own (``fast_fixed``).

`_kernel` makes one kernel per (mode, fast path): a loop over blocks of BLOCK
elements that runs the fast path's element function over each block, finds
what lay outside its range, and gives those elements (the runs of 8 or pieces of
128 holding them) to ``core.element.round_bits`` again. Both decide every case
alike, and the tests hold both to the oracle on the same data. Which kernel
rounds an array is the table's choice (``table``).

Compile time: only `round_bits` is inlined in numba's IR (``inline="always"``):
on its own it is too large for LLVM to inline, and a call per element made the
general path up to 15 times slower (stochastic rounding of data mostly beyond
max). Every other helper is a plain njit function that LLVM inlines and folds
with the kernel's constant mode, giving the same machine code as an IR inline,
which costs seconds of compilation per kernel (CI compiles every kernel from
scratch).

A widening kernel takes float32 data to a float64 result (fixed-point formats
wider than float32, such as q16.16): its fast path rounds the float32 bits with
float32 parameters wherever the result fits float32, its general path rounds
the float64 value, both in the same pass over memory.

The fast loops (`BITS_LOOP` and the others below) each come from one file,
named by what it serves: ``core.fast_element`` (every format with a fast range;
the CUDA kernels share it) and, in this package, ``fast_nearest_float``
(nearest onto floating-point formats, by adding a power of two), ``fast_same_drop`` (formats that drop the same bits from every
magnitude: bfloat16, tf32, formats without subnormals), ``fast_stochastic_float32``
(stochastic rounding of float32 data onto fixed and floating point),
``fast_stochastic_float64`` (stochastic rounding of float64 data in 32-bit words).
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ..core.bits import (
    HIGH_WORD, LOW_WORD, NUMBA_OPTIONS, bit_or, bit_xor, bits_to_float32, bits_to_float64, count_leading_zeros,
    float64_to_bits, float64_words, hidden_zero, shift_left, wrapping_add, wrapping_mul,
)
from ..core.element import U_32, U_LOW_32, U_ONE, U_ZERO, ZERO, round_bits, same_width
from ..core.layout import (
    P_BELOW_QUANTUM_BITS, P_BELOW_TIE_UP, P_CARRIER_MAN_BITS, P_FAST_ALIGNED_BITS, P_FAST_DROP_MIN,
    P_FAST_DROP_OFFSET, P_FAST_RANGE_MASK, P_HALF_QUANTUM_BITS, P_MIN_NORMAL_BITS, P_NO_NEGATIVE_ZERO, P_SCALE_BITS, P_UNIFORM_FROM_ZERO, PARAMS_TYPE,
    NEAREST, STOCHASTIC,
)
from ..core.stream import (
    WEYL_32, counter_bits, fill_halves, keyed_bits, keyed_weyl, loop_constants, segment_keys, top_bits_mask_32,
)
from ..core.fast_element import FAST_BITS_MODES, checked_magnitude, fast_bounds, fast_round_bits, range_magnitude
from .fast_nearest_float import nearest_by_adding
from .fast_same_drop import stochastic_uniform, uniform_round
from .fast_stochastic_float32 import loop_two_31, split_stochastic, stochastic_count, store_scaled, widening_rebias
from .fast_stochastic_float64 import (
    MAGNITUDE_32, ZERO_HALVES_QUANTUM, opaque_all_ones, round_block, round_block_from_zero,
)


def range_keys(bits, low, params, zero_ok):
    """The fast loop's range check of one element: ``(low_key, high_key)``, whose
    least and greatest over a block lie within `range_limits` iff every element
    lies in the range (or is a zero, where `zero_ok`). For int32 bits, unsigned
    keys: the low key is the magnitude less 1 where zeros count (a zero wraps to
    the greatest key), and the high key the magnitude, where the sign bit kept
    for unsigned formats is above the range: one subtraction instead of a
    comparison and a selection, and no `low` to keep in a register. int64 bits
    (no unsigned 64-bit vector minimum in AVX2) keep `checked_magnitude`."""
    raise NotImplementedError("range_keys runs inside numba kernels only")


def range_limits(bits, low, high, zero_ok):
    """``(low_limit, high_limit)`` for `range_keys` of elements like `bits`."""
    raise NotImplementedError("range_limits runs inside numba kernels only")


@njit(**NUMBA_OPTIONS)
def _zero_shift(low, zero_ok):
    """What `range_keys` adds to an int32 magnitude: -1 (0xFFFFFFFF) where zeros
    count and lie below the range, else 0, as a uint32."""
    return np.uint32(0xFFFFFFFF) if zero_ok and low > 0 else np.uint32(0)


@overload(range_keys, jit_options=NUMBA_OPTIONS)
def _range_keys(bits, low, params, zero_ok):
    if bits == types.int32:
        def unsigned_keys(bits, low, params, zero_ok):
            magnitude = np.uint32(range_magnitude(bits, params))
            return wrapping_add(magnitude, _zero_shift(low, zero_ok)), magnitude
        return unsigned_keys

    def signed_keys(bits, low, params, zero_ok):
        magnitude = checked_magnitude(bits, low, params, zero_ok)
        return magnitude, magnitude
    return signed_keys


@overload(range_limits, jit_options=NUMBA_OPTIONS)
def _range_limits(bits, low, high, zero_ok):
    if bits == types.int32:
        def unsigned_limits(bits, low, high, zero_ok):
            return wrapping_add(np.uint32(low), _zero_shift(low, zero_ok)), np.uint32(high)
        return unsigned_limits
    return lambda bits, low, high, zero_ok: (low, high)


@njit(**NUMBA_OPTIONS)
def irregular(bits, low, high, params, zero_ok):
    """1 where `bits` is outside the fast range [`low`, `high`] (and not a zero
    that the fast loop rounds, `zero_ok`), else 0."""
    magnitude = checked_magnitude(bits, low, params, zero_ok)
    return same_width(bits, (magnitude < same_width(bits, low)) | (magnitude > same_width(bits, high)))


@njit(**NUMBA_OPTIONS)
def lowest_set_bit(flags):
    """The position of the lowest set bit of the uint64 `flags` (not 0), as an int64."""
    return np.int64(63) - count_leading_zeros(np.int64(flags & (~flags + U_ONE)))


@njit(**NUMBA_OPTIONS)
def nonzero_bytes(flags):
    """The uint64 `flags` with the top bit of every nonzero byte set, every other bit clear."""
    low_7 = np.uint64(0x7F7F7F7F7F7F7F7F)
    return (((flags & low_7) + low_7) | flags) & ~low_7


@njit(**NUMBA_OPTIONS)
def count_irregular(source, low, high, params, zero_ok):
    """How many elements of `source` lie outside the fast range [`low`, `high`]
    (zeros inside it where `zero_ok`)."""
    count = same_width(source[0], 0)
    for i in range(source.size):
        count = wrapping_add(count, irregular(source[i], low, high, params, zero_ok))
    return count


# A widening kernel (float32 data, float64 result) sees its target as uint32
# pairs (each float64's low and high words, LOW_WORD and HIGH_WORD: 2n words) so
# that every value in its fast loop is 32 bits wide: LLVM then rounds eight
# elements per vector, where a 64-bit store in the loop would make it take four.
# (The uint32 type is what tells these functions that a kernel widens.)


def widen(bits, target):
    """Source carrier bits as carrier bits of `target`: for a widening kernel the
    float64 bits of the float32 whose bits these are, else `bits` unchanged."""
    raise NotImplementedError("widen runs inside numba kernels only")


@overload(widen, jit_options=NUMBA_OPTIONS)
def _widen(bits, target):
    if target.dtype == types.uint32:
        return _widen_float32
    return lambda bits, target: bits


SUBNORMAL_32_SCALE = np.float64(2.0**-149)  # the float32 subnormal spacing


def _widen_float32(bits, target):
    # A float32 subnormal (or zero) is its significand field times 2**-149, made
    # from integers: converting it as a float would give 0 in a thread that treats
    # denormals as zero, which some libraries turn on for the whole process.
    magnitude = bits & np.int32(0x7FFFFFFF)
    if magnitude < np.int32(0x00800000):
        value = np.float64(magnitude) * SUBNORMAL_32_SCALE
        return float64_to_bits(-value if bits < np.int32(0) else value)
    return float64_to_bits(np.float64(bits_to_float32(bits)))


def wide_random(source):
    """Whether the fast loop over `source` reads both halves of its random numbers
    (float64 data): then it mixes them beforehand, a block at a time, in 32-bit
    lanes (``stream.fill_halves``)."""
    raise NotImplementedError("wide_random runs inside numba kernels only")


@overload(wide_random, jit_options=NUMBA_OPTIONS)
def _wide_random(source):
    wide = source.dtype == types.int64
    return lambda source: wide


def words_per_element(target):
    """2 for a widening kernel's target (uint32 pairs), else 1."""
    raise NotImplementedError("words_per_element runs inside numba kernels only")


@overload(words_per_element, jit_options=NUMBA_OPTIONS)
def _words_per_element(target):
    words = 2 if target.dtype == types.uint32 else 1
    return lambda target: words


def store_fast(target, i, bits):
    """``target[i] =`` a fast-path result (source carrier bits). A widening kernel
    writes the float64 of that float32, which is 0 or a normal number (the fast
    range of its parameters has nothing else), in 32-bit operations."""
    raise NotImplementedError("store_fast runs inside numba kernels only")


@overload(store_fast, jit_options=NUMBA_OPTIONS)
def _store_fast(target, i, bits):
    if target.dtype == types.uint32:
        def store_pair(target, i, bits):
            high, low = float64_words(np.uint32(np.uint32(bits) & np.uint32(0x7FFFFFFF)))
            target[2 * i + HIGH_WORD] = np.uint32(high | (np.uint32(bits) & np.uint32(0x80000000)))
            target[2 * i + LOW_WORD] = low
        return store_pair
    def store(target, i, bits):
        target[i] = bits
    return store


def store_general(target, i, bits):
    """``target[i] =`` a general-path result (bits of the target's carrier)."""
    raise NotImplementedError("store_general runs inside numba kernels only")


@overload(store_general, jit_options=NUMBA_OPTIONS)
def _store_general(target, i, bits):
    if target.dtype == types.uint32:
        def store_pair(target, i, bits):
            target[2 * i + LOW_WORD] = np.uint32(np.uint64(bits) & U_LOW_32)
            target[2 * i + HIGH_WORD] = np.uint32(np.uint64(bits) >> U_32)
        return store_pair
    def store(target, i, bits):
        target[i] = bits
    return store


def _loop_signature(source_type, target_type):
    source = types.Array(source_type, 1, "C", readonly=True)  # writeable arrays convert to it
    target = types.Array(target_type, 1, "C")
    return types.void(source, target, PARAMS_TYPE, PARAMS_TYPE, types.int64, types.uint64, types.int64, types.int64)


# float32 -> float32, float64 -> float64, and float32 -> float64 (widening: the
# fast path computes in float32 with its own parameters, the general path in
# float64; the target is seen as uint32 pairs)
SIGNATURES = [
    _loop_signature(types.int32, types.int32),
    _loop_signature(types.int64, types.int64),
    _loop_signature(types.int32, types.uint32),
]


SEGMENT = np.int64(1) << np.int64(32)  # random numbers per segment key
# Elements rounded at a time by the fast path (long loops stream memory best),
# and the pieces of a block holding elements outside the fast range that the
# general loop does again (short, so that few elements are done twice); both
# measured with benchmarks/bench_round.py.
BLOCK = 4096
# Where a block held elements outside the fast range, the general loop redoes
# each piece of PIECE elements that holds more than SPARSE of them, and in the
# others only the runs of RUN elements that hold them (found from a bit per
# element): one irregular element costs a run, not a piece (data with a little
# underflow or NaN). The general loop runs over a slice, indices from 0, which
# LLVM vectorizes (over indices from the range's start it ran 1.5-4x slower).
PIECE = 128
SPARSE = 16
RUN = 8
# A block with more than MANY elements outside the fast range gives its other
# pieces to the general loop whole, uncounted, and makes the next SKIP blocks go
# to the general loop whole, without trying the fast one (data spread over the
# whole range: overflow, underflow, NaN).
MANY = 64
SKIP = 8


# One kernel per mode, each compiled (or loaded from numba's cache) on its first
# use, so that a first call compiles one loop, not nine. Each has its mode as
# a constant (a closure variable, which numba compiles in and keys its cache on):
# the loop is compiled for that mode alone. `round_general` serves the rare
# formats (min_normal below the carrier's normals, fixed-point wrap) in every
# mode (its argument), without the fast path.


UNDECIDED = np.uint32(0xFFFFFFFF)  # a high range key no magnitude of a signed format reaches
# the loops from 0 up (SPLIT_ZERO_LOOP, HALVES_ZERO_LOOP) flag steps that the high random
# word may leave undecided; with at most this many random bits it decides every one
# (``fast_stochastic_float32``, ``fast_stochastic_float64``), and a flag only means an element like any other
HIGH_WORD_DECIDES = 31

# The fast loop of a kernel: `fast_round_bits` on carrier bits; float64 data in
# 32-bit words (``fast_stochastic_float64.round_block``); fixed point by scaling (``fast_stochastic_float32``);
# nearest by adding a power of two (``fast_nearest_float``); one bit count for all (``fast_same_drop``);
# stochastic onto floating-point formats, above and below min_normal (``fast_stochastic_float32``),
# for coarse formats from 0 up (`split_from_zero`); float64 data in 32-bit words from 0
# up (`halves_from_zero`).
BITS_LOOP, HALVES_LOOP, SCALED_LOOP, ADDING_LOOP, UNIFORM_LOOP, SPLIT_LOOP, SPLIT_ZERO_LOOP, HALVES_ZERO_LOOP = range(8)


@njit(**NUMBA_OPTIONS)
def loop_range(fast_params, mode, fast_loop):
    """``(low, high, zero_ok)``: the fast loop `fast_loop` rounds the elements whose
    range magnitude (`range_magnitude`, int64) lies in [`low`, `high`] in `mode`,
    and zeros too where `zero_ok` (`checked_magnitude`). `fast_bounds`' range,
    from 0 for the uniform loops of formats with ``uniform_from_zero``. The
    stochastic loops round +-0 themselves, although 0 lies below their range
    (none steps a zero up); so does the halves loop wherever one spacing is at
    least ``2**-978`` (``fast_stochastic_float64.round_block``). The split loop's variant from 0
    up (SPLIT_ZERO_LOOP) rounds every magnitude below its range's top, giving a
    block to the general loop where the high word of the random number left a
    step undecided (``fast_stochastic_float32.stochastic_count``); so does the halves
    loop's (HALVES_ZERO_LOOP, ``fast_stochastic_float64.below_one_spacing``)."""
    low, high = fast_bounds(fast_params, mode, fast_loop == HALVES_LOOP or fast_loop == HALVES_ZERO_LOOP)
    if fast_loop == UNIFORM_LOOP and fast_params[P_UNIFORM_FROM_ZERO] != 0:
        low = ZERO
    if fast_loop == SPLIT_ZERO_LOOP or fast_loop == HALVES_ZERO_LOOP:
        low = ZERO
    if fast_loop == HALVES_LOOP:
        zero_ok = fast_params[P_BELOW_QUANTUM_BITS] >= ZERO_HALVES_QUANTUM
    else:
        zero_ok = mode == STOCHASTIC
    return low, high, zero_ok


def _kernel(mode_constant, general, fast_loop=BITS_LOOP):
    """The kernel for one mode (`mode_constant`; -1: the mode argument), with or
    without the rare paths of `round_bits` (`general`, no fast path), with the
    fast loop `fast_loop` (the stochastic mode only: HALVES_LOOP for float64 data,
    SCALED_LOOP for fixed point, SPLIT_LOOP and SPLIT_ZERO_LOOP (from 0 up) for
    floating point; nearest only: ADDING_LOOP; all but stochastic_equal:
    UNIFORM_LOOP; HALVES_ZERO_LOOP, HALVES_LOOP from 0 up). The kernel table
    (``table``) says which formats each kernel takes, in its conditions of the
    same names.
    The loop is written here, in the kernel itself, rather than in a function
    inlined into each kernel: numba copies what it inlines, and copying the loop
    with its inlined `round_bits` doubled the compile time of every kernel."""
    halves = fast_loop == HALVES_LOOP or fast_loop == HALVES_ZERO_LOOP
    from_zero = fast_loop == HALVES_ZERO_LOOP  # (closure variables must be plain values: numba's
    # cache key holds them, and a dispatcher's differs in every process)

    @njit(**NUMBA_OPTIONS)
    def round_array(source, target, fast_params, params, mode_argument, key, offset, rand_bits):
        mode = mode_argument if mode_constant < 0 else mode_constant
        inverse_64 = bits_to_float64(fast_params[P_SCALE_BITS])  # SCALED_LOOP: 2**-frac_bits,
        inverse, scale = np.float32(inverse_64), np.float32(1.0 / inverse_64)  # exact (fast_stochastic_float32)
        rebias = widening_rebias(inverse_64)
        hidden = hidden_zero(rand_bits)  # loop constants from it stay values (bits.hidden_zero)
        multipliers, weyl_step = loop_constants(hidden)  # the fast loop's random numbers
        two_31 = loop_two_31(hidden)  # SCALED_LOOP, SPLIT_LOOP
        drop_min, drop_offset = fast_params[P_FAST_DROP_MIN], fast_params[P_FAST_DROP_OFFSET]  # ADDING_LOOP
        carrier_man_bits = fast_params[P_CARRIER_MAN_BITS]
        aligned = fast_params[P_FAST_ALIGNED_BITS]  # UNIFORM_LOOP
        half_quantum, below_tie_up = fast_params[P_HALF_QUANTUM_BITS], fast_params[P_BELOW_TIE_UP]
        quantum = fast_params[P_BELOW_QUANTUM_BITS]
        min_normal = fast_params[P_MIN_NORMAL_BITS]  # SPLIT_LOOP
        low, high, zero_ok = loop_range(fast_params, mode, fast_loop)
        if fast_loop == UNIFORM_LOOP and fast_params[P_UNIFORM_FROM_ZERO] != 0:
            aligned = ZERO  # nothing lies below
        fast_ok = False if general else low <= high
        skipped = 0  # blocks left to do with the general loop alone
        premixed = mode == STOCHASTIC and wide_random(source) and not halves  # a constant where the mode is
        mixed = BLOCK if premixed else 0
        high_words, low_words = np.empty(mixed, np.uint32), np.empty(mixed, np.uint32)
        if halves:  # the float64 data and results as 32-bit words
            source_words, target_words = source.view(np.int32), target.view(np.int32)
            mask_high, mask_low = top_bits_mask_32(rand_bits, 0), top_bits_mask_32(rand_bits, 32)
            all_ones = opaque_all_ones(rand_bits)
        zero_as = np.int32(low >> 32) if zero_ok else np.int32(0)  # halves: a zero high word counts as this
        zero_sign = np.int32(0) if fast_params[P_NO_NEGATIVE_ZERO] != 0 else np.int32(-(2**31))  # and keeps this
        start = 0
        while start < source.size:  # once, unless the random counter crosses a 2**32 boundary
            index = offset + start
            stop = min(source.size, start + SEGMENT - (index & (SEGMENT - 1)))
            keys = segment_keys(key, np.uint64(index) >> np.uint64(32))
            first_counter = np.uint32(index & (SEGMENT - 1))
            for block in range(start, stop, BLOCK):
                source_part = source[block:min(stop, block + BLOCK)]
                words = words_per_element(target)
                target_part = target[words * block:words * min(stop, block + BLOCK)]
                block_counter = wrapping_add(first_counter, np.uint32(block - start))
                # the short loop first; the elements outside its range are done again by
                # the general loop; where a block held many, the next blocks skip the short loop
                outside = True
                tried = fast_ok and skipped == 0
                skipped = max(skipped - 1, 0)
                if tried:
                    # the smallest and largest range magnitudes tell whether any
                    # element lay outside the range (two instructions per vector,
                    # where counting them takes five); only then are they counted
                    weyl = wrapping_mul(block_counter, WEYL_32)
                    if halves:
                        block_words = slice(2 * block, 2 * (block + source_part.size))
                        block_arguments = (
                            source_words[block_words], target_words[block_words], params[P_FAST_DROP_MIN],
                            params[P_FAST_DROP_OFFSET], params[P_FAST_RANGE_MASK], zero_as, zero_sign, keys, weyl,
                            mask_high, mask_low, all_ones, np.int32(quantum >> 32))
                        if from_zero:
                            greatest_sum, greatest = round_block_from_zero(*block_arguments)
                            outside = np.uint32(greatest) > np.uint32(high >> 32)
                            # a step the high words may have left undecided (rare; with at most 31
                            # random bits they decide every step): the whole block again
                            if greatest_sum == MAGNITUDE_32 and rand_bits > HIGH_WORD_DECIDES:
                                outside, tried = True, False
                        else:
                            lowest, highest = round_block(*block_arguments)
                            outside = lowest < np.int32(low >> 32) or highest > np.int32(high >> 32)
                    else:
                        low_limit, high_limit = range_limits(source_part[0], low, high, zero_ok)
                        lowest, highest = high_limit, low_limit
                        tied = False  # SPLIT_ZERO_LOOP: a step the high word left undecided
                        if premixed:
                            fill_halves(keys, weyl, high_words[:source_part.size], low_words[:source_part.size])
                        keyed_high, keyed_low = keyed_weyl(keys, weyl)
                        for i in range(source_part.size):
                            if premixed:
                                random = shift_left(np.uint64(high_words[i]), U_32) | np.uint64(low_words[i])
                            else:  # dead code where the mode is deterministic
                                random = keyed_bits(keyed_high, keyed_low, multipliers)
                            keyed_high, keyed_low = wrapping_add(keyed_high, weyl_step), wrapping_add(keyed_low, weyl_step)
                            if fast_loop == SCALED_LOOP:
                                # the range check's magnitude (the same operation): |x|
                                # wherever x lies in the range
                                magnitude = range_magnitude(source_part[i], fast_params)
                                count, _ = stochastic_count(bits_to_float32(magnitude) * scale, random, rand_bits,
                                                            two_31)  # from 2**-8 up: the high word decides
                                store_scaled(target_part, i, count, bit_xor(source_part[i], magnitude), inverse, rebias)
                            elif fast_loop == ADDING_LOOP:
                                store_fast(target_part, i, nearest_by_adding(source_part[i], drop_min, drop_offset,
                                                                             carrier_man_bits))
                            elif fast_loop == SPLIT_LOOP or fast_loop == SPLIT_ZERO_LOOP:
                                rounded, tied = split_stochastic(source_part[i], drop_min, min_normal, quantum, random,
                                                                 rand_bits, two_31)
                                store_fast(target_part, i, rounded)
                            elif fast_loop == UNIFORM_LOOP and mode == STOCHASTIC:
                                magnitude = range_magnitude(source_part[i], fast_params)  # the range check's
                                store_fast(target_part, i, stochastic_uniform(source_part[i], drop_min, random,
                                                                              rand_bits, magnitude))
                            elif fast_loop == UNIFORM_LOOP:
                                store_fast(target_part, i, uniform_round(source_part[i], mode, drop_min, aligned,
                                                                         half_quantum, below_tie_up, quantum))
                            else:
                                store_fast(target_part, i, fast_round_bits(source_part[i], fast_params, mode, random,
                                                                           rand_bits))
                            low_key, high_key = range_keys(source_part[i], low, fast_params, zero_ok)
                            if fast_loop == SPLIT_ZERO_LOOP:  # the greatest key marks an undecided step
                                high_key = bit_or(high_key, UNDECIDED if tied else np.uint32(0))
                            lowest = min(lowest, low_key)
                            highest = max(highest, high_key)
                        outside = lowest < low_limit or highest > high_limit
                        if fast_loop == SPLIT_ZERO_LOOP and highest == UNDECIDED and rand_bits > HIGH_WORD_DECIDES:
                            outside, tried = True, False  # rare (about 2**-31 per element): the whole block again
                # what the general loop does (again): the whole block, or where the block
                # held elements outside the range, the pieces holding many of them and the
                # runs of RUN elements holding the others
                total = 0  # elements outside the range
                piece_size = PIECE if tried else BLOCK
                for piece in range(0, source_part.size if outside else 0, piece_size):
                    piece_stop = min(piece + piece_size, source_part.size)
                    count = piece_size  # untried, or past MANY outside the range: the whole piece
                    if tried and total <= MANY:
                        count = count_irregular(source_part[piece:piece_stop], low, high, fast_params, zero_ok)
                        total += count
                    if count == 0:
                        continue
                    sparse = count <= SPARSE
                    for part in range(piece, piece_stop, 64 if sparse else piece_size):  # 64: the bits of a mask
                        part_stop = min(part + 64, piece_stop) if sparse else piece_stop
                        runs = U_ONE  # a bit for each run to do
                        if sparse:  # a bit per element, then per run of 8 (the top bit of each byte)
                            flags = U_ZERO
                            for i in range(part_stop - part):
                                flags |= shift_left(np.uint64(irregular(source_part[part + i], low, high, fast_params,
                                                                        zero_ok)), np.uint64(i))
                            runs = nonzero_bytes(flags)
                        while runs != U_ZERO:
                            first = part + (lowest_set_bit(runs) & ~(RUN - 1)) if sparse else part
                            stop_at = min(first + RUN, part_stop) if sparse else part_stop
                            runs &= runs - U_ONE
                            source_range = source_part[first:stop_at]  # indices from 0: LLVM vectorizes those
                            target_range = target_part[words * first:words * stop_at]
                            range_counter = wrapping_add(block_counter, np.uint32(first))
                            for i in range(source_range.size):
                                # the random number is dead code where the mode is deterministic
                                random = counter_bits(keys, wrapping_add(range_counter, np.uint32(i)))
                                bits = widen(source_range[i], target_range)
                                store_general(target_range, i, round_bits(bits, params, mode, random, rand_bits,
                                                                          general))
                if total > MANY:
                    skipped = SKIP
            start = stop

    return round_array


MODE_KERNELS = tuple(_kernel(mode, False) for mode in FAST_BITS_MODES)  # by mode number
round_general = _kernel(-1, True)
round_stochastic_halves = _kernel(STOCHASTIC, False, HALVES_LOOP)
round_scaled_stochastic = _kernel(STOCHASTIC, False, SCALED_LOOP)
round_nearest_by_adding = _kernel(NEAREST, False, ADDING_LOOP)
# by mode number, stochastic_equal excepted (None)
UNIFORM_KERNELS = tuple(_kernel(mode, False, UNIFORM_LOOP) for mode in range(STOCHASTIC + 1)) + (None,)
round_stochastic_split = _kernel(STOCHASTIC, False, SPLIT_LOOP)
round_stochastic_split_from_zero = _kernel(STOCHASTIC, False, SPLIT_ZERO_LOOP)
round_stochastic_halves_from_zero = _kernel(STOCHASTIC, False, HALVES_ZERO_LOOP)


def compiled(kernel, signature):
    """`kernel` (any njit dispatcher) compiled, or loaded from numba's cache, for
    `signature`: its compiled entry point, which skips the dispatcher's type
    matching (every kernel lookup of the CPU backend goes through here)."""
    kernel.compile(signature)
    return kernel.overloads[signature.args].entry_point


def entry_point(kernel, source_bits, target_bits):
    """`kernel` (one of the array kernels) compiled, or loaded from numba's cache,
    for int32 or int64 `source_bits` into `target_bits`: its compiled entry point."""
    return compiled(kernel, SIGNATURES[_SIGNATURE_INDEX[source_bits, target_bits]])


_SIGNATURE_INDEX = {(np.int32, np.int32): 0, (np.int64, np.int64): 1, (np.int32, np.int64): 2}
