"""Every rsl_rl 5.x ``train_cfg`` key rlpipe knows, its rsl_rl default, and what it becomes in rlpipe params.

:data:`KEYS` is the table the mapping (:mod:`rlpipe.rsl_rl.train_cfg`) reads its defaults from and
the docs page ``rsl-rl-runner.md`` shows (``docs/hooks/rsl_rl_keys.py`` renders it), so the page
cannot drift from the code. A key not listed here is refused. Paths are dotted from the top of
``train_cfg`` (``algorithm.clip_param``); ``actor.*`` rows hold for ``critic.*`` too unless a
``critic.*`` row says otherwise. Importing this module imports neither torch nor rsl_rl.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KEYS", "NO_DEFAULT", "Key", "default_of", "known_paths"]

NO_DEFAULT: object = object()
"""rsl_rl has no default for the key (it is required, or only some configs carry it)."""


@dataclass(frozen=True)
class Key:
    """One ``train_cfg`` key: its dotted path, rsl_rl's default and what rlpipe makes of it."""

    path: str
    becomes: str
    """The rlpipe param it sets, or why it has no effect, or which values are refused."""
    default: object = NO_DEFAULT
    """rsl_rl's value when the key is absent (rlpipe uses it then, not its own default)."""


def _runner_keys() -> list[Key]:
    return [
        Key(
            "class_name",
            "`OnPolicyRunner` only (`DistillationRunner`: use `rlpipe distill`)",
            "OnPolicyRunner",
        ),
        Key("seed", "`trainer.seed`", 42),
        Key("device", "`trainer.device` (the runner's `device` argument wins)", "cpu"),
        Key("num_steps_per_env", "`trainer.buffer_size` (T)"),
        Key("max_iterations", "`trainer.iterations` (`learn(n)` runs n more)"),
        Key("save_interval", "`trainer.save_freq` = save_interval × num_envs × T env steps"),
        Key(
            "empirical_normalization",
            "`policy.obs_normalization` (older form; a model's `obs_normalization` wins)",
        ),
        Key(
            "obs_groups", "`policy.actor.obs_keys` / `policy.critic.obs_keys` / `algorithm.cfg.rnd.obs_keys`"
        ),
        Key("obs_groups.actor", "`policy.actor.obs_keys` (older name: `obs_groups.policy`)"),
        Key("obs_groups.policy", "`policy.actor.obs_keys` (rsl_rl < 4's name of the actor's set)"),
        Key("obs_groups.critic", "`policy.critic.obs_keys`"),
        Key("obs_groups.rnd_state", "`algorithm.cfg.rnd.obs_keys`"),
        Key("clip_actions", "no effect here: the env wrapper clips (`RslRlVecEnvWrapper(clip_actions=…)`)"),
        Key("experiment_name", "`trainer.exp_name` (the runner: the folder name of `log_dir`)"),
        Key("run_name", "no effect: it names `log_dir`, which the train script builds"),
        Key("logger", "`tracking.backend`: `mlflow` for any rsl_rl writer; `none` → `none`", "tensorboard"),
        Key(
            "init_at_random_ep_len",
            "no effect here: Isaac Lab's train script passes it to `learn(init_at_random_ep_len=…)`",
        ),
        Key("wandb_project", "no effect: rlpipe tracks with MLflow"),
        Key("neptune_project", "no effect: rlpipe tracks with MLflow"),
        Key("wandb_tags", "no effect: rlpipe tracks with MLflow"),
        Key("upload_model", "no effect: checkpoints stay in the run directory"),
        Key("resume", "no effect: the train script calls `runner.load(path)`"),
        Key("load_run", "no effect: the train script resolves the checkpoint"),
        Key("load_checkpoint", "no effect: the train script resolves the checkpoint"),
        Key("check_for_nan", "`true` only: rlpipe always checks (`trainer.on_nonfinite`)", True),
        Key("torch_compile_mode", "`null` only (refused otherwise)", None),
        Key(
            "multi_gpu", "`null` only: set by rsl_rl's own runner; rlpipe's runner trains on one device", None
        ),
        Key("policy", "rsl_rl < 4's `ActorCritic` block: mapped as `actor` / `critic` below"),
    ]


