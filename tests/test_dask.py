"""rpfloat.dask: lazy chunked rounding with the bits of the NumPy path, whatever the
chunks, the mode and the scheduler (a real two-process LocalCluster included)."""
import copy
import subprocess
import sys

import numpy as np
import pytest

import dask  # the test extra installs dask[array,distributed]: missing, they fail here rather than skip
import dask.array as da
import distributed

import rpfloat as rp
import rpfloat.dask as rpd
from rpfloat import accumulate, rounding, scaling
from stats_bounds import assert_binomial

MODES = ["nearest", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic", "stochastic_equal"]
SHAPE = (37, 53)
# three chunkings of SHAPE: along axis 0 only (each chunk one contiguous range of the
# global C order), along the last axis (no chunk is), and ragged along both
CHUNKINGS = {
    "rows": ((10, 10, 10, 7), (53,)),
    "last-axis": ((37,), (20, 20, 13)),
    "ragged": ((5, 17, 15), (1, 30, 22)),
}
SEED = 20250817


def _data(shape=SHAPE, dtype=np.float32, seed=0):
    """Normal numbers of several binades, with the values that kernels treat apart."""
    generator = np.random.default_rng(seed)
    values = generator.standard_normal(shape) * np.exp2(generator.integers(-12, 12, shape))
    flat = values.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e6, -1e6, 1e-40, -3e-42, 1.0625, 1.03125, 448.0, 464.0]
    flat[:len(specials)] = specials
    with np.errstate(over="ignore"):
        return values.astype(dtype)


def _kwargs(mode):
    return {"rng": SEED} if mode.startswith("stochastic") else {}


