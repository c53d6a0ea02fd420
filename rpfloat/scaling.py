"""``round``, ``encode`` and ``decode`` for scaled formats (:class:`ScaledFormat`):
validate, make a plan, lay the data out as ``(outer, axis, inner)`` and hand
them to a block kernel (``rpfloat._kernels.cpu.blocks``: float32 data with
power-of-two scales, and the general one; ``rpfloat._kernels.cpu.grid_blocks``:
float32 data with significand scales; ``rpfloat._kernels.cpu.float64_blocks``:
float64 data, with the element format's own kernel)."""
from __future__ import annotations

import functools
import math
import numbers
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from . import _codes
from ._kernels.core import scale as block_layout
from ._kernels.core.layout import (
    P_BELOW_QUANTUM_BITS, P_DEEP, P_FAST_HIGH_BITS, P_FAST_LOW_BITS, P_MAX_NEG_BITS,
)
from ._kernels.cpu.blocks import (
    BIT_LOOPS, column_kernel, fast_kernel, general_kernel, rounds_by_adding, stochastic_loops,
)
from ._kernels.cpu import float64_blocks
from ._kernels.cpu.backend import round_carrier
from ._kernels.cpu.environment import DEFAULT as DEFAULT_ENVIRONMENT, environment, in_default_environment
from ._kernels.cpu.grid_blocks import GRID, division_kernel, grid_kernel, largest_finite
from ._params import kernel_params
from ._plan import check_rand_bits, plan_for, random_key, unused_key
from .modes import Mode, parse_mode
from .scaledformat import SCALE_ROUNDINGS, ScaledFormat

__all__ = ["ScaledPlan", "ScaledCodes", "scaled_plan", "round_scaled", "encode_scaled", "decode_scaled",
           "checked_scaled_codes", "check_tensor_scale_given", "scale_shape", "block_layout_of", "tensor_scale_of"]

_FLOAT64 = np.dtype(np.float64)
_E8M0_NAN = 0xFF
_SMALLEST_FLOAT32 = 2.0**-149
_LARGEST_FLOAT32 = float(np.finfo(np.float32).max)
_FLOAT64_MAX = Fraction(np.finfo(np.float64).max.item())


_LEAST_FLOAT32_EXPONENT = -149  # float32's smallest subnormal, 2**-149
_LEAST_STRAIGHT_LINE_STEP = 2.0**-958  # (core.scale.round_element's straight-line form)
_LARGEST_FAST_SCALE_EXPONENT = 255
# float64 data rounded at a time by `_float64_blocks`: the data, their quotients and
# the results of a segment (256 KiB each) stay in the core's L2 cache between its steps
SEGMENT = 1 << 15
# float32 data that no float32 kernel serves go through `_float64_blocks` in bands
# of about this many values (`_float32_through_float64`), where their blocks fit
BAND = 1 << 18


class ScaledPlan(NamedTuple):
    """What the block kernel needs for one format, mode and input dtype."""

    fmt: ScaledFormat
    result_dtype: np.dtype
    element_params: tuple   # in float64, saturating
    fast_params: tuple | None  # in float32, saturating, for the fast kernel (None: it does not apply)
    by_adding: bool          # nearest: the fast kernel may round by adding (``blocks.rounds_by_adding``)
    stochastic_loops: int    # stochastic: the fast kernel's copy (``blocks.stochastic_loops``)
    grid: tuple | None       # for the grid kernel (significand scales, nearest; None: it does not apply)
    division: tuple | None   # the scale fields for the division kernel (significand scales, stochastic)
    scale_params: tuple
    block_params: tuple     # core.scale's layout, block size and elements flag filled in per call
    float_params: tuple     # core.scale's layout, the tensor scale filled in per call
    mode: Mode
    rand_bits: int


class ScaledCodes(NamedTuple):
    """The codes of a scaled format: element codes (the shape of the data), scale
    codes (the data's shape with the blocked axis cut to one entry per block;
    shape ``()`` for one scale per array) and, for two-level scaling, the float32
    tensor scale (else None)."""

    elements: np.ndarray
    scales: np.ndarray
    tensor_scale: np.float32 | None = None


