"""The plan of a rounding call: the validated arguments turned into what a backend
needs (`Plan`), and the argument checks that every entry point shares.

``rp.round`` validates its arguments, makes a plan (cached per format, mode,
overflow policy, rand_bits and input dtype, so that small arrays pay for
validation once) and hands it to a backend with the data, the random key and
the flat offset of the data in a larger whole.
"""
from __future__ import annotations

import functools
import numbers
import os
from typing import NamedTuple

import numpy as np

from ._params import compute_dtype, kernel_params, widening_params
from .fixedformat import FixedFormat
from .modes import Mode, parse_mode
from .presets import format as to_format
from .scaledformat import ScaledFormat

__all__ = ["Plan", "plan_for", "result_dtype", "overflow_policy", "random_key", "check_rand_bits"]

_FLOAT_POLICIES = ("inf", "saturate", "nan")
_FIXED_POLICIES = ("saturate", "wrap")
_BITS_OF = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


class Plan(NamedTuple):
    """Everything a backend needs to round data of one input dtype onto one
    format, apart from the data, the random key and the offset."""

    result_dtype: np.dtype       # what the call returns (complex for complex input)
    carrier: np.dtype            # what the kernel computes in: float32 or float64
    bits: type                   # the carrier's bits: np.int32 or np.int64
    params: tuple                # kernel parameters (rpfloat._params.kernel_params)
    widening: tuple | None       # float32 parameters for float32 data into float64, or None
    mode: Mode
    rand_bits: int               # 1..64 (64 unless given)
    kernels: dict                # the backend's memo of its kernel choices for this plan


def plan_for(fmt, mode, overflow, rand_bits, input_dtype) -> Plan:
    """The `Plan` for these arguments, validated; cached. For a scaled format,
    a ``rpfloat.scaling.ScaledPlan``."""
    try:
        return _cached_plan(fmt, mode, overflow, rand_bits, input_dtype)
    except TypeError:
        if _hashable((fmt, mode, overflow, rand_bits, input_dtype)):
            raise  # the validation's own message, once
    # an unhashable argument: validated uncached, for a clear message (raised on its own)
    return _cached_plan.__wrapped__(fmt, mode, overflow, rand_bits, input_dtype)


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@functools.lru_cache(maxsize=1024, typed=True)  # typed: True, 1.0 and Mode(0) are not 1, 1 and 0
def _cached_plan(fmt, mode, overflow, rand_bits, input_dtype) -> Plan:
    fmt = to_format(fmt)
    if isinstance(fmt, ScaledFormat):
        from .scaling import scaled_plan  # scaling imports this module
        return scaled_plan(fmt, mode, overflow, rand_bits, input_dtype)
    mode = parse_mode(mode)
    policy = overflow_policy(fmt, overflow)
    rand_bits = check_rand_bits(rand_bits, mode)
    dtype = result_dtype(input_dtype, fmt)
    real_dtype = np.empty(0, dtype).real.dtype
    real_input = np.empty(0, input_dtype).real.dtype
    carrier = compute_dtype(real_dtype)
    widening = None
    if real_input == np.float32 and real_dtype == np.float64:
        widening = widening_params(fmt, policy)
    return Plan(
        result_dtype=dtype,
        carrier=carrier,
        bits=_BITS_OF[carrier],
        params=kernel_params(fmt, real_dtype, policy),
        widening=widening,
        mode=mode,
        rand_bits=rand_bits,
        kernels={},
    )


def result_dtype(input_dtype, fmt) -> np.dtype:
    """The dtype :func:`rpfloat.round` returns for input of `input_dtype`:
    ``np.result_type(input_dtype, fmt.carrier)``, integers and bools taken as float64.

    Examples
    --------
    >>> import numpy as np, rpfloat as rp
    >>> result_dtype(np.float32, rp.format("bfloat16")), result_dtype(np.int8, rp.format("e4m3"))
    (dtype('float32'), dtype('float64'))
    """
    return _result_dtype(np.dtype(input_dtype), fmt)


