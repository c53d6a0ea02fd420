"""Input sweeps for holding a kernel to the bit-level kernel bit for bit, and a
runner that calls an array kernel as ``rpfloat.rounding`` does."""
import numpy as np

from rpfloat._params import kernel_params, widening_params


def float32_sweep() -> np.ndarray:
    """Every pattern of a float32's top 16 bits with 7 low halves: every exponent,
    both signs, subnormals, inf, NaN payloads (quiet and signalling), ties."""
    high = np.arange(0, 0x10000, dtype=np.uint32)
    low = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1234], dtype=np.uint32)
    return ((high[:, None] << 16) | low).ravel().view(np.float32)


def float16_sweep() -> np.ndarray:
    """Every float16 bit pattern."""
    return np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)


def float64_sweep() -> np.ndarray:
    """Every float64 sign and exponent with significands that put a tie, one
    below and one above it, and carries at every bit position (and a few fixed
    random significands): float64 values beyond float32's, NaN payloads too."""
    fields = np.arange(1 << 12, dtype=np.uint64) << np.uint64(52)
    single = [1 << k for k in range(52)]
    significands = {0, (1 << 52) - 1}
    for bit in single:
        significands.update({bit, bit - 1, bit + 1, bit | (1 << 51), (bit - 1) | (1 << 51)})
    significands.update(np.random.default_rng(64).integers(0, 1 << 52, 24, dtype=np.uint64).tolist())
    low = np.array(sorted(s & ((1 << 52) - 1) for s in significands), dtype=np.uint64)
    return (fields[:, None] | low).ravel().view(np.float64)


def sweeps():
    """The float32 sweep, every float16 as float32, the float32 sweep as float64
    and the float64 sweep, each also sorted by magnitude: a fast loop then meets
    mostly blocks with no element outside its range (in exponent order most
    blocks hold some, and the general loop would redo them)."""
    float32 = float32_sweep()
    with np.errstate(invalid="ignore"):  # casting signalling NaNs
        for xs in (float32, float16_sweep().astype(np.float32), float32.astype(np.float64), float64_sweep()):
            yield xs
            yield xs[np.argsort(np.abs(xs), kind="stable")]


# (rand_bits, key, offset) for comparing stochastic kernels: every rand_bits
# regime, and a random counter that crosses a 2**32 boundary
STOCHASTIC_DRAWS = tuple(zip((64, 1, 7, 9, 16, 23, 31, 32, 33), range(11, 20), (0, 5, 2**32 - 1000, 7, 0, 3, 1, 0, 9)))


def assert_same_stochastic(kernel, bit_kernel, params, stochastic, label):
    """`kernel` and `bit_kernel` (compiled entry points for float32 data into
    float32, mode number `stochastic`) give the same bits on the float32 sweep and
    every float16, each also sorted by magnitude, for every STOCHASTIC_DRAWS."""
    float32 = [float32_sweep(), float16_sweep().astype(np.float32)]
    for xs in float32 + [xs[np.argsort(np.abs(xs), kind="stable")] for xs in float32]:
        for rand_bits, key, offset in STOCHASTIC_DRAWS:
            got, want = np.empty_like(xs), np.empty_like(xs)
            for run, out in ((kernel, got), (bit_kernel, want)):
                run(xs.view(np.int32), out.view(np.int32), params, params, stochastic, key, offset, rand_bits)
            bad = np.flatnonzero(got.view(np.int32) != want.view(np.int32))
            assert bad.size == 0, (f"{label} rand_bits={rand_bits}: {bad.size} differ, e.g. x={xs[bad[:4]]!r} "
                                   f"kernel={got[bad[:4]]!r} bit kernel={want[bad[:4]]!r}")


def kernel_setup(dtype, fmt, policy: str):
    """How ``rpfloat.rounding`` calls an array kernel for `dtype` data onto `fmt`:
    ``(result_dtype, params, fast_params, source_bits, target_bits, as_float64)``.
    float32 data into a float64 result take the widening kernel (int32 source,
    its target as uint32 pairs: `target_bits` int64, `fast_params` float32 ones)
    where the format has one, else are rounded as float64 (`as_float64`)."""
    result_dtype = np.dtype(np.result_type(dtype, fmt.carrier))
    params = kernel_params(fmt, result_dtype, policy)
    source_bits = np.int32 if np.dtype(dtype) == np.float32 else np.int64
    fast_params, target_bits, as_float64 = params, source_bits, False
    if result_dtype != dtype:
        fast_params, target_bits = widening_params(fmt, policy), np.int64
        if fast_params is None:
            source_bits, fast_params, as_float64 = np.int64, params, True
    return result_dtype, params, fast_params, source_bits, target_bits, as_float64


def run_kernel(xs: np.ndarray, fmt, mode: int, kernel_of, policy: str, key=0, offset=0, rand_bits=64) -> np.ndarray:
    """`xs` (float32 or float64) rounded onto `fmt` in `mode` (a ``quantize`` mode
    number) with the overflow `policy` by the kernel that ``kernel_of(source_bits,
    target_bits, params, mode, fast_params)`` returns, called as
    ``rpfloat.rounding`` calls it (`kernel_setup`)."""
    result_dtype, params, fast_params, source_bits, target_bits, as_float64 = kernel_setup(xs.dtype, fmt, policy)
    out = np.empty(xs.shape, result_dtype)
    if as_float64:
        with np.errstate(invalid="ignore"):  # casting signalling NaNs
            xs = xs.astype(np.float64)
    widening = source_bits == np.int32 and target_bits == np.int64
    target = out.view(np.uint32 if widening else target_bits)
    kernel = kernel_of(source_bits, target_bits, params, mode, fast_params)
    kernel(xs.view(source_bits), target, fast_params, params, mode, np.uint64(key), offset, rand_bits)
    return out