def assert_same_bits(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes(), f"{np.sum(actual != expected)} elements differ"


def _compute(array):
    return array.compute(scheduler="sync")


# -- round, encode, decode: the NumPy bits for every chunking and mode ---------------------


@pytest.mark.parametrize("fmt", ["e4m3", "bfloat16", "q3.4"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_round_gives_numpy_bits(chunking, mode, fmt):
    x = _data()
    lazy = rpd.round(da.from_array(x, chunks=CHUNKINGS[chunking]), fmt, mode, **_kwargs(mode))
    assert_same_bits(_compute(lazy), rp.round(x, fmt, mode, **_kwargs(mode)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_encode_and_decode_give_numpy_bits(chunking, mode):
    x = _data()
    codes = rpd.encode(da.from_array(x, chunks=CHUNKINGS[chunking]), "e5m2", mode, **_kwargs(mode))
    expected = rp.encode(x, "e5m2", mode, **_kwargs(mode))
    assert_same_bits(_compute(codes), expected)
    assert_same_bits(_compute(rpd.decode(codes, "e5m2")), rp.decode(expected, "e5m2"))


@pytest.mark.parametrize("chunks", [(4, 5, 6), (4, 2, 6), (1, 5, 3), (3, 2, 4), (2, 5, 6)])
def test_three_dimensional_chunks_draw_by_global_flat_index(chunks):
    x = _data((4, 5, 6), np.float64, seed=1)
    lazy = rpd.round(da.from_array(x, chunks=chunks), "e4m3", "stochastic", rng=3, rand_bits=5)
    assert_same_bits(_compute(lazy), rp.round(x, "e4m3", "stochastic", rng=3, rand_bits=5))


def test_flat_index_is_the_dask_arrays_c_order_whatever_the_memory_layout():
    x = _data()
    transposed = np.asfortranarray(x).T  # the dask array's C order is not the memory's
    lazy = rpd.round(da.from_array(transposed, chunks=(20, 11)), "e4m3", "stochastic", rng=1)
    assert_same_bits(_compute(lazy), rp.round(np.ascontiguousarray(transposed), "e4m3", "stochastic", rng=1))


@pytest.mark.parametrize("chunks", [(6, 7), (2, 3), (5, 1)])
def test_complex_and_integer_input(chunks):
    generator = np.random.default_rng(2)
    z = (generator.standard_normal((6, 7)) + 1j * generator.standard_normal((6, 7))).astype(np.complex64)
    assert_same_bits(_compute(rpd.round(da.from_array(z, chunks=chunks), "e4m3", "stochastic", rng=4)),
                     rp.round(z, "e4m3", "stochastic", rng=4))
    k = np.arange(-21, 21).reshape(6, 7)
    assert_same_bits(_compute(rpd.round(da.from_array(k, chunks=chunks), "e2m1", "stochastic_equal", rng=4)),
                     rp.round(k, "e2m1", "stochastic_equal", rng=4))


@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_ml_dtypes_chunks_are_float32_data(mode):
    """ml_dtypes arrays (bfloat16, int4) are float32 data, as for rp.round: the
    lazy dtype is the computed one, and formats with a float16 carrier work
    (they failed at graph build, or gave float16 meta and crashed at compute)."""
    import ml_dtypes
    x = np.array([[0.1, 1.3], [-2.7, 5.0]], dtype=ml_dtypes.bfloat16)
    y = np.array([[1, -3], [7, 2]], dtype=ml_dtypes.int4)
    for data in (x, y):
        lazy = rpd.round(da.from_array(data, chunks=(2, 1)), "e4m3", mode, rng=3)
        assert lazy.dtype == np.float32
        assert_same_bits(lazy.compute(), rp.round(data, "e4m3", mode, rng=3))
        codes = rpd.encode(da.from_array(data, chunks=(1, 2)), "e4m3", mode, rng=3)
        assert np.array_equal(codes.compute(), rp.encode(data, "e4m3", mode, rng=3))


def test_masked_chunks_and_formats_without_codes_fail_at_graph_build():
    masked = np.ma.masked_array(np.arange(6.0), mask=[0, 1, 0, 0, 1, 0])
    with pytest.raises(TypeError, match="x is a masked array"):
        rpd.round(da.ma.masked_array(da.from_array(masked.data, chunks=3), mask=masked.mask), "e4m3")
    with pytest.raises(ValueError, match="fmt has no encoding"):  # before the bad mode, as rp.encode says
        rpd.encode(da.ones(3), rp.FloatFormat(None, 4), mode="sideways")


def test_zero_dimensional_and_empty_arrays():
    assert_same_bits(_compute(rpd.round(da.from_array(np.array(1 / 3)), "e4m3", "stochastic", rng=2)),
                     rp.round(np.array(1 / 3), "e4m3", "stochastic", rng=2))
    empty = np.empty((0, 5), np.float32)
    assert_same_bits(_compute(rpd.round(da.from_array(empty, chunks=(1, 2)), "e4m3", "stochastic", rng=2)),
                     rp.round(empty, "e4m3", "stochastic", rng=2))


def test_overflow_and_rand_bits_pass_through():
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS["ragged"])
    assert_same_bits(_compute(rpd.round(d, "e5m2", overflow="saturate")), rp.round(x, "e5m2", overflow="saturate"))
    assert_same_bits(_compute(rpd.round(d, "e4m3", "stochastic", rng=5, rand_bits=3)),
                     rp.round(x, "e4m3", "stochastic", rng=5, rand_bits=3))
    assert_same_bits(_compute(rpd.encode(d, "e4m3", "stochastic", rng=5, rand_bits=3, overflow="saturate")),
                     rp.encode(x, "e4m3", "stochastic", rng=5, rand_bits=3, overflow="saturate"))


def test_another_seed_gives_other_bits():
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS["ragged"])
    assert not np.array_equal(_compute(rpd.round(d, "e4m3", "stochastic", rng=1)),
                              _compute(rpd.round(d, "e4m3", "stochastic", rng=2)), equal_nan=True)


# -- rng ------------------------------------------------------------------------------------


def test_seed_sequence_gives_numpy_bits():
    x = _data()
    lazy = rpd.round(da.from_array(x, chunks=CHUNKINGS["last-axis"]), "e4m3", "stochastic",
                     rng=np.random.SeedSequence(9))
    assert_same_bits(_compute(lazy), rp.round(x, "e4m3", "stochastic", rng=np.random.SeedSequence(9)))


def test_generator_gives_one_seed_drawn_at_build_time():
    x = _data()
    generator = np.random.default_rng(6)
    replay = copy.deepcopy(generator)
    lazy = rpd.round(da.from_array(x, chunks=CHUNKINGS["ragged"]), "e4m3", "stochastic", rng=generator)
    seed = int(replay.integers(0, 2**64, dtype=np.uint64))
    assert generator.bit_generator.state == replay.bit_generator.state  # advanced by exactly that one draw
    assert_same_bits(_compute(lazy), rp.round(x, "e4m3", "stochastic", rng=seed))
    assert_same_bits(_compute(lazy), _compute(lazy))  # the graph holds its seed


def test_rng_none_draws_one_stream_per_graph():
    x = np.full((40, 30), 1.03125, np.float32)  # a quarter of the way between two e4m3 values
    d = da.from_array(x, chunks=(7, 11))
    lazy = rpd.round(d, "e4m3", "stochastic")
    first = _compute(lazy)
    assert_same_bits(dask.compute(lazy, scheduler="threads")[0], first)
    assert not np.array_equal(_compute(rpd.round(d, "e4m3", "stochastic")), first)
    # every element rounds up with probability 1/4, whichever chunk holds it
    assert_binomial(int(np.sum(first == np.float32(1.125))), first.size, 0.25, 1e-9, "rng=None")
    assert np.all((first == np.float32(1.0)) | (first == np.float32(1.125)))


def test_deterministic_modes_ignore_rng():
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS["ragged"])
    assert_same_bits(_compute(rpd.round(d, "e4m3", "up", rng=np.random.default_rng(1))), rp.round(x, "e4m3", "up"))


# -- laziness and graph metadata -------------------------------------------------------


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the calls of every entry into rpfloat's kernels that rpfloat.dask makes."""
    calls = []

    def counting(module, name):
        original = getattr(module, name)

        def counted(*args, **kwargs):
            calls.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for module, name in [(rounding, "round_chunk"), (rounding, "decode"), (accumulate, "sum"),
                         (scaling, "run_blocks")]:
        counting(module, name)
    return calls


def test_building_graphs_calls_no_kernel(kernel_calls):
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS["ragged"])
    mx = rp.ScaledFormat("e4m3", block_size=8)
    graphs = [
        rpd.round(d, "e4m3"),
        rpd.round(d, "e4m3", "stochastic", rng=1),
        rpd.round(d, mx, "stochastic", rng=1),
        rpd.encode(d, "e4m3", "stochastic", rng=1),
        rpd.decode(rpd.encode(d, "e4m3"), "e4m3"),
        rpd.sum(d, "bfloat16", mode="stochastic", rng=1),
        rpd.sum(d, "bfloat16", axis=0),
        *rpd.encode(d, mx),
        rpd.decode(rpd.encode(d, mx), mx),
    ]
    assert all(isinstance(graph, da.Array) for graph in graphs if graph is not None)
    assert kernel_calls == []
    dask.compute(*[graph for graph in graphs if graph is not None], scheduler="sync")
    assert {"round_chunk", "decode", "sum", "run_blocks"} <= set(kernel_calls)


def test_graph_metadata_has_dtype_and_chunks():
    x16 = da.from_array(np.ones((6, 10), np.float16), chunks=(4, 3))
    rounded = rpd.round(x16, "bfloat16")
    assert rounded.dtype == rounding.result_dtype(np.float16, rp.format("bfloat16")) == np.float32
    assert rounded.chunks == x16.chunks
    codes = rpd.encode(x16, "e4m3")
    assert codes.dtype == np.uint8 and codes.chunks == x16.chunks
    wide_codes = rpd.encode(x16, "bfloat16")
    assert wide_codes.dtype == np.uint16
    values = rpd.decode(codes, "e4m3")
    assert values.dtype == np.float16 and values.chunks == x16.chunks
    for array in (rounded, codes, values):
        assert _compute(array).dtype == array.dtype
    assert rpd.sum(x16, "e4m3", axis=1).chunks == ((4, 2),)


# -- scaled formats ----------------------------------------------------------------------


SCALED = {
    "mx-last-axis": rp.ScaledFormat("e4m3", block_size=8),
    "nvfp4-like-axis-0": rp.ScaledFormat("e2m1", block_size=16, axis=0, scale_format="e4m3"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("name", list(SCALED))
def test_scaled_round_and_encode_give_numpy_bits(name, chunking, mode):
    fmt = SCALED[name]
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS[chunking])
    lazy = rpd.round(d, fmt, mode, **_kwargs(mode))
    axis = fmt.axis % x.ndim
    assert all(np.cumsum(lazy.chunks[axis])[:-1] % fmt.block_size == 0)  # no block straddles two chunks
    assert_same_bits(_compute(lazy), rp.round(x, fmt, mode, **_kwargs(mode)))
    codes = rpd.encode(d, fmt, mode, **_kwargs(mode))
    expected = rp.encode(x, fmt, mode, **_kwargs(mode))
    assert_same_bits(_compute(codes.elements), expected.elements)
    assert_same_bits(_compute(codes.scales), expected.scales)
    assert codes.tensor_scale is None
    assert_same_bits(_compute(rpd.decode(codes, fmt)), rp.decode(expected, fmt))


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", rp.ScaledFormat("e4m3", scale_format="e4m3", tensor_scale=True)])
def test_scaled_codes_of_a_0d_array(fmt):
    """A 0-d dask array's codes (its .blocks gave a broken key for the scales)."""
    x = np.array(1.7)
    codes = rpd.encode(da.from_array(x), fmt)
    expected = rp.encode(x, fmt)
    computed = dask.compute(codes)[0]
    for part, reference in zip(computed, expected):
        assert (part is None) == (reference is None)
        if part is not None:
            assert_same_bits(np.asarray(part), np.asarray(reference))
    assert_same_bits(np.asarray(_compute(rpd.decode(codes, fmt))), np.asarray(rp.decode(expected, fmt)))


def test_scaled_codes_with_an_element_format_say_so():
    codes = rpd.encode(da.from_array(_data(), chunks=(2, 16)), "mxfp4")
    with pytest.raises(TypeError, match="codes is a ScaledCodes: decode it with its ScaledFormat"):
        rpd.decode(codes, "e2m1")


def test_scaled_encode_runs_each_chunk_once(monkeypatch):
    """The element and scale codes of a chunk come from one task, computed once
    when both are computed together; the graph grows by a few tasks per chunk."""
    fmt = SCALED["mx-last-axis"]
    x = _data((12, 32))
    d = da.from_array(x, chunks=(3, 16))
    calls = []
    encode_chunk = rpd._encode_scaled_chunk
    monkeypatch.setattr(rpd, "_encode_scaled_chunk", lambda *args, **kwargs: calls.append(1) or encode_chunk(
        *args, **kwargs))
    codes = rpd.encode(d, fmt, "stochastic", rng=4)
    assert len(dict(codes.elements.__dask_graph__())) <= 3 * d.npartitions + len(dict(d.__dask_graph__()))
    elements, scales = dask.compute(codes.elements, codes.scales, scheduler="synchronous")
    assert len(calls) == d.npartitions
    expected = rp.encode(x, fmt, "stochastic", rng=4)
    assert_same_bits(elements, expected.elements)
    assert_same_bits(scales, expected.scales)


def test_pack_of_dask_scaled_codes_encodes_each_chunk_once(monkeypatch):
    """rp.pack computes rpd.encode's element and scale codes together: each
    chunk rounded once, the bytes those of packing NumPy's codes."""
    fmt = rp.format("mxfp4")
    x = _data((12, 64))
    calls = []
    encode_chunk = rpd._encode_scaled_chunk
    monkeypatch.setattr(rpd, "_encode_scaled_chunk", lambda *args, **kwargs: calls.append(1) or encode_chunk(
        *args, **kwargs))
    d = da.from_array(x, chunks=(3, 32))
    packed = rp.pack(rpd.encode(d, fmt, "stochastic", rng=4), fmt)
    assert len(calls) == d.npartitions
    expected = rp.pack(rp.encode(x, fmt, "stochastic", rng=4), fmt)
    assert_same_bits(packed.elements, expected.elements)
    assert_same_bits(packed.scales, expected.scales)
    assert packed.shape == expected.shape and packed.scales_shape == expected.scales_shape


def test_scaled_chunk_boundaries_move_to_block_boundaries():
    x = da.from_array(_data(), chunks=((37,), (20, 20, 13)))
    assert rpd.round(x, SCALED["mx-last-axis"]).chunks == ((37,), (24, 16, 13))
    # stochastic blocks along axis 0: a chunk's contiguous runs must hold whole blocks, so
    # whole rows, in pieces of whole blocks that keep a chunk near the input's largest (37 x 20)
    assert rpd.round(x, SCALED["nvfp4-like-axis-0"], "stochastic", rng=1).chunks == ((16, 16, 5), (53,))
    aligned = da.from_array(_data(), chunks=(16, 8))
    assert rpd.round(aligned, SCALED["mx-last-axis"], "stochastic", rng=1).chunks == aligned.chunks


def test_stochastic_blocks_along_axis_0_keep_chunks_small():
    """Whole trailing axes would make chunks of (4096, 4096) into (4096, 100_000),
    24 times the memory: the blocked axis shrinks to whole blocks instead (lazy:
    nothing is computed), and the bits stay those of rp.round."""
    fmt = rp.ScaledFormat("e2m1", block_size=32, axis=0)
    big = da.zeros((200_000, 100_000), chunks=(4096, 4096), dtype=np.float32)
    chunks = rpd.round(big, fmt, "stochastic", rng=0).chunks
    assert set(chunks[0][:-1]) == {160} and chunks[1] == (100_000,)
    assert max(chunks[0]) * 100_000 <= 4096 * 4096
    assert rpd.encode(big, fmt, "stochastic", rng=0).elements.chunks == chunks
    x = _data((256, 300))
    lazy = rpd.round(da.from_array(x, chunks=(64, 64)), fmt, "stochastic", rng=3)
    assert lazy.chunks == ((32,) * 8, (300,))  # one row of blocks: the least a chunk can hold
    assert_same_bits(_compute(lazy), rp.round(x, fmt, "stochastic", rng=3))
    deterministic = rpd.round(da.from_array(x, chunks=(64, 64)), fmt, "toward_zero")
    assert deterministic.chunks == ((64,) * 4, (64,) * 4 + (44,))  # nothing to merge


WHOLE_ARRAY_SCALES = [
    rp.ScaledFormat("e4m3"),  # one scale per array
    rp.ScaledFormat("int8", scale_rounding="rceil"),
    rp.ScaledFormat("e2m1", scale_format="e4m3", tensor_scale=True),  # one block scale, a tensor scale
    rp.ScaledFormat("e2m1", block_size=4, scale_format="e4m3", tensor_scale=True),  # NVFP4-like, blocks of 4
    rp.ScaledFormat("e2m1", block_size=4, axis=0, scale_format="e4m3", tensor_scale=True),
]
NAN_WITH_PAYLOAD = np.array(0x7FF8000000000123, np.uint64).view(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [None, NAN_WITH_PAYLOAD, -np.inf])
@pytest.mark.parametrize("fmt", WHOLE_ARRAY_SCALES, ids=repr)
def test_scales_of_the_whole_array_in_chunks(fmt, special, dtype):
    """One scale per array or a tensor scale over many chunks (3-D, chunked along
    every axis): each chunk rounds with the whole array's scale, from a reduction
    of x, so round, encode and decode give NumPy's bits in any mode; a NaN or an
    inf in one chunk makes all of one scale per array NaN (the chunks unchanged)."""
    x = _data((6, 8, 10), dtype)
    x[2, 3] *= 2.0**20  # the largest magnitude in one chunk only
    if special is not None:
        x[5, 7, 9] = special
    d = da.from_array(x, chunks=(4, 3, 7))
    for mode in ("nearest", "stochastic", "toward_zero"):
        lazy = rpd.round(d, fmt, mode, rng=2)
        if fmt.block_size is None:
            assert lazy.chunks == d.chunks
        else:  # blocks kept whole, as for any format with blocks
            assert all(np.cumsum(lazy.chunks[fmt.axis % 3])[:-1] % fmt.block_size == 0)
        expected = rp.round(x, fmt, mode, rng=2)
        assert_same_bits(_compute(lazy), expected)
        if special is not None:
            assert np.isnan(expected).all() if fmt.block_size is None else np.isnan(expected).any()
            continue
        codes, expected = rpd.encode(d, fmt, mode, rng=2), rp.encode(x, fmt, mode, rng=2)
        assert_same_bits(_compute(codes.elements), expected.elements)
        assert_same_bits(_compute(codes.scales), expected.scales)
        if fmt.tensor_scale:
            assert_same_bits(_compute(codes.tensor_scale), np.asarray(expected.tensor_scale))
        # decoding is elementwise once the scales are known: any chunks
        rechunked = (codes.elements.rechunk(3), *codes[1:])
        assert_same_bits(_compute(rpd.decode(rechunked, fmt)), rp.decode(expected, fmt))


def test_scales_of_the_whole_array_of_integers_and_empty_arrays():
    x = np.arange(-50, 50, dtype=np.int32).reshape(10, 10)
    fmt = rp.ScaledFormat("e4m3")
    assert_same_bits(_compute(rpd.round(da.from_array(x, chunks=3), fmt)), rp.round(x, fmt))
    empty = np.zeros((0, 4), np.float32)
    assert_same_bits(_compute(rpd.round(da.from_array(empty, chunks=(0, 2)), fmt)), rp.round(empty, fmt))
    # chunks of size 0 beside others (dask's own max refuses them): the scale of the whole array
    y = (np.random.default_rng(4).standard_normal((3, 4)) * 100).astype(np.float32)
    gappy = da.from_array(y, chunks=(3, 4)).rechunk(((1, 0, 2), (4,)))
    two_level = rp.ScaledFormat("e2m1", block_size=2, scale_format="e4m3", tensor_scale=True)
    for fmt in (rp.ScaledFormat("q8.0", scale_rounding="rceil"), two_level):
        assert_same_bits(_compute(rpd.round(gappy, fmt)), rp.round(y, fmt))
        codes, expected = rpd.encode(gappy, fmt), rp.encode(y, fmt)
        assert_same_bits(_compute(codes.elements), expected.elements)
        assert_same_bits(np.asarray(_compute(codes.scales)), np.asarray(expected.scales))


# -- errors ---------------------------------------------------------------------------


def test_errors_name_the_argument():
    x = da.from_array(_data(), chunks=10)
    with pytest.raises(TypeError, match=r"^x must be a dask.array.Array"):
        rpd.round(_data(), "e4m3")
    with pytest.raises(TypeError, match=r"^codes must be a dask.array.Array"):
        rpd.decode([1, 2], "e4m3")
    with pytest.raises(ValueError, match="mode"):
        rpd.round(x, "e4m3", "sideways")
    with pytest.raises(TypeError, match="rng"):
        rpd.round(x, "e4m3", "stochastic", rng="seed")
    # a bad rng in a deterministic mode too, as rp.round has it, when the graph is built
    for function in (rpd.round, rpd.encode, rpd.sum):
        with pytest.raises(TypeError, match="rng must be None, an int seed"):
            function(x, "e4m3", mode="nearest", rng="seed")
        with pytest.raises(ValueError, match="non-negative"):
            function(x, "e4m3", mode="toward_zero", rng=-1)
    with pytest.raises(TypeError, match="rng must be"):
        rpd.round(x, "mxfp8_e4m3", rng=True)
    with pytest.raises(ValueError, match="rand_bits"):
        rpd.round(x, "e4m3", "nearest", rand_bits=4)
    with pytest.raises(TypeError, match="x must hold real or complex numbers"):
        rpd.round(da.from_array(np.array(["a"]), chunks=1), "e4m3")
    with pytest.raises(TypeError, match="encode takes real numbers"):
        rpd.encode(x.astype(np.complex64), "e4m3")
    with pytest.raises(TypeError, match="codes must be integers"):
        rpd.decode(x, "e4m3")
    with pytest.raises(TypeError, match="unexpected keyword"):
        rpd.encode(x, "e4m3", out=None)
    with pytest.raises(ValueError, match="order"):
        rpd.sum(x, "e4m3", order="random")


def test_import_rpfloat_does_not_import_dask():
    code = "import sys, rpfloat; assert not [m for m in sys.modules if m.split('.')[0] == 'dask'], 'dask imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- sum -----------------------------------------------------------------------------


def _root_key(seed):
    """The key rp.sum draws for an int seed: the first 64-bit word of its SeedSequence."""
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])


