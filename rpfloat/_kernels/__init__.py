"""Numba kernels. Private: they see only arrays and integers and never validate.

``core/`` holds the integer-only pieces that every backend compiles: the
parameter layout and mode numbers (``core.layout``), rounding one element
(``core.element``), the counter-based random stream (``core.stream``) and bit
intrinsics (``core.bits``). ``cpu/`` is the CPU backend: the block loop
(``cpu.loops``), the one table that picks a kernel (``cpu.table``), the fast
paths, one file each, and the per-step accumulation kernels.

Every kernel is compiled with ``core.bits.NUMBA_OPTIONS`` and explicit
signatures, so that nothing compiles per call and ``cache=True`` lets a second
process start warm.
"""
