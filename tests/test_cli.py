"""``python -m rpfloat`` info / round / bench (docs/cli.md), run as a subprocess on
files made in the test: OUT holds ``rp.round`` of IN bit for bit, whatever the
chunks; a bad input leaves OUT as it was; bad arguments exit 2 naming themselves."""
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import rpfloat as rp
from rpfloat import __main__ as cli

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]


def run_cli(*arguments, cwd):
    return subprocess.run([sys.executable, "-m", "rpfloat", *map(str, arguments)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def summary_counts(stdout: str) -> dict:
    """The integer rows of the printed statistics."""
    counts = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"(numbers|inexact|overflowed|underflowed|flushed to zero|NaN produced|bytes before|"
                             r"bytes after)\s+([0-9,]+).*", line)
        if match:
            counts[match[1]] = int(match[2].replace(",", ""))
    return counts


def sample(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))
    return x.astype(dtype)


# -- round --------------------------------------------------------------------------------


def test_round_npy_equals_rp_round_chunked_or_whole(tmp_path):
    x = sample((300, 70))
    x[0, :3] = [np.nan, np.inf, 1e6]
    np.save(tmp_path / "in.npy", x)
    expected, stats = rp.round(x, "e4m3", "stochastic", rng=0, stats=True)
    for chunk in ("999", "4194304"):  # 22 chunks, one not a whole number of rows; one chunk
        finished = run_cli("round", "in.npy", "out.npy", "--format", "e4m3", "--mode", "stochastic", "--seed", "0",
                           "--chunk", chunk, cwd=tmp_path)
        assert finished.returncode == 0, finished.stderr
        assert finished.stderr == ""  # no progress bar where stderr is no terminal
        assert same_bits(np.load(tmp_path / "out.npy"), expected)
        counts = summary_counts(finished.stdout)
        assert counts == {"numbers": 21000, "inexact": stats.inexact, "overflowed": stats.overflowed,
                          "underflowed": stats.underflowed, "flushed to zero": stats.flushed_to_zero,
                          "NaN produced": stats.nan_produced, "bytes before": 84000, "bytes after": 21000}
        assert counts["overflowed"] > 0 and counts["NaN produced"] >= 2  # inf and 1e6 at least
        assert f"max abs. error   {stats.max_abs_error:.6g}" in finished.stdout
        assert "seed 0" in finished.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.npy", "out.npy"]  # no temporary left