def _model_keys() -> list[Key]:
    return [
        Key("actor", "`policy.actor` (an rsl_rl `MLPModel`)"),
        Key("actor.class_name", "`MLPModel` only (`RNNModel`, `CNNModel` refused)", "MLPModel"),
        Key("actor.hidden_dims", "`policy.actor.network_cfg.hidden_sizes`", [256, 256, 256]),
        Key(
            "actor.activation",
            "`policy.actor.network_cfg.activation` (`lrelu` → `leaky_relu`, `swish` → `silu`)",
            "elu",
        ),
        Key("actor.obs_normalization", "`policy.obs_normalization` (actor and critic must agree)", False),
        Key("actor.distribution_cfg", "`policy.distribution`; required for the actor (PPO samples)", None),
        Key(
            "actor.distribution_cfg.class_name",
            "`GaussianDistribution` → `gaussian`; "
            "`HeteroscedasticGaussianDistribution` → `gaussian_state_std`",
        ),
        Key("actor.distribution_cfg.init_std", "`policy.log_std_init` = ln(init_std)", 1.0),
        Key(
            "actor.distribution_cfg.std_type",
            "no effect: rlpipe learns the log-std (same initial std)",
            "scalar",
        ),
        Key("actor.distribution_cfg.std_range", "rsl_rl's default `[1e-6, 1e6]` only", [1e-6, 1e6]),
        Key("actor.distribution_cfg.learn_std", "`true` only", True),
        Key("actor.stochastic", "older form of `distribution_cfg`: `true` → a Gaussian", False),
        Key("actor.init_noise_std", "older form of `distribution_cfg.init_std`", 1.0),
        Key("actor.noise_std_type", "older form of `distribution_cfg.std_type` (no effect)", "scalar"),
        Key("actor.state_dependent_std", "older form: `true` → `gaussian_state_std`", False),
        Key("actor.cnn_cfg", "`null` only (no CNN models; mjlab's config carries it null)", None),
        Key("actor.rnn_type", "`null` only (no RNN models; mjlab's config carries it null)", None),
        Key("actor.rnn_hidden_dim", "no effect while `rnn_type` is `null`", None),
        Key("actor.rnn_num_layers", "no effect while `rnn_type` is `null`", None),
        Key("critic", "`policy.critic` (an rsl_rl `MLPModel`)"),
        Key("critic.distribution_cfg", "`null` only (the critic outputs a value)", None),
        Key("policy.class_name", "`ActorCritic` only", "ActorCritic"),
        Key("policy.actor_hidden_dims", "`policy.actor.network_cfg.hidden_sizes`", [256, 256, 256]),
        Key("policy.critic_hidden_dims", "`policy.critic.network_cfg.hidden_sizes`", [256, 256, 256]),
        Key("policy.activation", "`network_cfg.activation` of both", "elu"),
        Key("policy.init_noise_std", "`policy.log_std_init` = ln(init_noise_std)", 1.0),
        Key("policy.noise_std_type", "no effect: rlpipe learns the log-std", "scalar"),
        Key("policy.state_dependent_std", "`true` → `policy.distribution: gaussian_state_std`", False),
        Key("policy.actor_obs_normalization", "`policy.obs_normalization` (must equal the critic's)", False),
        Key("policy.critic_obs_normalization", "`policy.obs_normalization`", False),
    ]


