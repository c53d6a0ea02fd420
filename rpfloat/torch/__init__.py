"""rpfloat for PyTorch: rounding of tensors onto any format, with gradients.

Needs PyTorch (``pip install torch``, or the extra: ``pip install 'rpfloat[torch]'``);
``import rpfloat`` itself never imports torch. docs/torch.md describes it.

>>> import torch
>>> import rpfloat.torch as rpt
>>> rpt.round(torch.tensor([0.1, 1 / 3]), "bfloat16")
tensor([0.1001, 0.3340])
"""
try:
    import torch as _torch  # noqa: F401  (fails here, with a clear message, when torch is missing)
except ImportError as error:
    raise ImportError(
        "rpfloat.torch needs PyTorch, which is not installed: pip install torch "
        "(or the extra: pip install 'rpfloat[torch]')"
    ) from error

from .functional import round
from .modules import (
    QuantConfig,
    Quantize,
    TensorConfig,
    checkpoint_context,
    master_parameter,
    quantize_model,
    quantized_state_dict,
    register_quantizable,
    remove_quantization,
)

__all__ = [
    "round",
    "Quantize",
    "TensorConfig",
    "QuantConfig",
    "quantize_model",
    "remove_quantization",
    "quantized_state_dict",
    "master_parameter",
    "register_quantizable",
    "checkpoint_context",
]
