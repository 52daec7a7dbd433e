"""The ``policy`` section: the policy name, its actor and critic networks, encoders, recurrent core."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, field_validator, model_validator

from rlpipe.config.strict import StrictModel

__all__ = ["ACTIVATIONS", "CNNCfg", "MLPCfg", "NETWORK_TYPES", "NetworkBlock", "PolicyCfg", "RecurrentCfg"]


ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu", "leaky_relu")
"""``network_cfg.activation`` names (the modules of :data:`rlpipe.policies.mlp.ACTIVATIONS`)."""
NETWORK_TYPES = ("mlp",)
"""``type`` of an actor or critic network."""


def _known_activation(value: str) -> str:
    if value not in ACTIVATIONS:
        raise ValueError(f"unknown {value!r}; accepted: {', '.join(ACTIVATIONS)}")
    return value


Activation = Annotated[str, AfterValidator(_known_activation)]
"""An activation's name: tanh, relu, elu, gelu, silu or leaky_relu."""


class MLPCfg(StrictModel):
    """``network_cfg`` of an ``mlp``: ``Linear → activation → … → Linear``."""

    hidden_sizes: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [64, 64])
    """Widths of the hidden layers, input to output (``[]``: one linear layer)."""
    activation: Activation = "tanh"
    """Activation after every hidden layer: tanh, relu, elu, gelu, silu or leaky_relu."""


class CNNCfg(StrictModel):
    """An image group's encoder: ``uint8 [C, H, W]`` / 255 → conv layers → flatten → Linear → features.

    The default (16-32-32 channels, kernels 8-4-3, strides 4-2-1: a lighter Nature CNN) reduces
    64×64 to 4×4 and 84×84 to 7×7.
    """

    channels: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [16, 32, 32])
    """Output channels of each conv layer."""
    kernel_sizes: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [8, 4, 3])
    """Square kernel of each conv layer (one per entry of ``channels``)."""
    strides: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [4, 2, 1])
    """Stride of each conv layer (one per entry of ``channels``)."""
    features: int = Field(default=128, ge=1)
    """Width of the Linear layer after the convs: the features this group adds to the MLP's input."""
    activation: Activation = "relu"
    """Activation after every conv and the Linear layer (the names of ``network_cfg.activation``)."""

    @model_validator(mode="after")
    def _one_per_layer(self) -> Self:
        if not self.channels or not len(self.channels) == len(self.kernel_sizes) == len(self.strides):
            raise ValueError(
                "channels, kernel_sizes and strides need one entry per conv layer (at least one)"
            )
        return self


class NetworkBlock(StrictModel):
    """``{"type": "mlp", "network_cfg": {...}}``: the network of an actor or critic."""

    type: str = "mlp"
    """Network type; ``mlp`` is built in."""
    network_cfg: MLPCfg = Field(default_factory=MLPCfg)
    """Arguments of the network builder (``hidden_sizes``, ``activation``)."""
    obs_keys: list[str] | None = None
    """Dict observations: the keys this network reads, concatenated in this order (``null``: every
    key, sorted); e.g. actor ``[state]``, critic ``[state, privileged_state]``."""
    encoders: dict[str, CNNCfg] = Field(default_factory=dict)
    """Image groups (uint8 ``[C, H, W]``) this network reads: ``{group: cnn settings}``. Each image
    group read gets its own CNN, whose features are concatenated with the vector groups (in
    ``obs_keys`` order) before the MLP; a group not listed here gets the default :class:`CNNCfg`."""

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in NETWORK_TYPES:
            raise ValueError(f"unknown network type {value!r}; accepted: {', '.join(NETWORK_TYPES)}")
        return value


class RecurrentCfg(StrictModel):
    """Core of ``recurrent_actor_critic``: an LSTM or GRU between the observation and the MLPs."""

    type: Literal["lstm", "gru"] = "lstm"
    """Recurrent cell."""
    hidden_size: int = Field(default=64, ge=1)
    """Features per layer (the actor and critic MLPs read the last layer's output)."""
    num_layers: int = Field(default=1, ge=1)
    """Stacked recurrent layers."""


class PolicyCfg(StrictModel):
    """Policy name from the registry and its networks."""

    name: str = "actor_critic"
    """``actor_critic`` (PPO) or ``actor_only`` (GRPO), or any registered policy."""
    actor: NetworkBlock = Field(default_factory=NetworkBlock)
    """Actor network."""
    critic: NetworkBlock | None = Field(default_factory=NetworkBlock)
    """Critic network (ignored by actor-only policies)."""
    action_dim: int | None = None
    """Optional check against the env's action dimension."""
    log_std_init: float = 0.0
    """Initial state-independent log-std of Gaussian policies."""
    distribution: Literal[
        "auto", "gaussian", "gaussian_state_std", "beta", "tanh_gaussian", "tanh_deterministic"
    ] = "auto"
    """Action distribution: ``auto`` (categorical for Discrete, ``gaussian`` for Box); ``gaussian`` (the
    actor outputs the mean, the log-std is one learned vector starting at ``log_std_init``);
    ``gaussian_state_std`` (the actor outputs mean and log-std, offset by ``log_std_init`` and clamped
    to [-20, 2]); ``beta`` (a Box with finite bounds: the actor outputs α, β > 1 per dim, the Beta
    is mapped onto [low, high], the mode is the deterministic action); ``tanh_gaussian`` (SAC: the
    actor outputs mean and log-std of a Gaussian whose sample is squashed by tanh onto [low, high]);
    ``tanh_deterministic`` (TD3: the actor's output squashed by tanh onto [low, high], with the
    algorithm's exploration noise while collecting). Discrete spaces take ``auto``."""
    recurrent: RecurrentCfg = Field(default_factory=RecurrentCfg)
    """Recurrent core of recurrent policies (``recurrent_actor_critic``); ignored by the others."""
    share_encoder: bool = False
    """Actor and critic share one CNN per image group both read (its gradient gets both losses);
    ``false``: each network has its own (the critic's settings from ``critic.encoders``)."""
    init: Literal["torch", "orthogonal"] = "torch"
    """Weights of the actor and critic MLPs: ``torch`` (PyTorch's default initialization) or
    ``orthogonal`` (orthogonal weights, zero biases; gain √2 on hidden layers, 0.01 on the actor's
    output so the first actions barely depend on the observation, 1 on the critic's output; the
    initialization of Andrychowicz et al. 2020, arXiv:2006.05990, and of CleanRL / SB3). Encoders and
    recurrent cores keep PyTorch's."""
    obs_normalization: bool = False
    """Normalize observations with running mean/std (clipped to ±10), updated after each update
    from that rollout's observations and saved in checkpoints; frozen during collection and eval."""
