"""envpool (C++ threads) behind the :class:`~rlpipe.envs.base.BatchedEnv` contract.

envpool auto-resets one step late: the step that ends an episode returns the true last
observation, and the NEXT step ignores its action and returns the first observation of the next
episode (its reward is not always 0). ``EnvpoolEnv`` hides that extra step: right after a step
with done envs it calls ``reset(done_ids)`` for exactly those envs, so ``obs`` after a done is the
first observation of the next episode and ``final_obs`` the true last one — no wasted transition
ever reaches a rollout.

Seeds: envpool fixes every env's seed when the pool is created. The pool is created at the first
``reset(seed)`` with env ``i`` seeded ``seed + i // group_size`` (so the envs of a GRPO group start
identically); later ``reset`` calls reset every env from its continuing stream (a different
``seed`` does not re-seed, a different ``group_size`` rebuilds the pool).

Resume (``resume``): envpool cannot snapshot its simulators. With ``replay`` (the default) the env
records every action it stepped and every full reset since its pool was created; ``state_dict``
holds that log (``4 × act_dim`` bytes per env step) and ``load_state_dict`` rebuilds the pool
with the same seeds and replays it — physics and RNGs are deterministic, so the resumed run is
bit-identical to an uninterrupted one (the replay is checked against the saved observation).
With ``restart`` the state holds only the seeds; loading starts fresh episodes from a new seed
(reproducible, not identical), like the gymnasium adapter; use it for very long runs where the
action log would grow large.

Pixels: image observations (Atari's frame stacks, ``from_pixels=True``) are the image group
``pixels`` uint8 ``[N, C, H, W]`` (:mod:`rlpipe.envs.conversion`). envpool's MuJoCo renderer
(``from_pixels=True``) needs an OpenGL context of its own; where it cannot make one it kills the
process, so the first such env of a process is probed in a child process and refused with one
line (``env.cfg.from_pixels``) when it cannot render.

Modes: ``sync`` steps all envs in one pool. ``async`` splits them into two pools of N/2 and
double-buffers through :meth:`act_and_step`: the second half's actions are computed while the
first half steps in C++ threads.

Control rate: envpool's gym-style MuJoCo tasks step ``frame_skip`` model timesteps per env step;
``control_dt`` is that product, the timestep read from the task's model file in envpool's assets
(:func:`mujoco_control_dt`). Other envpool tasks (classic control, Atari, dm_control) do not say,
so their ``control_dt`` is ``None``.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlpipe.envs.backends.torch_native import num_groups
from rlpipe.envs.base import BatchedEnv, Obs, StepResult
from rlpipe.envs.conversion import flat_action_space, flat_obs_space, obs_to_torch, success_of
from rlpipe.extras import require
from rlpipe.rollout import obs_from_state, obs_state

__all__ = ["MODES", "RESUME_MODES", "EnvpoolEnv", "envpool_ids", "mujoco_control_dt"]

MODES = ("sync", "async")
RESUME_MODES = ("replay", "restart")
RESET = -1
"""Marker of a full reset in the action log."""
Policy = Callable[[Obs], tuple[torch.Tensor, torch.Tensor]]


def envpool_ids() -> list[str]:
    """Every id envpool can make (imports envpool)."""
    envpool = require("envpool", "env.backend: envpool")
    return sorted(envpool.list_all_envs())


class EnvpoolEnv(BatchedEnv):
    """``num_envs`` envpool envs speaking torch; see the module docstring for resets and resume.

    Observations: ``[N, dim]`` float32, or a TensorDict ``[N]`` of ``[N, dim]`` per key for
    Dict spaces (Playground ``state``/``privileged_state``, dm_control ``position``/``velocity``).
    ``info["success"]`` ``[N]`` bool comes from ``success_key`` (default: ``success`` or
    ``is_success`` when the env reports one).
    """

    last_obs: torch.Tensor | None = None
    """Set only after a ``restart`` load (the collector then continues from these observations)."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        device: torch.device | str,
        mode: str = "sync",
        num_threads: int = 0,
        resume: str = "replay",
        success_key: str | None = None,
        **make_kwargs: Any,
    ) -> None:
        envpool = require("envpool", f"env.id: {env_id}")
        _check_choice("mode", mode, MODES)
        _check_choice("resume", resume, RESUME_MODES)
        if mode == "async" and num_envs % 2:
            raise ValueError(f"mode: async needs an even num_envs (trainer.num_envs), got {num_envs}")
        self.env_id, self.num_envs, self.device = env_id, num_envs, torch.device(device)
        self.mode, self.num_threads, self.resume_mode = mode, num_threads, resume
        self.success_key, self.make_kwargs = success_key, make_kwargs
        if make_kwargs.get("from_pixels"):
            check_pixels_render(env_id, tuple(sorted(make_kwargs.items())))
        with warnings.catch_warnings():  # envpool's own float64 bounds on float32 Boxes
            warnings.simplefilter("ignore", UserWarning)
            spec = envpool.make_spec(env_id, **make_kwargs)  # TypeError on an unknown kwarg
        self.observation_space = flat_obs_space(spec.observation_space, env_id)
        self.action_space = flat_action_space(spec.action_space, env_id)
        self.max_episode_steps = getattr(spec.config, "max_episode_steps", None)
        self.control_dt = mujoco_control_dt(spec.config)
        self._pools: list[Any] = []
        self._seed: int | None = None
        self._group_size = 1
        self._log: list[np.ndarray | int] = []
        self._steps = 0
        self._obs: Obs | None = None

    # ------------------------------------------------------------------ BatchedEnv API

    def reset(self, seed: int | None = None, group_size: int = 1) -> Obs:
        """Reset every env; the first call (or a new ``group_size``) creates the seeded pool."""
        num_groups(self.num_envs, group_size)
        if not self._pools or group_size != self._group_size:
            self._create(seed if seed is not None else (self._seed or 0), group_size)
        self._record(RESET)
        self._obs = self._reset_all()
        return self._obs

    def step(self, action: torch.Tensor) -> StepResult:
        """Step every env with ``action`` ``[N, *act]``; done envs are reset before returning."""
        if not self._pools:
            self.reset()
        actions = self._to_numpy(action)
        self._record(actions)
        for pool, rows in zip(self._pools, self._halves()):
            pool.send(actions[rows])
        return self._receive()

    def act_and_step(self, policy: Policy, obs: Obs) -> tuple[torch.Tensor, torch.Tensor, StepResult]:
        """``policy(obs) → (action, log_prob)`` then ``step``; double-buffered in ``async`` mode.

        In ``async`` mode the policy acts on each half separately: half 0 is sent to its pool
        before the policy computes half 1's actions, so simulation and inference overlap.
        """
        if self.mode == "sync" or not self._pools:
            action, log_prob = policy(obs)
            return action, log_prob, self.step(action)
        parts = []
        for pool, rows in zip(self._pools, self._halves()):
            action, log_prob = policy(obs[rows])
            sent = self._to_numpy(action, rows.stop - rows.start)
            pool.send(sent)
            parts.append((action, log_prob, sent))
        action = torch.cat([a for a, _, _ in parts])
        self._record(np.concatenate([sent for _, _, sent in parts]))
        return action, torch.cat([lp for _, lp, _ in parts]), self._receive()

    def state_dict(self) -> dict[str, Any]:
        """Seeds, group size, env steps and (``replay``) the action log and last observation."""
        state: dict[str, Any] = {"seed": self._seed, "group_size": self._group_size, "steps": self._steps}
        if self.resume_mode == "replay":
            steps = [e for e in self._log if not isinstance(e, int)]
            state["resets"] = torch.tensor([i for i, e in enumerate(self._log) if isinstance(e, int)])
            state["actions"] = torch.from_numpy(np.stack(steps)) if steps else torch.zeros(0)
            state["obs"] = obs_state(self._obs)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Rebuild the pool and replay the log (``replay``) or start fresh episodes (``restart``)."""
        self.close()
        self._pools, self._log, self._obs, self.last_obs = [], [], None, None
        if state["seed"] is None:
            return
        if self.resume_mode == "restart" or "actions" not in state:
            self._create(int(state["seed"]) + int(state["steps"]), int(state["group_size"]))
            self.last_obs = self._obs = self._reset_all()
            return
        self._create(int(state["seed"]), int(state["group_size"]))
        self._replay(state)

    def close(self) -> None:
        """Drop the pools (envpool frees its threads and simulators when a pool is collected)."""
        for pool in self._pools:
            pool.close()
        self._pools = []

    # ------------------------------------------------------------------ internals

    def _create(self, seed: int, group_size: int) -> None:
        import envpool

        self.close()
        self._seed, self._group_size, self._log, self._steps = seed, group_size, [], 0
        seeds = [seed + i // group_size for i in range(self.num_envs)]
        for rows in self._halves():
            part = seeds[rows]
            self._pools.append(
                envpool.make(
                    self.env_id,
                    env_type="gymnasium",
                    num_envs=len(part),
                    batch_size=len(part),
                    seed=part,
                    num_threads=self.num_threads,
                    **self.make_kwargs,
                )
            )

    def _record(self, event: np.ndarray | int) -> None:
        """Count steps; append to the action log (``replay`` only); a full reset is :data:`RESET`."""
        self._steps += not isinstance(event, int)
        if self.resume_mode == "replay":
            self._log.append(event)

    def _halves(self) -> list[slice]:
        if self.mode == "sync":
            return [slice(0, self.num_envs)]
        half = self.num_envs // 2
        return [slice(0, half), slice(half, self.num_envs)]

    def _reset_all(self) -> Obs:
        parts = [pool.reset()[0] for pool in self._pools]
        return obs_to_torch(_concat(parts), self.num_envs, self.device)

    def _receive(self) -> StepResult:
        """Receive every pool's step, reset the done envs, convert to torch."""
        outs = [_recv_and_reset(pool) for pool in self._pools]
        final, nxt = _concat([o[0] for o in outs]), _concat([o[1] for o in outs])
        reward, term, trunc = (_concat([o[i] for o in outs]) for i in (2, 3, 4))
        flags = [success_of(o[5], self.success_key, self.device) for o in outs]
        info = {"success": torch.cat([f["success"] for f in flags])} if flags[0] else {}
        self._obs = obs_to_torch(nxt, self.num_envs, self.device)
        any_done = any(o[0] is not o[1] for o in outs)  # else final and next are the same arrays
        return StepResult(
            obs=self._obs,
            reward=_host_tensor(reward.astype(np.float32, copy=False), self.device),
            terminated=_host_tensor(term, self.device),
            truncated=_host_tensor(trunc, self.device),
            final_obs=obs_to_torch(final, self.num_envs, self.device) if any_done else self._obs,
            info=info,
        )

    def _replay(self, state: dict[str, Any]) -> None:
        resets = set(state["resets"].tolist())
        actions = state["actions"].numpy()
        step = 0
        for index in range(len(resets) + len(actions)):
            if index in resets:
                self._record(RESET)
                self._obs = self._reset_all()
            else:
                for pool, rows in zip(self._pools, self._halves()):
                    pool.send(actions[step][rows])
                self._record(actions[step])
                self._receive()
                step += 1
        saved = obs_from_state(state.get("obs"), self.device)
        if saved is not None and not _equal(saved, self._obs):
            raise RuntimeError(
                f"envpool {self.env_id}: replaying the action log did not reproduce "
                "the saved observation; resume with env.cfg.resume=restart"
            )

    def _to_numpy(self, action: torch.Tensor, rows: int | None = None) -> np.ndarray:
        array = action.detach().cpu().numpy()
        shape = (rows or self.num_envs, *(self.action_space.shape or ()))
        dtype = np.int32 if not self.action_space.shape else np.float32
        return np.ascontiguousarray(array.reshape(shape), dtype=dtype)


