"""Print the hot loop of an rpfloat kernel as assembly, for ``llvm-mca``.

The fast loops are compute-bound on this machine (they run as fast on data in
L3 as in memory), so what limits them is which execution ports their
instructions need. ``llvm-mca`` models that from the loop body alone::

    python benchmarks/loop_asm.py scaled_stochastic f32-f64 > loop.s
    llvm-mca -mcpu=znver3 -iterations=200 -bottleneck-analysis loop.s

The loop printed is the innermost loop (a backward jump to a label) with the
most vector instructions. Kernels are compiled afresh into a temporary numba
cache (numba does not show the assembly of cached code), which takes a few
seconds each.
"""
import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

SIGNATURES = {"f32": 0, "f64": 1, "f32-f64": 2}  # quantize.SIGNATURES: float32, float64, widening


def vector_loops(asm: str) -> list[list[str]]:
    """The innermost loops of `asm` with ten vector (ymm or zmm) instructions or
    more, each as its instruction lines, the likeliest fast loop first: a short
    loop (at most 100 instructions) that stores vectors, the most vector-dense
    first. The range counts store nothing, and the general loop that redoes
    outliers is long."""
    lines = asm.splitlines()
    labels = {}
    for number, line in enumerate(lines):
        match = re.match(r"^(\.L\w+):", line)
        if match:
            labels[match.group(1)] = number
    loops = []
    for number, line in enumerate(lines):
        match = re.match(r"^\s+j\w+\s+(\.L\w+)", line)
        if match and labels.get(match.group(1), number) < number:
            loops.append((labels[match.group(1)], number))
    innermost = [(start, stop) for start, stop in loops
                 if not any((start, stop) != other and start <= other[0] and other[1] <= stop for other in loops)]
    bodies = []
    for start, stop in innermost:
        body = [line for line in lines[start:stop + 1] if line.startswith("\t") and not line.strip().startswith(".")]
        if _vector_count(body) >= 10:
            bodies.append(body)
    return sorted(bodies, key=lambda body: (not (_stores_vectors(body) and len(body) <= 100),
                                            -_vector_count(body) / len(body)))


def _vector_count(body: list[str]) -> int:
    return sum("ymm" in line or "zmm" in line for line in body)


def _stores_vectors(body: list[str]) -> bool:
    """Whether a vector register is moved to memory (``vmov... %ymm3, (%rax)``)."""
    return any(re.match(r"\s*vmov\w*\s+%[yz]mm\d+, .*\(", line) for line in body)


def kernel(name: str):
    from rpfloat._kernels.cpu import fast_fixed, loops
    named = {"scaled_stochastic": loops.round_scaled_stochastic, "split": loops.round_stochastic_split,
             "halves": loops.round_stochastic_halves,
             "halves_zero": loops.round_stochastic_halves_from_zero, "adding": loops.round_nearest_by_adding,
             "scaled": fast_fixed.round_scaled, "general": loops.round_general}
    if name in named:
        return named[name]
    kind, _, mode = name.partition(":")  # "bits:6" (loops.MODE_KERNELS), "uniform:6"
    return {"bits": loops.MODE_KERNELS, "uniform": loops.UNIFORM_KERNELS}[kind][int(mode)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", help="scaled_stochastic, split, halves, halves_zero, adding, scaled, general, "
                                       "bits:MODE or uniform:MODE (MODE: the mode number, 6 = stochastic)")
    parser.add_argument("signature", choices=sorted(SIGNATURES), help="data and result types")
    parser.add_argument("--all", action="store_true", help="every vector loop, not just the first")
    args = parser.parse_args(argv)
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="rpfloat-asm-")  # before numba loads
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rpfloat._kernels.cpu import loops
    function = kernel(args.kernel)
    signature = loops.SIGNATURES[SIGNATURES[args.signature]]  # fast_fixed.round_scaled's too
    function.compile(signature)
    loops = vector_loops(function.inspect_asm(signature.args))
    if not loops:
        print("no vector loop found", file=sys.stderr)
        return 1
    for body in loops if args.all else loops[:1]:
        print(f"# {len(body)} instructions", file=sys.stderr)
        print("\n".join(body))
    return 0



if __name__ == "__main__":
    sys.exit(main())
