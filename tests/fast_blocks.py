"""The fast block kernel (``rpfloat._kernels.cpu.blocks.fast_kernel``) run in
every form that serves a plan, for the tests that hold it to the general kernel."""
import numpy as np

import rpfloat as rp
from rpfloat._kernels.cpu.blocks import BIT_LOOPS, UNIFORM_LOOPS, fast_kernel


def run_fast_forms(x, plan, block_params, out, scales, key, offset):
    """Round the float32 rows `x` into `out` (and their scales into `scales`)
    with the fast kernel in each form that serves `plan`, and check that they
    give the same bits: nearest onto float elements by adding a power of two
    (what ``rp.round`` takes) and by bits; stochastic in the kernel's copies
    with other element loops (the uniform one whatever the format, the grid
    one where the plan takes it)."""
    forms = [(adding, BIT_LOOPS) for adding in ((0, 1) if plan.by_adding else (0,))]
    if plan.mode == rp.Mode.STOCHASTIC:
        forms += [(0, loops) for loops in sorted({UNIFORM_LOOPS, plan.stochastic_loops} - {BIT_LOOPS})]
    first = None
    for adding, loops in forms:
        fast_kernel(int(plan.mode), loops)(x.view(np.int32), out.view(np.int32), scales, plan.fast_params,
                                           plan.element_params, block_params, plan.float_params, adding, key,
                                           offset, plan.rand_bits)
        if first is None:
            first = out.copy()
        else:
            np.testing.assert_array_equal(out.view(np.uint32), first.view(np.uint32), err_msg=f"form {adding, loops}")
