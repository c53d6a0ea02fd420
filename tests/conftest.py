"""Test configuration: one hypothesis profile for the whole suite.

`deadline=None` because the first call of a numba kernel compiles it, which would
trip any per-example deadline.  `max_examples` is moderate so that the suite stays
within a few minutes on two cores; raise it locally with
`HYPOTHESIS_PROFILE=thorough pytest`.
"""

import os
import warnings

import pytest
from hypothesis import HealthCheck, settings

# On a failure hypothesis imports libcst (to suggest an @example patch), whose import
# raises a DeprecationWarning from mypy_extensions; with warnings as errors that
# would replace the real failure report by an INTERNALERROR.  Import it quietly now.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import libcst.codemod  # noqa: F401
        import libcst.metadata  # noqa: F401
    except ImportError:
        pass

settings.register_profile(
    "rpfloat",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    parent=settings.get_profile("rpfloat"),
    max_examples=2000,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "rpfloat"))


@pytest.fixture
def small_ranges(monkeypatch):
    """The CPU backend (rpfloat._kernels.cpu.backend) with its thread threshold and
    range size lowered, so that arrays of a few hundred thousand elements run on
    threads, in many ranges (where numba has more than one thread). Returns the module."""
    from rpfloat._kernels.cpu import backend

    monkeypatch.setattr(backend, "PARALLEL_THRESHOLD", 1 << 16)
    monkeypatch.setattr(backend, "RANGE_MIN", 1 << 12)
    return backend
