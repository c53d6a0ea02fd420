"""rpfloat.torch.round: the values of rp.round bit for bit on every supported dtype
and layout, no copies, straight-through and rounded gradients, seeds and
generators, and the errors (docs/torch.md)."""
import subprocess
import sys

import numpy as np
import pytest
import torch  # the test extra installs it: a missing torch fails here rather than skipping

import rpfloat as rp
import rpfloat.torch as rpt
from rpfloat.torch import functional

FORMATS = ["bfloat16", "e4m3", "e5m2", "q8.8", rp.FloatFormat(6, 9)]
MODES = ["nearest", "toward_zero", "up", "odd", "stochastic", "stochastic_equal"]
NATIVE_DTYPES = [torch.float16, torch.float32, torch.float64]
INT_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
            torch.float64: torch.int64}


def _data(dtype, shape=(37, 29), seed=0):
    """Values over many binades (subnormal to overflow for FP8), both signs, with
    zeros, infinities and NaN mixed in; exact in `dtype`."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)
    flat = values.reshape(-1)
    flat[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e6]
    return torch.from_numpy(values).to(dtype)


def _bits(t):
    return t.contiguous().view(INT_VIEW[t.dtype])


def assert_same_bits(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(_bits(actual), _bits(expected))


def _expected(t, fmt, mode, **kwargs):
    """rp.round on the tensor's values (bfloat16 through float32, exactly), cast to t.dtype."""
    values = t.detach().to(torch.float32) if t.dtype == torch.bfloat16 else t.detach()
    rounded = np.asarray(rp.round(values.numpy(), fmt, mode, **kwargs))
    return torch.from_numpy(rounded).to(t.dtype)


# --- values -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_values_are_rp_round_bit_for_bit(dtype, fmt, mode):
    t = _data(dtype)
    kwargs = {"rng": 7} if "stochastic" in mode else {}
    result = rpt.round(t, fmt, mode, **kwargs)
    rounded = np.asarray(rp.round(t.numpy(), fmt, mode, **kwargs))
    if rounded.dtype == t.numpy().dtype:  # no cast: the very bits of rp.round
        assert_same_bits(result, torch.from_numpy(rounded))
    else:  # rp.round computes wider: the cast back is the only difference
        assert_same_bits(result, torch.from_numpy(rounded).to(dtype))


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_bfloat16_tensors_round_through_float32(fmt, mode):
    t = _data(torch.bfloat16, seed=1)
    kwargs = {"rng": 3} if "stochastic" in mode else {}
    result = rpt.round(t, fmt, mode, **kwargs)
    assert result.dtype == torch.bfloat16
    assert_same_bits(result, _expected(t, fmt, mode, **kwargs))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1", "bfloat16", "q1.7", rp.FloatFormat(None, 3)], ids=str)
@pytest.mark.parametrize("mode", ["nearest", "toward_zero", "down", "stochastic"])
def test_bfloat16_is_exact_for_formats_whose_values_fit_it(fmt, mode):
    """Every bfloat16 value: the result is rp.round's float32 result itself, no second rounding."""
    codes = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    t = codes.view(torch.bfloat16)
    kwargs = {"rng": 5} if mode == "stochastic" else {}
    result = rpt.round(t, fmt, mode, **kwargs).to(torch.float32).numpy()
    rounded = rp.round(t.to(torch.float32).numpy(), fmt, mode, **kwargs)
    nan = np.isnan(rounded)
    assert np.array_equal(np.isnan(result), nan)
    assert np.array_equal(result[~nan].view(np.int32), rounded[~nan].view(np.int32))


def test_bfloat16_casts_a_max_it_cannot_hold_to_nearest():
    """The documented caveat: q8.8 saturates at 127.99609375, which bfloat16 lacks."""
    t = torch.tensor([200.0, -200.0, 100.3], dtype=torch.bfloat16)
    assert rp.round(t.float().numpy(), "q8.8")[0] == 127.99609375
    assert rpt.round(t, "q8.8").tolist() == [128.0, -128.0, 100.5]
    # float16 onto a bfloat16 tensor, toward zero: 65504 becomes bfloat16's 65536
    assert rpt.round(torch.tensor([1e5], dtype=torch.bfloat16), "float16", "toward_zero").item() == 65536.0


