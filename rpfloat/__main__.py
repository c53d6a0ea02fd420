"""``python -m rpfloat``: the command line.

``python -m rpfloat`` with no command, or ``python -m rpfloat demo``, prints a
table of the preset formats and a small rounding demo; ``--help`` lists the
commands.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

import rpfloat as rp

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
        rows.append((name, str(fmt.bits), *(f"{value:.6g}" for value in constants)))
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
    print("rpfloat preset formats (every value exact)\n")
    print(preset_table())
    print('\nrp.round(x, fmt): mode "nearest", each format\'s default overflow')
    print("(inf for bfloat16/float16/e5m2, NaN for e4m3fn, saturation for q8.8)\n")
    print(rounding_table(sample()))
    return 0


class Command(NamedTuple):
    """A subcommand: its one-line help, its description and what runs it."""

    help: str
    description: str
    run: Callable[[argparse.Namespace], int]  # takes the parsed arguments, returns the exit code


COMMANDS = {
    "demo": Command(
        help="print the preset formats and a rounding demo (the default command)",
        description=(
            "Print a table of the preset formats and round a few awkward numbers and "
            f"a sine wave to {', '.join(DEMO_FORMATS)}."
        ),
        run=run_demo,
    ),
}
DEFAULT_COMMAND = "demo"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subcommand per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="python -m rpfloat",
        description="Simulate binary floating-point and fixed-point formats on NumPy arrays.",
        epilog=f"Without a command, runs '{DEFAULT_COMMAND}'.",
    )
    subcommands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for name, command in COMMANDS.items():
        subcommands.add_parser(name, help=command.help, description=command.description)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command that ``argv`` (default: ``sys.argv[1:]``) names; return the exit code.

    Wrong arguments make argparse print the usage and exit with status 2.
    """
    arguments = build_parser().parse_args(argv)
    return COMMANDS[arguments.command or DEFAULT_COMMAND].run(arguments)


if __name__ == "__main__":
    sys.exit(main())
