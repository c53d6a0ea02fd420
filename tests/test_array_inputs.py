"""RPArray (docs/arrays.md) with other operands and writers: plain ndarrays and NumPy
scalars of every real dtype in the exact arithmetic, NumPy functions that write into
an RPArray, ufunc keywords, and the inputs rp.round refuses or converts."""
from fractions import Fraction

import numpy as np
import pytest

import rpfloat as rp
from rpfloat import array as rparray
from rpfloat.array import asarray
from stats_bounds import assert_binomial


def hexes(x):
    return [float(v).hex() for v in np.asarray(x, dtype=np.float64).reshape(-1)]


# -- NumPy functions that write into an RPArray ---------------------------------------------

VALUES = [0.1, 0.2, 0.3]
BFLOAT16_UP = [0.10009765625, 0.2001953125, 0.30078125]  # VALUES rounded up onto bfloat16


def _put(b):
    np.put(b, [0, 1, 2], VALUES)


def _putmask(b):
    np.putmask(b, np.array([True, True, True]), VALUES)


def _place(b):
    np.place(b, np.array([True, True, True]), VALUES)


def _copyto(b):
    np.copyto(b, VALUES)


def _copyto_keywords(b):
    np.copyto(dst=b, src=np.array(VALUES), where=np.array([True, True, True]))


def _put_along_axis(b):
    np.put_along_axis(b, np.array([0, 1, 2]), np.array(VALUES), axis=0)


@pytest.mark.parametrize("write", [_put, _putmask, _place, _copyto, _copyto_keywords, _put_along_axis])
def test_writing_functions_round_onto_the_format(write):
    b = asarray([1.0, 2.0, 3.0], "bfloat16", mode="up")
    write(b)
    assert type(b) is rparray.RPArray and b.dtype == np.float32
    assert b.tolist() == BFLOAT16_UP  # as b[...] = VALUES rounds them


def test_writing_functions_leave_unselected_values():
    b = asarray([1.0, 2.0, 3.0], "bfloat16")
    np.putmask(b, np.array([True, False, True]), [0.1, 0.2])  # values repeat, as NumPy's do
    assert b.tolist() == [0.10009765625, 2.0, 0.10009765625]
    b = asarray([1.0, 2.0, 3.0], "bfloat16")
    np.copyto(b, 0.1, where=np.array([False, True, False]))
    assert b.tolist() == [1.0, 0.10009765625, 3.0]


def test_fill_diagonal_rounds():
    b = asarray(np.ones((2, 3)), "bfloat16")
    np.fill_diagonal(b, 0.1)
    assert b.tolist() == [[0.10009765625, 1.0, 1.0], [1.0, 0.10009765625, 1.0]]


def test_writing_functions_draw_as_item_assignment_does():
    values = np.full(64, 1 + 2.0**-10)
    assigned = asarray(np.zeros(64), "bfloat16", "stochastic", rng=11)
    assigned[...] = values
    copied = asarray(np.zeros(64), "bfloat16", "stochastic", rng=11)
    np.copyto(copied, values)
    assert np.array_equal(np.asarray(copied), np.asarray(assigned))
    assert set(copied.tolist()) == {1.0, 1.0078125}


@pytest.mark.parametrize("write", [
    lambda b, value: b.__setitem__(slice(None), value),
    lambda b, value: b.fill(value),
    lambda b, value: np.copyto(b, value),
    lambda b, value: b.__setitem__(np.ones(b.shape, bool), value),        # a boolean index
    lambda b, value: b.reshape(64, 64).__setitem__((slice(None), slice(None)), [value] * 64),  # a row broadcast
    lambda b, value: b.__setitem__(slice(None), np.array([[value]])),  # leading length-1 axes, dropped by NumPy
    lambda b, value: np.copyto(b, np.full((1, 1, 1), value)),
], ids=["slice", "fill", "copyto", "mask", "row", "leading-ones", "copyto-leading-ones"])
def test_a_stochastic_write_draws_for_every_element(write):
    """A value written to many elements rounds once for each of them: 1 + 2**-10
    onto bfloat16 (steps of 2**-7) rounds up with probability 1/8, element by
    element, as the same value in a full array does."""
    b = asarray(np.zeros(4096), "bfloat16", "stochastic", rng=12)
    write(b, 1 + 2.0**-10)
    values = np.asarray(b)
    assert set(np.unique(values).tolist()) == {1.0, 1.0078125}
    rows = values.reshape(64, 64)
    assert not (rows == rows[0]).all()  # not one draw repeated: independent rows all equal is negligible
    assert_binomial(int(np.count_nonzero(values == 1.0078125)), values.size, 1 / 8, 1e-9)


