"""Ready-made formats and the name lookup :func:`format`.

Every float type of ``ml_dtypes`` (except the sign-less scale type
``float8_e8m0fnu``) has a preset of the same name with the same value set
and the same default overflow behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from .fixedformat import FixedFormat
from .floatformat import FloatFormat

__all__ = ["format", "formats"]


def _fn(exp_bits, man_bits, name, **encoding):
    """A format without inf whose NaN (if any) is given by ``encoding``."""
    return FloatFormat(exp_bits, man_bits, inf=False, name=name, **encoding)


_PRESETS = (
    FloatFormat(8, 7, name="bfloat16"),
    FloatFormat(5, 10, name="float16"),
    FloatFormat(8, 23, name="float32"),
    FloatFormat(11, 52, name="float64"),
    FloatFormat(8, 10, name="tf32"),
    _fn(4, 3, "float8_e4m3fn", nan="max"),
    FloatFormat(5, 2, name="float8_e5m2"),
    # fnuz: finite, no -0 (its code is the NaN); the all-ones exponent field
    # holds finite values and the bias is one more than IEEE's, as in ml_dtypes.
    _fn(4, 3, "float8_e4m3fnuz", nan="negzero", bias=8),
    _fn(5, 2, "float8_e5m2fnuz", nan="negzero", bias=16),
    _fn(4, 3, "float8_e4m3b11fnuz", nan="negzero", bias=11),
    FloatFormat(4, 3, name="float8_e4m3"),
    FloatFormat(3, 4, name="float8_e3m4"),
    _fn(2, 3, "float6_e2m3fn", nan=None),
    _fn(3, 2, "float6_e3m2fn", nan=None),
    _fn(2, 1, "float4_e2m1fn", nan=None),
)

_CANONICAL = {preset.name: preset for preset in _PRESETS}

_ALIASES = {
    "binary16": "float16",
    "half": "float16",
    "fp16": "float16",
    "binary32": "float32",
    "single": "float32",
    "fp32": "float32",
    "binary64": "float64",
    "double": "float64",
    "fp64": "float64",
    "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
}

_FLOAT_PATTERN = re.compile(r"e([0-9]+)m([0-9]+)", re.ASCII)
_FIXED_PATTERN = re.compile(r"(u?)q(-?[0-9]+)\.(-?[0-9]+)", re.ASCII)


def _known_names() -> str:
    aliases = ", ".join(f"{alias} ({target})" for alias, target in _ALIASES.items())
    return (
        f"presets {', '.join(_CANONICAL)}; aliases {aliases}; and the patterns "
        "'eXmY' (IEEE-style FloatFormat(X, Y)), 'qI.F' and 'uqI.F' "
        "(signed and unsigned FixedFormat(I, F))"
    )


def _lookup_preset(name: str):
    """The preset called ``name`` (any case, aliases too), or None."""
    key = name.strip().lower()
    return _CANONICAL.get(_ALIASES.get(key, key))


def format(name_or_format):
    """The format called ``name_or_format``, or the format object itself.

    Parameters
    ----------
    name_or_format : str, FloatFormat or FixedFormat
        A preset name or alias (case-insensitive), ``"eXmY"`` for the
        IEEE-style ``FloatFormat(X, Y)``, ``"qI.F"`` / ``"uqI.F"`` for a
        signed / unsigned ``FixedFormat(I, F)`` (``I`` and ``F`` may carry a
        minus sign), or a format object, returned unchanged.

    Returns
    -------
    FloatFormat or FixedFormat

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones), or a pattern
        whose numbers make an invalid format.
    TypeError
        For anything that is neither a str nor a format.

    Examples
    --------
    >>> format("E4M3")
    FloatFormat(exp_bits=4, man_bits=3, inf=False, nan='max', name='float8_e4m3fn')
    >>> format("q8.8") == FixedFormat(8, 8)
    True
    """
    if isinstance(name_or_format, (FloatFormat, FixedFormat)):
        return name_or_format
    if not isinstance(name_or_format, str):
        raise TypeError(
            "format() takes a format name (str) or a FloatFormat/FixedFormat, "
            f"got {type(name_or_format).__name__}"
        )
    preset = _lookup_preset(name_or_format)
    if preset is not None:
        return preset
    key = name_or_format.strip().lower()
    if match := _FLOAT_PATTERN.fullmatch(key):
        return FloatFormat(int(match[1]), int(match[2]), name=key)
    if match := _FIXED_PATTERN.fullmatch(key):
        unsigned, int_bits, frac_bits = match.groups()
        return FixedFormat(int(int_bits), int(frac_bits), signed=not unsigned, name=key)
    raise ValueError(f"unknown format name {name_or_format!r}; known names: {_known_names()}")


class FormatRegistry(Mapping):
    """Read-only mapping of the preset formats, also reachable as attributes.

    Iterates over the canonical names; item and attribute access also take
    the aliases, in any case.  Names such as ``"e4m7"`` or ``"q8.8"`` that
    are not presets are built by :func:`format`.

    Examples
    --------
    >>> formats.bfloat16.max == formats["BF16"].max
    True
    >>> "half" in formats, len(formats) == len(list(formats))
    (True, True)
    """

    __slots__ = ()

    def __getitem__(self, name):
        preset = _lookup_preset(name) if isinstance(name, str) else None
        if preset is None:
            raise KeyError(f"no preset format {name!r}; known names: {_known_names()}")
        return preset

    def __getattr__(self, name):
        preset = _lookup_preset(name)
        if preset is None:
            raise AttributeError(f"no preset format {name!r}; known names: {_known_names()}")
        return preset

    def __setattr__(self, name, value):
        raise AttributeError("rpfloat.formats is read-only")

    def __delattr__(self, name):
        raise AttributeError("rpfloat.formats is read-only")

    def __iter__(self) -> Iterator[str]:
        return iter(_CANONICAL)

    def __len__(self) -> int:
        return len(_CANONICAL)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_CANONICAL) | set(_ALIASES))

    def __repr__(self) -> str:
        lines = [f"    {name}: {preset!r}," for name, preset in _CANONICAL.items()]
        return "formats({\n" + "\n".join(lines) + "\n})"


formats = FormatRegistry()
