"""What an exported policy file says about itself: inputs, observation keys, action, normalizer, state.

:func:`export_metadata` is the JSON a deployment reads beside the graph (stored inside the file by
:func:`~rlpipe.policies.export.export_onnx` and :func:`~rlpipe.policies.export.export_torchscript`):
the input and output names, which observation keys the file reads (and as what shapes and dtypes),
the action space and how the deterministic action is taken, the baked-in normalizer's statistics
and the recurrent state a caller keeps.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym

from rlpipe.policies.base import Policy
from rlpipe.policies.export import MODES, DeployedActor, io_names, vector_normalizers
from rlpipe.policies.normalizer import EPS, ObsNormalizer
from rlpipe.policies.obs_keys import space_shape

__all__ = ["export_metadata"]


def export_metadata(
    actor: DeployedActor, observation_space: gym.Space, action_space: gym.Space, policy: Policy, **extra: Any
) -> dict[str, Any]:
    """What a deployment needs besides the graph: inputs/outputs, observations, normalizer, recurrence.

    ``observation`` says which observation keys the file reads: ``keys`` (``["obs"]`` for a flat
    observation), ``sizes`` (floats per key) and, for dict observations, ``groups``: per key its
    input name, shape (without the batch dim), dtype and whether it is an image.
    """
    inputs, outputs = io_names(actor)
    state = None
    if actor.core is not None:
        core = actor.core
        state = {
            "type": core.kind,
            "num_layers": core.num_layers,
            "hidden_size": core.hidden_size,
            "state_size": core.state_size,
            "initial": "zeros at every episode start",
        }
    return {
        "inputs": inputs,
        "outputs": outputs,
        "observation": _observation_meta(actor, observation_space),
        "action": _action_meta(action_space, actor, MODES.get(type(actor.head), "")),
        "normalizer": _normalizer_meta(policy, actor),
        "recurrent": state,
        **extra,
    }


def _observation_meta(actor: DeployedActor, observation_space: gym.Space) -> dict[str, Any]:
    if actor.inputs[0].group is None:
        return {
            "keys": ["obs"],
            "sizes": {"obs": actor.inputs[0].shape[0]},
            "shape": list(space_shape(observation_space)),
            "dtype": "float32",
        }
    groups = {
        spec.group: {"input": spec.name, "shape": list(spec.shape), "dtype": spec.dtype, "image": spec.image}
        for spec in actor.inputs
    }
    meta = {
        "keys": list(groups),
        "sizes": {spec.group: math.prod(spec.shape) for spec in actor.inputs},
        "groups": groups,
    }
    if any(spec.image for spec in actor.inputs):
        meta["images"] = "uint8 [B, C, H, W], scaled by 1/255 inside the model; not normalized"
    return meta


def _normalizer_meta(policy: Policy, actor: DeployedActor) -> dict[str, Any] | None:
    norm = policy.obs_normalizer
    if norm is None:
        return None
    common = {"eps": EPS, "formula": "clip((obs - mean) / sqrt(var + eps), ±clip)"}
    stats = vector_normalizers(policy, actor.inputs)
    if isinstance(norm, ObsNormalizer):
        return {
            "mean": norm.mean.tolist(),
            "var": norm.var.tolist(),
            "count": float(norm.count),
            "clip": float(norm.clip),
            **common,
        }
    groups = {
        spec.group: {
            "mean": n.mean.tolist(),
            "var": n.var.tolist(),
            "count": float(n.count),
            "clip": float(n.clip),
        }
        for spec, n in zip(actor.inputs, stats)
        if n is not None
    }
    return {"groups": groups, **common}


def _action_meta(space: gym.Space, actor: DeployedActor, mode: str) -> dict[str, Any]:
    if isinstance(space, gym.spaces.Discrete):
        return {
            "space": "Discrete",
            "n": int(space.n),
            "dtype": "int64",
            "shape": [],
            "deterministic": "argmax of the logits",
        }
    assert isinstance(space, gym.spaces.Box), space  # an env acts on a Discrete or a Box
    return {
        "space": "Box",
        "shape": list(space.shape),
        "dtype": "float32",
        "low": [float(x) for x in space.low.reshape(-1)],
        "high": [float(x) for x in space.high.reshape(-1)],
        "clipped": actor.clip_action,
        "deterministic": mode,
    }
