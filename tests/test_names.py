"""The names, types and dtypes that format() takes, and the command line."""

import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rpfloat as rp
from rpfloat.__main__ import main
from rpfloat.fixedformat import FixedFormat
from rpfloat.floatformat import FloatFormat
from rpfloat.presets import format, formats

import strategies

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]

# What tells the float8/float6/float4 presets apart, written out by hand (from
# the OCP and ml_dtypes definitions) rather than read from the presets.
PRESET_PROPERTIES = {  # name: (max, has_inf, nan, bias)
    "float8_e4m3fn": (448.0, False, "max", 7),
    "float8_e5m2": (57344.0, True, "ieee", 15),
    "float8_e4m3fnuz": (240.0, False, "negzero", 8),
    "float8_e5m2fnuz": (57344.0, False, "negzero", 16),
    "float8_e4m3b11fnuz": (30.0, False, "negzero", 11),
    "float8_e4m3": (240.0, True, "ieee", 7),
    "float8_e3m4": (15.5, True, "ieee", 3),
    "float6_e2m3fn": (7.5, False, None, 1),
    "float6_e3m2fn": (28.0, False, None, 3),
    "float4_e2m1fn": (6.0, False, None, 1),
}

# Every float type of ml_dtypes but the scale type float8_e8m0fnu.
ML_DTYPES_FLOAT_NAMES = [
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e4m3b11fnuz",
    "float8_e4m3",
    "float8_e3m4",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
]

SPELLINGS = {  # spelling: the preset it names
    # E4M3: the OCP format (no inf, NaN at the top code), as in ML frameworks
    "e4m3": "float8_e4m3fn",
    "E4M3FN": "float8_e4m3fn",
    "e4m3fn": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "FP8-E4M3": "float8_e4m3fn",
    " fp8_e4m3fn ": "float8_e4m3fn",
    "float8-e4m3fn": "float8_e4m3fn",
    # ml_dtypes' IEEE-style float8_e4m3 keeps its name
    "float8_e4m3": "float8_e4m3",
    "FLOAT8-E4M3": "float8_e4m3",
    "e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "fp8_e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "fp8-e5m2fnuz": "float8_e5m2fnuz",
    "e4m3b11fnuz": "float8_e4m3b11fnuz",
    "e3m4": "float8_e3m4",
    "fp8_e3m4": "float8_e3m4",
    # the microscaling element formats: no inf, no NaN
    "e2m3": "float6_e2m3fn",
    "e2m3fn": "float6_e2m3fn",
    "fp6_e2m3": "float6_e2m3fn",
    "FP6_E2M3FN": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn",
    "e3m2fn": "float6_e3m2fn",
    "fp6_e3m2": "float6_e3m2fn",
    "e2m1": "float4_e2m1fn",
    "E2M1FN": "float4_e2m1fn",
    "fp4_e2m1": "float4_e2m1fn",
    "fp4": "float4_e2m1fn",
    "FP4": "float4_e2m1fn",
}


def assert_is_preset(fmt, name):
    """`fmt` is the preset `name`: equal to it, named like it, with its hand-written properties."""
    assert fmt == formats[name]
    assert fmt.name == name
    assert (fmt.max, fmt.has_inf, fmt.nan, fmt.bias) == PRESET_PROPERTIES[name]


# -- spellings ------------------------------------------------------------------------------


@pytest.mark.parametrize(("spelling", "name"), SPELLINGS.items())
def test_spellings_name_their_preset(spelling, name):
    assert_is_preset(format(spelling), name)
    assert_is_preset(formats[spelling], name)


def test_float8_e4m3_stays_ieee_style():
    ieee_style = format("float8_e4m3")
    assert ieee_style == FloatFormat(4, 3)
    assert ieee_style.has_inf and ieee_style.nan == "ieee" and ieee_style.max == 240.0
    ocp = format("e4m3")
    assert ocp != FloatFormat(4, 3) and ocp != ieee_style
    assert not ocp.has_inf and ocp.max == 448.0


@pytest.mark.parametrize(("name", "expected_max"), [("e2m1", 6.0), ("e3m2", 28.0), ("e2m3", 7.5)])
def test_mx_element_names_have_no_inf_or_nan(name, expected_max):
    fmt = format(name)
    assert not fmt.has_inf and not fmt.has_nan
    assert fmt.max == expected_max
    assert fmt != FloatFormat(fmt.exp_bits, fmt.man_bits)  # not the IEEE-style pattern


@pytest.mark.parametrize(
    ("name", "exp_bits", "man_bits"), [("e2m2", 2, 2), ("e3m3", 3, 3), ("E4M7", 4, 7), ("e2m5", 2, 5)]
)
def test_other_exmy_names_stay_ieee_style(name, exp_bits, man_bits):
    fmt = format(name)
    assert fmt == FloatFormat(exp_bits, man_bits)
    assert fmt.has_inf and fmt.nan == "ieee"
    assert fmt.name == name.lower()


