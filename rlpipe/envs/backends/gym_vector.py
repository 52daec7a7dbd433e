"""gymnasium's own vectorized envs (an id's ``vector_entry_point``) behind the ``BatchedEnv`` contract.

Some gymnasium ids ship a natively vectorized implementation: ``gymnasium.make_vec("CartPole-v1",
n)`` builds ``CartPoleVectorEnv``, one numpy array op per physics term for all n envs, instead of n
Python envs behind ``SyncVectorEnv``, whose Python loop grows with n (both are measured by
``benchmarks/speed/cartpole_step.py``). ``make_vec`` picks it by default, and so does rlpipe.

Those envs auto-reset one step late (``NEXT_STEP``): the step after a done ignores its action and
returns the first observation of the next episode. :class:`GymnasiumVectorEnv` hides that step as
:class:`~rlpipe.envs.backends.envpool_env.EnvpoolEnv` does: right after a step with done envs it resets those
rows itself, drawing from the env's own generator exactly what the env's next step would have
drawn, so the observations are gymnasium's, minus the wasted transition. That needs to know the
env's state layout: :data:`ROW_RESETS` holds one reset per supported class, and
``tests/envs/test_gym_vector.py`` checks it against gymnasium's own next-step reset.

Checkpointing is complete: the physics state, the step counters and the generator are plain arrays,
so a resumed run continues the same episodes bit for bit.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium
import numpy as np
import torch

from rlpipe.config import ConfigError
from rlpipe.envs.backends.torch_native import num_groups
from rlpipe.envs.base import BatchedEnv, StepResult
from rlpipe.envs.rendering import RenderUnavailable
from rlpipe.runtime.seeding import numpy_generator

__all__ = ["ROW_RESETS", "GymnasiumVectorEnv", "NativeVector", "native_vector_class", "native_vector_type"]


class NativeVector(NamedTuple):
    """What rlpipe needs to know of one vectorized class: its state layout."""

    reset_rows: Callable[[Any, np.ndarray], None]
    """Reset the envs of a ``[N]`` bool mask now, as the class's next ``step`` would."""
    observe: Callable[[Any], np.ndarray]
    """``[N, obs_dim]`` float32 observations of the current state."""
    state_keys: tuple[str, ...]
    """Attributes (numpy arrays, last axis N) that a checkpoint holds besides ``np_random``."""


def _reset_cartpole_rows(env: Any, rows: np.ndarray) -> None:
    """``CartPoleVectorEnv.step``'s reset of the envs that were done, done at once."""
    env.state[:, rows] = env.np_random.uniform(low=env.low, high=env.high, size=(4, int(rows.sum())))
    env.steps[rows] = 0
    env.prev_done[rows] = False


def _cartpole_obs(env: Any) -> np.ndarray:
    return env.state.T.astype(np.float32)


ROW_RESETS: dict[str, NativeVector] = {
    "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv": NativeVector(
        _reset_cartpole_rows, _cartpole_obs, ("state", "steps", "prev_done")
    ),
}
"""The vectorized classes rlpipe runs, by ``vector_entry_point``."""


def native_vector_class(env_id: str) -> str | None:
    """The id's ``vector_entry_point`` when rlpipe can run it (a key of :data:`ROW_RESETS`), else None."""
    spec = gymnasium.envs.registry.get(env_id)
    entry = getattr(spec, "vector_entry_point", None)
    return entry if isinstance(entry, str) and entry in ROW_RESETS else None


def native_vector_type(env_id: str) -> type | None:
    """The id's vectorized class itself (its constructor says what ``env.cfg`` may set), or None."""
    entry = native_vector_class(env_id)
    if entry is None:
        return None
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