def test_float16_tensor_onto_a_float32_carrier_format_is_cast_back():
    t = torch.tensor([1 / 3, 65504.0], dtype=torch.float16)
    result = rpt.round(t, "bfloat16")
    assert result.dtype == torch.float16
    assert result[0].item() == rp.round(np.float16(1 / 3), "bfloat16")  # 0.333984375, a float16 value
    assert result[1].item() == float("inf")  # 65536, past float16's max


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "nvfp4"])
def test_scaled_formats(fmt):
    t = _data(torch.float32, shape=(8, 64), seed=2)
    t[0, :6] = 1.0  # the scaled formats take finite data
    result = rpt.round(t, fmt, "stochastic", rng=4)
    assert_same_bits(result, _expected(t, fmt, "stochastic", rng=4))


def test_zero_dim_and_empty_tensors():
    scalar = rpt.round(torch.tensor(1.3), "e4m3")
    assert scalar.shape == () and scalar.item() == 1.25
    empty = rpt.round(torch.empty(0, 3), "e4m3")
    assert empty.shape == (0, 3) and empty.dtype == torch.float32


def test_input_is_never_modified():
    t = _data(torch.bfloat16)
    before = t.clone()
    rpt.round(t, "e4m3", "stochastic", rng=0)
    assert torch.equal(_bits(t), _bits(before))


# --- layouts and copies ---------------------------------------------------------------


def _views(base):
    return {
        "transposed": base.t(),
        "sliced": base[1::3, ::2],
        "column slice": base[:, 3:20],
        "expanded": base[0].expand(5, -1),
        "channels_last": base.reshape(1, 37, 29, 1).contiguous(memory_format=torch.channels_last),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("view", list(_views(torch.zeros(37, 29))))
def test_any_strides_give_the_c_order_results(dtype, view):
    t = _views(_data(dtype))[view]
    result = rpt.round(t, "e4m3", "stochastic", rng=11)
    # the same draws as the C-order contiguous copy: element i draws number i
    assert_same_bits(result, rpt.round(t.contiguous(), "e4m3", "stochastic", rng=11))
    assert_same_bits(result, _expected(t, "e4m3", "stochastic", rng=11))


def test_dense_results_keep_the_strides_of_the_input():
    t = _data(torch.float32)
    assert rpt.round(t.t(), "bfloat16").stride() == t.t().stride()
    assert rpt.round(t[::2], "bfloat16").is_contiguous()  # not dense: C order


@pytest.fixture
def round_calls(monkeypatch):
    """The arrays that each call of rp.round made by rpfloat.torch received."""
    calls = []

    def spy(x, fmt, mode="nearest", **kwargs):
        calls.append((x, kwargs["out"]))
        return rp.round(x, fmt, mode, **kwargs)

    monkeypatch.setattr(functional, "_round_array", spy)
    return calls


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=str)
def test_no_copy_where_the_dtype_allows(round_calls, dtype):
    t = _data(dtype).requires_grad_()
    result = rpt.round(t, "e4m3")
    ((x, out),) = round_calls
    # the input is read in place, the result written where the returned tensor lives
    assert x.__array_interface__["data"][0] == t.data_ptr()
    assert out.__array_interface__["data"][0] == result.data_ptr()
    assert np.shares_memory(x, t.detach().numpy())


def test_bfloat16_rounds_its_float32_copy_in_place(round_calls):
    t = _data(torch.bfloat16)
    rpt.round(t, "e4m3")
    ((x, out),) = round_calls
    assert x.dtype == np.float32 and x.__array_interface__["data"][0] == out.__array_interface__["data"][0]


# --- gradients -----------------------------------------------------------------------


