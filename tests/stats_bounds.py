"""Rigorous tolerances for the statistical checks of the test suite (no normal approximation).

Binomial counts.  For a count K ~ Binomial(n, p), the Chernoff bound in its
relative-entropy form, P(K >= k) <= exp(-n * KL(k/n || p)) for k/n >= p (and the
mirror bound below p), holds for every n and p.  `assert_binomial` accepts K iff
n * KL(K/n || p) < log(2 / delta), so a correct implementation fails it with
probability below `delta`.

Sums.  Bernstein's inequality, P(|S - E S| >= t) <= 2 exp(-t**2 / (2 (V + b t / 3)))
for a sum S of independent terms, each within b of its mean, with total variance V:
`bernstein_tolerance` is the t at which the right-hand side equals `delta`.

`Budget` splits a file's failure probability among at most a given number of
checks (a union bound): with `Budget(1e-6, 400)` the chance that a correct
implementation fails any of the (at most 400) checks is below 1e-6.  Seeds are
fixed, so a passing check passes every time; the bound says how unlikely it was that
a correct implementation fails it for the seed chosen.
"""

from __future__ import annotations

import math
from fractions import Fraction


def kl_bernoulli(q: float, p: float) -> float:
    """Relative entropy KL(Bernoulli(q) || Bernoulli(p)), 0 < p < 1, 0 <= q <= 1."""
    out = 0.0
    if q > 0:
        out += q * math.log(q / p)
    if q < 1:
        out += (1 - q) * math.log((1 - q) / (1 - p))
    return out


def binomial_bound(delta: float) -> float:
    """The largest n * KL(K/n || p) that `assert_binomial` accepts at failure probability delta."""
    return math.log(2 / delta)


def assert_binomial(count: int, n: int, p, delta: float, context: str = ""):
    """Assert that `count` is a plausible Binomial(n, p) draw: it fails a correct
    implementation with probability below `delta` (Chernoff, both tails).  p = 0 or 1
    (a Fraction, int or float) must be met exactly."""
    if p == 0 or p == 1:
        assert count == n * p, f"{context}: probability {p} exactly, got {count} of {n}"
        return
    statistic = n * kl_bernoulli(count / n, float(p))
    bound = binomial_bound(delta)
    assert statistic < bound, (
        f"{context}: {count} of {n}, expected about {float(p) * n:.1f} "
        f"(n*KL = {statistic:.1f} >= log(2/delta) = {bound:.1f})"
    )


def bernstein_tolerance(variance: float, step: float, delta: float) -> float:
    """t with 2 exp(-t**2 / (2 (V + b t / 3))) = delta: the quadratic in t solved."""
    log_bound = math.log(2 / delta)
    a = step * log_bound / 3
    return a + math.sqrt(a * a + 2 * variance * log_bound)


class Budget:
    """A total failure probability split evenly among at most `checks` checks."""

    def __init__(self, total: float, checks: int):
        self.total, self.checks, self.done = total, checks, 0
        self.delta = total / checks

    def spend(self):
        self.done += 1
        assert self.done <= self.checks, "more checks than the union bound allows for"

    def binomial(self, count: int, n: int, p: Fraction | float, context: str = ""):
        self.spend()
        assert_binomial(count, n, p, self.delta, context)

    def bernstein(self, variance: float, step: float) -> float:
        self.spend()
        return bernstein_tolerance(variance, step, self.delta)