def reference_sum(x, chunks, fmt, mode, order, seed, axis=None, rand_bits=None):
    """docs/dask.md's order, written with NumPy slicing: every chunk summed by rp.sum
    (rng: the chunk's C-order index in the chunk grid), then for every result the
    partial sums of the chunks along `axis` (C order) added pairwise, level by level."""
    stochastic = mode.startswith("stochastic")
    bounds = [np.cumsum((0,) + c) for c in chunks]
    grid = tuple(len(c) for c in chunks)
    axes = list(range(x.ndim)) if axis is None else [axis]
    kept = [d for d in range(x.ndim) if d not in axes]
    partials = {}
    for c, index in enumerate(np.ndindex(*grid)):
        block = x[tuple(slice(b[i], b[i + 1]) for b, i in zip(bounds, index))]
        rng = np.random.SeedSequence(_root_key(seed), spawn_key=(0, c)) if stochastic else None
        partials[index] = rp.sum(block, fmt, axis=axis, mode=mode, order=order, rng=rng, rand_bits=rand_bits)
    results = []
    for r, kept_index in enumerate(np.ndindex(*[grid[d] for d in kept])):
        values = []
        for reduced_index in np.ndindex(*[grid[d] for d in axes]):  # C order along the reduced axes
            index = [0] * x.ndim
            for d, i in zip(kept, kept_index):
                index[d] = i
            for d, i in zip(axes, reduced_index):
                index[d] = i
            values.append(np.asarray(partials[tuple(index)]))
        level = 0
        while len(values) > 1:
            rng = np.random.SeedSequence(_root_key(seed), spawn_key=(1, level, r)) if stochastic else None
            half = len(values) // 2
            sums = rp.sum(np.stack([np.stack(values[0:2 * half:2]), np.stack(values[1:2 * half:2])]), fmt, axis=0,
                          mode=mode, rng=rng, rand_bits=rand_bits)
            values = list(np.asarray(sums)) + values[2 * half:]
            level += 1
        results.append(values[0])
    return results[0] if axis is None else np.concatenate(results)


