"""``rp.flip_bits``: bit-flip fault injection on the codes of a format.

Checked on the codes (bit patterns), never on values alone: p = 0 and p = 1 against
``codes`` and ``codes ^ mask``, the flip frequency of every bit position against
the binomial distribution (a Chernoff bound, tests/stats_bounds.py), and the
documented stream (bit ``b`` of element ``i`` flips iff number ``i * bits + b`` is
below the threshold) against the stream re-implemented in tests/stream_reference.py.
"""
import math

import numpy as np
import pytest

import rpfloat as rp
from rpfloat.faults import field_mask
from rpfloat.scaling import ScaledCodes
from stats_bounds import Budget
from stream_reference import seed_key, stream

# (format name, field, its mask) written out by hand from the layouts
FIELD_MASKS = [
    ("e4m3", "sign", 0x80), ("e4m3", "exponent", 0x78), ("e4m3", "significand", 0x07), ("e4m3", "all", 0xFF),
    ("bfloat16", "sign", 0x8000), ("bfloat16", "exponent", 0x7F80), ("bfloat16", "significand", 0x007F),
    ("bfloat16", "all", 0xFFFF),
    ("e2m1", "sign", 0x8), ("e2m1", "exponent", 0x6), ("e2m1", "significand", 0x1), ("e2m1", "all", 0xF),
    ("q8.8", "sign", 0x8000), ("q8.8", "significand", 0x7FFF), ("q8.8", "all", 0xFFFF),
    ("uq4.4", "significand", 0xFF), ("uq4.4", "all", 0xFF),
    ("float32", "exponent", 0x7F800000), ("e5m2", "significand", 0x03),
]


def sample(fmt, n=2000, seed=0):
    """Values of `fmt` spread over its range, signs mixed, zeros included (no NaN)."""
    rng = np.random.default_rng(seed)
    fmt = rp.format(fmt)
    magnitudes = np.exp2(rng.uniform(-8, math.log2(fmt.max), n))
    values = np.where(rng.random(n) < 0.5, -magnitudes, magnitudes)
    values[::17] = 0.0
    return np.asarray(rp.round(values, fmt, overflow="saturate"), np.float64)


def codes_of(values, fmt):
    return rp.encode(np.asarray(values), fmt).astype(np.uint64)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


@pytest.mark.parametrize("name, field, mask", FIELD_MASKS)
def test_field_masks(name, field, mask):
    assert field_mask(rp.format(name), field) == mask


@pytest.mark.parametrize("name, field, mask", FIELD_MASKS)
def test_p_zero_changes_nothing(name, field, mask):
    x = sample(name)
    same_bits(rp.flip_bits(x, name, 0.0, field=field, rng=1), rp.round(x, name))
    x32 = x.astype(np.float32)
    same_bits(rp.flip_bits(x32, name, 0, field=field, rng=1), rp.round(x32, name))


@pytest.mark.parametrize("name, field, mask", FIELD_MASKS)
def test_p_one_flips_exactly_the_field(name, field, mask):
    x = sample(name)
    flipped = rp.flip_bits(x, name, 1.0, field=field, rng=1)
    expected_values = rp.decode(codes_of(x, name) ^ np.uint64(mask), name)
    same_bits(flipped, np.asarray(expected_values, np.float64))
    number = ~np.isnan(flipped)  # NaN codes re-encode to the canonical NaN: compare the others' codes
    assert number.mean() > 0.5
    np.testing.assert_array_equal(codes_of(flipped[number], name), (codes_of(x, name) ^ np.uint64(mask))[number])


def test_flips_into_specials_decode_as_the_format_defines():
    # e5m2 (IEEE): +-0 with every exponent bit flipped is 0x7C / 0xFC, +-inf; a subnormal, NaN
    same_bits(rp.flip_bits(np.array([0.0, -0.0, 2.0**-16]), "e5m2", 1.0, field="exponent"),
              np.array([np.inf, -np.inf, rp.decode(0x7D, "e5m2")], np.float64))
    assert np.isnan(rp.flip_bits(2.0**-16, "e5m2", 1.0, field="exponent"))
    # e4m3 (fn): 0x7F is NaN, 0x78 is 256, no inf
    assert np.isnan(rp.flip_bits(7 * 2.0**-9, "e4m3", 1.0, field="exponent"))
    assert rp.flip_bits(0.0, "e4m3", 1.0, field="exponent") == 256.0
    # e4m3fnuz: -0's code 0x80 is its NaN
    assert np.isnan(rp.flip_bits(0.0, "e4m3fnuz", 1.0, field="sign"))
    # bfloat16: inf 0x7F80 with its significand flipped is 0x7FFF, a NaN
    assert np.isnan(rp.flip_bits(np.float32(np.inf), "bfloat16", 1.0, field="significand"))
    # e2m1 has neither: 0 with its exponent flipped is 0x6 = 4
    assert rp.flip_bits(0.0, "e2m1", 1.0, field="exponent") == 4.0


