"""Policy export: the deterministic actor as one self-contained ONNX or TorchScript file.

:class:`DeployedActor` turns a trained policy into a module (a CPU copy) a robot runs with nothing else.
Its inputs are the observation inputs (:class:`ObsInput`), then the recurrent state:

* flat (Box) observations: one input ``obs`` ``[B, obs_dim]`` float32;
* dict observations: one input per group the actor reads (its ``obs_keys``, in that order), named
  ``obs/<group>``: an image group ``[B, C, H, W]`` uint8 (scaled to [0, 1] inside, as the policy's
  CNN does), a vector group ``[B, *shape]`` float32;
* recurrent policies add ``state`` ``[B, S]`` and return ``(action, next_state [B, S])`` — the
  caller keeps the state, starts every episode from zeros and feeds ``next_state`` back.

``action`` is ``[B]`` int64 for Discrete spaces (the argmax of the logits) and ``[B, A]`` float32
for Box spaces (the mode of the head's distribution — the Gaussian mean, or the Beta's mode mapped
onto [low, high] — clipped to the space's finite bounds). The frozen observation normalizer (mean,
std, ±clip; vector groups only) is baked in, and the batch dimension is dynamic.

:func:`export_onnx` / :func:`export_torchscript` write the file with the metadata of
:func:`~rlpipe.policies.export_metadata.export_metadata` inside (ONNX ``metadata_props``; a
TorchScript extra file ``rlpipe.json``).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlpipe.config import ConfigError
from rlpipe.extras import require
from rlpipe.policies.base import Policy
from rlpipe.policies.encoders import CNNEncoder, ObsEncoder
from rlpipe.policies.heads import ActionHead, BetaHead, CategoricalHead, GaussianHead, StateStdGaussianHead
from rlpipe.policies.normalizer import EPS, ObsNormalizer
from rlpipe.policies.obs_keys import space_shape
from rlpipe.policies.recurrent import RecurrentCore
from rlpipe.policies.squashed import TanhDeterministicHead, TanhGaussianHead

__all__ = [
    "FORMATS",
    "METADATA_FILE",
    "DeployedActor",
    "ExportError",
    "ObsInput",
    "export_onnx",
    "export_torchscript",
    "io_names",
    "vector_normalizers",
]

ModuleT = TypeVar("ModuleT", bound=nn.Module)

FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""Export formats and the file each writes."""
METADATA_FILE = "rlpipe.json"
"""Name of the metadata inside a TorchScript archive."""
OPSET = 18
DYNAMO_EXPORT = (2, 5)
"""The first torch whose ``torch.onnx.export`` takes ``dynamo=True``."""


class ExportError(ValueError):
    """The policy cannot be exported (an unsupported policy class or action head)."""


@dataclass(frozen=True)
class ObsInput:
    """One observation input of the exported graph: ``[B, *shape]`` of ``dtype``.

    ``group``: the observation group it carries (``None`` for a flat observation, input ``obs``);
    ``image``: a uint8 image group the model scales itself.
    """

    name: str
    group: str | None
    shape: tuple[int, ...]
    image: bool = False

    @property
    def dtype(self) -> str:
        """``uint8`` (image groups) or ``float32``."""
        return "uint8" if self.image else "float32"


def _observation_inputs(policy: Policy, observation_space: gym.Space) -> list[ObsInput]:
    """The observation inputs of ``policy``'s actor: ``obs``, or one per group of ``actor_obs_keys``."""
    keys = policy.actor_obs_keys
    if not isinstance(observation_space, gym.spaces.Dict):
        return [ObsInput("obs", None, (math.prod(space_shape(observation_space)),))]
    if keys is None:
        raise ExportError(
            "dict observations without policy.actor_obs_keys: build the policy with build_policy"
        )
    spaces = observation_space.spaces
    return [ObsInput(f"obs/{k}", k, space_shape(spaces[k]), spaces[k].dtype == np.uint8) for k in keys]


