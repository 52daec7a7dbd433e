"""``OffPolicyAlgorithm``: what SAC and TD3 share — the replay ring, the critics, their targets, the steps.

The trainer runs the same stages as for PPO; only :meth:`OffPolicyAlgorithm.update` differs: it adds
the rollout ``[N, T+1]`` (with its true final observations) to the replay ring, then takes
``buffer_size × updates_per_step`` gradient steps, each on ``batch_size`` transitions sampled
uniformly from the ring: a critic step, and every ``policy_frequency``-th step an actor step and a
Polyak step of the target networks. Every random draw of an update (the samples, SAC's actions,
TD3's target noise) comes from the algorithm's generator, seeded from ``(trainer.seed, iteration)``,
so a replay of stored rollouts draws exactly what the online run drew, and the checkpoint needs no
generator state and no replay buffer: ``--resume`` refills the ring from the stores
(:func:`rlpipe.trainer.replay_memory.refill_ring`).

Shared with the on-policy algorithms rather than copied: the optimizers (:mod:`~rlpipe.algorithms.optim`),
the learning-rate schedules, the precision checks and autocast dtypes, the observation
normalization (the policy's), gradient clipping with the non-finite flag, gradient averaging across
ranks, the update seed and the plug-in registration (``sac`` and ``td3`` are built-ins of the
registry, resolved like any ``module:Class``).
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe import fast
from rlpipe.algorithms import optim
from rlpipe.algorithms.base import update_seed
from rlpipe.algorithms.finite import GradientCheck
from rlpipe.algorithms.q_critics import QCritics, bootstrap_target, reduce_critics
from rlpipe.algorithms.random_start import RandomStart
from rlpipe.algorithms.replay_ring import ReplayRing
from rlpipe.algorithms.schedules import Progress, Schedule
from rlpipe.algorithms.target_networks import frozen_copy, polyak_update
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.config.offpolicy import OffPolicyCfg, replay_rollouts
from rlpipe.policies.obs_keys import resolve_obs_keys
from rlpipe.runtime.distributed import average_gradients

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["OffPolicyAlgorithm"]

Obs = torch.Tensor | TensorDict
"""An observation batch ``[B, *obs]`` (a TensorDict for dict observations)."""
Batch = dict[str, Any]
"""One sampled batch: ``obs``, ``action``, ``ret``, ``discount``, ``next_obs`` (``[B, ...]``)."""


class OffPolicyAlgorithm(ABC):
    """The replay ring, K critics with targets, the actor's optimizer, and the gradient-step loop.

    A subclass gives its config class, its head class, :meth:`critic_target` and :meth:`actor_step`,
    and optionally extra networks (SAC's entropy coefficient, TD3's target actor).
    """

    cfg_class: ClassVar[type[OffPolicyCfg]] = OffPolicyCfg
    cfg: OffPolicyCfg
    head_class: ClassVar[type] = object
    """The action head the policy must have (``policy.distribution``)."""
    distribution_name: ClassVar[str] = ""
    """That head's ``policy.distribution`` name, for the error naming it."""
    advantage_keys: tuple[str, ...] = ()
    """Off-policy targets are computed per sampled batch, not per rollout: no advantage keys."""
    advantage_reads: tuple[str, ...] = ()
    update_reads: tuple[str, ...] = ("obs", "action", "reward", "terminated", "truncated")
    reads_final_obs = True
    """:meth:`update` takes the rollout's true final observations (``final_obs=``)."""

    def __init__(self, cfg: OffPolicyCfg, policy: TrainablePolicy) -> None:
        self.cfg, self.policy = cfg, policy
        self.seed = 0
        self.device = torch.device(cfg.device)
        self.generator = torch.Generator(device=self.device)
        """Every draw of an update (samples, actions, noise): seeded per iteration (:func:`update_seed`)."""
        self.gradient_check = GradientCheck()
        self.shards = 1
        self.progress = Progress()
        self.loss_step = None
        optim.check_amp_device(cfg.amp, self.device)
        if not isinstance(policy.head, self.head_class):
            raise ConfigError(
                f"policy.distribution: {self.name} acts through {self.distribution_name!r} "
                f"(got a {type(policy.head).__name__}); accepted: {self.distribution_name}"
            )
        self.optimizer = self._optimizer(policy.parameters(), cfg.learning_rate)
        """The actor's optimizer (the policy's parameters, its normalizer has none)."""
        self.lr_schedule = Schedule.of(cfg.lr_schedule_kind, cfg.learning_rate, cfg.lr_schedule, cfg.lr_final)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.amp == "fp16")
        self.critics: QCritics | None = None
        self.critic_targets: QCritics | None = None
        self.critic_optimizer: torch.optim.Optimizer | None = None
        self.ring: ReplayRing | None = None
        self.critic_steps = 0
        """Critic steps taken since the run began (the actor steps on every ``policy_frequency``-th)."""
        self.ring_newest = 0
        """The position of the newest rollout the ring has held (a resume refills up to it)."""

    name: ClassVar[str] = "off-policy"

    # ------------------------------------------------------------------ building

    @classmethod
    def check_run(
        cls,
        cfg: AlgorithmCfg,
        num_envs: int,
        policy_name: str,
        horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """Refuse a fractional step count and a policy with a state-value critic, before any env step."""
        assert isinstance(cfg, OffPolicyCfg)
        if cfg.device != "auto":
            optim.check_amp_device(cfg.amp, cfg.device)
        problem = cfg.steps_problem(horizon)
        if problem:
            raise ConfigError(problem)
        if policy_name in ("actor_critic", "recurrent_actor_critic"):
            raise ConfigError(
                f"policy.name: {cls.name} trains its own Q critics (algorithm.cfg.critic) beside an "
                f"actor; got {policy_name!r}; accepted: actor_only, or a plug-in actor policy"
            )

    def check_spaces(self, obs_space: gym.Space, action_space: gym.Space) -> None:
        """Refuse image observations (the critics read flat vectors) and non-Box actions."""
        if not isinstance(action_space, gym.spaces.Box):
            raise ConfigError(
                f"algorithm.name: {self.name} needs a Box action space (the env's is {action_space})"
            )
        groups = obs_space.spaces.values() if isinstance(obs_space, gym.spaces.Dict) else [obs_space]
        if any(np.dtype(space.dtype) == np.uint8 for space in groups if space.dtype is not None):
            raise ConfigError(
                f"algorithm.name: {self.name} reads vector observations; the env has image groups "
                "(uint8); accepted: Box float observations"
            )

    def build_networks(self, obs_space: gym.Space, action_space: gym.Space) -> None:
        """Build the critics and their targets for these spaces (the trained policy exists already)."""
        _, critic_dim = resolve_obs_keys(obs_space, self.policy.critic_obs_keys, "policy.critic.obs_keys")
        action_dim = int(math.prod(action_space.shape or (1,)))
        cfg = self.cfg
        self.critics = QCritics(critic_dim, action_dim, cfg.num_critics, cfg.critic, cfg.distributional).to(
            self.device
        )
        self.critic_targets = frozen_copy(self.critics)
        self.critic_optimizer = self._optimizer(self.critics.parameters(), self.critic_lr(cfg.learning_rate))

    def _optimizer(self, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
        try:
            return optim.build_optimizer(self.cfg.optimizer, params, lr, dict(self.cfg.optimizer_kwargs))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"algorithm.cfg.optimizer_kwargs: {exc}") from None

    def critic_lr(self, actor_lr: float) -> float:
        """The critics' learning rate when the actor's is ``actor_lr`` (scaled alike by the schedule)."""
        if self.cfg.critic_learning_rate is None:
            return actor_lr
        return self.cfg.critic_learning_rate * actor_lr / self.cfg.learning_rate

    @property
    def acting_policy(self) -> RandomStart:
        """The policy, acting uniformly at random for the first ``random_steps`` env steps."""
        return RandomStart(self.policy, self.cfg.random_steps, lambda: self.progress.env_steps)

    @property
    def update_keys(self) -> tuple[str, ...]:
        """Every rollout key the update reads."""
        return self.update_reads

    @property
    def rollout_reads(self) -> tuple[str, ...]:
        """Every collected rollout key the update reads."""
        return self.update_reads

    # ------------------------------------------------------------------ the update

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Nothing per rollout: the n-step targets are computed when the ring takes it."""
        return {}

    def set_progress(self, env_steps: int, total_env_steps: int) -> None:
        """Position the schedules and the random start at the env steps before the current rollout."""
        self.progress = Progress(int(env_steps), int(total_env_steps))

    def update(
        self, rollout: TensorDict, iteration: int | None = None, final_obs: TensorDict | None = None
    ) -> dict[str, float]:
        """Add ``rollout`` ``[N, T+1]`` to the ring, then take the iteration's gradient steps.

        ``final_obs``: the rollout's sparse true final observations (``index``, ``obs``), needed where
        it holds a truncation (the time-limit bootstrap). No gradient step is taken before
        ``learning_starts`` env steps. The observation statistics merge the rollout afterwards.
        """
        if self.critics is None:
            raise RuntimeError(f"{self.name}: call build_networks(obs_space, action_space) before update()")
        if iteration is not None:
            self.generator.manual_seed(update_seed(self.seed, iteration))
        self._check_final_obs(rollout, final_obs)
        self.remember(rollout, final_obs)
        n, horizon = rollout.batch_size[0], rollout.batch_size[1] - 1
        self.set_learning_rate(self.lr_schedule(self.progress.env_steps, self.progress.total_env_steps))
        steps = 0
        totals: dict[str, torch.Tensor] = {}
        if self.progress.env_steps + n * horizon >= self.cfg.learning_starts:
            steps = self.cfg.gradient_steps(horizon)
            for _ in range(steps):
                for key, value in self.gradient_step().items():
                    totals[key] = totals[key] + value if key in totals else value
        self.policy.update_normalization(rollout["obs"][:, :-1])
        return self.report(totals, steps)

    def remember(self, rollout: TensorDict, final_obs: TensorDict | None) -> None:
        """Add ``rollout`` as the next position of the ring (allocated at the first rollout)."""
        if self.ring is None:
            n, horizon = rollout.batch_size[0], rollout.batch_size[1] - 1
            capacity = replay_rollouts(self.cfg.replay_size, n, horizon)
            self.ring = ReplayRing(capacity, self.cfg.gamma, self.cfg.n_step, self.device)
        position = self.ring_newest + 1
        self.ring.add(
            rollout.to(self.device), None if final_obs is None else final_obs.to(self.device), position
        )
        self.ring_newest = position

    @staticmethod
    def _check_final_obs(rollout: TensorDict, final_obs: TensorDict | None) -> None:
        if final_obs is not None:
            return
        horizon = rollout.batch_size[1] - 1
        truncations = rollout["truncated"][:, :horizon] & ~rollout["terminated"][:, :horizon]
        if bool(truncations.any()):
            raise ValueError(
                "off-policy update: the rollout has truncations but no final observations "
                "(pass final_obs=, the collector's or the store's)"
            )

    def gradient_step(self) -> dict[str, torch.Tensor]:
        """One critic step on a sampled batch; an actor and target step every ``policy_frequency``-th."""
        assert self.ring is not None
        batch = self.ring.sample(self.cfg.batch_size, self.generator)
        stats = self.critic_step(batch)
        self.critic_steps += 1
        if self.critic_steps % self.cfg.policy_frequency == 0:
            stats |= self.actor_step(batch)
            self.update_targets()
        return stats

    def critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Regress every critic on the batch's target (MSE, or cross-entropy for a categorical critic)."""
        critics = self.critics
        assert critics is not None and self.critic_optimizer is not None
        with torch.no_grad():
            target = self.critic_target(batch)
        with self.autocast():
            outputs = critics.outputs(self.policy.critic_obs(batch["obs"]), batch["action"])
        if critics.distributional is None:
            q = outputs.squeeze(-1).float()
            loss = ((q - target.unsqueeze(0)) ** 2).mean(-1).sum()
        else:
            log_probs = torch.log_softmax(outputs.float(), dim=-1)
            loss = -(target.unsqueeze(0) * log_probs).sum(-1).mean(-1).sum()
            q = critics.expected(outputs)
        self.step(self.critic_optimizer, loss, list(critics.parameters()))
        return {"value_loss": loss.detach(), "q_mean": q.detach().mean()}

    def bootstrap(self, batch: Batch, next_action: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """The critic target of next actions ``next_action`` ``[B, A]`` at the batch's bootstrap observations.

        The target critics' outputs there, combined by :func:`~rlpipe.algorithms.q_critics.bootstrap_target`;
        ``shift`` ``[B]`` is SAC's ``−α log π(a'|s')`` (zeros for TD3).
        """
        targets = self.critic_targets
        assert targets is not None
        with self.autocast():
            outputs = targets.outputs(self.policy.critic_obs(batch["next_obs"]), next_action)
        return bootstrap_target(
            targets, outputs, batch["ret"], batch["discount"], shift, self.cfg.critic_reduce
        )

    def q_of(self, obs: Obs, action: torch.Tensor) -> torch.Tensor:
        """The critics' reduced estimate ``[B]`` of ``action`` at ``obs`` (the actor's objective)."""
        critics = self.critics
        assert critics is not None
        with self.autocast():
            outputs = critics.outputs(self.policy.critic_obs(obs), action)
        return reduce_critics(critics.expected(outputs.float()), self.cfg.critic_reduce)

    @contextlib.contextmanager
    def critics_frozen(self) -> Iterator[None]:
        """The critics' parameters take no gradient inside (the actor's step differentiates through them)."""
        assert self.critics is not None
        params = list(self.critics.parameters())
        for p in params:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in params:
                p.requires_grad_(True)

    def step(
        self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, params: list[torch.nn.Parameter]
    ) -> None:
        """Backward, average over ranks, clip (``max_grad_norm``; the non-finite flag always), step."""
        optimizer.zero_grad(set_to_none=True)
        scaler = self.scaler
        scaler.scale(loss).backward()
        if scaler.is_enabled():
            scaler.unscale_(optimizer)
        average_gradients(params)
        limit = self.cfg.max_grad_norm if self.cfg.max_grad_norm is not None else math.inf
        self.gradient_check.clip(params, limit, scaler.is_enabled())
        if scaler.is_enabled():
            scaler.step(optimizer)
            scaler.update()
        else:
            fast.optimizer_step(optimizer)

    def update_targets(self) -> None:
        """Polyak step of every target network: ``target ← target + tau · (online − target)``."""
        polyak_update(self.target_pairs(), self.cfg.tau)

    def target_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        """``(online, target)`` networks the Polyak step moves (the critics; TD3 adds its actor)."""
        assert self.critics is not None and self.critic_targets is not None
        return [(self.critics, self.critic_targets)]

    def report(self, totals: dict[str, torch.Tensor], steps: int) -> dict[str, float]:
        """The update's metrics: each stat's mean over the steps that computed it, and the counters."""
        assert self.ring is not None
        every = self.cfg.policy_frequency  # actor steps: the multiples of it among these critic steps
        actor_steps = self.critic_steps // every - (self.critic_steps - steps) // every
        means: dict[str, float] = {}
        if totals:
            names = list(totals)
            values = torch.stack([totals[k].float() for k in names]).tolist()  # one host sync per update
            for name, value in zip(names, values):
                share = actor_steps if name in self.actor_stats else steps
                means[name] = value / max(share, 1)
        return (
            means
            | {
                "gradient_steps": float(steps),
                "replay_transitions": float(self.ring.transitions),
                "learning_rate": self.learning_rate,
            }
            | self.extra_metrics()
        )

    actor_stats: ClassVar[tuple[str, ...]] = ("policy_loss",)
    """Stats computed on actor steps only (averaged over those)."""

    def extra_metrics(self) -> dict[str, float]:
        """Per-update values besides the stats (SAC: the entropy coefficient)."""
        return {}

    @abstractmethod
    def critic_target(self, batch: Batch) -> torch.Tensor:
        """The critics' regression target: ``[B]`` (scalar) or ``[B, atoms]`` (categorical), no grad."""

    @abstractmethod
    def actor_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One step of the actor (and its own extras) on the batch; its detached stats."""

    # ------------------------------------------------------------------ precision, lr

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast of the network forwards under ``amp`` (a null context without it)."""
        if self.cfg.amp == "none":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=optim.AMP_DTYPES[self.cfg.amp])

    @property
    def learning_rate(self) -> float:
        """The actor's current learning rate."""
        return optim.learning_rate(self.optimizer)

    def set_learning_rate(self, lr: float) -> None:
        """Set the actor's learning rate, and the critics' in proportion."""
        optim.set_learning_rate(self.optimizer, lr)
        if self.critic_optimizer is not None:
            optim.set_learning_rate(self.critic_optimizer, self.critic_lr(lr))

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Optimizers, critics and targets, counters; never the ring (the stores hold its rollouts)."""
        assert (
            self.critics is not None and self.critic_targets is not None and self.critic_optimizer is not None
        )
        return {
            "optimizer": self.optimizer.state_dict(),
            "critics": self.critics.state_dict(),
            "critic_targets": self.critic_targets.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "learning_rate": self.learning_rate,
            "critic_steps": self.critic_steps,
            "ring_newest": self.ring_newest,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a ring held stays (rewound); a new process refills it (``refill``)."""
        assert (
            self.critics is not None and self.critic_targets is not None and self.critic_optimizer is not None
        )
        self.optimizer.load_state_dict(state["optimizer"])
        self.critics.load_state_dict(state["critics"])
        self.critic_targets.load_state_dict(state["critic_targets"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.set_learning_rate(float(state["learning_rate"]))
        self.critic_steps = int(state["critic_steps"])
        self.ring_newest = int(state["ring_newest"])
        if self.ring is not None:  # the guard restoring a state: newer rollouts will be overwritten
            self.ring.newest = self.ring_newest

    def held_rollouts(self, num_envs: int, horizon: int) -> int:
        """How many of the newest rollouts the ring held at :attr:`ring_newest` (what a refill reads)."""
        return min(replay_rollouts(self.cfg.replay_size, num_envs, horizon), self.ring_newest)

    def refill(self, rollouts: list[tuple[TensorDict, TensorDict | None]]) -> None:
        """Refill the ring with the newest rollouts it held, oldest first (their final observations beside).

        ``rollouts`` are the last ``min(capacity, ring_newest)`` rollouts added before the checkpoint.
        """
        newest = self.ring_newest
        self.ring, self.ring_newest = None, 0
        if not rollouts:
            return
        first = rollouts[0][0]
        n, horizon = first.batch_size[0], first.batch_size[1] - 1
        capacity = replay_rollouts(self.cfg.replay_size, n, horizon)
        if len(rollouts) != min(capacity, newest):
            raise ValueError(
                f"replay ring: refilling {len(rollouts)} rollouts, the ring held {min(capacity, newest)}"
            )
        self.ring = ReplayRing(capacity, self.cfg.gamma, self.cfg.n_step, self.device)
        self.ring_newest = newest - len(rollouts)
        for rollout, final_obs in rollouts:
            self.remember(rollout, final_obs)