def test_a_stochastic_write_into_a_scaled_format_rounds_the_values_as_given():
    """A scaled format's blocks (and scales) are those of the values written, in
    every mode: a stochastic write lies between the down and up writes."""
    fmt = rp.ScaledFormat("e2m1", block_size=2, axis=0)
    written = {}
    for mode in ("down", "up", "stochastic"):
        a = asarray(np.zeros((2, 2)), fmt, mode, rng=0)
        a[:] = [1.0, 100.0]
        written[mode] = np.asarray(a)
    assert (written["down"] <= written["stochastic"]).all() and (written["stochastic"] <= written["up"]).all()
    assert written["down"].tolist()[0] == [0.0, 96.0] and written["up"].tolist()[0] == [8.0, 96.0]


def test_writing_functions_into_plain_arrays_see_the_values():
    destination = np.zeros(3)
    np.copyto(destination, asarray(VALUES, "bfloat16"))
    assert destination.tolist() == asarray(VALUES, "bfloat16").tolist()


def test_nan_to_num_does_not_write_into_an_rparray():
    b = asarray([np.nan, 1.0], "bfloat16")
    with pytest.raises(TypeError, match="RPArray"):
        np.nan_to_num(b, copy=False)
    assert np.isnan(b[0].item())
    assert np.nan_to_num(b).tolist() == [0.0, 1.0]


# -- plain operands in the exact arithmetic -------------------------------------------------


@pytest.fixture(params=[True, False], ids=["fast", "float64"])
def fast_paths(request, monkeypatch):
    monkeypatch.setattr(rparray, "FAST_PATHS", request.param)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_products_with_narrow_float_operands_are_correctly_rounded(fast_paths, dtype):
    a = asarray([1 + 2.0**-52], "float64", mode="up")
    # exact product 1 + 2**-10 + 2**-52 + 2**-62: rounded up, 1 + 2**-10 + 2**-51
    assert hexes(a * np.array([1 + 2.0**-10], dtype)) == ["0x1.0040000000002p+0"]
    assert hexes(a * dtype(1 + 2.0**-10)) == ["0x1.0040000000002p+0"]
    assert hexes(np.multiply(np.array([1 + 2.0**-10], dtype), a)) == ["0x1.0040000000002p+0"]


def test_products_with_large_float32_operands_are_correctly_rounded(fast_paths):
    a = asarray([1 + 2.0**-52], "float64", mode="up")
    b = 2.0**110 * (1 + 2.0**-23)
    assert hexes(a * np.array([b], np.float32)) == ["0x1.0000020000002p+110"]
    assert hexes(a * np.float32(b)) == ["0x1.0000020000002p+110"]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_differences_with_unsigned_operands(fast_paths, dtype):
    assert (asarray([1.5], "float16", "up") - np.array([1], dtype)).tolist() == [0.5]  # exact
    a = asarray([1 + 2.0**-46], "float64", "up")
    assert hexes(a - np.array([128], dtype)) == ["-0x1.fbfffffffffffp+6"]  # exact
    assert hexes(a - dtype(128)) == ["-0x1.fbfffffffffffp+6"]
    assert hexes(np.subtract(np.array([128], dtype), a)) == ["0x1.fbfffffffffffp+6"]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_differences_with_the_most_negative_int(fast_paths, dtype):
    bits = np.iinfo(dtype).bits
    a = asarray([2.0 ** (bits - 54)], "float64", "up")
    lowest = int(np.iinfo(dtype).min)  # -2**(bits - 1): a - lowest needs 54 bits, a + lowest 53
    exact = Fraction(2.0 ** (bits - 54)) - lowest
    expected = 2.0 ** (bits - 1) + 2.0 ** (bits - 53)  # the float64 value above
    assert Fraction(expected) > exact > Fraction(2.0 ** (bits - 1))
    assert (a - np.array([lowest], dtype)).item() == expected
    assert (a - dtype(lowest)).item() == expected
    assert np.subtract(np.array([lowest], dtype), a).item() == -2.0 ** (bits - 1)  # toward +inf


