"""float16 data and results through the float32 carrier (``rpfloat._kernels.cpu.float16``):
the integer loops give NumPy's casts bit for bit, and rounding float16 arrays
gives the bits of rounding their float32 copies (which the oracle tests hold to
exact arithmetic), for every float16 pattern, NaN payloads included."""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.cpu import float16

EVERY_HALF = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
# float32 NaNs whose payload float16 keeps, loses (becoming payload 1), or cuts
FLOAT32_NANS = np.array([0x7F800001, 0xFF800001, 0x7F802000, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0x7F801FFF,
                         0x7FC01FFF], np.uint32).view(np.int32)


def test_widen_is_numpys_cast_for_every_float16():
    singles = np.empty(EVERY_HALF.size, np.int32)
    float16.widen(EVERY_HALF, singles)
    np.testing.assert_array_equal(singles, EVERY_HALF.view(np.float16).astype(np.float32).view(np.int32))


def test_narrow_is_numpys_cast_for_every_float16_value_and_nans():
    singles = np.concatenate([EVERY_HALF.view(np.float16).astype(np.float32).view(np.int32), FLOAT32_NANS])
    halves = np.empty(singles.size, np.uint16)
    float16.narrow(singles, halves)
    with np.errstate(invalid="ignore"):
        expected = singles.view(np.float32).astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(halves, expected)
    assert halves[-FLOAT32_NANS.size:].tolist()[:2] == [0x7C01, 0xFC01]  # payload lost: 1, still NaN


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "float16", "float6_e3m2fn", "e2m1", "uq4.4", "e3m4"])
@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "up", "odd", "stochastic"])
def test_float16_arrays_round_as_their_float32_copies(fmt, mode):
    data = np.concatenate([EVERY_HALF, EVERY_HALF[::-1]]).view(np.float16)  # (two draws per pattern)
    got = rp.round(data, fmt, mode, rng=3)
    assert got.dtype == np.result_type(np.float16, rp.format(fmt).carrier)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = rp.round(data.astype(np.float32), fmt, mode, rng=3).astype(got.dtype)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    out = np.empty_like(got)
    assert rp.round(data, fmt, mode, rng=3, out=out) is out
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))
