"""Ready-made formats and :func:`format`, which turns the names users try into formats.

Every float type of ``ml_dtypes`` (except the sign-less scale type
``float8_e8m0fnu``) has a preset of the same name with the same value set
and the same default overflow behaviour.  :func:`format` takes those types,
NumPy's float types and the dtypes of both as well as names.

Names are case-insensitive and ``-`` may stand for ``_``.  Besides the
preset names, :func:`format` takes

* aliases: ``binary16``, ``half``, ``fp16``, ``single``, ``fp32``,
  ``double``, ``fp64``, ``bf16``, ...;
* the OCP names ``e4m3``, ``e5m2``, ``e2m3``, ``e3m2``, ``e2m1`` and ``fp4``:
  E4M3 and E5M2 of the OCP 8-bit float specification and the element
  formats of its microscaling (MX) one, the ones other than E5M2 without
  inf (``float8_e4m3fn``, ``float6_e2m3fn``, ``float6_e3m2fn``,
  ``float4_e2m1fn``);
* a float8/float6/float4 preset's name without its ``floatN_`` prefix
  (``e4m3fn``, ``e5m2fnuz``, ``e2m1fn``, ...);
* each of these short names behind ``fpN_`` where the format has ``N`` bits
  (``fp8_e4m3``, ``fp8_e4m3fn``, ``fp6_e3m2``, ``fp4_e2m1``);
* the patterns ``eXmY`` for the IEEE-style ``FloatFormat(X, Y)``, with inf
  and NaN, for every ``X``, ``Y`` not named above, and ``qI.F`` / ``uqI.F``
  for the signed / unsigned ``FixedFormat(I, F)``;
* a constructor call as ``repr`` writes it, ``"FloatFormat(5, 2,
  subnormals=False)"``, with literal arguments only (read, never run), so
  that ``format(repr(fmt)) == fmt`` and a command line or a configuration
  file can name any format.

``float8_e4m3`` is ml_dtypes' IEEE-style type, with inf and NaN, whereas
``e4m3`` and ``fp8_e4m3`` are the OCP E4M3 ``float8_e4m3fn``, as in most
machine-learning frameworks.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType

import numpy as np

from .fixedformat import FixedFormat
from .floatformat import FloatFormat
from .scaledformat import ScaledFormat

__all__ = ["format", "formats", "scaled_formats"]


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
    # The OCP names: E4M3 and E5M2 of the 8-bit float specification and the
    # element formats of the microscaling one, none but E5M2 with inf.  The
    # pattern eXmY would build IEEE-style formats whose inf and NaN take codes.
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e2m3": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn",
    "e2m1": "float4_e2m1fn",
    "fp4": "float4_e2m1fn",  # the one 4-bit float format in use
}


def _build_spellings() -> dict[str, str]:
    """Every lower-case name of a preset, mapped to the preset's canonical name.

    A float8/float6/float4 preset is also called by its name without the
    ``floatN_`` prefix (``e4m3fn``), unless an alias takes that name (``e4m3``
    is the OCP E4M3, not ml_dtypes' IEEE-style ``float8_e4m3``).  Each short
    name and ``eXmY`` alias, with ``fpN_`` in front, names the same preset,
    ``N`` being its number of bits (``fp8_e4m3``, ``fp4_e2m1fn``).
    """
    spellings = {}
    for name in _CANONICAL:
        if match := re.fullmatch(r"float[0-9]_(e[0-9]+m[0-9]+.*)", name):
            spellings[match[1]] = name
    spellings.update(_ALIASES)
    for short_name, name in list(spellings.items()):
        if short_name.startswith("e"):
            spellings[f"fp{_CANONICAL[name].bits}_{short_name}"] = name
    spellings.update({name: name for name in _CANONICAL})
    return spellings


_SPELLINGS = _build_spellings()

# Why a name users try is not a format, for names the near-miss search would
# answer badly.  Block-scaled formats (MX, NVFP4) share one scale among a block
# of elements, which no rpfloat format models; rounding to the element format
# simulates the elements.
_NAME_HINTS = {
    "fp8": "ambiguous: 'fp8_e4m3' (float8_e4m3fn) or 'fp8_e5m2' (float8_e5m2)?",
    "float8": "ambiguous: 'float8_e4m3fn', 'float8_e5m2' or another float8 preset?",
    "fp6": "ambiguous: 'fp6_e2m3' (float6_e2m3fn) or 'fp6_e3m2' (float6_e3m2fn)?",
    "float6": "ambiguous: 'float6_e2m3fn' or 'float6_e3m2fn'?",
    "float4": "did you mean 'float4_e2m1fn' (also 'fp4')?",
    "float8_e8m0fnu": "ml_dtypes' sign-less scale type (powers of two) has no preset",
    "e8m0": "OCP's unsigned power-of-two scale type is a ScaledFormat's scale_format='e8m0' (the default), "
            "not an element format; the IEEE-style format is FloatFormat(8, 0)",
    "mxfp8": "ambiguous: 'mxfp8_e4m3' or 'mxfp8_e5m2'?",
    "mxfp6": "ambiguous: 'mxfp6_e2m3' or 'mxfp6_e3m2'?",
}

# (widths without leading zeros: "e4m03" would be the IEEE-style FloatFormat(4, 3), a trap
# beside the OCP preset "e4m3")
_FLOAT_PATTERN = re.compile(r"e(0|[1-9][0-9]*)m(0|[1-9][0-9]*)", re.ASCII)
_FIXED_PATTERN = re.compile(r"(u?)q(0|-?[1-9][0-9]*)\.(0|-?[1-9][0-9]*)", re.ASCII)  # (no leading zeros, as eXmY)
_INTEGER_PATTERN = re.compile(r"(u?)int([1-9][0-9]*)", re.ASCII)

_ACCEPTED_KINDS = (
    "a format name (str), a FloatFormat or FixedFormat, or a NumPy, ml_dtypes or torch "
    "float type or dtype with a preset of its name (float16, float32, float64, "
    "bfloat16, float8_e4m3fn, ...: every ml_dtypes float type but float8_e8m0fnu)"
)


def _known_names() -> str:
    aliases = ", ".join(f"{alias} ({target})" for alias, target in _ALIASES.items())
    return (
        f"presets {', '.join(_CANONICAL)}; aliases {aliases}; a float8/float6/float4 "
        "preset's name without 'floatN_' (e4m3fn, e5m2fnuz, e2m1fn, ...), also behind "
        "'fpN_' (fp8_e4m3, fp6_e3m2fn, ...); and the patterns 'eXmY' (IEEE-style "
        "FloatFormat(X, Y), with inf and NaN, for the X, Y not named above), 'qI.F' "
        "and 'uqI.F' (signed and unsigned FixedFormat(I, F)), 'intN' and 'uintN' (integers of "
        "N bits, 'qN.0' and 'uqN.0'); scaled presets " + ", ".join(_SCALED) + " (also 'mxfp4'); "
        "any case, '-' for '_'; or a constructor call as repr() writes it, 'FloatFormat(5, 2, subnormals=False)'"
    )


def _name_key(name: str) -> str:
    """``name`` as :data:`_SPELLINGS` spells it: stripped, lower case, ``_`` for ``-``."""
    return name.strip().lower().replace("-", "_")


def _lookup_preset(name: str):
    """The preset called ``name`` (any spelling that :func:`format` takes), or None."""
    return _CANONICAL.get(_SPELLINGS.get(_name_key(name)))


def _preset_of_dtype(float_type):
    """The preset named like ``np.dtype(float_type)``, or None."""
    try:
        dtype = np.dtype(float_type)
    except (TypeError, ValueError):  # abstract types such as np.floating
        return None
    return _CANONICAL.get(dtype.name)


def _find_preset(key):
    """The preset that a name, type or dtype means, or None (also for other objects)."""
    if isinstance(key, str):
        return _lookup_preset(key)
    if isinstance(key, (type, np.dtype)):
        return _preset_of_dtype(key)
    torch_name = _torch_dtype_name(key)
    return None if torch_name is None else _CANONICAL.get(torch_name)


def _torch_dtype_name(key):
    """The name of a torch dtype without ``torch.`` (``torch.bfloat16``: ``"bfloat16"``);
    None for anything else (torch is never imported here)."""
    kind = type(key)
    if kind.__module__ == "torch" and kind.__name__ == "dtype":
        return str(key).removeprefix("torch.")
    return None


def _type_name(kind: type) -> str:
    """``kind``'s name, with its module unless it is a builtin (``int``, ``numpy.int32``)."""
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _describe_dtype_like(float_type) -> str:
    """``float_type`` in an error message: the type or dtype and the dtype it makes."""
    if isinstance(float_type, np.dtype):
        return f"dtype {float_type}"
    try:
        dtype_name = np.dtype(float_type).name
    except (TypeError, ValueError):
        return f"type {_type_name(float_type)}"
    return f"type {_type_name(float_type)} (dtype {dtype_name})"


def _fixed_name_valid(name: str) -> bool:
    """Whether ``format(name)`` takes the fixed-point name `name`."""
    try:
        format(name)
    except ValueError:
        return False
    return True


def _unknown_name_message(name: str) -> str:
    key = _name_key(name)
    hint = _NAME_HINTS.get(key)
    if hint is None and key.startswith(("mx", "nv")):
        hint = "scaled presets: " + ", ".join(_SCALED)
    if hint is None and (whole := re.fullmatch(r"(u?)q(\d+)", key)):  # a fixed-point name without its point
        unsigned, bits = whole.groups()
        if _fixed_name_valid(f"{unsigned}int{bits}"):
            hint = f"did you mean '{unsigned}q{bits}.0' or '{unsigned}int{bits}'?"
    if hint is None:
        near_misses = difflib.get_close_matches(key, _SPELLINGS, n=3, cutoff=0.8)
        if near_misses:
            hint = "did you mean " + " or ".join(repr(spelling) for spelling in near_misses) + "?"
    hint_text = f" ({hint})" if hint else ""
    return f"unknown format name {name!r}{hint_text}; known names: {_known_names()}"


def format(name_or_format):
    """The format that ``name_or_format`` names, or the format object itself.

    Parameters
    ----------
    name_or_format : str, FloatFormat, FixedFormat, type or numpy.dtype
        One of

        * a format object, returned unchanged;
        * a preset name or any other spelling of one, in any case and with
          ``-`` for ``_`` if wished: an alias (``"half"``, ``"bf16"``,
          ``"fp32"``), the OCP names ``"e4m3"``, ``"e5m2"``, ``"e2m3"``,
          ``"e3m2"``, ``"e2m1"`` and ``"fp4"`` (``float8_e4m3fn``,
          ``float8_e5m2``, ``float6_e2m3fn``, ``float6_e3m2fn``,
          ``float4_e2m1fn``: none but E5M2 has inf), a float8/float6/float4
          preset's name without ``floatN_`` (``"e4m3fn"``, ``"e5m2fnuz"``),
          and these with ``fpN_`` in front (``"fp8_e4m3"``, ``"fp6_e3m2"``);
        * ``"eXmY"`` for any other ``X``, ``Y``: the IEEE-style
          ``FloatFormat(X, Y)``, with inf and NaN;
        * ``"qI.F"`` / ``"uqI.F"`` for a signed / unsigned
          ``FixedFormat(I, F)`` (``I`` and ``F`` may carry a minus sign);
        * ``"intN"`` / ``"uintN"`` for the signed / unsigned integers of ``N``
          bits, ``FixedFormat(N, 0)`` (``"int8"``: -128 to 127, saturating);
        * a constructor call as ``repr(fmt)`` writes it:
          ``"FloatFormat(5, 2, subnormals=False)"``, ``"FixedFormat(4, 4,
          overflow='wrap')"``, ``"ScaledFormat('e4m3', block_size=16)"``,
          with literal arguments (numbers, strings, None, True/False, tuples,
          and these calls for a ScaledFormat's formats); the text is parsed,
          never evaluated;
        * a NumPy or ml_dtypes float type or dtype (``np.float16``,
          ``np.dtype("float32")``, ``float``, ``ml_dtypes.bfloat16``,
          ``x.dtype``), or a torch float dtype (``torch.bfloat16``,
          ``torch.float8_e4m3fn``): the preset of the dtype's name.

        ``"float8_e4m3"`` is ml_dtypes' IEEE-style type, ``FloatFormat(4, 3)``,
        whereas ``"e4m3"`` and ``"fp8_e4m3"`` are the OCP ``float8_e4m3fn``.

    Returns
    -------
    FloatFormat, FixedFormat or ScaledFormat

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones), a pattern
        whose numbers make an invalid format, or a constructor call that is not
        one (an argument that is not a literal, say); a constructor's own
        errors (TypeError, ValueError) as it raises them.
    TypeError
        For an object of any other type, and for a type or dtype without a
        preset (``np.int32``, ``np.longdouble``, ``ml_dtypes.float8_e8m0fnu``).

    Examples
    --------
    >>> format("E4M3")
    FloatFormat(exp_bits=4, man_bits=3, inf=False, nan='max', name='float8_e4m3fn')
    >>> format("float8_e4m3") == FloatFormat(4, 3)
    True
    >>> format("e2m1").name, format("e2m1").has_inf, format("e2m7").has_inf
    ('float4_e2m1fn', False, True)
    >>> import numpy as np
    >>> format(np.float16) is format("half")
    True
    >>> format("q8.8") == FixedFormat(8, 8)
    True
    >>> format("int8") == FixedFormat(8, 0), format("uint4").max
    (True, 15.0)
    >>> format("FloatFormat(5, 2, subnormals=False)").min_normal
    6.103515625e-05
    >>> custom = ScaledFormat(FloatFormat(3, 2, inf=False, nan=None), block_size=8)
    >>> format(repr(custom)) == custom
    True
    """
    if isinstance(name_or_format, (FloatFormat, FixedFormat, ScaledFormat)):
        return name_or_format
    if isinstance(name_or_format, (type, np.dtype)):
        preset = _preset_of_dtype(name_or_format)
        if preset is None:
            raise TypeError(
                f"format() got {_describe_dtype_like(name_or_format)}, which has no preset; "
                f"it takes {_ACCEPTED_KINDS}"
            )
        return preset
    torch_name = _torch_dtype_name(name_or_format)
    if torch_name is not None:
        if torch_name not in _CANONICAL:
            raise TypeError(f"format() got torch.{torch_name}, which has no preset; it takes {_ACCEPTED_KINDS}")
        return _CANONICAL[torch_name]
    if not isinstance(name_or_format, str):
        hint = ("; the data come first and the format second, as in rp.round(x, fmt)"
                if isinstance(name_or_format, (np.ndarray, list, tuple)) else "")
        raise TypeError(f"format() got {_type_name(type(name_or_format))}; it takes {_ACCEPTED_KINDS}{hint}")
    if "(" in name_or_format:  # no name holds one
        return _from_constructor_call(name_or_format)
    preset = _lookup_preset(name_or_format)
    if preset is not None:
        return preset
    scaled = _lookup_scaled(name_or_format)
    if scaled is not None:
        return scaled
    key = name_or_format.strip().lower()
    if key in _NAME_HINTS:  # ("e8m0": the pattern would make it the IEEE-style FloatFormat(8, 0), a trap)
        raise ValueError(_unknown_name_message(name_or_format))
    if match := _FLOAT_PATTERN.fullmatch(key):
        return FloatFormat(int(match[1]), int(match[2]), name=key)
    if match := _FIXED_PATTERN.fullmatch(key):
        unsigned, int_bits, frac_bits = match.groups()
        return FixedFormat(int(int_bits), int(frac_bits), signed=not unsigned, name=key)
    if match := _INTEGER_PATTERN.fullmatch(key):
        unsigned, width = match.groups()
        return FixedFormat(int(width), 0, signed=not unsigned, name=key)
    raise ValueError(_unknown_name_message(name_or_format))


_CONSTRUCTORS = {"FloatFormat": FloatFormat, "FixedFormat": FixedFormat, "ScaledFormat": ScaledFormat}


def _from_constructor_call(text: str):
    """The format that `text`, a call such as ``repr`` writes
    (``"FloatFormat(5, 2, subnormals=False)"``), builds: parsed by :mod:`ast`,
    its arguments literals or nested calls of the three constructors, never
    evaluated."""
    shown = text if len(text) <= 100 else text[:97] + "..."  # (for messages)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"format {shown!r} is neither a format name nor a constructor call "
                         f"({error.msg}); e.g. 'FloatFormat(5, 2, subnormals=False)'") from None
    return _build_format(tree.body, shown)


