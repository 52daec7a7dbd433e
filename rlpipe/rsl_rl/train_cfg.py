"""rsl_rl 5.x's ``train_cfg`` (``RslRlOnPolicyRunnerCfg().to_dict()``) → rlpipe's nested params.

Every key is mapped, accepted without effect (with the reason), or refused with a one-line
``ConfigError`` naming its path (``train_cfg.algorithm.xxx: …; accepted: …``): nothing is silently
dropped. A key rsl_rl would default takes rsl_rl's default (:data:`rlpipe.rsl_rl.keys.KEYS`), not
rlpipe's, so a config means the same to both runners. The table of keys is on the docs page
``rsl-rl-runner.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlpipe.rsl_rl.models import policy_params
from rlpipe.rsl_rl.reader import ABSENT, TrainCfgReader, refuse

__all__ = ["OBS_SETS", "params_from_train_cfg"]

OBS_SETS = {"actor": "actor", "policy": "actor", "critic": "critic", "rnd_state": "rnd_state"}
"""``obs_groups`` set name → the network that reads it (``policy``: rsl_rl < 4's name of the actor's)."""
NO_EFFECT = (
    "clip_actions",
    "init_at_random_ep_len",
    "run_name",
    "wandb_project",
    "neptune_project",
    "wandb_tags",
    "upload_model",
    "resume",
    "load_run",
    "load_checkpoint",
    "algorithm.grad_reduce_bucket_mb",
)
"""Keys read and left without effect (the docs table says why)."""
ONLY = {
    "class_name": "OnPolicyRunner",
    "check_for_nan": True,
    "torch_compile_mode": None,
    "multi_gpu": None,
    "algorithm.share_cnn_encoders": False,
}
"""Keys accepted with one value only (rsl_rl's default)."""
RENAMED_ALGORITHM = {
    "num_learning_epochs": "n_epochs",
    "num_mini_batches": "num_mini_batches",
    "clip_param": "clip_coef",
    "gamma": "gamma",
    "lam": "gae_lambda",
    "value_loss_coef": "vf_coef",
    "entropy_coef": "ent_coef",
    "learning_rate": "learning_rate",
    "max_grad_norm": "max_grad_norm",
    "optimizer": "optimizer",
    "schedule": "schedule",
    "desired_kl": "desired_kl",
}
"""``algorithm.<rsl_rl key>`` → ``algorithm.cfg.<rlpipe key>``, value unchanged."""


def params_from_train_cfg(
    train_cfg: Mapping[str, Any],
    *,
    num_envs: int | None = None,
    obs_groups: Sequence[str] | None = None,
    step_dt: float | None = None,
) -> dict[str, Any]:
    """The nested rlpipe params (``trainer``, ``policy``, ``algorithm``, ``tracking``) ``train_cfg`` maps to.

    ``num_envs`` turns ``save_interval`` (iterations) into ``trainer.save_freq`` (env steps) and
    sets ``trainer.num_envs``; ``obs_groups`` (the env's observation group names) resolves an
    observation set ``train_cfg.obs_groups`` leaves out the way rsl_rl does (a group of the set's
    name, else ``policy``; without the names: ``policy``); ``step_dt`` (the env's seconds per step)
    scales the RND weight as rsl_rl does. Raises ``ConfigError`` naming the first key it refuses.
    """
    cfg = TrainCfgReader(train_cfg)
    for path, accepted in ONLY.items():
        if cfg.get(path) != accepted:
            raise refuse(path, f"got {cfg.get(path)!r}; accepted: {accepted!r}")
    for path in NO_EFFECT:
        cfg.get(path)
    policy = policy_params(cfg)
    if not (cfg.has("actor.obs_normalization") or cfg.has("policy.actor_obs_normalization")):
        policy["obs_normalization"] = bool(cfg.get("empirical_normalization", False))
    cfg.get("empirical_normalization")
    sets = _obs_sets(cfg, obs_groups)
    policy["actor"]["obs_keys"], policy["critic"]["obs_keys"] = sets["actor"], sets["critic"]
    algorithm = _algorithm(cfg, sets.get("rnd_state"), step_dt)
    params = {
        "trainer": _trainer(cfg, num_envs),
        "policy": policy,
        "algorithm": {"name": "ppo", "cfg": algorithm},
        "tracking": {"backend": _tracking(cfg)},
    }
    cfg.finish()
    return params


def _trainer(cfg: TrainCfgReader, num_envs: int | None) -> dict[str, Any]:
    horizon = _positive_int(cfg, "num_steps_per_env")
    trainer: dict[str, Any] = {
        "seed": cfg.get("seed"),
        "device": str(cfg.get("device")),
        "buffer_size": horizon,
    }
    if cfg.has("max_iterations"):
        trainer["iterations"] = _positive_int(cfg, "max_iterations")
    if cfg.has("experiment_name"):
        trainer["exp_name"] = str(cfg.get("experiment_name"))
    save_interval = _positive_int(cfg, "save_interval") if cfg.has("save_interval") else None
    if num_envs is not None:
        trainer["num_envs"] = int(num_envs)
        if save_interval is not None:
            trainer["save_freq"] = save_interval * int(num_envs) * horizon
    return trainer


def _tracking(cfg: TrainCfgReader) -> str:
    logger = cfg.get("logger")
    if isinstance(logger, Mapping):
        cfg.skip("logger")
    return "none" if logger in ("none", None) else "mlflow"


def _positive_int(cfg: TrainCfgReader, path: str) -> int:
    value = cfg.require(path)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise refuse(path, f"got {value!r}; accepted: an integer >= 1")
    return value


def _obs_sets(cfg: TrainCfgReader, names: Sequence[str] | None) -> dict[str, list[str]]:
    """``{network: [groups]}`` from ``obs_groups``; missing actor/critic sets resolved as rsl_rl does."""
    given = cfg.get("obs_groups", {})
    if not isinstance(given, Mapping):
        raise refuse("obs_groups", f"expected a dict {{set: [groups]}}, got {type(given).__name__}")
    sets: dict[str, list[str]] = {}
    for name, groups in given.items():
        path = f"obs_groups.{name}"
        if name not in OBS_SETS:
            raise refuse(
                path, f"not an observation set rlpipe's runner reads; accepted: {', '.join(OBS_SETS)}"
            )
        if not isinstance(groups, list | tuple) or not groups or not all(isinstance(g, str) for g in groups):
            raise refuse(path, f"got {groups!r}; accepted: a non-empty list of observation group names")
        missing = [g for g in groups if names is not None and g not in names]
        if missing:
            raise refuse(
                path, f"group {missing[0]!r} is not among the env's groups ({', '.join(names or [])})"
            )
        sets[OBS_SETS[name]] = list(groups)
    for network in ("actor", "critic"):
        if network not in sets:
            own = network if names is not None and network in names else "policy"
            sets[network] = [own]
    return sets


def _algorithm(cfg: TrainCfgReader, rnd_groups: list[str] | None, step_dt: float | None) -> dict[str, Any]:
    name = str(cfg.get("algorithm.class_name")).rpartition(":")[2].rpartition(".")[2]
    if name != "PPO":
        raise refuse(
            "algorithm.class_name", f"got {name!r}; accepted: PPO (Distillation: use rlpipe distill)"
        )
    out: dict[str, Any] = {rl: cfg.get(f"algorithm.{rs}") for rs, rl in RENAMED_ALGORITHM.items()}
    out["clip_value_loss"] = bool(cfg.get("algorithm.use_clipped_value_loss"))
    out["vf_clip_coef"] = out["clip_coef"]  # rsl_rl clips the value with clip_param
    per_minibatch = cfg.get("algorithm.normalize_advantage_per_mini_batch")
    out["normalize_advantage"] = "minibatch" if per_minibatch else "batch"
    out["amp"] = "bf16" if cfg.get("algorithm.use_mixed_precision") else "none"
    out["rnd"] = _rnd(cfg, rnd_groups, step_dt)
    out["symmetry"] = _symmetry(cfg)
    return out


def _rnd(cfg: TrainCfgReader, groups: list[str] | None, step_dt: float | None) -> dict[str, Any] | None:
    """``algorithm.cfg.rnd`` of ``rnd_cfg`` (one value head, as rsl_rl)."""
    if cfg.block("algorithm.rnd_cfg") is None:
        return None
    path = "algorithm.rnd_cfg"
    for key, accepted in (("weight_schedule", None), ("activation", "elu")):
        if cfg.get(f"{path}.{key}") != accepted:
            raise refuse(f"{path}.{key}", f"got {cfg.get(f'{path}.{key}')!r}; accepted: {accepted!r}")
    cfg.skip(f"{path}.num_states")
    cfg.skip(f"{path}.obs_groups")
    predictor, target = (
        cfg.require(f"{path}.predictor_hidden_dims"),
        cfg.require(f"{path}.target_hidden_dims"),
    )
    if list(predictor) != list(target) or any(d < 1 for d in predictor):
        raise refuse(
            f"{path}.target_hidden_dims",
            "must equal predictor_hidden_dims (widths >= 1): rlpipe's predictor and target share one shape",
        )
    weight = float(cfg.get(f"{path}.weight"))
    return {
        "obs_keys": groups,
        "hidden_sizes": [int(d) for d in predictor],
        "embedding_dim": int(cfg.require(f"{path}.num_outputs")),
        "learning_rate": float(cfg.get(f"{path}.learning_rate")),
        "weight": weight * step_dt if step_dt is not None else weight,
        "reward_normalization": "running" if cfg.get(f"{path}.reward_normalization") else "off",
        "state_normalization": bool(cfg.get(f"{path}.state_normalization")),
    }


def _symmetry(cfg: TrainCfgReader) -> dict[str, Any] | None:
    """``algorithm.cfg.symmetry`` of ``symmetry_cfg``; a callable becomes its ``module:qualname``."""
    if cfg.block("algorithm.symmetry_cfg") is None:
        return None
    path = "algorithm.symmetry_cfg"
    function = cfg.require(f"{path}.data_augmentation_func")
    return {
        "function": _reference(function, f"{path}.data_augmentation_func"),
        "data_augmentation": bool(cfg.get(f"{path}.use_data_augmentation")),
        "mirror_loss": bool(cfg.get(f"{path}.use_mirror_loss")),
        "mirror_loss_coef": float(cfg.get(f"{path}.mirror_loss_coeff")),
    }


def _reference(function: str | Callable[..., Any], path: str) -> str:
    if callable(function):
        return f"{function.__module__}:{function.__qualname__}"
    if isinstance(function, str) and function is not ABSENT:
        return function if ":" in function else ":".join(function.rsplit(".", 1))
    raise refuse(path, f"got {function!r}; accepted: a function or its 'module:function' name")
