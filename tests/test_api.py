"""The array contract of rp.round / encode / decode (docs/rounding.md, docs/codes.md): dtypes, shapes,
strides, byte order, out=, scalars, complex, randomness plumbing and bad input."""
import ast
import math
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
from fractions import Fraction

import numba
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.cpu.backend import CHUNK
from rpfloat._kernels.cpu.loops import SIGNATURES, round_stochastic_halves, round_stochastic_halves_from_zero
from rpfloat._kernels.cpu.table import KERNELS
from rpfloat.rounding import round_chunk


def bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def sample(n=1000, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(dtype)


# -- dtypes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "input_dtype, fmt, expected",
    [
        (np.float32, "bfloat16", np.float32),
        (np.float16, "e4m3", np.float16),
        (np.float16, "bfloat16", np.float32),
        (np.float64, "e4m3", np.float64),
        (np.float32, rp.FloatFormat(9, 3), np.float64),  # range wider than float32
        (np.int32, "e4m3", np.float64),
        (np.bool_, "e4m3", np.float64),
        (np.complex64, "bfloat16", np.complex64),
        (np.complex64, rp.FloatFormat(9, 3), np.complex128),
    ],
)
def test_result_dtype(input_dtype, fmt, expected):
    x = np.ones(3, dtype=input_dtype)
    assert rp.round(x, fmt).dtype == expected


def test_exponent_wider_than_float32_is_carried_in_float64():
    fmt = rp.FloatFormat(9, 3)
    small = np.array([2.0**100, 2.0**-140], dtype=np.float32)
    got = rp.round(small, fmt)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, small.astype(np.float64))
    np.testing.assert_array_equal(rp.round(np.array([2.0**200, 2.0**-260, 2.0**300]), fmt), [2.0**200, 0.0, np.inf])


def test_integers_are_taken_as_float64():
    got = rp.round(np.array([1, 17, 1000], dtype=np.int64), "e4m3", overflow="saturate")
    np.testing.assert_array_equal(got, [1.0, 16.0, 448.0])


def test_python_ints_beyond_int64_are_taken_as_float64():
    assert rp.round(2**70, "e4m3", overflow="saturate") == 448.0
    np.testing.assert_array_equal(rp.round([1, 2**64], "bfloat16"), [1.0, 2.0**64])


def test_wider_than_float64_input_is_a_type_error():
    if np.dtype(np.longdouble).itemsize == 8:  # long double is float64 on this platform
        assert rp.round(np.array([1 / 3], dtype=np.longdouble), "float64")[0] == 1 / 3
        return
    with pytest.raises(TypeError, match="wider than float64"):
        rp.round(np.array([1 / 3], dtype=np.longdouble), "float64")
    with pytest.raises(TypeError, match="wider than float64"):
        rp.round(np.array([1 / 3], dtype=np.clongdouble), "float64")


def test_decode_reads_field_zero_codes_of_formats_without_subnormals_as_zeros():
    fmt = rp.FloatFormat(4, 3, subnormals=False)
    np.testing.assert_array_equal(rp.decode([0, 1, 7, 8, 129], fmt), [0.0, 0.0, 0.0, fmt.min_normal, -0.0])
    assert np.signbit(rp.decode([129], fmt))
    # a format without -0 (nan="negzero": its code 0x80 is NaN) reads them as +0
    fnuz = rp.FloatFormat(4, 3, bias=8, subnormals=False, inf=False, nan="negzero")
    values = rp.decode([0x81, 0x87, 0x01, 0x80], fnuz)
    assert values[:3].tolist() == [0.0, 0.0, 0.0] and not np.signbit(values[:3]).any()
    assert np.isnan(values[3])