@pytest.mark.parametrize("mode", ["nearest", "up", "odd", "stochastic", "stochastic_equal"])
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("shape, chunks, axis", [
    ((1000,), ((100,) * 9 + (55, 45),), None),
    ((37, 53), CHUNKINGS["ragged"], None),
    ((37, 53), CHUNKINGS["ragged"], 0),
    ((37, 53), CHUNKINGS["ragged"], 1),
], ids=["1-D-ragged", "2-D", "2-D-axis-0", "2-D-axis-1"])
def test_sum_follows_the_documented_order(shape, chunks, axis, order, mode):
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    lazy = rpd.sum(da.from_array(x, chunks=chunks), "bfloat16", axis=axis, mode=mode, order=order, rng=SEED)
    expected = reference_sum(x, chunks, "bfloat16", mode, order, SEED, axis=axis)
    assert_same_bits(_compute(lazy), expected)
    assert lazy.shape == np.shape(expected) and lazy.dtype == np.float32


def test_sum_with_few_random_bits_follows_the_documented_order():
    x = np.random.default_rng(4).standard_normal((37, 53)).astype(np.float32)
    for rand_bits in (1, 6):
        lazy = rpd.sum(da.from_array(x, chunks=CHUNKINGS["ragged"]), "bfloat16", axis=0, mode="stochastic",
                       rng=SEED, rand_bits=rand_bits)
        assert_same_bits(_compute(lazy), reference_sum(x, CHUNKINGS["ragged"], "bfloat16", "stochastic", "sequential",
                                                       SEED, axis=0, rand_bits=rand_bits))
    with pytest.raises(ValueError, match="rand_bits is for the stochastic modes only"):
        rpd.sum(da.from_array(x), "bfloat16", rand_bits=4)


