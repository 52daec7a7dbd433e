"""``build_mlp_from_cfg``: networks from ``{"type": "mlp", "network_cfg": {...}}`` blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rlpipe import fast
from rlpipe.config import ConfigError

__all__ = ["ACTIVATIONS", "MLP", "build_mlp", "build_mlp_from_cfg", "orthogonal_init"]

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}
NETWORK_TYPES = ("mlp",)
MLP_KEYS = ("hidden_sizes", "activation")


class MLP(nn.Sequential):
    """``Linear → act → … → Linear`` (an ``nn.Sequential``) whose forward takes the fast path.

    A module call costs more than a small layer's maths, so for a small actor over a few envs' rows
    the call machinery is a large part of the forward; :func:`rlpipe.fast.sequential_forward` runs
    the same ops without it (``RLPIPE_FAST=0``: ``nn.Sequential.forward``). The modules stay
    (state-dict keys ``0.weight``, ``2.bias``, … and the printed network are those of
    ``nn.Sequential``).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, in_dim]`` → ``[B, out_dim]``."""
        return fast.sequential_forward(self, x)


def build_mlp(in_dim: int, out_dim: int, hidden_sizes: list[int], activation: str) -> MLP:
    """``Linear → act → … → Linear``: ``[B, in_dim]`` → ``[B, out_dim]``.

    ReLU runs in place on the linear layer's output (which its backward does not need): one
    ``[B, hidden]`` temporary less per layer, which a large CPU update streams through memory
    (``benchmarks/peers/scaling.py`` measures that workload).
    """
    if activation not in ACTIVATIONS:
        raise ConfigError(f"activation: unknown {activation!r}; accepted: {', '.join(ACTIVATIONS)}")
    sizes = [in_dim, *hidden_sizes]
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        act = nn.ReLU(inplace=True) if activation == "relu" else ACTIVATIONS[activation]()
        layers += [nn.Linear(a, b), act]
    layers.append(nn.Linear(sizes[-1], out_dim))
    return MLP(*layers)


HIDDEN_GAIN = 2.0**0.5
"""Gain of the orthogonal initialization of every hidden layer."""


def orthogonal_init(net: nn.Module, output_gain: float) -> None:
    """Orthogonal weights and zero biases for every ``nn.Linear`` of ``net``.

    Gain √2 on the hidden layers, ``output_gain`` on the last one; drawn from torch's global
    generator, as the default initialization is.
    """
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, gain=output_gain if i == len(linears) - 1 else HIDDEN_GAIN)
        nn.init.zeros_(layer.bias)


def build_mlp_from_cfg(cfg: dict[str, Any], in_dim: int, out_dim: int, path: str = "policy.actor") -> MLP:
    """Build the network a seed-style block describes; unknown types or keys are errors.

    ``cfg`` is ``{"type": "mlp", "network_cfg": {"hidden_sizes": [64, 64], "activation": "tanh"}}``
    (``path`` names the block in error messages).
    """
    net_type = cfg.get("type", "mlp")
    if net_type not in NETWORK_TYPES:
        raise ConfigError(f"{path}.type: unknown network type {net_type!r}; accepted: mlp")
    network_cfg = dict(cfg.get("network_cfg") or {})
    for key in network_cfg:
        if key not in MLP_KEYS:
            raise ConfigError(f"{path}.network_cfg.{key}: unknown key; accepted: {', '.join(MLP_KEYS)}")
    hidden = network_cfg.get("hidden_sizes", [64, 64])
    if not isinstance(hidden, list) or not all(isinstance(h, int) and h > 0 for h in hidden):
        raise ConfigError(
            f"{path}.network_cfg.hidden_sizes: expected a list of positive ints (got {hidden!r})"
        )
    activation = network_cfg.get("activation", "tanh")
    if activation not in ACTIVATIONS:
        raise ConfigError(
            f"{path}.network_cfg.activation: unknown {activation!r}; accepted: {', '.join(ACTIVATIONS)}"
        )
    return build_mlp(in_dim, out_dim, hidden, activation)