def test_round_npz_with_key_to_npz_and_npy(tmp_path):
    weights = sample((40, 30), seed=1, dtype=np.float64)
    np.savez(tmp_path / "in.npz", weights=weights, bias=np.arange(3.0))
    finished = run_cli("round", "in.npz", "out.npz", "-f", "q8.8", "--overflow", "wrap", "--key", "weights",
                       "--chunk", "128", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    with np.load(tmp_path / "out.npz") as archive:
        assert archive.files == ["weights"]
        assert same_bits(archive["weights"], rp.round(weights, "q8.8", overflow="wrap"))
    finished = run_cli("round", "in.npz", "out.npy", "-f", "bf16", "--key", "bias", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert same_bits(np.load(tmp_path / "out.npy"), rp.round(np.arange(3.0), "bf16"))


def test_round_npy_to_npz_and_compressed_fortran_complex_inputs(tmp_path):
    x = np.asfortranarray(sample((50, 20), seed=2))
    np.save(tmp_path / "fortran.npy", x)
    finished = run_cli("round", "fortran.npy", "out.npz", "-f", "e5m2", "-m", "up", "--chunk", "77", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    with np.load(tmp_path / "out.npz") as archive:
        assert archive.files == ["arr_0"] and same_bits(archive["arr_0"], rp.round(np.ascontiguousarray(x), "e5m2",
                                                                                     "up"))
    z = (sample(1000, seed=3) + 1j * sample(1000, seed=4)).astype(np.complex64)
    np.savez_compressed(tmp_path / "complex.npz", z=z)
    finished = run_cli("round", "complex.npz", "out.npy", "-f", "e2m1", "-m", "sr", "--seed", "9", "--rand-bits",
                       "12", "--chunk", "300", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert same_bits(np.load(tmp_path / "out.npy"), rp.round(z, "e2m1", "stochastic", rng=9, rand_bits=12))
    assert summary_counts(finished.stdout)["numbers"] == 2000  # real and imaginary parts


@pytest.mark.parametrize("shape, chunk", [((37, 100), 250), ((1000,), 70), ((5, 7, 64), 100)])
def test_scaled_formats_round_in_whole_blocks(tmp_path, shape, chunk):
    x = sample(shape, seed=5)
    np.save(tmp_path / "in.npy", x)
    for name in ("mxfp8_e4m3", "nvfp4"):
        finished = run_cli("round", "in.npy", "out.npy", "-f", name, "-m", "stochastic", "--seed", "5", "--chunk",
                           chunk, cwd=tmp_path)
        assert finished.returncode == 0, finished.stderr
        assert same_bits(np.load(tmp_path / "out.npy"), rp.round(x, name, "stochastic", rng=5))


@pytest.mark.parametrize("options, expected", [
    # per-channel int8 of a weight matrix: one scale per row, the rule that never saturates
    (["-f", "int8", "--block-size", "slice", "--scale-rounding", "rceil"],
     rp.ScaledFormat(rp.FixedFormat(8, 0), block_size=40, scale_rounding="rceil")),
    # one scale per column (blocks along axis 0)
    (["-f", "e4m3", "--block-size", "slice", "--axis", "0"], rp.ScaledFormat("e4m3", block_size=30, axis=0)),
    (["-f", "e5m2", "--block-size", "tensor"], rp.ScaledFormat("e5m2")),
    (["-f", "e2m1", "--scale-format", "e4m3", "--block-size", "8"],
     rp.ScaledFormat("e2m1", block_size=8, scale_format="e4m3")),
    # a scaled preset changed: MX blocks down the columns, NVFP4 with its tensor scale
    (["-f", "mxfp8_e4m3", "--axis", "0"], rp.ScaledFormat("e4m3", block_size=32, axis=0)),
    (["-f", "nvfp4", "--tensor-scale"], rp.ScaledFormat("e2m1", block_size=16, scale_format="e4m3",
                                                        tensor_scale=True)),
    (["-f", "mxfp4", "--block-size", "7", "--scale-rounding", "even"],
     rp.ScaledFormat("e2m1", block_size=7, scale_rounding="even")),
])
def test_scaled_format_options_round_as_that_format(tmp_path, options, expected):
    x = sample((30, 40), seed=6)
    x[3, 5] = np.nan
    np.save(tmp_path / "in.npy", x)
    finished = run_cli("round", "in.npy", "out.npy", *options, "-m", "stochastic", "--seed", "3", "--chunk", "100",
                       cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    reference, stats = rp.round(x, expected, "stochastic", rng=3, stats=True)
    assert same_bits(np.load(tmp_path / "out.npy"), reference)
    assert summary_counts(finished.stdout)["bytes after"] == stats.bytes_after
    assert "format ScaledFormat(" in finished.stdout


@pytest.mark.parametrize("options, argument, message", [
    (["-f", "e4m3", "--axis", "0"], "--axis", "give --block-size a number, or 'slice'"),
    (["-f", "e4m3", "--axis", "0", "--block-size", "tensor"], "--axis", "give --block-size a number, or 'slice'"),
    (["-f", "mxfp4", "--axis", "0", "--block-size", "tensor"], "--axis", "one scale per array has none"),
    (["-f", "mxfp4", "--axis", "2"], "--axis", "out of range for IN's array of 2 dimensions"),
    (["-f", "e4m3", "--block-size", "slice", "--axis", "-3"], "--axis", "out of range"),
    (["-f", "e4m3", "--block-size", "0"], "--block-size", "'slice' or 'tensor'"),
    (["-f", "e4m3", "--block-size", "rows"], "--block-size", "'slice' or 'tensor'"),
    (["-f", "e4m3", "--axis", "x", "--block-size", "4"], "--axis", "must be an integer"),
    (["-f", "e4m3", "--scale-format", "bogus"], "--scale-format", "unknown format name 'bogus'"),
    (["-f", "mxfp8_e4m3", "--tensor-scale"], "--tensor-scale", "scale_format"),
    (["-f", "nvfp4", "--scale-rounding", "sideways"], "--scale-rounding", "invalid choice"),
    (["-f", "q1.0", "--block-size", "4"], "--format", "cannot be the element"),  # values -1 and 0
])
def test_scaled_format_options_that_make_no_format_exit_2(tmp_path, options, argument, message):
    np.save(tmp_path / "in.npy", sample((6, 8)))
    finished = run_cli("round", "in.npy", "out.npy", *options, cwd=tmp_path)
    assert finished.returncode == 2, finished.stderr
    assert f"argument {argument}" in finished.stderr and message in finished.stderr, finished.stderr
    assert not (tmp_path / "out.npy").exists()


def test_unknown_options_show_their_commands_usage(capsys):
    """An option the command does not take prints that command's usage (which
    lists what it takes), not the top level's; exit status 2."""
    for arguments, usage in ((["round", "a.npy", "b.npy", "-f", "e4m3", "--stats"], "python -m rpfloat round"),
                             (["info", "e4m3", "--all"], "python -m rpfloat info"),
                             (["--all"], "python -m rpfloat [-h] COMMAND")):
        with pytest.raises(SystemExit) as exited:
            cli.main(arguments)
        error = capsys.readouterr().err
        assert exited.value.code == 2
        assert f"usage: {usage}" in error and f"error: unrecognized arguments: {arguments[-1]}" in error, error


def test_scaled_format_options_turn_a_tensor_scale_off_before_the_scale_format():
    """nvfp4 without its E4M3 scales must lose the tensor scale first, which
    power-of-two scales refuse, whatever order the options came in."""
    arguments = cli.build_parser().parse_args(["round", "a.npy", "b.npy", "-f", "nvfp4", "--scale-format", "e8m0",
                                              "--no-tensor-scale"])
    assert cli.scaled_format(arguments) == rp.ScaledFormat("e2m1", block_size=16)
    arguments = cli.build_parser().parse_args(["round", "a.npy", "b.npy", "-f", "e4m3"])
    assert cli.scaled_format(arguments) is rp.format("e4m3")


def test_chunk_ranges_of_scaled_formats():
    mx = rp.format("mxfp4")
    assert list(cli.chunk_ranges((4, 10), mx, 25)) == [(0, 20, (2, 10)), (20, 40, (2, 10))]
    assert list(cli.chunk_ranges((2, 100), mx, 40)) == [(0, 32, (1, 32)), (32, 64, (1, 32)), (64, 96, (1, 32)),
                                                       (96, 100, (1, 4)), (100, 132, (1, 32)), (132, 164, (1, 32)),
                                                       (164, 196, (1, 32)), (196, 200, (1, 4))]
    # one scale per array: plain chunks (a first pass finds the scale)
    assert list(cli.chunk_ranges((8, 8), rp.ScaledFormat("e2m1"), 30)) == [(0, 30, (30,)), (30, 60, (30,)),
                                                                         (60, 64, (4,))]
    # blocks along another axis: whole slabs, or whole blocks of one slab, each ending with the slab's axes
    down = rp.ScaledFormat("e2m1", block_size=4, axis=0)
    assert list(cli.chunk_ranges((8, 8), down, 10)) == [(0, 32, (1, 4, 8)), (32, 64, (1, 4, 8))]
    assert list(cli.chunk_ranges((8, 8), down, 40)) == [(0, 32, (1, 4, 8)), (32, 64, (1, 4, 8))]
    middle = rp.ScaledFormat("e2m1", block_size=4, axis=1)
    assert list(cli.chunk_ranges((3, 8, 5), middle, 100)) == [(0, 80, (2, 8, 5)), (80, 120, (1, 8, 5))]
    assert cli.chunk_format(middle, (3, 8, 5)) == rp.ScaledFormat("e2m1", block_size=4, axis=-2)
    assert list(cli.chunk_ranges((3, 0), middle, 100)) == [(0, 0, (3, 0))]


def _cases_of_the_whole():
    """Inputs and formats whose scale depends on more than one chunk of rows."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((60, 48)) * np.exp2(rng.integers(-6, 6, (60, 48)))).astype(np.float32)
    with_inf = x.copy()
    with_inf[41, 7] = -np.inf  # in a later chunk than the first
    per_tensor = rp.ScaledFormat("e4m3")
    per_row_rceil = rp.ScaledFormat(rp.FixedFormat(8, 0), block_size=48, scale_rounding="rceil")
    nvfp4_two_levels = rp.format("nvfp4").replace(tensor_scale=True)
    down_columns = rp.ScaledFormat("e4m3", block_size=32, axis=0)
    return [
        (x, per_tensor), (x, per_row_rceil), (x, nvfp4_two_levels), (x, down_columns),
        (with_inf, per_tensor), (with_inf, nvfp4_two_levels),
        (x.astype(np.float16), per_tensor), (rng.integers(-3000, 3000, (60, 48)).astype(np.int16), per_tensor),
        (x.reshape(4, 15, 48), rp.ScaledFormat("e2m1", block_size=8, axis=1)),
    ]


@pytest.mark.parametrize("case", range(9))
@pytest.mark.parametrize("mode", ["nearest", "stochastic"])
def test_formats_of_the_whole_array_stream_in_chunks(tmp_path, capsys, monkeypatch, case, mode):
    """One scale per array, a tensor scale and blocks along another axis than
    the last read IN in chunks (one pass for the whole's largest magnitude
    first) and give rp.round's bits and statistics, from .npy and .npz files."""
    x, fmt = _cases_of_the_whole()[case]
    reads = []
    read = cli.InputArray.read
    monkeypatch.setattr(cli.InputArray, "read", lambda self, start, stop: reads.append(stop - start) or
                        read(self, start, stop))
    reference, stats = rp.round(x, fmt, mode, rng=4, stats=True)
    np.save(tmp_path / "in.npy", x)
    np.savez(tmp_path / "in.npz", x=x)
    options = {
        "tensor_scale": ["--tensor-scale"] if fmt.tensor_scale else [],
        "block_size": ["--block-size", str(fmt.block_size or "tensor")],
        "axis": ["--axis", str(fmt.axis)] if fmt.block_size else [],
        "scale_format": ["--scale-format", getattr(fmt.scale_format, "name", fmt.scale_format)],
        "scale_rounding": ["--scale-rounding", fmt.scale_rounding],
    }
    element = fmt.element.name or f"q{fmt.element.int_bits}.{fmt.element.frac_bits}"
    for source in ("in.npy", "in.npz"):
        capsys.readouterr()
        status = cli.main(["round", str(tmp_path / source), str(tmp_path / "out.npy"), "-f", element,
                           *sum(options.values(), []), "-m", mode, "--seed", "4", "--chunk", "500"])
        printed = capsys.readouterr()
        assert status == 0, printed.err
        assert len(reads) >= 2 and max(reads) < x.size, reads  # never the whole
        reads.clear()
        assert same_bits(np.load(tmp_path / "out.npy"), reference), (source, fmt)
        counts = summary_counts(printed.out)
        assert counts["numbers"] == x.size
        assert counts["inexact"] == stats.inexact and counts["NaN produced"] == stats.nan_produced
        assert counts["overflowed"] == stats.overflowed and counts["bytes after"] == stats.bytes_after


def test_out_must_be_npy_or_npz_and_info_points_files_to_round(tmp_path, capsys):
    np.save(tmp_path / "in.npy", sample(10))
    for out in ("out.txt", "out"):
        with pytest.raises(SystemExit) as exited:
            cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / out), "-f", "e4m3"])
        assert exited.value.code == 2 and "argument OUT: must end in .npy or .npz" in capsys.readouterr().err
        assert not (tmp_path / out).exists()
    assert cli.main(["round", str(tmp_path / "in.npy"), os.devnull, "-f", "e4m3"]) == 0  # not a regular file
    with pytest.raises(SystemExit) as exited:
        cli.main(["info", str(tmp_path / "in.npy")])
    error = capsys.readouterr().err
    assert exited.value.code == 2 and "is a file, not a format name" in error and "round" in error
    cli.main(["info", "mxint8"])
    assert "q2.6" in capsys.readouterr().out  # the element as rp.format reads it back


@pytest.mark.parametrize("fmt, mode", [("e4m3", "nearest"), ("e2m1", "stochastic"), ("q8.8", "toward_zero"),
                                       ("float16", "nearest")])
def test_codes_are_rp_encode_of_the_whole_chunk_by_chunk(tmp_path, capsys, fmt, mode):
    x = sample((30, 40), seed=8)
    x[2, 3] = np.inf  # inf: saturates in e2m1 and q8.8, NaN in e4m3 (its code: 0x7F), inf in float16
    np.save(tmp_path / "in.npy", x)
    status = cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "-f", fmt, "-m", mode,
                       "--seed", "6", "--chunk", "70", "--codes"])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert same_bits(np.load(tmp_path / "out.npy"), rp.encode(x, fmt, mode, rng=6))
    assert "codes)" in printed.out and summary_counts(printed.out)["numbers"] == x.size


