"""``OnPolicyRunner``: rsl_rl 5.x's runner API over an rlpipe :class:`~rlpipe.trainer.Trainer` run.

Isaac Lab's and mjlab's train scripts switch with one import::

    from rlpipe.rsl_rl import OnPolicyRunner     # was: from rsl_rl.runners import OnPolicyRunner
    runner = OnPolicyRunner(env, agent_cfg.to_dict(), log_dir=log_dir, device=agent_cfg.device)
    runner.add_git_repo_to_log(__file__)
    runner.learn(num_learning_iterations=agent_cfg.max_iterations, init_at_random_ep_len=True)

``log_dir`` *is* the rlpipe run directory (``trainer.data_dir`` its parent, ``trainer.exp_name``
its name): the rollout stores, ``checkpoints/``, ``params.yaml``, ``curve.csv`` and ``metrics.json``
go there beside what the script writes (``params/``), and ``rlpipe replay <log_dir>`` re-runs its
updates. Every checkpoint rlpipe writes is also saved as rsl_rl's ``model_<iteration>.pt`` there,
so play scripts find it. With ``log_dir=None`` (play scripts) only the policy is built: ``load``,
``get_inference_policy`` and the exports work, ``learn`` is refused.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.artifacts.atomic import atomic_write, atomic_write_text
from rlpipe.build import build_algorithm, learner_state
from rlpipe.errors import ConfigError
from rlpipe.rsl_rl.env import RslRlRunnerEnv, randomize_episode_lengths
from rlpipe.rsl_rl.inference import InferencePolicy, export_policy
from rlpipe.rsl_rl.train_cfg import params_from_train_cfg
from rlpipe.trainer import Trainer
from rlpipe.trainer.events import EventContext
from rlpipe.trainer.parts import run_config

__all__ = ["OnPolicyRunner"]

GIT_TIMEOUT_S = 30
"""Longest wait for one ``git`` call recording a repository's state."""


