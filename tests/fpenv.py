"""The thread's floating-point environment, set from tests: denormals-are-zero
and flush-to-zero (the SSE control register MXCSR) and the rounding direction.
glibc on x86-64 only, where fenv_t is 32 bytes with MXCSR at offset 28; tests
that use these skip elsewhere (``X86_64_GLIBC``)."""
import contextlib
import ctypes
import ctypes.util
import platform
import sys

X86_64_GLIBC = sys.platform == "linux" and platform.machine() == "x86_64"
_LIBM = ctypes.CDLL(ctypes.util.find_library("m")) if X86_64_GLIBC else None
DENORMALS_ARE_ZERO, FLUSH_TO_ZERO = 0x0040, 0x8000
FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO = 0x000, 0x400, 0x800, 0xC00


@contextlib.contextmanager
def mxcsr_with(bits):
    """MXCSR with `bits` set, in this thread, inside the block."""
    env = (ctypes.c_char * 32)()
    assert _LIBM.fegetenv(env) == 0
    saved = bytes(env)
    mxcsr = int.from_bytes(saved[28:32], "little") | bits
    ctypes.memmove(ctypes.addressof(env) + 28, mxcsr.to_bytes(4, "little"), 4)
    assert _LIBM.fesetenv(env) == 0
    try:
        yield
    finally:
        assert _LIBM.fesetenv((ctypes.c_char * 32).from_buffer_copy(saved)) == 0


@contextlib.contextmanager
def rounding_direction(direction):
    """The rounding direction `direction` (FE_*), in this thread, inside the block."""
    assert _LIBM.fesetround(direction) == 0
    try:
        yield
    finally:
        assert _LIBM.fesetround(FE_TONEAREST) == 0
