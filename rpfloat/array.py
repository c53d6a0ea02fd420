"""RPArray: NumPy arrays whose values stay in a format (SPEC §4). Work in progress."""
from __future__ import annotations

from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["RPArray", "asarray"]


class RPArray(NDArrayOperatorsMixin):
    """An array of values of a format, in a carrier ndarray (not yet implemented)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("RPArray is being built (issue 5)")


def asarray(x, fmt, mode="nearest", *, rng=None):
    """Round `x` onto `fmt` and hold it in an :class:`RPArray` (not yet implemented)."""
    raise NotImplementedError("rp.asarray is being built (issue 5)")
