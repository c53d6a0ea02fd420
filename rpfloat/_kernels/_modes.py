"""Rounding modes as the kernels number them (as in ``rpfloat.modes.Mode``: plain
ints for numba), in a module of their own so that every kernel module can
import them."""
NEAREST, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC, STOCHASTIC_EQUAL = range(8)