@pytest.mark.parametrize("fmt, options", [
    ("mxfp8_e4m3", []), ("nvfp4", ["--tensor-scale"]), ("int8", ["--block-size", "tensor"]),
    ("mxfp4", ["--block-size", "8", "--axis", "1"]), ("e4m3", ["--block-size", "slice", "--axis", "0"])])
def test_scaled_codes_are_rp_encode_of_the_whole_chunk_by_chunk(tmp_path, capsys, fmt, options):
    """The element codes, scale codes and tensor scale of a scaled format stream
    into one .npz, chunks of whole blocks or (one scale per array, a tensor
    scale) after a first pass, and decode to what OUT holds without --codes."""
    x = sample((6, 50, 7), seed=9)
    x[1, 3, 2] = np.nan  # a NaN block: E8M0's 0xFF, E4M3's NaN code; int8 per tensor: all of it
    np.save(tmp_path / "in.npy", x)
    scaled = cli.scaled_format(cli.build_parser().parse_args(["round", "in", "out", "-f", fmt, *options]), x.shape)
    for mode in ("nearest", "stochastic"):
        arguments = ["round", str(tmp_path / "in.npy"), "-f", fmt, *options, "-m", mode, "--seed", "4",
                     "--chunk", "20"]  # every chunk as small as a block or a slab allows
        assert cli.main([*arguments, str(tmp_path / "codes.npz"), "--codes"]) == 0
        assert cli.main([*arguments, str(tmp_path / "values.npy")]) == 0
        capsys.readouterr()
        written = np.load(tmp_path / "codes.npz")
        expected = rp.encode(x, scaled, mode, rng=4)
        assert written.files == ["elements", "scales"] + (["tensor_scale"] if scaled.tensor_scale else [])
        assert same_bits(written["elements"], expected.elements) and same_bits(written["scales"], expected.scales)
        if scaled.tensor_scale:
            assert same_bits(written["tensor_scale"], np.float32(expected.tensor_scale))
        values = np.load(tmp_path / "values.npy")
        assert same_bits(rp.decode(tuple(written.values()), scaled).astype(values.dtype), values)