def test_straight_through_gradient_is_the_upstream_gradient():
    w = _data(torch.float32, seed=3).nan_to_num(posinf=1.0, neginf=-1.0).requires_grad_()
    upstream = torch.from_numpy(np.random.default_rng(4).standard_normal(w.shape).astype(np.float32))
    y = rpt.round(w, "e4m3", "stochastic", rng=0)
    (grad,) = torch.autograd.grad(y, w, upstream)
    assert_same_bits(grad, upstream)


def test_straight_through_in_a_chain_by_hand():
    w = torch.tensor([0.3, -1.7, 2.2], requires_grad=True)
    c = torch.tensor([2.0, -3.0, 0.5])
    loss = (rpt.round(w, "e4m3") ** 2 * c).sum()
    loss.backward()
    # d/dw sum(c * q(w)**2) = 2 c q(w), the derivative of q taken as 1
    q = torch.tensor([0.3125, -1.75, 2.25])
    assert torch.equal(w.grad, 2 * c * q)


@pytest.mark.parametrize("grad_fmt", ["e5m2", "bfloat16", "q4.4"])
def test_grad_fmt_rounds_the_gradient(grad_fmt):
    w = torch.randn(50, 7, generator=torch.Generator().manual_seed(0), requires_grad=True)
    upstream = torch.randn(50, 7, generator=torch.Generator().manual_seed(1)) * 100
    y = rpt.round(w, "e4m3", grad_fmt=grad_fmt)
    (grad,) = torch.autograd.grad(y, w, upstream)
    assert_same_bits(grad, torch.from_numpy(rp.round(upstream.numpy(), grad_fmt).astype(np.float32)))
    assert not torch.equal(grad, upstream)


def test_stochastic_gradient_with_a_seed_is_reproducible():
    w = torch.randn(1000, requires_grad=True)
    upstream = torch.randn(1000)
    expected = torch.from_numpy(rp.round(upstream.numpy(), "e4m3", "stochastic", rng=9))
    for _ in range(2):  # an int seed: the same draws at every backward pass
        y = rpt.round(w, "bfloat16", grad_fmt="e4m3", grad_mode="stochastic", grad_rng=9)
        (grad,) = torch.autograd.grad(y, w, upstream)
        assert_same_bits(grad, expected.to(torch.float32))


def test_stochastic_gradient_with_a_generator_advances_and_replays():
    w = torch.randn(1000, requires_grad=True)
    upstream = torch.randn(1000)

    def two_backward_passes(grad_rng):
        grads = []
        for _ in range(2):
            y = rpt.round(w, "bfloat16", grad_fmt="e4m3", grad_mode="stochastic", grad_rng=grad_rng)
            grads.append(torch.autograd.grad(y, w, upstream)[0])
        return grads

    first, second = two_backward_passes(torch.Generator().manual_seed(0))
    assert not torch.equal(first, second)
    again = two_backward_passes(torch.Generator().manual_seed(0))
    assert torch.equal(first, again[0]) and torch.equal(second, again[1])


def test_higher_derivatives_pass_straight_through():
    w = torch.randn(5, requires_grad=True)
    upstream = torch.randn(5, requires_grad=True)
    y = rpt.round(w, "e4m3", grad_fmt="bfloat16")
    (grad,) = torch.autograd.grad(y, w, upstream, create_graph=True)
    (grad_of_grad,) = torch.autograd.grad(grad.sum(), upstream)
    assert torch.equal(grad_of_grad, torch.ones(5))


def test_gradcheck_where_rounding_is_the_identity():
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: rpt.round(v, "float64") * v, (x,))


def test_leaf_tensors_give_results_that_require_grad():
    w = torch.nn.Parameter(torch.randn(3, 4))
    y = rpt.round(w, "bfloat16")
    assert y.requires_grad and not y.is_leaf and type(y) is torch.Tensor
    assert type(y.grad_fn).__name__ == "RPRoundBackward"
    with torch.no_grad():
        assert not rpt.round(w, "bfloat16").requires_grad
    assert not rpt.round(torch.randn(3), "bfloat16").requires_grad


# --- randomness ----------------------------------------------------------------------


def _stochastic(rng, t=torch.full((4096,), 1.03125)):
    return rpt.round(t, "e4m3", "stochastic", rng=rng)


