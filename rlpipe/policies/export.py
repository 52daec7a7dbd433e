"""Policy export: the deterministic actor as one self-contained ONNX or TorchScript file.

:class:`DeployedActor` turns a trained policy into a module (a CPU copy) a robot runs with nothing else:

* feedforward: ``obs [B, obs_dim]`` float32 → ``action``;
* recurrent: ``(obs [B, obs_dim], state [B, S])`` → ``(action, next_state [B, S])`` — the caller
  keeps the state, starts every episode from zeros and feeds ``next_state`` back.

``action`` is ``[B]`` int64 for Discrete spaces (the argmax of the logits) and ``[B, A]`` float32
for Box spaces (the mode of the head's distribution — the Gaussian mean, or the Beta's mode mapped
onto [low, high] — clipped to the space's finite bounds). The frozen observation normalizer (mean,
std, ±clip) is baked in, and the batch dimension is dynamic.

:func:`export_onnx` / :func:`export_torchscript` write the file with :func:`export_metadata`
inside (ONNX ``metadata_props``; a TorchScript extra file ``rlpipe.json``).
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
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from rlpipe.config import ConfigError
from rlpipe.config.extras import require
from rlpipe.policies.base import Policy
from rlpipe.policies.heads import ActionHead, BetaHead, CategoricalHead, GaussianHead, StateStdGaussianHead
from rlpipe.policies.normalizer import EPS

__all__ = [
    "FORMATS",
    "METADATA_FILE",
    "DeployedActor",
    "ExportError",
    "export_metadata",
    "export_onnx",
    "export_torchscript",
    "io_names",
]

FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""Export formats and the file each writes."""
METADATA_FILE = "rlpipe.json"
"""Name of the metadata inside a TorchScript archive."""
OPSET = 18
DYNAMO_EXPORT = (2, 5)
"""The first torch whose ``torch.onnx.export`` takes ``dynamo=True``."""


class ExportError(ValueError):
    """The policy cannot be exported (an unsupported policy class or action head)."""


