"""Sums, dot and matrix products with every partial result rounded. Work in progress."""
from __future__ import annotations

__all__ = ["sum", "dot", "matmul"]


def sum(x, fmt, *, axis=None, mode="nearest", order="sequential", rng=None):  # noqa: A001
    """Sum with every addition rounded onto `fmt` (not yet implemented)."""
    raise NotImplementedError("rp.sum is being built (issue 5)")


def dot(a, b, fmt, *, acc=None, fma=False, mode="nearest", order="sequential", rng=None):
    """Dot product with rounded products and additions (not yet implemented)."""
    raise NotImplementedError("rp.dot is being built (issue 5)")


def matmul(a, b, fmt, *, acc=None, fma=False, mode="nearest", order="sequential", rng=None):
    """Matrix product with rounded products and additions (not yet implemented)."""
    raise NotImplementedError("rp.matmul is being built (issue 5)")
