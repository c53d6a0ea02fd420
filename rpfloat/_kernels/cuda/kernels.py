"""CUDA kernels: round a flat array of carrier bits onto a format, in two passes
over a grid of threads that each take every ``gridsize``-th element (grid-stride).

1. ``fast_pass``: a thread loads its elements four at a time (several loads in
   flight per thread is what lets a memory-bound kernel reach the bus's speed)
   and rounds the common ones, zeros and the magnitudes of the format's fast
   range, with ``core.fast_element.fast_round_bits``. It leaves the others
   (NaN, inf, overflow, carrier subnormals below the format's grid, formats
   without a fast range) unwritten, and if it left any it writes the call's
   number into its slot of ``marks``.
2. ``rare_pass``: a thread whose slot holds the call's number walks its
   elements again and rounds those outside the fast range with
   ``core.element.round_bits``, its rare paths on (formats whose min_normal is
   a carrier subnormal, fixed-point wrap-around); the other threads return at
   once. Its range check reads the values the fast pass wrote in place
   (``out=x``) too; rounding leaves a value of the format as it is, in every
   mode, so those that it sends to ``round_bits`` come back unchanged.

Keeping the rare paths out of the first kernel keeps it small (registers,
instructions), and the two kernels are queued one after the other, with no wait
for the host between them. Element ``i`` draws number ``offset + i`` of the
stream ``key`` (``core.stream``), as the CPU backend's elements do; a thread
makes the random keys of its first element's segment of 2**32 numbers and of
the next once, and takes ``random_bits`` whole only past those. A thread whose
numbers all lie in one segment (all but a few) counts them in 32 bits, and for
float32 data mixes only the high half of each, all that ``fast_round_bits``
reads (`fast_random`). The fast pass indexes with unsigned integers, for which
numba leaves out the wrap-around of negative indices (it halved the kernel's
instructions). The ``core``
functions are plain ``@njit`` functions, which numba's CUDA target compiles as
device functions; both kernels take the same arguments: ``source`` and
``target`` (int32 or int64 device arrays of the same size, the carrier's bits;
they may be the same array), ``params`` (``layout.PARAMS_TYPE``), ``key``
(uint64), ``offset`` (int64), ``rand_bits`` (int64, 1..64), ``marks`` (int64,
one per thread of the grid) and ``call`` (int64, this call's number).
"""
import functools
import threading
import warnings

import numpy as np
from numba import config, cuda, njit, types
from numba.extending import overload

from ..core.bits import NUMBA_OPTIONS, bits_to_float32, float64_to_bits, wrapping_add, wrapping_mul
from ..core.element import U_32, U_LOW_32, U_ONE, U_ZERO, round_bits, same_width
from ..core.fast_element import fast_bounds, fast_round_bits, range_magnitude, sign_bit_of
from ..core.layout import ALL_MODES, P_NO_NEGATIVE_ZERO, STOCHASTIC
from ..core.stream import (
    MULTIPLIERS, WEYL_32, counter_bits, joined, keyed_weyl, mix_high, random_bits, segment_keys,
)

__all__ = ["mode_kernels", "launch", "grid", "configured", "widen"]

THREADS_PER_BLOCK = 256
# A grid of at most this many blocks: each thread then rounds several elements
# (grid-stride), which amortizes its start without leaving a large GPU idle
# (measured on an H200: 4096 blocks beat 1056, and one element per thread was
# half as fast).
MAX_BLOCKS = 4096
# and at least this many: numba warns of fewer as leaving the GPU idle
MIN_BLOCKS = 128
# numba's simulator runs each thread of a block as a Python thread: a small grid
# (each thread then takes many elements) is what keeps it fast
SIMULATOR_GRID = (2, 32)
LOW_OCCUPANCY_WARNING = r".*Grid size \d+ will likely result in GPU under-utilization"


@njit(**NUMBA_OPTIONS)
def regular(bits, params, low, high):
    """Whether the fast pass rounds `bits`: a zero (of the range magnitude, so
    that -0 of an unsigned format is not one), or a range magnitude in
    [`low`, `high`]."""
    magnitude = range_magnitude(bits, params)
    # (in the carrier's width: the bounds are magnitudes of it, or the empty range 1 > 0)
    return ((magnitude == same_width(bits, 0))
            | ((magnitude >= same_width(bits, low)) & (magnitude <= same_width(bits, high))))


@njit(**NUMBA_OPTIONS)
def fast_element(bits, params, mode, random, rand_bits):
    """`bits` of a `regular` element rounded: a zero stays itself (+0 where the
    format has no -0), the rest go through ``fast_round_bits``."""
    if range_magnitude(bits, params) == same_width(bits, 0):
        return same_width(bits, bits & ~sign_bit_of(bits)) if params[P_NO_NEGATIVE_ZERO] else bits
    return fast_round_bits(bits, params, mode, random, rand_bits)


def _fast_path_random(template, keys, counter):
    """`fast_random`, typed by the carrier's bits `template`."""
    raise NotImplementedError("_fast_path_random runs inside numba kernels only")