@pytest.mark.parametrize("mode", ["nearest", "nearest_away", "toward_zero", "up", "down", "odd"])
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_sum_of_one_chunk_is_rp_sum(order, mode):
    x = np.random.default_rng(5).standard_normal((30, 40))
    assert_same_bits(_compute(rpd.sum(da.from_array(x), "e5m2", mode=mode, order=order)),
                     rp.sum(x, "e5m2", mode=mode, order=order))
    assert_same_bits(_compute(rpd.sum(da.from_array(x, chunks=(30, 7)), "e5m2", axis=0, mode=mode, order=order)),
                     rp.sum(x, "e5m2", axis=0, mode=mode, order=order))


@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "up", "down", "odd"])
@pytest.mark.parametrize("size", [1, 16, 128])
def test_pairwise_sum_in_power_of_two_chunks_is_one_pairwise_tree(size, mode):
    x = np.random.default_rng(6).standard_normal(1000)
    lazy = rpd.sum(da.from_array(x, chunks=size), "bfloat16", mode=mode, order="pairwise")
    assert_same_bits(_compute(lazy), rp.sum(x, "bfloat16", mode=mode, order="pairwise"))


@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "stochastic"])
@pytest.mark.parametrize("axis", [None, 0, 1, (1, 0)])
def test_sum_keepdims_and_block_k_follow_rp_sum(axis, mode):
    """block_k sums each chunk as rp.sum(block_k=...) does (one chunk: rp.sum's bits);
    keepdims keeps the summed axes with length 1, as np.sum does."""
    x = np.random.default_rng(9).standard_normal((24, 40)).astype(np.float32)
    one_chunk = rpd.sum(da.from_array(x), "bfloat16", axis=axis, mode=mode, rng=SEED, block_k=4)
    chunk_rng = np.random.SeedSequence(_root_key(SEED), spawn_key=(0, 0))  # the one chunk's stream
    assert_same_bits(_compute(one_chunk), rp.sum(x, "bfloat16", axis=axis, mode=mode, rng=chunk_rng, block_k=4))
    assert not np.array_equal(_compute(one_chunk), rp.sum(x, "bfloat16", axis=axis, mode=mode, rng=chunk_rng))
    plain = rpd.sum(da.from_array(x, chunks=(7, 9)), "bfloat16", axis=axis, mode=mode, rng=SEED)
    kept = rpd.sum(da.from_array(x, chunks=(7, 9)), "bfloat16", axis=axis, mode=mode, rng=SEED, keepdims=True)
    assert kept.shape == np.sum(x, axis=axis, keepdims=True).shape
    assert_same_bits(_compute(kept), np.asarray(_compute(plain)).reshape(kept.shape))
    assert rp.sum(da.from_array(x), "bfloat16", axis=axis, keepdims=True).shape == kept.shape


