"""Rounding arrays that live on a CUDA GPU, without copies to the host.

:func:`round` takes any array that exposes ``__cuda_array_interface__`` (numba
device arrays, CuPy arrays, torch CUDA tensors) and rounds it on the device
with numba CUDA kernels (``rpfloat._kernels.cuda``). They share the CPU
kernels' element rounding and counter-based random stream, so the same seed
gives the same bits on the GPU as :func:`rpfloat.round` on the CPU.

Needs a CUDA GPU and numba's CUDA target (the ``cuda`` extra: ``numba-cuda``),
or numba's simulator (``NUMBA_ENABLE_CUDASIM=1``), which runs the kernels in
Python, slowly, on numba device arrays. Importing this module needs neither.
docs/gpu.md tells what the tests prove without a GPU.
"""
from __future__ import annotations

import numbers

import numpy as np

from ._plan import plan_for, random_key
from .scaling import ScaledPlan

__all__ = ["round", "is_device_array"]

_CARRIERS = (np.dtype(np.float32), np.dtype(np.float64))


def is_device_array(x) -> bool:
    """Whether `x` is an array on a CUDA device: a numba device array (the
    simulator's too) or an object exposing ``__cuda_array_interface__``.

    Examples
    --------
    >>> import numpy as np
    >>> is_device_array(np.zeros(3))
    False
    """
    return bool(getattr(x, "__cuda_ndarray__", False)) or exposes_cuda_interface(x)


def exposes_cuda_interface(x) -> bool:
    """Whether `x` has ``__cuda_array_interface__``; True also where reading it raises
    RuntimeError (torch: a CUDA tensor that requires grad)."""
    try:
        return hasattr(x, "__cuda_array_interface__")
    except RuntimeError:
        return True


def round(x, fmt, mode="nearest", *, overflow=None, rng=None, rand_bits=None, out=None, offset=0):
    """Round the CUDA array `x` onto the values of `fmt`, on the device.

    The arguments and the bits of the result are those of :func:`rpfloat.round`
    (and of ``rpfloat.rounding.round_chunk`` for `offset`): NaN keeps its bits,
    ``-0`` stays where the format has it, overflow follows `overflow`, and with
    an int seed element ``i`` (C order) draws number ``offset + i`` of the
    seed's stream, as on the CPU.

    Parameters
    ----------
    x : device array
        float32 or float64, C-contiguous, exposing ``__cuda_array_interface__``
        (a numba device array, a CuPy array, a torch CUDA tensor: ``.detach()``
        one that requires grad). Never modified unless it is `out`.
    fmt, mode, overflow, rng, rand_bits
        As for :func:`rpfloat.round`. Scaled formats are not supported yet.
    out : device array, optional
        A C-contiguous device array of `x`'s shape and dtype to write into; may
        be `x` itself (in place), must not overlap it otherwise. Returned as given.
    offset : int, default 0
        The flat index of `x`'s first element in a larger whole (chunks of an
        array get the bits of the whole).

    Returns
    -------
    device array
        Of `x`'s dtype and shape, and of its kind where feasible: a CuPy array
        for CuPy input, a torch tensor on the same device for torch input, a
        numba device array otherwise. The kernel runs on numba's default stream,
        asynchronously: the legacy default stream, which CuPy and torch use
        unless told otherwise, orders it with their work.

    Raises
    ------
    TypeError
        `x` (or `out`) is not a CUDA array, or its dtype is not float32 or float64.

    Examples
    --------
    A host array is refused (:func:`rpfloat.round` is for those):

    >>> import numpy as np, rpfloat.cuda
    >>> rpfloat.cuda.round(np.ones(3, np.float32), "bfloat16")
    Traceback (most recent call last):
    ...
    TypeError: rpfloat.cuda.round takes an array on a CUDA device (exposing __cuda_array_interface__), got numpy.ndarray; use rpfloat.round for host arrays
    """
    device_x = _as_device_array(x, "x")
    dtype = np.dtype(device_x.dtype)
    if dtype not in _CARRIERS:
        raise TypeError(f"rpfloat.cuda.round takes float32 or float64 arrays, got {dtype}")
    plan = plan_for(fmt, mode, overflow, rand_bits, dtype)
    if plan.__class__ is ScaledPlan:
        raise NotImplementedError("scaled formats are not rounded on the GPU yet; use rpfloat.round on the host")
    if plan.result_dtype != dtype:
        raise TypeError(f"{dtype} data onto {fmt!r} give {plan.result_dtype} results on the CPU, which the GPU "
                        f"kernels do not widen to yet; pass {plan.result_dtype} data")
    offset = _check_offset(offset, device_x.size)
    # (an empty array is contiguous, whatever strides it has: numba's to_device keeps NumPy's zeros)
    if device_x.size and not device_x.is_c_contiguous():
        raise ValueError("rpfloat.cuda.round takes C-contiguous arrays (copy a strided one first)")
    result, device_out = _prepare_out(x, out, device_x)
    key = random_key(rng) if plan.mode.is_stochastic else 0
    if device_x.size == 0:
        return result
    from ._kernels.cuda.kernels import launch  # imports numba.cuda on first use

    bits = plan.bits
    launch(_flat_bits(device_x, bits), _flat_bits(device_out, bits), plan.params, int(plan.mode), key, offset,
           plan.rand_bits)
    return result


def _as_device_array(x, name):
    """`x` as a numba device array (a view, never a copy)."""
    if getattr(x, "__cuda_ndarray__", False):
        return x
    if exposes_cuda_interface(x):
        from numba import cuda

        if not hasattr(cuda, "as_cuda_array"):  # numba's simulator
            raise TypeError(f"{name}: the CUDA simulator takes numba device arrays only, got "
                            f"{_type_name(x)}")
        if getattr(x, "requires_grad", False):
            raise TypeError(f"{name} is a CUDA tensor that requires grad: rpfloat.cuda.round gives no gradient; "
                            f"round {name}.detach()")
        return cuda.as_cuda_array(x)
    raise TypeError(f"rpfloat.cuda.round takes an array on a CUDA device (exposing __cuda_array_interface__), "
                    f"got {_type_name(x)}; use rpfloat.round for host arrays")


def _prepare_out(x, out, device_x):
    """``(result, device view of it)``: `out` checked, or a new array of `x`'s kind."""
    if out is not None:
        device_out = _as_device_array(out, "out")
        if np.dtype(device_out.dtype) != np.dtype(device_x.dtype):
            raise TypeError(f"out must have x's dtype {device_x.dtype}, got {device_out.dtype}")
        if tuple(device_out.shape) != tuple(device_x.shape):
            raise ValueError(f"out must have x's shape {tuple(device_x.shape)}, got {tuple(device_out.shape)}")
        if device_out.size and not device_out.is_c_contiguous():
            raise ValueError("out must be C-contiguous")
        return out, device_out
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        result = cupy.empty(x.shape, x.dtype)
        return result, _as_device_array(result, "result")
    if module == "torch":
        import torch

        result = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        return result, _as_device_array(result, "result")
    from numba import cuda

    result = cuda.device_array(tuple(device_x.shape), device_x.dtype)
    return result, result


def _flat_bits(array, bits):
    """A flat view of C-contiguous device `array` as carrier bits (int32 or int64)."""
    return array.reshape(array.size).view(bits)


def _check_offset(offset, size) -> int:
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if int(offset) + size >= 2**63:
        raise ValueError(f"offset + x.size must stay below 2**63, got offset {offset}")
    return int(offset)


def _type_name(x) -> str:
    kind = type(x)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__
