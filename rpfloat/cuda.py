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
from .scaling import ScaledPlan, block_layout_of, tensor_scale_of

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
        As for :func:`rpfloat.round`, scaled formats (MX, NVFP4, one scale per
        tensor or per slice) among them.
    out : device array, optional
        A C-contiguous device array of `x`'s shape and the results' dtype to
        write into; may be `x` itself (in place), must not overlap it
        otherwise. Returned as given.
    offset : int, default 0
        The flat index of `x`'s first element in a larger whole (chunks of an
        array get the bits of the whole).

    Returns
    -------
    device array
        Of `x`'s shape and dtype (float64 for float32 data onto a format whose
        values need it, as on the CPU: fixed point wider than float32, scaled
        formats whose ``carrier`` is float64), and of its kind where feasible: a CuPy array
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
    scaled = plan.__class__ is ScaledPlan
    offset = _check_offset(offset, device_x.size)
    # (an empty array is contiguous, whatever strides it has: numba's to_device keeps NumPy's zeros)
    if device_x.size and not device_x.is_c_contiguous():
        raise ValueError("rpfloat.cuda.round takes C-contiguous arrays (copy a strided one first)")
    result, device_out = _prepare_out(x, out, device_x, plan.result_dtype)
    key = random_key(rng) if plan.mode.is_stochastic else 0
    # (for an empty array too: an axis out of range is a ValueError, as on the host)
    layout = block_layout_of(tuple(device_x.shape), plan.fmt) if scaled else None
    if device_x.size == 0:
        return result
    if scaled:
        _round_scaled(device_x, device_out, plan, layout, key, offset)
        return result
    from ._kernels.cuda.kernels import configured, grid, launch, widen  # imports numba.cuda on first use

    source = _flat_bits(device_x, np.int32 if dtype == np.float32 else np.int64)
    target = _flat_bits(device_out, plan.bits)  # (the plan's carrier: the results')
    if plan.result_dtype != dtype:
        # float32 data onto a format whose values need float64 (q16.16): widened into the
        # result first, then rounded there as float64 data (the CPU's results are those)
        configured(widen, *grid(source.size))(source, target)
        source = target
    launch(source, target, plan.params, int(plan.mode), key, offset, plan.rand_bits)
    return result


def _round_scaled(device_x, device_out, plan, layout, key, offset):
    """Round the nonempty `device_x` onto ``plan.fmt`` (a scaled format; `layout`:
    ``scaling.block_layout_of`` its shape) into `device_out` (of
    ``plan.result_dtype``) with the kernels of
    ``rpfloat._kernels.cuda.blocks``: one thread per block for small blocks,
    else the blocks' largest magnitudes, their scales and the elements in turn.
    A tensor scale (NVFP4's second level) is found first, which waits for the
    device once."""
    from numba import cuda

    from ._kernels.core.scale import B_BLOCK_SIZE
    from ._kernels.cuda import blocks as kernels
    from ._kernels.cuda.kernels import configured, grid

    fmt, size = plan.fmt, device_x.size
    outer, length, inner, block_size, _ = layout
    block_size = min(block_size, length)  # (blocks past the axis's length: one block, of the axis)
    source, target = device_x.reshape(size), device_out.reshape(size)
    tensor_scale = float(tensor_scale_of(_largest_finite(source), fmt)) if fmt.tensor_scale else 1.0
    block_params = plan.block_params[:B_BLOCK_SIZE] + (block_size, 0)  # (0: values, not elements)
    float_params = (plan.float_params[0], tensor_scale, *plan.float_params[2:])
    rounding = (np.uint64(key), np.int64(offset), np.int64(plan.rand_bits))
    small_blocks, largest_of_segments, scales_of_blocks, elements = kernels.scaled_kernels(int(plan.mode))
    columns = outer * -(-length // block_size) * inner  # blocks
    if block_size <= kernels.SMALL_BLOCK:
        configured(small_blocks, *grid(columns))(source, target, outer, length, inner, block_params, float_params,
                                                 plan.element_params, plan.scale_params, *rounding)
        return
    largest = cuda.device_array(columns, np.int64)
    configured(kernels.fill, *grid(columns))(largest, 0)
    segments = columns * -(-block_size // kernels.SEGMENT)
    configured(largest_of_segments, *grid(segments))(source, largest, outer, length, inner, block_size)
    scales, inverses = cuda.device_array(columns, np.float64), cuda.device_array(columns, np.float64)
    configured(scales_of_blocks, *grid(columns))(largest, scales, inverses, block_params, float_params,
                                                 plan.scale_params)
    configured(elements, *grid(size))(source, target, scales, inverses, length, inner, block_params,
                                      plan.element_params, *rounding)


def _largest_finite(source) -> float:
    """The largest finite magnitude of the flat device array `source` (0.0 where
    there is none), in two launches; waits for the device."""
    from numba import cuda

    from ._kernels.cuda import blocks as kernels
    from ._kernels.cuda.kernels import MIN_BLOCKS, THREADS_PER_BLOCK, configured, grid

    blocks, threads = grid(source.size)
    partial = cuda.device_array(blocks * threads, np.int64)
    configured(kernels.largest_finite_keys, blocks, threads)(source, partial)
    blocks, threads = grid(min(partial.size, MIN_BLOCKS * THREADS_PER_BLOCK))  # (the least grid: 32768 threads)
    final = cuda.device_array(blocks * threads, np.int64)
    configured(kernels.largest_key, blocks, threads)(partial, final)
    return float(np.int64(final.copy_to_host().max()).view(np.float64))


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


def _prepare_out(x, out, device_x, dtype):
    """``(result, device view of it)``: `out` checked, or a new array of `x`'s
    kind and shape, of `dtype`."""
    dtype = np.dtype(dtype)
    if out is not None:
        device_out = _as_device_array(out, "out")
        if np.dtype(device_out.dtype) != dtype:
            what = "x's dtype" if dtype == np.dtype(device_x.dtype) else "the results' dtype"
            raise TypeError(f"out must have {what} {dtype}, got {device_out.dtype}")
        if tuple(device_out.shape) != tuple(device_x.shape):
            raise ValueError(f"out must have x's shape {tuple(device_x.shape)}, got {tuple(device_out.shape)}")
        if device_out.size and not device_out.is_c_contiguous():
            raise ValueError("out must be C-contiguous")
        return out, device_out
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        result = cupy.empty(x.shape, dtype)
        return result, _as_device_array(result, "result")
    if module == "torch":
        import torch

        result = torch.empty(x.shape, dtype=getattr(torch, dtype.name), device=x.device)
        return result, _as_device_array(result, "result")
    from numba import cuda

    result = cuda.device_array(tuple(device_x.shape), dtype)
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