@pytest.mark.skipif(sys.platform == "win32", reason="named pipes")
def test_scaled_codes_refuse_an_npy_out_and_unencodable_blocks(tmp_path, capsys, monkeypatch):
    x = sample(64)
    x[5] = np.inf
    np.save(tmp_path / "in.npy", x)
    (tmp_path / "out.npz").write_bytes(b"old")
    for arguments, name in (([str(tmp_path / "out.npy")], "OUT: must end in .npz"),
                            ([str(tmp_path / "out.npz"), "--key", "w"], "--key: names the array of an .npz IN")):
        with pytest.raises(SystemExit) as exited:
            cli.main(["round", str(tmp_path / "in.npy"), *arguments, "-f", "mxfp8_e4m3", "--codes"])
        assert exited.value.code == 2 and f"argument {name}" in capsys.readouterr().err
    # an inf makes its block NaN, which a float6 scale has no code for
    status = cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "out.npz"), "-f", "e4m3", "--block-size",
                       "16", "--scale-format", "e3m2", "--codes"])
    assert status == 1 and "has no NaN scale code" in capsys.readouterr().err
    assert (tmp_path / "out.npz").read_bytes() == b"old"
    with pytest.raises(ValueError, match="has no NaN scale code"):
        rp.encode(x, rp.ScaledFormat("e4m3", block_size=16, scale_format="e3m2"))
    # an OUT written in place takes the archive too (its scale codes buffered in the system's
    # temporary folder: OUT's, such as /dev, need not be writable): a named pipe
    os.mkfifo(tmp_path / "pipe")
    folders = []
    buffer = cli.tempfile.TemporaryFile
    monkeypatch.setattr(cli.tempfile, "TemporaryFile", lambda dir=None: folders.append(dir) or buffer(dir=dir))
    reader = subprocess.Popen(["cat", str(tmp_path / "pipe")], stdout=subprocess.PIPE)
    assert cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "pipe"), "-f", "mxfp4", "--codes"]) == 0
    assert folders == [None]
    piped = np.load(__import__("io").BytesIO(reader.communicate(timeout=60)[0]))
    expected = rp.encode(x, "mxfp4")
    assert same_bits(piped["elements"], expected.elements) and same_bits(piped["scales"], expected.scales)