class DeployedActor(nn.Module):
    """Normalizer → [recurrent core] → actor → mode action → clip; see the module docstring."""

    def __init__(self, policy: Policy, observation_space: gym.spaces.Box, action_space: gym.Space) -> None:
        super().__init__()
        missing = [name for name in ("actor", "head")
                   if not isinstance(getattr(policy, name, None), nn.Module)]
        if missing:
            raise ExportError(f"{type(policy).__name__} has no {missing[0]!r} module; export supports "
                              "the actor_critic, actor_only and recurrent_actor_critic policies")
        if policy.actor_obs_keys is not None or isinstance(observation_space, gym.spaces.Dict):
            raise ExportError("dict observations (policy.actor.obs_keys): export supports flat (Box) "
                              "observations only so far")
        self.recurrent = bool(getattr(policy, "is_recurrent", False))
        self.core = copy.deepcopy(policy.core) if self.recurrent else None
        self.actor = copy.deepcopy(policy.actor)
        self.discrete = _is_discrete(policy.head)
        self.head = copy.deepcopy(policy.head)
        self.normalize = policy.obs_normalizer is not None
        norm = policy.obs_normalizer
        self.obs_dim = math.prod(observation_space.shape)
        mean = norm.mean.float() if norm is not None else torch.zeros(observation_space.shape)
        std = (norm.var + EPS).sqrt().float() if norm is not None else torch.ones(observation_space.shape)
        self.obs_clip = float(norm.clip) if norm is not None else math.inf
        self.register_buffer("obs_mean", mean.detach().clone().cpu())
        self.register_buffer("obs_std", std.detach().clone().cpu())
        low, high = _bounds(action_space)
        self.clip_action = low is not None
        self.register_buffer("action_low", low if low is not None else torch.zeros(0))
        self.register_buffer("action_high", high if high is not None else torch.zeros(0))
        self.cpu().eval()

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.normalize:  # the same float32 ops as ObsNormalizer.forward
            obs = ((obs - self.obs_mean) / self.obs_std).clamp(-self.obs_clip, self.obs_clip)
        return obs.flatten(1)

    def _action(self, out: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return out.argmax(-1)
        action = self.head.act(out, deterministic=True)
        if self.clip_action:
            return torch.minimum(torch.maximum(action, self.action_low), self.action_high)
        return action

    def forward(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> Any:
        """``action`` (feedforward) or ``(action, next_state)`` (recurrent)."""
        x = self._features(obs)
        if self.core is None:
            return self._action(self.actor(x))
        features, next_state = self.core(x, state)
        return self._action(self.actor(features)), next_state


MODES: dict[type[ActionHead], str] = {
    GaussianHead: "Gaussian mean, clipped to [low, high]",
    StateStdGaussianHead: "Gaussian mean (the first half of the actor's outputs), clipped to [low, high]",
    BetaHead: "Beta mode low + (high - low) * (alpha - 1) / (alpha + beta - 2), within [low, high]",
}
"""The deterministic action of each continuous head, as the metadata describes it."""


def _is_discrete(head: nn.Module) -> bool:
    if isinstance(head, CategoricalHead):
        return True
    if type(head) in MODES:
        return False
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
    if actor.recurrent:
        return ["obs", "state"], ["action", "next_state"]
    return ["obs"], ["action"]


def _example(actor: DeployedActor, batch: int = 2) -> tuple[torch.Tensor, ...]:
    obs = torch.zeros(batch, actor.obs_dim)
    return (obs, torch.zeros(batch, actor.core.state_size)) if actor.core is not None else (obs,)


def export_metadata(actor: DeployedActor, observation_space: gym.spaces.Box, action_space: gym.Space,
                    policy: Policy, **extra: Any) -> dict[str, Any]:
    """What a deployment needs besides the graph: inputs/outputs, spaces, normalizer, recurrence, origin."""
    obs_dim = math.prod(observation_space.shape)
    inputs, outputs = io_names(actor)
    state = None
    if actor.core is not None:
        core = actor.core
        state = {"type": core.kind, "num_layers": core.num_layers, "hidden_size": core.hidden_size,
                 "state_size": core.state_size, "initial": "zeros at every episode start"}
    norm = policy.obs_normalizer
    return {
        "inputs": inputs, "outputs": outputs,
        "observation": {"keys": ["obs"], "sizes": {"obs": obs_dim}, "shape": list(observation_space.shape),
                        "dtype": "float32"},
        "action": _action_meta(action_space, actor, MODES.get(type(actor.head), "")),
        "normalizer": None if norm is None else {
            "mean": norm.mean.tolist(), "var": norm.var.tolist(), "count": float(norm.count),
            "eps": EPS, "clip": float(norm.clip), "formula": "clip((obs - mean) / sqrt(var + eps), ±clip)"},
        "recurrent": state,
        **extra,
    }


def _action_meta(space: gym.Space, actor: DeployedActor, mode: str) -> dict[str, Any]:
    if isinstance(space, gym.spaces.Discrete):
        return {"space": "Discrete", "n": int(space.n), "dtype": "int64", "shape": [],
                "deterministic": "argmax of the logits"}
    return {"space": "Box", "shape": list(space.shape), "dtype": "float32",
            "low": [float(x) for x in space.low.reshape(-1)],
            "high": [float(x) for x in space.high.reshape(-1)],
            "clipped": actor.clip_action, "deterministic": mode}


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
        raise ConfigError(f"--format onnx needs torch>=2.5 (torch.onnx.export(dynamo=True)); this is torch "
                          f"{torch.__version__}: use --format torchscript")
    inputs, outputs = io_names(actor)
    batch = torch.export.Dim("batch", min=1)
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(
            actor, _example(actor), dynamo=True, opset_version=OPSET, input_names=inputs,
            output_names=outputs, dynamic_shapes={name: {0: batch} for name in inputs}, verbose=False,
        )
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