@pytest.mark.parametrize(("name", "width", "signed"), [("int8", 8, True), ("INT4", 4, True), ("uint8", 8, False),
                                                    ("int1", 1, True), ("uint16", 16, False)])
def test_integer_names_are_words_without_a_fraction(name, width, signed):
    fmt = format(name)
    assert fmt == FixedFormat(width, 0, signed=signed) and fmt.name == name.lower()
    lowest, highest = (-(2 ** (width - 1)), 2 ** (width - 1) - 1) if signed else (0, 2**width - 1)
    assert np.array_equal(fmt.values(), np.arange(lowest, highest + 1))
    x = np.array([lowest - 5.0, lowest - 0.5, 2.5, 3.5, highest + 0.4, highest + 7.0])
    expected = np.clip(np.round(x), lowest, highest)  # nearest-even, saturating
    np.testing.assert_array_equal(rp.round(x, name), expected)


def test_integer_names_past_53_bits_say_why():
    with pytest.raises(ValueError, match="word length"):
        format("int64")


def test_hyphens_stand_for_underscores_only_in_preset_names():
    assert format("q-2.10") == FixedFormat(-2, 10)  # the minus sign of the pattern stays
    with pytest.raises(ValueError, match="unknown format name"):
        format("e4-m3")


# -- types and dtypes ----------------------------------------------------------------------


def test_torch_float_dtypes_name_their_preset():
    torch = pytest.importorskip("torch")  # (in the test extra: skipped only without it)
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.float8_e4m3fn,
                  torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        name = str(dtype).removeprefix("torch.")
        assert format(dtype) is format(name) and dtype in formats and formats[dtype] is format(name)
    for dtype in (torch.int8, torch.float8_e8m0fnu, torch.complex64):
        with pytest.raises(TypeError, match=rf"torch\.{str(dtype)[6:]}, which has no preset"):
            format(dtype)
        assert dtype not in formats
    t = torch.tensor([0.1, 300.0, -7.7])  # (past 448 torch saturates, ml_dtypes and rpfloat give NaN)
    assert rp.round(t.numpy(), t.to(torch.float8_e4m3fn).dtype).tolist() == t.to(torch.float8_e4m3fn).float().tolist()


@pytest.mark.parametrize("name", ML_DTYPES_FLOAT_NAMES)
def test_ml_dtypes_types_name_their_preset(name):
    ml_dtypes_type = getattr(ml_dtypes, name)
    fmt = format(ml_dtypes_type)
    assert fmt is formats[name]
    assert format(np.dtype(ml_dtypes_type)) is fmt
    assert formats[ml_dtypes_type] is fmt
    assert fmt.max == float(ml_dtypes.finfo(ml_dtypes_type).max)
    assert fmt.has_inf == bool(np.isinf(np.array(np.inf).astype(ml_dtypes_type)))


@pytest.mark.parametrize(
    ("float_type", "name"),
    [
        (np.float16, "float16"),
        (np.float32, "float32"),
        (np.float64, "float64"),
        (np.dtype("float32"), "float32"),
        (np.dtype(">f8"), "float64"),
        (np.zeros(2, np.float16).dtype, "float16"),
        (float, "float64"),
    ],
    ids=repr,
)
def test_numpy_types_name_their_preset(float_type, name):
    fmt = format(float_type)
    assert fmt is formats[name]
    assert fmt.max == float(np.finfo(float_type).max)
    assert fmt.bits == 8 * np.dtype(float_type).itemsize


def test_strings_are_names_not_dtype_codes():
    assert format("half") is formats.float16  # an alias, which np.dtype also knows
    for dtype_code in ("f", "f4", "d", "e", "float"):
        with pytest.raises(ValueError, match="unknown format name"):
            format(dtype_code)


@pytest.mark.parametrize(
    ("float_type", "name"),
    [(ml_dtypes.bfloat16, "bfloat16"), (np.float16, "float16"), (np.dtype(ml_dtypes.float8_e4m3fn), "float8_e4m3fn")],
    ids=repr,
)
@pytest.mark.parametrize("carrier", [np.float32, np.float64])
def test_round_to_a_type_is_round_to_its_name(float_type, name, carrier):
    x = np.array([1 / 3, np.pi, -2.5, 100.0, 1e-3, 0.0, -7.3e-3], dtype=carrier)
    by_type = rp.round(x, float_type)
    by_name = rp.round(x, name)
    assert by_type.dtype == by_name.dtype
    assert by_type.tobytes() == by_name.tobytes()
    # and both are the values of that type
    np.testing.assert_array_equal(by_type, x.astype(float_type).astype(carrier))