def _algorithm_keys() -> list[Key]:
    return [
        Key("algorithm", "`algorithm` (`name: ppo`)"),
        Key("algorithm.class_name", "`PPO` only (`Distillation`: use `rlpipe distill`)", "PPO"),
        Key("algorithm.num_learning_epochs", "`algorithm.cfg.n_epochs`", 5),
        Key("algorithm.num_mini_batches", "`algorithm.cfg.num_mini_batches`", 4),
        Key("algorithm.clip_param", "`algorithm.cfg.clip_coef` (and `vf_clip_coef`)", 0.2),
        Key("algorithm.gamma", "`algorithm.cfg.gamma`", 0.99),
        Key("algorithm.lam", "`algorithm.cfg.gae_lambda`", 0.95),
        Key("algorithm.value_loss_coef", "`algorithm.cfg.vf_coef`", 1.0),
        Key("algorithm.entropy_coef", "`algorithm.cfg.ent_coef`", 0.01),
        Key("algorithm.learning_rate", "`algorithm.cfg.learning_rate`", 0.001),
        Key("algorithm.max_grad_norm", "`algorithm.cfg.max_grad_norm`", 1.0),
        Key("algorithm.optimizer", "`algorithm.cfg.optimizer`", "adam"),
        Key("algorithm.use_clipped_value_loss", "`algorithm.cfg.clip_value_loss`", True),
        Key("algorithm.schedule", "`algorithm.cfg.schedule` (`adaptive` or `fixed`)", "adaptive"),
        Key("algorithm.desired_kl", "`algorithm.cfg.desired_kl`", 0.01),
        Key(
            "algorithm.normalize_advantage_per_mini_batch",
            "`algorithm.cfg.normalize_advantage`: `minibatch` / `batch`",
            False,
        ),
        Key("algorithm.use_mixed_precision", "`algorithm.cfg.amp`: `bf16` / `none`", False),
        Key("algorithm.share_cnn_encoders", "`false` only (no CNN models)", False),
        Key("algorithm.grad_reduce_bucket_mb", "no effect: multi-GPU only", 25),
        Key("algorithm.rnd_cfg", "`algorithm.cfg.rnd` (`null`: off)", None),
        Key("algorithm.rnd_cfg.weight", "`algorithm.cfg.rnd.weight` (× the env's `step_dt`, as rsl_rl)", 0.0),
        Key("algorithm.rnd_cfg.weight_schedule", "`null` only", None),
        Key(
            "algorithm.rnd_cfg.reward_normalization",
            "`algorithm.cfg.rnd.reward_normalization`: `running` / `off`",
            False,
        ),
        Key("algorithm.rnd_cfg.state_normalization", "`algorithm.cfg.rnd.state_normalization`", False),
        Key("algorithm.rnd_cfg.learning_rate", "`algorithm.cfg.rnd.learning_rate`", 0.001),
        Key("algorithm.rnd_cfg.num_outputs", "`algorithm.cfg.rnd.embedding_dim`"),
        Key(
            "algorithm.rnd_cfg.predictor_hidden_dims",
            "`algorithm.cfg.rnd.hidden_sizes` (must equal the target's)",
        ),
        Key("algorithm.rnd_cfg.target_hidden_dims", "`algorithm.cfg.rnd.hidden_sizes`"),
        Key("algorithm.rnd_cfg.activation", "`elu` only (rlpipe's RND networks)", "elu"),
        Key("algorithm.rnd_cfg.num_states", "no effect: rsl_rl fills it from the env"),
        Key("algorithm.rnd_cfg.obs_groups", "no effect: rsl_rl fills it (`obs_groups.rnd_state` is read)"),
        Key("algorithm.symmetry_cfg", "`algorithm.cfg.symmetry` (`null`: off)", None),
        Key(
            "algorithm.symmetry_cfg.data_augmentation_func",
            "`algorithm.cfg.symmetry.function` (`module:function`; called with `env=None`)",
        ),
        Key(
            "algorithm.symmetry_cfg.use_data_augmentation",
            "`algorithm.cfg.symmetry.data_augmentation`",
            False,
        ),
        Key("algorithm.symmetry_cfg.use_mirror_loss", "`algorithm.cfg.symmetry.mirror_loss`", False),
        Key("algorithm.symmetry_cfg.mirror_loss_coeff", "`algorithm.cfg.symmetry.mirror_loss_coef`", 0.0),
    ]


KEYS: tuple[Key, ...] = (*_runner_keys(), *_model_keys(), *_algorithm_keys())
"""Every key the mapping knows, in the order the docs page lists them."""

_BY_PATH = {key.path: key for key in KEYS}


def known_paths() -> frozenset[str]:
    """Dotted paths of every known key (``critic.*`` mirrors ``actor.*``)."""
    critic = {k.path.replace("actor.", "critic.", 1) for k in KEYS if k.path.startswith("actor.")}
    return frozenset(_BY_PATH) | critic


def default_of(path: str) -> object:
    """rsl_rl's default of ``path`` (``critic.*`` falls back to ``actor.*``); :data:`NO_DEFAULT` if none."""
    key = _BY_PATH.get(path) or _BY_PATH.get(path.replace("critic.", "actor.", 1))
    return NO_DEFAULT if key is None else key.default