@overload(_fast_path_random, jit_options=NUMBA_OPTIONS)
def _fast_path_random_impl(template, keys, counter):
    if template == types.int32:
        def high_half(template, keys, counter):
            keyed_high, _ = keyed_weyl(keys, wrapping_mul(counter, WEYL_32))
            return joined(mix_high(keyed_high, MULTIPLIERS), np.uint32(0))
        return high_half
    return lambda template, keys, counter: counter_bits(keys, counter)


@njit(**NUMBA_OPTIONS)
def fast_random(template, keys, counter):
    """Number `counter` of the segment with `keys` (``stream.counter_bits``) as
    ``fast_round_bits`` reads it for carrier bits like `template`: whole for
    float64 data; for float32 data its high half only, the low half 0 (the fast
    path reads no more of it, and the mixing of the low half is left out)."""
    return _fast_path_random(template, keys, np.uint32(counter))


@njit(**NUMBA_OPTIONS)
def counter_of(first_counter, index):
    """The low 32 bits of element `index`'s number, ``offset + index``, from
    `first_counter`, the low 32 bits of ``offset``."""
    return wrapping_add(first_counter, np.uint32(index & U_LOW_32))


@njit(**NUMBA_OPTIONS)
def element_random(key, index, first_segment, first_keys, next_keys):
    """Number `index` of the stream `key`, from the keys of segment
    `first_segment` or the next one where it lies in them (else made whole)."""
    number = np.uint64(index)
    segment = number >> U_32
    if segment == first_segment:
        return counter_bits(first_keys, np.uint32(number & U_LOW_32))
    if segment == first_segment + U_ONE:
        return counter_bits(next_keys, np.uint32(number & U_LOW_32))
    return random_bits(key, index)


@functools.lru_cache(maxsize=None)
def mode_kernels(mode):
    """``(fast_pass, rare_pass)`` for `mode` (a mode number of ``layout.ALL_MODES``),
    the mode a constant in both (as the CPU kernels have it), so that the
    deterministic modes compile no random draw."""
    if mode not in ALL_MODES:
        raise ValueError(f"no rounding mode numbered {mode}")
    stochastic = mode >= STOCHASTIC

    # (np.uint32 / np.uint64 of a value of that type: no-ops on the device; in the
    # simulator, where an njit call returns a Python int, they keep the types that
    # the core functions expect)
    @cuda.jit
    def fast_pass(source, target, params, key, offset, rand_bits, marks, call):
        # (unsigned indices: numba then leaves out the wrap-around of negative ones)
        start = np.uint64(cuda.grid(1))
        stride = np.uint64(cuda.gridsize(1))
        size = np.uint64(source.size)
        low, high = fast_bounds(params, mode, False)
        first_segment = np.uint64(offset + np.int64(start)) >> U_32
        keys = segment_keys(key, first_segment)
        first_keys = (np.uint32(keys[0]), np.uint32(keys[1]))
        keys = segment_keys(key, first_segment + U_ONE)
        next_keys = (np.uint32(keys[0]), np.uint32(keys[1]))
        # a thread whose numbers all lie in one segment (all but a few) counts in 32 bits
        last = start + (size - U_ONE - start) // stride * stride if start < size else start
        one_segment = (np.uint64(offset + np.int64(last)) >> U_32) == first_segment
        first_counter = np.uint32(np.uint64(offset) & U_LOW_32)
        random0 = random1 = random2 = random3 = U_ZERO
        left = False
        i = start
        while i + np.uint64(3) * stride < size:
            i1 = i + stride
            i2 = i1 + stride
            i3 = i2 + stride
            bits0 = source[i]
            bits1 = source[i1]
            bits2 = source[i2]
            bits3 = source[i3]
            if stochastic and one_segment:
                random0 = np.uint64(fast_random(bits0, first_keys, counter_of(first_counter, i)))
                random1 = np.uint64(fast_random(bits1, first_keys, counter_of(first_counter, i1)))
                random2 = np.uint64(fast_random(bits2, first_keys, counter_of(first_counter, i2)))
                random3 = np.uint64(fast_random(bits3, first_keys, counter_of(first_counter, i3)))
            elif stochastic:
                random0 = np.uint64(element_random(key, offset + np.int64(i), first_segment, first_keys, next_keys))
                random1 = np.uint64(element_random(key, offset + np.int64(i1), first_segment, first_keys, next_keys))
                random2 = np.uint64(element_random(key, offset + np.int64(i2), first_segment, first_keys, next_keys))
                random3 = np.uint64(element_random(key, offset + np.int64(i3), first_segment, first_keys, next_keys))
            regular0 = regular(bits0, params, low, high)
            regular1 = regular(bits1, params, low, high)
            regular2 = regular(bits2, params, low, high)
            regular3 = regular(bits3, params, low, high)
            if regular0:
                target[i] = fast_element(bits0, params, mode, random0, rand_bits)
            if regular1:
                target[i1] = fast_element(bits1, params, mode, random1, rand_bits)
            if regular2:
                target[i2] = fast_element(bits2, params, mode, random2, rand_bits)
            if regular3:
                target[i3] = fast_element(bits3, params, mode, random3, rand_bits)
            left |= not (regular0 and regular1 and regular2 and regular3)
            i = i3 + stride
        while i < size:
            bits0 = source[i]
            if stochastic:
                random0 = np.uint64(element_random(key, offset + np.int64(i), first_segment, first_keys, next_keys))
            regular0 = regular(bits0, params, low, high)
            if regular0:
                target[i] = fast_element(bits0, params, mode, random0, rand_bits)
            left |= not regular0
            i += stride
        if left:
            marks[start] = call

    @cuda.jit
    def rare_pass(source, target, params, key, offset, rand_bits, marks, call):
        start = cuda.grid(1)
        if marks[start] != call:
            return
        low, high = fast_bounds(params, mode, False)
        for i in range(start, source.size, cuda.gridsize(1)):
            bits = source[i]
            if not regular(bits, params, low, high):
                random = np.uint64(random_bits(key, offset + i)) if stochastic else U_ZERO
                target[i] = round_bits(bits, params, mode, random, rand_bits, True)

    return fast_pass, rare_pass