def test_an_int_seed_repeats_its_draws():
    assert torch.equal(_stochastic(1), _stochastic(1))
    assert not torch.equal(_stochastic(1), _stochastic(2))


def test_no_rng_draws_fresh_entropy_every_call():
    assert not torch.equal(_stochastic(None), _stochastic(None))


@pytest.mark.parametrize("make", [np.random.default_rng, lambda seed: torch.Generator().manual_seed(seed)],
                         ids=["numpy", "torch"])
def test_a_generator_gives_fresh_draws_reproducible_from_its_seed(make):
    rng = make(0)
    first, second = _stochastic(rng), _stochastic(rng)
    assert not torch.equal(first, second)
    rng = make(0)
    assert torch.equal(first, _stochastic(rng)) and torch.equal(second, _stochastic(rng))


def test_the_default_torch_generator_follows_manual_seed():
    torch.manual_seed(0)
    first = _stochastic(torch.default_generator)
    torch.manual_seed(0)
    assert torch.equal(first, _stochastic(torch.default_generator))


def test_deterministic_modes_draw_nothing_from_a_generator():
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    rpt.round(torch.randn(10), "e4m3", "nearest", rng=generator)
    assert torch.equal(generator.get_state(), state)


# --- errors --------------------------------------------------------------------------


@pytest.mark.parametrize("not_a_tensor", [np.ones(3, np.float32), [1.0, 2.0], 1.5])
def test_non_tensors_are_refused_pointing_to_rp_round(not_a_tensor):
    with pytest.raises(TypeError, match=r"t must be a torch.Tensor, got .*rpfloat.round"):
        rpt.round(not_a_tensor, "e4m3")


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.complex64, torch.float8_e4m3fn], ids=str)
def test_other_dtypes_are_refused(dtype):
    with pytest.raises(TypeError, match=r"t must have dtype float16, bfloat16, float32 or float64, got"):
        rpt.round(torch.zeros(3, dtype=dtype), "e4m3")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn], ids=str)
def test_numpy_functions_point_tensors_numpy_cannot_hold_to_rpfloat_torch(dtype):
    with pytest.raises(TypeError, match=r"x is a torch tensor of dtype .*rpfloat.torch.round\(x, fmt\)"):
        rp.round(torch.ones(3, dtype=dtype), "e4m3")


def test_meta_tensors_are_refused():
    with pytest.raises(ValueError, match=r"t is on device meta; .* CPU tensors only"):
        rpt.round(torch.empty(3, device="meta"), "e4m3")


class _SaysCuda(torch.Tensor):
    """A CPU tensor that reports a CUDA device and fails any copy to the host or read of its data."""

    @property
    def device(self):
        return torch.device("cuda", 0)

    @property
    def is_cuda(self):
        return True

    def _copied(self, *args, **kwargs):
        raise AssertionError("a CUDA tensor was copied or read")

    cpu = numpy = to = detach = clone = contiguous = _copied


def test_cuda_tensors_are_refused_not_copied():
    """Runs without a GPU: the check reads only ``t.device``, which the stand-in reports as cuda:0."""
    t = torch.Tensor._make_subclass(_SaysCuda, torch.ones(3))
    assert t.device.type == "cuda"
    with pytest.raises(ValueError, match=r"t is on device cuda:0; .*rpfloat.cuda.round"):
        rpt.round(t, "e4m3")
    with pytest.raises(ValueError, match=r"t is on device cuda:0; .*rpfloat.cuda.round"):
        rpt.round(torch.Tensor._make_subclass(_SaysCuda, torch.ones(3), True), "e4m3", grad_fmt="e5m2")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_cuda_tensors_are_refused_not_copied():
    with pytest.raises(ValueError, match=r"t is on device cuda.*rpfloat.cuda.round"):
        rpt.round(torch.ones(3, device="cuda"), "e4m3")


def test_sparse_tensors_are_refused():
    with pytest.raises(TypeError, match=r"t must be a dense \(strided\) tensor"):
        rpt.round(torch.eye(3).to_sparse(), "e4m3")


