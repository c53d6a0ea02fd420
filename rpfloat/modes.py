"""Rounding modes and their string spellings.

The integer values are what the kernels receive; they are part of no public
contract, users always pass strings (or a :class:`Mode`).
"""
from __future__ import annotations

import difflib
import enum

__all__ = ["Mode", "parse_mode"]


class Mode(enum.IntEnum):
    """A rounding mode (docs/rounding.md defines each).

    Examples
    --------
    >>> parse_mode("rne")
    <Mode.NEAREST: 0>
    """

    NEAREST = 0
    NEAREST_AWAY = 1
    TOWARD_ZERO = 2
    UP = 3
    DOWN = 4
    ODD = 5
    STOCHASTIC = 6
    STOCHASTIC_EQUAL = 7

    @property
    def is_stochastic(self) -> bool:
        return self._value_ >= 6  # STOCHASTIC, STOCHASTIC_EQUAL (a plain int compare: per-call cost)


_ALIASES = {
    "nearest": Mode.NEAREST,
    "nearest_even": Mode.NEAREST,
    "rne": Mode.NEAREST,
    "nearest_away": Mode.NEAREST_AWAY,
    "rna": Mode.NEAREST_AWAY,
    "toward_zero": Mode.TOWARD_ZERO,
    "truncate": Mode.TOWARD_ZERO,
    "rtz": Mode.TOWARD_ZERO,
    "up": Mode.UP,
    "toward_positive": Mode.UP,
    "down": Mode.DOWN,
    "toward_negative": Mode.DOWN,
    "odd": Mode.ODD,
    "stochastic": Mode.STOCHASTIC,
    "sr": Mode.STOCHASTIC,
    "stochastic_equal": Mode.STOCHASTIC_EQUAL,
}


# names other tools give modes (CPFloat, MATLAB, C's fenv), for the error's hint only
_OTHER_SPELLINGS = {"ru": "up", "rd": "down", "rup": "up", "rdown": "down", "ceil": "up", "floor": "down",
                    "trunc": "toward_zero", "chop": "toward_zero", "round_to_odd": "odd", "ro": "odd",
                    "toward_positive_infinity": "up", "toward_negative_infinity": "down", "rn": "nearest",
                    "rs": "stochastic"}


def parse_mode(mode) -> Mode:
    """Return the :class:`Mode` for a mode name (case-insensitive) or a Mode.

    Raises
    ------
    TypeError
        If `mode` is not a string or Mode.
    ValueError
        If the name is unknown; the message lists the accepted names.

    Examples
    --------
    >>> parse_mode("Truncate")
    <Mode.TOWARD_ZERO: 2>
    """
    if isinstance(mode, Mode):
        return mode
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string such as 'nearest', got {type(mode).__name__}")
    try:
        return _ALIASES[mode.lower()]
    except KeyError:
        known = ", ".join(repr(name) for name in _ALIASES)
        close = [_OTHER_SPELLINGS[mode.lower()]] if mode.lower() in _OTHER_SPELLINGS else \
            difflib.get_close_matches(mode.lower(), list(_ALIASES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown rounding mode {mode!r}{hint}; pass one of {known}") from None
