"""benchmarks/loop_asm.py's loop finder, on hand-written assembly."""
import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "loop_asm.py"
_LOADER = importlib.util.spec_from_file_location("loop_asm", _PATH)
loop_asm = importlib.util.module_from_spec(_LOADER)
_LOADER.loader.exec_module(loop_asm)

VECTOR = "\tvpaddd\t%ymm1, %ymm2, %ymm3"
COUNTING = ["\tvpminud\t%ymm0, %ymm3, %ymm0"] * 12                   # stores nothing
STORING = [VECTOR] * 11 + ["\tvmovdqu\t%ymm3, (%rax,%rdx,4)"]       # a fast loop
SCALAR = ["\taddq\t$8, %rdx"] * 5


def _asm(*loops):
    """Each body in a loop of its own (label, body, backward jump), an outer loop around all."""
    lines = [".LBB0_1:"]
    for number, body in enumerate(loops, start=2):
        lines += [f".LBB0_{number}:", *body, f"\tjne\t.LBB0_{number}"]
    lines += ["\tjmp\t.LBB0_1", "\tretq"]
    return "\n".join(lines)


def test_the_short_storing_loop_comes_first():
    loops = loop_asm.vector_loops(_asm(COUNTING, STORING + SCALAR, STORING * 9))
    assert len(loops) == 3                                  # the outer loop is not innermost
    assert loops[0] == STORING + SCALAR + ["\tjne\t.LBB0_3"]  # stores, at most 100 instructions
    assert len(loops[1]) == 9 * len(STORING) + 1            # then the densest of the others
    assert loops[2][0] == COUNTING[0]


def test_loops_with_few_vector_instructions_are_left_out():
    assert loop_asm.vector_loops(_asm([VECTOR] * 9 + SCALAR, SCALAR)) == []
