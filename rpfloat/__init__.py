"""rpfloat: simulate any binary floating-point or fixed-point format on NumPy arrays.

>>> import rpfloat as rp
>>> float(rp.round(0.1, "bfloat16"))
0.10009765625
"""
from .accumulate import dot, matmul, sum
from .array import RPArray, asarray
from .faults import flip_bits
from .fixedformat import FixedFormat
from .floatformat import FloatFormat
from .modes import Mode
from .packing import pack, unpack
from .presets import format, formats, scaled_formats
from .rounding import decode, encode, round
from .scaledformat import ScaledFormat

__all__ = [
    "FloatFormat",
    "FixedFormat",
    "ScaledFormat",
    "Mode",
    "format",
    "formats",
    "scaled_formats",
    "round",
    "encode",
    "decode",
    "RPArray",
    "asarray",
    "sum",
    "dot",
    "matmul",
    "pack",
    "unpack",
    "flip_bits",
]
__version__ = "0.1.0"
