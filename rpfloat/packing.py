"""Dense bit packing of codes: :func:`pack` and :func:`unpack`.

``rp.encode`` returns every code in a whole unsigned integer (a 4-bit code takes
a byte); :func:`pack` stores ``n`` codes of ``bits`` bits in ``ceil(n * bits / 8)``
bytes, the memory they would take in hardware, and :func:`unpack` reads them back.

The layout is one little-endian bit stream: bit ``t`` of the stream is bit
``t % 8`` (counted from the least significant) of byte ``t // 8``, and code ``i``
(C order) occupies stream bits ``[i * bits, (i + 1) * bits)``, its least
significant bit first. So 4-bit codes go two to a byte, the first in the low
nibble; 6-bit codes four to three bytes; 8-, 16-, 32- and 64-bit codes are plain
little-endian integers. The last byte is padded with zero bits.

Codes are packed in groups of ``8 / gcd(bits, 8)`` codes that fill
``bits / gcd(bits, 8)`` whole bytes; each byte of a group is a few shifts and
ors of the codes it overlaps, column by column over all groups in NumPy.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from ._codes import code_array, code_dtype
from .presets import format as to_format
from .scaledformat import ScaledFormat
from .scaling import ScaledCodes, checked_scaled_codes

__all__ = ["pack", "unpack", "PackedScaled"]

_MAX_BITS = 64
_WHOLE_BYTE_DTYPES = {8: np.dtype("<u1"), 16: np.dtype("<u2"), 32: np.dtype("<u4"), 64: np.dtype("<u8")}


class PackedScaled(NamedTuple):
    """The packed codes of a scaled format, as :func:`pack` returns them for a
    ``ScaledCodes``: packed element codes, packed scale codes, the tensor scale
    (None without two-level scaling) and the shapes to unpack them to."""

    elements: np.ndarray          # uint8, ceil(elements.size * fmt.bits / 8) bytes
    scales: np.ndarray            # uint8, ceil(scales.size * fmt.scale_bits / 8) bytes
    tensor_scale: np.float32 | None
    shape: tuple                  # of the element codes (the data's shape)
    scales_shape: tuple           # of the scale codes

    @property
    def nbytes(self) -> int:
        """Bytes of packed codes, elements and scales (the tensor scale not counted)."""
        return self.elements.nbytes + self.scales.nbytes


def pack(codes, bits):
    """Pack `codes` of `bits` bits each densely into bytes.

    Parameters
    ----------
    codes : array_like of unsigned integers, or ScaledCodes
        Codes below ``2**bits`` (any integer dtype, any shape; read in C order),
        as :func:`rpfloat.encode` returns them. With a scaled format, the
        ``ScaledCodes`` that ``rp.encode(x, fmt)`` returns. Dask arrays (from
        ``rpfloat.dask.encode``) are computed, their parts together: the packed
        bytes are a NumPy array in memory.
    bits : int, format or str
        Bits per code, 1 to 64, or a format (object or name) whose ``bits`` to
        use: ``rp.pack(codes, "e2m1")`` packs 4-bit codes. A
        :class:`~rpfloat.ScaledFormat` packs a ``ScaledCodes``: element codes
        at ``fmt.bits``, scale codes at ``fmt.scale_bits``.

    Returns
    -------
    ndarray or PackedScaled
        A 1-D uint8 array of ``ceil(n * bits / 8)`` bytes (its ``.nbytes`` is
        the packed size): code ``i`` is bits ``[i * bits, (i + 1) * bits)`` of
        the array read as one little-endian bit stream (bit ``t`` is bit
        ``t % 8`` of byte ``t // 8``), padded with zero bits to a whole byte.
        4-bit codes: two to a byte, the first in the low nibble. 8-, 16-, 32-
        and 64-bit codes: plain little-endian bytes. For a scaled format, a
        :class:`PackedScaled` (elements, scales, tensor_scale, shape,
        scales_shape) that :func:`unpack` reads back with the format alone.

    Raises
    ------
    TypeError
        If `codes` are not integers, `bits` is neither an int nor a format, or
        a ScaledFormat goes with plain codes (or plain bits with ScaledCodes).
    ValueError
        If a code is negative or not below ``2**bits``, or `bits` is outside
        1..64; for a ScaledFormat, if the scale codes' shape does not fit its
        blocks over the element codes, or the codes hold a tensor scale and the
        format has none, or the other way round.

    Examples
    --------
    >>> import numpy as np, rpfloat as rp
    >>> rp.pack(np.array([1, 2, 3], np.uint8), 4)
    array([33,  3], dtype=uint8)
    >>> codes = rp.encode([0.5, 1.0, -6.0, 3.0], "e2m1")
    >>> packed = rp.pack(codes, "e2m1")
    >>> packed.nbytes, rp.unpack(packed, "e2m1", 4)
    (2, array([ 1,  2, 15,  5], dtype=uint8))
    >>> packed = rp.pack(rp.encode(np.linspace(-1, 1, 64), "mxfp4"), "mxfp4")
    >>> packed.elements.nbytes, packed.scales.nbytes
    (32, 2)
    """
    fmt, bits = _bits_of(bits)
    if isinstance(codes, ScaledCodes) and any(type(part).__module__.startswith("dask") for part in codes):
        import dask  # rpd.encode's codes: computed together, so that each chunk is rounded once

        codes = ScaledCodes(*dask.compute(*codes))
    if isinstance(fmt, ScaledFormat):
        elements, scales, tensor_scale = checked_scaled_codes(codes, fmt)
        return PackedScaled(pack(elements, fmt.bits), pack(scales, fmt.scale_bits), tensor_scale,
                            elements.shape, scales.shape)
    if isinstance(codes, ScaledCodes):
        raise TypeError("codes is a ScaledCodes: pack it with its ScaledFormat as bits, or pack "
                        "codes.elements and codes.scales each with its own bits")
    return _pack_array(_checked_codes(codes, bits), bits)


def unpack(packed, bits, count_or_shape=None):
    """The codes that :func:`pack` packed into `packed`.

    Parameters
    ----------
    packed : 1-D uint8 array_like, bytes, or PackedScaled
        Packed codes as :func:`pack` returns them; bytes beyond the ones the
        codes take are ignored. A :class:`PackedScaled` with its ScaledFormat.
    bits : int, format or str
        Bits per code (1 to 64), or a format whose ``bits`` to use, as for :func:`pack`.
    count_or_shape : int or tuple of ints
        How many codes to read, or the shape to return them in (C order).
        Required for an array; for a PackedScaled, leave it out (its shapes are kept).

    Returns
    -------
    ndarray or ScaledCodes
        The codes, of dtype ``code_dtype(bits)`` (the narrowest unsigned integer
        dtype of at least `bits` bits, as :func:`rpfloat.encode` gives), in the
        shape asked for. For a PackedScaled, the ``ScaledCodes`` that
        :func:`rpfloat.decode` takes.

    Raises
    ------
    TypeError
        If `packed` is not uint8, `count_or_shape` is neither an int nor a tuple
        of ints (or missing for an array, or given for a PackedScaled), or
        `bits` is neither an int nor a format.
    ValueError
        If `packed` holds fewer than ``ceil(count * bits / 8)`` bytes or is not
        1-D, `count_or_shape` is negative, or `bits` is outside 1..64.

    Examples
    --------
    >>> import numpy as np, rpfloat as rp
    >>> rp.unpack(np.array([0x21, 0x03], np.uint8), 4, 3)
    array([1, 2, 3], dtype=uint8)
    >>> codes = np.arange(6, dtype=np.uint16).reshape(2, 3)
    >>> rp.unpack(rp.pack(codes, 11), 11, (2, 3))
    array([[0, 1, 2],
           [3, 4, 5]], dtype=uint16)
    """
    fmt, bits = _bits_of(bits)
    if isinstance(fmt, ScaledFormat):
        if not isinstance(packed, PackedScaled):
            raise TypeError(f"packed must be a PackedScaled (what rp.pack returns for {fmt!r}), got "
                            f"{type(packed).__name__}")
        if count_or_shape is not None:
            raise TypeError("count_or_shape must be left out for a PackedScaled: it keeps its shapes")
        return ScaledCodes(unpack(packed.elements, fmt.bits, tuple(packed.shape)),
                           unpack(packed.scales, fmt.scale_bits, tuple(packed.scales_shape)),
                           packed.tensor_scale)
    if isinstance(packed, PackedScaled):
        raise TypeError("packed is a PackedScaled: unpack it with its ScaledFormat as bits")
    shape = _shape_of(count_or_shape)
    count = math.prod(shape)
    packed = _packed_bytes(packed)
    needed = -(-count * bits // 8)
    if packed.size < needed:
        raise ValueError(f"packed holds {packed.size} bytes, fewer than the {needed} that {count} codes of "
                         f"{bits} bits take")
    return _unpack_bytes(packed[:needed], bits, count).reshape(shape)


# -- validation ------------------------------------------------------------------


def _bits_of(bits):
    """``(format or None, bits per code)`` from the `bits` argument."""
    if isinstance(bits, numbers.Integral) and not isinstance(bits, (bool, np.bool_)):
        if not 1 <= bits <= _MAX_BITS:
            raise ValueError(f"bits must be from 1 to {_MAX_BITS}, got {bits}")
        return None, int(bits)
    if isinstance(bits, (bool, np.bool_, float, np.floating)):
        raise TypeError(f"bits must be an int from 1 to {_MAX_BITS} or a format, got {type(bits).__name__}")
    try:
        fmt = to_format(bits)
    except TypeError:
        raise TypeError(f"bits must be an int from 1 to {_MAX_BITS} or a format (object or name), got "
                        f"{type(bits).__name__}") from None
    if isinstance(fmt, ScaledFormat):
        return fmt, fmt.bits
    if fmt.bits is None:
        raise ValueError(f"bits: {fmt!r} has no encoding (exp_bits=None), so no codes to pack")
    return fmt, fmt.bits


def _checked_codes(codes, bits) -> np.ndarray:
    """`codes` as an integer ndarray whose values lie in [0, 2**bits)."""
    array = code_array(codes)
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < 0 or high >= 1 << bits:
            bad = low if low < 0 else high
            raise ValueError(f"codes must lie in [0, 2**{bits}) for {bits}-bit packing, got {bad}")
    return array


def _shape_of(count_or_shape) -> tuple:
    if count_or_shape is None:
        raise TypeError("count_or_shape is required: the number of codes, or their shape")
    if isinstance(count_or_shape, numbers.Integral) and not isinstance(count_or_shape, (bool, np.bool_)):
        shape = (int(count_or_shape),)
    elif isinstance(count_or_shape, tuple) and all(
            isinstance(n, numbers.Integral) and not isinstance(n, (bool, np.bool_)) for n in count_or_shape):
        shape = tuple(int(n) for n in count_or_shape)
    else:
        raise TypeError(f"count_or_shape must be an int or a tuple of ints, got {count_or_shape!r}")
    if any(n < 0 for n in shape):
        raise ValueError(f"count_or_shape must not be negative, got {count_or_shape!r}")
    return shape


def _packed_bytes(packed) -> np.ndarray:
    if isinstance(packed, (bytes, bytearray, memoryview)):
        return np.frombuffer(packed, np.uint8)
    array = np.asarray(packed)
    if array.dtype != np.uint8:
        raise TypeError(f"packed must be uint8 bytes, got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"packed must be 1-D, got shape {array.shape}")
    return array


# -- the bit arithmetic ------------------------------------------------------------


def _group(bits) -> tuple[int, int]:
    """``(codes, bytes)`` of the smallest group of codes that fills whole bytes."""
    common = math.gcd(bits, 8)
    return 8 // common, bits // common


def _overlaps(bits):
    """For each byte ``j`` and code ``k`` of a group that share stream bits: ``(j, k,
    shift)``, where byte ``j`` holds code ``k`` shifted left by `shift` bits
    (negative: right), the overlap kept by truncating to a byte or masking the code."""
    codes_per_group, bytes_per_group = _group(bits)
    for j in range(bytes_per_group):
        for k in range(codes_per_group):
            if k * bits < 8 * (j + 1) and 8 * j < (k + 1) * bits:
                yield j, k, k * bits - 8 * j


def _pack_array(array, bits) -> np.ndarray:
    count = array.size
    nbytes = -(-count * bits // 8)
    if bits in _WHOLE_BYTE_DTYPES:
        return np.array(array, dtype=_WHOLE_BYTE_DTYPES[bits], order="C", copy=True).reshape(-1).view(np.uint8)
    work = code_dtype(bits).type  # wraps on left shifts: the low byte, all a byte keeps, stays exact
    codes_per_group, bytes_per_group = _group(bits)
    groups = -(-count // codes_per_group)
    padded = np.zeros(groups * codes_per_group, work)
    padded[:count] = array.reshape(-1)
    padded = padded.reshape(groups, codes_per_group)
    packed = np.zeros(groups * bytes_per_group, np.uint8)
    columns = packed.reshape(groups, bytes_per_group)
    for j, k, shift in _overlaps(bits):
        code = padded[:, k]
        part = code << work(shift) if shift >= 0 else code >> work(-shift)
        columns[:, j] |= part.astype(np.uint8, copy=False)  # casting keeps the low byte
    return packed[:nbytes]


def _unpack_bytes(packed, bits, count) -> np.ndarray:
    dtype = code_dtype(bits)
    if bits in _WHOLE_BYTE_DTYPES:
        return np.ascontiguousarray(packed).view(_WHOLE_BYTE_DTYPES[bits]).astype(dtype)
    work = dtype.type
    codes_per_group, bytes_per_group = _group(bits)
    groups = -(-count // codes_per_group)
    whole = np.zeros(groups * bytes_per_group, np.uint8)
    whole[:packed.size] = packed
    columns = whole.reshape(groups, bytes_per_group)
    codes = np.zeros((groups, codes_per_group), dtype)
    for j, k, shift in _overlaps(bits):
        byte = columns[:, j].astype(dtype)
        codes[:, k] |= byte >> work(shift) if shift >= 0 else byte << work(-shift)
    codes &= work((1 << bits) - 1)  # the last byte of a code may hold the next code's low bits
    return codes.reshape(-1)[:count]
