"""``rp.pack`` / ``rp.unpack``: dense little-endian bit packing of codes.

The oracle is NumPy's own ``np.packbits(..., bitorder="little")`` of every code's
bits, least significant first: an independent spelling of the documented layout.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat._codes import code_dtype
from rpfloat.packing import PackedScaled

WIDTHS = list(range(1, 17)) + [32, 64]


def reference_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Bit ``b`` of code ``i`` at stream bit ``i * bits + b``, packed little-endian."""
    words = codes.astype(np.uint64).reshape(-1)
    stream = (words[:, None] >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)
    return np.packbits(stream.astype(np.uint8).reshape(-1), bitorder="little")


def random_codes(rng, bits, shape):
    high = np.uint64((1 << bits) - 1)  # inclusive: every width up to 64
    return rng.integers(0, high, size=shape, dtype=np.uint64, endpoint=True).astype(code_dtype(bits))


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 8, 9, 31, 100, 1001])
def test_round_trip_and_layout(bits, count):
    codes = random_codes(np.random.default_rng(bits * 10007 + count), bits, count)
    packed = rp.pack(codes, bits)
    assert packed.dtype == np.uint8 and packed.ndim == 1
    assert packed.nbytes == -(-count * bits // 8)
    np.testing.assert_array_equal(packed, reference_pack(codes, bits))
    unpacked = rp.unpack(packed, bits, count)
    assert unpacked.dtype == code_dtype(bits)
    np.testing.assert_array_equal(unpacked, codes)


@given(bits=st.sampled_from(WIDTHS), data=st.data())
def test_round_trip_hypothesis(bits, data):
    shape = data.draw(st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple))
    top = (1 << bits) - 1
    values = data.draw(st.lists(st.sampled_from([0, top, 1, top >> 1]) | st.integers(0, top),
                                min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    codes = np.array(values, dtype=np.uint64).astype(code_dtype(bits)).reshape(shape)
    packed = rp.pack(codes, bits)
    np.testing.assert_array_equal(packed, reference_pack(codes, bits))
    unpacked = rp.unpack(packed, bits, shape)
    assert unpacked.shape == shape
    np.testing.assert_array_equal(unpacked, codes)


def test_exact_sizes():
    n = 1024
    rng = np.random.default_rng(1)
    assert rp.pack(random_codes(rng, 4, n), 4).nbytes == n // 2
    assert rp.pack(random_codes(rng, 6, n), 6).nbytes == 3 * n // 4
    assert rp.pack(random_codes(rng, 4, n + 1), 4).nbytes == n // 2 + 1
    assert rp.pack(random_codes(rng, 6, n + 1), 6).nbytes == 3 * n // 4 + 1
    assert rp.pack(random_codes(rng, 6, n + 2), 6).nbytes == 3 * n // 4 + 2  # 12 bits: 2 bytes
    assert rp.pack(random_codes(rng, 12, n + 1), 12).nbytes == 3 * n // 2 + 2


def test_nibble_order_by_hand():
    packed = rp.pack(np.array([0x1, 0x2, 0x3, 0xF, 0xA], np.uint8), 4)
    np.testing.assert_array_equal(packed, np.array([0x21, 0xF3, 0x0A], np.uint8))  # first code: low nibble
    np.testing.assert_array_equal(rp.unpack(packed, 4, 5), [0x1, 0x2, 0x3, 0xF, 0xA])


def test_six_bit_layout_by_hand():
    # 0b000001, 0b000010, 0b000011, 0b111111 -> stream (LSB first)
    # byte 0 = c0 | (c1 & 0b11) << 6 = 0b10_000001; byte 1 = c1 >> 2 | c2 << 4 = 0b0011_0000;
    # byte 2 = c2 >> 4 | c3 << 2 = 0b111111_00
    packed = rp.pack(np.array([1, 2, 3, 63], np.uint8), 6)
    np.testing.assert_array_equal(packed, np.array([0b10000001, 0b00110000, 0b11111100], np.uint8))


def test_whole_bytes_are_little_endian_integers():
    codes = np.array([0x0102, 0xA0B0], np.uint16)
    np.testing.assert_array_equal(rp.pack(codes, 16), [0x02, 0x01, 0xB0, 0xA0])
    codes64 = np.array([0x0102030405060708, 2**64 - 1], np.uint64)
    packed = rp.pack(codes64, 64)
    assert packed.tobytes() == codes64.astype("<u8").tobytes()
    np.testing.assert_array_equal(rp.unpack(packed, 64, 2), codes64)


def test_pack_copies_and_unpack_ignores_trailing_bytes():
    codes = np.arange(10, dtype=np.uint8)
    packed = rp.pack(codes, 8)
    packed[0] = 99
    assert codes[0] == 0  # the packed bytes do not alias the codes
    longer = np.concatenate([rp.pack(codes, 5), np.full(3, 0xFF, np.uint8)])
    np.testing.assert_array_equal(rp.unpack(longer, 5, 10), codes)
    np.testing.assert_array_equal(rp.unpack(rp.pack(codes, 5).tobytes(), 5, 10), codes)


def test_formats_give_their_bits():
    codes = rp.encode([0.5, 1.0, -6.0, 3.0, 448.0], "e4m3")
    np.testing.assert_array_equal(rp.pack(codes, "e4m3"), rp.pack(codes, 8))
    fp4 = rp.encode([0.5, 1.0, -6.0], "e2m1")
    assert rp.pack(fp4, rp.format("e2m1")).nbytes == 2
    np.testing.assert_array_equal(rp.unpack(rp.pack(fp4, "e2m1"), "e2m1", 3), fp4)
    fixed = rp.encode([-1.5, 0.25], "q4.4")
    np.testing.assert_array_equal(rp.unpack(rp.pack(fixed, "q4.4"), "q4.4", 2), fixed)


def test_signed_integer_codes_accepted_when_in_range():
    codes = np.array([0, 5, 15], np.int64)
    np.testing.assert_array_equal(rp.unpack(rp.pack(codes, 4), 4, 3), codes)


def test_mx_codes_pack_to_their_real_size():
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    codes = rp.encode(x, "mxfp4")
    elements, scales = rp.pack(codes.elements, 4), rp.pack(codes.scales, 8)
    assert elements.nbytes == x.size // 2 and scales.nbytes == x.size // 32
    unpacked = (rp.unpack(elements, 4, codes.elements.shape), rp.unpack(scales, 8, codes.scales.shape))
    values = np.asarray(rp.decode(unpacked, "mxfp4"))
    expected = np.asarray(rp.round(x, "mxfp4"), np.float64)
    np.testing.assert_array_equal(values.view(np.uint64), expected.view(np.uint64))

    packed = rp.pack(codes, "mxfp4")
    assert isinstance(packed, PackedScaled)
    assert packed.elements.nbytes == x.size // 2 and packed.scales.nbytes == x.size // 32
    assert packed.nbytes == x.size // 2 + x.size // 32
    round_trip = rp.unpack(packed, "mxfp4")
    np.testing.assert_array_equal(round_trip.elements, codes.elements)
    np.testing.assert_array_equal(round_trip.scales, codes.scales)
    assert round_trip.elements.dtype == codes.elements.dtype and round_trip.scales.dtype == codes.scales.dtype
    values = np.asarray(rp.decode(round_trip, "mxfp4"))
    np.testing.assert_array_equal(values.view(np.uint64), expected.view(np.uint64))


def test_nvfp4_keeps_its_tensor_scale():
    x = np.random.default_rng(4).standard_normal(64) * 1000
    codes = rp.encode(x, "nvfp4")
    round_trip = rp.unpack(rp.pack(codes, "nvfp4"), "nvfp4")
    assert round_trip.tensor_scale == codes.tensor_scale
    np.testing.assert_array_equal(np.asarray(rp.decode(round_trip, "nvfp4")), np.asarray(rp.decode(codes, "nvfp4")))


@pytest.mark.parametrize("codes, bits, error, words", [
    (np.array([16], np.uint8), 4, ValueError, "codes"),
    (np.array([-1], np.int8), 4, ValueError, "codes"),
    (np.array([256], np.uint16), "e4m3", ValueError, "codes"),
    (np.array([1.0]), 4, TypeError, "codes"),
    (np.array([True]), 1, TypeError, "codes"),
    (np.array([1], np.uint8), 0, ValueError, "bits"),
    (np.array([1], np.uint8), 65, ValueError, "bits"),
    (np.array([1], np.uint8), 4.0, TypeError, "bits"),
    (np.array([1], np.uint8), True, TypeError, "bits"),
    (np.array([1], np.uint8), [4], TypeError, "bits"),
    (np.array([1], np.uint8), "no-such-format", ValueError, "no-such-format"),
    (np.array([1], np.uint8), "mxfp4", TypeError, "codes"),
])
def test_pack_rejects_bad_arguments(codes, bits, error, words):
    with pytest.raises(error, match=words):
        rp.pack(codes, bits)


def test_pack_rejects_scaled_codes_without_their_format():
    codes = rp.encode(np.ones(32), "mxfp4")
    with pytest.raises(TypeError, match="ScaledFormat"):
        rp.pack(codes, 4)


def test_pack_rejects_scaled_codes_that_do_not_fit_the_format():
    """Scale codes of another block size, and a tensor scale missing or where
    the format has none: the packed codes would decode to other values."""
    x = np.linspace(-1000, 1000, 64, dtype=np.float32)
    with pytest.raises(ValueError, match=r"scale codes must have shape \(4,\)"):
        rp.pack(rp.encode(x, "mxfp4"), "nvfp4")                   # 2 scales of 32, for blocks of 16
    two_level = rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)
    codes = rp.encode(x, two_level)
    with pytest.raises(ValueError, match="has a tensor scale"):
        rp.pack((codes.elements, codes.scales), two_level)
    with pytest.raises(ValueError, match="has no tensor scale"):
        rp.pack(codes, "nvfp4")
    packed = rp.pack(codes, two_level)
    assert packed.tensor_scale == codes.tensor_scale
    # scale codes that rp.decode refuses: a significand scale's sign bit, a power-of-two scale past its range
    negative = (np.zeros(16, np.uint8), np.array([0xB8], np.uint8))
    ranged = rp.ScaledFormat("e4m3", scale_format=(-5, 5))
    past = (np.zeros(4, np.uint8), np.array(11, np.uint8))
    for codes, fmt, message in ((negative, "nvfp4", "sign bit"), (past, ranged, r"lie in \[0, 10\]")):
        for function in (rp.decode, rp.pack):
            with pytest.raises(ValueError, match=message):
                function(codes, fmt)


def test_lists_of_python_ints_pack_exactly():
    """Codes of 2**63 and up beside smaller ones, which NumPy would hold as
    float64, and an empty list."""
    assert rp.pack([1, 2**64 - 1], 64).view("<u8").tolist() == [1, 2**64 - 1]
    assert rp.pack([], 4).size == 0
    with pytest.raises(TypeError, match="codes must be integers"):
        rp.pack([1, 2.5], 4)


@pytest.mark.parametrize("packed, bits, count, error, words", [
    (np.zeros(1, np.uint8), 4, 3, ValueError, "packed"),
    (np.zeros(2, np.uint16), 4, 3, TypeError, "packed"),
    (np.zeros((2, 2), np.uint8), 4, 3, ValueError, "packed"),
    (np.zeros(2, np.uint8), 4, None, TypeError, "count_or_shape"),
    (np.zeros(2, np.uint8), 4, -1, ValueError, "count_or_shape"),
    (np.zeros(2, np.uint8), 4, 2.0, TypeError, "count_or_shape"),
    (np.zeros(2, np.uint8), 4, (1, -2), ValueError, "count_or_shape"),
    (np.zeros(2, np.uint8), 0, 1, ValueError, "bits"),
    (np.zeros(2, np.uint8), "mxfp4", 1, TypeError, "packed"),
])
def test_unpack_rejects_bad_arguments(packed, bits, count, error, words):
    with pytest.raises(error, match=words):
        rp.unpack(packed, bits, count)


def test_unpack_of_packed_scaled_needs_its_format_and_no_count():
    packed = rp.pack(rp.encode(np.ones(32), "mxfp4"), "mxfp4")
    with pytest.raises(TypeError, match="count_or_shape"):
        rp.unpack(packed, "mxfp4", 32)
    with pytest.raises(TypeError, match="ScaledFormat"):
        rp.unpack(packed, 4, 32)


def test_ten_million_codes_are_quick():
    import time

    codes = random_codes(np.random.default_rng(5), 4, 10**7)
    start = time.perf_counter()
    packed = rp.pack(codes, 4)
    unpacked = rp.unpack(packed, 4, codes.size)
    assert time.perf_counter() - start < 5.0  # vectorised: about 0.05 s; a Python loop takes minutes
    assert packed.nbytes == codes.size // 2
    np.testing.assert_array_equal(unpacked, codes)


def test_unpack_ignores_trailing_bytes_after_a_whole_group():
    """the codes fill their last group exactly and a byte follows."""
    np.testing.assert_array_equal(rp.unpack(np.array([0x21, 0xFF], np.uint8), 4, 2), [1, 2])
    np.testing.assert_array_equal(rp.unpack(np.array([0x21, 0x43, 0xFF, 0xFF], np.uint8), 4, 4), [1, 2, 3, 4])
    codes = np.arange(8, dtype=np.uint8)
    np.testing.assert_array_equal(rp.unpack(np.r_[rp.pack(codes, 3), np.uint8(0xFF)], 3, 8), codes)
