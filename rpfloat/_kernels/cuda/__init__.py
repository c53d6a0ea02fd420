"""The CUDA backend: numba CUDA kernels over the same ``core`` as the CPU
backend, so that a seed gives the same bits on both: ``kernels`` (element
formats) and ``blocks`` (scaled formats). ``rpfloat.cuda`` is its public
adapter; importing this package needs no GPU (kernels compile on first launch)."""
