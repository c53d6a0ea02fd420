"""Binary floating-point formats: :class:`FloatFormat`.

A format is plain, immutable data.  Every derived quantity (``max``,
``emin``, ``carrier``, ...) is computed exactly from the bit widths and the
encoding flags, never typed in.

Encoding of a code ``S EEEE MMM`` (sign, ``exp_bits`` exponent bits,
``man_bits`` significand bits) with exponent field ``f`` and significand
field ``s``::

    f == 0:        (-1)**S * s * 2**(emin - man_bits)            subnormal
    0 < f:         (-1)**S * (2**man_bits + s) * 2**(f - bias - man_bits)

The all-ones exponent field ``f == 2**exp_bits - 1`` depends on ``nan``:

    "ieee"     reserved: inf for s == 0 when inf=True, NaN otherwise
    "max"      finite, except s == all ones, which is NaN
    "negzero"  finite; the -0 code is the only NaN
    None       finite; there is no NaN
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

__all__ = ["FloatFormat"]

NAN_ENCODINGS = ("ieee", "max", "negzero", None)
FLOAT_OVERFLOW_POLICIES = ("inf", "saturate", "nan")

# Largest number of bits for which ``values()`` enumerates every code.
MAX_ENUMERATED_BITS = 24


@dataclass(frozen=True)
class _IEEEType:
    """Exact parameters of one IEEE binary interchange type NumPy provides."""

    dtype: type
    man_bits: int
    emin: int
    max: float

    @property
    def emax(self) -> int:
        return math.frexp(self.max)[1] - 1

    @property
    def quantum_exp(self) -> int:
        """Exponent of the smallest subnormal: every value is a multiple of it."""
        return self.emin - self.man_bits


def _ieee_type(dtype: type) -> _IEEEType:
    info = np.finfo(dtype)
    return _IEEEType(dtype, int(info.nmant), int(info.minexp), float(info.max))


# Candidate carriers, narrowest first.
IEEE_TYPES = tuple(_ieee_type(t) for t in (np.float16, np.float32, np.float64))
FLOAT64 = IEEE_TYPES[-1]


def narrowest_ieee_type(man_bits: int, quantum_exp: int, max_value) -> _IEEEType | None:
    """Narrowest IEEE type holding a value set exactly, or None if none does.

    The value set is described by the significand bits it needs where the
    IEEE type is normal (``man_bits``), the exponent of its finest spacing
    (every value is a multiple of ``2**quantum_exp``) and its largest
    magnitude ``max_value`` (an int or Fraction, compared exactly).
    """
    for ieee in IEEE_TYPES:
        if (
            man_bits <= ieee.man_bits
            and quantum_exp >= ieee.quantum_exp
            and max_value <= Fraction(ieee.max)
        ):
            return ieee
    return None


def as_int(value, argument: str) -> int:
    """``value`` as a Python int; TypeError naming ``argument`` otherwise."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{argument} must be an integer, not a bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{argument} must be an integer, got {value!r} "
            f"of type {type(value).__name__}; pass e.g. {argument}=4"
        ) from None


