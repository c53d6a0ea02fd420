"""Which kernel rounds an array: the bit-level kernels (``quantize``), which work
on integers and suit every case, or one that computes with the hardware's
floating-point arithmetic where the format, the mode and the thread's
floating-point environment allow it.

Those kernels give the bit-level kernels' results bit for bit, but only in the
default environment: subnormal numbers kept (no flush-to-zero or
denormals-are-zero, which some libraries turn on for the whole process), and,
for rounding by adding (``adding.py``), rounding to nearest (``fesetround``).
`kernel_for` checks the environment on every call (`environment`), in the
thread that runs the kernel:

- ``scaled.round_scaled``: fixed point (parameter ``scaled``) in nearest, up,
  down and toward_zero; needs subnormals kept.
- ``quantize.round_scaled_stochastic``: stochastic rounding of float32 data onto
  fixed point (``scaled_random``); needs subnormals kept.
- ``quantize.round_stochastic_split``: stochastic rounding of float32 data onto
  floating point (``stochastic_split``); needs subnormals kept. For coarse
  formats (``quantize.split_from_zero``) its variant from 0 up,
  ``quantize.round_stochastic_split_from_zero``.
- ``quantize.round_nearest_by_adding``: floating point (``nearest_by_adding``) in
  nearest; needs subnormals kept and rounding to nearest.

and one that works on integers, in any environment:

- ``quantize.UNIFORM_KERNELS``: floating point (``uniform_drop``) in every
  deterministic mode, and float32 data onto formats whose min_normal is
  float32's, such as bfloat16 and tf32 (``stochastic_uniform``), in stochastic.
"""
import numpy as np
from numba import njit, types

from ._bits import NUMBA_OPTIONS
from .quantize import (
    NEAREST, P_NEAREST_BY_ADDING, P_SCALED, P_SCALED_RANDOM, P_STOCHASTIC_SPLIT, P_STOCHASTIC_UNIFORM, P_UNIFORM_DROP,
    STOCHASTIC, UNIFORM_KERNELS, entry_point, round_array_for, round_nearest_by_adding, round_scaled_stochastic,
    round_stochastic_split, round_stochastic_split_from_zero, split_from_zero,
)
from .scaled import SCALED_MODES, round_scaled

# `environment`'s flags
KEEPS_SUBNORMALS, ROUNDS_TO_NEAREST = 1, 2


@njit(**NUMBA_OPTIONS)
def environment_flags(smallest_subnormal, smallest_normal, one, half_ulp, three_quarters_ulp):
    """The thread's floating-point environment as flags: KEEPS_SUBNORMALS where
    ``2 * smallest_subnormal`` and ``smallest_normal / 2`` are positive (no
    denormals-are-zero, no flush-to-zero), ROUNDS_TO_NEAREST where ``one +
    half_ulp`` (a tie) rounds down to even and ``one + three_quarters_ulp`` up:
    only rounding to nearest does both. Called with the numbers as arguments, so
    that LLVM computes nothing at compile time."""
    flags = 0
    if min(smallest_subnormal * 2.0, smallest_normal * 0.5) > 0.0:
        flags |= KEEPS_SUBNORMALS
    if (one + half_ulp) - one == 0.0 and (one + three_quarters_ulp) - one > 0.0:
        flags |= ROUNDS_TO_NEAREST
    return flags


_PROBE_ARGUMENTS = (
    float(np.finfo(np.float64).smallest_subnormal), float(np.finfo(np.float64).smallest_normal),
    1.0, 2.0**-53, 3 * 2.0**-54,
)


def environment():
    """`environment_flags` of the calling thread."""
    global _probe
    if _probe is None:
        signature = (types.float64,) * len(_PROBE_ARGUMENTS)
        environment_flags.compile(signature)
        _probe = environment_flags.overloads[signature].entry_point
    return _probe(*_PROBE_ARGUMENTS)


_probe = None  # environment_flags' compiled entry point, once looked up


def kernel_for(source_bits, target_bits, params, mode, fast_params=None):
    """The kernel for these carrier bit types, parameters and mode (module
    docstring), else ``quantize.round_array_for``'s; `fast_params` are `params`
    unless given (a widening kernel's). The compiled entry point, called as
    ``quantize.round_array_for`` says. Call it in the thread that runs the kernel."""
    fast_params = params if fast_params is None else fast_params
    kernel = None
    if mode < STOCHASTIC and params[P_UNIFORM_DROP]:
        kernel = UNIFORM_KERNELS[mode]
    elif mode == NEAREST and params[P_NEAREST_BY_ADDING]:
        if environment() == KEEPS_SUBNORMALS | ROUNDS_TO_NEAREST:
            kernel = round_nearest_by_adding
    elif mode == STOCHASTIC and params[P_STOCHASTIC_UNIFORM]:
        kernel = UNIFORM_KERNELS[STOCHASTIC]
    elif mode == STOCHASTIC and params[P_STOCHASTIC_SPLIT]:
        if environment() & KEEPS_SUBNORMALS:
            kernel = round_stochastic_split_from_zero if split_from_zero(params) else round_stochastic_split
    elif mode == STOCHASTIC and fast_params[P_SCALED_RANDOM]:
        if environment() & KEEPS_SUBNORMALS:
            kernel = round_scaled_stochastic
    elif params[P_SCALED] and mode in SCALED_MODES:
        if environment() & KEEPS_SUBNORMALS:
            kernel = round_scaled
    if kernel is None:
        return round_array_for(source_bits, target_bits, params, mode)
    key = (kernel, source_bits, target_bits)
    entry = _ENTRY_POINTS.get(key)
    if entry is None:
        entry = _ENTRY_POINTS[key] = entry_point(kernel, source_bits, target_bits)
    return entry


_ENTRY_POINTS = {}  # (kernel, source bits, target bits) -> compiled entry point
