"""Rounding of PyTorch tensors onto a format, differentiable: :func:`round`.

The values are those of :func:`rpfloat.round` on the tensor's data, read in place
through ``Tensor.numpy()`` and written into a tensor allocated by torch; the
gradient passes straight through, or is itself rounded (``grad_fmt=``).
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

from .._plan import plan_for
from ..modes import parse_mode
from ..presets import format as to_format
from ..scaledformat import ScaledFormat
from ..scaling import block_layout_of
from ..rounding import round as _round_array

__all__ = ["round"]

_NUMPY_DTYPE_OF = {
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
}
_TORCH_DTYPE_OF = {numpy_dtype: torch_dtype for torch_dtype, numpy_dtype in _NUMPY_DTYPE_OF.items()}
_SUPPORTED_DTYPES = "float16, bfloat16, float32 or float64"
# the formats of the tensor dtypes that torch casts float64 onto through float32, rounding twice
_HALF_FORMAT_OF = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def round(
    t,
    fmt,
    mode="nearest",
    *,
    rng=None,
    rand_bits=None,
    overflow=None,
    grad_fmt=None,
    grad_mode="nearest",
    grad_rng=None,
):
    """Round the values of the tensor `t` onto `fmt`; differentiable.

    The values are those of :func:`rpfloat.round` on ``t``'s data, bit for bit.
    The gradient passes straight through the rounding (the straight-through
    estimator), or is itself rounded onto `grad_fmt` when that is given.

    Parameters
    ----------
    t : torch.Tensor
        A CPU tensor of dtype float16, bfloat16, float32 or float64; any shape and
        strides; ``requires_grad`` or not. Never modified.
    fmt : FloatFormat, FixedFormat, ScaledFormat or str
        The target format or a name accepted by :func:`rpfloat.format`.
    mode : str
        A rounding mode of :func:`rpfloat.round` (``"nearest"``,
        ``"toward_zero"``, ``"stochastic"``, ...).
    rng : None, int, numpy.random.SeedSequence, numpy.random.Generator or torch.Generator
        Randomness for the stochastic modes, as in :func:`rpfloat.round`: None
        draws fresh OS entropy on every call; an int seed (or a SeedSequence)
        makes the same draws on every call; a NumPy or a CPU torch Generator gives
        every call fresh draws taken from it (a torch Generator gives a 64-bit
        seed drawn with ``torch.randint``), reproducible from its seed. The
        deterministic modes draw nothing.
    rand_bits : int, optional
        Stochastic modes only: the number of random bits deciding each rounding.
    overflow : {None, "inf", "saturate", "nan", "wrap"}
        What a value beyond ``fmt.max`` becomes; None takes the format's default.
    grad_fmt : format or str, optional
        If given, the gradient flowing back through this call is rounded onto
        `grad_fmt` in `grad_mode` (with `grad_rng`), itself passed straight
        through for higher derivatives. None (default): the gradient passes
        unchanged.
    grad_mode : str
        The rounding mode of the gradient.
    grad_rng : None, int, numpy.random.SeedSequence, numpy.random.Generator or torch.Generator
        Randomness for a stochastic `grad_mode`; a Generator is drawn from when
        the backward pass runs.

    Returns
    -------
    torch.Tensor
        A new tensor of ``t``'s dtype, shape and device (the strides of ``t``
        when it is dense, else C order), requiring grad when ``t`` does and grad
        mode is on. Where ``rpfloat.round`` computes in a wider dtype than
        ``t``'s (always for bfloat16 tensors, which go through float32, and for a
        format whose carrier is wider than ``t``), the result is cast back to
        ``t.dtype``: exact for every value ``t.dtype`` holds, rounded to nearest
        otherwise (docs/torch.md lists when that happens).

    Raises
    ------
    TypeError
        If `t` is not a tensor, not a strided tensor, or of another dtype, or is
        the tensor of a ``torch.func`` transform (``vmap``, ``grad``); or if
        `rng` or `grad_rng` is of an unknown type.
    ValueError
        If `t` is not on the CPU (CUDA and meta tensors are refused, never
        copied to the host), or an argument has a wrong value; if `grad_mode`
        (other than ``"nearest"``) or `grad_rng` is given without `grad_fmt`,
        as there is then no rounding of the gradient for them to set.

    Examples
    --------
    >>> import torch
    >>> import rpfloat.torch as rpt
    >>> w = torch.tensor([0.3, -1.7, 2.2], requires_grad=True)
    >>> y = rpt.round(w, "e4m3")
    >>> y
    tensor([ 0.3125, -1.7500,  2.2500], grad_fn=<RPRoundBackward>)
    >>> y.backward(torch.tensor([0.1, 1.0, 3.0]))
    >>> w.grad                                  # straight through
    tensor([0.1000, 1.0000, 3.0000])
    """
    data = _checked_data(t)
    _check_rng(rng, "rng")
    grad_rounding = None
    if grad_fmt is None:
        _no_gradient_rounding(grad_mode, grad_rng)
    else:
        _check_rng(grad_rng, "grad_rng")
        grad_format = _argument(to_format, grad_fmt, "grad_fmt")
        _argument(parse_mode, grad_mode, "grad_mode")
        plan_for(grad_format, grad_mode, None, None, _compute_dtype(data))  # fail now, not in backward
        if isinstance(scaled := grad_format, ScaledFormat):
            try:
                block_layout_of(tuple(data.shape), scaled)  # its axis against the gradient's shape
            except ValueError as error:
                raise ValueError(f"grad_fmt {scaled!r}: {error}") from None
        grad_rounding = (grad_fmt, grad_mode, grad_rng)
    if t.requires_grad and torch.is_grad_enabled():
        return RPRound.apply(t, fmt, mode, rng, rand_bits, overflow, grad_rounding)
    return _round_data(data, fmt, mode, rng, rand_bits, overflow)


round = torch.compiler.disable(round)  # under torch.compile: a graph break, the NumPy kernel never traced


class RPRound(torch.autograd.Function):
    """Rounding with the gradient passed straight through, or rounded onto the
    ``(grad_fmt, grad_mode, grad_rng)`` of `grad_rounding`."""

    @staticmethod
    def forward(ctx, t, fmt, mode, rng, rand_bits, overflow, grad_rounding):
        ctx.grad_rounding = grad_rounding
        return _round_data(t.detach().resolve_neg(), fmt, mode, rng, rand_bits, overflow)

    @staticmethod
    def backward(ctx, grad):
        if ctx.grad_rounding is not None:
            grad_fmt, grad_mode, grad_rng = ctx.grad_rounding
            grad = round(grad, grad_fmt, grad_mode, rng=grad_rng)
        return grad, None, None, None, None, None, None


def _round_data(data, fmt, mode, rng, rand_bits, overflow):
    """`data` (a detached CPU tensor of a supported dtype) rounded onto `fmt`: a
    new tensor of its dtype. The kernel reads ``data.numpy()`` in place and writes
    into a tensor from ``torch.empty_like``; bfloat16 is widened to float32 first
    (NumPy has no bfloat16) and rounded in place there. A float64 result for a
    float16 or bfloat16 tensor is rounded to nearest onto that dtype in place
    before the cast, which torch would make through float32, rounding twice."""
    compute_dtype = _compute_dtype(data)
    plan = plan_for(fmt, mode, overflow, rand_bits, compute_dtype)
    result_dtype = _TORCH_DTYPE_OF[np.dtype(plan.result_dtype)]
    if data.dtype == torch.bfloat16:
        source = data.to(torch.float32)  # exact; keeps the strides of a dense tensor
        result = source if result_dtype == torch.float32 else torch.empty_like(source, dtype=result_dtype)
    else:
        source = data
        result = torch.empty_like(data, dtype=result_dtype)
    seed = _seed_of(rng) if plan.mode.is_stochastic else None
    _round_array(
        source.numpy(), fmt, mode, overflow=overflow, rng=seed, rand_bits=rand_bits, out=result.numpy()
    )
    if result.dtype == torch.float64 and data.dtype in _HALF_FORMAT_OF:
        # torch casts float64 to float16 and bfloat16 through float32, which rounds a value just
        # beside a midpoint to the far neighbour: round to nearest once here, and the cast is exact
        _round_array(result.numpy(), _HALF_FORMAT_OF[data.dtype], out=result.numpy())
    return result if result.dtype == data.dtype else result.to(data.dtype)


def _no_gradient_rounding(grad_mode, grad_rng) -> None:
    """Raise where `grad_mode` or `grad_rng` sets a rounding of the gradient
    that no `grad_fmt` asks for (the gradient passes straight through)."""
    if _argument(parse_mode, grad_mode, "grad_mode") != parse_mode("nearest"):
        raise ValueError(f"grad_mode={grad_mode!r} rounds the gradient onto grad_fmt, which is None (the gradient "
                         "passes straight through): give grad_fmt too, or leave grad_mode out")
    if grad_rng is not None:
        raise ValueError("grad_rng draws for the gradient's rounding onto grad_fmt, which is None (the gradient "
                         "passes straight through): give grad_fmt too, or leave grad_rng out")


def _argument(parse, value, name):
    """``parse(value)``, its error prefixed with the argument's `name`."""
    try:
        return parse(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{name}: {error}") from None


def _compute_dtype(data) -> np.dtype:
    return _NUMPY_DTYPE_OF.get(data.dtype, np.dtype(np.float32))  # bfloat16 -> float32


def _checked_data(t):
    """`t` detached, validated: a dense CPU tensor of a supported dtype."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(
            f"t must be a torch.Tensor, got {type(t).__name__}; "
            "for NumPy arrays and Python numbers use rpfloat.round"
        )
    if torch._C._functorch.is_functorch_wrapped_tensor(t):
        raise TypeError(
            "rpfloat.torch.round does not support the torch.func transforms (vmap, grad, jacrev, ...): "
            "it reads the tensor's data through NumPy. Call it outside the transform (for a batch, "
            "round the whole batched tensor at once)"
        )
    if t.device.type != "cpu":
        raise ValueError(
            f"t is on device {t.device}; rpfloat.torch.round rounds CPU tensors only, with gradients. "
            "rpfloat.cuda.round(t, fmt) rounds a CUDA tensor on its device, without a gradient "
            "(docs/gpu.md); rpfloat.torch.round never copies to the host itself: pass t.cpu() if a "
            "host copy is what you want"
        )
    if t.is_nested:
        raise TypeError("t must be a dense (strided) tensor, got a nested tensor; round its components "
                        "(t.unbind()) one by one")
    if t.layout != torch.strided:
        raise TypeError(f"t must be a dense (strided) tensor, got layout {t.layout}; use t.to_dense()")
    if t.dtype not in _NUMPY_DTYPE_OF and t.dtype != torch.bfloat16:
        raise TypeError(
            f"t must have dtype {_SUPPORTED_DTYPES}, got {t.dtype}; convert it with t.to(torch.float32) first"
        )
    return t.detach().resolve_neg()


def _check_rng(rng, name) -> None:
    if isinstance(rng, torch.Generator):
        if rng.device.type != "cpu":
            raise ValueError(f"{name} must be a CPU torch.Generator, got one on {rng.device}")
        return
    if rng is None or isinstance(rng, (np.random.Generator, np.random.SeedSequence)):
        return
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"{name} seed must be a non-negative int, got {rng}")
        return
    raise TypeError(
        f"{name} must be None, an int seed, a numpy.random.SeedSequence, a numpy.random.Generator "
        f"or a torch.Generator, got {type(rng).__name__}"
    )


def _seed_of(rng):
    """`rng` as :func:`rpfloat.round` takes it: a torch.Generator gives an int seed
    drawn from it (advancing it); anything else passes unchanged."""
    if not isinstance(rng, torch.Generator):
        return rng
    drawn = torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64, generator=rng)
    return int(drawn) % 2**64