def test_sum_block_k_changes_each_chunk_sum():
    # chunks of 3000 ones: a sequential float16 sum stalls at 2048, blocks of 4 reach 3000
    ones = da.ones(6000, chunks=3000)
    assert float(_compute(rpd.sum(ones, "float16"))) == 4096.0
    assert float(_compute(rpd.sum(ones, "float16", block_k=4))) == 6000.0
    with pytest.raises(ValueError, match="block_k"):
        rpd.sum(ones, "float16", order="pairwise", block_k=4)
    with pytest.raises(TypeError, match="keepdims"):
        rpd.sum(ones, "float16", keepdims=1)
    with pytest.raises(TypeError, match="out"):
        rp.sum(ones, "float16", out=np.zeros(()))


def test_sum_rounds_every_combining_step_exactly():
    # chunk sums 1 and 2**-60: float64 holds 1 + 2**-60 as 1, a rounding of it would
    # give 1; the exact sum rounded up onto float32 is 1 + 2**-23
    x = da.from_array(np.array([1.0, 2.0**-60]), chunks=1)
    assert float(_compute(rpd.sum(x, "float32", mode="up"))) == 1 + 2.0**-23
    assert float(_compute(rpd.sum(x, "float32", mode="down"))) == 1.0
    ones = da.ones(4096, chunks=1000)
    assert float(_compute(rpd.sum(ones, "float16"))) == 4096.0  # 1000 per chunk, then pairwise
    assert float(rp.sum(np.ones(4096), "float16")) == 2048.0