def test_result_dtype_and_scalars_follow_round():
    for x in (np.float32(0.3), np.float16(0.3), 0.3, 3, np.array([0.3], np.float32)):
        for name in ("e4m3", "q8.8", "float32"):
            flipped = rp.flip_bits(x, name, 0.5, rng=2)
            rounded = rp.round(x, name)
            assert type(flipped) is type(rounded)
            assert np.asarray(flipped).dtype == np.asarray(rounded).dtype
    assert rp.flip_bits(np.zeros((3, 4, 5)), "e4m3", 0.5, rng=2).shape == (3, 4, 5)


def test_unrounded_input_is_rounded_to_nearest_first():
    x = np.array([0.1, 1 / 3, 1000.0, -1e-9])
    same_bits(rp.flip_bits(x, "e4m3", 0.0), rp.round(x, "e4m3"))
    same_bits(rp.flip_bits(x, "e4m3", 1.0, field="sign"), -rp.round(x, "e4m3"))


# Cases where re-encoding the result gives the flipped code back: no flip makes a NaN,
# or the format has one NaN code per sign (e4m3: 0x7F, 0xFF; e4m3fnuz: 0x80).
FREQUENCY_CASES = [
    ("e4m3", "all", 0.1), ("e4m3fnuz", "all", 0.25), ("bfloat16", "significand", 0.3), ("e2m1", "all", 0.5),
    ("q8.8", "significand", 0.02), ("q8.8", "sign", 0.6), ("uq4.4", "all", 0.7), ("float32", "significand", 0.001),
]
# One binomial check per bit of each field (74 in all): a correct implementation fails any of
# them with probability below 1e-6 (union bound; the seeds are fixed).
FREQUENCY_BUDGET = Budget(1e-6, sum(field_mask(rp.format(n), f).bit_count() for n, f, _ in FREQUENCY_CASES))
EXPECTED_FLIPS = 500  # per bit at least: a path that flips at half the rate, or never, fails


@pytest.mark.parametrize("name, field, p", FREQUENCY_CASES)
def test_flip_frequency_of_every_bit_is_binomial(name, field, p):
    fmt = rp.format(name)
    n = max(20_000, math.ceil(EXPECTED_FLIPS / min(p, 1 - p)))  # float32 at p = 0.001: 500_000 elements
    x = sample(name, n=n, seed=5)
    before = codes_of(x, name)
    after = codes_of(rp.flip_bits(x, name, p, field=field, rng=12345), name)
    mask = field_mask(fmt, field)
    changed = before ^ after
    assert not (changed & ~np.uint64(mask)).any(), "a bit outside the field flipped"
    for b in range(fmt.bits):
        flips = int(((changed >> np.uint64(b)) & np.uint64(1)).sum())
        if mask >> b & 1:
            FREQUENCY_BUDGET.binomial(flips, before.size, p, f"{name} {field} p={p}: bit {b} flipped")
        else:
            assert flips == 0


@pytest.mark.parametrize("name", ["bfloat16", "float32"])
def test_flips_follow_the_documented_stream(name):
    x = sample(name, n=300, seed=9).reshape(10, 30)
    p, seed, fmt = 0.3, 77, rp.format(name)
    key = seed_key(seed)
    threshold = round(p * 2**64)
    mask = field_mask(fmt, "significand")
    expected = codes_of(x, fmt).reshape(-1).copy()
    for i in range(expected.size):
        for b in range(fmt.bits):
            if mask >> b & 1 and stream(key, i * fmt.bits + b) < threshold:
                expected[i] ^= np.uint64(1 << b)
    flipped = rp.flip_bits(x, fmt, p, field="significand", rng=seed)
    np.testing.assert_array_equal(codes_of(flipped, fmt).reshape(-1), expected)


def test_same_seed_same_result_other_seed_other_result():
    x = sample("e4m3", n=5000)
    first = rp.flip_bits(x, "e4m3", 0.2, rng=42)
    same_bits(first, rp.flip_bits(x, "e4m3", 0.2, rng=42))
    same_bits(first, rp.flip_bits(x, "e4m3", 0.2, rng=np.random.SeedSequence(42)))
    assert not np.array_equal(codes_of(first, "e4m3"), codes_of(rp.flip_bits(x, "e4m3", 0.2, rng=43), "e4m3"))
    generator = np.random.default_rng(0)
    a, b = rp.flip_bits(x, "e4m3", 0.2, rng=generator), rp.flip_bits(x, "e4m3", 0.2, rng=generator)
    assert not np.array_equal(codes_of(a, "e4m3"), codes_of(b, "e4m3"))


def test_bit_fate_does_not_depend_on_the_field_or_layout():
    x = sample("e4m3", n=600, seed=3)
    everything = codes_of(x, "e4m3") ^ codes_of(rp.flip_bits(x, "e4m3", 0.4, rng=5), "e4m3")
    exponent = codes_of(x, "e4m3") ^ codes_of(rp.flip_bits(x, "e4m3", 0.4, field="exponent", rng=5), "e4m3")
    kept = ~np.isnan(rp.flip_bits(x, "e4m3", 0.4, rng=5))
    np.testing.assert_array_equal((everything & np.uint64(0x78))[kept], exponent[kept])
    fortran = np.asfortranarray(x.reshape(20, 30))
    same_bits(rp.flip_bits(fortran, "e4m3", 0.4, rng=5), rp.flip_bits(x, "e4m3", 0.4, rng=5).reshape(20, 30))


