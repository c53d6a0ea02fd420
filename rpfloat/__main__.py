"""``python -m rpfloat``: the command line (docs/cli.md).

``python -m rpfloat`` with no command, or ``python -m rpfloat demo``, prints a
table of the preset formats and a small rounding demo; ``info`` tabulates
formats; ``round`` rounds a .npy/.npz file into another, chunk by chunk, and
prints its statistics; ``bench`` runs the repository's benchmark. ``--help``
lists the commands, ``COMMAND --help`` each one's arguments.

Exit status: 0 on success, 1 where an input file cannot be read or the output
cannot be written, 2 for bad arguments (the message names the argument).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import decimal
import math
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

import rpfloat as rp
from rpfloat._codes import code_dtype, encode_values
from rpfloat._plan import plan_for, random_key
from rpfloat.modes import parse_mode
from rpfloat.rounding import input_array, round_chunk
from rpfloat.scaling import (
    codes_of_run, run_blocks_of_whole, scale_shape, scaled_plan, tensor_scale_of, whole_input, whole_summary,
)
from rpfloat.stats import RoundingStats, kernel_limits, packed_nbytes, rounding_stats

DEMO_FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "q8.8")


def sample() -> np.ndarray:
    """A few awkward numbers and one period of a sine wave."""
    awkward = [np.pi, 1 / 3, 1e-3, 1000.5, 70000.0, 1e-8, -2.5e-5]
    sine = np.sin(np.linspace(0.1, 0.1 + 2 * np.pi, 8, endpoint=False))
    return np.concatenate([awkward, sine])


def preset_table() -> str:
    header = ("name", "bits", "max", "min normal", "smallest subnormal", "eps")
    rows = [header]
    for name, fmt in rp.formats.items():
        constants = (fmt.max, fmt.min_normal, fmt.smallest_subnormal, fmt.eps)
        rows.append((name, str(fmt.bits), *(_number(value) for value in constants)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join([row[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in zip(row[1:], widths[1:]))])
        for row in rows
    ]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def max_relative_error(x: np.ndarray, rounded: np.ndarray, where: np.ndarray) -> float:
    """Largest ``|rounded - x| / |x|`` over ``x[where]`` (inf where a value overflowed)."""
    chosen = where & (x != 0)
    if not chosen.any():
        return 0.0
    with np.errstate(invalid="ignore"):
        error = np.abs(rounded[chosen].astype(np.float64) - x[chosen]) / np.abs(x[chosen])
    return float(np.max(np.where(np.isnan(error), np.inf, error)))


def in_range(x: np.ndarray, fmt) -> np.ndarray:
    """Where ``|x|`` lies between the smallest normal (fixed: eps) and max."""
    smallest = fmt.eps if isinstance(fmt, rp.FixedFormat) else fmt.min_normal
    return (np.abs(x) >= smallest) & (np.abs(x) <= fmt.max)


def rounding_table(x: np.ndarray) -> str:
    results = {name: rp.round(x, name) for name in DEMO_FORMATS}
    width = max(14, *(len(name) for name in DEMO_FORMATS))
    header = "input".rjust(width) + "".join(name.rjust(width + 2) for name in DEMO_FORMATS)
    lines = [header, "-" * len(header)]
    for i, value in enumerate(x):
        cells = "".join(f"{float(results[name][i]):.8g}".rjust(width + 2) for name in DEMO_FORMATS)
        lines.append(f"{value:.8g}".rjust(width) + cells)
    lines.append("-" * len(header))
    everywhere = np.ones(x.shape, dtype=bool)
    for label, where_of in (
        ("max rel. error", lambda fmt: everywhere),
        ("... in range*", lambda fmt: in_range(x, fmt)),
    ):
        errors = (max_relative_error(x, results[name], where_of(rp.format(name))) for name in DEMO_FORMATS)
        lines.append(label.rjust(width) + "".join(f"{error:.3g}".rjust(width + 2) for error in errors))
    lines.append("* inputs with min normal (fixed point: eps) <= |x| <= max; floats stay within eps/2")
    return "\n".join(lines)


def run_demo(arguments: argparse.Namespace) -> int:
    """``demo``: print the preset table and the rounding demo; exit code 0."""
    print("rpfloat preset formats (values exact where short, else to 8 digits)\n")
    print(preset_table())
    print('\nrp.round(x, fmt): mode "nearest", each format\'s default overflow')
    print("(inf for bfloat16/float16/e5m2, NaN for e4m3fn, saturation for q8.8)\n")
    print(rounding_table(sample()))
    return 0


# -- info ---------------------------------------------------------------------------------

NAN_ENCODINGS = {  # FloatFormat.nan: where its NaN codes are
    "ieee": "exp. all ones",
    "max": "all-ones code",
    "negzero": "code of -0",
    None: "none",
}


def format_argument(name: str):
    """A FORMAT argument: the format :func:`rpfloat.format` makes of `name`
    (argparse reports an unknown name, naming the argument, and exits 2)."""
    try:
        return rp.format(name)
    except (TypeError, ValueError) as error:
        if Path(name).suffix.lower() in (".npy", ".npz") or os.path.sep in name:
            raise argparse.ArgumentTypeError(
                f"{name!r} is a file, not a format name: info describes formats; to check a file against a "
                f"format, round it: python -m rpfloat round {name} /dev/null --format FORMAT") from None
        raise argparse.ArgumentTypeError(str(error)) from None


def _number(value) -> str:
    """`value` exactly where that is short, else to 8 digits; "-" for None."""
    if value is None:
        return "-"
    exact = str(decimal.Decimal(float(value)))  # (every float is a decimal fraction exactly)
    return exact if len(exact) <= 12 else f"{value:.8g}"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """`rows` under `header`: the first column left-aligned, the others right-aligned."""
    rows = [tuple(header), *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join([row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:]))])
             for row in rows]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def format_row(fmt) -> tuple[str, ...]:
    """One row of the element-format table (see :data:`FORMAT_HEADER`)."""
    name = fmt.name or repr(fmt)
    if isinstance(fmt, rp.FixedFormat):
        return (name, str(fmt.bits), _number(fmt.max), _number(fmt.min), "-", "-", _number(fmt.eps), "no", "none")
    return (name, "-" if fmt.bits is None else str(fmt.bits), _number(fmt.max), _number(fmt.min),
            _number(fmt.min_normal), _number(fmt.smallest_subnormal), _number(fmt.eps),
            "yes" if fmt.has_inf else "no", NAN_ENCODINGS[fmt.nan] if fmt.has_nan else "none")


FORMAT_HEADER = ("name", "bits", "max", "min", "min normal", "smallest subnormal", "eps", "inf", "NaN")


def _readable_name(fmt) -> str:
    """A name of `fmt` that rp.format reads back (the q notation of a fixed
    format whose own name it does not know, as mxint8's element), else its repr."""
    candidates = [fmt.name] if fmt.name else []
    if isinstance(fmt, rp.FixedFormat):
        candidates.append(f"{'' if fmt.signed else 'u'}q{fmt.int_bits}.{fmt.frac_bits}")
    for name in candidates:
        try:
            if rp.format(name) == fmt:
                return name
        except (TypeError, ValueError):
            pass
    return repr(fmt)


def scaled_row(fmt: rp.ScaledFormat) -> tuple[str, ...]:
    """One row of the scaled-format table (see :data:`SCALED_HEADER`)."""
    element = _readable_name(fmt.element)
    if fmt.scale_format == "e8m0":
        scale = "e8m0"
    elif isinstance(fmt.scale_format, tuple):
        scale = f"2**[{fmt.scale_format[0]}, {fmt.scale_format[1]}]"
    else:
        scale = fmt.scale_format.name or repr(fmt.scale_format)
    if fmt.tensor_scale:
        scale += " x tensor"
    block = "array" if fmt.block_size is None else f"{fmt.block_size} (axis {fmt.axis})"
    bits_per_element = "-" if fmt.bits_per_element is None else f"{fmt.bits_per_element:g}"
    largest = kernel_limits(fmt, np.dtype(np.float64))[1]
    return (fmt.name or repr(fmt), element, block, scale, bits_per_element, _number(float(largest)))


SCALED_HEADER = ("name", "element", "block", "scale", "bits/element", "largest")


def run_info(arguments: argparse.Namespace) -> int:
    """``info``: tabulate the named formats, or every preset; exit code 0."""
    chosen = arguments.formats
    if chosen:
        plain = [fmt for fmt in chosen if not isinstance(fmt, rp.ScaledFormat)]
        scaled = [fmt for fmt in chosen if isinstance(fmt, rp.ScaledFormat)]
    else:
        plain, scaled = list(rp.formats.values()), list(rp.scaled_formats.values())
    tables = []
    if plain:
        tables.append(text_table(FORMAT_HEADER, [format_row(fmt) for fmt in plain]))
    if scaled:
        tables.append("scaled formats (largest: element max times the largest scale)\n\n"
                      + text_table(SCALED_HEADER, [scaled_row(fmt) for fmt in scaled]))
    print("\n\n".join(tables))
    return 0


def add_info_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("formats", nargs="*", type=format_argument, metavar="FORMAT",
                        help="format names as rpfloat.format takes them (e4m3, bf16, q8.8, mxfp4, e5m7, ...); "
                             "default: every preset")


# -- round --------------------------------------------------------------------------------

DEFAULT_CHUNK = 1 << 22  # elements per chunk: 16 MiB of float32 in, as much out


class UsageError(Exception):
    """A bad argument found after parsing: exit status 2, naming `argument`."""

    def __init__(self, argument: str, message: str):
        super().__init__(message)
        self.argument = argument


class FileError(Exception):
    """An input that cannot be read or an output that cannot be written: exit status 1."""


def mode_argument(name: str):
    try:
        return parse_mode(name)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _int_at_least(lowest: int, what: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            try:
                value = float(text)  # 1e6, 4e6
            except ValueError:
                raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
            if not value.is_integer() or abs(value) > 2**53:  # (past 2**53 a float is not the integer written)
                raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
            value = int(value)
        if value < lowest:
            raise argparse.ArgumentTypeError(f"{what} must be >= {lowest}, got {value}")
        return value

    return convert


class InputArray:
    """The array to round, read chunk by chunk in C order: a .npy file through a
    read-only memory map, a member of a .npz file as a stream (one whole read for
    Fortran-ordered data, which C-order chunks would scatter)."""

    def __init__(self, path: Path, key: str | None):
        self.path = path
        self.key = key
        self.names = None  # an .npz file's arrays
        self._zip = None
        self._stream = None
        self._flat = None
        self._position = 0
        try:
            if path.suffix.lower() == ".npz":
                self._open_npz(key)
            else:
                self._open_npy()
        except (UsageError, FileError):
            self.close()
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
            self.close()
            raise FileError(f"cannot read {path}: {_reason(error)}") from None
        if self.dtype.kind not in "biufc":
            self.close()
            hint = ("; np.save writes ml_dtypes arrays (bfloat16, float8_*) as raw bytes like these: save "
                    "x.astype(np.float32) instead" if self.dtype.kind == "V" and self.dtype.itemsize <= 2
                    and self.dtype.fields is None else "")
            raise FileError(f"{path} holds an array of dtype {self.dtype}, not numbers{hint}")
        try:
            input_array(np.empty(0, self.dtype))  # rp.round's checks: long doubles, say
        except TypeError as error:
            self.close()
            raise FileError(f"{path}: {_reason(error)}") from None

    def _open_npy(self):
        with open(self.path, "rb") as file:
            magic = file.read(6)
            if magic != b"\x93NUMPY":
                raise FileError(f"cannot read {self.path}: not a NumPy .npy file")
            file.seek(0)
            dtype = _member_header(file)[2]
        if dtype is not None and dtype.hasobject:  # (as an .npz member says it, not as np.load's mmap)
            raise FileError(f"{self.path} holds Python objects, not numbers")
        array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        self.shape, self.dtype = array.shape, array.dtype
        if array.dtype.kind in "biufc" and not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)  # Fortran order: read whole
        self._flat = array.reshape(-1)

    def _open_npz(self, key):
        self._zip = zipfile.ZipFile(self.path)
        self.names = names = [name[:-4] for name in self._zip.namelist() if name.endswith(".npy")]
        if not names:
            raise FileError(f"{self.path} holds no arrays")
        if key is None:
            if len(names) != 1:
                raise UsageError("--key", f"{self.path} holds {len(names)} arrays ({', '.join(names) or 'none'}); "
                                          "name the one to round with --key")
            key = names[0]
        elif key not in names:
            raise UsageError("--key", f"{self.path} has no array {key!r}; it holds {', '.join(names) or 'none'}")
        self.key = key
        stream = self._zip.open(f"{key}.npy")
        shape, fortran_order, dtype = _member_header(stream)
        if fortran_order:
            stream.close()
            with self._zip.open(f"{key}.npy") as whole:
                array = np.lib.format.read_array(whole, allow_pickle=False)
            self.shape, self.dtype = array.shape, array.dtype
            self._flat = np.ascontiguousarray(array).reshape(-1)
            return
        if dtype.hasobject:
            raise FileError(f"{self.path}: array {key!r} holds Python objects, not numbers")
        self.shape, self.dtype = shape, dtype
        self._stream = stream

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Elements ``[start, stop)`` in C order, flat (streams read in order only)."""
        if self._flat is not None:
            return self._flat[start:stop]
        if start != self._position:
            raise RuntimeError("an .npz member reads its chunks in order")
        count = stop - start
        try:
            data = self._stream.read(count * self.dtype.itemsize)
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
            raise FileError(f"cannot read {self.path}: {_reason(error)}") from None
        if len(data) != count * self.dtype.itemsize:
            raise FileError(f"cannot read {self.path}: array {self.key!r} ends early (truncated file?)")
        self._position = stop
        return np.frombuffer(data, self.dtype, count)

    def rewind(self) -> None:
        """Read from the first element again."""
        if self._stream is not None:
            self._stream.close()
            self._stream = self._zip.open(f"{self.key}.npy")
            _member_header(self._stream)
            self._position = 0

    def close(self):
        for handle in (self._stream, self._zip):
            if handle is not None:
                handle.close()
        self._flat = None


def _member_header(stream) -> tuple:
    """``(shape, fortran_order, dtype)`` of the .npy header at the start of
    `stream`, which is left at the data; for a header version other than 1.0 and
    2.0, ``(None, True, None)``: let NumPy read the member whole."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream)
    return None, True, None


def _is_npz(path: Path) -> bool:
    return path.suffix.lower() == ".npz"


def _reason(error: BaseException) -> str:
    """An exception's message on one line."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = " ".join(str(error).split())
    return text or type(error).__name__


class OutputArray:
    """The rounded array, written in C order to a temporary file next to OUT that
    replaces OUT only once complete (:meth:`commit`); :meth:`discard` removes it.
    A .npz OUT is an uncompressed archive holding the array `key`, then the
    `others` (``(name, shape, dtype)``: a scaled format's scale codes), which
    :meth:`write_other` buffers in a temporary file until :meth:`commit`. A
    symbolic link's target is replaced; an OUT that is no regular file
    (``/dev/null``, a pipe) is written in place, as it cannot be replaced."""

    def __init__(self, path: Path, key: str, shape: tuple, dtype: np.dtype, others: Sequence[tuple] = ()):
        self._others = {name: (other_shape, np.dtype(other_dtype), None) for name, other_shape, other_dtype in others}
        try:
            # (stat, not realpath, decides: /dev/stdout into an anonymous pipe resolves to no path)
            in_place = not _regular_or_new(path) and not os.path.isdir(path)
            self.path = path = Path(path if in_place else os.path.realpath(path))
            if in_place:
                self._temporary = None
                self._file = open(path, "wb")
            else:
                descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                self._temporary = Path(temporary)
                self._file = os.fdopen(descriptor, "wb")
        except OSError as error:
            raise FileError(f"cannot write {path}: {_reason(error)}") from None
        self._zip = self._member = None
        try:
            if _is_npz(path) or self._others:
                archive = self._file if self._temporary is not None else _Unseekable(self._file)
                self._zip = zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
                self._member = self._zip.open(f"{key}.npy", "w", force_zip64=True)
                target = self._member
            else:
                target = self._file
            _write_header(target, shape, dtype)
            # unnamed files, gone when closed: beside the temporary OUT, or (OUT written in place,
            # in a folder such as /dev that may not be writable) in the system's temporary folder
            folder = None if self._temporary is None else self._temporary.parent
            for name, (other_shape, other_dtype, _) in self._others.items():
                self._others[name] = (other_shape, other_dtype, tempfile.TemporaryFile(dir=folder))
        except BaseException:
            self.discard()
            raise
        self._target = target

    def write(self, values: np.ndarray) -> None:
        _write_values(self._target, values)

    def write_other(self, name: str, values: np.ndarray) -> None:
        """Append `values` (C order) to the other array `name`."""
        _write_values(self._others[name][2], values)

    def commit(self) -> None:
        """Finish the file and move it onto OUT (keeping OUT's permissions where it exists)."""
        if self._member is not None:
            self._member.close()
            for name, (shape, dtype, buffer) in self._others.items():
                with self._zip.open(f"{name}.npy", "w", force_zip64=True) as member:
                    _write_header(member, shape, dtype)
                    buffer.seek(0)
                    shutil.copyfileobj(buffer, member, 1 << 20)
                buffer.close()
            self._zip.close()
        self._file.flush()
        if self._temporary is None:  # written in place
            self._file.close()
            return
        os.fsync(self._file.fileno())
        self._file.close()
        try:
            mode = self.path.stat().st_mode & 0o7777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(self._temporary, mode)
        os.replace(self._temporary, self.path)

    def discard(self) -> None:
        buffers = [buffer for _, _, buffer in self._others.values()]
        for handle in (self._member, self._zip, self._file, *buffers):
            try:
                if handle is not None:
                    handle.close()
            except (OSError, ValueError):
                pass
        if self._temporary is not None:
            self._temporary.unlink(missing_ok=True)


class _Unseekable:
    """A file written in place (``/dev/null``, a pipe) as zipfile should take it:
    its position counted, no seeking (``/dev/null`` reports position 0 always)."""

    def __init__(self, file):
        self._file, self._position = file, 0

    def write(self, data) -> int:
        self._position += len(memoryview(data).cast("B"))
        return self._file.write(data)

    def tell(self) -> int:
        return self._position

    def seek(self, *arguments):
        raise OSError("written in place: not seekable")

    def flush(self) -> None:
        self._file.flush()


def _write_header(target, shape: tuple, dtype: np.dtype) -> None:
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": tuple(shape)}
    try:
        np.lib.format.write_array_header_1_0(target, header)
    except ValueError:  # a header beyond 64 KiB (millions of dimensions)
        np.lib.format.write_array_header_2_0(target, header)


def _write_values(target, values: np.ndarray) -> None:
    if values.size:  # (memoryview.cast refuses an empty array of several dimensions)
        target.write(np.ascontiguousarray(values).data.cast("B"))


class Progress:
    """A text progress bar on stderr, redrawn where the percentage changes."""

    def __init__(self, total: int, enabled: bool, label: str):
        self.total, self.enabled, self.label = total, enabled, label
        self._shown = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        percent = 100 if self.total == 0 else 100 * done // self.total
        if percent == self._shown:
            return
        self._shown = percent
        filled = percent * 30 // 100
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {percent:3d}%")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled and self._shown >= 0:
            sys.stderr.write("\n")
            sys.stderr.flush()


def chunk_ranges(shape: tuple, fmt, chunk: int) -> Iterator[tuple[int, int, tuple]]:
    """``(start, stop, shape)`` of the chunks to round: C-order ranges of about
    `chunk` elements and the shape each is rounded in. A scaled format with
    blocks along axis ``k`` takes whole slabs ``shape[k:]``, or pieces of one
    slab made of whole blocks (``block_size`` indices along ``k`` and every
    later index: more than `chunk` elements where one block's worth is), each
    in a shape that ends with ``shape[k:]``'s axes, so that the format's axis
    counted from the end (`chunk_format`) is the blocked one. One scale per
    array takes plain C-order ranges: its scale comes from a first pass over
    them (`whole_summary`). A 0-d array keeps its shape: rp.round gives it one
    scale, whatever the format's axis."""
    size = math.prod(shape)
    if not _blocked(fmt, shape) or size == 0:
        for start in range(0, size, chunk):
            stop = min(size, start + chunk)
            yield start, stop, (stop - start,) if shape else ()
        if size == 0:
            yield 0, 0, tuple(shape)
        return
    axis = fmt.axis % len(shape)
    length, trailing = shape[axis], tuple(shape[axis + 1:])
    inner = math.prod(trailing)
    slab = length * inner
    if slab <= chunk:
        slabs_per_chunk = chunk // slab
        for start in range(0, size, slabs_per_chunk * slab):
            stop = min(size, start + slabs_per_chunk * slab)
            yield start, stop, ((stop - start) // slab, length, *trailing)
        return
    rows = max(fmt.block_size, chunk // inner // fmt.block_size * fmt.block_size)  # indices along the axis
    for slab_start in range(0, size, slab):
        for first in range(0, length, rows):
            count = min(length, first + rows) - first
            start = slab_start + first * inner
            yield start, start + count * inner, (1, count, *trailing)


def chunk_format(fmt, shape: tuple):
    """`fmt` as `chunk_ranges`' chunks of an array of `shape` take it: a scaled
    format's axis counted from the end."""
    if _blocked(fmt, shape):
        negative = fmt.axis % len(shape) - len(shape)
        if negative != fmt.axis:
            return fmt.replace(axis=negative)
    return fmt


def _blocked(fmt, shape: tuple) -> bool:
    """Whether `fmt` has blocks along an axis of an array of `shape`."""
    return isinstance(fmt, rp.ScaledFormat) and fmt.block_size is not None and len(shape) >= 1


def needs_whole_summary(fmt) -> bool:
    """Whether `fmt` depends on the whole array beyond each chunk's blocks: one
    scale per array, or a tensor scale."""
    return isinstance(fmt, rp.ScaledFormat) and (fmt.block_size is None or fmt.tensor_scale)


def _whole_summary(source: InputArray, ranges, progress: Progress) -> tuple[float, bool]:
    """The first pass of a format that `needs_whole_summary`: the whole array's
    ``rpfloat.scaling.whole_summary``, read chunk by chunk; `source` is then
    rewound for the second."""
    largest, special = 0.0, False
    for start, stop, _ in ranges:
        chunk_largest, chunk_special = whole_summary(input_array(source.read(start, stop)))
        largest, special = max(largest, chunk_largest), special or chunk_special
        progress.update(stop)
    source.rewind()
    return largest, special


def _part_rounder(fmt, mode, overflow, seed, rand_bits, summary, shape: tuple) -> Callable:
    """``round_part(values, start) -> (rounded, stats)`` for the chunks of
    `chunk_ranges`: `round_chunk` at offset `start`, or, given the whole's
    `summary` (`_whole_summary`), the chunk rounded with the whole's scale or
    tensor scale (``rpfloat.scaling.run_blocks_of_whole``)."""
    chunk_fmt = chunk_format(fmt, shape)
    if summary is None:
        def round_part(values, start):
            return round_chunk(values, chunk_fmt, mode, offset=start, overflow=overflow, rng=seed,
                               rand_bits=rand_bits, stats=True)
        return round_part
    largest, special = summary
    tensor_scale = tensor_scale_of(largest, fmt) if fmt.tensor_scale else None
    key = random_key(seed) if parse_mode(mode).is_stochastic else 0

    def round_part(values, start):
        values = input_array(values)
        array = whole_input(values)
        plan = plan_for(chunk_fmt, mode, overflow, rand_bits, array.dtype)
        rounded = run_blocks_of_whole(array, plan, key, start, False, largest, special, tensor_scale)[0]
        rounded = rounded.astype(plan.result_dtype, copy=False)
        return rounded, rounding_stats(values, rounded, fmt)
    return round_part


def _part_coder(fmt, mode, overflow, seed, rand_bits, summary, shape: tuple) -> Callable:
    """``code_part(values, start) -> ScaledCodes`` for the chunks of
    `chunk_ranges` of a scaled format: the codes `rp.encode` gives them as parts
    of the whole, rounded as `_part_rounder`'s `round_part` rounds them."""
    chunk_fmt = chunk_format(fmt, shape)
    largest, special = summary if summary is not None else (None, False)
    tensor_scale = tensor_scale_of(largest, fmt) if summary is not None and fmt.tensor_scale else None
    key = random_key(seed) if parse_mode(mode).is_stochastic else 0

    def code_part(values, start):
        array = whole_input(input_array(values))
        plan = scaled_plan(chunk_fmt, mode, overflow, rand_bits, array.dtype)
        return codes_of_run(array, plan, key, start, largest, special, tensor_scale)
    return code_part


def _check_rounding_arguments(fmt, mode, overflow, rand_bits) -> None:
    """Raise UsageError naming the argument that `rp.round` would refuse."""
    for argument, settings in (("--overflow", (overflow, None)), ("--rand-bits", (overflow, rand_bits))):
        try:
            plan_for(fmt, mode, *settings, np.dtype(np.float32))
        except (TypeError, ValueError) as error:
            raise UsageError(argument, str(error)) from None


def scaled_format(arguments: argparse.Namespace, shape: tuple | None = None):
    """FORMAT, made the element format of a scaled format or changed where
    FORMAT is scaled by the options ``--block-size``, ``--axis``,
    ``--scale-format``, ``--scale-rounding`` and ``--tensor-scale``; FORMAT
    itself without them. `shape` (IN's) gives ``--block-size slice`` its length
    (1 until it is known). Raises UsageError naming the option a format refuses."""
    fmt = arguments.format
    changes = {option: value for option, value in (
        ("--block-size", arguments.block_size), ("--axis", arguments.axis),
        ("--scale-format", arguments.scale_format), ("--scale-rounding", arguments.scale_rounding),
        ("--tensor-scale", arguments.tensor_scale)) if value is not None}
    if not changes:
        return fmt
    block_size = changes.get("--block-size", fmt.block_size if isinstance(fmt, rp.ScaledFormat) else None)
    if "--axis" in changes and block_size in ("tensor", None):
        raise UsageError("--axis", "is the axis blocks run along, and one scale per array has none: give "
                                   "--block-size a number, or 'slice' for one scale per slice along the axis")
    if not isinstance(fmt, rp.ScaledFormat):
        try:
            fmt = rp.ScaledFormat(fmt)
        except (TypeError, ValueError) as error:
            raise UsageError("--format", f"cannot be the element of a scaled format: {error}") from None
    if changes.get("--block-size") == "slice":
        axis = changes.get("--axis", fmt.axis)
        if shape is not None:
            _check_axis(axis, shape)
        changes["--block-size"] = 1 if shape is None else max(1, shape[axis])
    elif changes.get("--block-size") == "tensor":
        changes["--block-size"] = None
    # one change at a time, so that an error names its option; --no-tensor-scale
    # first (a tensor scale refuses power-of-two scale formats)
    order = ["--scale-format", "--scale-rounding", "--tensor-scale", "--block-size", "--axis"]
    if changes.get("--tensor-scale") is False:
        order.insert(0, order.pop(2))
    for option in order:
        if option in changes:
            field = option[2:].replace("-", "_")
            try:
                fmt = fmt.replace(**{field: changes[option]})
            except (TypeError, ValueError) as error:
                raise UsageError(option, str(error)) from None
    return fmt


def _check_axis(axis: int, shape: tuple) -> None:
    """Raise UsageError where IN's array of `shape` has no axis `axis`."""
    if not -len(shape) <= axis < len(shape):
        raise UsageError("--axis", f"is {axis}, out of range for IN's array of {len(shape)} dimensions")


def run_round(arguments: argparse.Namespace) -> int:
    """``round``: round IN into OUT chunk by chunk, print the statistics; exit code 0."""
    fmt, mode = scaled_format(arguments), arguments.mode  # (options checked before IN is read)
    _check_rounding_arguments(fmt, mode, arguments.overflow, arguments.rand_bits)
    if arguments.codes:
        _check_codes(fmt, arguments)
    if arguments.output.suffix.lower() not in (".npy", ".npz") and _regular_or_new(arguments.output) \
            and not _is_standard_output(arguments.output):
        raise UsageError("OUT", f"must end in .npy or .npz (which says how it is written), got {arguments.output}; "
                                "OUT holds the rounded values")
    if arguments.key is not None and not (_is_npz(arguments.input) or _is_npz(arguments.output)):
        raise UsageError("--key", "names an array of an .npz file; IN and OUT are .npy files")
    seed = arguments.seed
    if seed is None and mode.is_stochastic:
        seed = secrets.randbits(63)  # drawn once: every chunk must draw from the same stream
    if arguments.key is not None and (not arguments.key or any(part in arguments.key for part in ("/", "\\", ".."))):
        raise UsageError("--key", f"must be an array's name, without '/', '\\' or '..', got {arguments.key!r}")
    source = InputArray(arguments.input, arguments.key)
    try:
        if source.names is not None and len(source.names) > 1 and _same_file(arguments.input, arguments.output):
            others = ", ".join(name for name in source.names if name != source.key)
            raise UsageError("OUT", f"is IN itself, whose other arrays ({others}) would be lost: an .npz OUT "
                                    "holds the rounded array (or its codes) alone; write another file")
        fmt = scaled_format(arguments, source.shape)  # (again: --block-size slice takes IN's axis length)
        if isinstance(fmt, rp.ScaledFormat) and fmt.block_size is not None and source.shape:
            _check_axis(fmt.axis, source.shape)
        if source.dtype.kind == "c" and isinstance(fmt, rp.ScaledFormat):
            raise FileError(f"{arguments.input} holds complex numbers, which scaled formats do not take")
        if source.dtype.kind == "c" and arguments.codes:
            raise FileError(f"{arguments.input} holds complex numbers, which have no codes; round their real "
                            "and imaginary parts apart")
        result_dtype = _result_dtype(source.dtype, fmt, mode, arguments.overflow, arguments.rand_bits)
        scaled_codes = arguments.codes and isinstance(fmt, rp.ScaledFormat)
        written_dtype = code_dtype(fmt.bits) if arguments.codes else result_dtype
        ranges = list(chunk_ranges(source.shape, fmt, arguments.chunk))
        whole = needs_whole_summary(fmt) and len(ranges) > 1
        progress = Progress(source.size * (2 if whole else 1), _show_progress(arguments.progress),
                            f"rounding {arguments.input.name}")
        summary = _whole_summary(source, ranges, progress) if whole else None
        round_part = _part_rounder(fmt, mode, arguments.overflow, seed, arguments.rand_bits, summary, source.shape)
        if scaled_codes:
            code_part = _part_coder(fmt, mode, arguments.overflow, seed, arguments.rand_bits, summary,
                                    source.shape)
        parts = []
        target = None
        report = sys.stderr if _is_standard_output(arguments.output) else sys.stdout  # (OUT may be stdout)
        try:
            # (a signal between the temporary file's creation and `target` would leave the file behind)
            with signals_held():
                if scaled_codes:
                    target = OutputArray(arguments.output, "elements", source.shape, written_dtype,
                                         _scale_members(fmt, source.shape))
                else:
                    target = OutputArray(arguments.output, arguments.key or source.key or "arr_0", source.shape,
                                         written_dtype)
            for index, (start, stop, chunk_shape) in enumerate(ranges):
                values = source.read(start, stop).reshape(chunk_shape)
                rounded, part = round_part(values, start)
                if scaled_codes:
                    _write_scaled_codes(target, lambda: code_part(values, start), fmt, index, arguments.input)
                else:
                    target.write(_codes_of(rounded, fmt, arguments.input) if arguments.codes
                                 else np.asarray(rounded, dtype=result_dtype))
                parts.append(part)
                progress.update(stop + (source.size if whole else 0))
            progress.finish()
            target.commit()
        except BaseException as error:
            progress.finish()
            if target is not None:
                target.discard()
            if isinstance(error, OSError):  # a full disk, a vanished folder
                raise FileError(f"cannot write {arguments.output}: {_reason(error)}") from None
            raise
    finally:
        source.close()
    try:
        stats = _whole_stats(parts, source, fmt, result_dtype)
        described = fmt.name or repr(fmt)
        written = f"{written_dtype}{' codes' if arguments.codes else ''}"
        if scaled_codes:
            written = f"{written_dtype} element codes, {code_dtype(fmt.scale_bits)} scale codes"
        print(f"rounded {arguments.input} (shape {source.shape}, {source.dtype}) into {arguments.output} ({written})",
              file=report)
        seeded = "" if not mode.is_stochastic else f", seed {seed}" + (" (drawn; --seed repeats it)"
                                                                         if arguments.seed is None else "")
        print(f"format {described}, mode {mode.name.lower()}{seeded}\n", file=report)
        print(stats.summary(), file=report)
    except KeyboardInterrupt as interruption:  # OUT is complete: say so, rather than that nothing happened
        print(f"python -m rpfloat round: {_interrupted(interruption)} after {arguments.output} was written "
              "(complete); no statistics", file=sys.stderr)
        return _interrupted_status(interruption)
    return 0


def _check_codes(fmt, arguments: argparse.Namespace) -> None:
    """Raise UsageError where `fmt` has no codes that ``--codes`` could write
    into OUT, or a scaled format's codes would not fit OUT."""
    if fmt.bits is None:
        raise UsageError("--codes", f"needs a format with a bit layout; {fmt!r} has only a precision")
    if not isinstance(fmt, rp.ScaledFormat):
        return
    if arguments.output.suffix.lower() != ".npz" and _regular_or_new(arguments.output) \
            and not _is_standard_output(arguments.output):
        raise UsageError("OUT", f"must end in .npz for the codes of a scaled format, which are several arrays "
                                f"(elements, scales{', tensor_scale' if fmt.tensor_scale else ''}), got "
                                f"{arguments.output}")
    if arguments.key is not None and not _is_npz(arguments.input):
        raise UsageError("--key", f"names the array of an .npz IN, and {arguments.input} is an .npy file; "
                                  "OUT's arrays of a scaled format's codes are always named elements, scales "
                                  "and tensor_scale")


def _scale_members(fmt, shape: tuple) -> list[tuple]:
    """``(name, shape, dtype)`` of the arrays that follow a scaled format's
    element codes in OUT: its scale codes, and its tensor scale where it has one."""
    members = [("scales", scale_shape(shape, fmt), code_dtype(fmt.scale_bits))]
    if fmt.tensor_scale:
        members.append(("tensor_scale", (), np.dtype(np.float32)))
    return members


def _write_scaled_codes(target: OutputArray, code_chunk: Callable, fmt, index: int, source: Path) -> None:
    """Write chunk `index`'s codes (``code_chunk()``, a ScaledCodes): its element
    codes and its scale codes, which follow the previous chunks' in C order; the
    one scale of an array and its tensor scale with the first chunk only."""
    try:
        codes = code_chunk()
    except ValueError as error:  # a value without a code: a NaN block where the scale format has no NaN
        raise FileError(f"{source}: {error}") from None
    target.write(codes.elements)
    if index == 0 or fmt.block_size is not None:
        target.write_other("scales", np.asarray(codes.scales))
    if index == 0 and fmt.tensor_scale:
        target.write_other("tensor_scale", np.asarray(codes.tensor_scale, np.float32))


def _codes_of(rounded, fmt, source: Path) -> np.ndarray:
    """The codes of the values `rounded` of `fmt`; FileError where one has none (a
    NaN in a format without NaN)."""
    try:
        return encode_values(np.asarray(rounded, np.float64), fmt)
    except ValueError as error:
        raise FileError(f"{source}: {error}") from None


def _regular_or_new(path: Path) -> bool:
    """Whether `path` is a regular file or does not exist (not /dev/null, a pipe)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def _is_standard_output(path: Path) -> bool:
    """Whether `path` is where standard output goes (``/dev/stdout``, or the file
    it is redirected to), so that the summary must go to standard error."""
    try:
        here, there = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # (no standard output, or one without a descriptor)
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # OUT does not exist yet
        return False


def _result_dtype(input_dtype, fmt, mode, overflow, rand_bits) -> np.dtype:
    return np.dtype(plan_for(fmt, mode, overflow, rand_bits, input_dtype).result_dtype)


def _whole_stats(parts, source: InputArray, fmt, result_dtype) -> RoundingStats:
    """The chunks' statistics combined, with the whole array's sizes (chunks pad
    their packed codes to whole bytes each)."""
    if parts:
        stats = RoundingStats.combined(parts)
    else:  # no chunk: an empty array
        stats = RoundingStats(0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0)
    is_complex = source.dtype.kind == "c"
    return dataclasses.replace(stats, bytes_before=source.size * source.dtype.itemsize,
                               bytes_after=packed_nbytes(fmt, source.shape, is_complex, result_dtype))


def _show_progress(requested: bool | None) -> bool:
    if requested is not None:
        return requested
    return sys.stderr.isatty()


def add_round_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, metavar="IN", help="the array to round: a .npy or .npz file")
    parser.add_argument("output", type=Path, metavar="OUT",
                        help="where the rounded array goes: a .npy file, or an .npz file (by its suffix); "
                             "replaced only once complete")
    parser.add_argument("--format", "-f", required=True, type=format_argument, metavar="FORMAT",
                        help="the format to round to: any name rpfloat.format takes (e4m3, bf16, q8.8, mxfp4, ...)")
    parser.add_argument("--mode", "-m", default=parse_mode("nearest"), type=mode_argument,
                        help="rounding mode (default nearest): nearest, nearest_away, toward_zero, up, down, odd, "
                             "stochastic, stochastic_equal or an alias")
    parser.add_argument("--seed", type=_int_at_least(0, "--seed"), default=None,
                        help="seed of the stochastic modes (default: drawn, and printed)")
    parser.add_argument("--overflow", choices=("inf", "saturate", "nan", "wrap"), default=None,
                        help="what values beyond the format's range become (default: the format's own policy)")
    parser.add_argument("--rand-bits", type=_int_at_least(1, "--rand-bits"), default=None, metavar="BITS",
                        help="random bits per stochastic rounding, 1 to 64 (default 64)")
    parser.add_argument("--key", default=None, metavar="NAME",
                        help="the array of an .npz IN to round (default: its only one), and its name in an "
                             ".npz OUT (default: the input's name, else arr_0; a scaled format's --codes: "
                             "elements, scales and tensor_scale)")
    parser.add_argument("--chunk", type=_int_at_least(1, "--chunk"), default=DEFAULT_CHUNK, metavar="ELEMENTS",
                        help=f"elements rounded at a time (default {DEFAULT_CHUNK}); the results do not depend on it")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show a progress bar on stderr (default: where stderr is a terminal)")
    parser.add_argument("--codes", action="store_true",
                        help="write the codes (rpfloat.encode's bit patterns, as unsigned integers: uint8 for "
                             "formats of up to 8 bits) instead of the rounded values; a scaled format's into an "
                             ".npz OUT: arrays elements, scales and (two-level scaling) tensor_scale")
    scaled = parser.add_argument_group(
        "scaled formats", "Any of these makes FORMAT the element format of a scaled format (one scale per block "
                          "of elements), or changes a scaled FORMAT such as mxfp8_e4m3 or nvfp4.")
    scaled.add_argument("--block-size", type=_block_size_argument, default=None, metavar="SIZE",
                        help="elements per scale along --axis: a number, 'slice' (one scale per slice along "
                             "--axis: per-channel scales) or 'tensor' (one scale for the whole array, the default "
                             "for an element FORMAT)")
    scaled.add_argument("--axis", type=_integer_argument("--axis"), default=None,
                        help="the axis the blocks run along (default -1, the last)")
    scaled.add_argument("--scale-format", default=None, metavar="NAME",
                        help="e8m0 (power-of-two scales, the default) or a float format such as e4m3 (scales "
                             "with significand bits, as NVFP4's)")
    scaled.add_argument("--scale-rounding", choices=("floor", "ceil", "even", "rceil"), default=None,
                        help="how a power-of-two scale follows its block's largest magnitude (default floor, "
                             "the OCP MX rule; rceil never saturates)")
    scaled.add_argument("--tensor-scale", action=argparse.BooleanOptionalAction, default=None,
                        help="a second, float32 scale per array, as NVFP4's two levels (needs a float "
                             "--scale-format)")


def _block_size_argument(text: str):
    if text.strip().lower() in ("slice", "tensor"):
        return text.strip().lower()
    try:
        return _int_at_least(1, "--block-size")(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"--block-size must be a positive integer, 'slice' or 'tensor', "
                                         f"got {text!r}") from None


def _integer_argument(what: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None

    return convert


# -- bench --------------------------------------------------------------------------------

BENCH_SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_round.py"


def run_bench(arguments: argparse.Namespace) -> int:
    """``bench``: run benchmarks/bench_round.py (``--quick`` unless given
    arguments); its exit code, or 1 where the script is not there."""
    if not BENCH_SCRIPT.is_file():
        print(f"python -m rpfloat bench: error: {BENCH_SCRIPT} is not there: the benchmark ships with the "
              "rpfloat repository, not the installed package", file=sys.stderr)
        return 1
    script_arguments = arguments.script_arguments or ["--quick"]
    return subprocess.run([sys.executable, str(BENCH_SCRIPT), *script_arguments]).returncode


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script_arguments", nargs="*", metavar="ARGUMENT",
                        help="arguments for bench_round.py after '--' (default: --quick), e.g. "
                             "'python -m rpfloat bench -- --sizes 1e6 --no-peers'")


# -- the command table --------------------------------------------------------------------


class Command(NamedTuple):
    """A subcommand: its one-line help, its description, what runs it and what
    adds its arguments to its parser."""

    help: str
    description: str
    run: Callable[[argparse.Namespace], int]  # takes the parsed arguments, returns the exit code
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


COMMANDS = {
    "demo": Command(
        help="print the preset formats and a rounding demo (the default command)",
        description=(
            "Print a table of the preset formats and round a few awkward numbers and "
            f"a sine wave to {', '.join(DEMO_FORMATS)}."
        ),
        run=run_demo,
    ),
    "info": Command(
        help="tabulate formats: bits, max, min normal, smallest subnormal, eps, inf and NaN",
        description=(
            "Print an np.finfo-like table of the named formats, or of every preset (and the scaled "
            "presets in a second table): bits, max, min, min normal, smallest subnormal, eps, whether "
            "there is inf, and where the NaN codes are."
        ),
        run=run_info,
        add_arguments=add_info_arguments,
    ),
    "round": Command(
        help="round a .npy/.npz file into another and print rounding statistics",
        description=(
            "Round the array in IN (.npy, or one array of an .npz) onto a format and write it to OUT "
            "(.npy or .npz), chunk by chunk through a memory map, bit for bit as rp.round of the whole "
            "array with the same seed. Prints the counts of inexact, overflowed, underflowed, flushed "
            "and NaN results, the errors and the packed size (docs/cli.md). Exit status 1 where IN "
            "cannot be read or OUT not written (OUT is then left as it was), 2 for bad arguments."
        ),
        run=run_round,
        add_arguments=add_round_arguments,
    ),
    "bench": Command(
        help="run the benchmark table (benchmarks/bench_round.py --quick)",
        description=(
            "Run benchmarks/bench_round.py of the rpfloat repository, --quick unless arguments "
            "follow '--'. Exit status 1 where the script is not there (an installed package)."
        ),
        run=run_bench,
        add_arguments=add_bench_arguments,
    ),
}
DEFAULT_COMMAND = "demo"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subcommand per entry of :data:`COMMANDS` (their
    parsers in the parser's ``command_parsers``)."""
    parser = argparse.ArgumentParser(
        prog="python -m rpfloat",
        description="Simulate binary floating-point and fixed-point formats on NumPy arrays.",
        epilog=f"Without a command, runs '{DEFAULT_COMMAND}'.",
    )
    subcommands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    parser.command_parsers = {}
    for name, command in COMMANDS.items():
        subparser = subcommands.add_parser(name, help=command.help, description=command.description)
        if command.add_arguments is not None:
            command.add_arguments(subparser)
        parser.command_parsers[name] = subparser
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command that ``argv`` (default: ``sys.argv[1:]``) names; return the exit code.

    Wrong arguments make argparse print the usage and exit with status 2; an
    input that cannot be read or an output that cannot be written prints one
    line and returns 1.
    """
    parser = build_parser()
    arguments, unknown = parser.parse_known_args(argv)
    name = arguments.command or DEFAULT_COMMAND
    if unknown:  # the command's usage, not the top level's, says what it takes
        (parser.command_parsers[name] if arguments.command else parser).error(
            f"unrecognized arguments: {' '.join(unknown)}")  # exits 2
    try:
        with _terminate_as_interrupt():
            return COMMANDS[name].run(arguments)
    except UsageError as error:
        parser.command_parsers[name].error(f"argument {error.argument}: {error}")  # exits 2
    except FileError as error:
        print(f"python -m rpfloat {name}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interruption:  # Ctrl-C, SIGTERM or SIGHUP: the commands have cleaned up
        print(f"python -m rpfloat {name}: {_interrupted(interruption)}", file=sys.stderr)
        return _interrupted_status(interruption)
    except BrokenPipeError:  # the output piped into a program that stopped reading (head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (its number: ``signum``), raised as Ctrl-C's
    KeyboardInterrupt is, so that the same clean-up runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _interrupted(interruption: KeyboardInterrupt) -> str:
    if isinstance(interruption, Terminated):
        return "hung up" if interruption.signum == getattr(signal, "SIGHUP", None) else "terminated"
    return "interrupted"


def _interrupted_status(interruption: KeyboardInterrupt) -> int:
    """The shell's status for a process ended by the signal: 128 + its number."""
    return 128 + (interruption.signum if isinstance(interruption, Terminated) else signal.SIGINT)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM (kill, job schedulers) and SIGHUP (a closed terminal) raise
    `Terminated`, so that ``round`` removes its temporary file; in the main
    thread only."""
    signums = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    if threading.current_thread() is not threading.main_thread() or not signums:
        yield
        return

    def interrupt(signum, frame):
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def signals_held():
    """SIGINT, SIGTERM and SIGHUP held back for the block: the first that arrives
    is raised again as it ends, to the handlers it would have met (main thread;
    elsewhere a no-op). Handlers, not a signal mask: a process's signal may be
    delivered to any of its threads."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    arrived = []
    previous = {signum: signal.signal(signum, lambda signum, frame: arrived.append(signum)) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if arrived:
            signal.raise_signal(arrived[0])


if __name__ == "__main__":
    sys.exit(main())