PROBE = """
import ast, sys, envpool
pool = envpool.make(sys.argv[1], env_type="gymnasium", num_envs=1, **ast.literal_eval(sys.argv[2]))
pool.reset()
"""
"""Make one env with the user's arguments and reset it (envpool renders its first frame there)."""


@functools.cache
def check_pixels_render(env_id: str, make_kwargs: tuple[tuple[str, Any], ...]) -> None:
    """ValueError naming ``env.cfg.from_pixels`` when envpool cannot render ``env_id`` here.

    envpool's renderer ends the process (MuJoCo's fatal error) where it gets no OpenGL context, so
    the check runs it in a child process; once per process and arguments.
    """
    done = subprocess.run(
        [sys.executable, "-c", PROBE, env_id, repr(dict(make_kwargs))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        reason = (lines[-1] if lines else f"exit code {done.returncode}").removeprefix("ERROR: ")
        raise ValueError(
            f"env.cfg.from_pixels: envpool cannot render {env_id} on this machine ({reason}); "
            "accepted: false here (envpool's MuJoCo renderer needs an OpenGL context of its "
            "own: a GPU driver); cameras that render headless: PixelCartPole, PushCube's camera"
        )


def _recv_and_reset(pool: Any) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray, dict]:
    """``(final_obs, next_obs, reward, terminated, truncated, info)`` of one pool's step."""
    obs, reward, term, trunc, info = pool.recv()
    done = np.flatnonzero(term | trunc)
    nxt = obs
    if done.size:
        fresh = pool.reset(done)[0]
        nxt = _copy(obs)
        _assign(nxt, done, fresh)
    return obs, nxt, reward, term, trunc, info


def _host_tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """``from_numpy`` (shares memory), moved only off the CPU."""
    tensor = torch.from_numpy(array)
    return tensor if device.type == "cpu" else tensor.to(device)


def _concat(parts: list[Any]) -> Any:
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], dict):
        return {key: _concat([p[key] for p in parts]) for key in parts[0]}
    return np.concatenate(parts)