@functools.lru_cache(maxsize=512)
def scaled_plan(fmt: ScaledFormat, mode, overflow, rand_bits, input_dtype) -> ScaledPlan:
    """The plan for rounding `input_dtype` data onto `fmt` (validated)."""
    mode = parse_mode(mode)
    if overflow not in (None, "saturate"):
        raise ValueError(f"overflow={overflow!r}: a scaled format's elements always saturate at the element's "
                         "range; leave overflow=None")
    rand_bits = check_rand_bits(rand_bits, mode)
    input_dtype = np.dtype(input_dtype)
    if input_dtype.kind == "c":
        raise TypeError("scaled formats take real numbers; round x.real and x.imag separately")
    if input_dtype.kind in "biu":
        input_dtype = _FLOAT64
    element_params = kernel_params(fmt.element, _FLOAT64, "saturate")
    if fmt.scale_range is not None:
        low, high = fmt.scale_range
        scale_params, kind = element_params, block_layout.POWER_OF_TWO
        scale_min = scale_max = 1.0
    else:
        scale_params, kind = kernel_params(fmt.scale_format, _FLOAT64, "saturate"), block_layout.SIGNIFICAND
        low = high = 0
        scale_min, scale_max = fmt.scale_format.smallest_subnormal, fmt.scale_format.max
    element = fmt.element
    top_spacing_exp = (fmt.element_emax - element.man_bits if hasattr(element, "man_bits")
                       else -element.frac_bits)
    block_params = (kind, SCALE_ROUNDINGS.index(fmt.scale_rounding), low, high, fmt.element_emax, top_spacing_exp,
                    0, 0)
    float_params = (float(element.max), 1.0, float(scale_min), float(scale_max))
    fast_params = None
    # (the fast kernels keep a block's shift s << 23 in int32: |s| <= 255, past which float32
    # data round to nothing or to one step anyway)
    if (kind == block_layout.POWER_OF_TWO and element.carrier in (np.float16, np.float32)
            and max(-low, high) <= _LARGEST_FAST_SCALE_EXPONENT):
        fast_params = kernel_params(element, np.dtype(np.float32), "saturate")
        # not for elements without negatives (the fast kernel rounds magnitudes), nor those whose
        # fast range is empty (man_bits == 0, deep formats: fast_round_bits does not serve them)
        if fast_params[P_MAX_NEG_BITS] == 0 or fast_params[P_FAST_HIGH_BITS] < fast_params[P_FAST_LOW_BITS]:
            fast_params = None
    by_adding = mode == Mode.NEAREST and fast_params is not None and rounds_by_adding(fast_params)
    loops = stochastic_loops(fast_params) if mode == Mode.STOCHASTIC and fast_params is not None else BIT_LOOPS
    grid = _grid(fmt) if kind == block_layout.SIGNIFICAND and mode == Mode.NEAREST else None
    division = None
    # (the division kernel's straight-line `round_element` serves elements whose least step
    # is at least 2**-958, where a quotient at or below 2**-1022 needs no exact rounding)
    least_step = np.int64(element_params[P_BELOW_QUANTUM_BITS]).view(np.float64)
    if (kind == block_layout.SIGNIFICAND and mode == Mode.STOCHASTIC and element_params[P_DEEP] == 0
            and least_step >= _LEAST_STRAIGHT_LINE_STEP):
        division = _scale_fields(fmt)
    return ScaledPlan(fmt, np.result_type(input_dtype, fmt.carrier), element_params, fast_params, by_adding,
                      loops, grid, division, scale_params, block_params, float_params, mode, rand_bits)


def _scale_fields(fmt: ScaledFormat):
    """``(fraction bits, least normal exponent, whether the element keeps the
    sign of a zero result)`` of a significand scale format that the kernels of
    ``grid_blocks`` serve, else None: a float format with subnormals (their
    scale rounding works in the binade, at least the least normal's), 1 to 10
    fraction bits (without any, a tie breaks by the exponent's parity, not by
    adding 2**52; more would break the grid kernel's exactness argument) and a
    smallest subnormal of at least 2**-1022 (its powers of two are normal
    float64s)."""
    from .floatformat import FloatFormat
    from .rounding import round as rp_round  # (rounding imports this module)
    scale_format = fmt.scale_format
    if (not isinstance(scale_format, FloatFormat) or not scale_format.subnormals
            or not 1 <= scale_format.man_bits <= 10 or scale_format.smallest_subnormal < 2.0**-1022):
        return None
    signed_zero = bool(np.signbit(rp_round(np.float64(-0.0), fmt.element, "nearest")))
    return scale_format.man_bits, int(np.frexp(scale_format.min_normal)[1]) - 1, int(signed_zero)