# -- what is rejected ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "type_name"),
    [
        (3, "int"),
        (4.0, "float"),
        (True, "bool"),
        (None, "NoneType"),
        ([4, 3], "list"),
        ((4, 3), "tuple"),
        (b"bf16", "bytes"),
        (np.float32(1.0), "numpy.float32"),
    ],
    ids=repr,
)
def test_wrong_types_are_named(bad, type_name):
    with pytest.raises(TypeError, match=rf"got {type_name};.*format name.*FloatFormat.*dtype"):
        format(bad)
    with pytest.raises(KeyError):
        formats[bad]


def test_round_names_the_wrong_type():
    with pytest.raises(TypeError, match="got int;"):
        rp.round(np.ones(3), 3)


@pytest.mark.parametrize(
    ("float_type", "description"),
    [
        (np.int32, "type numpy.int32 (dtype int32)"),
        (int, "type int (dtype int"),
        (np.dtype("complex64"), "dtype complex64"),
        (object, "type object (dtype object)"),
        (ml_dtypes.float8_e8m0fnu, "(dtype float8_e8m0fnu)"),
        (ml_dtypes.int4, "(dtype int4)"),
        (np.floating, "type numpy.floating"),
        (FloatFormat, "type rpfloat.floatformat.FloatFormat"),
    ],
    ids=repr,
)
def test_types_without_a_preset_are_rejected(float_type, description):
    with pytest.raises(TypeError, match=rf"got .*{re.escape(description)}.*has no preset"):
        format(float_type)
    assert float_type not in formats


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("e4m3fnx", "did you mean 'e4m3fn'"),
        ("bfloat", "did you mean 'bfloat16'"),
        ("float6_e2m3", "did you mean 'float6_e2m3fn'"),
        ("fp8", "ambiguous: 'fp8_e4m3'"),
        ("float8", "ambiguous"),
        ("fp6", "ambiguous: 'fp6_e2m3'"),
        ("float4", "'float4_e2m1fn'"),
        ("MXFP8", "ambiguous: 'mxfp8_e4m3' or 'mxfp8_e5m2'"),
        ("mxfp6", "ambiguous: 'mxfp6_e2m3' or 'mxfp6_e3m2'"),
        ("mxfp8_e3m4", "scaled presets: mxfp8_e4m3"),
        ("nvfp8", "scaled presets: .*nvfp4"),
        ("float8_e8m0fnu", "scale type"),
        ("fp8_e2m1", ""),  # a 4-bit format behind fp8_
        ("fp4_e4m3", ""),
        ("float4_e2m1", ""),  # ml_dtypes' convention: without fn, a format with inf
        ("f4", ""),
        ("e4m3 fn", ""),
        ("e4m03", "did you mean 'e4m3'"),  # zero-padded widths: no IEEE-style alias beside the OCP preset
        ("e04m3", "did you mean 'e4m3'"),
        ("e05m10", ""),
        ("e8m0", "scale_format='e8m0'"),  # OCP's scale type, not the IEEE-style FloatFormat(8, 0)
        ("E8M0", "FloatFormat\\(8, 0\\)"),
        ("int0", ""),
        ("int08", ""),
        ("int", ""),
        ("sint8", ""),
        ("q8", "did you mean 'q8.0' or 'int8'"),  # fixed point without its point
        ("UQ12", "did you mean 'uq12.0' or 'uint12'"),
    ],
)
def test_unknown_names(name, hint):
    with pytest.raises(ValueError, match=rf"unknown format name '{name}'.*{hint}.*known names: presets bfloat16"):
        format(name)
    with pytest.raises(KeyError, match="known names"):
        formats[name]
    assert name not in formats


@pytest.mark.parametrize("name", ["q0", "uq0", "q64", "uq64"])
def test_fixed_point_hints_name_only_widths_the_formats_take(name):
    with pytest.raises(ValueError, match="unknown format name") as raised:
        format(name)
    assert "did you mean" not in str(raised.value)


def test_known_names_explain_the_rules():
    with pytest.raises(ValueError) as raised:
        format("nope")
    message = str(raised.value)
    for text in ("e2m1 (float4_e2m1fn)", "e3m2 (float6_e3m2fn)", "e2m3 (float6_e2m3fn)", "fp4 (float4_e2m1fn)",
                 "'floatN_'", "'fpN_'", "IEEE-style", "'intN'", "scaled presets mxfp8_e4m3", "nvfp4", "'-' for '_'"):
        assert text in message


