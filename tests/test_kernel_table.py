"""Every row of the kernel table (``rpfloat._kernels.cpu.table.ROWS``) against the
general loop, bit for bit.

For each row, the formats of `CANDIDATES` that the table gives that row (for
some carrier, overflow policy and mode) are rounded over the input sweeps
(every float16 pattern, float32 patterns over every exponent, float64 ones; each
also sorted by magnitude) by the row's kernel and by ``loops.round_general``,
the loop without any fast path, in which ``core.element.round_bits`` decides
every element (and which the oracle tests hold to exact arithmetic through
``rp.round``). A new fast path is a new row; this test then runs it, and fails
until a format it serves is among the candidates.
"""
import numpy as np
import pytest

import rpfloat as rp
from rpfloat._kernels.core import layout
from rpfloat._kernels.cpu import loops, table
from sweeps import kernel_setup, run_kernel, sweeps

CANDIDATES = [
    *rp.formats.values(),
    rp.FloatFormat(6, 9), rp.FloatFormat(6, 9, subnormals=False), rp.FloatFormat(4, 3, subnormals=False),
    rp.FloatFormat(9, 3), rp.FloatFormat(8, 3, bias=130), rp.FloatFormat(None, 7), rp.FloatFormat(3, 0),
    rp.FixedFormat(8, 8), rp.FixedFormat(16, 16), rp.FixedFormat(4, 4, signed=False), rp.FixedFormat(1, 15),
    rp.FixedFormat(4, 4, overflow="wrap"), rp.FixedFormat(-2, 10), rp.FixedFormat(30, 20),
]
# stochastic draws: (rand_bits, key, offset), one crossing a 2**32 counter boundary
DRAWS = ((64, 11, 0), (31, 12, 2**32 - 1000), (7, 13, 5))
MAX_CASES = 6  # per row, spread over the cases found, besides one per (mode, policy, dtype)


def _policies(fmt):
    if isinstance(fmt, rp.FixedFormat):
        return ("saturate", "wrap")
    if fmt.exp_bits is None:
        return ("inf", "saturate")
    return tuple(policy for policy in ("inf", "saturate", "nan")
                 if (policy != "inf" or fmt.has_inf) and (policy != "nan" or fmt.has_nan))


def _cases():
    """``{row name: [(fmt, dtype, policy, mode), ...]}``: the calls the table gives each row."""
    found = {row.name: [] for row in table.ROWS}
    for fmt in CANDIDATES:
        for policy in _policies(fmt):
            for dtype in (np.float32, np.float64):
                _, params, fast_params, source_bits, target_bits, _ = kernel_setup(dtype, fmt, policy)
                for mode in layout.ALL_MODES:
                    row, _ = table.choose(source_bits, target_bits, params, mode, fast_params)[0]
                    found[row.name].append((fmt, dtype, policy, mode))
    return found


CASES = _cases()


def _spread(cases):
    """One case for every (mode, overflow policy, dtype) that the row serves (the
    k-th such combination takes the k-th of its formats, cyclically, so that the
    formats vary too), and MAX_CASES more spread over the list (every mode of a
    row comes first in it for the first format)."""
    by_key = {}
    for i, (fmt, dtype, policy, mode) in enumerate(cases):
        by_key.setdefault((mode, policy, np.dtype(dtype)), []).append(i)
    picks = {indices[k % len(indices)] for k, indices in enumerate(by_key.values())}
    picks.update(np.linspace(0, len(cases) - 1, min(MAX_CASES, len(cases))).round().astype(int).tolist())
    return [cases[i] for i in sorted(picks)]


def test_every_mode_policy_and_dtype_of_a_row_is_compared():
    for name, cases in CASES.items():
        served = {(mode, policy, np.dtype(dtype)) for _, dtype, policy, mode in cases}
        assert served == {(mode, policy, np.dtype(dtype)) for _, dtype, policy, mode in _spread(cases)}, name


@pytest.mark.parametrize("row", table.ROWS, ids=[row.name for row in table.ROWS])
def test_every_row_serves_a_candidate(row):
    """A row no candidate reaches would go untested: add a format it serves."""
    assert CASES[row.name], f"no format of CANDIDATES takes row {row.name!r}: add one"


@pytest.mark.slow
@pytest.mark.parametrize("row", [row for row in table.ROWS if row.name != "general"],
                         ids=[row.name for row in table.ROWS if row.name != "general"])
def test_row_matches_the_general_loop(row):
    def row_kernel(source_bits, target_bits, params, mode, fast_params):
        return table.entry_point_of(row.kernels[mode], source_bits, target_bits)

    def general_kernel(source_bits, target_bits, params, mode, fast_params):
        return table.entry_point_of(loops.round_general, source_bits, target_bits)

    checked = 0
    for fmt, dtype, policy, mode in _spread(CASES[row.name]):
        draws = DRAWS if mode >= layout.STOCHASTIC else ((64, 0, 0),)
        for xs in sweeps():
            if xs.dtype != dtype:
                continue
            for rand_bits, key, offset in draws:
                got = run_kernel(xs, fmt, mode, row_kernel, policy, key, offset, rand_bits)
                want = run_kernel(xs, fmt, mode, general_kernel, policy, key, offset, rand_bits)
                view = {4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
                bad = np.flatnonzero(got.view(view) != want.view(view))
                assert bad.size == 0, (
                    f"row {row.name}, {fmt!r} {policy} mode {mode} rand_bits {rand_bits} on {xs.dtype}: "
                    f"{bad.size} differ, e.g. x={xs[bad[:4]]!r} row={got[bad[:4]]!r} general={want[bad[:4]]!r}")
                checked += 1
    assert checked >= 2


def test_the_general_row_takes_the_rare_formats():
    """Formats whose min_normal is a float32 subnormal, and fixed-point wrap-around,
    take the general loop (no fast path) in every mode."""
    general = [row for row in table.ROWS if row.name == "general"][0]
    for fmt, policy in ((rp.FloatFormat(8, 3, bias=130), "inf"), (rp.FixedFormat(4, 4), "wrap")):
        _, params, fast_params, source_bits, target_bits, _ = kernel_setup(np.float32, fmt, policy)
        for mode in layout.ALL_MODES:
            assert table.choose(source_bits, target_bits, params, mode, fast_params)[0][0] is general


def test_the_table_ends_in_kernels_for_every_call():
    """The bit-level rows need no environment, and the last row serves every mode
    and carrier: `choose` always ends in a kernel that runs anywhere."""
    assert all(row.environment == 0 for row in table.ROWS[table.BIT_LEVEL:])
    last = table.ROWS[-1]
    assert all(kernel is not None for kernel in last.kernels)
    assert set(last.carriers) == set(table.ANY_CARRIERS)