QUIET_NAN_64 = np.int64(0x7FF8000000000000)
SIGN_64 = np.int64(-(2**63))


@njit(**NUMBA_OPTIONS)
def widened_bits(bits):
    """The float64 bits of the float32 bits `bits` (int32 -> int64): the value
    itself, and a NaN quieted with its payload kept, as the CPU converts them
    (from the bits: a GPU's conversion of a NaN may differ)."""
    magnitude = bits & np.int32(0x7FFFFFFF)
    if magnitude > np.int32(0x7F800000):
        sign = SIGN_64 if bits < np.int32(0) else np.int64(0)
        return sign | QUIET_NAN_64 | (np.int64(magnitude & np.int32(0x7FFFFF)) << np.int64(29))
    return float64_to_bits(np.float64(bits_to_float32(bits)))


@cuda.jit
def widen(source, target):
    """`target` (int64, float64 bits) = `widened_bits` of `source` (int32, float32 bits)."""
    for i in range(cuda.grid(1), source.size, cuda.gridsize(1)):
        target[i] = widened_bits(source[i])


class _Marks(threading.local):
    """Each host thread's ``marks`` arrays (one per device) and call counter: a
    call's number is new, so the marks of earlier calls never need clearing."""

    def __init__(self):
        self.arrays = {}
        self.calls = 0

    def take(self, threads):
        """``(marks, call)``: a device array of at least `threads` int64 on the
        current device, and a call number no earlier call of this thread used."""
        # numba's simulators have no device id (numba-cuda's) or no get_current_device (numba's own)
        current = getattr(cuda, "get_current_device", None)
        device = getattr(current(), "id", 0) if current else 0
        marks = self.arrays.get(device)
        if marks is None or marks.size < threads:
            marks = cuda.to_device(np.zeros(max(threads, MAX_BLOCKS * THREADS_PER_BLOCK), np.int64))
            self.arrays[device] = marks
        self.calls += 1
        return marks, self.calls


_MARKS = _Marks()


def grid(size, blocks=None, threads=THREADS_PER_BLOCK):
    """``(blocks, threads)`` of a grid for `size` work items: at least MIN_BLOCKS
    blocks (the threads past the end return at once), at most MAX_BLOCKS
    (grid-stride beyond); the simulator's small grid under numba's simulator."""
    if blocks is None and config.ENABLE_CUDASIM:
        return SIMULATOR_GRID
    if blocks is None:
        blocks = max(MIN_BLOCKS, min(MAX_BLOCKS, -(-size // threads)))
    return blocks, threads


def configured(kernel, blocks, threads):
    """``kernel[blocks, threads]``. `grid` gives no grid that numba warns of as
    leaving the GPU idle (below MIN_BLOCKS); a smaller one, given explicitly,
    is configured without that warning (``warnings.catch_warnings``, which is
    not thread-safe: not on the library's own launches)."""
    if blocks >= MIN_BLOCKS:
        return kernel[blocks, threads]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_WARNING)
        return kernel[blocks, threads]


def launch(source, target, params, mode, key, offset, rand_bits, blocks=None, threads=THREADS_PER_BLOCK):
    """Round the carrier bits `source` into `target` (flat device arrays) with the
    kernels of `mode`; `blocks` None sizes the grid for the array. Asynchronous
    on the default stream."""
    size = source.size
    if size == 0:
        return
    blocks, threads = grid(size, blocks, threads)
    marks, call = _MARKS.take(blocks * threads)
    arguments = (source, target, tuple(params), np.uint64(key), np.int64(offset), np.int64(rand_bits), marks,
                 np.int64(call))
    fast_pass, rare_pass = mode_kernels(int(mode))
    configured(fast_pass, blocks, threads)(*arguments)
    configured(rare_pass, blocks, threads)(*arguments)
