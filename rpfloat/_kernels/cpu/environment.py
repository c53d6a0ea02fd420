"""The thread's floating-point environment, as the kernel table needs it.

Some fast paths compute with the hardware's floating-point arithmetic. They give
the bit-level kernels' results bit for bit, but only in the default
environment: subnormal numbers kept (no flush-to-zero or denormals-are-zero,
which some libraries turn on for the whole process) and, for rounding by
adding, rounding to nearest (``fesetround``). The table (``table``) asks
`environment` on every call, in the thread that runs the kernel. Code with no
integer-only fallback (the scaled formats) runs in the default environment
instead (`in_default_environment`).
"""
import ctypes
import ctypes.util
import functools
import platform
import sys

import numpy as np
from numba import njit, types

from ..core.bits import NUMBA_OPTIONS

# `environment`'s flags
KEEPS_SUBNORMALS, ROUNDS_TO_NEAREST = 1, 2
DEFAULT = KEEPS_SUBNORMALS | ROUNDS_TO_NEAREST


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


def in_default_environment(function):
    """Decorator: `function` runs in the default floating-point environment
    (subnormals kept, rounding to nearest), and the thread gets its own back
    after, where the thread has another one and rpfloat can set it: with glibc's
    ``fesetenv(FE_DFL_ENV)`` on x86-64 Linux (SSE's MXCSR holds both settings).
    Elsewhere the function runs as it is. For code that computes with the
    hardware's arithmetic and has no integer-only fallback (the scaled formats)."""
    @functools.wraps(function)
    def in_default(*args, **kwargs):
        if environment() == DEFAULT or _libm() is None:
            return function(*args, **kwargs)
        saved = (ctypes.c_char * 64)()  # a fenv_t (32 bytes on x86-64 glibc), with room to spare
        if _LIBM.fegetenv(saved) != 0 or _LIBM.fesetenv(_FE_DFL_ENV) != 0:
            return function(*args, **kwargs)
        try:
            return function(*args, **kwargs)
        finally:
            _LIBM.fesetenv(saved)
    return in_default


_FE_DFL_ENV = ctypes.c_void_p(-1)  # glibc: ((const fenv_t *) -1)
_LIBM = None


def _libm():
    """glibc's libm on x86-64 Linux, else None."""
    global _LIBM
    if _LIBM is None and sys.platform == "linux" and platform.machine() == "x86_64" \
            and platform.libc_ver()[0] == "glibc":
        _LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
        _LIBM.fegetenv.argtypes = _LIBM.fesetenv.argtypes = [ctypes.c_void_p]
    return _LIBM