@pytest.mark.parametrize("name", ["rng", "grad_rng"])
def test_unknown_rngs_are_refused_naming_the_argument(name):
    kwargs = {name: "0", "grad_fmt": "e5m2"}
    with pytest.raises(TypeError, match=rf"^{name} must be None, an int seed, .*torch.Generator, got str"):
        rpt.round(torch.ones(3), "e4m3", "stochastic", **kwargs)
    kwargs[name] = -1
    with pytest.raises(ValueError, match=rf"^{name} seed must be a non-negative int"):
        rpt.round(torch.ones(3), "e4m3", "stochastic", **kwargs)


def test_gradient_options_without_grad_fmt_are_refused():
    """grad_mode and grad_rng set the gradient's rounding onto grad_fmt: without
    it they would be ignored silently (the gradient passes straight through)."""
    t = torch.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="^grad_mode='stochastic' rounds the gradient onto grad_fmt, which is None"):
        rpt.round(t, "e4m3", grad_mode="stochastic")
    with pytest.raises(ValueError, match="^grad_rng draws for the gradient's rounding onto grad_fmt"):
        rpt.round(t, "e4m3", grad_rng=0)
    with pytest.raises(ValueError, match="^grad_mode: unknown rounding mode"):
        rpt.round(t, "e4m3", grad_mode="sideways")
    rpt.round(t, "e4m3", grad_mode="rne").sum().backward()  # nearest, as without it
    assert t.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="^grad_mode='stochastic' rounds the gradient"):
        rpt.Quantize("e4m3", grad_mode="sr")
    with pytest.raises(ValueError, match="^grad_mode='stochastic' rounds the gradient"):
        rpt.TensorConfig("e4m3", grad_mode="stochastic")


def test_a_bad_grad_fmt_fails_in_the_forward_pass():
    with pytest.raises(ValueError):
        rpt.round(torch.ones(3, requires_grad=True), "e4m3", grad_fmt="e4m3", grad_mode="sideways")
    with pytest.raises(ValueError):
        rpt.round(torch.ones(3, requires_grad=True), "e4m3", grad_fmt="no_such_format")
    scaled = rp.ScaledFormat("e4m3", block_size=2, axis=1)  # axis 1 of a 1-D gradient
    with pytest.raises(ValueError, match="grad_fmt .*axis=1 is out of range"):
        rpt.round(torch.ones(4, requires_grad=True), "e4m3", grad_fmt=scaled)


def test_nested_tensors_are_refused():
    nested = torch.nested.as_nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
    with pytest.raises(TypeError, match="nested tensor"):
        rpt.round(nested, "e4m3")


def test_a_tensor_scale_gives_float64_values_cast_to_the_tensor_dtype():
    """With a tensor scale rp.round returns float64 products: a float64 tensor holds
    them bit for bit, a float32 tensor gets them rounded to nearest by the cast."""
    fmt = rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3", tensor_scale=True)
    t = torch.tensor([3.0, 1.1, 0.7, 2.2] + [0.0] * 12, dtype=torch.float64)
    expected = rp.round(t.numpy(), fmt)
    assert expected.dtype == np.float64
    assert np.array_equal(rpt.round(t, fmt).numpy(), expected)
    narrow = rpt.round(t.float(), fmt)
    assert narrow.dtype == torch.float32
    assert np.array_equal(narrow.numpy(), rp.round(t.float().numpy(), fmt).astype(np.float32))
    assert not np.array_equal(narrow.numpy().astype(np.float64), expected)  # the cast rounded


