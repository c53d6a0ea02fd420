"""RPArray with a scaled format: its values are the scaled format's rounding of
the data, and every ufunc's float64 result is rounded onto it once, blocks and
scales following the result."""
import numpy as np
import pytest

import rpfloat as rp


def bits(a):
    return np.asarray(a).astype(np.float64).view(np.uint64)


@pytest.mark.parametrize("name", ["mxfp4_e2m1", "mxfp8_e4m3", "nvfp4", "mxint8"])
def test_operations_round_their_float64_result_once(name):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    y = rng.standard_normal((4, 64)).astype(np.float32)
    a, b = rp.asarray(x, name), rp.asarray(y, name)
    np.testing.assert_array_equal(bits(a), bits(rp.round(x, name)))
    ax, by = np.asarray(a, np.float64), np.asarray(b, np.float64)
    for got, exact in ((a + b, ax + by), (a * b, ax * by), (a - 0.5, ax - 0.5), (np.abs(a) ** 0.5, np.abs(ax) ** 0.5)):
        assert isinstance(got, rp.RPArray) and got.fmt == rp.format(name)
        np.testing.assert_array_equal(bits(got), bits(rp.round(exact, name)))
    product = a @ b.T  # rounded once, as for the other formats
    np.testing.assert_array_equal(bits(product), bits(rp.round(ax @ by.T, name)))


def test_scaled_and_element_formats_do_not_combine():
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    with pytest.raises(TypeError, match="do not combine"):
        rp.asarray(x, "mxfp8_e4m3") + rp.asarray(x, "e4m3")
    with pytest.raises(TypeError, match="do not combine"):
        rp.asarray(x, "mxfp8_e4m3") + rp.asarray(x, "mxfp4")


def test_in_place_keeps_the_object():
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    a = rp.asarray(x, "mxfp4")
    before = id(a)
    a += 1
    assert id(a) == before
    np.testing.assert_array_equal(bits(a), bits(rp.round(np.asarray(rp.round(x, "mxfp4"), np.float64) + 1, "mxfp4")))


def test_per_step_accumulation_says_the_arrays_format_is_scaled():
    a = rp.asarray(np.ones((2, 32), np.float32), "mxfp8_e4m3")
    for call in (lambda: a.matmul(a.T), lambda: a.dot(a[0], per_step=True)):
        with pytest.raises(TypeError, match="format mxfp8_e4m3 is scaled .*use a @ b"):
            call()
    with pytest.raises(TypeError, match="format mxfp8_e4m3 is scaled: pass acc= an element format"):
        a.sum(per_step=True)
    total = a.sum(per_step=True, acc="bfloat16")
    assert total.fmt == rp.format("bfloat16") and float(total) == 64.0


def test_ufunc_at_rounds_the_touched_values_as_item_assignment_does():
    """``np.add.at`` leaves blocks it does not touch as they are (rounding the
    whole array again would move NVFP4's second block: its max 0.015625 rounds
    to 0.01171875 under its own scale), and rounds the touched values as
    ``a[index] = values`` rounds them."""
    a = rp.asarray([1.0] * 16 + [0.0195, 0.01171875] + [0.0] * 14, "nvfp4")
    assert np.asarray(a)[16:18].tolist() == [0.015625, 0.01171875]
    touched = a.copy()
    np.add.at(touched, [0, 0, 3], 0.5)
    assigned = a.copy()
    assigned[[0, 3]] = np.asarray(a, np.float64)[[0, 3]] + [1.0, 0.5]
    np.testing.assert_array_equal(bits(touched), bits(assigned))
    np.testing.assert_array_equal(bits(touched)[4:], bits(a)[4:])
    assert np.asarray(touched)[[0, 3]].tolist() == rp.round(np.array([2.0, 1.5]), "nvfp4").tolist()
