"""The benchmark script's own arithmetic: `--rounds` merges rows by median."""
import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_round.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_round", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _row(bench, seconds, ratio, ml_seconds=None, same="-"):
    row = bench.Row("bfloat16 · nearest", "normal", "1e7", runs="7", same=same)
    row.seconds, row.ratio, row.ml_seconds = seconds, ratio, ml_seconds
    bench.set_figures(row, 10**7)
    return row


def test_merge_rounds_takes_each_figure_median(bench):
    rounds = [[_row(bench, s, r, m)] for s, r, m in
              [(4e-3, 0.9, 8e-3), (5e-3, 0.7, 6e-3), (9e-3, 0.8, 7e-3)]]
    (row,) = bench.merge_rounds(rounds, [10**7])
    assert row.seconds == 5e-3 and row.ratio == 0.8 and row.ml_seconds == 7e-3
    assert row.mels == "2,000.0"             # 1e7 elements / 5 ms
    assert row.vs_copy == "0.80"
    assert row.vs_ml == "1.40"               # median ml time / median time
    assert row.runs == "7×3"


def test_merge_rounds_keeps_a_failure_and_a_mismatch(bench):
    failed = bench.Row("e4m3 · nearest", "normal", "1e7", mels="error: boom")
    rounds = [[_row(bench, 4e-3, 0.9), _row(bench, 4e-3, 0.9, 5e-3, same="yes")],
              [failed, _row(bench, 4e-3, 0.9, 5e-3, same="**NO**")]]
    first, second = bench.merge_rounds(rounds, [10**7, 10**7])
    assert first.mels == "error: boom"
    assert second.same == "**NO**"