def _copy(obs: Any) -> Any:
    return {k: _copy(v) for k, v in obs.items()} if isinstance(obs, dict) else np.array(obs)


def _assign(target: Any, rows: np.ndarray, source: Any) -> None:
    if isinstance(target, dict):
        for key in target:
            _assign(target[key], rows, source[key])
    else:
        target[rows] = source


def _equal(a: Obs, b: Obs | None) -> bool:
    if b is None:
        return False
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a.cpu(), b.cpu())
    return all(torch.equal(a[k].cpu(), b[k].cpu()) for k in a.keys())


def _check_choice(name: str, value: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise ValueError(f"{name}: got {value!r}; accepted: {', '.join(accepted)}")


MUJOCO_DEFAULT_TIMESTEP = 0.002
"""MuJoCo's ``<option timestep>`` where a model file does not set it, in seconds."""


def mujoco_control_dt(config: Any) -> float | None:
    """Seconds per env step of an envpool gym-style MuJoCo task: ``frame_skip`` × the model's timestep.

    ``config``: ``envpool.make_spec(...).config``; the model is ``<base_path>/mujoco/assets_gym/<xml_file>``.
    ``None`` for tasks without ``frame_skip``/``xml_file`` (not MuJoCo) or whose model file is absent.
    """
    frame_skip, xml_file = getattr(config, "frame_skip", None), getattr(config, "xml_file", None)
    base = getattr(config, "base_path", None)
    if not isinstance(frame_skip, int) or frame_skip < 1 or not xml_file or not base:
        return None
    model = Path(base) / "mujoco" / "assets_gym" / xml_file
    if not model.is_file():
        return None
    option = ElementTree.parse(model).getroot().find("option")
    timestep = option.get("timestep") if option is not None else None
    return frame_skip * (float(timestep) if timestep else MUJOCO_DEFAULT_TIMESTEP)