def _build_format(node, text: str):
    """The format of the call `node` (part of `text`, shown in messages)."""
    name = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
    constructor = _CONSTRUCTORS.get(name.removeprefix("rpfloat.").removeprefix("rp."))
    if constructor is None:
        raise ValueError(f"format {text!r}: {ast.unparse(node)[:100]!r} is not a call of "
                         f"{', '.join(_CONSTRUCTORS)}; e.g. 'FloatFormat(5, 2, subnormals=False)'")
    if any(keyword.arg is None for keyword in node.keywords) or any(
            isinstance(argument, ast.Starred) for argument in node.args):
        raise ValueError(f"format {text!r}: * and ** arguments are not read; write each argument")
    arguments = [_argument_value(argument, text) for argument in node.args]
    keywords = {keyword.arg: _argument_value(keyword.value, text) for keyword in node.keywords}
    return constructor(*arguments, **keywords)


def _argument_value(node, text: str):
    if isinstance(node, ast.Call):  # a ScaledFormat's element or scale format
        return _build_format(node, text)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"format {text!r}: the argument {ast.unparse(node)[:100]!r} is not a literal "
                         "(numbers, strings, None, True, False, tuples)") from None


# Scaled presets: OCP Microscaling (blocks of 32 along the last axis, E8M0 scales,
# the floor rule) and NVIDIA's NVFP4 (E2M1 in blocks of 16, E4M3 scales).
_SCALED = {
    scaled.name: scaled
    for scaled in (
        ScaledFormat(_CANONICAL["float8_e4m3fn"], block_size=32, name="mxfp8_e4m3"),
        ScaledFormat(_CANONICAL["float8_e5m2"], block_size=32, name="mxfp8_e5m2"),
        ScaledFormat(_CANONICAL["float6_e2m3fn"], block_size=32, name="mxfp6_e2m3"),
        ScaledFormat(_CANONICAL["float6_e3m2fn"], block_size=32, name="mxfp6_e3m2"),
        ScaledFormat(_CANONICAL["float4_e2m1fn"], block_size=32, name="mxfp4_e2m1"),
        # OCP MXINT8: 8-bit two's complement elements with an implicit scale of 2**-6
        ScaledFormat(FixedFormat(2, 6, name="int8_mx"), block_size=32, name="mxint8"),
        ScaledFormat(_CANONICAL["float4_e2m1fn"], block_size=16, scale_format=_CANONICAL["float8_e4m3fn"],
                     name="nvfp4"),
    )
}
scaled_formats = MappingProxyType(_SCALED)


