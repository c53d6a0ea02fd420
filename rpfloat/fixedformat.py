"""Binary fixed-point formats: :class:`FixedFormat`.

A value is ``k * 2**-frac_bits`` for an integer ``k`` held in a word of
``w = int_bits + frac_bits`` bits: two's complement ``k`` in
``[-2**(w-1), 2**(w-1) - 1]`` when signed, ``k`` in ``[0, 2**w - 1]`` when
unsigned.  ``int_bits`` counts the sign bit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .floatformat import (
    FLOAT64,
    MAX_ENUMERATED_BITS,
    Replaceable,
    as_bool,
    as_int,
    check_name,
    format_repr,
    narrowest_ieee_type,
)

__all__ = ["FixedFormat"]

FIXED_OVERFLOW_POLICIES = ("saturate", "wrap")

# A float64 holds every integer of up to 53 bits exactly.
MAX_WORD_BITS = FLOAT64.man_bits + 1


@dataclass(frozen=True, repr=False)
class FixedFormat(Replaceable):
    """A binary fixed-point format: integers ``k`` scaled by ``2**-frac_bits``.

    Immutable and hashable; ``==`` and ``hash`` use every field except
    ``name``.

    Parameters
    ----------
    int_bits : int
        Integer bits, the sign bit included when signed.  May be zero or
        negative as long as the word length ``int_bits + frac_bits`` is at
        least 1.
    frac_bits : int
        Fraction bits.  May be zero or negative (a negative count scales
        ``k`` up by ``2**-frac_bits``).
    signed : bool, default True
        Two's complement ``k`` when True, non-negative ``k`` when False.
    overflow : {"saturate", "wrap"}, default "saturate"
        Default overflow policy of ``rp.round``: clamp to ``[min, max]``, or
        wrap ``k`` modulo ``2**bits`` like an integer register.
    name : str, optional
        Display name; not part of ``==`` or ``hash``.

    Attributes
    ----------
    bits : int
        Word length ``int_bits + frac_bits``, between 1 and 53.
    max : float
        Largest value, ``(2**(bits-1) - 1) * eps`` signed,
        ``(2**bits - 1) * eps`` unsigned.
    min : float
        Smallest value, ``-2**(bits-1) * eps`` signed, ``0.0`` unsigned.
    eps : float
        ``2**-frac_bits``, the spacing of the values.
    carrier : type
        The narrowest of ``np.float16``, ``np.float32``, ``np.float64``
        that holds every value exactly.
    has_inf, has_nan, has_negative_zero : bool
        Always False.

    Raises
    ------
    ValueError
        For a word length outside ``1..53``, an unknown overflow policy, or
        values a float64 cannot hold.
    TypeError
        For bit counts that are not integers.

    Examples
    --------
    >>> q = FixedFormat(8, 8)
    >>> q.max, q.min, q.eps, q.carrier
    (127.99609375, -128.0, 0.00390625, <class 'numpy.float32'>)
    """

    int_bits: int
    frac_bits: int
    signed: bool = True
    overflow: str = "saturate"
    name: str | None = field(default=None, compare=False)

    def __post_init__(self):
        set_field = object.__setattr__.__get__(self)
        set_field("int_bits", as_int(self.int_bits, "int_bits"))
        set_field("frac_bits", as_int(self.frac_bits, "frac_bits"))
        set_field("signed", as_bool(self.signed, "signed"))
        if self.overflow is None:
            set_field("overflow", "saturate")
        check_name(self.name)

        if not 1 <= self.bits <= MAX_WORD_BITS:
            raise ValueError(
                f"int_bits={self.int_bits}, frac_bits={self.frac_bits}: the word "
                f"length int_bits + frac_bits = {self.bits} must be between 1 and "
                f"{MAX_WORD_BITS}; pass int_bits and frac_bits that add up to that"
            )
        if self.frac_bits > -FLOAT64.quantum_exp:
            raise ValueError(
                f"frac_bits={self.frac_bits}: a float64 cannot hold multiples of "
                f"2**-{self.frac_bits}; pass frac_bits <= {-FLOAT64.quantum_exp}"
            )
        if self._max_magnitude() > Fraction(FLOAT64.max):
            raise ValueError(
                f"int_bits={self.int_bits}: the values of this format exceed "
                f"float64's range; pass int_bits <= {FLOAT64.emax + 1}"
            )
        if not isinstance(self.overflow, str):
            raise TypeError(f"overflow must be a string or None, got {type(self.overflow).__name__}")
        if self.overflow not in FIXED_OVERFLOW_POLICIES:
            raise ValueError(
                f"overflow={self.overflow!r} is not an overflow policy of a fixed-point "
                "format; pass one of " + ", ".join(repr(p) for p in FIXED_OVERFLOW_POLICIES)
            )

    # -- exact arithmetic -------------------------------------------------------

    def _k_range(self) -> tuple[int, int]:
        """Smallest and largest integer ``k``."""
        if self.signed:
            return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        return 0, 2**self.bits - 1

    def _max_magnitude(self) -> Fraction:
        k_min, k_max = self._k_range()
        return max(-k_min, k_max) * Fraction(2) ** -self.frac_bits

    # -- public properties -----------------------------------------------------

    @property
    def bits(self) -> int:
        """Word length ``int_bits + frac_bits``."""
        return self.int_bits + self.frac_bits

    @property
    def max(self) -> float:
        """Largest value."""
        return math.ldexp(float(self._k_range()[1]), -self.frac_bits)

    @property
    def min(self) -> float:
        """Smallest (most negative) value; 0.0 when unsigned."""
        return math.ldexp(float(self._k_range()[0]), -self.frac_bits)

    @property
    def eps(self) -> float:
        """``2**-frac_bits``, the spacing of the values."""
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def has_inf(self) -> bool:
        """Always False."""
        return False

    @property
    def has_nan(self) -> bool:
        """Always False."""
        return False

    @property
    def has_negative_zero(self) -> bool:
        """Always False."""
        return False

    @functools.cached_property
    def carrier(self) -> type:
        """Narrowest of np.float16/32/64 holding every value exactly (computed once:
        arrays of the format ask for it on every operation)."""
        ieee = narrowest_ieee_type(self._precision() - 1, -self.frac_bits, self._max_magnitude())
        return ieee.dtype

    def _precision(self) -> int:
        """The most significant bits of a value: those of the largest odd integer
        ``k`` (a power-of-two magnitude, ``-2**(w-1)``, needs one bit)."""
        k_max = self._k_range()[1]
        return max(k_max - (k_max % 2 == 0), 1).bit_length()

    def values(self) -> np.ndarray:
        """Every value, sorted, as a float64 array.

        Allowed for formats of at most 24 bits.

        Examples
        --------
        >>> FixedFormat(2, 1).values()
        array([-2. , -1.5, -1. , -0.5,  0. ,  0.5,  1. ,  1.5])
        """
        if self.bits > MAX_ENUMERATED_BITS:
            raise ValueError(
                f"values() enumerates every code; allowed for formats of at most "
                f"{MAX_ENUMERATED_BITS} bits, this one has {self.bits}"
            )
        k_min, k_max = self._k_range()
        integers = np.arange(k_min, k_max + 1, dtype=np.int64)
        return np.ldexp(integers.astype(np.float64), -self.frac_bits)

    def __repr__(self) -> str:
        arguments = [("int_bits", self.int_bits), ("frac_bits", self.frac_bits)]
        if not self.signed:
            arguments.append(("signed", False))
        if self.overflow != "saturate":
            arguments.append(("overflow", self.overflow))
        if self.name is not None:
            arguments.append(("name", self.name))
        return format_repr(self, arguments)
