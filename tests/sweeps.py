"""Input sweeps for holding a kernel to the bit-level kernel bit for bit."""
import numpy as np


def float32_sweep() -> np.ndarray:
    """Every pattern of a float32's top 16 bits with 7 low halves: every exponent,
    both signs, subnormals, inf, NaN payloads (quiet and signalling), ties."""
    high = np.arange(0, 0x10000, dtype=np.uint32)
    low = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1234], dtype=np.uint32)
    return ((high[:, None] << 16) | low).ravel().view(np.float32)


def float16_sweep() -> np.ndarray:
    """Every float16 bit pattern."""
    return np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)


def sweeps():
    """The float32 sweep, every float16 as float32, and the float32 sweep as
    float64, each also sorted by magnitude: a fast loop then meets mostly blocks
    with no element outside its range (in exponent order most blocks hold some,
    and the general loop would redo them)."""
    float32 = float32_sweep()
    with np.errstate(invalid="ignore"):  # casting signalling NaNs
        for xs in (float32, float16_sweep().astype(np.float32), float32.astype(np.float64)):
            yield xs
            yield xs[np.argsort(np.abs(xs), kind="stable")]