def test_differences_with_booleans_follow_numpy(fast_paths):
    a = asarray([1.0, 2.0], "bfloat16")
    mask = np.array([True, False])
    assert (a - mask).tolist() == [0.0, 2.0] == (np.asarray(a) - mask).tolist()
    assert (a - np.True_).tolist() == [0.0, 1.0]
    assert (a - [True, False]).tolist() == [0.0, 2.0]
    assert np.subtract(mask, a).tolist() == [0.0, -2.0]
    b = asarray([2.0], "bfloat16", "up")
    assert (b - np.array([True])).tolist() == [1.0]  # exact
    assert (b - np.array([True]) - 2.0**-60).tolist() == [1.0]  # up from 1 - 2**-60


def test_integer_arguments_keep_their_type():
    a = asarray([1.0, 1.5], "bfloat16")
    assert np.ldexp(a, np.array([1, 2])).tolist() == [2.0, 6.0]


# -- ufunc keywords -----------------------------------------------------------------------


def test_keywords_at_their_defaults_keep_the_exact_rounding(fast_paths):
    b = asarray([1.0], "bfloat16", mode="up")
    defaults = dict(casting="same_kind", order="K", where=True, dtype=None, subok=True, signature=None)
    for name, value in defaults.items():
        assert np.add(b, 2.0**-60, **{name: value}).tolist() == [1.0078125], name
    del defaults["signature"]  # NumPy refuses it together with dtype
    assert np.add(b, 2.0**-60, **defaults).tolist() == [1.0078125]
    assert np.add(b, 2.0**-60, where=np.True_).tolist() == [1.0078125]
    assert np.add(b, 2.0**-60, where=np.array(True)).tolist() == [1.0078125]  # a 0-d True too
    out = asarray([0.0], "bfloat16", mode="up")
    assert np.add(b, 2.0**-60, out=out, casting="same_kind") is out and out.tolist() == [1.0078125]


def test_other_keywords_round_the_float64_result():
    b = asarray([1.0, 1.0], "bfloat16", mode="up")
    out = asarray([5.0, 5.0], "bfloat16", mode="up")
    np.add(b, 2.0**-60, where=np.array([True, False]), out=out)
    assert out.tolist() == [1.0, 5.0]  # fl(1 + 2**-60) = 1, rounded up: 1 (docs/arrays.md)
    assert np.add(b, 2.0**-60, dtype=np.float64).tolist() == [1.0, 1.0]


def test_reduce_with_where_into_an_out():
    matrix = asarray([[1.0, 2.0], [3.0, 4.0]], "bfloat16")
    mask = np.array([[True, False], [True, True]])
    out = asarray([0.0, 0.0], "bfloat16")
    assert np.add.reduce(matrix, axis=0, where=mask, out=out) is out
    assert out.tolist() == [4.0, 4.0] == np.add.reduce(np.asarray(matrix), axis=0, where=mask).tolist()
    plain = np.zeros(2, np.float32)
    np.add.reduce(matrix, axis=0, where=mask, out=plain)
    assert plain.tolist() == [4.0, 4.0]
    out = asarray([7.0, 7.0], "bfloat16")
    np.maximum.reduce(matrix, axis=1, where=mask, initial=0.0, out=out)
    assert out.tolist() == [1.0, 4.0]


# -- inputs rp.round refuses or converts ----------------------------------------------------

WIDE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant


@pytest.mark.skipif(not WIDE, reason="np.longdouble is float64 here")
def test_longdouble_is_refused_as_rp_round_refuses_it():
    data = np.array([np.longdouble(1) + np.longdouble(2) ** -60])
    with pytest.raises(TypeError) as rounding_error:
        rp.round(data, "bfloat16", "up")
    message = str(rounding_error.value)
    a = asarray([1.0], "bfloat16", "up")
    with pytest.raises(TypeError, match="wider than float64") as error:
        asarray(data, "bfloat16", "up")
    assert str(error.value) == message
    with pytest.raises(TypeError, match="wider than float64"):
        a + data
    with pytest.raises(TypeError, match="wider than float64"):
        a + data[0]  # a NumPy scalar, not only on the float64 path
    with pytest.raises(TypeError, match="wider than float64"):
        np.maximum(a, data)
    with pytest.raises(TypeError, match="wider than float64"):
        np.concatenate([a, data])  # array functions too
    with pytest.raises(TypeError, match="wider than float64"):
        a[0] = data[0]
    assert a.tolist() == [1.0]