def _grid(fmt: ScaledFormat):
    """``(scale fields, midpoints, tie_up, magnitudes)`` for
    ``grid_blocks.round_grid_blocks`` (the module docstring), or None where it does not
    serve `fmt`: an element of at most GRID magnitudes, the same of each sign
    (0 among them), of at most 3 fraction bits and 8 bits, and a scale
    format `_scale_fields` serves (so that the comparisons decide as the
    float64 quotients)."""
    from .rounding import round as rp_round  # (rounding imports this module)
    element, fields = fmt.element, _scale_fields(fmt)
    if fields is None:
        return None
    if getattr(element, "man_bits", 99) > 3 or element.bits > 8:  # (fixed point: no man_bits)
        return None
    values = _codes.decode_values(np.arange(2**element.bits), element)
    values = values[np.isfinite(values)]
    magnitudes = np.unique(np.abs(values))
    if (magnitudes.size > GRID or magnitudes[0] != 0
            or not np.array_equal(np.unique(-values[values < 0]), magnitudes[1:])):
        return None
    midpoints = (magnitudes[:-1] + magnitudes[1:]) / 2
    tie_up = rp_round(midpoints, element, "nearest") == magnitudes[1:]
    pad = GRID - magnitudes.size
    midpoints = np.concatenate([midpoints, np.full(pad, np.inf)])
    tie_up = np.concatenate([tie_up, np.zeros(pad, bool)])
    magnitudes = np.concatenate([magnitudes, np.full(pad, magnitudes[-1])])
    for array in (midpoints, tie_up, magnitudes):
        array.flags.writeable = False
    return fields, midpoints, tie_up, magnitudes


def block_layout_of(shape, fmt: ScaledFormat):
    """``(outer, length, inner, block_size, axis)`` of data of `shape`: blocks of
    block_size along the middle axis of the ``(outer, length, inner)`` view."""
    size = math.prod(shape)
    if fmt.block_size is None or len(shape) == 0:
        return 1, size, 1, max(size, 1), None
    axis = fmt.axis
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"the format's axis={axis} is out of range for data of {len(shape)} dimensions")
    axis %= len(shape)
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    return outer, shape[axis], inner, fmt.block_size, axis


def _tensor_scale(array, fmt: ScaledFormat) -> np.float32 | None:
    """NVFP4's second level: ``g = max|x| / (scale max * element max)`` over the
    finite values (1 where there are none or all are zero), rounded once to
    float32 (nearest even) and kept within [float32's smallest subnormal, its
    largest value]: tiny data keep a scale, and data past float32's range a
    finite one, as the block scales clamp to their format's range."""
    if not fmt.tensor_scale:
        return None
    if array.dtype == np.float32:
        largest = largest_finite(array.reshape(-1).view(np.int32))
    else:
        magnitudes = np.abs(array[np.isfinite(array)]) if array.size else array
        largest = magnitudes.max() if magnitudes.size else 0.0
    return tensor_scale_of(float(largest), fmt)


def tensor_scale_of(largest: float, fmt: ScaledFormat) -> np.float32:
    """`_tensor_scale` of data whose largest finite magnitude is `largest` (0.0
    where there is none)."""
    if largest == 0:
        return np.float32(1)
    quotient = _float32_quotient(largest, *_scale_denominator(fmt))
    return np.float32(min(max(quotient, _SMALLEST_FLOAT32), _LARGEST_FLOAT32))


@functools.lru_cache(maxsize=64)
def _scale_denominator(fmt: ScaledFormat) -> tuple[Fraction, float | None]:
    """``scale_format.max * element.max``, exactly (it may lie past float64's
    range), and as a float64 where it is one."""
    exact = Fraction(float(fmt.scale_format.max)) * Fraction(float(fmt.element.max))
    return exact, float(exact) if exact <= _FLOAT64_MAX and Fraction(float(exact)) == exact else None


def _float32_quotient(numerator: float, denominator: Fraction, wide: float | None) -> float:
    """``numerator / denominator`` (both positive; `wide` the denominator as a
    float64, or None) rounded once to float32's precision, nearest even, with
    float32's subnormal spacing below its normals (a float; past float32's max,
    possibly inf: the caller clamps)."""
    if wide is not None:
        quotient = numerator / wide  # the exact quotient rounded to float64
        if quotient >= _LARGEST_FLOAT32:
            return quotient
        below = np.float32(math.nextafter(quotient, 0.0))
        above = np.float32(math.nextafter(quotient, math.inf))
        if below == above:
            # the exact quotient lies between the float64 neighbours of its rounding,
            # and both round to one float32: so does it
            return float(below)
    exact = Fraction(numerator) / denominator
    if exact > _LARGEST_FLOAT32:
        return math.inf
    exponent = exact.numerator.bit_length() - exact.denominator.bit_length()  # floor(log2) or one above
    if Fraction(2) ** exponent > exact:
        exponent -= 1
    spacing = Fraction(2) ** (max(exponent, -126) - 23)
    return float(round(exact / spacing) * spacing)  # (round: half to even; float: exact)