def test_scaled_format_flips_element_codes_only():
    x = np.random.default_rng(8).standard_normal((2, 64)).astype(np.float32)
    codes = rp.encode(x, "mxfp4")
    flipped = rp.flip_bits(x, "mxfp4", 1.0, field="sign")
    expected = rp.decode(ScaledCodes(codes.elements ^ np.uint8(0x8), codes.scales, None), "mxfp4")
    same_bits(flipped, np.asarray(expected).astype(np.float32))
    same_bits(rp.flip_bits(x, "mxfp4", 0.0), rp.round(x, "mxfp4"))
    changed = codes.elements ^ rp.encode(rp.flip_bits(x, "mxfp4", 1.0, field="significand"), "mxfp4").elements
    assert (changed == 0x1).all()


@pytest.mark.parametrize("fmt, field", [
    ("q8.8", "exponent"), ("uq4.4", "sign"), ("uq4.4", "exponent"), (rp.FloatFormat(5, 0), "significand"),
    (rp.FixedFormat(1, 0), "significand"), ("e4m3", "mantissa"), ("e4m3", "Sign"),
])
def test_missing_or_unknown_field_raises(fmt, field):
    with pytest.raises(ValueError, match="field"):
        rp.flip_bits([1.0], fmt, 0.5, field=field)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(p=-0.1), ValueError, "p must"), (dict(p=1.5), ValueError, "p must"),
    (dict(p=float("nan")), ValueError, "p must"), (dict(p="0.5"), TypeError, "p must"),
    (dict(p=True), TypeError, "p must"), (dict(p=None), TypeError, "p must"),
    (dict(p=0.5, field=1), TypeError, "field"), (dict(p=0.5, field=None), TypeError, "field"),
    (dict(p=0.5, rng="seed"), TypeError, "rng"), (dict(p=0.5, rng=-1), ValueError, "rng"),
])
def test_bad_p_field_and_rng_raise(kwargs, error, words):
    with pytest.raises(error, match=words):
        rp.flip_bits([1.0], "e4m3", **kwargs)


def test_bad_formats_and_inputs_raise():
    with pytest.raises(TypeError, match="name_or_format|format"):
        rp.flip_bits([1.0], 3.5, 0.5)
    with pytest.raises(ValueError, match="fmt"):
        rp.flip_bits([1.0], rp.FloatFormat(None, 7), 0.5)
    with pytest.raises(TypeError, match="complex|real"):
        rp.flip_bits([1.0 + 1.0j], "e4m3", 0.5)
    with pytest.raises(TypeError, match="x must"):
        rp.flip_bits(["a"], "e4m3", 0.5)


@pytest.mark.parametrize("bits, offset", [(8, 0), (8, 2**32 // 8 - 150), (16, 2**32 // 16 - 5000),
                                          (32, 2**32 // 32 - 9), (64, 2**32 // 64 - 7), (5, 3 * 2**32 // 5 + 11),
                                          (1, 2**32 - 70)])
def test_kernel_follows_the_stream_across_segments(bits, offset):
    """The flip kernel on codes whose stream numbers start anywhere: chunks
    inside a 2**32 segment (stepped Weyl words), and those that cross one
    (drawn one by one), against the documented stream bit by bit."""
    from rpfloat._kernels.cpu.faults import CHUNK, flip_field_bits

    rng = np.random.default_rng(bits)
    size = CHUNK + 300
    codes = rng.integers(0, 2**min(bits, 63), size, dtype=np.uint64)
    mask = (2**bits - 1) & 0xF0F0F0F0F0F0F0F5  # some bits of the field only
    threshold, key = round(0.3 * 2**64), 1234567
    expected = codes.copy()
    checked = np.r_[0:200, CHUNK - 150:size]  # both sides of the chunk edge (the segment edge lies near it)
    for i in checked:
        for b in range(bits):
            if mask >> b & 1 and stream(key, (offset + int(i)) * bits + b) < threshold:
                expected[i] ^= np.uint64(1 << b)
    flip_field_bits(codes, np.uint64(mask), np.uint64(threshold), np.uint64(key), offset, bits)
    np.testing.assert_array_equal(codes[checked], expected[checked])


@pytest.mark.parametrize("offset", [0, 2**32 // 8 - 2])  # stepped words; drawn one by one (a segment crossed)
def test_kernel_compares_all_64_bits(offset):
    """A threshold whose high 32 bits equal a bit's random number's: the low
    halves decide (below it by one: flips; equal: does not)."""
    from rpfloat._kernels.cpu.faults import flip_field_bits

    key, bits = 99, 8
    number = stream(key, offset * bits + 3)  # bit 3 of the first code
    for threshold, flipped in ((number + 1, True), (number, False)):
        codes = np.zeros(40, np.uint64)
        flip_field_bits(codes, np.uint64(1 << 3), np.uint64(threshold), np.uint64(key), offset, bits)
        assert bool(codes[0] >> np.uint64(3) & np.uint64(1)) == flipped