def test_sum_is_the_same_for_every_scheduler():
    x = da.from_array(np.random.default_rng(7).standard_normal((50, 40)), chunks=(9, 13))
    lazy = rpd.sum(x, "e4m3", axis=1, mode="stochastic", rng=3)
    expected = _compute(lazy)
    assert_same_bits(dask.compute(lazy, scheduler="threads", num_workers=4)[0], expected)
    assert_same_bits(dask.compute(rpd.sum(x, "e4m3", axis=1, mode="stochastic", rng=3), scheduler="threads")[0],
                     expected)


def test_empty_sum_is_zero():
    assert_same_bits(_compute(rpd.sum(da.zeros((0,), chunks=5), "e4m3")), rp.sum(np.zeros(0), "e4m3"))
    assert_same_bits(_compute(rpd.sum(da.zeros((0, 4), chunks=2), "e4m3", axis=0)),
                     rp.sum(np.zeros((0, 4)), "e4m3", axis=0))
    # an empty result (a kept axis of length 0), in every mode
    for mode in MODES:
        assert_same_bits(_compute(rpd.sum(da.zeros((4, 0), chunks=2), "e4m3", axis=0, mode=mode, rng=1)),
                         rp.sum(np.zeros((4, 0)), "e4m3", axis=0, mode=mode, rng=1))


def test_one_chunk_sums_the_axes_in_the_order_given():
    """rp.sum takes a tuple of axes in the order given; so does each chunk of rpd.sum,
    and with one chunk the two agree (the order changes the rounded sum here)."""
    x = np.random.default_rng(1).standard_normal((40, 30)).astype(np.float32)
    for axis in [(1, 0), (0, 1), (-1, 0)]:
        assert_same_bits(_compute(rpd.sum(da.from_array(x), "bfloat16", axis=axis)),
                         rp.sum(x, "bfloat16", axis=axis))
    assert rp.sum(x, "bfloat16", axis=(1, 0)) != rp.sum(x, "bfloat16", axis=(0, 1))
    # 3-D, two of three axes reversed, several chunks along the kept one
    y = np.random.default_rng(2).standard_normal((6, 20, 24)).astype(np.float32)
    assert_same_bits(_compute(rpd.sum(da.from_array(y, chunks=(2, -1, -1)), "bfloat16", axis=(2, 1))),
                     rp.sum(y, "bfloat16", axis=(2, 1)))


def test_chunks_of_unknown_size():
    """Boolean indexing leaves chunks of unknown size: the stochastic modes and the
    scaled formats, which need each chunk's place, and sums across such chunks
    refuse at once, naming x; nearest rounding (chunk by chunk) still works."""
    data = np.arange(20.0) / 3
    x = da.from_array(data, chunks=5)
    picked = x[x > 2]
    for call in (lambda: rpd.round(picked, "e4m3", "stochastic", rng=1),
                 lambda: rpd.round(picked, rp.ScaledFormat("e4m3", block_size=4)),
                 lambda: rpd.encode(picked, "e4m3", "stochastic", rng=1),
                 lambda: rpd.sum(picked, "e4m3")):
        with pytest.raises(ValueError, match="x has chunks of unknown size.*compute_chunk_sizes"):
            call()
    assert_same_bits(_compute(rpd.round(picked, "e4m3")), rp.round(data[data > 2], "e4m3"))
    known = picked.compute_chunk_sizes()
    assert_same_bits(_compute(rpd.round(known, "e4m3", "stochastic", rng=1)),
                     rp.round(data[data > 2], "e4m3", "stochastic", rng=1))


# -- a real cluster: two worker processes on the loopback interface ----------------------


@pytest.fixture(scope="module")
def client():
    cluster = client = None
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                           dashboard_address=None, timeout="60s")
        client = distributed.Client(cluster, timeout="60s")
        client.wait_for_workers(2, timeout=60)
        yield client
    finally:
        if client is not None:
            client.close(timeout=30)
        if cluster is not None:
            cluster.close(timeout=30)


def test_local_cluster_gives_numpy_bits(client):
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(address.startswith("tcp://127.0.0.1:") for address in workers)
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS["last-axis"])
    mx = SCALED["mx-last-axis"]
    graphs = {mode: rpd.round(d, "e4m3", mode, **_kwargs(mode)) for mode in MODES}
    graphs["scaled"] = rpd.round(d, mx, "stochastic", rng=SEED)
    graphs["encode"] = rpd.encode(d, "e5m2", "stochastic", rng=SEED)
    graphs["sum"] = rpd.sum(d, "bfloat16", axis=0, mode="stochastic", rng=SEED)
    results = dict(zip(graphs, client.gather(client.compute(list(graphs.values())), direct=False)))
    for mode in MODES:
        assert_same_bits(results[mode], rp.round(x, "e4m3", mode, **_kwargs(mode)))
    assert_same_bits(results["scaled"], rp.round(x, mx, "stochastic", rng=SEED))
    assert_same_bits(results["encode"], rp.encode(x, "e5m2", "stochastic", rng=SEED))
    assert_same_bits(results["sum"], _compute(graphs["sum"]))
    # the kernels ran in the worker processes, not here
    assert all(pid != __import__("os").getpid() for pid in client.run(__import__("os").getpid).values())