def whole_summary(array) -> tuple[float, bool]:
    """``(largest, special)`` of a part of a larger array: its largest finite
    magnitude (0.0 where none) and whether it holds a NaN or an inf. Over the
    parts, the maximum of `largest` and the or of `special` are all that one
    scale per array, or a tensor scale, depends on (`run_blocks_of_whole`)."""
    array = whole_input(array)
    finite = np.isfinite(array)
    largest = float(np.abs(array, where=finite, out=np.zeros(array.shape, array.dtype)).max(initial=0.0))
    return largest, not bool(finite.all())


def whole_input(array) -> np.ndarray:
    """A part of a larger array as `run_blocks_of_whole` takes it: integers as
    float64, so that a NaN can join them."""
    return array if array.dtype.kind == "f" else array.astype(np.float64)


def run_blocks_of_whole(array, plan: ScaledPlan, key, offset, write_elements, largest=None, special=False,
                        tensor_scale=None):
    """``run_blocks`` of a contiguous run of a larger array (its first element at
    flat index `offset`; `array` from `whole_input`), whose part of a streamed
    or chunked whole it is. Where the format has one scale per array (of the
    whole: `largest` and `special` from `whole_summary`), the run goes into the
    kernel with the whole's extremes after it, `largest` and a NaN where
    `special`: one block, whose scale is then the whole's (a block with a NaN or
    inf is NaN throughout, whichever it holds); their results are dropped.
    `tensor_scale`: the whole's (`tensor_scale_of`)."""
    if largest is None or plan.fmt.block_size is not None:
        return run_blocks(array, plan, key, offset, write_elements, None, tensor_scale)
    extremes = np.array([largest, np.nan] if special else [largest], array.dtype)
    values = np.concatenate([array.reshape(-1), extremes])
    result, scales, tensor_scale = run_blocks(values, plan, key, offset, write_elements, None, tensor_scale)
    return result[:array.size].reshape(array.shape), scales, tensor_scale


def run_blocks(array, plan: ScaledPlan, key, offset, write_elements, out=None, tensor_scale=None):
    """``(values or elements, scales, tensor scale)`` of `array` rounded as `plan` says;
    into `out` where it is a C-contiguous array of the working dtype that does not
    share memory with `array` (else into a new array). `tensor_scale`: that of a
    larger array `array` is part of (None: `array`'s own, where the format has
    one). In the default floating-point environment: where the thread has
    another, `in_default_environment` sets it for the call."""
    if environment() != DEFAULT_ENVIRONMENT:
        return _run_blocks_in_default(array, plan, key, offset, write_elements, out, tensor_scale)
    return _run_blocks(array, plan, key, offset, write_elements, out, True, tensor_scale)


@in_default_environment
def _run_blocks_in_default(array, plan: ScaledPlan, key, offset, write_elements, out, tensor_scale):
    return _run_blocks(array, plan, key, offset, write_elements, out, False, tensor_scale)