def _lookup_scaled(name: str):
    """The scaled preset called ``name``: its canonical name, ``mxfp4`` (the one
    MXFP4), or an MX name whose element part has its ``floatN_`` and ``fn``
    parts (``mxfp8_float8_e4m3fn``, ``mxfp6_e3m2fn``); else None."""
    key = _name_key(name)
    if key == "mxfp4":
        key = "mxfp4_e2m1"
    if match := re.fullmatch(r"(mx(?:fp[0-9]|int8))_(?:float[0-9]_)?(e[0-9]+m[0-9]+)(?:fn)?", key):
        key = f"{match[1]}_{match[2]}"
    return _SCALED.get(key)


class FormatRegistry(Mapping):
    """Read-only mapping of the preset formats, also reachable as attributes.

    Iterates over the canonical names; item and attribute access also take
    every other spelling of a preset that :func:`format` takes, and item
    access the NumPy and ml_dtypes float types and dtypes.  Names such as
    ``"e4m7"`` or ``"q8.8"`` that are not presets are built by :func:`format`.

    Examples
    --------
    >>> formats.bfloat16.max == formats["BF16"].max
    True
    >>> "half" in formats, len(formats) == len(list(formats))
    (True, True)
    >>> formats["e3m2"] is formats.float6_e3m2fn
    True
    """

    __slots__ = ()

    def __getitem__(self, key):
        preset = _find_preset(key)
        if preset is None:
            raise KeyError(f"no preset format {key!r}; known names: {_known_names()}")
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
        spellings = {spelling for spelling in _SPELLINGS if spelling.isidentifier()}
        return sorted(set(super().__dir__()) | spellings)

    def __repr__(self) -> str:
        lines = [f"    {name}: {preset!r}," for name, preset in _CANONICAL.items()]
        return "formats({\n" + "\n".join(lines) + "\n})"


formats = FormatRegistry()