# -- rp.round itself ---------------------------------------------------------------


def test_rp_round_dispatches_dask_arrays():
    x = _data()
    d = da.from_array(x, chunks=CHUNKINGS["ragged"])
    lazy = rp.round(d, "e4m3", "stochastic", rng=SEED)
    assert isinstance(lazy, da.Array)
    assert_same_bits(_compute(lazy), rp.round(x, "e4m3", "stochastic", rng=SEED))
    codes = rp.encode(d, "e5m2", "stochastic", rng=SEED)
    assert isinstance(codes, da.Array)
    assert_same_bits(_compute(codes), rp.encode(x, "e5m2", "stochastic", rng=SEED))
    values = rp.decode(codes, "e5m2")
    assert isinstance(values, da.Array)
    assert_same_bits(_compute(values), rp.decode(rp.encode(x, "e5m2", "stochastic", rng=SEED), "e5m2"))


def test_rp_sum_dispatches_dask_arrays_and_decode_takes_scaled_dask_codes():
    """rp.sum of a dask array is rpfloat.dask.sum (lazy, same value); rp.decode of
    ScaledCodes holding dask arrays stays lazy and equals rp.round."""
    x = np.random.default_rng(8).standard_normal(1000).astype(np.float32)
    lazy = da.from_array(x, chunks=128)
    total = rp.sum(lazy, "bfloat16", mode="down")
    assert isinstance(total, da.Array)
    assert total.compute().tobytes() == rpd.sum(lazy, "bfloat16", mode="down").compute().tobytes()
    codes = rp.encode(da.from_array(x[:960], chunks=320), "mxfp4")
    values = rp.decode(codes, "mxfp4")
    assert isinstance(values, da.Array)
    np.testing.assert_array_equal(values.compute(), rp.round(x[:960], "mxfp4").astype(np.float64))


@pytest.mark.parametrize("fmt", ["e4m3", "bfloat16", "q3.4", "mxfp4", "nvfp4",
                                 rp.ScaledFormat("e4m3", block_size=8, axis=0)])
@pytest.mark.parametrize("chunking", CHUNKINGS)
def test_flip_bits_gives_numpy_bits(chunking, fmt):
    """Bit b of the code at global flat index i flips as in rp.flip_bits of the
    whole, whatever the chunks (column strips: one run per row), for element
    and scaled formats (blocks along either axis, NVFP4's tensor scale)."""
    x = np.nan_to_num(_data(), nan=1.0, posinf=2.0, neginf=-2.0)  # e4m3 has NaN, q3.4 and MX elements do not
    d = da.from_array(x, chunks=CHUNKINGS[chunking])
    for p, field in [(0.05, "all"), (0.5, "significand"), (1.0, "sign"), (0.0, "all")]:
        lazy = rpd.flip_bits(d, fmt, p, field=field, rng=SEED)
        assert isinstance(lazy, da.Array)
        assert_same_bits(_compute(lazy), rp.flip_bits(x, fmt, p, field=field, rng=SEED))
    dispatched = rp.flip_bits(d, fmt, 0.1, rng=SEED)
    assert isinstance(dispatched, da.Array)
    assert_same_bits(_compute(dispatched), rp.flip_bits(x, fmt, 0.1, rng=SEED))


def test_flip_bits_checks_its_arguments_at_graph_build(kernel_calls):
    d = da.from_array(_data(), chunks=10)
    with pytest.raises(ValueError, match="p must lie in"):
        rpd.flip_bits(d, "e4m3", 1.5)
    with pytest.raises(ValueError, match="field="):
        rpd.flip_bits(d, "q3.4", 0.1, field="exponent")
    with pytest.raises(TypeError, match="x must be a dask.array.Array"):
        rpd.flip_bits(_data(), "e4m3", 0.1)
    lazy = rpd.flip_bits(d, "e4m3", 0.1, rng=1)
    assert kernel_calls == []
    _compute(lazy)
    assert kernel_calls


def test_products_refuse_dask_operands():
    """rp.dot and rp.matmul have no lazy form: a TypeError rather than loading the
    array whole; rp.sum takes mode=None as rp.sum of NumPy data does."""
    d = da.ones((4, 4), chunks=2)
    with pytest.raises(TypeError, match="a is a dask array"):
        rp.matmul(d, np.ones((4, 4)), "bfloat16")
    with pytest.raises(TypeError, match="b is a dask array"):
        rp.dot(np.ones(4), d[0], "bfloat16")
    assert float(rp.sum(d, "bfloat16", mode=None).compute()) == 16.0
    assert float(rpd.sum(d, "bfloat16", mode=None).compute()) == 16.0


def test_accumulation_refuses_scaled_formats():
    with pytest.raises(TypeError, match="fmt must be an element format"):
        rp.sum(np.ones(4), "mxfp4")
    with pytest.raises(TypeError, match="fmt must be an element format"):
        rpd.sum(da.ones(4, chunks=2), "mxfp4")
    with pytest.raises(TypeError, match="acc must be an element format"):
        rp.matmul(np.ones((2, 2)), np.ones((2, 2)), "bfloat16", acc="nvfp4")
