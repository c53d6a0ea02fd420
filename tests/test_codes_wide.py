"""rp.decode / rp.encode of wide floating-point formats (up to float64's exponent
range, deep subnormals, every NaN convention) against the exact oracle of
tests/reference.py on random codes: the small formats' every code is in
test_oracle.py; these reach the code loops' two-factor powers of two and
their shifts for values far below float32's range."""
import numpy as np
import pytest
from reference import decode_reference, encode_reference

import rpfloat as rp

WIDE = [
    rp.FloatFormat(11, 10),
    rp.FloatFormat(11, 52),
    rp.FloatFormat(10, 3),
    rp.FloatFormat(11, 4, subnormals=False),
    rp.FloatFormat(9, 20, nan="max", inf=False),
    rp.FloatFormat(8, 7, nan="negzero", inf=False),
    rp.FloatFormat(8, 23, nan=None, inf=False),
    rp.FloatFormat(6, 40),
    rp.FloatFormat(9, 6, nan="ieee", inf=False),  # the top field: NaN codes only
    rp.FloatFormat(11, 10, bias=1024),  # normals below 2**-1022: float64 subnormals
    rp.FloatFormat(5, 2, bias=1040),  # every value a float64 subnormal
]


@pytest.mark.parametrize("fmt", WIDE, ids=repr)
def test_wide_codes_against_the_oracle(fmt):
    rng = np.random.default_rng(fmt.bits)
    dtype = rp.encode([0.0], fmt).dtype
    # random codes, and those at the field edges: zero, subnormal, least normal, the top
    # exponent field (inf or NaN, where the format reserves it), the largest magnitude; both signs
    top_field = (2**fmt.exp_bits - 1) << fmt.man_bits
    edges = [0, 1, 2**fmt.man_bits - 1, 2**fmt.man_bits, top_field - 1, top_field, top_field + 1,
             2**(fmt.bits - 1) - 1]
    edges += [code | 2**(fmt.bits - 1) for code in edges]
    codes = np.unique(np.concatenate([rng.integers(0, 2**fmt.bits, 3000, dtype=np.uint64),
                                      np.array(edges, dtype=np.uint64)]))
    named = [int(c) for c in codes if decode_reference(int(c), fmt) is not None]
    codes = np.array(named, dtype=np.uint64).astype(dtype)
    got = rp.decode(codes, fmt).astype(np.float64)
    want = np.array([decode_reference(c, fmt) for c in named])
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{fmt!r}: codes {codes[~same][:4]} decode to {got[~same][:4]}, want {want[~same][:4]}"
    values = want[~np.isnan(want)]
    if fmt.has_nan:  # NaN of either sign: the canonical code, with the sign where -0 is not NaN's code
        values = np.concatenate([values, [np.nan, -np.nan]])
    expected = np.array([encode_reference(v, fmt) for v in values], dtype=np.uint64).astype(dtype)
    np.testing.assert_array_equal(rp.encode(values, fmt), expected)
