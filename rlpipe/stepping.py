"""How a policy acts in the collector's step loop: stateless, or carrying a recurrent core state.

The collector runs one step loop for every policy; a stepper is what differs. Each step it samples an
action for ``obs`` ``[N, *obs]``, steps the env and returns ``(action [N, *act], log_prob [N],
step)``; after the loop it fills what the loop left: ``value``, ``final_value`` and ``action_mean``.

* :class:`StatelessStepper` (a feedforward policy) carries an empty state: per step only the actor
  and the env; values and deterministic actions come afterwards in batched forwards.
* :class:`RecurrentStepper` carries the core state ``[N, S]``: the value comes from the same core
  step as the action, the state is zeroed after a done and at every ``seq_len ×
  seqs_per_state_reset``-th step of a rollout (never when that is ≤ 0), and written into the
  ``recurrent_state`` extra at every sequence start (``t % seq_len == 0``).

:func:`make_stepper` reads the policy's ``is_recurrent`` once and picks one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict

from rlpipe.envs import BatchedEnv, StepResult
from rlpipe.envs.base import Obs
from rlpipe.rollout import ACTION_MEAN, RECURRENT_STATE

if TYPE_CHECKING:
    from rlpipe.policies.trainable import ActingPolicy, TrainablePolicy

__all__ = ["RecurrentStepper", "StatelessStepper", "act_and_step", "make_stepper"]

Extras = dict[str, tuple[tuple[int, ...], torch.dtype]]


def act_and_step(
    env: BatchedEnv,
    sample: Callable[[Obs, bool], tuple[torch.Tensor, torch.Tensor]],
    obs: Obs,
    deterministic: bool,
) -> tuple[torch.Tensor, torch.Tensor, StepResult]:
    """``(action [N, *act], log_prob [N], step)``: draw with ``sample`` (a policy's) and step ``env``.

    Envs with their own ``act_and_step`` (envpool's double-buffered ``async`` mode) interleave
    inference and simulation themselves.
    """
    own = getattr(env, "act_and_step", None)
    if own is not None:
        return own(lambda o: sample(o, deterministic), obs)
    action, log_prob = sample(obs, deterministic)
    return action, log_prob, env.step(action)


class StatelessStepper:
    """A feedforward policy: nothing carried between steps, values computed after the loop."""

    extras: Extras = {}
    """Rollout keys this stepper adds to the schema's (none)."""

    def __init__(
        self,
        env: BatchedEnv,
        policy: ActingPolicy,
        deterministic: bool,
        mode_policy: TrainablePolicy | None,
    ) -> None:
        self.env, self.policy, self.deterministic = env, policy, deterministic
        self.mode_policy = mode_policy
        """Whose deterministic action the rollout records as ``action_mean``; ``None``: not recorded."""
        self.state = torch.zeros(env.num_envs, 0, device=env.device)
        """The carried state ``[N, S]``: empty (S = 0)."""
        self.act_step: Callable[..., Any] = policy.sample_step if policy.is_recurrent else policy.sample
        """The policy's act step the loop calls: ``sample(obs, deterministic)`` (a recurrent policy's
        ``sample_step(obs, state, deterministic)``), or its compiled form (``trainer.compile``)."""

    def begin(self, rollout: TensorDict, final_obs: torch.Tensor | TensorDict) -> None:
        """Nothing to prepare."""

    def __call__(self, t: int, obs: Obs) -> tuple[torch.Tensor, torch.Tensor, StepResult]:
        """Step t: ``(action, log_prob, step)``."""
        return act_and_step(self.env, self.act_step, obs, self.deterministic)

    def finish(self, rollout: TensorDict, final_obs: torch.Tensor | TensorDict) -> None:
        """``value`` of ``obs[:, 0..T]``, ``final_value`` of truncations, ``action_mean``: batched."""
        self._fill_values(rollout, final_obs)
        self._fill_action_mean(rollout)

    def _fill_values(self, ro: TensorDict, final_obs: torch.Tensor | TensorDict) -> None:
        n, t1 = ro.batch_size
        if not self.policy.has_critic:
            return  # value and final_value stay zero
        ro["value"].copy_(self.policy.value(ro["obs"].flatten(0, 1)).view(n, t1))
        ro["final_value"].zero_()
        # Truncations are rare: evaluate the critic on those final observations only (one host
        # sync per rollout) instead of on all N×T of them.
        rows = (ro["truncated"][:, :-1] & ~ro["terminated"][:, :-1]).flatten().nonzero().squeeze(-1)
        if rows.numel():
            final_value = torch.zeros(n * (t1 - 1), device=ro.device)
            final_value[rows] = self.policy.value(final_obs.flatten(0, 1)[rows])
            ro["final_value"][:, :-1] = final_value.view(n, t1 - 1)

    def _fill_action_mean(self, ro: TensorDict) -> None:
        """``action_mean[:, :T]``: the deterministic action of each stored observation, one batched forward.

        The observation normalizer changes only in the update, so this equals acting at each step.
        """
        if self.mode_policy is None:
            return
        n, t1 = ro.batch_size
        mean = self.mode_policy.act(ro["obs"][:, :-1].flatten(0, 1), deterministic=True)
        ro[ACTION_MEAN][:, :-1] = mean.view(n, t1 - 1, *mean.shape[1:])

    def reset(self) -> None:
        """Nothing carried."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Nothing carried: empty."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing carried."""


class RecurrentStepper(StatelessStepper):
    """A recurrent policy: carries the core state ``[N, S]``; values from the same core step as the action."""

    mode_policy: TrainablePolicy | None

    def __init__(
        self,
        env: BatchedEnv,
        policy: ActingPolicy,
        deterministic: bool,
        mode_policy: TrainablePolicy | None,
        horizon: int,
        seq_len: int | None,
        seqs_per_state_reset: int,
    ) -> None:
        super().__init__(env, policy, deterministic, mode_policy)
        n, size = env.num_envs, policy.state_size
        self.extras = {RECURRENT_STATE: ((size,), torch.float32)}
        self.seq_len = seq_len or horizon
        self.state_reset_every = self.seq_len * seqs_per_state_reset if seqs_per_state_reset > 0 else 0
        self.state = torch.zeros(n, size, device=env.device)
        """The core state ``[N, S]`` before the next step (carried across rollouts)."""
        self._final_state = torch.zeros(n, horizon, size, device=env.device)
        """``[N, T, S]``: the state after step t, with which the true final observation is valued."""
        self._rollout: TensorDict | None = None
        self._final_obs: torch.Tensor | TensorDict | None = None

    def begin(self, rollout: TensorDict, final_obs: torch.Tensor | TensorDict) -> None:
        """Clear the sequence-start states of the rollout about to be filled."""
        self._rollout, self._final_obs = rollout, final_obs
        rollout[RECURRENT_STATE].zero_()

    def __call__(self, t: int, obs: Obs) -> tuple[torch.Tensor, torch.Tensor, StepResult]:
        """Step t from the carried state; records the state at sequence starts, the value, the next state."""
        ro, state = self._rollout, self.state
        assert ro is not None and self._final_obs is not None
        if self.state_reset_every and t % self.state_reset_every == 0:
            state = torch.zeros_like(state)
        if t % self.seq_len == 0:
            ro[RECURRENT_STATE][:, t] = state
        action, log_prob, value, next_state = self.act_step(obs, state, self.deterministic)
        if self.mode_policy is not None:  # a deterministic step draws nothing: the samples stay as they were
            ro[ACTION_MEAN][:, t] = self.mode_policy.sample_step(obs, state, True)[0]
        step = self.env.step(action)
        ro["value"][:, t] = value
        # Every step, so the final values below see the same inputs wherever no episode ended.
        self._final_obs[:, t], self._final_state[:, t] = step.final_obs, next_state
        done = step.terminated | step.truncated
        self.state = next_state * (~done).unsqueeze(-1).to(next_state.dtype)
        return action, log_prob, step

    def finish(self, rollout: TensorDict, final_obs: torch.Tensor | TensorDict) -> None:
        """The bootstrap value and the values of truncated episodes' true last observations.

        Each final observation is seen with the state it would have had.
        """
        n, t1 = rollout.batch_size
        rollout["value"][:, -1] = self.policy.step_value(rollout["obs"][:, -1], self.state)
        bootstrap = rollout["truncated"][:, :-1] & ~rollout["terminated"][:, :-1]
        final_value = self.policy.step_value(final_obs.flatten(0, 1), self._final_state.flatten(0, 1))
        rollout["final_value"][:, :-1] = final_value.view(n, t1 - 1) * bootstrap

    def reset(self) -> None:
        """Zero the carried state (every env starts a new episode)."""
        self.state.zero_()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """``{recurrent_state: [N, S]}``."""
        return {RECURRENT_STATE: self.state.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s state."""
        self.state.copy_(state[RECURRENT_STATE])


def make_stepper(
    env: BatchedEnv,
    policy: ActingPolicy,
    horizon: int,
    deterministic: bool,
    mode_policy: TrainablePolicy | None,
    seq_len: int | None = None,
    seqs_per_state_reset: int = -1,
) -> StatelessStepper:
    """The stepper for ``policy``: its ``is_recurrent``, read here once for the collector."""
    if policy.is_recurrent:
        return RecurrentStepper(
            env,
            policy,
            deterministic,
            mode_policy,
            horizon,
            seq_len,
            seqs_per_state_reset,
        )
    return StatelessStepper(env, policy, deterministic, mode_policy)