class GymnasiumVectorEnv(BatchedEnv):
    """``gymnasium.make_vec(id, N, vectorization_mode="vector_entry_point")``, same-step resets, torch out.

    ``obs`` is ``[N, obs_dim]`` float32, actions ``[N]`` int64 (Discrete) or ``[N, act_dim]``
    float32. ``make_kwargs`` go to the vector env's constructor (``max_episode_steps``,
    ``sutton_barto_reward`` for CartPole).
    """

    def __init__(self, env_id: str, num_envs: int, device: torch.device | str, **make_kwargs: Any) -> None:
        entry = native_vector_class(env_id)
        if entry is None:
            supported = ", ".join(sorted(_supported_ids()))
            raise ConfigError(
                f"env.cfg.vectorization_mode: vector_entry_point is not available for "
                f"{env_id!r}; accepted for {supported} (other ids: sync, async)"
            )
        self._reset_rows, self._observe, self._state_keys = ROW_RESETS[entry]
        self.env_id, self.num_envs, self.device = env_id, num_envs, torch.device(device)
        self.vec_env = gymnasium.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **make_kwargs
        )
        observation_space, action_space = (
            self.vec_env.single_observation_space,
            self.vec_env.single_action_space,
        )
        # every class in ROW_RESETS observes a Box and acts on a Discrete or a Box
        assert isinstance(observation_space, gymnasium.spaces.Box), observation_space
        assert isinstance(action_space, gymnasium.spaces.Discrete | gymnasium.spaces.Box), action_space
        self.observation_space, self.action_space = observation_space, action_space
        self.max_episode_steps = getattr(self.vec_env, "max_episode_steps", None)
        self.render_fps = int(self.vec_env.metadata.get("render_fps") or BatchedEnv.render_fps)
        fps = self.vec_env.metadata.get("render_fps")  # gymnasium's envs render one frame per step
        self.control_dt = 1.0 / fps if fps else None
        self._discrete = isinstance(self.action_space, gymnasium.spaces.Discrete)
        self._seed_rng = np.random.default_rng(0)
        self.vec_env.reset()

    def reset(self, seed: int | None = None, group_size: int = 1) -> torch.Tensor:
        """Reset every env; ``obs`` ``[N, obs_dim]``.

        The vector env has one generator: ``seed`` seeds it (``None`` continues it). With
        ``group_size`` k > 1 every env of a group starts from its first env's state; later
        auto-resets draw each env's own state.
        """
        groups = num_groups(self.num_envs, group_size)
        if seed is None and groups < self.num_envs:
            seed = int(self._seed_rng.integers(2**31 - 1))
        self.vec_env.reset(seed=seed)
        if groups < self.num_envs:
            leaders = np.arange(self.num_envs) // group_size * group_size
            env = self.vec_env.unwrapped
            for key in self._state_keys:
                array = getattr(env, key)
                array[...] = array[..., leaders]
        return self._obs()

    def step(self, action: torch.Tensor) -> StepResult:
        """Step every env; finished envs are reset at once (``final_obs`` holds their last observation)."""
        obs, reward, terminated, truncated, _ = self.vec_env.step(self._to_numpy(action))
        done = terminated | truncated
        final_obs = self._to_torch(obs)
        next_obs = final_obs
        if done.any():
            self._reset_rows(self.vec_env.unwrapped, done)
            next_obs = self._obs()
        return StepResult(
            obs=next_obs,
            reward=self._to_torch(reward),
            terminated=self._to_torch(terminated),
            truncated=self._to_torch(truncated),
            final_obs=final_obs,
        )

    def state_dict(self) -> dict[str, Any]:
        """The simulator's arrays, its generator and the adapter's seed generator: a bit-exact resume."""
        env = self.vec_env.unwrapped
        arrays = {key: torch.tensor(getattr(env, key)) for key in self._state_keys}  # weights_only-safe
        return {
            "arrays": arrays,
            "np_random": env.np_random.bit_generator.state,
            "seed_rng": self._seed_rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`state_dict` was taken."""
        env = self.vec_env.unwrapped
        for key, array in state["arrays"].items():
            if array.shape[-1] != self.num_envs:
                raise ValueError(f"state_dict holds {array.shape[-1]} envs; this env has {self.num_envs}")
            setattr(env, key, array.numpy().copy())
        env.np_random = numpy_generator(state["np_random"])
        self._seed_rng = numpy_generator(state["seed_rng"])

    def render(self, env_ids: list[int]) -> np.ndarray:
        """Not drawn: eval videos need ``env.cfg.vectorization_mode: sync`` (a ``RenderUnavailable``)."""
        raise RenderUnavailable(
            f"{self.env_id} runs gymnasium's vectorized class, which rlpipe does not "
            "film; env.cfg.vectorization_mode: sync draws each env"
        )

    def close(self) -> None:
        """Close the vector env."""
        self.vec_env.close()

    def _obs(self) -> torch.Tensor:
        return self._to_torch(self._observe(self.vec_env.unwrapped))

    def _to_torch(self, array: np.ndarray) -> torch.Tensor:
        """A fresh numpy batch (the env allocates one per step) → a tensor sharing it on a CPU."""
        tensor = torch.from_numpy(array)
        return tensor if self.device.type == "cpu" else tensor.to(self.device)

    def _to_numpy(self, action: torch.Tensor) -> np.ndarray:
        array = (action if self.device.type == "cpu" else action.cpu()).detach().numpy()
        if self._discrete:
            return array.reshape(self.num_envs).astype(np.int64, copy=False)
        shape, dtype = (self.num_envs, *self.action_shape), self.action_space.dtype
        return array.reshape(shape).astype(dtype, copy=False)


def _supported_ids() -> list[str]:
    return [env_id for env_id in gymnasium.envs.registry if native_vector_class(env_id)]
