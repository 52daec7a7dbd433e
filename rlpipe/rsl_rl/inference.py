"""What a play script gets from the runner: an inference policy over rsl_rl observations, and exports.

rsl_rl's play scripts call ``policy = runner.get_inference_policy(device)`` and then
``actions = policy(obs)`` with the env's observation TensorDict ``[N]`` of groups;
:class:`InferencePolicy` gives the deterministic action ``[N, num_actions]`` (the Gaussian's mean) of
rlpipe's policy, reading the groups its actor reads. The exports are rlpipe's
(:mod:`rlpipe.policies.export`): one input per observation group the actor reads (``obs/<group>``
``[B, dim]``), the observation normalizer inside, metadata naming the groups.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import nn

from rlpipe.policies import Policy
from rlpipe.policies.export import DeployedActor, export_onnx, export_torchscript
from rlpipe.policies.export_metadata import export_metadata

__all__ = ["InferencePolicy", "export_policy"]


class InferencePolicy(nn.Module):
    """``policy(obs)`` → deterministic actions ``[N, num_actions]`` for an rsl_rl observation TensorDict."""

    def __init__(self, policy: Policy, groups: tuple[str, ...], device: torch.device | str) -> None:
        super().__init__()
        self.policy = policy
        self.device = torch.device(device)
        self.keys = groups
        """The env's observation groups (the normalizer reads every one; the actor its ``obs_keys``)."""

    @torch.no_grad()
    def forward(self, obs: TensorDict | dict[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """Deterministic actions ``[N, num_actions]`` (groups read as float32 ``[N, dim]``)."""
        groups = {"policy": obs} if isinstance(obs, torch.Tensor) else obs
        batch = next(iter(groups.values())).shape[0]
        fields = {k: groups[k].to(self.device, torch.float32).reshape(batch, -1) for k in self.keys}
        return self.policy.act(TensorDict(fields, batch_size=[batch], device=self.device), deterministic=True)


def export_policy(
    policy: Policy,
    spaces: tuple[gym.Space, gym.Space],
    path: str | Path,
    filename: str,
    fmt: str,
    **metadata: object,
) -> Path:
    """Write the deterministic actor to ``path/filename`` as ONNX (``fmt="onnx"``) or TorchScript."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    observation_space, action_space = spaces
    actor = DeployedActor(policy, observation_space, action_space)
    meta = export_metadata(actor, observation_space, action_space, policy, format=fmt, **metadata)
    write = export_onnx if fmt == "onnx" else export_torchscript
    return write(actor, folder / filename, meta)