def as_bool(value, argument: str) -> bool:
    """``value`` as a Python bool; TypeError naming ``argument`` otherwise."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{argument} must be True or False, got {value!r}")


def check_name(name) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {name!r}")


def format_repr(obj, arguments) -> str:
    """``Class(arg=value, ...)`` for the (name, value) pairs given."""
    inner = ", ".join(f"{key}={value!r}" for key, value in arguments)
    return f"{type(obj).__name__}({inner})"


class Replaceable:
    """The ``replace`` method that FloatFormat, FixedFormat and ScaledFormat share."""

    def replace(self, **changes):
        """A copy of the format with the fields in `changes` set: a format differs
        from its preset by one setting (subnormals off, another overflow policy,
        blocks along another axis). The name is dropped unless `changes` gives one,
        as it named the format before the change. Invalid settings raise as the
        constructor does.

        Examples
        --------
        >>> import rpfloat as rp
        >>> rp.format("bfloat16").replace(subnormals=False)
        FloatFormat(exp_bits=8, man_bits=7, subnormals=False)
        >>> rp.format("mxfp8_e4m3").replace(axis=0)
        ScaledFormat(element='float8_e4m3fn', block_size=32, axis=0)
        """
        changes.setdefault("name", None)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, repr=False)
class FloatFormat(Replaceable):
    """A binary floating-point format with sign, exponent and significand bits.

    Immutable and hashable; ``==`` and ``hash`` use every field except
    ``name``.  Defaults are resolved on construction, so formats that hold
    the same values with the same default overflow compare equal.

    Parameters
    ----------
    exp_bits : int or None
        Number of exponent bits, ``>= 1``.  ``None`` gives an unbounded
        exponent: only the significand is rounded, and the exponent range
        (subnormals, inf, NaN) is that of the result dtype, so ``bias``,
        ``subnormals``, ``inf`` and ``nan`` must keep their defaults.
    man_bits : int
        Number of stored significand bits, ``>= 0`` (precision is
        ``man_bits + 1``).
    bias : int, optional
        Exponent bias; default ``2**(exp_bits - 1) - 1``.  Must stay ``None``
        when ``exp_bits`` is ``None``.
    subnormals : bool, default True
        ``False``: no subnormal numbers; the values jump from 0 to
        ``min_normal``.
    inf : bool, default True
        Whether ``+-inf`` are encodable.  Only possible with ``nan="ieee"``.
    nan : {"ieee", "max", "negzero", None}, default "ieee"
        Where NaN lives.  ``"ieee"``: the all-ones exponent field is reserved
        (inf when the significand is 0 and ``inf=True``, NaN otherwise).
        ``"max"``: only the all-ones code (per sign) is NaN (OCP E4M3).
        ``"negzero"``: the code of ``-0`` is the only NaN and there is no
        ``-0`` (the ``fnuz`` formats).  ``None``: no NaN code.
    overflow : {"inf", "saturate", "nan"}, optional
        Default overflow policy of ``rp.round``.  Default ``"inf"`` when the
        format has inf, else ``"nan"`` when it has a NaN code, else
        ``"saturate"``.
    name : str, optional
        Display name; not part of ``==`` or ``hash``.

    Attributes
    ----------
    bits : int or None
        Total width ``1 + exp_bits + man_bits``.
    precision : int
        Significand precision ``man_bits + 1``.
    bias : int or None
        Exponent bias.
    emin : int or None
        Exponent of the smallest normal number, ``1 - bias``.
    emax : int or None
        ``floor(log2(max))``.
    max : float or None
        Largest finite value.
    min : float or None
        Most negative finite value, ``-max``.
    min_normal : float or None
        Smallest positive normal number, ``2**emin``.  Alias
        ``smallest_normal``.
    smallest_subnormal : float or None
        Smallest positive value, ``2**(emin - man_bits)``; equal to
        ``min_normal`` when ``subnormals=False``.
    eps : float
        ``2**-man_bits``, the spacing of the values in ``[1, 2)``.
    carrier : type
        The narrowest of ``np.float16``, ``np.float32``, ``np.float64``
        that holds every value exactly.
    has_inf, has_nan, has_negative_zero : bool
        Whether the format encodes ``+-inf``, a NaN, ``-0``.

    Raises
    ------
    ValueError
        For an invalid combination, e.g. ``exp_bits=0``, ``inf=True`` with
        ``nan != "ieee"``, an overflow policy the format cannot express, or
        a format whose values a float64 cannot hold exactly.
    TypeError
        For bit counts that are not integers or flags that are not bools.

    Examples
    --------
    >>> e4m3 = FloatFormat(4, 3, inf=False, nan="max")
    >>> e4m3.max, e4m3.min_normal, e4m3.smallest_subnormal, e4m3.emax
    (448.0, 0.015625, 0.001953125, 8)
    >>> FloatFormat(8, 7).carrier
    <class 'numpy.float32'>
    """

    exp_bits: int | None
    man_bits: int
    bias: int | None = None
    subnormals: bool = True
    inf: bool = True
    nan: str | None = "ieee"
    overflow: str | None = None
    name: str | None = field(default=None, compare=False)

    def __post_init__(self):
        set_field = object.__setattr__.__get__(self)
        if self.exp_bits is not None:
            set_field("exp_bits", as_int(self.exp_bits, "exp_bits"))
        set_field("man_bits", as_int(self.man_bits, "man_bits"))
        if self.bias is not None:
            set_field("bias", as_int(self.bias, "bias"))
        set_field("subnormals", as_bool(self.subnormals, "subnormals"))
        set_field("inf", as_bool(self.inf, "inf"))
        check_name(self.name)

        self._check_bits()
        self._check_encoding()
        if self.exp_bits is not None and self.bias is None:
            set_field("bias", 2 ** (self.exp_bits - 1) - 1)
        if self.exp_bits is not None:
            self._check_range()
        if self.overflow is None:
            set_field("overflow", self._default_overflow())
        self._check_overflow()

    # -- validation ---------------------------------------------------------

    def _check_bits(self):
        if self.exp_bits is not None and self.exp_bits < 1:
            raise ValueError(
                f"exp_bits={self.exp_bits}: a float format needs exp_bits >= 1; "
                "pass exp_bits=None for an unbounded exponent, or use "
                "FixedFormat for a format without exponent"
            )
        if self.man_bits < 0:
            raise ValueError(f"man_bits={self.man_bits}: pass man_bits >= 0")
        if self.man_bits > FLOAT64.man_bits:
            raise ValueError(
                f"man_bits={self.man_bits}: a float64 cannot hold more than "
                f"{FLOAT64.man_bits} significand bits exactly; pass "
                f"man_bits <= {FLOAT64.man_bits}"
            )
        if self.exp_bits is None and self.bias is not None:
            raise ValueError(
                f"bias={self.bias} needs a bounded exponent; pass bias=None "
                "with exp_bits=None, or give exp_bits"
            )
        # Every exponent field but the all-ones one holds normal numbers, so
        # exp_bits bits span at least 2**exp_bits - 2 binades; float64 spans
        # 2098 (from its smallest subnormal to its largest binade).
        float64_binades = FLOAT64.emax - FLOAT64.quantum_exp + 1
        float64_exp_bits = (float64_binades + 2).bit_length() - 1
        if self.exp_bits is not None and self.exp_bits > float64_exp_bits:
            raise ValueError(
                f"exp_bits={self.exp_bits}: a float64 cannot hold the values of a "
                f"format with more than {float64_exp_bits} exponent bits; pass "
                f"exp_bits <= {float64_exp_bits}"
            )

    def _check_encoding(self):
        if self.nan not in NAN_ENCODINGS:
            raise ValueError(
                f"nan={self.nan!r} is not a NaN encoding; pass one of "
                + ", ".join(repr(n) for n in NAN_ENCODINGS)
            )
        if self.inf and self.nan != "ieee":
            raise ValueError(
                f"inf=True needs nan='ieee' (the all-ones exponent field holds "
                f"inf); with nan={self.nan!r} pass inf=False"
            )
        if self.exp_bits is None:
            # The range, subnormals, inf and NaN are the result dtype's.
            for argument, value, default in (
                ("nan", self.nan, "ieee"),
                ("inf", self.inf, True),
                ("subnormals", self.subnormals, True),
            ):
                if value != default:
                    raise ValueError(
                        f"{argument}={value!r} needs a bounded exponent; with "
                        "exp_bits=None the exponent range, subnormals, inf and NaN "
                        f"are those of the result dtype, so pass {argument}={default!r} "
                        "or give exp_bits"
                    )
        if self.exp_bits is not None and self._top_finite_field() < 1:
            raise ValueError(
                f"exp_bits={self.exp_bits} with nan={self.nan!r} and "
                f"man_bits={self.man_bits} leaves no normal numbers (the only "
                "nonzero exponent field holds no finite value); pass a larger exp_bits"
            )

    def _check_range(self):
        quantum_exp = self._quantum_exp()
        if quantum_exp < FLOAT64.quantum_exp:
            raise ValueError(
                f"bias={self.bias}: the values of this format are multiples of "
                f"2**{quantum_exp}, finer than float64's 2**{FLOAT64.quantum_exp}; "
                "pass a smaller bias, fewer exp_bits or fewer man_bits"
            )
        # (the exponent first: a bias such as -2**40 would make the exact power take all memory)
        if self._max_parts()[1] >= 1024 or self._max_exact() > Fraction(FLOAT64.max):
            raise ValueError(
                f"bias={self.bias}: the largest value 2**{self.emax} of this format "
                "is above float64's largest; pass a larger bias or fewer exp_bits"
            )

    def _default_overflow(self) -> str:
        if self.has_inf:
            return "inf"
        if self.has_nan:
            return "nan"
        return "saturate"

    def _check_overflow(self):
        if not isinstance(self.overflow, str):
            raise TypeError(f"overflow must be a string or None, got {type(self.overflow).__name__}")
        if self.overflow not in FLOAT_OVERFLOW_POLICIES:
            raise ValueError(
                f"overflow={self.overflow!r} is not an overflow policy of a float "
                "format; pass one of " + ", ".join(repr(p) for p in FLOAT_OVERFLOW_POLICIES)
            )
        if self.overflow == "inf" and not self.has_inf:
            raise ValueError(
                "overflow='inf' on a format without inf; pass overflow='saturate'"
                + (" or overflow='nan'" if self.has_nan else "")
            )
        if self.overflow == "nan" and not self.has_nan:
            raise ValueError(
                "overflow='nan' on a format without NaN; pass overflow='saturate'"
                + (" or overflow='inf'" if self.has_inf else "")
            )

    def replace(self, **changes):
        """A copy of the format with the fields in `changes` set (the name
        dropped unless given). A change of ``exp_bits`` without a ``bias``
        takes the new width's default bias where the format had its width's.

        Examples
        --------
        >>> import rpfloat as rp
        >>> rp.format("bfloat16").replace(exp_bits=9)        # e9m7, bias 255
        FloatFormat(exp_bits=9, man_bits=7)
        >>> rp.format("bfloat16").replace(exp_bits=None)     # bfloat16's precision only
        FloatFormat(exp_bits=None, man_bits=7)
        """
        if "exp_bits" in changes and "bias" not in changes and self.exp_bits is not None \
                and self.bias == 2 ** (self.exp_bits - 1) - 1:
            changes["bias"] = None
        return super().replace(**changes)

    # -- exact encoding arithmetic -------------------------------------------

    def _top_field(self) -> int:
        return 2**self.exp_bits - 1

    def _top_finite_field(self) -> int:
        """Largest exponent field that holds a finite nonzero code."""
        top = self._top_field()
        if self.nan == "ieee" or (self.nan == "max" and self.man_bits == 0):
            return top - 1
        return top

    def _max_significand(self) -> int:
        """Largest significand (hidden bit included) in the top finite field."""
        all_ones = 2 ** (self.man_bits + 1) - 1
        if self.nan == "max" and self._top_finite_field() == self._top_field():
            return all_ones - 1
        return all_ones

    def _max_parts(self) -> tuple[int, int]:
        """``(significand, exponent)`` with ``max == significand * 2**exponent``."""
        exponent = self._top_finite_field() - self.bias - self.man_bits
        return self._max_significand(), exponent

    def _max_exact(self) -> Fraction:
        significand, exponent = self._max_parts()
        return significand * Fraction(2) ** exponent

    def _quantum_exp(self) -> int:
        """Exponent of the finest spacing: every value is a multiple of 2**it."""
        emin = 1 - self.bias
        only_powers_of_two_at_emin = (
            not self.subnormals
            and self._top_finite_field() == 1
            and self._max_significand() == 2**self.man_bits
        )
        if self.man_bits == 0 or only_powers_of_two_at_emin:
            return emin
        return emin - self.man_bits

    # -- public properties -----------------------------------------------------

    @property
    def bits(self) -> int | None:
        """Total width ``1 + exp_bits + man_bits``, or None for exp_bits=None."""
        if self.exp_bits is None:
            return None
        return 1 + self.exp_bits + self.man_bits

    @property
    def precision(self) -> int:
        """Significand precision ``man_bits + 1``."""
        return self.man_bits + 1

    @property
    def emin(self) -> int | None:
        """Exponent of the smallest normal number, ``1 - bias``."""
        if self.exp_bits is None:
            return None
        return 1 - self.bias

    @property
    def emax(self) -> int | None:
        """``floor(log2(max))``."""
        if self.exp_bits is None:
            return None
        significand, exponent = self._max_parts()
        return significand.bit_length() - 1 + exponent

    @property
    def max(self) -> float | None:
        """Largest finite value."""
        if self.exp_bits is None:
            return None
        significand, exponent = self._max_parts()
        return math.ldexp(float(significand), exponent)

    @property
    def min(self) -> float | None:
        """Most negative finite value, ``-max``."""
        if self.exp_bits is None:
            return None
        return -self.max

    @property
    def min_normal(self) -> float | None:
        """Smallest positive normal number, ``2**emin``."""
        if self.exp_bits is None:
            return None
        return math.ldexp(1.0, self.emin)

    smallest_normal = min_normal

    @property
    def smallest_subnormal(self) -> float | None:
        """Smallest positive value (``min_normal`` without subnormals)."""
        if self.exp_bits is None:
            return None
        if not self.subnormals:
            return self.min_normal
        return math.ldexp(1.0, self.emin - self.man_bits)

    @property
    def eps(self) -> float:
        """``2**-man_bits``: the spacing of the values in ``[1, 2)``."""
        return math.ldexp(1.0, -self.man_bits)

    @property
    def has_inf(self) -> bool:
        """Whether ``+-inf`` are encodable."""
        return self.inf

    @property
    def has_nan(self) -> bool:
        """Whether some code is NaN (always True for exp_bits=None)."""
        if self.nan is None:
            return False
        if self.nan == "ieee" and self.exp_bits is not None:
            # With man_bits=0 the reserved field's only code is inf.
            return self.man_bits > 0 or not self.inf
        return True

    @property
    def has_negative_zero(self) -> bool:
        """Whether ``-0`` is a value (False only for ``nan="negzero"``)."""
        return self.nan != "negzero"

    @functools.cached_property
    def carrier(self) -> type:
        """Narrowest of np.float16/32/64 holding every value exactly (computed once:
        arrays of the format ask for it on every operation)."""
        if self.exp_bits is None:
            return next(t.dtype for t in IEEE_TYPES if self.man_bits <= t.man_bits)
        ieee = narrowest_ieee_type(self.man_bits, self._quantum_exp(), self._max_exact())
        return ieee.dtype

    def values(self) -> np.ndarray:
        """Every distinct finite value, sorted, as a float64 array (+0 once).

        Allowed for formats of at most 24 bits.

        Examples
        --------
        >>> FloatFormat(2, 1, inf=False, nan=None).values().tolist()
        [-6.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
        """
        if self.exp_bits is None:
            raise ValueError("values() needs a bounded exponent; this format has exp_bits=None")
        if self.bits > MAX_ENUMERATED_BITS:
            raise ValueError(
                f"values() enumerates every code; allowed for formats of at most "
                f"{MAX_ENUMERATED_BITS} bits, this one has {self.bits}"
            )
        # Positive codes, in code order, which is also increasing value order.
        fraction_count = 2**self.man_bits
        fields = np.arange(self._top_finite_field() + 1)[:, None]
        fractions = np.arange(fraction_count, dtype=np.float64)[None, :]
        hidden_bit = np.where(fields > 0, float(fraction_count), 0.0)
        # (the significand times its power of two in one ldexp: exact, where a separate
        # scale 2**(emin - man_bits) may underflow float64 for formats near its bottom)
        magnitudes = np.ldexp(hidden_bit + fractions, np.maximum(fields, 1) - self.bias - self.man_bits)
        positive = (magnitudes if self.subnormals else magnitudes[1:]).ravel()
        if self._max_significand() != 2 * fraction_count - 1:
            positive = positive[:-1]  # the all-ones code is NaN
        if not self.subnormals:
            positive = np.concatenate([[0.0], positive])
        return np.concatenate([-positive[:0:-1], positive])

    def __repr__(self) -> str:
        arguments = [("exp_bits", self.exp_bits), ("man_bits", self.man_bits)]
        if self.exp_bits is not None and self.bias != 2 ** (self.exp_bits - 1) - 1:
            arguments.append(("bias", self.bias))
        if not self.subnormals:
            arguments.append(("subnormals", False))
        if not self.inf:
            arguments.append(("inf", False))
        if self.nan != "ieee":
            arguments.append(("nan", self.nan))
        if self.overflow != self._default_overflow():
            arguments.append(("overflow", self.overflow))
        if self.name is not None:
            arguments.append(("name", self.name))
        return format_repr(self, arguments)