def test_masked_arrays_are_refused_as_rp_round_refuses_them():
    masked = np.ma.masked_array([1.0, 1000.0, 2.0], mask=[False, True, False])
    with pytest.raises(TypeError) as rounding_error:
        rp.round(masked, "float32")
    with pytest.raises(TypeError, match="masked") as error:
        asarray(masked, "float32")
    assert str(error.value) == str(rounding_error.value)
    a = asarray([1.0, 2.0, 3.0], "float32")
    with pytest.raises(TypeError, match="masked"):
        a + masked
    with pytest.raises(TypeError, match="masked"):
        np.multiply(a, masked, out=asarray(np.zeros(3), "float32"))
    with pytest.raises(TypeError, match="masked"):
        a[...] = masked
    with pytest.raises(TypeError, match="masked"):
        np.where(np.array([True, False, True]), a, masked)


def test_ml_dtypes_data_is_taken_as_float32(fast_paths):
    import ml_dtypes  # the test extra installs it
    weights = np.array([1.5, 2.0, 0.1], ml_dtypes.bfloat16)
    as_float32 = weights.astype(np.float32)
    a = asarray(weights, "e4m3")
    assert a.tolist() == asarray(as_float32, "e4m3").tolist() == rp.round(weights, "e4m3").tolist()
    b = asarray([1.0, 1.0, 1.0], "float32", "up")
    assert (b * weights).tolist() == (b * as_float32).tolist()
    assert (weights - b).tolist() == (as_float32 - b).tolist()
    assert (b + ml_dtypes.bfloat16(0.1)).tolist() == (b + np.float32(ml_dtypes.bfloat16(0.1))).tolist()
    codes = np.array([1.0, 448.0], ml_dtypes.float8_e4m3fn)
    assert asarray(codes, "float16").tolist() == [1.0, 448.0]
    assert np.concatenate([b, weights]).tolist() == np.concatenate([b, as_float32]).tolist()
    b[0] = ml_dtypes.bfloat16(2.5)
    assert b.tolist()[0] == 2.5


def test_big_python_ints_are_taken_as_rp_round_takes_them():
    assert asarray([2**64], "float32").tolist() == rp.round([2**64], "float32").tolist() == [2.0**64]


def test_complex_and_strings_are_still_refused():
    with pytest.raises(TypeError, match="real"):
        asarray(np.array([1 + 1j]), "bfloat16")
    a = asarray([1.0], "bfloat16")
    with pytest.raises(TypeError):
        a + np.complex128(1j)
    with pytest.raises(TypeError):
        a + np.array(["x"])
    # a Fraction has no float64 value without a rounding: a TypeError naming it, not a crash inside
    for operation in (lambda: a + Fraction(1, 3), lambda: Fraction(1, 3) * a, lambda: np.maximum(a, Fraction(1, 3))):
        with pytest.raises(TypeError, match="Fraction"):
            operation()


# -- rng ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rng", ["x", -1, 1.5, True, [1, 2], np.random.RandomState(0), np.random.PCG64(0)],
                         ids=["str", "negative", "float", "bool", "list", "RandomState", "PCG64"])
def test_rng_is_checked_as_rp_round_checks_it(rng):
    with pytest.raises((TypeError, ValueError)) as rounding_error:
        rp.round([1.1], "bfloat16", "stochastic", rng=rng)
    with pytest.raises(rounding_error.type) as error:
        asarray([1.1], "bfloat16", "stochastic", rng=rng)
    assert str(error.value) == str(rounding_error.value)
    assert str(error.value).startswith("rng")
    with pytest.raises(rounding_error.type, match="^rng"):
        rparray.RPArray([1.1], "bfloat16", "stochastic_equal", rng=rng)
    operand = asarray(np.ones((2, 2)), "bfloat16")  # (nearest: no generator of its own)
    with pytest.raises(rounding_error.type, match="^rng"):
        rp.matmul(operand, operand, "bfloat16", mode="stochastic", rng=rng)


def test_rng_accepts_what_rp_round_accepts():
    generator = np.random.default_rng(4)
    assert asarray([1.1], "bfloat16", "stochastic", rng=generator).rng is generator
    for seed in (3, np.int64(3), np.uint64(3), 2**70, np.random.SeedSequence(3)):
        a = asarray(np.full(32, 1.1), "bfloat16", "stochastic", rng=seed)
        assert isinstance(a.rng, np.random.Generator)
    same = [asarray(np.full(32, 1.1), "bfloat16", "stochastic", rng=seed).tolist() for seed in (3, np.int64(3))]
    assert same[0] == same[1]