@functools.lru_cache(maxsize=1024)
def _result_dtype(input_dtype, fmt) -> np.dtype:
    if input_dtype.kind in "biu":
        input_dtype = np.dtype(np.float64)
    return np.result_type(input_dtype, fmt.carrier)


def overflow_policy(fmt, overflow) -> str:
    """The overflow policy to apply: `overflow`, or the format's default; validated."""
    if overflow is None:
        return fmt.overflow
    if not isinstance(overflow, str):
        raise TypeError(f"overflow must be a string or None, got {type(overflow).__name__}")
    if isinstance(fmt, FixedFormat):
        if overflow not in _FIXED_POLICIES:
            raise ValueError(f"overflow for a FixedFormat must be one of {_FIXED_POLICIES}, got {overflow!r}")
        return overflow
    if overflow not in _FLOAT_POLICIES:
        raise ValueError(f"overflow for a FloatFormat must be one of {_FLOAT_POLICIES}, got {overflow!r}")
    unbounded = fmt.exp_bits is None
    if overflow == "inf" and not (unbounded or fmt.has_inf):
        raise ValueError(f"overflow='inf' is impossible: {fmt!r} has no infinity; use 'saturate' or 'nan'")
    if overflow == "nan" and not (unbounded or fmt.has_nan):
        raise ValueError(f"overflow='nan' is impossible: {fmt!r} has no NaN; use 'saturate'")
    return overflow


def check_rand_bits(rand_bits, mode: Mode) -> int:
    """`rand_bits` validated for `mode`: 64 where None."""
    if rand_bits is None:
        return 64
    if not mode.is_stochastic:
        raise ValueError(f"rand_bits is for the stochastic modes only, not mode {mode.name.lower()!r}")
    if isinstance(rand_bits, bool) or not isinstance(rand_bits, numbers.Integral):
        raise TypeError(f"rand_bits must be an int from 1 to 64, got {type(rand_bits).__name__}")
    if not 1 <= rand_bits <= 64:
        raise ValueError(f"rand_bits must be from 1 to 64, got {rand_bits}")
    return int(rand_bits)


def random_key(rng) -> int:
    """A 64-bit key for the counter-based random stream from the `rng` argument:
    None (fresh OS entropy), an int seed (the same key on every call), a
    SeedSequence, or a Generator (a fresh key drawn from it on every call)."""
    if rng is None:
        return int.from_bytes(os.urandom(8), "little")  # fresh OS entropy
    if rng.__class__ is int and rng >= 0:  # the common case first: isinstance on ABCs is slow
        return _seed_key(rng)
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, 2**64, dtype=np.uint64))
    if isinstance(rng, np.random.SeedSequence):
        return int(rng.generate_state(1, np.uint64)[0])
    return _seed_key(_seed(rng))


def unused_key(rng) -> int:
    """The key of a deterministic mode, 0, once `rng` is one that `random_key`
    takes (nothing drawn from a Generator): a nonsense `rng` is an error in
    every mode."""
    if rng is not None and not (rng.__class__ is int and rng >= 0) and not isinstance(
            rng, (np.random.Generator, np.random.SeedSequence)):
        _seed(rng)
    return 0


def _seed(rng) -> int:
    """`rng` as an int seed; TypeError or ValueError for anything else."""
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"rng seed must be a non-negative int, got {rng}")
        return int(rng)
    kind = type(rng)
    if kind.__module__.startswith("torch") and kind.__name__ == "Generator":
        given = "torch.Generator, which rpfloat.torch's functions take (rpfloat.torch.round); pass an int seed here"
    else:
        given = kind.__name__
    raise TypeError(
        "rng must be None, an int seed, a numpy.random.SeedSequence or a "
        f"numpy.random.Generator, got {given}"
    )


@functools.lru_cache(maxsize=256)
def _seed_key(seed: int) -> int:
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])