class OnPolicyRunner:
    """rsl_rl's ``OnPolicyRunner(env, train_cfg, log_dir, device)``, training with rlpipe.

    ``env`` is an rsl_rl ``VecEnv``; ``train_cfg`` rsl_rl 5.x's runner dict (mapped by
    :func:`~rlpipe.rsl_rl.params_from_train_cfg`; a key it cannot map is a one-line
    ``ConfigError``); ``overrides`` ``{"key.path": value}`` set any rlpipe param on top
    (``{"tracking.backend": "none"}``, ``{"store.codec": "blosc-lz4"}``).
    """

    def __init__(
        self,
        env: Any,
        train_cfg: dict[str, Any],
        log_dir: str | Path | None = None,
        device: str = "cpu",
        *,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.env, self.cfg, self.device = env, train_cfg, device
        self.log_dir = None if log_dir is None else str(log_dir)
        self.is_distributed, self.gpu_world_size, self.gpu_global_rank = False, 1, 0
        self.current_learning_iteration = 0
        self.git_status_repos: list[str] = []
        groups = [str(k) for k in env.get_observations().keys()]
        step_dt = getattr(getattr(env, "unwrapped", env), "step_dt", None)
        self.params = params_from_train_cfg(
            train_cfg, num_envs=int(env.num_envs), obs_groups=groups, step_dt=step_dt
        )
        self.params["trainer"] |= {"device": str(device), "enable_eval": False}
        self.params["env"] = {"id": f"{type(env).__module__}:{type(env).__qualname__}"}
        self.overrides = dict(overrides or {})
        self.trainer: Trainer | None = None
        self._loaded = self._learned = False
        if self.log_dir is None:
            self._policy_only()
        else:
            root = Path(self.log_dir).absolute()
            self.params["trainer"] |= {"data_dir": str(root.parent), "exp_name": root.name}
            self._start_trainer(resume=False)

    # ------------------------------------------------------------------------------- building

    def _policy_only(self) -> None:
        """The policy and algorithm alone (no run directory): what a play script loads into."""
        cfg = run_config(self.params, self.overrides)
        wrapped = RslRlRunnerEnv(self.env, self.device)
        self.spaces = (wrapped.observation_space, wrapped.action_space)
        self.alg: BaseAlgorithm = build_algorithm(
            cfg,
            wrapped.observation_space,
            wrapped.action_space,
            torch.device(self.device),
            wrapped.max_episode_steps,
        )

    def _start_trainer(self, resume: bool) -> None:
        """A ``Trainer`` on ``log_dir`` (``resume``: continuing the run a previous ``learn`` wrote)."""
        self.wrapped = RslRlRunnerEnv(self.env, self.device)
        self.trainer = Trainer.from_params(self.params, self.overrides, env=self.wrapped, resume=resume)
        self.trainer.add_event("after_checkpoint", self._save_model, name="rsl_rl model_<it>.pt")
        self.alg = self.trainer.algo
        env = self.trainer.env
        self.spaces = (env.observation_space, env.action_space)

    def _save_model(self, ctx: EventContext) -> None:
        """Each rlpipe checkpoint also as rsl_rl's ``model_<iteration>.pt`` in ``log_dir``."""
        self.current_learning_iteration = ctx.iteration
        self.save(str(Path(str(self.log_dir)) / f"model_{ctx.iteration}.pt"))

    # ------------------------------------------------------------------------------- training

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """Train ``num_learning_iterations`` more iterations, every rollout stored in ``log_dir``.

        ``init_at_random_ep_len`` draws each env's episode-length counter uniformly below
        ``max_episode_length`` first (as rsl_rl does), so time-outs do not all fall together.
        """
        if self.trainer is None:
            raise ConfigError("log_dir: None; rlpipe's runner stores every run: give learn() a log_dir")
        resuming, done = self._learned, self.trainer.iteration
        if resuming:  # a second learn(): continue the stored run from its last checkpoint
            self._start_trainer(resume=True)
            assert self.trainer is not None
        trainer = self.trainer
        if init_at_random_ep_len:  # now, and again after the first rollout's reset
            randomize_episode_lengths(self.env)
            self.wrapped.random_lengths_after_reset = True
        if self._loaded and not resuming:  # replay must start from the loaded weights, not the seed's
            trainer.add_event("run_start", lambda ctx: trainer.save_checkpoint(), name="checkpoint 0")
        self._record_git_state()
        per_iteration = trainer.cfg.trainer.num_envs * trainer.cfg.trainer.buffer_size
        self._learned = True
        trainer.train(total_steps=(done + num_learning_iterations) * per_iteration)
        self.current_learning_iteration = trainer.iteration

    # ---------------------------------------------------------------------------- checkpoints

    def save(self, path: str, infos: dict[str, Any] | None = None) -> None:
        """Write policy, optimizer and normalizers with ``iter`` and ``infos`` to ``path`` (atomically)."""
        state = learner_state(self.alg) | {"iter": self.current_learning_iteration, "infos": infos}
        buffer = io.BytesIO()
        torch.save(state, buffer)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(Path(path), lambda f: f.write(buffer.getbuffer()))

    def load(
        self,
        path: str,
        load_cfg: dict[str, bool] | None = None,
        strict: bool = True,
        map_location: str | None = None,
    ) -> Any:
        """Load a file :meth:`save` wrote (or an rlpipe checkpoint); returns its ``infos``.

        The file is read with ``weights_only=True``: ``infos`` holds plain values and tensors.

        ``load_cfg``: ``{"optimizer": False}`` keeps the optimizer and schedules, ``{"iteration":
        False}`` the iteration count; the policy (actor and critic) is always loaded.
        """
        state = torch.load(path, map_location=map_location or "cpu", weights_only=True)  # tensors, no code
        if not isinstance(state, dict) or "policy" not in state or "algo" not in state:
            keys = ", ".join(sorted(state)[:4]) if isinstance(state, dict) else type(state).__name__
            raise ConfigError(
                f"{path}: not a checkpoint rlpipe wrote (holds {keys}); rlpipe's runner loads the "
                "model_<it>.pt files it saved or an rlpipe run's checkpoints/ckpt-*.pt"
            )
        load_cfg = load_cfg or {}
        self.alg.policy.load_state_dict(state["policy"], strict=strict)
        if load_cfg.get("optimizer", True):
            self.alg.load_state_dict(state["algo"])
        if load_cfg.get("iteration", True):
            self.current_learning_iteration = int(state.get("iter", state.get("iteration", 0)))
        self._loaded = True
        return state.get("infos")

    # ---------------------------------------------------------------------------------- play

    def get_inference_policy(self, device: str | None = None) -> InferencePolicy:
        """``policy(obs)`` → deterministic actions ``[N, num_actions]`` on ``device``."""
        where = torch.device(device or self.device)
        self.alg.policy.to(where).eval()
        return InferencePolicy(self.alg.policy, tuple(getattr(self.spaces[0], "spaces", ())), where)

    def export_policy_to_jit(self, path: str, filename: str = "policy.pt") -> None:
        """The deterministic actor as TorchScript at ``path/filename`` (normalizer inside)."""
        export_policy(
            self.alg.policy,
            self.spaces,
            path,
            filename,
            "torchscript",
            iteration=self.current_learning_iteration,
        )

    def export_policy_to_onnx(self, path: str, filename: str = "policy.onnx", verbose: bool = False) -> None:
        """The deterministic actor as ONNX at ``path/filename`` (needs ``onnx`` and ``onnxscript``)."""
        del verbose  # rlpipe's exporter is quiet
        export_policy(
            self.alg.policy, self.spaces, path, filename, "onnx", iteration=self.current_learning_iteration
        )

    # ---------------------------------------------------------------------------------- git

    def add_git_repo_to_log(self, repo_file_path: str) -> None:
        """At ``learn``, record the git commit, status and diff of ``repo_file_path``'s repository."""
        self.git_status_repos.append(repo_file_path)

    def _record_git_state(self) -> None:
        """``<log_dir>/git/<repo>.diff`` per registered repository (skipped where git cannot tell)."""
        for file_path in self.git_status_repos:
            folder = str(Path(file_path).resolve().parent)
            top = _git(folder, "rev-parse", "--show-toplevel")
            if top is None:
                continue
            text = "\n".join(
                f"--- {what}\n{_git(folder, *args) or ''}"
                for what, args in (
                    ("commit", ("rev-parse", "HEAD")),
                    ("status", ("status", "--short")),
                    ("diff", ("diff", "HEAD")),
                )
            )
            atomic_write_text(Path(str(self.log_dir)) / "git" / f"{Path(top.strip()).name}.diff", text)


def _git(folder: str, *args: str) -> str | None:
    """``git -C folder args…``'s output; ``None`` where git is missing, fails or is not a repository."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