def test_float16_input_rounds_exactly():
    x = np.arange(2**16, dtype=np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    via_float32 = rp.round(x.astype(np.float32), "e4m3")
    np.testing.assert_array_equal(bits(rp.round(x, "e4m3")), bits(via_float32.astype(np.float16)))


# -- scalars and 0-d ----------------------------------------------------------


@pytest.mark.parametrize("x", [0.1, np.float32(0.1), np.array(0.1), np.array(0.1, dtype=np.float32), 3, True])
def test_scalars_and_0d_give_numpy_scalars(x):
    got = rp.round(x, "bfloat16")
    assert isinstance(got, np.generic)
    assert got == rp.round(np.atleast_1d(x), "bfloat16")[0]


def test_0d_out_returns_out():
    out = np.empty((), dtype=np.float64)
    assert rp.round(np.array(1 / 3), "e4m3", out=out) is out
    assert out == 0.34375


# -- layout -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_any_layout_gives_the_contiguous_result(mode):
    base = sample(24 * 30, np.float64).reshape(24, 30)
    expected = rp.round(np.ascontiguousarray(base[::2, 1::3].T), "e4m3", mode, rng=7)
    views = {
        "strided": base[::2, 1::3].T,
        "fortran": np.asfortranarray(base[::2, 1::3].T),
        "byteswapped": base[::2, 1::3].T.astype(base.dtype.newbyteorder(">")),
    }
    for name, view in views.items():
        got = rp.round(view, "e4m3", mode, rng=7)
        assert got.shape == view.shape, name
        np.testing.assert_array_equal(bits(got), bits(expected), err_msg=name)


def test_input_is_never_modified_and_read_only_works():
    x = sample(100)
    before = x.copy()
    x.flags.writeable = False
    for mode in ["nearest", "stochastic"]:
        rp.round(x, "e5m2", mode, rng=1)
        rp.round(x, "float16", mode, rng=1)  # float16 result: the work copy path
    np.testing.assert_array_equal(bits(x), bits(before))


def test_empty_and_multidimensional():
    assert rp.round(np.empty((0, 3), np.float32), "e4m3").shape == (0, 3)
    x = sample(60).reshape(3, 4, 5)
    np.testing.assert_array_equal(bits(rp.round(x, "e4m3")), bits(rp.round(x.ravel(), "e4m3")).reshape(3, 4, 5))


# -- out= ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.bool_, ">f4", np.complex64, np.float32])
def test_empty_arrays_of_every_path(dtype):
    """Empty input through the buffered paths (float16, ints, byte-swapped) too."""
    empty = np.empty((0, 3), dtype)
    got = rp.round(empty, "bfloat16")
    assert got.shape == (0, 3) and got.dtype == rp.rounding.result_dtype(empty.dtype, rp.format("bfloat16"))
    if empty.dtype == np.float32:
        assert rp.round(empty, "bfloat16", out=empty) is empty


def test_offsets_beyond_the_int64_counter_are_a_value_error():
    with pytest.raises(ValueError, match="offset"):
        round_chunk(np.ones(2, np.float32), "bfloat16", offset=2**63)
    with pytest.raises(ValueError, match="offset"):
        round_chunk(np.ones(2, np.complex64), "bfloat16", "stochastic", rng=1, offset=2**62)
    round_chunk(np.ones(2, np.float32), "bfloat16", "stochastic", rng=1, offset=2**63 - 3)  # the last indices work


def test_out_is_written_and_returned():
    x = sample(50)
    out = np.empty_like(x)
    assert rp.round(x, "bfloat16", out=out) is out
    np.testing.assert_array_equal(bits(out), bits(rp.round(x, "bfloat16")))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("fmt", ["bfloat16", "e4m3", "int8", "mxfp4"])
def test_out_may_be_a_subclass(fmt):
    """A matrix (which stays 2-D where the kernels flatten; it crashed them) or a
    masked array as out= is written through its memory and returned."""
    x = sample(48, np.float64).reshape(3, 16)
    expected = rp.round(x, fmt, "stochastic", rng=2)
    matrix = np.asmatrix(np.zeros((3, 16)))
    assert rp.round(x, fmt, "stochastic", rng=2, out=matrix) is matrix
    np.testing.assert_array_equal(bits(np.asarray(matrix)), bits(expected))
    masked = np.ma.masked_array(np.zeros((3, 16)), mask=np.eye(3, 16, dtype=bool))
    assert rp.round(x, fmt, "stochastic", rng=2, out=masked) is masked
    np.testing.assert_array_equal(bits(masked.data), bits(expected))
    assert masked.mask.sum() == 3


def test_out_may_be_the_input():
    x = sample(50)
    expected = rp.round(x, "e4m3")
    assert rp.round(x, "e4m3", out=x) is x
    np.testing.assert_array_equal(bits(x), bits(expected))


@pytest.mark.parametrize("shift", [1, -1])
def test_out_overlapping_the_input_elsewhere_reads_the_input_first(shift):
    buffer = sample(1001)
    x = buffer[:-1] if shift == 1 else buffer[1:]
    expected = rp.round(x.copy(), "e4m3")
    out = buffer[1:] if shift == 1 else buffer[:-1]
    rp.round(x, "e4m3", out=out)
    np.testing.assert_array_equal(bits(out), bits(expected))


def test_out_may_be_strided():
    x = sample(50, np.float64)
    big = np.zeros(100)
    rp.round(x, "e4m3", out=big[::2])
    np.testing.assert_array_equal(bits(big[::2]), bits(rp.round(x, "e4m3")))
    assert not big[1::2].any()


def test_out_errors_name_the_argument():
    x = sample(10)
    with pytest.raises(TypeError, match="out must have the result dtype float32"):
        rp.round(x, "bfloat16", out=np.empty(10, np.float64))
    with pytest.raises(ValueError, match="out must have the shape"):
        rp.round(x, "bfloat16", out=np.empty(11, np.float32))
    with pytest.raises(TypeError, match="out must be a numpy ndarray"):
        rp.round(x, "bfloat16", out=[0.0] * 10)


# -- complex ------------------------------------------------------------------


def test_complex_rounds_part_by_part():
    z = (sample(40, np.float64) + 1j * sample(40, np.float64, seed=1)).astype(np.complex128)
    got = rp.round(z, "e4m3")
    np.testing.assert_array_equal(bits(got.real.copy()), bits(rp.round(z.real, "e4m3")))
    np.testing.assert_array_equal(bits(got.imag.copy()), bits(rp.round(z.imag, "e4m3")))


# -- randomness ---------------------------------------------------------------


def ties(n=4096):
    return np.full(n, 1.0 + 2.0**-4, dtype=np.float32)  # halfway between two e4m3 values


def test_int_seed_is_reproducible_and_seeds_differ():
    a = rp.round(ties(), "e4m3", "stochastic", rng=5)
    np.testing.assert_array_equal(bits(a), bits(rp.round(ties(), "e4m3", "stochastic", rng=5)))
    assert (bits(a) != bits(rp.round(ties(), "e4m3", "stochastic", rng=6))).any()


def test_seed_sequence_is_reproducible_generator_advances_none_is_fresh():
    seq = np.random.SeedSequence(11)
    a = rp.round(ties(), "e4m3", "sr", rng=seq)
    np.testing.assert_array_equal(bits(a), bits(rp.round(ties(), "e4m3", "sr", rng=np.random.SeedSequence(11))))
    gen = np.random.default_rng(3)
    assert (bits(rp.round(ties(), "e4m3", "sr", rng=gen)) != bits(rp.round(ties(), "e4m3", "sr", rng=gen))).any()
    assert (bits(rp.round(ties(), "e4m3", "sr")) != bits(rp.round(ties(), "e4m3", "sr"))).any()


@pytest.mark.parametrize("split", [1, 333, 2048, 4095])
def test_chunks_with_offsets_give_the_whole_arrays_bits(split):
    x = sample(4096)
    whole = rp.round(x, "e5m2", "stochastic", rng=9)
    head = round_chunk(x[:split], "e5m2", "stochastic", rng=9)
    tail = round_chunk(x[split:], "e5m2", "stochastic", rng=9, offset=split)
    np.testing.assert_array_equal(bits(np.concatenate([head, tail])), bits(whole))


@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_buffered_paths_give_the_direct_paths_bits(mode):
    """Inputs or results that are not the carrier dtype pass through chunk buffers;
    each chunk must draw the random numbers of its own elements."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(3 * CHUNK + 5) * 2.0 ** rng.integers(-10, 10, 3 * CHUNK + 5))
    x = x.astype(np.float16).astype(np.float32)  # values every dtype below holds
    direct = rp.round(x, "e5m2", mode, rng=4)
    for other in (x.astype(np.float16), x.astype(">f4"), x.astype(np.float64)):
        got = rp.round(other, "e5m2", mode, rng=4)
        np.testing.assert_array_equal(bits(got.astype(np.float32)), bits(direct), err_msg=str(other.dtype))


@pytest.mark.parametrize("fmt", ["e5m2", "bfloat16", "mxfp8_e4m3"])
def test_big_endian_out_including_x_itself(fmt):
    """out= of the result dtype in the other byte order is taken, as NumPy's ufuncs
    take it, also as x itself; another dtype is still refused, named."""
    x = np.random.default_rng(5).standard_normal(2 * CHUNK + 3).astype(np.float32)
    expected, expected_stats = rp.round(x, fmt, "stochastic", rng=2, stats=True)
    swapped = x.astype(">f4")
    out = np.empty_like(swapped)
    assert rp.round(swapped, fmt, "stochastic", rng=2, out=out) is out
    np.testing.assert_array_equal(bits(out.astype(np.float32)), bits(expected))
    rounded, stats = rp.round(swapped, fmt, "stochastic", rng=2, out=swapped, stats=True)
    assert rounded is swapped and stats == expected_stats
    np.testing.assert_array_equal(bits(swapped.astype(np.float32)), bits(expected))
    with pytest.raises(TypeError, match="out must have the result dtype float32, got >f8"):
        rp.round(x, fmt, out=np.empty(x.shape, ">f8"))


@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_buffered_paths_on_threads_and_in_place(mode, small_ranges):
    """Above the parallel threshold each thread converts through its own buffers;
    rounding in place (out=x) also goes through a buffer."""
    rng = np.random.default_rng(3)
    size = 4 * small_ranges.PARALLEL_THRESHOLD + 7
    x = (rng.standard_normal(size) * 2.0 ** rng.integers(-10, 10, size)).astype(np.float16)
    expected = rp.round(x.astype(np.float32), "e5m2", mode, rng=6)
    for threads in (1, 2):
        previous = numba.get_num_threads()
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            got = rp.round(x, "e5m2", mode, rng=6)
        finally:
            numba.set_num_threads(previous)
        np.testing.assert_array_equal(bits(got.astype(np.float32)), bits(expected), err_msg=f"{threads} threads")
    in_place = x.astype(np.float32)
    assert rp.round(in_place, "e5m2", mode, rng=6, out=in_place) is in_place
    np.testing.assert_array_equal(bits(in_place), bits(expected))


def test_thread_count_does_not_change_bits():
    """NUMBA_NUM_THREADS=1 and =2, in fresh processes, on an array split in chunks."""
    script = (
        "import sys, numpy as np, rpfloat as rp\n"
        "from rpfloat._kernels.cpu import backend\n"
        "backend.PARALLEL_THRESHOLD, backend.RANGE_MIN = 1 << 16, 1 << 12\n"
        "x = np.linspace(-3, 3, 2 * 65536 + 12345, dtype=np.float32)\n"
        "y = rp.round(x, 'e4m3', 'stochastic', rng=42)\n"
        "sys.stdout.write(y.view(np.uint32).tobytes().hex()[:0] + str(hash(y.tobytes())))\n"
    )
    outputs = []
    for threads in ("1", "2"):
        env = dict(os.environ, NUMBA_NUM_THREADS=threads, PYTHONHASHSEED="0")
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and outputs[0]


# -- no recompilation -----------------------------------------------------------


def test_thirty_formats_compile_nothing_new():
    x = sample(64)
    for mode in ("nearest", "stochastic", "odd"):  # each mode's kernels, compiled once
        # float6: the split kernel from 0 up (stochastic); from float64, e4m3 and float6 take the
        # halves kernel from 0 up, bfloat16 the halves kernel
        for name in ("e4m3", "float6_e3m2fn", "bfloat16"):
            rp.round(x, name, mode)
            rp.round(x.astype(np.float64), name, mode)
    before = [list(kernel.overloads) for kernel in KERNELS]
    formats = [rp.FloatFormat(e, m) for e in range(2, 8) for m in range(1, 6)]
    assert len(formats) == 30
    for fmt in formats:
        for mode in ("nearest", "stochastic", "odd"):
            rp.round(x, fmt, mode, rng=0)
            rp.round(x.astype(np.float64), fmt, mode, rng=0)
    assert [list(kernel.overloads) for kernel in KERNELS] == before
    for kernel in KERNELS:
        assert set(kernel.overloads) <= {signature.args for signature in SIGNATURES}


def test_a_second_process_loads_every_kernel_from_the_cache():
    """What one process compiled, the next loads from numba's cache (``cache=True``):
    a fresh process rounding in every kernel that `test_thirty_formats_compile_nothing_new`
    warms up misses the cache nowhere. (A closure variable that is not a plain
    value, such as a dispatcher, makes a kernel's cache key differ in every
    process: each then compiled it again, a cold start of 3 s instead of 0.6.)
    The first process may compile what the cache lacks (tens of seconds on a
    cold cache); this process has compiled the same kernels already."""
    script = (
        "import numpy as np, rpfloat as rp\n"
        "from rpfloat._kernels.cpu.table import KERNELS\n"
        "x = np.linspace(-3, 3, 64, dtype=np.float32)\n"
        "for mode in ('nearest', 'stochastic', 'odd'):\n"
        "    for name in ('e4m3', 'float6_e3m2fn', 'bfloat16'):\n"
        "        rp.round(x, name, mode)\n"
        "        rp.round(x.astype(np.float64), name, mode)\n"
        "print(sum(sum(kernel.stats.cache_misses.values()) for kernel in KERNELS))\n"
        "print([sum(kernel.stats.cache_hits.values()) for kernel in KERNELS])\n"
    )
    outputs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
               for _ in range(2)]
    misses, hits = outputs[1].splitlines()
    assert misses == "0"
    hits = dict(zip(KERNELS, ast.literal_eval(hits)))
    # the kernels came from the cache: among them both float64 stochastic ones
    assert hits[round_stochastic_halves] > 0 and hits[round_stochastic_halves_from_zero] > 0
    assert sum(hits.values()) >= 8


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
@pytest.mark.parametrize("fmt", ["e4m3", "bfloat16", "mxfp4"])
def test_ndarray_subclasses_round_as_plain_arrays(fmt, mode):
    """np.matrix stays 2-D under reshape(-1), which the kernels' flat views need: it
    gave unset memory (and a crash in stochastic rounding); subclasses are now
    rounded as plain ndarrays, with plain ndarray results."""
    values = np.array([[1.1, 2.2, 3.3, -0.7]] * 8).reshape(1, 32)
    matrix = np.matrix(values)
    got = rp.round(matrix, fmt, mode, rng=3)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, rp.round(values, fmt, mode, rng=3))
    if fmt != "mxfp4":
        np.testing.assert_array_equal(rp.encode(matrix, fmt), rp.encode(values, fmt))


def test_encode_of_a_scalar_is_a_scalar_and_refuses_round_only_keywords():
    code = rp.encode(1.0, "e4m3")
    assert isinstance(code, np.uint8) and code == 56
    assert isinstance(rp.encode(np.float32(-2.0), "bfloat16"), np.uint16)
    assert rp.encode([1.0], "e4m3").shape == (1,)
    for keyword in ({"stats": True}, {"out": np.empty(2)}):
        with pytest.raises(TypeError, match="encode got unexpected keyword arguments"):
            rp.encode([1.0, 2.0], "e4m3", **keyword)


def test_ml_dtypes_arrays_are_taken_as_float32():
    import ml_dtypes  # the test extra installs it
    values = np.array([0.1, -1.7, 300.0, 1e-5, np.inf, np.nan], np.float32)
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "int4"):
        narrow = values[np.isfinite(values) | (name in ("bfloat16", "float8_e5m2"))].astype(getattr(ml_dtypes, name))
        wide = narrow.astype(np.float32)
        for fmt, mode in (("e4m3", "nearest"), ("mxfp4", "stochastic"), ("q4.4", "up")):
            got = rp.round(narrow, fmt, mode, rng=1)
            assert got.dtype == np.result_type(np.float32, rp.format(fmt).carrier)
            np.testing.assert_array_equal(got, rp.round(wide, fmt, mode, rng=1))
        np.testing.assert_array_equal(rp.encode(narrow, "e4m3"), rp.encode(wide, "e4m3"))


def test_masked_arrays_are_refused():
    with pytest.raises(TypeError, match="x is a masked array"):
        rp.round(np.ma.masked_array([1.0, 2.0], mask=[False, True]), "e4m3")


def test_swapped_arguments_say_the_data_come_first():
    x = np.ones(3)
    for call in (lambda: rp.round("bfloat16", x), lambda: rp.round(rp.format("e4m3"), x)):
        with pytest.raises(TypeError, match="x is the format .*the data come first"):
            call()
    for call in (lambda: rp.encode("e4m3", x), lambda: rp.sum("float16", x)):
        with pytest.raises(TypeError, match="the data come first"):
            call()
    with pytest.raises(TypeError, match="x must hold real or complex numbers"):  # a string, not a format name
        rp.round("1.0", "bfloat16")


def test_torch_tensors_that_require_grad_point_to_the_torch_adapter():
    import torch  # the test extra installs it
    with pytest.raises(TypeError, match=r"rpfloat.torch.round\(x, fmt\)"):
        rp.round(torch.ones(2, requires_grad=True), "bfloat16")
    assert rp.round(torch.ones(2), "bfloat16").tolist() == [1.0, 1.0]
    # meta and sparse tensors: the message says what is wrong (not the dtype, which is fine)
    with pytest.raises(TypeError, match="x is a torch tensor on device meta"):
        rp.round(torch.empty(3, device="meta"), "bfloat16")
    with pytest.raises(TypeError, match=r"x is a torch tensor of layout torch.sparse_coo: pass x.to_dense\(\)"):
        rp.round(torch.eye(2).to_sparse(), "bfloat16")
    # a conjugate view (NumPy cannot take its lazy conjugate bit) is taken as its values
    conjugate = torch.tensor([1.1 + 2.2j, 3 - 1j], dtype=torch.complex64).conj()
    assert rp.round(conjugate, "bfloat16").tolist() == rp.round(
        np.array([1.1 - 2.2j, 3 + 1j], np.complex64), "bfloat16").tolist()


def test_lists_of_python_ints_and_floats():
    """Python ints beyond int64 beside floats (an object array to NumPy) are
    taken as float64, like ints alone; an int beyond float64's range is a
    ValueError naming x, and other objects stay a TypeError."""
    assert rp.round([2**64, 2.5], "bfloat16").tolist() == [2.0**64, 2.5]
    assert rp.round([2**64 + 2**40, 1], "bfloat16", "up").tolist() == rp.round(
        np.array([2.0**64 + 2.0**40, 1.0]), "bfloat16", "up").tolist()
    # bools and NumPy floats beside them too, as beside ordinary ints
    assert rp.round([True, 2**70], "float64").tolist() == [1.0, 2.0**70]
    assert rp.round([np.float32(1.1), 2**70], "bfloat16").tolist() == rp.round(
        np.array([np.float32(1.1), 2.0**70]), "bfloat16").tolist()
    import ml_dtypes  # the test extra installs it

    # complex numbers make it complex128; ml_dtypes scalars are floats
    mixed = rp.round([1.1j, 2**70, np.complex64(3 + 1j)], "bfloat16")
    assert mixed.dtype == np.complex128
    assert mixed.tolist() == rp.round(np.array([1.1j, 2.0**70, 3 + 1j]), "bfloat16").tolist()
    assert rp.round([ml_dtypes.bfloat16(1.5), 2**70], "bfloat16").tolist() == [1.5, 2.0**70]
    with pytest.raises(ValueError, match="x holds an integer beyond float64's range"):
        rp.round([1j, 2**1100], "bfloat16")
    for beyond in (2**1100, 2**1024 - 2**970):  # (the second rounds up to 2**1024)
        with pytest.raises(ValueError, match="x holds an integer beyond float64's range"):
            rp.round(beyond, "bfloat16")
    for other in ([Fraction(1, 3), 1.0], [np.longdouble(1.5), 2**70]):  # (a long double would be rounded)
        with pytest.raises(TypeError, match="x must hold real or complex numbers"):
            rp.round(other, "bfloat16")


# -- bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [np.array(["1.0"]), np.array([1.0, None], dtype=object), "1.0", np.array(["2020-01-01"], dtype="datetime64[D]")],
)
def test_non_numeric_input_is_a_type_error(x):
    with pytest.raises(TypeError, match="x must hold real or complex numbers"):
        rp.round(x, "bfloat16")


def test_inputs_numpy_refuses_are_errors_naming_x():
    with pytest.raises(ValueError, match="x is not an array of numbers: setting an array element"):
        rp.round([[1.0], [1.0, 2.0]], "bfloat16")
    for codes in ([2**64], [-(2**63) - 1]):
        with pytest.raises(ValueError, match="codes must fit in 64 bits"):
            rp.decode(codes, "float64")
    with pytest.raises(ValueError, match="codes must fit in 64 bits"):
        rp.pack([2**64], 64)


@pytest.mark.parametrize("rng, error", [("abc", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError)])
def test_a_nonsense_rng_is_refused_in_every_mode(rng, error):
    """As rand_bits is: rng does nothing in the deterministic modes, but a value
    that no mode takes is a mistake to report, not to ignore."""
    calls = [lambda: rp.round([1.0], "bfloat16", rng=rng), lambda: rp.round([1.0], "mxfp4", rng=rng),
             lambda: rp.encode([1.0], "bfloat16", rng=rng), lambda: rp.asarray([1.0], "bfloat16", rng=rng),
             lambda: rp.sum([1.0], "bfloat16", rng=rng), lambda: rp.round([1.0], "bfloat16", stats=True, rng=rng)]
    for call in calls:
        with pytest.raises(error, match="rng"):
            call()
    generator = np.random.default_rng(0)
    state = generator.bit_generator.state
    assert rp.round([1.0], "bfloat16", rng=generator)[0] == 1.0 and rp.round([1.0], "bfloat16", rng=np.int64(3))
    assert generator.bit_generator.state == state  # deterministic modes draw nothing


def test_bad_arguments_name_themselves():
    x = sample(4)
    with pytest.raises(ValueError, match="unknown rounding mode 'nearest_up'.*'nearest'"):
        rp.round(x, "e4m3", "nearest_up")
    for other_tools_name, ours in [("ru", "up"), ("RD", "down"), ("floor", "down"), ("trunc", "toward_zero")]:
        with pytest.raises(ValueError, match=f"unknown rounding mode '{other_tools_name}' .did you mean '{ours}'"):
            rp.round(x, "e4m3", other_tools_name)
    import torch  # the test extra installs it
    with pytest.raises(TypeError, match="got torch.Generator, which rpfloat.torch's functions take"):
        rp.round(x, "e4m3", "stochastic", rng=torch.Generator())
    with pytest.raises(TypeError, match="mode must be a string"):
        rp.round(x, "e4m3", 3)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        rp.round(x, "not_a_format")
    with pytest.raises(ValueError, match="overflow='inf' is impossible"):
        rp.round(x, "e4m3", overflow="inf")
    with pytest.raises(ValueError, match="overflow='nan' is impossible"):
        rp.round(x, "float4_e2m1fn", overflow="nan")
    with pytest.raises(ValueError, match="overflow for a FloatFormat"):
        rp.round(x, "e4m3", overflow="wrap")
    with pytest.raises(ValueError, match="overflow for a FixedFormat"):
        rp.round(x, "q8.8", overflow="inf")
    with pytest.raises(ValueError, match="rand_bits is for the stochastic modes"):
        rp.round(x, "e4m3", "nearest", rand_bits=8)
    with pytest.raises(ValueError, match="rand_bits must be from 1 to 64"):
        rp.round(x, "e4m3", "stochastic", rand_bits=0)
    with pytest.raises(TypeError, match="rng must be None, an int seed"):
        rp.round(x, "e4m3", "stochastic", rng=1.5)
    with pytest.raises(ValueError, match="rng seed must be a non-negative int"):
        rp.round(x, "e4m3", "stochastic", rng=-1)


def test_cached_validation_tells_equal_values_of_other_types_apart():
    """Validation is cached per argument set: True, 1.0 and 0 must not reuse the
    entries of 1, 1 and Mode.NEAREST (they compare and hash equal)."""
    x = np.ones(3, np.float32)
    rp.round(x, "bfloat16", "stochastic", rng=1, rand_bits=1)
    rp.round(x, "bfloat16", rp.Mode.NEAREST)
    with pytest.raises(TypeError, match="rand_bits"):
        rp.round(x, "bfloat16", "stochastic", rng=1, rand_bits=True)
    with pytest.raises(TypeError, match="rand_bits"):
        rp.round(x, "bfloat16", "stochastic", rng=1, rand_bits=1.0)
    with pytest.raises(TypeError, match="mode"):
        rp.round(x, "bfloat16", 0)


@pytest.mark.parametrize("arguments", [
    dict(overflow=5), dict(mode="stochastic", rng=1, rand_bits=2.0), dict(mode=3), dict(overflow=["inf"]),
])
def test_a_refused_argument_raises_one_error_not_a_chain(arguments):
    """A TypeError of validation is raised once, as it is: not caught as if the
    arguments were unhashable and raised again while handling it."""
    with pytest.raises(TypeError) as caught:
        rp.round(np.ones(2, np.float32), "e4m3", **arguments)
    assert caught.value.__context__ is None


def test_impossible_policy_raises_before_looking_at_data():
    with pytest.raises(ValueError, match="overflow='inf' is impossible"):
        rp.round(np.array([], dtype=np.float32), "e4m3", "toward_zero", overflow="inf")


# -- encode / decode -------------------------------------------------------------


def test_fixed_point_codes_are_twos_complement():
    codes = rp.encode([-1.0, -0.0625, 0.0, 0.5, 7.9375, 100.0], "q4.4")
    assert codes.dtype == np.uint8
    np.testing.assert_array_equal(codes, [0xF0, 0xFF, 0x00, 0x08, 0x7F, 0x7F])
    np.testing.assert_array_equal(rp.decode(codes, "q4.4"), [-1.0, -0.0625, 0.0, 0.5, 7.9375, 7.9375])
    assert rp.encode([3.0], "uq2.1").tolist() == [6]


@pytest.mark.parametrize("fmt", [rp.FixedFormat(4, 4), rp.FixedFormat(3, 2), rp.FixedFormat(8, 8),
                                 rp.FixedFormat(8, 0), rp.format("uq4.4")], ids=repr)
def test_fixed_point_decode_reads_every_code(fmt):
    """Every code of a fixed-point format decodes to its two's complement
    integer (unsigned formats: the code itself) times 2**-frac_bits, whether
    the codes come in their own dtype, byte-swapped or as int64."""
    codes = np.arange(2**fmt.bits, dtype=np.int64)
    signed = fmt.min < 0
    integers = np.where(signed & (codes >= 2 ** (fmt.bits - 1)), codes - 2**fmt.bits, codes)
    want = [math.ldexp(int(k), -fmt.frac_bits) for k in integers]
    own = codes.astype(rp.encode([0.0], fmt).dtype)
    for given in (own, own.astype(own.dtype.newbyteorder()), codes):
        np.testing.assert_array_equal(rp.decode(given, fmt), want)
        assert not np.shares_memory(rp.decode(given, fmt), given)


def test_encode_nan_without_nan_code_is_a_value_error():
    with pytest.raises(ValueError, match="has no NaN code"):
        rp.encode([np.nan], "float4_e2m1fn")
    with pytest.raises(ValueError, match="has no NaN code"):
        rp.encode([np.nan], "q8.8")
    with pytest.raises(ValueError, match="has no NaN code.*overflow='wrap' makes NaN"):  # inf wraps to NaN
        rp.encode([np.inf], "q4.4", overflow="wrap")
    assert rp.encode([np.inf], "q4.4").tolist() == [127]  # saturated to max


def test_decode_rejects_codes_out_of_range_and_non_integers():
    with pytest.raises(ValueError, match="codes must lie in"):
        rp.decode([256], "e4m3")
    with pytest.raises(TypeError, match="codes must be integers"):
        rp.decode([1.0], "e4m3")
    with pytest.raises(TypeError, match="decode it with its ScaledFormat"):
        rp.decode(rp.encode(np.ones(32, np.float32), "mxfp4"), "e2m1")


def test_decode_takes_lists_of_python_ints_exactly():
    """float64 codes with the sign bit set beside others (NumPy would hold the
    list as float64, losing bits) and an empty list."""
    ones = rp.decode([0x3FF0000000000000, 0xBFF0000000000000], "float64")
    assert ones.tolist() == [1.0, -1.0]
    assert rp.decode([[0x3FF0000000000001], [0xBFF0000000000001]], "float64").ravel().tolist() == [
        1.0 + 2.0**-52, -1.0 - 2.0**-52]
    empty = rp.decode([], "e4m3")
    assert empty.shape == (0,) and empty.dtype == np.float16


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float32", "tf32", "q8.8", "uq4.12", "e3m2"])
def test_decode_inverts_encode(name):
    x = sample(2000, np.float64)
    rounded = rp.round(x, name)
    decoded = rp.decode(rp.encode(x, name), name)
    finite = ~np.isnan(rounded)
    np.testing.assert_array_equal(decoded.astype(np.float64)[finite], rounded[finite])


def test_ranges_go_once_each_to_whichever_thread_is_free(small_ranges, monkeypatch):
    """A large array is cut into ranges that the calling thread and the pool take
    in turn: every range is rounded exactly once, and where the pool's thread
    starts late the calling thread rounds them all (threads never wait on it)."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs NUMBA_NUM_THREADS >= 2")
    size = 8 * small_ranges.PARALLEL_THRESHOLD + 5
    x = np.random.default_rng(4).standard_normal(size).astype(np.float32)
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    expected = rp.round(x, "e4m3", "stochastic", rng=9)
    done = []  # (thread, start, stop) of every range rounded
    round_range = small_ranges._round_range

    def recording(*args):
        done.append((threading.get_ident(), args[-2], args[-1]))
        round_range(*args)

    monkeypatch.setattr(small_ranges, "_round_range", recording)
    numba.set_num_threads(2)
    try:
        for late in (False, True):
            if late:  # the pool's thread starts only once the caller has finished
                pool = small_ranges._pool
                monkeypatch.setattr(pool, "submit", lambda fn: concurrent.futures.ThreadPoolExecutor(1).submit(
                    lambda: (time.sleep(0.5), fn())[1]))
            done.clear()
            out = np.full(size, np.nan, np.float32)
            rp.round(x, "e4m3", "stochastic", rng=9, out=out)
            np.testing.assert_array_equal(bits(out), bits(expected))
            spans = sorted((start, stop) for _, start, stop in done)
            assert len(spans) > 2 and spans[0][0] == 0 and spans[-1][1] == size
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "ranges must tile the array once"
            if late:
                assert {thread for thread, _, _ in done} == {threading.get_ident()}
    finally:
        numba.set_num_threads(previous)


def test_a_busy_pool_does_not_hold_up_a_call(small_ranges):
    """While the pool's thread is busy (another user thread's call), a call rounds
    all its ranges itself and returns, rather than wait for its queued task."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs NUMBA_NUM_THREADS >= 2")
    x = np.random.default_rng(5).standard_normal(4 * small_ranges.PARALLEL_THRESHOLD + 3).astype(np.float32)
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    expected = rp.round(x, "e4m3", "stochastic", rng=2)
    numba.set_num_threads(2)
    try:
        rp.round(x, "e4m3")  # the pool exists
        release = threading.Event()
        blocker = small_ranges._pool.submit(release.wait)  # its one thread, busy until released
        got = {}
        caller = threading.Thread(target=lambda: got.update(y=rp.round(x, "e4m3", "stochastic", rng=2)))
        caller.start()  # numba's default thread count there: NUMBA_NUM_THREADS
        caller.join(timeout=60)
        returned = not caller.is_alive()
        release.set()
        blocker.result()
        caller.join()
    finally:
        numba.set_num_threads(previous)
    assert returned, "the call waited for the busy pool"
    np.testing.assert_array_equal(bits(got["y"]), bits(expected))