def test_codes_refuse_formats_and_data_without_codes(tmp_path, capsys):
    x = sample(20)
    x[7] = np.nan
    np.save(tmp_path / "in.npy", x)
    (tmp_path / "out.npy").write_bytes(b"old")
    assert cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "-f", "e2m1", "--codes"]) == 1
    assert "cannot encode NaN" in capsys.readouterr().err and (tmp_path / "out.npy").read_bytes() == b"old"
    # for contrast, NaN has a code in e5m2
    assert cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "x.npy"), "-f", "e5m2", "--codes"]) == 0
    assert same_bits(np.load(tmp_path / "x.npy"), rp.encode(x, "e5m2"))


def test_progress_bar_when_asked(tmp_path):
    np.save(tmp_path / "in.npy", sample(5000))
    finished = run_cli("round", "in.npy", "out.npy", "-f", "e4m3", "--chunk", "1000", "--progress", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    # (text mode reads each carriage return as a line end)
    assert finished.stderr.count("rounding in.npy [") == 5 and finished.stderr.rstrip().endswith("] 100%")


def test_out_is_untouched_when_the_input_is_bad(tmp_path):
    out = tmp_path / "out.npy"
    out.write_bytes(b"precious")
    (tmp_path / "text.npy").write_text("not an array")
    np.save(tmp_path / "strings.npy", np.array(["a", "b"]))
    np.save(tmp_path / "objects.npy", np.array([1.5, None], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "objects.npz", x=np.array([1.5, None], dtype=object))
    np.save(tmp_path / "bf16.npy", np.zeros(3, np.uint16).view("V2"))  # as np.save writes ml_dtypes' bfloat16
    # an archive whose array claims more data than it holds: chunks fail midway
    header = {"descr": "<f4", "fortran_order": False, "shape": (1000,)}
    with zipfile.ZipFile(tmp_path / "truncated.npz", "w") as archive, archive.open("x.npy", "w") as member:
        np.lib.format.write_array_header_1_0(member, header)
        member.write(np.ones(600, np.float32).tobytes())
    for name, reason in (("missing.npy", "No such file"), ("text.npy", "not a NumPy .npy file"),
                         ("strings.npy", "not numbers"), ("truncated.npz", "ends early"),
                         ("objects.npy", "holds Python objects, not numbers"),
                         ("objects.npz", "holds Python objects, not numbers"),
                         ("bf16.npy", "dtype |V2, not numbers; np.save writes ml_dtypes arrays")):
        finished = run_cli("round", name, "out.npy", "-f", "e4m3", "--chunk", "100", cwd=tmp_path)
        assert finished.returncode == 1
        assert finished.stderr.count("\n") == 1 and name in finished.stderr and reason in finished.stderr
        assert finished.stdout == ""
        assert out.read_bytes() == b"precious"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bf16.npy", "objects.npy", "objects.npz", "out.npy",
                                                                "strings.npy", "text.npy", "truncated.npz"]


def test_unwritable_output_is_an_error(tmp_path):
    np.save(tmp_path / "in.npy", np.ones(3))
    finished = run_cli("round", "in.npy", "no/such/folder/out.npy", "-f", "e4m3", cwd=tmp_path)
    assert finished.returncode == 1 and "cannot write" in finished.stderr and finished.stderr.count("\n") == 1


@pytest.mark.parametrize("arguments, named", [
    (("-f", "e9m9x"), "argument --format"),
    (("-f", "e4m3", "--mode", "sideways"), "argument --mode"),
    (("-f", "e4m3", "--overflow", "wrap"), "argument --overflow"),
    (("-f", "e4m3", "--overflow", "explode"), "argument --overflow"),
    (("-f", "e4m3", "--rand-bits", "8"), "argument --rand-bits"),
    (("-f", "e4m3", "--chunk", "0"), "argument --chunk"),
    (("-f", "e4m3", "--seed", "-1"), "argument --seed"),
    (("-f", "e4m3", "--key", "x"), "argument --key"),
    (("-f", "e4m3", "--seed", "1e30"), "argument --seed"),  # (a float that is not the integer written)
    ((), "--format"),
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else None)
def test_bad_arguments_exit_2_naming_the_argument(tmp_path, arguments, named):
    np.save(tmp_path / "in.npy", np.ones(3))
    (tmp_path / "out.npy").write_bytes(b"precious")
    finished = run_cli("round", "in.npy", "out.npy", *arguments, cwd=tmp_path)
    assert finished.returncode == 2
    assert named in finished.stderr and finished.stderr.startswith("usage: python -m rpfloat round")
    assert (tmp_path / "out.npy").read_bytes() == b"precious"


def test_an_npz_of_several_arrays_needs_a_key(tmp_path):
    np.savez(tmp_path / "in.npz", a=np.ones(2), b=np.ones(2))
    finished = run_cli("round", "in.npz", "out.npy", "-f", "e4m3", cwd=tmp_path)
    assert finished.returncode == 2 and "argument --key" in finished.stderr and "a, b" in finished.stderr
    finished = run_cli("round", "in.npz", "out.npy", "-f", "e4m3", "--key", "c", cwd=tmp_path)
    assert finished.returncode == 2 and "no array 'c'" in finished.stderr
    assert not (tmp_path / "out.npy").exists()


def test_keys_that_are_paths_are_refused(tmp_path):
    np.save(tmp_path / "in.npy", np.ones(3))
    for key in ("../evil", "a/b", ""):
        finished = run_cli("round", "in.npy", "out.npz", "-f", "e4m3", "--key", key, cwd=tmp_path)
        assert finished.returncode == 2 and "argument --key" in finished.stderr, key
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.npy"]


def test_rounding_an_npz_in_place_would_drop_its_other_arrays(tmp_path):
    np.savez(tmp_path / "data.npz", w=np.ones(4, np.float32), b=np.zeros(2))
    before = (tmp_path / "data.npz").read_bytes()
    finished = run_cli("round", "data.npz", "./data.npz", "-f", "e4m3", "--key", "w", cwd=tmp_path)
    assert finished.returncode == 2 and "argument OUT" in finished.stderr and "(b)" in finished.stderr
    assert (tmp_path / "data.npz").read_bytes() == before
    np.savez(tmp_path / "one.npz", w=np.full(4, 0.3, np.float32))  # one array: rounded in place
    assert run_cli("round", "one.npz", "one.npz", "-f", "e4m3", cwd=tmp_path).returncode == 0
    assert same_bits(np.load(tmp_path / "one.npz")["w"], rp.round(np.full(4, 0.3, np.float32), "e4m3"))


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links and pipes")
def test_out_through_a_link_or_into_a_pipe(tmp_path):
    """A link's target is replaced and the link kept; a pipe (like /dev/null) is
    written into, never replaced by a file."""
    x = sample(1000)
    np.save(tmp_path / "in.npy", x)
    (tmp_path / "target.npy").write_bytes(b"old")
    (tmp_path / "link.npy").symlink_to("target.npy")
    assert run_cli("round", "in.npy", "link.npy", "-f", "e4m3", cwd=tmp_path).returncode == 0
    assert (tmp_path / "link.npy").is_symlink()
    assert same_bits(np.load(tmp_path / "target.npy"), rp.round(x, "e4m3"))
    os.mkfifo(tmp_path / "pipe")
    reader = subprocess.Popen(["cat", str(tmp_path / "pipe")], stdout=subprocess.PIPE)
    finished = run_cli("round", "in.npy", "pipe", "-f", "e4m3", cwd=tmp_path)
    piped = reader.communicate(timeout=60)[0]
    assert finished.returncode == 0, finished.stderr
    assert (tmp_path / "pipe").is_fifo()
    assert same_bits(np.load(__import__("io").BytesIO(piped)), rp.round(x, "e4m3"))
    assert not [path for path in tmp_path.iterdir() if path.name.endswith(".tmp")]
    # /dev/stdout into an anonymous pipe (no path to resolve): the array alone goes there, the
    # summary to standard error
    if os.path.exists("/dev/stdout"):
        piped = subprocess.run([sys.executable, "-m", "rpfloat", "round", "in.npy", "/dev/stdout", "-f", "e4m3"],
                               capture_output=True, cwd=tmp_path, timeout=300)
        assert piped.returncode == 0, piped.stderr
        assert same_bits(np.load(__import__("io").BytesIO(piped.stdout)), rp.round(x, "e4m3"))
        assert summary_counts(piped.stderr.decode())["numbers"] == x.size
        # /dev/stdout redirected to a file (named without .npy/.npz): the array, or a scaled format's codes
        for options, name in ((["-f", "e4m3"], "redirected.out"), (["-f", "mxfp8_e4m3", "--codes"], "codes.out")):
            with open(tmp_path / name, "wb") as redirected:
                done = subprocess.run([sys.executable, "-m", "rpfloat", "round", "in.npy", "/dev/stdout", *options],
                                      stdout=redirected, stderr=subprocess.PIPE, cwd=tmp_path, timeout=300)
            assert done.returncode == 0, done.stderr
            assert summary_counts(done.stderr.decode())["numbers"] == x.size
        assert same_bits(np.load(tmp_path / "redirected.out"), rp.round(x, "e4m3"))
        codes = np.load(tmp_path / "codes.out")
        expected = rp.encode(x, "mxfp8_e4m3")
        assert np.array_equal(codes["elements"], expected.elements) and np.array_equal(codes["scales"], expected.scales)


def test_an_interruption_after_out_is_written_says_so(tmp_path, monkeypatch, capsys):
    np.save(tmp_path / "in.npy", np.arange(10.0))
    (tmp_path / "out.npy").write_bytes(b"old")

    def interrupted(*arguments, **keywords):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_whole_stats", interrupted)
    status = cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "-f", "e4m3"])
    assert status == 130
    assert "was written (complete)" in capsys.readouterr().err
    assert same_bits(np.load(tmp_path / "out.npy"), rp.round(np.arange(10.0), "e4m3"))


