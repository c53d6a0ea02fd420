"""Test configuration: one hypothesis profile for the whole suite.

`deadline=None` because the first call of a numba kernel compiles it, which would
trip any per-example deadline.  `max_examples` is moderate so that the suite stays
within a few minutes on two cores; raise it locally with
`HYPOTHESIS_PROFILE=thorough pytest`.
"""

import os

from hypothesis import HealthCheck, settings

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
