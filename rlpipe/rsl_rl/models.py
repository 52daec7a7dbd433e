"""rsl_rl's actor and critic models (``actor``/``critic``, or rsl_rl < 4's ``policy``) → ``policy`` params."""

from __future__ import annotations

import math
from typing import Any

from rlpipe.rsl_rl.reader import ABSENT, TrainCfgReader, refuse

__all__ = ["ACTIVATIONS", "policy_params"]

ACTIVATIONS = {
    "elu": "elu",
    "relu": "relu",
    "tanh": "tanh",
    "gelu": "gelu",
    "lrelu": "leaky_relu",
    "swish": "silu",
}
"""rsl_rl activation name → rlpipe's (rsl_rl's ``selu``, ``crelu``, ``sigmoid``, ``softplus``, ``mish``,
``identity`` have no rlpipe counterpart)."""
DISTRIBUTIONS = {
    "GaussianDistribution": "gaussian",
    "HeteroscedasticGaussianDistribution": "gaussian_state_std",
}
"""rsl_rl distribution class → ``policy.distribution``."""
DEFAULT_STD_RANGE = [1e-6, 1e6]


def policy_params(cfg: TrainCfgReader) -> dict[str, Any]:
    """The ``policy`` section (without ``obs_keys``, set from ``obs_groups``)."""
    if cfg.has("policy"):
        if cfg.has("actor") or cfg.has("critic"):
            raise refuse("policy", "rsl_rl < 4's block beside actor/critic; give one of the two forms")
        return _older_policy(cfg)
    cfg.get("policy")
    for name in ("actor", "critic"):
        if not cfg.has(name):
            raise refuse(name, "missing (rsl_rl 5.x needs actor and critic model configs)")
    actor, critic = _network(cfg, "actor"), _network(cfg, "critic")
    actor_norm = bool(cfg.get("actor.obs_normalization"))
    if bool(cfg.get("critic.obs_normalization")) != actor_norm:
        raise refuse(
            "critic.obs_normalization",
            f"must equal actor.obs_normalization ({actor_norm}): rlpipe normalizes the observation "
            "groups once, for both networks",
        )
    if cfg.get("critic.distribution_cfg") is not None:
        raise refuse("critic.distribution_cfg", "must be null: the critic outputs a value; accepted: null")
    distribution, log_std = _distribution(cfg)
    return {
        "name": "actor_critic",
        "actor": actor,
        "critic": critic,
        "distribution": distribution,
        "log_std_init": log_std,
        "obs_normalization": actor_norm,
    }


def _network(cfg: TrainCfgReader, name: str) -> dict[str, Any]:
    class_name = str(cfg.get(f"{name}.class_name"))
    if class_name.rpartition(":")[2].rpartition(".")[2] != "MLPModel":
        raise refuse(
            f"{name}.class_name", f"got {class_name!r}; accepted: MLPModel (rlpipe's runner builds MLPs)"
        )
    for key in ("cnn_cfg", "rnn_type"):  # an MLPModel's config may carry them, null
        if cfg.get(f"{name}.{key}") is not None:
            raise refuse(f"{name}.{key}", "accepted: null (rlpipe's runner builds MLPs)")
    for key in ("rnn_hidden_dim", "rnn_num_layers"):
        cfg.get(f"{name}.{key}")  # no effect without an RNN
    return {"type": "mlp", "network_cfg": _mlp(cfg, f"{name}.hidden_dims", f"{name}.activation")}


def _mlp(cfg: TrainCfgReader, dims_path: str, activation_path: str) -> dict[str, Any]:
    dims = cfg.get(dims_path)
    if not isinstance(dims, list | tuple) or any(not isinstance(d, int) or d < 1 for d in dims):
        raise refuse(dims_path, f"got {dims!r}; accepted: a list of layer widths >= 1")
    activation = cfg.get(activation_path)
    if activation not in ACTIVATIONS:
        raise refuse(activation_path, f"got {activation!r}; accepted: {', '.join(ACTIVATIONS)}")
    return {"hidden_sizes": [int(d) for d in dims], "activation": ACTIVATIONS[activation]}


def _distribution(cfg: TrainCfgReader) -> tuple[str, float]:
    """``(policy.distribution, log_std_init)`` of the actor's ``distribution_cfg`` (or its older fields)."""
    block = cfg.block("actor.distribution_cfg")
    older = ("stochastic", "init_noise_std", "noise_std_type", "state_dependent_std")
    if block is None:
        if not cfg.get("actor.stochastic"):
            for key in older[1:]:
                cfg.get(f"actor.{key}")
            raise refuse(
                "actor.distribution_cfg", "missing: PPO samples its actions; accepted: GaussianDistribution"
            )
        cfg.get("actor.noise_std_type")
        kind = "gaussian_state_std" if cfg.get("actor.state_dependent_std") else "gaussian"
        return kind, _log_std(cfg, "actor.init_noise_std")
    for key in older:
        if cfg.has(f"actor.{key}") and key != "stochastic":
            raise refuse(f"actor.{key}", "rsl_rl < 4.1's form beside distribution_cfg; give one of the two")
        cfg.get(f"actor.{key}")
    path = "actor.distribution_cfg"
    class_name = str(cfg.get(f"{path}.class_name", "")).rpartition(":")[2].rpartition(".")[2]
    if class_name not in DISTRIBUTIONS:
        raise refuse(f"{path}.class_name", f"got {class_name!r}; accepted: {', '.join(DISTRIBUTIONS)}")
    cfg.get(f"{path}.std_type")
    if cfg.get(f"{path}.learn_std") is not True:
        raise refuse(f"{path}.learn_std", "accepted: true (rlpipe learns the std)")
    std_range = cfg.get(f"{path}.std_range")
    if [float(v) for v in std_range] != DEFAULT_STD_RANGE:
        raise refuse(
            f"{path}.std_range", f"got {std_range!r}; accepted: rsl_rl's default {DEFAULT_STD_RANGE}"
        )
    return DISTRIBUTIONS[class_name], _log_std(cfg, f"{path}.init_std")


def _log_std(cfg: TrainCfgReader, path: str) -> float:
    std = cfg.get(path)
    if std is ABSENT or not isinstance(std, int | float) or std <= 0:
        raise refuse(path, f"got {std!r}; accepted: a standard deviation > 0")
    return math.log(float(std))


def _older_policy(cfg: TrainCfgReader) -> dict[str, Any]:
    """rsl_rl < 4's ``policy`` block (``ActorCritic``): one activation, hidden dims per network."""
    class_name = str(cfg.get("policy.class_name"))
    if class_name.rpartition(":")[2].rpartition(".")[2] != "ActorCritic":
        raise refuse("policy.class_name", f"got {class_name!r}; accepted: ActorCritic")
    actor = _mlp(cfg, "policy.actor_hidden_dims", "policy.activation")
    critic = _mlp(cfg, "policy.critic_hidden_dims", "policy.activation")
    norm = bool(cfg.get("policy.actor_obs_normalization"))
    if bool(cfg.get("policy.critic_obs_normalization")) != norm:
        raise refuse("policy.critic_obs_normalization", f"must equal policy.actor_obs_normalization ({norm})")
    cfg.get("policy.noise_std_type")
    return {
        "name": "actor_critic",
        "actor": {"type": "mlp", "network_cfg": actor},
        "critic": {"type": "mlp", "network_cfg": critic},
        "distribution": "gaussian_state_std" if cfg.get("policy.state_dependent_std") else "gaussian",
        "log_std_init": _log_std(cfg, "policy.init_noise_std"),
        "obs_normalization": norm,
    }