def test_all_but_a_few_is_not_printed_as_all():
    stats = rp.round(np.full(3000, 0.3), "e4m3", stats=True)[1]
    text = dataclasses.replace(stats, inexact=stats.count - 1).summary()
    assert re.search(r"inexact\s+2,999 \(>99\.9%\)", text), text
    assert re.search(r"inexact\s+3,000 \(100%\)", stats.summary())


# -- info, bench, help --------------------------------------------------------------------


def test_info_lists_every_preset(tmp_path):
    finished = run_cli("info", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    names = [line.split()[0] for line in finished.stdout.splitlines() if line.strip()]
    for name in [*rp.formats, *rp.scaled_formats]:
        assert name in names
    e4m3 = next(line for line in finished.stdout.splitlines() if line.startswith("float8_e4m3fn "))
    assert e4m3.split() == ["float8_e4m3fn", "8", "448", "-448", "0.015625", "0.001953125", "0.125", "no",
                            "all-ones", "code"]


def test_info_of_named_formats(tmp_path):
    finished = run_cli("info", "bf16", "q8.8", "e6m9", "mxfp4", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    rows = [line.split()[0] for line in finished.stdout.splitlines()[2:] if line.strip()]
    assert rows[:3] == ["bfloat16", "q8.8", "e6m9"] and "mxfp4_e2m1" in rows and "float16" not in rows
    q88 = next(line for line in finished.stdout.splitlines() if line.startswith("q8.8"))
    assert q88.split()[1:4] == ["16", "127.99609375", "-128"]
    finished = run_cli("info", "e4m3", "bogus", cwd=tmp_path)
    assert finished.returncode == 2 and "argument FORMAT" in finished.stderr and "'bogus'" in finished.stderr


def test_a_constructor_call_names_any_format(tmp_path):
    """--format takes what rp.format takes, a constructor call included: a format
    without subnormals, which no name covers, rounds as rp.round rounds it."""
    x = np.array([1e-5, 0.3, -3.1, 7e4], np.float32)
    np.save(tmp_path / "x.npy", x)
    no_subnormals = "FloatFormat(5, 2, subnormals=False)"
    finished = run_cli("round", "x.npy", "y.npy", "--format", no_subnormals, cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    expected = rp.round(x, rp.FloatFormat(5, 2, subnormals=False))
    assert same_bits(np.load(tmp_path / "y.npy"), expected) and expected[0] == 0.0
    finished = run_cli("info", no_subnormals, cwd=tmp_path)
    assert finished.returncode == 0 and "FloatFormat(exp_bits=5, man_bits=2, subnormals=False)" in finished.stdout
    finished = run_cli("round", "x.npy", "z.npy", "--format", "FloatFormat(5, man_bits)", cwd=tmp_path)
    assert finished.returncode == 2 and "argument --format" in finished.stderr and "not a literal" in finished.stderr


def test_info_table_of_the_docs_is_what_info_prints(tmp_path):
    """docs/cli.md shows the output of `info e4m3 bf16 q8.8` as text: it must be it."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    shown = page.split("`python -m rpfloat info e4m3 bf16 q8.8` prints:")[1].split("```text\n")[1].split("```")[0]
    finished = run_cli("info", "e4m3", "bf16", "q8.8", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == shown


@pytest.mark.parametrize("command", ["demo", "info", "round", "bench"])
def test_every_command_has_help(tmp_path, command):
    finished = run_cli(command, "--help", cwd=tmp_path)
    assert finished.returncode == 0
    assert finished.stdout.startswith(f"usage: python -m rpfloat {command}")


def test_bench_runs_the_benchmark_script(tmp_path):
    finished = run_cli("bench", "--", "--help", cwd=tmp_path)  # the script's own help: quick
    assert finished.returncode == 0, finished.stderr
    assert "--quick" in finished.stdout and "--no-peers" in finished.stdout


def test_bench_without_the_repository_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli, "BENCH_SCRIPT", tmp_path / "benchmarks" / "bench_round.py")
    assert cli.main(["bench"]) == 1
    assert "not there" in capsys.readouterr().err


def test_bench_defaults_to_quick(monkeypatch):
    ran = []
    monkeypatch.setattr(cli.subprocess, "run", lambda command: ran.append(command) or subprocess.CompletedProcess(
        command, 0))
    assert cli.main(["bench"]) == 0
    assert ran == [[sys.executable, str(REPOSITORY_ROOT / "benchmarks" / "bench_round.py"), "--quick"]]
    assert os.path.isfile(ran[0][1])


# -- edge cases a review found ---------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 0), (0, 4)])
def test_empty_arrays_of_several_dimensions_onto_a_scaled_format(tmp_path, shape):
    np.save(tmp_path / "in.npy", np.zeros(shape, np.float32))
    finished = run_cli("round", "in.npy", "out.npy", "-f", "mxfp4", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert same_bits(np.load(tmp_path / "out.npy"), rp.round(np.zeros(shape, np.float32), "mxfp4"))


@pytest.mark.parametrize("options", [["-f", "mxfp4", "--axis", "1"],
                                     ["-f", "e2m1", "--block-size", "3", "--axis", "-2", "--scale-format", "e4m3"]])
def test_a_0d_array_takes_one_scale_whatever_the_axis(tmp_path, capsys, options):
    # rp.round gives a 0-d array one scale, whatever the axis; a (1,) chunk lacked the axis
    x = np.array(3.3, np.float32)
    np.save(tmp_path / "in.npy", x)
    fmt = cli.scaled_format(cli.build_parser().parse_args(["round", "a.npy", "b.npy", *options]), x.shape)
    assert cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), *options]) == 0
    assert same_bits(np.load(tmp_path / "out.npy"), rp.round(x, fmt))
    assert cli.main(["round", str(tmp_path / "in.npy"), str(tmp_path / "out.npz"), *options, "--codes"]) == 0
    codes, expected = np.load(tmp_path / "out.npz"), rp.encode(x, fmt)
    assert same_bits(codes["elements"], expected.elements) and same_bits(codes["scales"], expected.scales)


def test_unreadable_kinds_of_input_are_one_line_errors(tmp_path):
    """A long double (wider than float64) and an .npz without arrays: exit 1 with
    one line, not a traceback or a complaint about --key; OUT as it was."""
    np.save(tmp_path / "long.npy", np.ones(3, np.longdouble))
    np.savez(tmp_path / "none.npz")
    (tmp_path / "out.npy").write_bytes(b"old")
    for name, message in (("long.npy", "wider than float64"), ("none.npz", "holds no arrays")):
        finished = run_cli("round", name, "out.npy", "-f", "e4m3", cwd=tmp_path)
        assert finished.returncode == 1, finished.stderr
        assert finished.stderr.count("\n") == 1 and message in finished.stderr, finished.stderr
    assert (tmp_path / "out.npy").read_bytes() == b"old"


def test_info_and_demo_print_values_exact_where_short():
    assert cli._number(-4290772992.0) == "-4290772992"
    assert cli._number(2.0**-10) == "0.0009765625"
    assert cli._number(2.0**-1074) == "4.9406565e-324"  # (repr's shortest "5e-324" is not its value)
    assert cli._number(1 / 3) == "0.33333333"
    table = cli.preset_table()
    assert "0.0009765625" in table  # float16's eps, exactly
    # every value is printed either exactly or to 8 digits, never as a shortest repr
    for fmt in rp.formats.values():
        for value in (fmt.max, fmt.min, fmt.min_normal, fmt.smallest_subnormal, fmt.eps):
            text = cli._number(value)
            assert Fraction(text) == Fraction(value) or text == f"{value:.8g}", (fmt, value, text)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_signal_while_held_arrives_after_the_block():
    """``round`` creates its temporary file and takes hold of it with signals
    held, so that SIGTERM cannot land between the two and leave the file behind."""
    reached = []
    with pytest.raises(cli.Terminated):
        with cli._terminate_as_interrupt():
            with cli.signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                reached.append("end of the block")
    assert reached == ["end of the block"]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # (renamed meanwhile)
        return 0


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signal_name, status, said", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_sigterm_removes_the_temporary_file_and_keeps_out(tmp_path, signal_name, status, said):
    np.save(tmp_path / "in.npy", np.ones(4_000_000, np.float32))
    (tmp_path / "out.npy").write_bytes(b"old")
    process = subprocess.Popen([sys.executable, "-m", "rpfloat", "round", "in.npy", "out.npy", "-f", "e4m3",
                                "--chunk", "64"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        deadline = 120
        start = time.monotonic()
        # it has started writing, past its start-up (kernels loaded): 64 KiB of the 16 MB written
        while not any(path.name.endswith(".tmp") and _size(path) > 1 << 16 for path in tmp_path.iterdir()):
            assert process.poll() is None and time.monotonic() - start < deadline, process.communicate()
            time.sleep(0.01)
        process.send_signal(getattr(signal, signal_name))
        _, stderr = process.communicate(timeout=deadline)
    finally:
        process.kill()
    assert process.returncode == status, stderr
    assert stderr.strip().endswith(said)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.npy", "out.npy"]
    assert (tmp_path / "out.npy").read_bytes() == b"old"
