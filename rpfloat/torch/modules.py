"""Quantized training of PyTorch models: :class:`Quantize`, the per-tensor
:class:`QuantConfig` and :func:`quantize_model`.

:func:`quantize_model` attaches rounding to a model through forward hooks: in
the forward pass each supported module sees rounded copies of its parameters,
its output (and, where asked, its input) is rounded, and the gradients reaching
the parameters are rounded where they accumulate. The parameters themselves stay
the float32 master weights that the optimizer updates and that
``model.state_dict()`` saves; :func:`quantized_state_dict` gives the rounded
tensors a low-precision device would hold. docs/torch.md shows the three usual
jobs (fixed point with straight-through gradients, master weights with rounded
copies, a whole model in dynamic fixed point with a configuration file).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
import threading
import warnings
from collections.abc import Mapping, MutableMapping
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.parameter import is_lazy
from torch.nn.utils import parametrize
from torch.utils.weak import WeakIdKeyDictionary

from .._plan import check_rand_bits
from ..fixedformat import FixedFormat
from ..floatformat import FloatFormat
from ..modes import parse_mode
from ..presets import format as to_format
from ..scaledformat import SCALE_ROUNDINGS, ScaledFormat
from ..scaling import block_layout_of
from .functional import _argument, _no_gradient_rounding
from .functional import round as round_tensor

__all__ = [
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

SCALE_POLICIES = ("fixed", "auto")
_DEFAULT_SCALE_ROUNDING = "rceil"  # TensorConfig's, for scale="auto"
KINDS = ("parameters", "activations", "gradients")
_ACTIVATION_SITES = ("input", "output")
_CONFIG_VERSION = 1

# module type -> names of the parameters the forward pass sees rounded
_QUANTIZABLE: dict[type, tuple[str, ...]] = {
    nn.Linear: ("weight", "bias"),
    nn.Conv1d: ("weight", "bias"),
    nn.Conv2d: ("weight", "bias"),
    nn.Conv3d: ("weight", "bias"),
    nn.ConvTranspose1d: ("weight", "bias"),
    nn.ConvTranspose2d: ("weight", "bias"),
    nn.ConvTranspose3d: ("weight", "bias"),
    nn.Bilinear: ("weight", "bias"),
    nn.BatchNorm1d: ("weight", "bias"),
    nn.BatchNorm2d: ("weight", "bias"),
    nn.BatchNorm3d: ("weight", "bias"),
    nn.InstanceNorm1d: ("weight", "bias"),
    nn.InstanceNorm2d: ("weight", "bias"),
    nn.InstanceNorm3d: ("weight", "bias"),
    nn.LayerNorm: ("weight", "bias"),
    nn.GroupNorm: ("weight", "bias"),
    nn.PReLU: ("weight",),
    nn.Embedding: ("weight",),
    nn.EmbeddingBag: ("weight",),
    # its out_proj (an nn.Linear it never calls: it reads the weights) is rounded by its hooks
    nn.MultiheadAttention: ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                            "bias_k", "bias_v"),
}

if hasattr(nn, "RMSNorm"):  # torch 2.4 and later
    _QUANTIZABLE[nn.RMSNorm] = ("weight",)

_STATE_ATTRIBUTE = "_rpfloat_quantization"


# -- random streams ------------------------------------------------------------


def _root_seed(rng) -> np.random.SeedSequence:
    """The seed that the named random streams of a module or model derive from:
    fresh OS entropy for None; an int seed or a SeedSequence as given; a seed
    drawn from a NumPy or torch Generator (advancing it)."""
    if rng is None:
        return np.random.SeedSequence()
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(int(rng.integers(0, 2**63)))
    if isinstance(rng, torch.Generator):
        return np.random.SeedSequence(int(torch.randint(0, 2**62, (), generator=rng)))
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"rng seed must be a non-negative int, got {rng}")
        return np.random.SeedSequence(int(rng))
    raise TypeError(
        "rng must be None, an int seed, a numpy.random.SeedSequence, a numpy.random.Generator "
        f"or a torch.Generator, got {type(rng).__name__}"
    )


def _stream(root: np.random.SeedSequence, name: str) -> np.random.Generator:
    """The random stream called `name` under `root`. Keyed by the name, not by a
    position, so that adding or removing one tensor's rounding leaves the draws of
    every other tensor as they were."""
    word = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, word)))


# -- Quantize --------------------------------------------------------------------


class Quantize(nn.Module):
    """A module that rounds its input onto `fmt`: an activation quantizer.

    The forward pass returns ``rpfloat.torch.round(x, fmt, mode, ...)``: the
    values of :func:`rpfloat.round`, the gradient passed straight through, or
    rounded onto `grad_fmt` in `grad_mode` when that is given.

    Parameters
    ----------
    fmt : FloatFormat, FixedFormat, ScaledFormat or str
        The format of the activations (a name is looked up with
        :func:`rpfloat.format`). Dynamic fixed point is
        ``rp.ScaledFormat(rp.FixedFormat(8, 0), scale_rounding="rceil")``.
    mode : str, default "nearest"
        The rounding mode of the values.
    grad_fmt : format or str, optional
        The format the gradient flowing back is rounded onto; None (default):
        straight through.
    grad_mode : str, default "nearest"
        The rounding mode of the gradient.
    rand_bits : int, optional
        Stochastic `mode` only: the random bits that decide each rounding of the
        values, as for :func:`rpfloat.round` (None: 64).
    rng : None, int, numpy.random.SeedSequence, numpy.random.Generator or torch.Generator
        Seeds the module's own random streams (one for the values, one for the
        gradients) for the stochastic modes. Every call draws fresh random
        numbers from them, so a training loop never reuses the draws of an
        earlier step. With an int seed a module built anew replays the same
        sequence of draws (reproducible runs); None seeds from OS entropy. The
        streams' positions are not part of ``state_dict()``. A stochastic
        Quantize refuses to run in a forward pass recomputed by activation
        checkpointing, where it would draw anew.

    Examples
    --------
    >>> import torch
    >>> import rpfloat as rp
    >>> quantize = Quantize(rp.FixedFormat(1, 7))
    >>> quantize(torch.tensor([0.3, -1.5, 0.999]))
    tensor([ 0.2969, -1.0000,  0.9922])
    """

    def __init__(self, fmt, mode="nearest", *, grad_fmt=None, grad_mode="nearest", rand_bits=None, rng=None):
        super().__init__()
        self.fmt = _argument(to_format, fmt, "fmt")
        self.mode = _mode_name(mode, "mode")
        self.rand_bits = _rand_bits(rand_bits, self.mode)
        self.grad_fmt = None if grad_fmt is None else _argument(to_format, grad_fmt, "grad_fmt")
        self.grad_mode = _mode_name(grad_mode, "grad_mode")
        if self.grad_fmt is None:
            _no_gradient_rounding(self.grad_mode, None)
        root = _root_seed(rng)
        self.rng = _stream(root, "values")
        self.grad_rng = _stream(root, "gradients") if self.grad_fmt is not None else None

    def forward(self, x):
        rng = _forward_stream(self.rng, "Quantize") if parse_mode(self.mode).is_stochastic else self.rng
        return round_tensor(
            x, self.fmt, self.mode, rng=rng, rand_bits=self.rand_bits,
            grad_fmt=self.grad_fmt, grad_mode=self.grad_mode, grad_rng=self.grad_rng,
        )

    def extra_repr(self) -> str:
        text = f"fmt={_format_label(self.fmt)}, mode={self.mode!r}"
        if self.rand_bits is not None:
            text += f", rand_bits={self.rand_bits}"
        if self.grad_fmt is not None:
            text += f", grad_fmt={_format_label(self.grad_fmt)}, grad_mode={self.grad_mode!r}"
        return text


# -- activation checkpointing ------------------------------------------------------

_checkpointing = threading.local()  # .records, .replays: stacks of the _DrawRecord in use


class _DrawRecord:
    """The states that the random streams of the stochastic forward roundings
    of one checkpointed call started from, in call order per stream."""

    def __init__(self):
        self.states: dict[int, list] = {}

    def recording(self):
        return _Entered(self, "records", None)

    def replaying(self):
        return _Entered(self, "replays", {})


class _Entered:
    """A context manager that puts a _DrawRecord on one of the stacks of
    `_checkpointing` (re-enterable: each recomputation replays from the start)."""

    def __init__(self, record, stack, cursors):
        self.record, self.stack, self.cursors = record, stack, cursors

    def __enter__(self):
        if self.cursors is not None:
            self.cursors = {}
        stack = getattr(_checkpointing, self.stack, None)
        if stack is None:
            stack = []
            setattr(_checkpointing, self.stack, stack)
        stack.append(self)
        return self

    def __exit__(self, *exc_info):
        getattr(_checkpointing, self.stack).remove(self)
        return False


def checkpoint_context():
    """The ``context_fn`` of ``torch.utils.checkpoint.checkpoint`` that makes a
    recomputed forward pass round stochastically as the first one did.

    Activation checkpointing runs the forward pass of the checkpointed function
    again during the backward pass. With these contexts the stochastic roundings
    of :class:`Quantize` and of :func:`quantize_model` record where their random
    streams stood in the first pass and replay those draws in the recomputation,
    so the gradients are those of the forward pass that gave the loss, and the
    streams move on as without checkpointing. Without them, such a rounding
    raises in the recomputation. Works with ``use_reentrant=False``.

    Returns
    -------
    tuple of two context managers
        The forward context and the recomputation context.

    Examples
    --------
    >>> import torch
    >>> from torch.utils.checkpoint import checkpoint
    >>> quantize = Quantize("q1.3", "stochastic", rng=0)
    >>> x = torch.full((4,), 0.3, requires_grad=True)
    >>> y = checkpoint(lambda t: quantize(t).square(), x, use_reentrant=False, context_fn=checkpoint_context)
    >>> y.sum().backward()
    >>> torch.equal(x.grad, 2 * Quantize("q1.3", "stochastic", rng=0)(x).detach())
    True
    """
    record = _DrawRecord()
    return record.recording(), record.replaying()


@torch.compiler.disable  # (run time state: never traced into a compiled graph)
def _in_backward_pass() -> bool:
    """Whether autograd is running a backward pass on this thread (a forward pass
    then is a recomputation); False where torch does not say (its private hook)."""
    current_task = getattr(torch._C, "_current_graph_task_id", None)
    return current_task is not None and current_task() != -1


def _forward_stream(rng: np.random.Generator, what: str) -> np.random.Generator:
    """The generator a stochastic rounding of a forward pass draws from: `rng`,
    whose state is recorded inside a :func:`checkpoint_context`; in a forward
    pass recomputed during the backward pass, a generator replaying the draws of
    the first pass. Raise where a recomputation has nothing to replay: its draws
    would be new, and the gradients would belong to another forward pass."""
    key = id(rng)
    replays = getattr(_checkpointing, "replays", None)
    if _in_backward_pass():
        if not replays:
            raise RuntimeError(
                f"{what} rounds stochastically in a forward pass recomputed during the backward pass "
                "(activation checkpointing, torch.utils.checkpoint): the recomputation would draw new random "
                "numbers, and the gradients would not belong to the forward pass that gave the loss. Pass "
                "context_fn=rpfloat.torch.checkpoint_context (with use_reentrant=False) to replay the draws, "
                "or leave the stochastic roundings outside the checkpointed function")
        replay = replays[-1]
        states = replay.record.states.get(key, [])
        position = replay.cursors.get(key, 0)
        if position >= len(states):
            raise RuntimeError(f"{what}: the recomputed forward pass rounds more often than the first one did")
        replay.cursors[key] = position + 1
        rng = np.random.Generator(type(rng.bit_generator)())
        rng.bit_generator.state = states[position]
    records = getattr(_checkpointing, "records", None)
    if records:
        records[-1].record.states.setdefault(key, []).append(rng.bit_generator.state)
    return rng


def _format_label(fmt) -> str:
    spelling = _spelling(fmt)
    return repr(spelling) if spelling is not None else repr(fmt)


def _rand_bits(rand_bits, mode: str):
    """`rand_bits` checked as rp.round checks it for `mode` (None stays None)."""
    if rand_bits is None:
        return None
    try:
        return check_rand_bits(rand_bits, parse_mode(mode))
    except (TypeError, ValueError) as error:
        raise type(error)(f"rand_bits: {error}") from None


def _mode_name(mode, argument: str) -> str:
    """The canonical name of a rounding mode (``"sr"`` -> ``"stochastic"``)."""
    try:
        return parse_mode(mode).name.lower()
    except (TypeError, ValueError) as error:
        raise type(error)(f"{argument}: {error}") from None


# -- per-tensor configuration ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TensorConfig:
    """How one tensor is rounded: format, mode, scale policy, gradient rounding.

    Immutable and hashable.

    Parameters
    ----------
    fmt : FloatFormat, FixedFormat, ScaledFormat or str
        The format (a name is looked up with :func:`rpfloat.format`). With
        ``scale="auto"``, the element format of the scaled format.
    mode : str, default "nearest"
        The rounding mode (stored under its canonical name).
    scale : {"fixed", "auto"}, default "fixed"
        ``"fixed"``: round onto `fmt` as given. ``"auto"``: dynamic fixed
        point, one power-of-two scale per tensor chosen from its largest
        magnitude at every call, i.e. round onto
        ``rp.ScaledFormat(fmt, scale_rounding=scale_rounding)``. `fmt` must then
        be a FixedFormat or FloatFormat. Applies to `grad_fmt` alike.
    scale_rounding : {"floor", "ceil", "even", "rceil"}, default "rceil"
        With ``scale="auto"``: how the scale follows the maximum
        (docs/scaled.md); ``"rceil"`` never saturates. Another value with
        ``scale="fixed"``, which has no scale to choose, is a ValueError (a
        ScaledFormat `fmt` carries its own ``scale_rounding``).
    grad_fmt : format or str, optional
        Activations only: the format of the gradient flowing back through this
        activation (None: straight through). A parameter's gradient has an
        entry of its own in :class:`QuantConfig`, ``"<parameter>.grad"``.
    grad_mode : str, default "nearest"
        The rounding mode of that gradient.
    rand_bits : int, optional
        Stochastic `mode` only: the random bits that decide each rounding of the
        tensor, as for :func:`rpfloat.round` (None: 64): hardware stochastic
        rounding with a narrow random source.

    Attributes
    ----------
    format : FloatFormat, FixedFormat or ScaledFormat
        The format the values are rounded onto (the scaled format for
        ``scale="auto"``).
    grad_format : format or None
        The same for the gradient.

    Examples
    --------
    >>> import rpfloat as rp
    >>> TensorConfig("q8.0", scale="auto").format
    ScaledFormat(element='q8.0', scale_rounding='rceil')
    >>> TensorConfig("bf16", "sr").mode
    'stochastic'
    """

    fmt: object
    mode: str = "nearest"
    scale: str = "fixed"
    scale_rounding: str = _DEFAULT_SCALE_ROUNDING
    grad_fmt: object = None
    grad_mode: str = "nearest"
    rand_bits: int | None = None

    def __post_init__(self):
        set_field = object.__setattr__.__get__(self)
        if self.fmt is None:
            raise ValueError("fmt must be a format; leave a tensor unrounded with None in place of its TensorConfig")
        set_field("fmt", _argument(to_format, self.fmt, "fmt"))
        set_field("mode", _mode_name(self.mode, "mode"))
        set_field("grad_mode", _mode_name(self.grad_mode, "grad_mode"))
        if self.grad_fmt is None:
            _no_gradient_rounding(self.grad_mode, None)
        set_field("rand_bits", _rand_bits(self.rand_bits, self.mode))
        if self.grad_fmt is not None:
            set_field("grad_fmt", _argument(to_format, self.grad_fmt, "grad_fmt"))
        if self.scale not in SCALE_POLICIES:
            raise ValueError(f"scale must be one of {SCALE_POLICIES}, got {self.scale!r}")
        if self.scale_rounding not in SCALE_ROUNDINGS:
            raise ValueError(f"scale_rounding must be one of {SCALE_ROUNDINGS}, got {self.scale_rounding!r}")
        if self.scale == "fixed" and self.scale_rounding != _DEFAULT_SCALE_ROUNDING:
            raise ValueError(
                f'scale_rounding={self.scale_rounding!r} sets the scale that scale="auto" chooses; with '
                'scale="fixed" nothing reads it: pass scale="auto" too, or for a ScaledFormat set its own '
                f"(fmt.replace(scale_rounding={self.scale_rounding!r}))")
        if self.scale == "auto":
            for argument in ("fmt", "grad_fmt"):
                if isinstance(getattr(self, argument), ScaledFormat):
                    raise ValueError(
                        f'scale="auto" scales an element format; {argument} is already a ScaledFormat '
                        '(use scale="fixed" to round onto it as it is)')
        set_field("_formats", (self._scaled(self.fmt), self._scaled(self.grad_fmt)))  # validates now

    def _scaled(self, fmt):
        if fmt is None or self.scale == "fixed":
            return fmt
        return ScaledFormat(fmt, scale_rounding=self.scale_rounding)

    @property
    def format(self):
        return self._formats[0]

    @property
    def grad_format(self):
        return self._formats[1]



def tensor_kind(name: str) -> str:
    """The kind of a tensor name of :class:`QuantConfig`: ``"gradients"`` for
    ``"….grad"``, ``"activations"`` for ``"….input"`` and ``"….output"``,
    else ``"parameters"``.

    Examples
    --------
    >>> tensor_kind("0.weight.grad"), tensor_kind("0.output"), tensor_kind("0.weight")
    ('gradients', 'activations', 'parameters')
    """
    last = name.rpartition(".")[2]
    if last == "grad":
        return "gradients"
    if last in _ACTIVATION_SITES:
        return "activations"
    return "parameters"


class QuantConfig(MutableMapping):
    """Per-tensor rounding of a model: tensor name -> :class:`TensorConfig`.

    Names are those of ``model.named_parameters()`` for parameters
    (``"0.weight"``), the module's path and ``.input`` / ``.output`` for its
    activations (``"0.output"``; ``"output"`` for the model itself), and a
    parameter's name and ``.grad`` for its gradient (``"0.weight.grad"``).
    A name mapped to None is left unrounded. A name without an entry takes the
    default of its kind; inputs take the `inputs` default (None unless given: a
    module's input is usually the previous module's output, rounded already).

    Parameters
    ----------
    parameters, activations, gradients : TensorConfig, format, str or None
        The default of each kind (a format or name stands for
        ``TensorConfig(fmt)``); None (default): not rounded. The activations
        default covers module outputs; its `grad_fmt` rounds the gradient
        flowing back through them. The gradients default covers the gradients
        of the parameters, rounded where they accumulate, so that the
        optimizer sees them rounded.
    tensors : mapping of str to TensorConfig, format, str or None, optional
        Entries for single tensors; they win over the defaults.
    inputs : TensorConfig, format, str or None
        The default of the inputs of the modules :func:`quantize_model` wraps
        (``"….input"``): set it so that every operand of their products is
        rounded where something unrounded (a LayerNorm, a GELU, a residual add)
        sits between two of them. None (default): inputs are rounded only where
        they have an entry.

    Examples
    --------
    >>> config = QuantConfig(parameters="q1.7", tensors={"0.bias": None})
    >>> config.resolve("0.weight").fmt, config.resolve("0.bias"), config.resolve("0.output")
    (FixedFormat(int_bits=1, frac_bits=7, name='q1.7'), None, None)
    """

    def __init__(self, parameters=None, activations=None, gradients=None, tensors=None, inputs=None):
        self.defaults = {
            "parameters": _entry(parameters, "parameters", "parameters"),
            "activations": _entry(activations, "activations", "activations"),
            "gradients": _entry(gradients, "gradients", "gradients"),
            "inputs": _entry(inputs, "activations", "inputs"),
        }
        if tensors is not None and not isinstance(tensors, Mapping):
            raise TypeError(f"tensors must be a mapping of tensor names to entries (a dict), "
                            f"got {type(tensors).__name__}")
        self._tensors: dict[str, TensorConfig | None] = {}
        for name, entry in (tensors or {}).items():
            self[name] = entry

    # -- the mapping of explicit entries --

    def __getitem__(self, name):
        return self._tensors[name]

    def __setitem__(self, name, entry):
        if not isinstance(name, str) or not name or name.startswith(".") or name.endswith("."):
            raise ValueError(f"a tensor name must be a dotted name such as '0.weight', got {name!r}")
        self._tensors[name] = _entry(entry, tensor_kind(name), name)

    def __delitem__(self, name):
        del self._tensors[name]

    def __iter__(self):
        return iter(self._tensors)

    def __len__(self):
        return len(self._tensors)

    def __eq__(self, other):
        if not isinstance(other, QuantConfig):
            return NotImplemented
        return self.defaults == other.defaults and self._tensors == other._tensors

    __hash__ = None

    def __repr__(self) -> str:
        defaults = ", ".join(f"{kind}={entry!r}" for kind, entry in self.defaults.items()
                             if kind != "inputs" or entry is not None)
        return f"QuantConfig({defaults}, tensors={self._tensors!r})"

    def copy(self) -> QuantConfig:
        return QuantConfig(**self.defaults, tensors=self._tensors)

    def resolve(self, name: str) -> TensorConfig | None:
        """The rounding of tensor `name`: its entry, else its kind's default
        (an input's: the `inputs` default)."""
        if name in self._tensors:
            return self._tensors[name]
        if name.rpartition(".")[2] == "input":
            return self.defaults["inputs"]
        return self.defaults[tensor_kind(name)]

    def for_model(self, model: nn.Module) -> QuantConfig:
        """This configuration with an entry for every tensor of `model` that
        :func:`quantize_model` can round (the ones without a rounding as None):
        the listing to dump, read and edit.

        Examples
        --------
        >>> from torch import nn
        >>> list(QuantConfig(parameters="bf16").for_model(nn.Sequential(nn.Linear(2, 1))))
        ['0.weight', '0.weight.grad', '0.bias', '0.bias.grad', '0.input', '0.output']
        """
        _check_model(model)
        listing = QuantConfig(**self.defaults)
        for name in _tensor_names(model):
            listing[name] = self.resolve(name)
        for name, entry in self._tensors.items():  # entries the model lacks stay, for quantize_model to report
            listing._tensors.setdefault(name, entry)
        return listing

    # -- JSON --

    def to_dict(self) -> dict:
        """The configuration as JSON-ready data (what :meth:`dump` writes)."""
        return {
            "version": _CONFIG_VERSION,
            "defaults": {kind: _config_to_json(entry, "activations" if kind == "inputs" else kind)
                         for kind, entry in self.defaults.items() if kind != "inputs" or entry is not None},
            "tensors": {name: _config_to_json(entry, tensor_kind(name)) for name, entry in self._tensors.items()},
        }

    @classmethod
    def from_dict(cls, data) -> QuantConfig:
        """The configuration that :meth:`to_dict` gave `data` for."""
        if not isinstance(data, dict):
            raise ValueError(f"a QuantConfig is a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"version", "defaults", "tensors"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}; a QuantConfig has 'version', 'defaults', 'tensors'")
        if data.get("version", _CONFIG_VERSION) != _CONFIG_VERSION:
            raise ValueError(f"QuantConfig version {data['version']!r} is not {_CONFIG_VERSION}")
        defaults = data.get("defaults") or {}
        unknown = set(defaults) - set(KINDS) - {"inputs"}
        if unknown:
            raise ValueError(f"unknown default kinds {sorted(unknown)}; the kinds are {KINDS} and 'inputs'")
        config = cls(**{kind: _config_from_json(value, f"defaults.{kind}") for kind, value in defaults.items()})
        tensors = data.get("tensors") or {}
        if not isinstance(tensors, dict):
            raise ValueError(f"'tensors' must be a JSON object of tensor names, got {type(tensors).__name__}")
        for name, value in tensors.items():
            config[name] = _config_from_json(value, f"tensors[{name!r}]")
        return config

    def dump(self, path) -> None:
        """Write the configuration to `path` as JSON, one tensor a line.

        Formats are written as a name that :func:`rpfloat.format` reads back
        (a preset, ``"qI.F"``, ``"eXmY"``) where one names them exactly, else
        as their constructor fields with ``"type"``.
        """
        data = self.to_dict()

        def block(mapping, indent):
            lines = [f"{indent}{json.dumps(key)}: {json.dumps(value)}" for key, value in mapping.items()]
            return ",\n".join(lines)

        text = (
            "{\n"
            f'  "version": {data["version"]},\n'
            '  "defaults": {\n' + block(data["defaults"], "    ") + "\n  },\n"
            '  "tensors": {\n' + block(data["tensors"], "    ") + ("\n" if data["tensors"] else "") + "  }\n"
            "}\n"
        )
        Path(path).write_text(text, encoding="utf-8")

    @classmethod
    def load(cls, path) -> QuantConfig:
        """The configuration in the JSON file `path` (as :meth:`dump` writes it,
        edited or not)."""
        with open(path, encoding="utf-8") as file:
            try:
                data = json.load(file)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: not valid JSON: {error}") from None
        return cls.from_dict(data)


def _entry(entry, kind, where) -> TensorConfig | None:
    """`entry` as a TensorConfig (a format or name stands for TensorConfig(fmt)) or None."""
    if entry is None:
        return None
    if not isinstance(entry, TensorConfig):
        entry = _argument(TensorConfig, entry, where)
    if kind != "activations" and entry.grad_fmt is not None:
        hint = "its gradient has an entry of its own, '<parameter>.grad'" if kind == "parameters" else (
            "a gradient is not rounded again in the backward pass")
        raise ValueError(f"{where}: grad_fmt is for activations only; {hint}")
    return entry


_CONFIG_FIELDS = ("fmt", "mode", "scale", "scale_rounding", "grad_fmt", "grad_mode", "rand_bits")


def _config_to_json(entry, kind):
    if entry is None:
        return None
    data = {"fmt": _format_to_json(entry.fmt), "mode": entry.mode, "scale": entry.scale}
    if entry.scale == "auto":
        data["scale_rounding"] = entry.scale_rounding
    if kind == "activations":
        data["grad_fmt"] = None if entry.grad_fmt is None else _format_to_json(entry.grad_fmt)
        data["grad_mode"] = entry.grad_mode
    if entry.rand_bits is not None:
        data["rand_bits"] = entry.rand_bits
    return data


def _config_from_json(value, where):
    if value is None:
        return None
    if isinstance(value, str):
        value = {"fmt": value}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: an entry is null, a format name or an object, got {value!r}")
    unknown = set(value) - set(_CONFIG_FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; an entry has {_CONFIG_FIELDS}")
    if "fmt" not in value:
        raise ValueError(f"{where}: an entry needs 'fmt' (null for no rounding)")
    fields = dict(value)
    try:
        fields["fmt"] = _format_from_json(fields["fmt"])
        if fields.get("grad_fmt") is not None:
            fields["grad_fmt"] = _format_from_json(fields["grad_fmt"])
        return TensorConfig(**fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


_FORMAT_TYPES = {cls.__name__: cls for cls in (FloatFormat, FixedFormat, ScaledFormat)}


def _spelling(fmt) -> str | None:
    """A name that :func:`rpfloat.format` turns into exactly `fmt`, or None. A
    format with a display name of its own is spelt by that name or not at all, so
    that the name survives a trip through a file."""
    if fmt.name is not None:
        candidates = [fmt.name]
    elif isinstance(fmt, FixedFormat):
        candidates = [f"{'' if fmt.signed else 'u'}q{fmt.int_bits}.{fmt.frac_bits}"]
    elif isinstance(fmt, FloatFormat) and fmt.exp_bits is not None:
        candidates = [f"e{fmt.exp_bits}m{fmt.man_bits}"]
    else:
        candidates = []
    for candidate in candidates:
        try:
            found = to_format(candidate)
        except (TypeError, ValueError):
            continue
        if type(found) is type(fmt) and found == fmt:
            return candidate
    return None


def _format_to_json(fmt):
    spelling = _spelling(fmt)
    if spelling is not None:
        return spelling
    data = {"type": type(fmt).__name__}
    for field in dataclasses.fields(fmt):
        value = getattr(fmt, field.name)
        if field.name == "name" and value is None:
            continue
        if isinstance(value, (FloatFormat, FixedFormat)):
            value = _format_to_json(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[field.name] = value
    return data


def _format_from_json(value):
    if isinstance(value, str):
        return to_format(value)
    if not isinstance(value, dict):
        raise ValueError(f"a format is a name or an object with 'type', got {value!r}")
    fields = dict(value)
    kind = fields.pop("type", None)
    if kind not in _FORMAT_TYPES:
        raise ValueError(f"a format object needs 'type', one of {sorted(_FORMAT_TYPES)}; got {kind!r}")
    if kind == "ScaledFormat":
        if "element" in fields:
            fields["element"] = _format_from_json(fields["element"])
        scale_format = fields.get("scale_format")
        if isinstance(scale_format, list):
            fields["scale_format"] = tuple(scale_format)
        elif isinstance(scale_format, dict):
            fields["scale_format"] = _format_from_json(scale_format)
    return _FORMAT_TYPES[kind](**fields)


# -- quantized models ------------------------------------------------------------


def register_quantizable(module_type: type, parameter_names) -> type:
    """Let :func:`quantize_model` round modules of `module_type` (and its
    subclasses): the forward pass sees the parameters `parameter_names` rounded,
    and the output is an activation.

    Returns `module_type`. Registering a type again replaces its names.

    Examples
    --------
    >>> import torch
    >>> class Gain(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.gain = nn.Parameter(torch.ones(3))
    ...     def forward(self, x):
    ...         return x * self.gain
    >>> register_quantizable(Gain, ["gain"]).__name__
    'Gain'
    """
    if not (isinstance(module_type, type) and issubclass(module_type, nn.Module)):
        raise TypeError(f"module_type must be a subclass of torch.nn.Module, got {module_type!r}")
    names = (parameter_names,) if isinstance(parameter_names, str) else tuple(parameter_names)
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"parameter names must be identifiers, got {name!r}")
        if name in (*_ACTIVATION_SITES, "grad"):
            raise ValueError(f"a parameter called {name!r} would clash with the tensor names of QuantConfig")
    _QUANTIZABLE[module_type] = names
    return module_type


def _quantizable_names(module) -> tuple[str, ...] | None:
    """The names of the parameters of `module` that are rounded, or None when its
    type is not quantizable; the most specific registered type wins. A lazy
    module (nn.LazyBatchNorm1d) counts as the type it becomes at its first call."""
    klasses = type(module).__mro__
    if isinstance(module, nn.modules.lazy.LazyModuleMixin) and getattr(module, "cls_to_become", None) is not None:
        klasses = (*klasses, *module.cls_to_become.__mro__)
    names = next((_QUANTIZABLE[klass] for klass in klasses if klass in _QUANTIZABLE), None)
    if names is None and isinstance(module, nn.RNNBase):  # nn.RNN, nn.LSTM, nn.GRU: by layer and direction
        names = tuple(module._flat_weights_names)
    if names is None:
        return None
    for name in names:
        # (an optional parameter left out may be a plain None: MultiheadAttention's bias_k)
        if (name not in module._parameters and getattr(module, name, False) is not None
                and _computed_by(module, name) is None):
            old_weight_norm = f"{name}_g" in module._parameters and f"{name}_v" in module._parameters
            raise ValueError(
                f"{type(module).__name__} is quantized through its parameter {name!r}, which it does not have "
                f"(its parameters: {list(module._parameters)})"
                + ("; the old torch.nn.utils.weight_norm computes it: use "
                   "torch.nn.utils.parametrizations.weight_norm" if old_weight_norm else ""))
    return tuple(name for name in names
                 if module._parameters.get(name) is not None or _computed_by(module, name) is not None)


def _computed_by(module, name) -> tuple[str, str] | None:
    """What computes parameter `name` of `module` from other tensors, and how to
    undo it, in words: a parametrization (weight_norm, spectral_norm,
    torch.nn.utils.parametrize) or pruning (torch.nn.utils.prune); None for a
    plain parameter."""
    if parametrize.is_parametrized(module, name):
        steps = ", ".join(type(step).__name__ for step in module.parametrizations[name])
        return (f"the parametrization {steps} (torch.nn.utils.parametrize, which weight_norm and "
                "spectral_norm use)",
                f"torch.nn.utils.parametrize.remove_parametrizations(module, {name!r}) before quantizing")
    if f"{name}_orig" in module._parameters and f"{name}_mask" in module._buffers:
        return ("pruning (torch.nn.utils.prune)",
                f"make the pruning permanent with torch.nn.utils.prune.remove(module, {name!r}) before quantizing")
    return None


def _quantizable_modules(model):
    """(name prefix, module, parameter names, host) of every quantizable module,
    each once. The host is the module whose forward hooks round its parameters:
    the module itself, or for the ``out_proj`` of an nn.MultiheadAttention (which
    reads its weights and never calls it) the attention module. A module with
    another host has no activation sites: its forward never runs."""
    hosts = {id(module.out_proj): module for module in model.modules()
             if isinstance(module, nn.MultiheadAttention) and isinstance(module.out_proj, nn.Module)}
    for path, module in model.named_modules():
        names = _quantizable_names(module)
        if names is not None:
            yield (f"{path}." if path else ""), module, names, hosts.get(id(module), module)


def _tensor_names(model) -> list[str]:
    names = []
    for prefix, module, parameter_names, host in _quantizable_modules(model):
        for name in parameter_names:
            names += [prefix + name, f"{prefix}{name}.grad"]
        if host is module:
            names += [f"{prefix}input", f"{prefix}output"]
    return names


class _Rounding:
    """One tensor's rounding: formats, modes and its own random streams."""

    __slots__ = ("name", "fmt", "mode", "rand_bits", "grad_fmt", "grad_mode", "rng", "grad_rng", "stochastic")

    def __init__(self, config: TensorConfig, root, name):
        self.name = name
        self.fmt, self.mode, self.rand_bits = config.format, config.mode, config.rand_bits
        self.grad_fmt, self.grad_mode = config.grad_format, config.grad_mode
        self.rng = _stream(root, name)
        self.grad_rng = _stream(root, f"{name}.grad") if self.grad_fmt is not None else None
        self.stochastic = parse_mode(self.mode).is_stochastic

    def __call__(self, t, rng=None):
        try:
            return round_tensor(
                t, self.fmt, self.mode, rng=self.rng if rng is None else rng, rand_bits=self.rand_bits,
                grad_fmt=self.grad_fmt, grad_mode=self.grad_mode, grad_rng=self.grad_rng,
            )
        except (TypeError, ValueError) as error:
            raise type(error)(f"{self.name}: {error}") from None

    def in_forward(self, t):
        """`t` rounded in a forward pass; a stochastic rounding draws as
        :func:`_forward_stream` says (activation checkpointing)."""
        return self(t, _forward_stream(self.rng, repr(self.name)) if self.stochastic else None)

    def round_floating(self, value):
        """`value` rounded in a forward pass where it is a floating tensor, or a
        tuple (a namedtuple too) or list of them."""
        if isinstance(value, torch.Tensor):
            return self.in_forward(value) if value.is_floating_point() else value
        if isinstance(value, (tuple, list)):
            items = [self.round_floating(item) for item in value]
            return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
        return value


class _GradRounding:
    """A post-accumulate-grad hook: rounds ``param.grad`` in place, so that the
    optimizer steps with the gradient the hardware would hold."""

    __slots__ = ("rounding",)

    def __init__(self, rounding: _Rounding):
        self.rounding = rounding

    def __call__(self, param):
        with torch.no_grad():
            grad = param.grad
            if grad.layout == torch.sparse_coo:  # (nn.Embedding(sparse=True)): its stored values
                grad = grad.coalesce()
                param.grad = torch.sparse_coo_tensor(grad.indices(), self.rounding(grad.values()), grad.shape,
                                                     is_coalesced=True, check_invariants=False)
            else:
                grad.copy_(self.rounding(grad))


class _Hosted:
    """Forward hooks of a host module that round another module's parameters
    (see `_quantizable_modules`) for the length of the host's forward."""

    __slots__ = ("state", "module")

    def __init__(self, state, module):
        self.state, self.module = state, module

    def before_forward(self, host, args):
        self.state.before_forward(self.module, ())

    def after_forward(self, host, args, output):
        self.state.after_forward(self.module, (), None)


class _ModuleQuantization:
    """What :func:`quantize_model` attached to one module, and its hooks."""

    def __init__(self):
        self.parameters: dict[str, _Rounding] = {}
        self.gradients: dict[str, _GradRounding] = {}
        self.input: _Rounding | None = None
        self.output: _Rounding | None = None
        self.handles = []  # of the module hooks
        # parameter name -> {tensor that carries our gradient hook: its handle}; weak, so that the
        # tensors that torch.func.functional_call puts in place for one call take their hooks along
        self._hooked: dict[str, WeakIdKeyDictionary] = {}

    def __getstate__(self):  # copies and pickles hook the gradients of their own parameters anew
        return {**self.__dict__, "_hooked": {}}

    def hook_gradients(self, module):
        """Put the gradient hooks on the module's parameters, unless they are
        there already: a copied or unpickled model, a parameter replaced
        (``load_state_dict(..., assign=True)``), or the leaf tensors that
        ``torch.func.functional_call`` puts in place, get them at their forward;
        each tensor carries one hook. Tensors that accumulate no ``.grad``
        (non-leaf ones such as fast weights computed from the parameters, and
        those that do not require grad) get none."""
        for name, hook in self.gradients.items():
            parameter = module._parameters[name]
            if (parameter is None or is_lazy(parameter)  # (hooked once materialised)
                    or not (parameter.is_leaf and parameter.requires_grad)):
                continue
            hooked = self._hooked.setdefault(name, WeakIdKeyDictionary())
            if parameter not in hooked:
                hooked[parameter] = parameter.register_post_accumulate_grad_hook(hook)

    def before_forward(self, module, args):
        if self.gradients:
            self.hook_gradients(module)
        # The rounded copies shadow the parameters as instance attributes, so that
        # `module.weight` is the copy during forward while `_parameters` (what
        # parameters(), state_dict() and the optimizer see) keeps the masters.
        for name, rounding in self.parameters.items():
            if (parameter := module._parameters[name]) is not None:
                module.__dict__[name] = rounding.in_forward(parameter)
        if self.input is not None:
            return self.input.round_floating(tuple(args))
        return None

    def after_forward(self, module, args, output):
        for name in self.parameters:
            module.__dict__.pop(name, None)
        if self.output is not None and output is not None:
            return self.output.round_floating(output)
        return None

    def detach(self, module):
        for handle in self.handles:
            handle.remove()
        for hooked in self._hooked.values():
            for handle in list(hooked.values()):
                handle.remove()
        self._hooked = {}
        for name in self.parameters:
            module.__dict__.pop(name, None)


def quantize_model(model: nn.Module, config: QuantConfig, *, rng=None) -> nn.Module:
    """Attach the rounding of `config` to every supported module of `model`.

    Supported are nn.Linear, nn.Bilinear, nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d,
    nn.BatchNorm1d/2d/3d, nn.InstanceNorm1d/2d/3d, nn.LayerNorm, nn.GroupNorm,
    nn.RMSNorm, nn.PReLU, nn.Embedding, nn.EmbeddingBag, nn.MultiheadAttention,
    nn.RNN, nn.LSTM and nn.GRU, the lazy modules that become one of them
    (nn.LazyBatchNorm1d), and the types given to :func:`register_quantizable`.
    Parameters of other modules stay unrounded, with a warning that names them
    where the configuration rounds parameters or gradients by default.
    For each such module, forward hooks make the forward pass see its
    parameters rounded (fresh copies at every call) and round its input and
    output as configured; the gradient of an activation with a `grad_fmt` is
    rounded in the backward pass, and a hook on each parameter with a
    ``".grad"`` rounding rounds ``param.grad`` once the backward pass has
    accumulated it. Buffers (BatchNorm's running statistics) are not rounded.

    The parameters stay the float32 master weights: ``model.parameters()``,
    the optimizer and ``model.state_dict()`` see them, unrounded (checkpoints
    keep full precision and load into the plain model). Outside the forward
    pass ``module.weight`` is the master; :func:`master_parameter` reaches it
    from anywhere, :func:`quantized_state_dict` gives the rounded tensors.

    Parameters
    ----------
    model : nn.Module
        Changed in place (an earlier quantization is removed first).
    config : QuantConfig
        The rounding of each tensor; an entry naming a tensor the model does
        not have is an error (a misspelt name in an edited file).
    rng : None, int, numpy.random.SeedSequence, numpy.random.Generator or torch.Generator
        Seeds one random stream per tensor (derived from the tensor's name) for
        the stochastic modes; every call draws afresh from it. An int makes
        runs reproducible; None draws the seed from OS entropy. A stochastic
        rounding refuses to run in a forward pass recomputed by activation
        checkpointing, where it would draw anew.

    Returns
    -------
    nn.Module
        `model`.

    Raises
    ------
    ValueError
        If `config` names a tensor the model does not have, a scaled format does
        not fit a parameter's shape, or a weight computed by a parametrization
        (weight_norm, spectral_norm) or by pruning would be rounded.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> model = quantize_model(nn.Linear(2, 1, bias=False), QuantConfig(parameters="q1.3"))
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.tensor([[0.3, -0.4]]))
    >>> model(torch.tensor([[1.0, 1.0]])).detach()  # 0.25 - 0.375: the weights on q1.3
    tensor([[-0.1250]])
    >>> model.weight
    Parameter containing:
    tensor([[ 0.3000, -0.4000]], requires_grad=True)
    """
    _check_model(model)
    if not isinstance(config, QuantConfig):
        raise TypeError(f"config must be a QuantConfig, got {type(config).__name__}")
    remove_quantization(model)
    known = _tensor_names(model)
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"config has entries for tensors the model does not have: {unknown}; "
                         f"its tensors are {known}")
    root = _root_seed(rng)
    gradients_decided = set()
    for prefix, module, parameter_names, host in _quantizable_modules(model):
        state = _ModuleQuantization()
        for name in parameter_names:
            parameter = module._parameters.get(name)
            entries = {key: config.resolve(key) for key in (prefix + name, f"{prefix}{name}.grad")}
            if (computed_by := _computed_by(module, name)) is not None:
                rounded = [key for key, entry in entries.items() if entry is not None]
                if rounded:
                    what, remedy = computed_by
                    raise ValueError(
                        f"{prefix}{name} is computed by {what}, which quantize_model cannot round: "
                        f"map {rounded} to None in the config (the module's other tensors, its input and "
                        f"output are still rounded), or {remedy}")
                continue
            for key, entry in entries.items():
                _check_fits(entry, parameter, key)
            if (entry := entries[prefix + name]) is not None:
                state.parameters[name] = _Rounding(entry, root, prefix + name)
            grad_name = f"{prefix}{name}.grad"
            if id(parameter) not in gradients_decided:  # a shared parameter: its first name decides
                gradients_decided.add(id(parameter))
                if (entry := entries[grad_name]) is not None:
                    state.gradients[name] = _GradRounding(_Rounding(entry, root, grad_name))
        state.hook_gradients(module)
        for site in _ACTIVATION_SITES if host is module else ():
            if (entry := config.resolve(prefix + site)) is not None:
                setattr(state, site, _Rounding(entry, root, prefix + site))
        hooks = state if host is module else _Hosted(state, module)
        # first, so that other hooks see the rounded tensors; but after a lazy module's own
        # hook, which materialises its parameters (nn.LazyLinear)
        first = not any(is_lazy(parameter) for parameter in module._parameters.values() if parameter is not None)
        if state.parameters or state.gradients or state.input is not None:
            state.handles.append(host.register_forward_pre_hook(hooks.before_forward, prepend=first))
        if state.parameters or state.output is not None:
            state.handles.append(host.register_forward_hook(hooks.after_forward, prepend=True, always_call=True))
        module.__dict__[_STATE_ATTRIBUTE] = state
    if config.defaults["parameters"] is not None or config.defaults["gradients"] is not None:
        _warn_unrounded(model)
    return model


def _warn_unrounded(model) -> None:
    """Warn, naming them, of the parameters of `model` held by modules of a type
    quantize_model does not know (and by no supported module), which stay
    unrounded. (A registered type's parameters left out of its names, and
    those a parametrization keeps, are the user's choice.)"""
    held = {id(parameter) for _, module, _, _ in _quantizable_modules(model)
            for parameter in module.parameters(recurse=False)}
    unrounded = []
    for path, module in model.named_modules():
        if _quantizable_names(module) is None and not isinstance(module, parametrize.ParametrizationList):
            for name, parameter in module._parameters.items():
                if parameter is not None and id(parameter) not in held:
                    held.add(id(parameter))  # a parameter shared by such modules: named once
                    unrounded.append(f"{path}.{name}" if path else name)
    if unrounded:
        shown = ", ".join(unrounded[:8]) + (f" and {len(unrounded) - 8} more" if len(unrounded) > 8 else "")
        warnings.warn(f"quantize_model leaves {len(unrounded)} parameter(s) unrounded, as no module of a supported "
                      f"type holds them: {shown}; register_quantizable adds a module type", UserWarning,
                      stacklevel=3)


def _check_fits(entry, parameter, name) -> None:
    """Raise, naming the tensor, if the scaled format of `entry` cannot lay its
    blocks along the parameter's shape (its axis beyond the dimensions)."""
    if entry is None or parameter is None or is_lazy(parameter):
        return
    for fmt in (entry.format, entry.grad_format):
        if isinstance(fmt, ScaledFormat):
            try:
                block_layout_of(tuple(parameter.shape), fmt)
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None


def _check_model(model) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def remove_quantization(model: nn.Module) -> nn.Module:
    """Take off what :func:`quantize_model` attached; returns `model`, which then
    computes with its (master) parameters as before.

    Examples
    --------
    >>> from torch import nn
    >>> model = quantize_model(nn.Linear(2, 1), QuantConfig(parameters="q1.3"))
    >>> len(remove_quantization(model)._forward_hooks)
    0
    """
    _check_model(model)
    for module in model.modules():
        state = module.__dict__.pop(_STATE_ATTRIBUTE, None)
        if state is not None:
            state.detach(module)
    return model


def quantized_state_dict(model: nn.Module, *, rng=None) -> dict:
    """``model.state_dict()`` with every rounded parameter replaced by its
    rounded value: the tensors a low-precision device would hold.

    Keys, dtypes and buffers are those of ``state_dict()``. Parameters in a
    stochastic mode take fresh draws from `rng` (an int seed: reproducible),
    not from the model's own streams, so training draws stay as they were.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> model = quantize_model(nn.Linear(2, 1, bias=False), QuantConfig(parameters="q1.3"))
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.tensor([[0.3, -0.4]]))
    >>> quantized_state_dict(model)["weight"], model.state_dict()["weight"]
    (tensor([[ 0.2500, -0.3750]]), tensor([[ 0.3000, -0.4000]]))
    """
    _check_model(model)
    state_dict = model.state_dict()
    root = _root_seed(rng)
    with torch.no_grad():
        for path, module in model.named_modules(remove_duplicate=False):
            state = module.__dict__.get(_STATE_ATTRIBUTE)
            if state is None:
                continue
            prefix = f"{path}." if path else ""
            for name, rounding in state.parameters.items():
                key = prefix + name
                if key in state_dict:
                    state_dict[key] = round_tensor(state_dict[key], rounding.fmt, rounding.mode,
                                                   rng=_stream(root, key), rand_bits=rounding.rand_bits)
    return state_dict


def master_parameter(model: nn.Module, name: str) -> nn.Parameter:
    """The float32 master of parameter `name` (as ``model.named_parameters()``
    names it), also inside the forward pass, where ``module.weight`` is the
    rounded copy.

    Examples
    --------
    >>> from torch import nn
    >>> model = quantize_model(nn.Sequential(nn.Linear(2, 1)), QuantConfig(parameters="q1.3"))
    >>> master_parameter(model, "0.weight") is model[0].weight
    True

    Raises
    ------
    TypeError
        If `model` is not a module or `name` not a str.
    KeyError
        If the model has no parameter `name`.
    """
    _check_model(model)
    if not isinstance(name, str):
        raise TypeError(f"name must be a parameter's name (a str), got {type(name).__name__}")
    path, _, parameter_name = name.rpartition(".")
    try:
        module = model.get_submodule(path) if path else model
    except AttributeError:
        raise KeyError(f"{name!r} is not a parameter of the model") from None
    parameter = module._parameters.get(parameter_name)
    if parameter is None:
        raise KeyError(f"{name!r} is not a parameter of the model")
    return parameter