def test_registry_attributes_and_dir_take_the_spellings():
    assert formats.fp8_e4m3 is formats.float8_e4m3fn
    assert formats.e2m1 is formats.float4_e2m1fn
    assert formats[np.float16] is formats.float16
    assert np.float16 in formats and np.int32 not in formats
    for spelling in ("e3m2", "e4m3fn", "fp8_e4m3", "fp4"):
        assert spelling in dir(formats)
    assert len(formats) == 15  # the spellings are not keys


# -- the command line ---------------------------------------------------------------------


def run_cli(*arguments):
    return subprocess.run(
        [sys.executable, "-m", "rpfloat", *arguments],
        capture_output=True,
        text=True,
        cwd=REPOSITORY_ROOT,
        timeout=600,
    )


@pytest.mark.parametrize("arguments", [("--help",), ("-h",), ("demo", "--help")], ids=" ".join)
def test_cli_help(arguments):
    finished = run_cli(*arguments)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("usage: python -m rpfloat")
    assert "demo" in finished.stdout


@pytest.mark.parametrize("arguments", [("--bogus",), ("frobnicate",), ("demo", "--bogus")], ids=" ".join)
def test_cli_rejects_unknown_arguments(arguments):
    finished = run_cli(*arguments)
    assert finished.returncode == 2
    assert "usage" in finished.stderr and arguments[-1] in finished.stderr
    assert finished.stdout == ""


def test_cli_without_arguments_runs_the_demo():
    finished = run_cli()
    assert finished.returncode == 0, finished.stderr
    for text in ("bfloat16", "float4_e2m1fn", "q8.8", "max rel. error"):
        assert text in finished.stdout


def test_main_returns_the_exit_code_and_demo_is_the_default(capsys):
    assert main([]) == 0
    default_output = capsys.readouterr().out
    assert main(["demo"]) == 0
    assert capsys.readouterr().out == default_output
    assert "float8_e4m3fn" in default_output
    with pytest.raises(SystemExit) as raised:
        main(["--help"])
    assert raised.value.code == 0
    assert "usage" in capsys.readouterr().out


# -- constructor calls: format(repr(fmt)) == fmt -----------------------------------------


@settings(max_examples=150, deadline=None)
@given(fmt=st.one_of(strategies.float_formats(unbounded=True), strategies.fixed_formats(),
                     strategies.scaled_formats(st.one_of(strategies.float_formats(max_exp_bits=5, max_man_bits=5),
                                                         strategies.fixed_formats(max_word=8)),
                                               st.sampled_from([None, 1, 16, 32]))))
def test_constructor_calls_read_back_every_format(fmt):
    """repr writes a constructor call; format() reads it back to an equal format
    (float formats with any bias, subnormals, inf and NaN encoding; fixed point
    of any word and overflow; scaled formats of those elements)."""
    read = format(repr(fmt))
    assert read == fmt and type(read) is type(fmt)
    assert format("rp." + repr(fmt)) == fmt and format(f"  {fmt!r} ") == fmt


def test_constructor_calls_take_every_preset_and_round_as_the_format():
    for preset in [*formats.values(), *rp.scaled_formats.values()]:
        assert format(repr(preset)) == preset
    x = np.array([1e-5, 0.3, -70000.0])
    no_subnormals = FloatFormat(5, 2, subnormals=False)
    assert rp.round(x, "FloatFormat(5, 2, subnormals=False)").tobytes() == rp.round(x, no_subnormals).tobytes()
    assert rp.round(x, "FloatFormat(5, 2, subnormals=False)")[0] == 0.0  # 1e-5 is below min_normal: flushed
    nested = format("ScaledFormat(FloatFormat(3, 2, inf=False, nan=None), block_size=8, scale_format=(-10, 10))")
    assert nested == rp.ScaledFormat(FloatFormat(3, 2, inf=False, nan=None), block_size=8, scale_format=(-10, 10))


@pytest.mark.parametrize(("text", "error", "match"), [
    ("FloatFormat(5, 2", ValueError, "neither a format name nor a constructor call"),
    ("__import__('os').getcwd()", ValueError, "is not a call of FloatFormat"),
    ("float(3)", ValueError, "is not a call of FloatFormat"),
    ("FloatFormat(5, 2).max", ValueError, "is not a call of FloatFormat"),
    ("FloatFormat(5, man_bits)", ValueError, "the argument 'man_bits' is not a literal"),
    ("FloatFormat(*(5, 2))", ValueError, r"\* and \*\* arguments"),
    ("FloatFormat(5, 2, flavour=1)", TypeError, "flavour"),
    ("FloatFormat(5, -2)", ValueError, "man_bits"),
    ("FixedFormat(4, 4, overflow='clip')", ValueError, "overflow"),
])
def test_constructor_calls_that_are_not_formats(text, error, match):
    """Only the three constructors with literal arguments are read (nothing is
    evaluated); their own errors name the argument."""
    with pytest.raises(error, match=match):
        format(text)
