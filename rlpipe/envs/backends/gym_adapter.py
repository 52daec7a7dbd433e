"""Any gymnasium id behind the :class:`~rlpipe.envs.base.BatchedEnv` contract.

``GymnasiumEnv`` runs ``gymnasium.make_vec(id, num_envs, vectorization_mode="sync"|"async")``
in SAME_STEP autoreset mode: a finished sub-env is reset inside the same ``step`` and its true
last observation arrives in ``infos["final_obs"]`` (mask ``infos["_final_obs"]``) — exactly the
``obs``/``final_obs`` split of :class:`~rlpipe.envs.base.StepResult`. Results come back as torch
tensors on ``device``; each step costs one host round trip (gymnasium steps on the CPU).
Frames come from the sub-envs' own ``render()`` when built with ``render_mode="rgb_array"``
(``build_env(..., render=True)`` asks for it).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rlpipe.config import ConfigError
from rlpipe.envs.backends.torch_native import num_groups
from rlpipe.envs.base import BatchedEnv, StepResult
from rlpipe.envs.rendering import RenderUnavailable, gl_errors, gl_unavailable
from rlpipe.runtime.seeding import numpy_generator

__all__ = ["GymnasiumEnv"]

VECTORIZATION_MODES = ("sync", "async")


class GymnasiumEnv(BatchedEnv):
    """``num_envs`` copies of a gymnasium env, vectorized by gymnasium, speaking torch.

    Spaces: Box observations are flattened, ``obs`` is ``[N, prod(obs_shape)]`` float32; actions
    are ``[N]`` int64 (Discrete) or ``[N, *act_shape]`` float32 (Box).

    Checkpointing is partial, because gymnasium envs cannot be snapshotted in general:
    :meth:`state_dict` holds the numpy RNG state (``np_random``) of every sub-env and of the
    adapter's own seed generator. :meth:`load_state_dict` restores those RNGs and then resets
    every sub-env from them (no reseed), so the episodes that were running at save time are NOT
    restored — simulator state, time-limit counters and wrapper state are lost — and the new
    first observations are in :attr:`last_obs`. A resumed run is reproducible, but it differs
    from an uninterrupted one.
    """

    last_obs: torch.Tensor
    """``[N, *obs_shape]`` float32: the observation returned by the latest reset/step/load."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        device: torch.device | str,
        vectorization_mode: str = "sync",
        **make_kwargs: Any,
    ) -> None:
        if vectorization_mode not in VECTORIZATION_MODES:
            raise ValueError(
                f"vectorization_mode: got {vectorization_mode!r}; accepted: {', '.join(VECTORIZATION_MODES)}"
            )
        self.env_id = env_id
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.vec_env = gymnasium.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode=vectorization_mode,
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            **make_kwargs,
        )
        self.observation_space = _flat_box(self.vec_env.single_observation_space, env_id)
        self.action_space = _check_action_space(self.vec_env.single_action_space, env_id)
        self.max_episode_steps = make_kwargs.get(
            "max_episode_steps", gymnasium.spec(env_id).max_episode_steps
        )
        self.render_fps = int(self.vec_env.metadata.get("render_fps") or BatchedEnv.render_fps)
        fps = self.vec_env.metadata.get("render_fps")  # gymnasium's envs render one frame per step
        self.control_dt = 1.0 / fps if fps else None
        self._seed_rng = np.random.default_rng(0)
        self.last_obs = self._to_obs(self.vec_env.reset()[0])

    @classmethod
    def from_vector_env(cls, vec_env: gymnasium.vector.VectorEnv, device: torch.device | str) -> GymnasiumEnv:
        """Adopt a gymnasium vector env a script already built; it must auto-reset in ``SAME_STEP`` mode.

        ``SAME_STEP`` is what keeps the ``[N, T+1]`` convention exact (the step that ends an episode
        also returns the next episode's first observation, with the true final one in its info).
        """
        mode = vec_env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"env: a gymnasium vector env with autoreset_mode {mode}; accepted: SAME_STEP "
                "(gymnasium.make_vec(..., vector_kwargs={'autoreset_mode': "
                "AutoresetMode.SAME_STEP}))"
            )
        env = cls.__new__(cls)
        spec = getattr(vec_env, "spec", None)
        env.env_id = spec.id if spec is not None else type(vec_env).__name__
        env.num_envs, env.device, env.vec_env = int(vec_env.num_envs), torch.device(device), vec_env
        env.observation_space = _flat_box(vec_env.single_observation_space, env.env_id)
        env.action_space = _check_action_space(vec_env.single_action_space, env.env_id)
        env.max_episode_steps = spec.max_episode_steps if spec is not None else None
        env._seed_rng = np.random.default_rng(0)
        env.last_obs = env._to_obs(vec_env.reset()[0])
        return env

    def reset(self, seed: int | None = None, group_size: int = 1) -> torch.Tensor:
        """Reset every sub-env; return ``obs`` ``[N, *obs_shape]`` float32.

        Env i is reset with seed ``seed + i // group_size``, so the envs of a group start
        identically. ``seed=None`` continues each sub-env's RNG when ``group_size == 1``; with
        groups, a base seed is drawn from the adapter's seed generator instead. Note that the
        envs of a group then share their RNG streams for later auto-resets too.
        """
        groups = num_groups(self.num_envs, group_size)
        if seed is not None:
            self._seed_rng = np.random.default_rng(seed)
        elif groups < self.num_envs:
            seed = int(self._seed_rng.integers(2**31 - 1))
        seeds = None if seed is None else [seed + i // group_size for i in range(self.num_envs)]
        # VectorEnv.reset declares one int seed; its Sync and Async envs (and the vector wrappers, which
        # pass it on) take one per sub-env.
        obs, _ = self.vec_env.reset(seed=seeds)  # pyright: ignore[reportArgumentType]
        self.last_obs = self._to_obs(obs)
        return self.last_obs

    def step(self, action: torch.Tensor) -> StepResult:
        """Step every sub-env with ``action`` (``[N]`` int64 or ``[N, *act_shape]`` float32)."""
        obs, reward, terminated, truncated, infos = self.vec_env.step(self._to_numpy(action))
        final = _final_obs(obs, infos)
        self.last_obs = self._to_obs(obs)
        return StepResult(
            obs=self.last_obs,
            reward=self._to_torch(reward, np.float32),
            terminated=self._to_torch(terminated, np.bool_),
            truncated=self._to_torch(truncated, np.bool_),
            final_obs=self.last_obs if final is None else self._to_obs(final),
        )

    def state_dict(self) -> dict[str, Any]:
        """RNG states only: ``np_random`` of each sub-env and the adapter's seed generator."""
        rngs = self._sub_env_vector().get_attr("np_random")
        return {
            "np_random": [rng.bit_generator.state for rng in rngs],
            "seed_rng": self._seed_rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the RNGs and reset every sub-env from them; see the class docstring."""
        if len(state["np_random"]) != self.num_envs:
            raise ValueError(
                f"state_dict holds {len(state['np_random'])} sub-env RNGs; this env has {self.num_envs}"
            )
        self._sub_env_vector().set_attr("np_random", [numpy_generator(s) for s in state["np_random"]])
        self._seed_rng = numpy_generator(state["seed_rng"])
        self.last_obs = self._to_obs(self.vec_env.reset()[0])

    def render(self, env_ids: list[int]) -> np.ndarray:
        """``[k, H, W, 3]`` uint8 frames of sub-envs ``env_ids`` (``render_mode="rgb_array"``, sync mode).

        An OpenGL failure (MuJoCo envs without a usable ``MUJOCO_GL``) is a ``RenderUnavailable``.
        """
        if self.vec_env.render_mode != "rgb_array":
            raise RenderUnavailable(
                f"{self.env_id} was built with render_mode="
                f"{self.vec_env.render_mode!r}; video needs render_mode='rgb_array'"
            )
        sync = self.vec_env.unwrapped
        if not isinstance(sync, SyncVectorEnv):  # forked workers may hang creating GL contexts
            raise RenderUnavailable(
                f"{self.env_id}: video needs vectorization_mode='sync' "
                "(build_env(..., render=True) chooses it)"
            )
        try:
            frames = [sync.envs[i].render() for i in env_ids]
        except gymnasium.error.DependencyNotInstalled as exc:
            raise RenderUnavailable(f"rendering {self.env_id}: {_first_line(exc)}") from None
        except gl_errors() as exc:
            raise gl_unavailable(f"rendering {self.env_id}", exc) from None
        return np.stack([np.asarray(f, dtype=np.uint8) for f in frames])

    def _sub_env_vector(self) -> SyncVectorEnv | AsyncVectorEnv:
        """The vector env under any vector wrappers, which do not pass on ``get_attr``/``set_attr``.

        gymnasium's Sync and Async envs read and write attributes of their sub-envs with those.
        """
        base = self.vec_env.unwrapped
        if not isinstance(base, SyncVectorEnv | AsyncVectorEnv):
            raise ValueError(
                f"env: a {type(base).__name__} cannot save its sub-envs' RNGs; accepted: gymnasium's "
                "SyncVectorEnv or AsyncVectorEnv (under any vector wrappers)"
            )
        return base

    def close(self) -> None:
        """Close the vector env (and its worker processes in async mode)."""
        self.vec_env.close()

    def _to_obs(self, obs: np.ndarray) -> torch.Tensor:
        """Batched numpy obs → ``[N, prod(obs_shape)]`` float32 on the device (no copy on a CPU)."""
        return self._to_torch(obs.reshape(self.num_envs, -1), np.float32)

    def _to_torch(self, array: np.ndarray, dtype: type) -> torch.Tensor:
        """A numpy batch → a tensor on the device: ``from_numpy`` (shared memory), converted if needed."""
        tensor = torch.from_numpy(np.asarray(array, dtype=dtype))
        return tensor if self.device.type == "cpu" else tensor.to(self.device)

    def _to_numpy(self, action: torch.Tensor) -> np.ndarray:
        """``[N]`` or ``[N, *act_shape]`` tensor → the numpy batch gymnasium expects (no copy if it fits)."""
        array = action.detach().cpu().numpy()
        if isinstance(self.action_space, gymnasium.spaces.Discrete):
            return array.reshape(self.num_envs).astype(np.int64, copy=False)
        shape = (self.num_envs, *self.action_space.shape)
        return array.reshape(shape).astype(self.action_space.dtype, copy=False)


def _final_obs(obs: np.ndarray, infos: dict[str, Any]) -> np.ndarray | None:
    """``[N, ...]``: ``obs`` with each finished env's row replaced by its true last observation.

    ``None`` when no episode ended this step (the final observations are then ``obs`` itself).
    """
    rows = np.flatnonzero(infos["_final_obs"]) if "final_obs" in infos else ()
    if not len(rows):
        return None
    final = np.array(obs, copy=True)
    for i in rows:
        final[i] = infos["final_obs"][i]
    return final


def _flat_box(space: gymnasium.Space, env_id: str) -> gymnasium.spaces.Box:
    """Flattened float32 Box of one observation; ConfigError for non-Box spaces."""
    if not isinstance(space, gymnasium.spaces.Box):
        raise ConfigError(f"env.id: {env_id!r} has a {type(space).__name__} observation space; accepted: Box")
    low = np.asarray(space.low, dtype=np.float32).reshape(-1)
    high = np.asarray(space.high, dtype=np.float32).reshape(-1)
    return gymnasium.spaces.Box(low, high, dtype=np.float32)


def _check_action_space(
    space: gymnasium.Space, env_id: str
) -> gymnasium.spaces.Discrete | gymnasium.spaces.Box:
    """Return ``space`` if it is Discrete or Box; ConfigError otherwise."""
    if not isinstance(space, gymnasium.spaces.Discrete | gymnasium.spaces.Box):
        raise ConfigError(
            f"env.id: {env_id!r} has a {type(space).__name__} action space; accepted: Discrete, Box"
        )
    return space


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