@pytest.mark.parametrize(("dtype", "values"), [
    (torch.bfloat16, [-69.5] + [0.0] * 15 + [108.5]),  # -69.74999785...: below the midpoint -69.75
    (torch.float16, [10.4140625, -2.265625] + [0.0] * 14 + [-88.8125]),
])
def test_a_tensor_scale_onto_a_half_tensor_rounds_once_to_nearest(dtype, values):
    """torch casts float64 to float16 and bfloat16 through float32: a product just
    beside a midpoint would round to float32's midpoint and then, ties to even, to
    the far neighbour. The result is rp.round's float64 value rounded once."""
    fmt = rp.format("nvfp4").replace(tensor_scale=True)
    t = torch.tensor(values, dtype=dtype)
    exact = rp.round(t.float().numpy(), fmt)
    assert exact.dtype == np.float64
    nearest = rp.round(exact, "float16" if dtype == torch.float16 else "bfloat16")
    got = rpt.round(t, fmt)
    assert got.dtype == dtype
    assert np.array_equal(got.double().numpy(), nearest)
    assert not torch.equal(got, torch.from_numpy(exact).to(dtype))  # the case torch's cast gets wrong


@pytest.mark.parametrize(("element", "scale", "dtype"), [("q8.0", "bfloat16", torch.float16),
                                                           ("q8.0", "e4m3", torch.bfloat16),
                                                           ("e2m1", "bfloat16", torch.bfloat16)])
def test_significand_scales_wider_than_a_half_tensor_are_cast_back(element, scale, dtype):
    """float32 products of more significant bits than float16/bfloat16 hold: the
    tensor gets rp.round's float32 values rounded to nearest by the cast (documented)."""
    fmt = rp.ScaledFormat(element, block_size=2, scale_format=scale)
    assert fmt.carrier is np.float32
    t = torch.tensor([100.0, 99.0, 1.0, 0.6, 7.0, 5.5], dtype=dtype)
    expected = rp.round(t.float().numpy(), fmt)
    got = rpt.round(t, fmt)
    assert got.dtype == dtype
    assert torch.equal(got, torch.from_numpy(expected).to(dtype))
    assert not np.array_equal(got.float().numpy(), expected)  # some value needed more bits: the cast rounded


def test_import_rpfloat_does_not_import_torch():
    code = "import sys, rpfloat; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_without_torch_says_how_to_install_it():
    code = (
        "import sys; sys.modules['torch'] = None\n"  # what `import torch` sees without torch
        "import rpfloat\n"
        "try:\n    import rpfloat.torch\nexcept ImportError as error:\n    print(error)\n"
    )
    printed = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "pip install torch" in printed and "rpfloat[torch]" in printed


# torch.compile itself warns at every graph break that a non-leaf tensor crosses (it reads its .grad)
GRAPH_BREAK_WARNING = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")


@GRAPH_BREAK_WARNING
def test_compiled_functions_round_as_in_eager_mode_with_the_same_gradient():
    def f(t):
        return rpt.round(t * 2, "e4m3", grad_fmt="e5m2") + 1

    t = torch.tensor([0.3, 0.7, -1.3], requires_grad=True)
    upstream = torch.tensor([0.1, 1 / 3, 3.0])
    compiled = torch.compile(f, backend="eager")  # the NumPy kernel is a graph break
    expected, actual = f(t), compiled(t)
    assert torch.equal(actual, expected)
    assert torch.equal(torch.autograd.grad(actual, t, upstream)[0], torch.autograd.grad(expected, t, upstream)[0])


@pytest.mark.parametrize("transform", ["vmap", "grad"])
def test_torch_func_transforms_are_refused_clearly(transform):
    if transform == "vmap":
        call = lambda: torch.vmap(lambda t: rpt.round(t, "e4m3"))(torch.randn(3, 4))  # noqa: E731
    else:
        call = lambda: torch.func.grad(lambda t: rpt.round(t, "e4m3").sum())(torch.randn(3))  # noqa: E731
    with pytest.raises(TypeError, match="does not support the torch.func transforms"):
        call()


def test_a_bad_grad_mode_or_grad_fmt_is_named():
    with pytest.raises(ValueError, match="^grad_mode: unknown rounding mode 'bogus'"):
        rpt.round(torch.randn(3), "e4m3", grad_fmt="e5m2", grad_mode="bogus")
    with pytest.raises(ValueError, match="^grad_fmt: unknown format name 'zz'"):
        rpt.round(torch.randn(3), "e4m3", grad_fmt="zz")
