"""Numba kernels. Private: they see only arrays and integers and never validate.

Every kernel is compiled with the options below and explicit signatures, so that
nothing compiles per call and ``cache=True`` lets a second process start warm.
"""