class DeployedActor(nn.Module):
    """Normalizer → [encoders] → [recurrent core] → actor → mode action → clip; see the module docstring."""

    core: RecurrentCore | None
    head: ActionHead
    action_low: torch.Tensor
    action_high: torch.Tensor

    def __init__(self, policy: Policy, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        actor, head = _module(policy, "actor", nn.Module), _module(policy, "head", nn.Module)
        self.inputs = _observation_inputs(policy, observation_space)
        self.recurrent = policy.is_recurrent
        self.core = copy.deepcopy(_module(policy, "core", RecurrentCore)) if self.recurrent else None
        self.actor = copy.deepcopy(actor)
        self.head = copy.deepcopy(_supported_head(head))
        self.discrete = isinstance(self.head, CategoricalHead)
        encoder = getattr(policy, "actor_encoder", None)
        self.cnns = nn.ModuleList(
            [copy.deepcopy(_image_cnn(encoder, i)) if i.image else nn.Identity() for i in self.inputs]
        )
        norms = vector_normalizers(policy, self.inputs)
        self.normalize = [n is not None for n in norms]
        self.obs_clip = [float(n.clip) if n is not None else math.inf for n in norms]
        for index, (spec, norm) in enumerate(zip(self.inputs, norms)):
            mean = norm.mean.float().reshape(spec.shape) if norm is not None else torch.zeros(0)
            std = (norm.var + EPS).sqrt().float().reshape(spec.shape) if norm is not None else torch.zeros(0)
            self.register_buffer(f"obs_mean_{index}", mean.detach().clone().cpu())
            self.register_buffer(f"obs_std_{index}", std.detach().clone().cpu())
        low, high = _bounds(action_space)
        self.clip_action = low is not None
        self.register_buffer("action_low", low if low is not None else torch.zeros(0))
        self.register_buffer("action_high", high if high is not None else torch.zeros(0))
        self.cpu().eval()

    @property
    def action_bounds(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(low, high)`` ``[A]`` the action is clipped to, or ``None``."""
        return (self.action_low, self.action_high) if self.clip_action else None

    def _features(self, observations: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """``[B, in_dim]``: each input normalized or encoded, flattened, concatenated in input order."""
        parts = []
        for index, (spec, obs) in enumerate(zip(self.inputs, observations)):
            if spec.image:
                parts.append(self.cnns[index](obs))
                continue
            if self.normalize[index]:  # the same float32 ops as ObsNormalizer.forward
                mean, std = getattr(self, f"obs_mean_{index}"), getattr(self, f"obs_std_{index}")
                clip = self.obs_clip[index]
                obs = ((obs - mean) / std).clamp(-clip, clip)
            parts.append(obs.flatten(1))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def _action(self, out: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return out.argmax(-1)
        action = self.head.act(out, deterministic=True)
        if self.clip_action:
            return torch.minimum(torch.maximum(action, self.action_low), self.action_high)
        return action

    def forward(self, *inputs: torch.Tensor) -> Any:
        """``action`` or ``(action, next_state)`` (recurrent) of the inputs, in :func:`io_names` order."""
        x = self._features(inputs[: len(self.inputs)])
        if self.core is None:
            return self._action(self.actor(x))
        features, next_state = self.core(x, inputs[len(self.inputs)])
        return self._action(self.actor(features)), next_state


def vector_normalizers(policy: Policy, inputs: list[ObsInput]) -> list[ObsNormalizer | None]:
    """The normalizer of each input (``None``: images, or normalization off)."""
    norm = policy.obs_normalizer
    if norm is None:
        return [None] * len(inputs)
    if isinstance(norm, ObsNormalizer):
        return [norm]
    # a DictObsNormalizer: vector groups only
    return [None if spec.image or spec.group is None else norm.normalizer(spec.group) for spec in inputs]


MODES: dict[type[ActionHead], str] = {
    GaussianHead: "Gaussian mean, clipped to [low, high]",
    StateStdGaussianHead: "Gaussian mean (the first half of the actor's outputs), clipped to [low, high]",
    BetaHead: "Beta mode low + (high - low) * (alpha - 1) / (alpha + beta - 2), within [low, high]",
    TanhGaussianHead: "squashed mean low + (high - low) * (tanh(mean) + 1) / 2 of the first half of the "
    "actor's outputs",
    TanhDeterministicHead: "low + (high - low) * (tanh(out) + 1) / 2",
}
"""The deterministic action of each continuous head, as the metadata describes it."""


def _module(policy: Policy, name: str, kind: type[ModuleT]) -> ModuleT:
    """``policy.<name>``, a ``kind`` module, or an ExportError naming the policies export supports."""
    module = getattr(policy, name, None)
    if not isinstance(module, kind):
        raise ExportError(
            f"{type(policy).__name__} has no {name!r} module; export supports "
            "the actor_critic, actor_only and recurrent_actor_critic policies"
        )
    return module


def _image_cnn(encoder: ObsEncoder | None, spec: ObsInput) -> CNNEncoder:
    """The actor's CNN of image input ``spec`` (a policy reading an image group has an encoder)."""
    assert encoder is not None and spec.group is not None, spec
    return encoder.cnn(spec.group)


def _supported_head(head: nn.Module) -> ActionHead:
    if isinstance(head, CategoricalHead) or (isinstance(head, ActionHead) and type(head) in MODES):
        return head
    supported = ", ".join(cls.__name__ for cls in (CategoricalHead, *MODES))
    raise ExportError(f"action head {type(head).__name__}: export supports {supported}")


def _bounds(space: gym.Space) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(low, high)`` ``[A]`` float32 of a Box with finite bounds (±inf elsewhere), or ``(None, None)``."""
    if not isinstance(space, gym.spaces.Box):
        return None, None
    low = torch.as_tensor(space.low, dtype=torch.float32).reshape(-1)
    high = torch.as_tensor(space.high, dtype=torch.float32).reshape(-1)
    if not (torch.isfinite(low).any() or torch.isfinite(high).any()):
        return None, None
    return low, high


def io_names(actor: DeployedActor) -> tuple[list[str], list[str]]:
    """Input and output names of the exported graph."""
    inputs = [spec.name for spec in actor.inputs]
    if actor.recurrent:
        return [*inputs, "state"], ["action", "next_state"]
    return inputs, ["action"]


def _example(actor: DeployedActor, batch: int = 2) -> tuple[torch.Tensor, ...]:
    obs = tuple(torch.zeros(batch, *spec.shape, dtype=getattr(torch, spec.dtype)) for spec in actor.inputs)
    return (*obs, torch.zeros(batch, actor.core.state_size)) if actor.core is not None else obs


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporters' progress prints, deprecation warnings and log lines."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def export_onnx(actor: DeployedActor, path: Path, metadata: dict[str, Any]) -> Path:
    """Write ``actor`` to ``path`` as ONNX (opset 18, dynamic batch) with ``metadata`` in ``metadata_props``.

    Each metadata entry is one property: strings as they are, anything else as JSON.
    """
    onnx = require("onnx", "--format onnx")
    require("onnxscript", "--format onnx")  # torch's dynamo exporter
    if _torch_version() < DYNAMO_EXPORT:
        raise ConfigError(
            f"--format onnx needs torch>=2.5 (torch.onnx.export(dynamo=True)); this is torch "
            f"{torch.__version__}: use --format torchscript"
        )
    inputs, outputs = io_names(actor)
    batch = torch.export.Dim("batch", min=1)
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(  # forward(*inputs): one dynamic-shape spec per positional input
            actor,
            _example(actor),
            dynamo=True,
            opset_version=OPSET,
            input_names=inputs,
            output_names=outputs,
            dynamic_shapes=(tuple({0: batch} for _ in inputs),),
            verbose=False,
        )
    assert program is not None  # dynamo=True returns an ONNXProgram
    model = program.model_proto
    for key, value in metadata.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value if isinstance(value, str) else json.dumps(value)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return Path(path)


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def export_torchscript(actor: DeployedActor, path: Path, metadata: dict[str, Any]) -> Path:
    """Write ``actor`` as traced TorchScript (``torch::jit::load`` in C++) with ``rlpipe.json`` inside."""
    with _quiet(), torch.no_grad():
        traced = torch.jit.trace(actor, _example(actor), check_trace=False)
        torch.jit.save(traced, str(path), _extra_files={METADATA_FILE: json.dumps(metadata)})
    return Path(path)
