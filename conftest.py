"""pytest collection for the whole repository: the doctests of an optional adapter
(``rpfloat/torch``) are collected only where its library is installed. The test
extra installs them all, so CI runs everything."""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("rpfloat/torch")
if importlib.util.find_spec("dask") is None:
    collect_ignore.append("rpfloat/dask.py")