def _run_blocks(array, plan: ScaledPlan, key, offset, write_elements, out, in_default, tensor_scale=None):
    """`run_blocks`; `in_default`: the caller found the default environment."""
    fmt = plan.fmt
    work_dtype = np.dtype(np.float64) if plan.result_dtype == np.float64 or write_elements else np.dtype(np.float32)
    outer, length, inner, block_size, axis = block_layout_of(array.shape, fmt)
    # significand scales of float32 (or narrower) data: the grid (nearest) or division (stochastic)
    # kernel, into float32 or float64 values (a tensor scale's products; elements, for encode)
    significand = (plan.grid if plan.mode == Mode.NEAREST else plan.division) is not None
    significand = significand and array.dtype.kind == "f" and array.dtype.itemsize <= 4
    source_dtype = np.dtype(np.float32) if significand else work_dtype
    if array.dtype != source_dtype:
        with np.errstate(invalid="ignore"):  # casting signalling NaNs
            array = array.astype(source_dtype)
    if not array.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        array = array.copy(order="C")
    if tensor_scale is None:
        tensor_scale = _tensor_scale(array, fmt)
    blocks = -(-length // block_size) if length else 0
    block_params = plan.block_params[:block_layout.B_BLOCK_SIZE] + (block_size, int(write_elements))
    float_params = (plan.float_params[0], float(tensor_scale if tensor_scale is not None else 1.0),
                    *plan.float_params[2:])
    direct = (out is not None and out.dtype == work_dtype and out.flags.c_contiguous
              and not np.may_share_memory(out, array))
    result = out if direct else np.empty(array.shape, work_dtype)
    scales = np.empty((outer, blocks, inner), np.float64)
    rows, row_scales = (outer, length), (outer, blocks)
    # (blocks along another axis than the last: the kernels' column forms, on 3-D data; the
    # entry points check no types, so the layout and the kernel must agree)
    columns = inner != 1
    layout, scales_layout = ((outer, length, inner), scales.shape) if columns else (rows, row_scales)
    fast = None
    if work_dtype == np.float32 and plan.fast_params is not None and not write_elements:
        # None for a mode it does not serve
        fast = column_kernel(int(plan.mode)) if columns else fast_kernel(int(plan.mode), plan.stochastic_loops)
    if significand and plan.mode == Mode.NEAREST:
        grid_kernel(work_dtype, columns)(array.reshape(layout).view(np.int32), result.reshape(layout),
                                         scales.reshape(scales_layout), float_params, *plan.grid, block_size,
                                         write_elements)
    elif significand:
        division_kernel(work_dtype, columns)(array.reshape(layout), result.reshape(layout),
                                             scales.reshape(scales_layout), plan.element_params, float_params,
                                             plan.division, block_size, key, offset, plan.rand_bits,
                                             write_elements)
    elif fast is not None:
        fast(array.reshape(layout).view(np.int32), result.reshape(layout).view(np.int32), scales.reshape(scales_layout),
             plan.fast_params, plan.element_params, block_params, float_params, _adding(plan, in_default), key,
             offset, plan.rand_bits)
    elif work_dtype == _FLOAT64:
        _float64_blocks(array.reshape(outer, length, inner), result.reshape(outer, length, inner), scales, plan,
                        block_params, float_params, key, offset, write_elements)
    elif block_size * inner <= BAND:
        _float32_through_float64(array.reshape(outer, length, inner), result.reshape(outer, length, inner), scales,
                                 plan, block_params, float_params, key, offset)
    else:
        general_kernel(work_dtype)(array.reshape(outer, length, inner), result.reshape(outer, length, inner), scales,
                                   plan.element_params, plan.scale_params, block_params, float_params,
                                   int(plan.mode), key, offset, plan.rand_bits)
    if axis is None:  # one scale: an empty array's is an all-zero block's
        scales = scales.reshape(()) if blocks else np.array(_zero_block_scale(block_params, float_params))
    else:
        scales = scales.reshape(array.shape[:axis] + (blocks,) + array.shape[axis + 1:])
    return result, scales, tensor_scale


def _float64_blocks(array, result, scales, plan: ScaledPlan, block_params, float_params, key, offset,
                    write_elements):
    """`run_blocks` for float64 data ``(outer, length, inner)`` blocked along the
    middle axis (scales ``(outer, blocks, inner)``): the steps of
    ``float64_blocks`` (its column form where ``inner > 1``), SEGMENT values at
    a time: whole outer indices where they fit, else whole blocks of one, else
    pieces of a block, whose scales come first, in a pass over the block."""
    outer, length, inner = array.shape
    if array.size == 0:
        return
    columns = inner != 1
    if not columns:  # (the row form takes 2-D views)
        array, result, scales = array.reshape(outer, length), result.reshape(outer, length), scales.reshape(outer, -1)
    find_scales, make_quotients, multiply, fix_tiny = float64_blocks.kernels(columns)
    element_plan = plan_for(plan.fmt.element, plan.mode, "saturate", plan.rand_bits if plan.mode.is_stochastic else None,
                            _FLOAT64)
    block_size, mode = block_params[block_layout.B_BLOCK_SIZE], int(plan.mode)
    low, high = float(plan.fmt.element.min), float(plan.fmt.element.max)
    leasts = np.empty_like(scales)  # each block's least nonzero magnitude
    # a band of rows takes its scales in one call: a segment of whole blocks, or one
    # block longer than a segment, rounded in segments after
    long_blocks = length * inner > SEGMENT and block_size * inner > SEGMENT
    outer_step = max(1, SEGMENT // (length * inner))
    row_step = (length if length * inner <= SEGMENT else max(1, SEGMENT // inner) if long_blocks
                else SEGMENT // (block_size * inner) * block_size)
    band_rows = block_size if long_blocks else row_step
    quotients = np.empty(min(max(SEGMENT, inner), array.size))
    for first_outer in range(0, outer, outer_step):
        stop_outer = min(outer, first_outer + outer_step)
        sources, targets = array[first_outer:stop_outer], result[first_outer:stop_outer]
        segment_scales, segment_leasts = scales[first_outer:stop_outer], leasts[first_outer:stop_outer]
        for band in range(0, length, band_rows):
            band_stop = min(length, band + band_rows)
            find_scales(sources, segment_scales, segment_leasts, band, band_stop, block_size, block_params,
                        float_params, plan.scale_params)
            for first in range(band, band_stop, row_step):
                stop = min(band_stop, first + row_step)
                tiny = make_quotients(sources, quotients, segment_scales, segment_leasts, first, stop, block_size,
                                      low, high, block_params)
                # (whole outer indices, or rows of one: a view, in the data's order)
                segment = targets[:, first:stop].reshape(-1)
                round_carrier(element_plan, quotients[:segment.size], segment, key,
                              offset + (first_outer * length + first) * inner)
                multiply(targets, segment_scales, first, stop, block_size, write_elements)
                if tiny:
                    fix_tiny(sources, targets, segment_scales, first, stop, block_size, block_params,
                             plan.element_params, mode, key, offset + first_outer * length * inner, plan.rand_bits,
                             write_elements)


def _float32_through_float64(array, result, scales, plan: ScaledPlan, block_params, float_params, key, offset):
    """`run_blocks` for float32 data ``(outer, length, inner)`` that no float32
    kernel serves (the modes, or the layout): `_float64_blocks` on float64
    copies of bands of about BAND values, whole outer indices where they fit,
    else whole blocks of one. The same bits as float64 data (a float32 is
    exactly a float64, and each quotient ``v / X`` is a float64 either way),
    cast back exactly: the results are float32 numbers (docs/scaled.md)."""
    outer, length, inner = array.shape
    block_size = block_params[block_layout.B_BLOCK_SIZE]
    if array.size == 0:
        return
    if length * inner <= BAND:
        outer_step = max(1, BAND // max(length * inner, 1))
        bands = [(first, min(outer, first + outer_step), 0, length) for first in range(0, outer, outer_step)]
    else:
        rows = max(1, BAND // (block_size * inner)) * block_size
        bands = [(index, index + 1, first, min(length, first + rows)) for index in range(outer)
                 for first in range(0, length, rows)]
    for first_outer, stop_outer, first, stop in bands:
        band = array[first_outer:stop_outer, first:stop].astype(np.float64)
        band_result = np.empty_like(band)
        first_block, stop_block = first // block_size, -(-stop // block_size)
        band_scales = np.empty((stop_outer - first_outer, stop_block - first_block, inner))
        _float64_blocks(band, band_result, band_scales, plan, block_params, float_params, key,
                        offset + (first_outer * length + first) * inner, False)
        with np.errstate(over="ignore"):  # (past float32's range: inf, as the float32 kernels give)
            result[first_outer:stop_outer, first:stop] = band_result
        scales[first_outer:stop_outer, first_block:stop_block] = band_scales


def _adding(plan: ScaledPlan, in_default: bool) -> int:
    """1 where the fast kernel rounds by adding a power of two: the plan allows it
    and the calling thread rounds to nearest and keeps subnormals (`in_default`:
    known to) (else 0)."""
    return int(plan.by_adding and (in_default or environment() == DEFAULT_ENVIRONMENT))


def _zero_block_scale(block_params, float_params) -> float:
    """The scale of a block of zeros: the least power of two, or the scale
    format's least value times the tensor scale."""
    if block_params[block_layout.B_KIND] == block_layout.POWER_OF_TWO:
        return 2.0 ** block_params[block_layout.B_S_MIN]
    return float_params[block_layout.F_SCALE_MIN] * float_params[block_layout.F_TENSOR_SCALE]


def round_scaled(array, plan: ScaledPlan, rng, offset, out, tensor_scale=None):
    """``rp.round`` of the numeric ndarray `array` onto ``plan.fmt`` (`tensor_scale`:
    as `run_blocks` takes it)."""
    key = random_key(rng) if plan.mode.is_stochastic else unused_key(rng)
    result, _, _ = run_blocks(array, plan, key, offset, False, out, tensor_scale)
    if out is not None:
        if result is not out:
            np.copyto(out, result)
        return out
    if result.dtype != plan.result_dtype:
        result = result.astype(plan.result_dtype)
    return result[()] if result.ndim == 0 else result


@in_default_environment
def encode_scaled(array, fmt: ScaledFormat, mode="nearest", *, rng=None, rand_bits=None, overflow=None) -> ScaledCodes:
    """``rp.encode`` onto a scaled format: element codes, scale codes, tensor scale."""
    plan = scaled_plan(fmt, mode, overflow, rand_bits, array.dtype)
    key = random_key(rng) if plan.mode.is_stochastic else unused_key(rng)
    elements_and_scales = _elements_from_values(array, plan, key)
    if elements_and_scales is None:
        return codes_of_run(array, plan, key, 0)
    elements, scales = elements_and_scales
    return ScaledCodes(_codes.encode_values(elements, fmt.element), scale_codes(scales, fmt, None), None)


def codes_of_run(array, plan: ScaledPlan, key, offset, largest=None, special=False, tensor_scale=None) -> ScaledCodes:
    """The codes of a contiguous run of a larger array, rounded as
    `run_blocks_of_whole` rounds it (the same arguments; a whole array: offset 0
    and the rest left out)."""
    elements, scales, tensor_scale = run_blocks_of_whole(array, plan, key, offset, True, largest, special,
                                                         tensor_scale)
    element_codes = _codes.encode_values(elements, plan.fmt.element)
    return ScaledCodes(element_codes, scale_codes(scales, plan.fmt, tensor_scale), tensor_scale)


def _elements_from_values(array, plan: ScaledPlan, key):
    """``(elements, scales)`` for `rp.encode` from the float32 values that the
    fast kernels round float32 (or narrower) data to, divided by their blocks'
    power-of-two scales (exact); None where that does not apply (other data,
    significand scales) or could lose bits, for the caller to take the general
    kernel's elements. A value ``q * 2**s`` is a float32 exactly wherever it
    is finite: it is a multiple of ``2**(quantum + s_min)``, at least 2**-149
    (checked: the element's least positive value ``2**quantum``, the least
    scale ``2**s_min``), with fewer significant bits than float32's; an
    infinite value (``q * 2**s`` past float32's max: ceil scales of data
    near it) sends the call to the general kernel. A NaN block's elements
    are 0 (its scale is NaN), as the general kernel writes them."""
    if (plan.fast_params is None or plan.fmt.scale_range is None or array.dtype.kind != "f"
            or array.dtype.itemsize > 4):
        return None
    quantum = np.array([plan.fast_params[P_BELOW_QUANTUM_BITS]], np.int64).astype(np.int32).view(np.float32)[0]
    if math.frexp(float(quantum))[1] - 1 + plan.fmt.scale_range[0] < _LEAST_FLOAT32_EXPONENT:
        return None
    values, scales, _ = run_blocks(array, plan, key, 0, False)
    if np.isinf(values).any():
        return None
    elements = np.asarray(_scaled_values(values.astype(np.float64), 1.0 / scales, plan.fmt))  # (0-d: a scalar)
    if np.isnan(scales).any():  # a NaN block's elements are 0, as the general kernel writes them
        np.copyto(elements, 0.0, where=np.isnan(elements))
    return elements, scales


def scale_codes(scales: np.ndarray, fmt: ScaledFormat, tensor_scale) -> np.ndarray:
    nan = np.isnan(scales)
    if nan.any() and not fmt.has_nan_scale:
        raise ValueError(f"cannot encode a NaN block (data holding NaN or inf): {fmt!r} has no NaN scale code")
    if fmt.scale_range is None:
        values = scales / np.float64(tensor_scale if tensor_scale is not None else 1.0)
        return _codes.encode_values(values, fmt.scale_format)
    low = fmt.scale_range[0]
    exponents = np.frexp(np.where(nan, 1.0, scales))[1] - 1
    codes = np.where(nan, _E8M0_NAN, exponents - low)
    return codes.astype(_codes.code_dtype(fmt.scale_bits))


@in_default_environment
def decode_scaled(codes, fmt: ScaledFormat) -> np.ndarray:
    """``rp.decode`` for a scaled format: `codes` is a :class:`ScaledCodes` (or the
    pair or triple it holds)."""
    element_codes, _, tensor_scale, scales = _checked_scaled(codes, fmt)
    elements = _codes.decode_values(element_codes, fmt.element)
    if tensor_scale is not None:
        scales = scales * np.float64(tensor_scale)
    values = _scaled_values(elements, scales, fmt)
    return values[()] if values.ndim == 0 else values  # float64: scaled values may exceed float32


def scale_shape(shape, fmt: ScaledFormat) -> tuple:
    """The shape of the scale codes (and scales) of data of `shape`: the blocked
    axis cut to one entry per block; ``()`` for one scale per array."""
    axis = block_layout_of(tuple(shape), fmt)[4]
    if axis is None:
        return ()
    return tuple(shape[:axis]) + (-(-shape[axis] // fmt.block_size),) + tuple(shape[axis + 1:])


def check_tensor_scale_given(fmt: ScaledFormat, tensor_scale) -> None:
    """ValueError unless codes hold a `tensor_scale` (not None) exactly where `fmt` has one."""
    if fmt.tensor_scale and tensor_scale is None:
        raise ValueError(f"{fmt!r} has a tensor scale: codes must hold it (the ScaledCodes' tensor_scale), "
                         "without which the values are not known")
    if not fmt.tensor_scale and tensor_scale is not None:
        raise ValueError(f"{fmt!r} has no tensor scale, but codes hold one ({tensor_scale!r}): they are the "
                         "codes of another format")


def checked_scaled_codes(codes, fmt: ScaledFormat):
    """``(element codes, scale codes, tensor scale)`` of the `codes` of `fmt`
    (a ScaledCodes, or the pair or triple it holds), checked: integer codes,
    scale codes of the shape the element codes' blocks take and of values
    ``rp.encode`` gives, and a tensor scale (a positive finite number) exactly
    where `fmt` has one."""
    return _checked_scaled(codes, fmt)[:3]


def _checked_scaled(codes, fmt: ScaledFormat):
    """`checked_scaled_codes` and the block scales the scale codes stand for
    (found while checking them)."""
    if not isinstance(codes, tuple) or len(codes) not in (2, 3):
        packed = type(codes).__name__ == "PackedScaled"
        hint = "; rp.unpack(packed, fmt) gives them back from rp.pack's" if packed else ""
        raise TypeError("codes of a scaled format are (element codes, scale codes[, tensor scale]), as "
                        f"rp.encode(x, fmt) returns them, got {type(codes).__name__}{hint}")
    element_codes = _codes.code_array(codes[0], "element codes")
    scale_codes = _codes.code_array(codes[1], "scale codes")
    tensor_scale = codes[2] if len(codes) == 3 else None
    if isinstance(tensor_scale, np.ndarray) and tensor_scale.ndim == 0:  # as np.load gives it back
        tensor_scale = tensor_scale[()]
    check_tensor_scale_given(fmt, tensor_scale)
    if tensor_scale is not None and not (isinstance(tensor_scale, (numbers.Real, np.floating, np.integer))
                                         and 0 < float(tensor_scale) < math.inf):
        raise ValueError(f"the tensor scale must be a positive finite number, got {tensor_scale!r}")
    expected = scale_shape(element_codes.shape, fmt)
    if scale_codes.shape != expected:
        raise ValueError(f"scale codes must have shape {expected} for element codes of shape "
                         f"{element_codes.shape} in {fmt!r}, got {scale_codes.shape}")
    return element_codes, scale_codes, tensor_scale, _scales_of_codes(scale_codes, fmt)


def _scales_of_codes(scale_codes, fmt: ScaledFormat) -> np.ndarray:
    """The float64 block scales of `scale_codes` (before a tensor scale);
    ValueError for a code that ``rp.encode`` never gives: a power-of-two
    scale's code past its range (other than E8M0's NaN), a significand scale's
    code with the sign bit set (other than a NaN)."""
    if fmt.scale_range is None:
        scales = _codes.decode_values(scale_codes, fmt.scale_format)
        if np.any(np.signbit(scales) & ~np.isnan(scales)):
            raise ValueError(f"scale codes of {fmt!r} must not have the sign bit set: scales are positive "
                             "(rp.encode never gives a negative one)")
        return scales
    low, high = fmt.scale_range
    codes64 = scale_codes.astype(np.int64)
    nan = (codes64 == _E8M0_NAN) if fmt.has_nan_scale else np.zeros(codes64.shape, bool)
    if np.any(~nan & ((codes64 < 0) | (codes64 > high - low))):
        nan_code = f", or {_E8M0_NAN} (NaN)" if fmt.has_nan_scale else ""
        raise ValueError(f"scale codes must lie in [0, {high - low}]{nan_code} for {fmt!r}")
    return np.where(nan, np.nan, np.ldexp(1.0, np.where(nan, 0, codes64 + low)))


def _scaled_values(elements, scales, fmt: ScaledFormat):
    """The float64 `elements` times their blocks' `scales` (of `scale_shape`, as
    `checked_scaled_codes` checks them): where the blocked axis holds whole
    blocks, one product of the elements viewed as ``(outer, blocks, block_size,
    inner)`` with the scales broadcast over each block; else with each element's
    block's scale taken (a ragged last block; nothing is made per block_size,
    which may far exceed the data)."""
    shape = elements.shape
    outer, length, inner, block_size, axis = block_layout_of(shape, fmt)
    if axis is None:
        return elements * scales
    blocks = -(-length // block_size) if length else 0
    if length % block_size == 0:
        blocked = elements.reshape(outer, blocks, block_size, inner)
        return (blocked * scales.reshape(outer, blocks, 1, inner)).reshape(shape)
    return elements * scales.take(np.arange(length) // block_size, axis=axis)  # (each element's block)
