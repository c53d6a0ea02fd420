"""The CPU backend: block loops over numba-compiled kernels, the kernel table, fast paths."""
